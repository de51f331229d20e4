"""BLEU of XGLUE's scorer, WMT's sacreBLEU and multi-bleu style tokenised BLEU against values computed by hand
from n-gram precisions p1..p4 and the brevity penalty: BLEU = BP * (p1 p2 p3 p4) ** (1/4)."""

import math

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


def test_segment_counts_must_agree():
  for fn in (bleu.xglue_bleu, bleu.sacrebleu_detok, bleu.tokenized_bleu):
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
      fn(["a", "b"], ["a"])
