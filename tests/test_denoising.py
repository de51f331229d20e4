"""Unicoder generation pretraining data: xDAE noises, xFNP span masking, their seqio tasks, ProphetNet's masks."""

import math
import os

import numpy as np
import pytest
import seqio
import tensorflow as tf

import xtreme_tasks.pretraining as pt
from xtreme_jax import errors
from xtreme_jax.data.pretraining import denoising as dn
from xtreme_jax.data import paths
from xtreme_jax.networks import ngram_masks as nm

TIER = "unit"  # conftest.py: this file's tier

BOS, PAD, EOS, MASK = 0, 1, 2, 4
SPECIALS = (BOS, PAD, EOS)


def _ids(n, first=10):
  """[BOS] first .. first + n - 1 [EOS]: distinct body ids, so positions can be read back."""
  return tf.constant([BOS, *range(first, first + n), EOS], tf.int32)


def _seed(i):
  return tf.constant([i, 7], tf.int64)


def _np(t):
  return np.asarray(t.numpy() if hasattr(t, "numpy") else t).tolist()


# ----------------------------------------------------------------------------- shuffle


def test_shuffle_is_a_permutation_that_moves_no_token_more_than_two_places():
  # Keys are i + u, u in [0, 3): a token j >= i + 3 keeps key > key_i, so |new - old| <= 2 (< 3).
  n = 200
  moved = 0
  for s in range(5):
    out = _np(dn.local_shuffle(_ids(n), _seed(s), special_ids=SPECIALS))
    assert out[0] == BOS and out[-1] == EOS and sorted(out[1:-1]) == list(range(10, 10 + n))
    shift = [abs(new - (tok - 10)) for new, tok in enumerate(out[1:-1])]
    assert max(shift) <= 2
    moved += sum(x > 0 for x in shift)
  assert moved > n  # it does reorder


def test_shuffle_with_distance_one_keeps_the_order():
  # keys i + u with u < 1 are increasing: nothing moves
  assert _np(dn.local_shuffle(_ids(30), _seed(0), distance=1.0, special_ids=SPECIALS)) == _np(_ids(30))


# ----------------------------------------------------------------------------- drop / mask


def test_drop_keeps_an_ordered_subsequence_at_rate_near_one_tenth():
  n = 2000
  out = _np(dn.token_drop(_ids(n), _seed(1), special_ids=SPECIALS))
  body = out[1:-1]
  assert out[0] == BOS and out[-1] == EOS and body == sorted(set(body)) and set(body) <= set(range(10, 10 + n))
  assert 0.08 < 1 - len(body) / n < 0.12  # binomial sd 0.0067
  assert _np(dn.token_drop(_ids(5), _seed(1), prob=0.0, special_ids=SPECIALS)) == _np(_ids(5))
  everything = _np(dn.token_drop(_ids(5), _seed(1), prob=1.0, special_ids=SPECIALS))
  assert len(everything) == 3 and everything[1] in range(10, 15)  # Unicoder: one token stays


def test_mask_replaces_about_one_tenth_in_place():
  n = 2000
  ids = _np(_ids(n))
  out = _np(dn.token_mask(_ids(n), _seed(2), mask_id=MASK, special_ids=SPECIALS))
  assert len(out) == len(ids) and out[0] == BOS and out[-1] == EOS
  assert all(o in (t, MASK) for o, t in zip(out, ids))
  assert 0.08 < out.count(MASK) / n < 0.12
  assert _np(dn.token_mask(_ids(4), _seed(2), mask_id=MASK, prob=1.0, special_ids=SPECIALS)) == [
      BOS, MASK, MASK, MASK, MASK, EOS]


# ----------------------------------------------------------------------------- text infilling


def test_span_lengths_are_poisson_three_and_sum_to_the_budget():
  draws = []
  for s in range(40):
    lengths = _np(dn.span_lengths(300, _seed(s)))
    assert sum(lengths) == 300 and min(lengths) >= 0
    draws += lengths[:-1]  # the last one is cut to the budget
  assert len(draws) > 3000
  assert abs(np.mean(draws) - 3.0) < 0.15 and abs(np.var(draws) - 3.0) < 0.4  # Poisson: mean = variance = 3
  assert abs(np.mean(np.asarray(draws) == 0) - math.exp(-3)) < 0.02
  assert _np(dn.span_lengths(0, _seed(0))) == []


