"""Corpus BLEU as the generation benchmarks report it (sacreBLEU underneath; one reference per segment).

* `xglue_bleu`: XGLUE QG / NTG, exactly the official scorer
  (`evaluation/xglue_evaluate.py`, microsoft/XGLUE):
  `sacrebleu.corpus_bleu(preds, [refs], lowercase=True).score / 100`, 0-1.
* `sacrebleu_detok`: WMT's detokenised sacreBLEU (13a tokenizer, mixed case,
  exp smoothing), 0-100, with its signature string.
* `tokenized_bleu`: case-insensitive BLEU on tokens in the style of Moses
  `multi-bleu.perl -lc` (what VECO reports beside sacreBLEU), 0-100.

Each takes the predictions and the references as sequences of strings, one
per segment, in the same order; different lengths raise a ValueError naming
both counts.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import sacrebleu

NGRAM_ORDER = 4


class SacreBleu(NamedTuple):
  """A sacreBLEU score (0-100) and its signature, e.g. `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`."""

  score: float
  signature: str


def _segments(preds: Sequence[str], refs: Sequence[str]) -> tuple[list[str], list[str]]:
  preds, refs = list(preds), list(refs)
  if len(preds) != len(refs):
    raise ValueError(f"BLEU: {len(preds)} predictions for {len(refs)} references (one prediction per reference)")
  return preds, refs


def _my_log(x: float) -> float:
  return -9999999999 if x == 0 else math.log(x)  # sacreBLEU's (and multi-bleu.perl's) log(0)


def _sacrebleu_14_without_matches(totals: Sequence[int], sys_len: int, ref_len: int) -> float:
  """sacreBLEU 1.4's corpus BLEU (exp smoothing) of a corpus without a single matching n-gram, as 1.4 computes it."""
  precisions = [0.0] * NGRAM_ORDER
  smooth_mteval = 1.
  for n in range(1, NGRAM_ORDER + 1):
    if totals[n - 1] == 0:
      break
    smooth_mteval *= 2  # every order has 0 matches: each is smoothed
    precisions[n - 1] = 100. / (smooth_mteval * totals[n - 1])
  brevity_penalty = 1.0
  if sys_len < ref_len:
    brevity_penalty = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
  return brevity_penalty * math.exp(sum(map(_my_log, precisions[:NGRAM_ORDER])) / NGRAM_ORDER)


def xglue_bleu(preds: Sequence[str], refs: Sequence[str]) -> float:
  """XGLUE's QG / NTG score on 0-1: `sacrebleu.corpus_bleu(preds, [refs], lowercase=True).score / 100`.

  The official scorer (2020) ran on sacreBLEU 1.4.x; sacreBLEU >= 2 computes
  the same numbers with these arguments (13a tokenizer, exp smoothing, no
  effective order) with one exception, handled here. Checked against 1.4.14
  (git tag v1.4.14 of mjpost/sacrebleu) on 800 random corpora with mixed
  case, punctuation, HTML entities, non-Latin scripts, digits, empty and
  whitespace-only segments: the n-gram counts, totals and lengths agree
  everywhere and the scores bit for bit, except for corpora in which not one
  n-gram matches. sacreBLEU 2.0 returns 0.0 there (its #141); 1.4 smoothed
  every order (precision_n = 1 / (2^n * total_n)), e.g. 0.0799 for
  "a b c d" against "e f g h". That 1.4 value is returned, so the score is
  the official one even for an untrained model. (1.4's exp smoothing was the
  same in every 1.4.x release; its 13a tokenizer equals 2.x's.)
  """
  preds, refs = _segments(preds, refs)
  result = sacrebleu.corpus_bleu(preds, [refs], lowercase=True)
  score = result.score
  if not any(result.counts):
    score = _sacrebleu_14_without_matches(result.totals, result.sys_len, result.ref_len)
  return score / 100


def sacrebleu_detok(preds: Sequence[str], refs: Sequence[str]) -> SacreBleu:
  """WMT's sacreBLEU on detokenised text: 13a tokenizer, mixed case, exp smoothing; (score 0-100, signature)."""
  preds, refs = _segments(preds, refs)
  metric = sacrebleu.metrics.BLEU(lowercase=False, tokenize="13a", smooth_method="exp")
  return SacreBleu(metric.corpus_score(preds, [refs]).score, str(metric.get_signature()))


def tokenized_bleu(preds: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
  """Case-insensitive BLEU on tokens, as Moses `multi-bleu.perl -lc` computes it (0-100).

  Both sides are lowercased and tokenised by sacreBLEU's `tokenize`: `13a`
  (default: mteval-v13a's tokenisation of detokenised text, what the model
  outputs here) or `none` for text that is already tokenised (e.g. by the
  Moses tokenizer, the papers' setup: then the result is multi-bleu.perl's).
  Then n-grams are whitespace-separated tokens, the corpus BLEU-4 has no
  smoothing (an order without a match gives 0, as multi-bleu.perl) and the
  usual brevity penalty. With `13a` the number is not the papers' "tokenized
  BLEU" on Moses-tokenised text (Moses splits e.g. apostrophes and hyphens
  differently, and WMT14 En-De papers also split compounds at hyphens):
  compare it with numbers computed the same way.
  """
  preds, refs = _segments(preds, refs)
  metric = sacrebleu.metrics.BLEU(lowercase=True, tokenize=tokenize, smooth_method="none", force=True)
  return metric.corpus_score(preds, [refs]).score
