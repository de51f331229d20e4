"""BLEU of XGLUE's scorer, WMT's sacreBLEU and multi-bleu style tokenised BLEU against values computed by hand
from n-gram precisions p1..p4 and the brevity penalty: BLEU = BP * (p1 p2 p3 p4) ** (1/4), and against what Moses'
multi-bleu.perl printed."""

import math
import os
import pathlib
import random
import re
import shutil
import subprocess

import pytest
import sacrebleu
from pytest import approx

from xtreme_jax.evaluation import bleu

TIER = "unit"  # conftest.py: this file's tier


def test_xglue_bleu_is_lowercased_corpus_bleu_on_a_0_1_scale():
  # "the cat sat on the mat" against "The cat is on the mat" (case ignored): p1 5/6 (the x2, cat, on, mat),
  # p2 3/5 (the cat, on the, the mat), p3 1/4 (on the mat), p4 0/3 -> exp smoothing 1 / (2 * 3); BP 1.
  preds, refs = ["the cat sat on the mat"], ["The cat is on the mat"]
  expected = (5 / 6 * 3 / 5 * 1 / 4 * 1 / 6) ** 0.25
  assert bleu.xglue_bleu(preds, refs) == approx(expected, rel=1e-12)
  assert bleu.xglue_bleu(preds, refs) == sacrebleu.corpus_bleu(preds, [refs], lowercase=True).score / 100
  # Two segments: hypotheses 6 + 2 = 8 words, references 6 + 4 = 10: BP = exp(1 - 10 / 8); only p2 < 1
  # ("a dog" is not a bigram of "a big dog barked"): 5 of 6.
  preds, refs = ["The cat sat on the mat", "a dog"], ["the cat sat on the mat", "A big dog barked"]
  assert bleu.xglue_bleu(preds, refs) == approx(math.exp(1 - 10 / 8) * (5 / 6) ** 0.25, rel=1e-12)
  # An empty reference is a segment too (sacreBLEU 2.0-2.1 refused it; 1.4 and >= 2.2 score it): p1 4/6, p2 3/4,
  # p3 2/2, p4 1/1; 6 hypothesis words against 0 + 4: BP 1.
  assert bleu.xglue_bleu(["a b", "the cat sat on"], ["", "The cat sat on"]) == approx((4 / 6 * 3 / 4) ** 0.25)


def test_xglue_bleu_without_any_match_is_sacrebleu_1_4s_smoothed_value():
  # The official scorer ran on sacreBLEU 1.4, which smoothed every order: p_n = 1 / (2^n * total_n), totals
  # 4 3 2 1 -> (1/8 * 1/12 * 1/16 * 1/16) ** (1/4) = 0.0799; sacreBLEU >= 2 returns 0 here.
  assert bleu.xglue_bleu(["a b c d"], ["e f g h"]) == approx((1 / 8 / 12 / 16 / 16) ** 0.25, rel=1e-12)
  assert sacrebleu.corpus_bleu(["a b c d"], [["e f g h"]], lowercase=True).score == 0.0
  # Shorter than the reference and no match: BP exp(1 - 3 / 2), totals 2 1 0 0 -> p3 = p4 = 0 -> 0.
  assert bleu.xglue_bleu(["a b"], ["c d e"]) == 0.0
  assert bleu.xglue_bleu([""], ["c d e"]) == 0.0


def test_sacrebleu_detok_is_mixed_case_13a_with_its_signature():
  # 13a splits the final period: 7 tokens each; "The" is not "the": p1 6/7, p2 5/6, p3 4/5, p4 3/4.
  score, signature = bleu.sacrebleu_detok(["The cat sat on the mat."], ["the cat sat on the mat."])
  assert score == approx(100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25, rel=1e-12)
  assert signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
  assert signature.endswith(sacrebleu.__version__)


