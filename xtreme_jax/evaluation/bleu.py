"""Corpus BLEU as the generation benchmarks report it.

* `xglue_bleu`: XGLUE QG / NTG, exactly the official scorer
  (`evaluation/xglue_evaluate.py`, microsoft/XGLUE):
  `sacrebleu.corpus_bleu(preds, [refs], lowercase=True).score / 100`, 0-1.
* `sacrebleu_detok`: WMT's detokenised sacreBLEU (13a tokenizer, mixed case,
  exp smoothing), 0-100, with its signature string.
* `tokenized_bleu`: Moses `multi-bleu.perl -lc` on sacreBLEU-tokenised text
  (what VECO reports beside sacreBLEU), 0-100; it alone takes several
  references.

Each takes the predictions and the references as sequences of strings, one
per segment, in the same order; different lengths raise a ValueError naming
both counts.
"""

from __future__ import annotations

import collections
import functools
import math
import operator
import re
import string
from typing import NamedTuple, Sequence

import sacrebleu

NGRAM_ORDER = 4
_PERL_WORD = re.compile(r"[^ \t\n\r\f\v]+")  # Perl's split on bytes: ASCII whitespace separates
_PERL_LC = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # Perl's lc on bytes: A-Z only
_NO_REFERENCE = (9999, 9999)  # multi-bleu.perl's initial (closest_diff, closest_length)


class SacreBleu(NamedTuple):
  """A sacreBLEU score (0-100) and its signature, e.g. `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`."""

  score: float
  signature: str


def _segments(preds: Sequence[str], *refsets: Sequence[str]) -> list[list[str]]:
  """[preds, *refsets] as lists, each as long as `preds`."""
  streams = [list(preds)] + [list(refs) for refs in refsets]
  for refs in streams[1:]:
    if len(refs) != len(streams[0]):
      raise ValueError(f"BLEU: {len(streams[0])} predictions for {len(refs)} references (one prediction per reference)")
  return streams


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


def _perl_words(line: str) -> list[str]:
  """`split(' ', lc($line))` as multi-bleu.perl runs it on UTF-8 bytes (no `use utf8`, no locale): only A-Z are
  lowered and only ASCII whitespace separates (not U+00A0, U+3000, ..., which `str.lower` / `str.split` handle)."""
  return _PERL_WORD.findall(line.translate(_PERL_LC))


def _ngram_counts(words: Sequence[str]) -> collections.Counter:
  """The 1- to NGRAM_ORDER-grams of `words` (tuples) with their counts."""
  return collections.Counter(tuple(words[i:i + n]) for n in range(1, NGRAM_ORDER + 1)
                             for i in range(len(words) - n + 1))


def _closest_length(hyp_len: int, ref_lens: Sequence[int]) -> int:
  """The reference length closest to `hyp_len`, on a tie the shorter, as multi-bleu.perl picks it."""
  return min([_NO_REFERENCE] + [(abs(hyp_len - n), n) for n in ref_lens])[1]


def _multi_bleu_counts(hyps: Sequence[list[str]], refsets: Sequence[Sequence[list[str]]]
                       ) -> tuple[list[int], list[int], int, int]:
  """multi-bleu.perl's (correct, total) per order and (hypothesis, closest reference) lengths of a corpus of words;
  each n-gram's count is clipped by its largest count in one reference of its segment."""
  correct, total = [0] * NGRAM_ORDER, [0] * NGRAM_ORDER
  hyp_len = ref_len = 0
  for hyp, refs in zip(hyps, zip(*refsets)):
    hyp_len += len(hyp)
    ref_len += _closest_length(len(hyp), [len(ref) for ref in refs])
    clip = functools.reduce(operator.or_, map(_ngram_counts, refs))
    for ngram, count in _ngram_counts(hyp).items():
      total[len(ngram) - 1] += count
      correct[len(ngram) - 1] += min(count, clip[ngram])
  return correct, total, hyp_len, ref_len


def _multi_bleu(correct: Sequence[int], total: Sequence[int], hyp_len: int, ref_len: int) -> float:
  """multi-bleu.perl's BLEU (0-100) with its float operations in its order (Perl's doubles, the same libm): the same
  double, so `f"{score:.2f}"` is what it prints. No smoothing: an order without a match gives 0."""
  if not hyp_len or not ref_len:
    return 0.0  # no reference word: it prints "BLEU = 0"; no hypothesis word: it dies dividing by 0
  logs = [_my_log(c / t if t else 0) for c, t in zip(correct, total)]
  brevity_penalty = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1
  return 100 * (brevity_penalty * math.exp(functools.reduce(operator.add, logs) / NGRAM_ORDER))


def tokenized_bleu(preds: Sequence[str], refs: Sequence[str], *more_refs: Sequence[str],
                   tokenize: str = "13a") -> float:
  """Moses `multi-bleu.perl -lc refs [more_refs...] < preds` (0-100) on sacreBLEU's `tokenize` of each segment.

  `tokenize`: `13a` (default: mteval-v13a's tokenisation of detokenised
  text, what the model outputs here) or `none` for text that is already
  tokenised (e.g. by the Moses tokenizer, the papers' setup). The rest is the
  script's, which reads UTF-8 bytes: only A-Z are lowercased and only ASCII
  whitespace separates words (sacreBLEU's tokenizers other than `none` split
  at Unicode whitespace themselves); n-gram counts are clipped by the
  segment's reference with the most; the brevity penalty takes each segment's
  closest reference length, the shorter on a tie; no smoothing (an order
  without a match gives 0); `f"{score:.2f}"` is the score it prints (the same
  double). Where it scores nothing (no reference word; no hypothesis word:
  it dies) this is 0. A segment is one line of its input: a newline inside
  one is a space. With `13a` the number is not the papers' "tokenized BLEU"
  on Moses-tokenised text (Moses splits e.g. apostrophes and hyphens
  differently, and WMT14 En-De papers also split compounds at hyphens):
  compare it with numbers computed the same way.
  """
  if any(isinstance(stream, str) for stream in more_refs):
    raise TypeError("tokenized_bleu: more references are sequences of segments; pass `tokenize` by keyword")
  tokenizer = sacrebleu.metrics.BLEU(tokenize=tokenize).tokenizer
  hyps, *refsets = [[_perl_words(tokenizer(line)) for line in stream]
                    for stream in _segments(preds, refs, *more_refs)]
  return _multi_bleu(*_multi_bleu_counts(hyps, refsets))