def test_replace_spans_puts_one_mask_per_span_and_merges_overlaps():
  body = tf.constant(list(range(10, 20)), tf.int32)
  # spans [1, 3) and [6, 7) (tokens 11, 12 and 16): one mask each
  assert _np(dn._replace_spans(body, [1, 6], [2, 1], MASK)) == [10, MASK, 13, 14, 15, MASK, 17, 18, 19]
  # [2, 6) covers the start of [4, 8): one mask for [2, 8); a span running past the end is cut: [8, 10)
  assert _np(dn._replace_spans(body, [2, 4, 8], [4, 4, 5], MASK)) == [10, 11, MASK, MASK]
  # touching spans [0, 2) and [2, 3) keep a mask each
  assert _np(dn._replace_spans(body, [0, 2], [2, 1], MASK)) == [MASK, MASK, 13, 14, 15, 16, 17, 18, 19]


def test_insert_masks_adds_masks_between_the_tokens():
  out = _np(dn._insert_masks(tf.constant([10, 11, 12]), 2, _seed(3), MASK))
  assert len(out) == 5 and out.count(MASK) == 2 and [t for t in out if t != MASK] == [10, 11, 12]


def _groups(body, n):
  """(original index before, number of masks, original index after) of each run of masks in a noised body
  of `_ids(n)` (-1 / n: the body's start / end)."""
  groups, before, count = [], -1, 0
  for tok in body + [None]:
    if tok == MASK:
      count += 1
      continue
    after = n if tok is None else tok - 10
    if count:
      groups.append((before, count, after))
    before, count = after, 0
  return groups


def test_infilling_keeps_every_token_in_order_or_inside_a_masked_span():
  n, insertions = 100, 0
  for s in range(30):
    seed = _seed(s)
    out = _np(dn.text_infilling(_ids(n), seed, mask_id=MASK, special_ids=SPECIALS))
    assert out[0] == BOS and out[-1] == EOS
    body = out[1:-1]
    kept = [t - 10 for t in body if t != MASK]
    assert kept == sorted(set(kept))  # kept tokens in their order, none repeated
    deleted = n - len(kept)
    groups = _groups(body, n)
    kept_pairs = set(zip([-1] + kept, kept + [n]))
    # every run of deleted tokens (between two kept neighbours) is replaced by at least one mask
    for a, b in kept_pairs:
      if b > a + 1:
        assert any(g[0] == a and g[2] == b for g in groups), (s, a, b)
    lengths = _np(dn.span_lengths(math.ceil(0.3 * n), dn._split_seed(seed, 3)[0]))
    assert deleted <= 30 and sum(lengths) == 30
    zero = lengths.count(0)
    masks = body.count(MASK)
    assert zero + (zero < len(lengths)) <= masks <= len(lengths)  # one per span at most, one per insertion
    insertions += sum(1 for a, _, b in groups if b == a + 1)  # a mask where nothing was deleted
  assert insertions > 0


def test_infilling_budget():
  # ceil(0.3 * 10) = 3 tokens in spans (overlapping spans may cover fewer); ratio 0: nothing changes
  for s in range(10):
    out = _np(dn.text_infilling(_ids(10), _seed(s), mask_id=MASK, special_ids=SPECIALS))
    assert out.count(MASK) >= 1 and 10 - sum(1 for t in out[1:-1] if t != MASK) <= 3
  assert _np(dn.text_infilling(_ids(10), _seed(5), mask_id=MASK, ratio=0.0, special_ids=SPECIALS)) == _np(_ids(10))