def test_tokenized_bleu_is_case_insensitive_unsmoothed_on_tokens():
  # 13a on both sides, lowercased: the hypothesis becomes the tokenised reference.
  assert bleu.tokenized_bleu(["The cat sat on the mat."], ["the cat sat on the mat ."]) == approx(100.0)
  # On text that is already tokenised ("none") "mat." is one token: hypothesis 6, reference 7 tokens;
  # p1 5/6, p2 4/5, p3 3/4, p4 2/3, BP exp(1 - 7/6).
  assert bleu.tokenized_bleu(["The cat sat on the mat."], ["the cat sat on the mat ."], tokenize="none") == approx(
      100 * math.exp(1 - 7 / 6) * (5 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** 0.25, rel=1e-12)
  # No 4-gram match: 0, as multi-bleu.perl (no smoothing), where the exp-smoothed scores are not.
  preds, refs = ["the cat sat on a mat"], ["the cat is on the mat"]
  assert bleu.tokenized_bleu(preds, refs) == 0.0 and bleu.xglue_bleu(preds, refs) > 0


# "BLEU = %.2f" as Moses' scripts/generic/multi-bleu.perl -lc printed it (mosesdecoder 34452895, the script as of
# 2018; perl 5.36) with these corpora in UTF-8 files, one segment a line; `_printed` formats a score the same way.
def _printed(preds, *refs) -> str:
  return f"{bleu.tokenized_bleu(preds, *refs, tokenize='none'):.2f}"


def test_tokenized_bleu_lowercases_ascii_letters_only_as_multi_bleu_perl():
  # The script reads bytes: `lc` lowers A-Z only, so "Über" stays "Über" (not "über"): p1 6/7, p2 5/6, p3 4/5, p4 3/4.
  preds, refs = ["Über den Fluss fährt heute ein Boot"], ["über den Fluss fährt heute ein Boot"]
  assert _printed(preds, refs) == "80.91"
  assert bleu.tokenized_bleu(preds, refs) == approx(100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25, rel=1e-12)  # 13a
  # Accented Latin and Cyrillic capitals are not lowered either; "PARIS" is.
  assert _printed(["L'ÉTÉ À PARIS est chaud .", "МОСКВА – столица России ."],
                  ["l'été à paris est chaud .", "москва – столица россии ."]) == "35.66"


def test_tokenized_bleu_splits_words_at_ascii_whitespace_only_as_multi_bleu_perl():
  # Perl's split on bytes: U+202F and U+00A0 (French typography), U+3000, U+0085 and U+001C join words.
  assert _printed(["il a dit\u202f: « oui » et\u00a0puis il est parti ."],
                  ["il a dit : « oui » et puis il est parti ."]) == "31.53"
  assert _printed(["東京\u3000は 大きな 都市 です 。"], ["東京 は 大きな 都市 です 。"]) == "54.75"
  assert _printed(["one\x1ctwo three\x85four five six seven eight nine"],
                  ["one two three four five six seven eight nine"]) == "46.20"
  # Space, tab, vertical tab, form feed and carriage return separate; leading and trailing ones make no word.
  assert _printed(["  the\tcat\x0bsat\fon the\rmat  "], ["the cat sat on the mat"]) == "100.00"


def test_tokenized_bleu_with_several_references_as_multi_bleu_perl():
  preds = ["the cat sat on the mat today", "the dog barks at the moon"]
  refs_a = ["the cat is on the mat today", "the dog barks at night under the moon"]
  refs_b = ["a cat sat on the mat", "a dog barks at the moon tonight"]
  assert (_printed(preds, refs_a), _printed(preds, refs_b)) == ("46.33", "67.94")
  # N-grams clipped by their most frequent reference; each segment's closest reference length: 7 + 7.
  assert _printed(preds, refs_a, refs_b) == _printed(preds, refs_b, refs_a) == "86.51"
  # 6 words between references of 8 and 4: the shorter counts (BP 1), whatever the order.
  assert _printed(["a b c d e x"], ["a b c d e f g x"], ["a b c x"]) == "79.53"
  assert _printed(["a b c d e x"], ["a b c x"], ["a b c d e f g x"]) == "79.53"
  with pytest.raises(ValueError, match="2 predictions for 1 references"):
    bleu.tokenized_bleu(preds, refs_a, refs_b[:1])
  with pytest.raises(TypeError, match="keyword"):
    bleu.tokenized_bleu(["a"], ["a"], "none")


def test_tokenized_bleu_of_empty_segments_as_multi_bleu_perl():
  assert _printed(["", "the cat sat on the mat"], ["a b c", "the cat sat on the mat"]) == "60.65"
  assert _printed(["the cat sat on the mat", "x"], ["the cat sat on the mat", ""]) == "96.22"
  assert bleu.tokenized_bleu(["a b", "c"], ["", ""]) == 0.0  # the script prints "BLEU = 0" (and exits 1)
  assert bleu.tokenized_bleu(["", ""], ["a b", "c"]) == 0.0  # the script dies: "Illegal division by zero"
  assert _printed(["a", "b c"], ["a", "b c"]) == "0.00"  # no trigram at all: p3 = 0


def _multi_bleu_script():
  """A copy of multi-bleu.perl named by $XTREME_JAX_MULTI_BLEU_PERL (never downloaded), else the test is skipped."""
  path = os.environ.get("XTREME_JAX_MULTI_BLEU_PERL")
  if not path or not os.path.isfile(path) or shutil.which("perl") is None:
    pytest.skip("set XTREME_JAX_MULTI_BLEU_PERL to a copy of Moses' scripts/generic/multi-bleu.perl (and install perl)")
  return path


def _perl_bleu(script, tmp_path, preds, refsets) -> float:
  """The script's BLEU with the score printed in full (%.17g, not %.2f); 0 where it scores nothing or dies."""
  paths = []
  for i, refs in enumerate(refsets):
    paths.append(tmp_path / f"ref{i}")
    paths[-1].write_bytes("".join(f"{r}\n" for r in refs).encode())
  done = subprocess.run(["perl", script, "-lc", *paths], input="".join(f"{p}\n" for p in preds).encode(),
                        capture_output=True, check=False)
  match = re.match(rb"BLEU = ([-+.\de]+),", done.stdout)
  assert match or b"Illegal division by zero" in done.stderr, done
  return float(match.group(1)) if match else 0.0


_WORDS = ["the", "cat", "über", "été", "мир", "東京", "a", "b", ".", "x\u00a0y"]
_SPACES = [" "] * 30 + ["  ", "\t", "\x0b", "\f", "\r", "\u00a0", "\u3000", "\u202f", "\x85", "\x1c"]


def _spelled(rng, words) -> str:
  """`words` with some dropped, replaced or re-cased (str.upper / title, non-ASCII too), joined by random spaces."""
  edits = [lambda w: w] * 30 + [lambda w: "", lambda w: rng.choice(_WORDS), str.upper, str.title]
  return rng.choice(["", " "]) + "".join(rng.choice(edits)(w) + rng.choice(_SPACES) for w in words)


def _random_corpus(rng) -> list[list[str]]:
  """[preds, refs, ...]: 1-4 segments, each prediction and 1-3 references spelled from the same words."""
  segments = [[rng.choice(_WORDS) for _ in range(rng.randrange(16))] for _ in range(rng.randrange(1, 5))]
  return [[_spelled(rng, words) for words in segments] for _ in range(rng.randrange(2, 5))]


def test_tokenized_bleu_is_multi_bleu_perls_score_bit_for_bit(tmp_path):
  """Random corpora (mixed case, non-ASCII, Unicode and ASCII spaces, empty segments, 1-3 references) against the
  script with its score printed in full; skipped without a copy of the script."""
  script = tmp_path / "multi-bleu.perl"
  text = pathlib.Path(_multi_bleu_script()).read_text(encoding="utf-8")
  script.write_text(text.replace("BLEU = %.2f", "BLEU = %.17g"), encoding="utf-8")
  assert "BLEU = %.17g" in script.read_text(encoding="utf-8")
  rng, scored = random.Random(0), 0
  for _ in range(100):
    preds, *refsets = _random_corpus(rng)
    score = bleu.tokenized_bleu(preds, *refsets, tokenize="none")
    assert score == _perl_bleu(script, tmp_path, preds, refsets), (preds, refsets)
    scored += score > 0
  assert scored > 50  # most corpora have a 4-gram match


def test_segment_counts_must_agree():
  for fn in (bleu.xglue_bleu, bleu.sacrebleu_detok, bleu.tokenized_bleu):
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
      fn(["a", "b"], ["a"])