def test_noises_are_deterministic_per_seed_and_apply_in_order():
  for noise in dn.NOISES:
    a, b = (_np(dn.apply_noise(_ids(50), _seed(9), noise, mask_id=MASK, special_ids=SPECIALS)) for _ in range(2))
    c = _np(dn.apply_noise(_ids(50), _seed(10), noise, mask_id=MASK, special_ids=SPECIALS))
    assert a == b and a != c, noise
  both = dn.apply_noise(_ids(50), _seed(9), ["drop", "mask"], mask_id=MASK, special_ids=SPECIALS)
  s_drop, s_mask = dn._split_seed(_seed(9), 2)
  by_hand = dn.token_mask(dn.token_drop(_ids(50), s_drop, special_ids=SPECIALS), s_mask, mask_id=MASK,
                          special_ids=SPECIALS)
  assert _np(both) == _np(by_hand)


def test_bad_settings_are_one_line_config_errors():
  with pytest.raises(errors.ConfigError, match="unknown xDAE noise 'blur'; valid: shuffle, drop, mask, text_infilling"):
    dn.apply_noise(_ids(3), _seed(0), ["drop", "blur"], mask_id=MASK)
  with pytest.raises(errors.ConfigError, match=r"drop_prob=1.5; expected a probability in \[0, 1\]"):
    dn.apply_noise(_ids(3), _seed(0), "drop", drop_prob=1.5)
  with pytest.raises(errors.ConfigError, match="needs mask_id"):
    dn.apply_noise(_ids(3), _seed(0), "text_infilling")
  with pytest.raises(errors.ConfigError, match="span_length=70"):
    dn.check_xfnp_args(span_length=70)
  with pytest.raises(errors.ConfigError, match="mask_prob \\+ random_prob"):
    dn.check_xfnp_args(mask_prob=0.95, random_prob=0.1)


# ----------------------------------------------------------------------------- xFNP


def _xfnp(ids, seed, **kwargs):
  out = dn.span_mask(ids, seed, mask_id=MASK, vocab_size=30000, special_ids=SPECIALS, bos_id=BOS, **kwargs)
  return {k: _np(v) for k, v in out.items()}


def test_xfnp_masks_one_nine_token_span_per_block_of_64():
  n = 3 * 64 + 20
  ids = _np(_ids(n))
  out = _xfnp(_ids(n), _seed(4))
  pos = out["target_positions"]
  assert len(pos) == 3 * 9 + 3  # the last block of 20 tokens: round(20 * 9 / 64) = 3
  for b, size in enumerate((9, 9, 9, 3)):
    in_block = [p for p in pos if 1 + 64 * b <= p < 1 + 64 * (b + 1)]  # body starts after BOS
    assert len(in_block) == size and in_block == list(range(in_block[0], in_block[0] + size))
  assert out["targets"] == [ids[p] for p in pos]
  assert out["target_offsets"] == [*range(9)] * 3 + [0, 1, 2]
  assert out["decoder_inputs"] == [ids[p - 1] for p in pos]
  assert len(out["inputs"]) == len(ids)
  assert all(out["inputs"][i] == ids[i] for i in range(len(ids)) if i not in pos)  # BOS / EOS included


def test_xfnp_replacement_rates_are_80_10_10():
  n = 64 * 200
  out = _xfnp(_ids(n), _seed(5))
  original = np.asarray(out["targets"])
  replaced = np.asarray(out["inputs"])[out["target_positions"]]
  m = len(original)
  assert m == 9 * 200
  is_mask = replaced == MASK
  is_random = ~is_mask & (replaced != original)
  assert abs(is_mask.mean() - 0.8) < 0.04 and abs(is_random.mean() - 0.1) < 0.03
  assert abs((replaced == original).mean() - 0.1) < 0.03  # a random draw equal to the original: p = 1 / 29995
  assert not np.isin(replaced[is_random], [*SPECIALS, MASK]).any()


def test_xfnp_is_deterministic_and_short_inputs_work():
  assert _xfnp(_ids(100), _seed(6)) == _xfnp(_ids(100), _seed(6)) != _xfnp(_ids(100), _seed(7))
  one = _xfnp(_ids(1), _seed(6), mask_prob=1.0, random_prob=0.0)
  assert one == {"inputs": [BOS, MASK, EOS], "targets": [10], "target_positions": [1], "target_offsets": [0],
                 "decoder_inputs": [BOS]}
  empty = _xfnp(tf.constant([BOS, EOS]), _seed(6))
  assert empty["inputs"] == [BOS, EOS] and empty["targets"] == []


def test_random_regular_ids_skip_the_excluded():
  drawn = set(_np(dn.random_regular_ids([2000], _seed(1), 10, [0, 3, 4, 9])))
  assert drawn == {1, 2, 5, 6, 7, 8}


# ----------------------------------------------------------------------------- seqio preprocessors and tasks


def _dataset(rows):
  return tf.data.Dataset.from_tensor_slices({"targets": tf.ragged.constant(rows, tf.int32)}).map(
      lambda ex: {"targets": ex["targets"]})


def test_split_tokens_cuts_documents_to_the_sequence_length():
  ds = dn.split_tokens(_dataset([[5, 6, 7, 8, 9, 10, 11], [], [12]]), None, {"targets": 5}, add_bos=True,
                       bos_id=BOS, eos_id=EOS)
  assert [_np(ex["targets"]) for ex in ds] == [[BOS, 5, 6, 7, EOS], [BOS, 8, 9, 10, EOS], [BOS, 11, EOS],
                                                [BOS, 12, EOS]]
  with pytest.raises(errors.ConfigError, match="no room"):
    dn.split_tokens(_dataset([[5]]), None, {"targets": 2}, add_bos=True, bos_id=BOS, eos_id=EOS)


def _run(preprocessor, seed, **kwargs):
  with seqio.map_seed_manager(seed):
    ds = preprocessor(_dataset([list(range(10, 40)) + [EOS], list(range(50, 70)) + [EOS]]), None, **kwargs)
  return [{k: _np(v) for k, v in ex.items()} for ex in ds]


def test_seqio_preprocessors_are_seed_deterministic():
  xdae = dict(mask_id=MASK, special_ids=SPECIALS)
  a, b, c = _run(dn.xdae_noise, 1, **xdae), _run(dn.xdae_noise, 1, **xdae), _run(dn.xdae_noise, 2, **xdae)
  assert a == b != c and [ex["targets"][:3] for ex in a] == [[10, 11, 12], [50, 51, 52]]
  assert all(ex["inputs"][-1] == EOS and MASK in ex["inputs"] for ex in a)
  xfnp = dict(mask_id=MASK, vocab_size=100, special_ids=SPECIALS, bos_id=BOS)
  a = _run(dn.xfnp_span_mask, 1, **xfnp)
  assert sorted(a[0]) == sorted(dn.XFNP_FEATURES) and len(a[0]["targets"]) == 4  # round(30 * 9 / 64)
  assert all(v.dtype == tf.int32 for v in dn.xfnp_span_mask(_dataset([[5]]), None, **xfnp).element_spec.values())


def test_registered_sample_tasks_tokenize_and_noise_the_documents():
  vocab = pt.SAMPLE_VOCABULARY
  first = open(os.path.join(paths.sample_dir(), "pretrain", "de.txt"), encoding="utf-8").readline().strip()
  lengths = {"inputs": 512, "targets": 512}
  xdae = seqio.get_mixture_or_task("pretrain_xdae_sample_text_de")
  runs = [next(xdae.get_dataset(lengths, split="train", shuffle=False, seed=3).as_numpy_iterator())
          for _ in range(2)]
  ex = runs[0]
  assert _np(ex["targets"]) == vocab.vocab.encode(first) + [vocab.eos_id] and ex["targets"].dtype == np.int32
  assert _np(ex["inputs"]) == _np(runs[1]["inputs"]) != _np(ex["targets"]) and ex["inputs"][-1] == vocab.eos_id
  xfnp = seqio.get_mixture_or_task("pretrain_xfnp_sample_text_de")
  ex = next(xfnp.get_dataset(lengths, split="train", shuffle=False, seed=3).as_numpy_iterator())
  assert sorted(ex) == sorted(dn.XFNP_FEATURES) and ex["inputs"][0] == vocab.bos_id
  original = [vocab.bos_id] + vocab.vocab.encode(first) + [vocab.eos_id]
  assert _np(ex["targets"]) == [original[p] for p in ex["target_positions"]]
  # the sample mixture: each language's rate is n^0.3, n = its number of documents
  mixture = seqio.get_mixture_or_task("pretrain_xdae_sample_text")
  assert len(mixture.tasks) == len(pt.SAMPLE_LANGUAGES)
  task = seqio.get_mixture_or_task("pretrain_xdae_sample_text_sw")
  assert mixture.get_rate(task) == pytest.approx(task.num_input_examples("train") ** 0.3)


def test_generation_registration_errors(monkeypatch):
  monkeypatch.delenv(pt.VOCAB_ENV, raising=False)
  pt.set_vocabulary(None)
  with pytest.raises(errors.ConfigError, match=pt.VOCAB_ENV):
    pt.CONFIGURED_VOCABULARY.eos_id
  with pytest.raises(errors.ConfigError, match="unknown generation objective 'mlm'; valid: xdae, xfnp"):
    pt.register_generation_task("mlm", "pretrain_sample_text_de")
  with pytest.raises(errors.ConfigError, match="unknown xDAE noise"):
    pt.register_generation_task("xdae", "pretrain_sample_text_de", name="test_bad_noise", noise="rotate")
  with pytest.raises(errors.ConfigError, match=r"unknown xfnp setting\(s\) \['span'\]; valid: mask_id, "):
    pt.register_generation_task("xfnp", "pretrain_sample_text_de", name="test_bad_setting", span=3)
  with pytest.raises(errors.ConfigError, match="language"):
    pt.register_generation_mixture("xdae", "sample_text", ["de", "xx"])
  pt.set_vocabulary(paths.sample_vocab())
  try:
    assert pt.CONFIGURED_VOCABULARY.mask_id == pt.SAMPLE_VOCABULARY.mask_id
  finally:
    pt.set_vocabulary(None)


# ----------------------------------------------------------------------------- ProphetNet's n-stream masks


def test_ngram_masks_by_hand_for_four_tokens_and_two_streams():
  main, predicting = nm.ngram_attention_masks(4, 2)
  assert main.tolist() == [[1, 0, 0, 0],
                           [1, 1, 0, 0],
                           [1, 1, 1, 0],
                           [1, 1, 1, 1]]
  # key axis: [main slots 0..3 | own stream slots 0..3]
  assert predicting[0].tolist() == [[1, 0, 0, 0, 1, 0, 0, 0],
                                    [1, 1, 0, 0, 0, 1, 0, 0],
                                    [1, 1, 1, 0, 0, 0, 1, 0],
                                    [1, 1, 1, 1, 0, 0, 0, 1]]
  assert predicting[1].tolist() == [[1, 0, 0, 0, 1, 0, 0, 0],
                                    [1, 0, 0, 0, 0, 1, 0, 0],
                                    [1, 1, 0, 0, 0, 0, 1, 0],
                                    [1, 1, 1, 0, 0, 0, 0, 1]]
  full = nm.ngram_self_attention_mask(4, 2)  # [main | stream 1 | stream 2] on both axes
  assert full.shape == (12, 12)
  assert full[:4].tolist() == [row + [0] * 8 for row in main.tolist()]
  assert full[4:8].tolist() == [r[:4] + r[4:] + [0] * 4 for r in predicting[0].tolist()]
  assert full[8:].tolist() == [r[:4] + [0] * 4 + r[4:] for r in predicting[1].tolist()]


def test_ngram_bias_and_target_weights():
  bias = nm.mask_to_bias(np.array([[1, 0]]))
  assert bias[0, 0] == 0 and bias[0, 1] == np.finfo(np.float32).min
  weights = nm.ngram_target_weights([1, 1, 1, 0], 2, target_offsets=[0, 1, 0, 0])
  assert weights.tolist() == [[1, 1, 1, 0], [0, 1, 0, 0]]
  with pytest.raises(errors.ConfigError, match="ngram=0"):
    nm.ngram_attention_masks(4, 0)
