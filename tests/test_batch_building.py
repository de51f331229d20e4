"""Batches built at once: vectorised masking (`masking.mask_batch`), one generator per batch, host slices.

The sample sources (MlmTextSource, VecoPairSource) mask a batch at once; sources
whose `example` ignores its rng build no generator; the row-by-row sources
(FeatureListSource, conftest's RandomMlmSource) give the batches they always gave.
"""

import numpy as np
import pytest

from conftest import RandomMlmSource
from xtreme_jax.data.features import masking
from xtreme_jax.data import paths
from xtreme_jax.data.pretraining import pretraining_corpora as pc
from xtreme_jax.data.features.mlm_source import MlmTextSource
from xtreme_jax.data.features.sources import FeatureListSource, stack

TIER = "unit"  # conftest.py: this file's tier

PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIAL = [PAD, CLS, SEP, MASK]
REPLACEMENTS = masking.regular_ids(50, SPECIAL)
KW = dict(mask_id=MASK, special_ids=SPECIAL, replacement_ids=REPLACEMENTS)


def _rows(lengths, width):
  """[CLS] tokens [SEP] then padding, one row per length (number of regular tokens)."""
  rng = np.random.default_rng(99)
  ids = np.full((len(lengths), width), PAD, np.int32)
  for r, n in enumerate(lengths):
    ids[r, :n + 2] = [CLS, *rng.integers(4, 50, n), SEP]
  return ids


def test_mask_batch_counts_positions_and_weights():
  lengths = [0, 1, 3, 10, 20, 26, 26]
  ids = _rows(lengths, 28)
  prob = np.asarray([0.15] * 6 + [1.0])
  out = masking.mask_batch(ids, np.random.default_rng(0), mask_prob=prob, max_predictions=5, **KW)
  # round(p * n), at least 1 when n > 0, at most max_predictions: by hand
  assert out["masked_weights"].sum(1).tolist() == [0, 1, 1, 2, 3, 4, 5]
  assert {k: (v.shape, v.dtype) for k, v in out.items()} == {
      "input_ids": ((7, 28), np.int32), "masked_positions": ((7, 5), np.int32), "masked_ids": ((7, 5), np.int32),
      "masked_weights": ((7, 5), np.float32)}
  for r, n in enumerate(out["masked_weights"].sum(1).astype(int)):
    pos = out["masked_positions"][r]
    assert (out["masked_weights"][r] == [1] * n + [0] * (5 - n)).all()
    assert (pos[n:] == 0).all() and (out["masked_ids"][r, n:] == 0).all()
    assert (np.diff(pos[:n]) > 0).all()  # sorted, distinct
    assert ((pos[:n] >= 1) & (pos[:n] <= lengths[r])).all()  # never [CLS], [SEP] or padding
    np.testing.assert_array_equal(out["masked_ids"][r, :n], ids[r, pos[:n]])
    changed = np.flatnonzero(out["input_ids"][r] != ids[r])
    assert set(changed.tolist()) <= set(pos[:n].tolist())
  single = masking.mask_tokens(ids[4], np.random.default_rng(5), mask_prob=0.15, max_predictions=5, **KW)
  batched = masking.mask_batch(ids[4:5], np.random.default_rng(5), mask_prob=0.15, max_predictions=5, **KW)
  for k in single:
    np.testing.assert_array_equal(single[k], batched[k][0])


def test_mask_batch_rates_and_uniform_positions():
  ids = _rows([80] * 4000, 100)  # 80 maskable tokens per row: 12 slots each
  out = masking.mask_batch(ids, np.random.default_rng(1), mask_prob=0.15, max_predictions=15, **KW)
  w = out["masked_weights"] > 0
  assert (w.sum(1) == 12).all()
  rows = np.nonzero(w)[0]
  pos, orig = out["masked_positions"][w], out["masked_ids"][w]
  new = out["input_ids"][rows, pos]
  total = len(new)
  # 80/10/10 (a random draw equal to the original counts as kept: 1/46 of 10%)
  assert (new == MASK).mean() == pytest.approx(0.8, abs=0.01)
  random = (new != MASK) & (new != orig)
  assert random.mean() == pytest.approx(0.1 * 45 / 46, abs=0.01)
  assert (new == orig).mean() == pytest.approx(0.1 + 0.1 / 46, abs=0.01)
  assert not np.isin(new[random], SPECIAL).any()
  # every maskable position is equally likely: 48,000 picks over 80 positions, 600 each
  hits = np.bincount(pos, minlength=100)
  assert hits[0] == 0 and not hits[81:].any() and total == 48_000
  assert np.abs(hits[1:81] / 600 - 1).max() < 0.2


def test_mask_batch_host_rows_equal_the_single_host_rows():
  ids = _rows(np.random.default_rng(3).integers(0, 20, 8), 24)
  whole = masking.mask_batch(ids, np.random.default_rng(7), mask_prob=0.3, max_predictions=6, **KW)
  for hosts in (2, 4):
    per = 8 // hosts
    for h in range(hosts):
      rows = range(h * per, (h + 1) * per)
      part = masking.mask_batch(ids[h * per:(h + 1) * per], np.random.default_rng(7), mask_prob=0.3,
                                max_predictions=6, rows=rows, batch_size=8, **KW)
      for k in whole:
        np.testing.assert_array_equal(part[k], whole[k][h * per:(h + 1) * per])


def _mlm(**kw):
  return MlmTextSource(**{**dict(files=("pretrain/*.txt",), vocabulary="sample_spm.model",
                                 data_dir=paths.sample_dir(), seq_len=32, batch_size=8), **kw})


def _same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _hosts_agree(make_batch, hosts):
  """make_batch(host_index, host_count): the hosts' rows, concatenated, are the single-host batch."""
  parts = [make_batch(h, hosts) for h in range(hosts)]
  whole = make_batch(0, 1)
  _same({k: np.concatenate([p[k] for p in parts]) for k in whole}, whole)


def _generators(monkeypatch):
  made = []
  real = np.random.default_rng

  def counting(*args, **kwargs):
    made.append(args[0] if len(args) == 1 else args)
    return real(*args, **kwargs)

  monkeypatch.setattr(np.random, "default_rng", counting)
  return made


def test_mlm_source_one_generator_per_batch_deterministic_and_host_sliced(monkeypatch):
  source = _mlm(holdout_every=3, split="eval")
  _same(source.batch(4), _mlm(holdout_every=3, split="eval").batch(4))
  assert not np.array_equal(source.batch(4)["masked_positions"], source.batch(5)["masked_positions"])
  for hosts in (2, 4):
    _hosts_agree(lambda h, n: source.batch(3, h, n), hosts)
    evals = [list(source.eval_batches(h, hosts)) for h in range(hosts)]
    for b, whole in enumerate(source.eval_batches()):
      _same({k: np.concatenate([e[b][k] for e in evals]) for k in whole}, whole)
  last = list(source.eval_batches())[-1]
  real = source.num_examples % 8 or 8
  assert (last["masked_weights"][real:] == 0).all() and (last["masked_weights"][:real].sum(1) > 0).all()
  source.batch(2)  # the epoch order is cached
  made = _generators(monkeypatch)
  source.batch(2)
  assert made == [(0, 2)]  # (seed, position)


def _per_row_batch(source, position, host_index=0, host_count=1):
  """The row-by-row batch (one generator per row) that sources built before batching."""
  rows = []
  for row in source._rows(host_index, host_count):
    epoch, index = divmod(position * source.batch_size + row, source.num_examples)
    rows.append(source.example(int(source._order(epoch)[index]),
                               np.random.default_rng((source.seed, position, row))))
  return stack(rows)


def _per_row_eval(source, host_index=0, host_count=1):
  n = source.num_examples
  for start in range(0, n, source.batch_size):
    rows = []
    for row in source._rows(host_index, host_count):
      i = start + row
      ex = source.example(min(i, n - 1), np.random.default_rng((source.seed, i)))
      if i >= n:
        ex.update({k: np.zeros_like(ex[k]) for k in source.weight_keys})
      rows.append(ex)
    yield stack(rows)


@pytest.mark.parametrize("make", [
    lambda: FeatureListSource([{"input_ids": np.arange(i, i + 6, dtype=np.int32), "labels": np.int32(i % 3),
                                "example_weights": np.float32(1)} for i in range(11)], batch_size=4, seed=3),
    lambda: RandomMlmSource(batch_size=4, size=11, seed=2)])
def test_row_by_row_sources_give_the_batches_they_gave(make, monkeypatch):
  source = make()
  for position in (0, 2, 5, 9):  # 11 examples, 4 rows: batches cross epochs
    for hosts in (1, 2, 4):
      for h in range(hosts):
        _same(source.batch(position, h, hosts), _per_row_batch(source, position, h, hosts))
  for hosts in (1, 2):
    for h in range(hosts):
      got, want = list(source.eval_batches(h, hosts)), list(_per_row_eval(source, h, hosts))
      assert len(got) == len(want) == 3
      for a, b in zip(got, want):
        _same(a, b)
  if isinstance(source, FeatureListSource):  # its rows take no randomness: no generator is built
    made = _generators(monkeypatch)
    source.batch(1)
    list(source.eval_batches())
    assert made == []


@pytest.fixture(scope="module")
def veco():
  return pc.VecoPairSource("sample_spm.model", data_dir=paths.sample_dir(), monolingual_dir="pretrain",
                           parallel_dir="parallel", languages=("de", "en", "sw"), language_pairs=("de-en", "sw-en"),
                           segment_len=10, batch_size=8, seed=4)


def test_veco_source_one_generator_per_batch_and_host_sliced(veco, monkeypatch):
  for position in (0, 1):
    for hosts in (2, 4):
      _hosts_agree(lambda h, n: veco.batch(position, h, n), hosts)
  assert not np.array_equal(veco.batch(0)["x_masked_positions"], veco.batch(2)["x_masked_positions"])
  made = _generators(monkeypatch)
  veco.batch(3)
  assert made == [(4, 3)]


def test_veco_eval_batches_mix_kinds_and_are_host_sliced(veco):
  batches = list(veco.eval_batches())
  assert len(batches) == -(-veco.num_examples // 8)
  kinds = np.concatenate([b["is_bilingual"] for b in batches])[:veco.num_examples]
  n_mono = sum(map(len, veco.monolingual.values()))
  assert not kinds[:n_mono].any() and kinds[n_mono:].all()
  for b in batches:
    mono = b["is_bilingual"] == 0
    assert not b["tlm_masked_weights"][mono].any()  # TLM only on bilingual rows, also in mixed batches
  assert n_mono % 8 and 0 < batches[n_mono // 8]["is_bilingual"].sum() < 8  # a batch of both kinds
  real = veco.num_examples % 8 or 8
  for k in veco.weight_keys:
    assert not batches[-1][k][real:].any()
  halves = [list(veco.eval_batches(h, 2)) for h in range(2)]
  for b, whole in enumerate(batches):
    _same({k: np.concatenate([half[b][k] for half in halves]) for k in whole}, whole)


def test_pair_features_is_one_row_of_pair_batch(veco):
  pairs = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14])]
  batch = veco.pair_batch([p[0] for p in pairs], [p[1] for p in pairs], [0, 1], [1, 2], [True, False],
                          np.random.default_rng(0))
  assert batch["is_bilingual"].tolist() == [1, 0] and not batch["tlm_masked_weights"][1].any()
  one = veco.pair_features(*pairs[0], 0, 1, True, np.random.default_rng(0))
  row = veco.pair_batch([pairs[0][0]], [pairs[0][1]], [0], [1], True, np.random.default_rng(0))
  _same(one, {k: v[0] for k, v in row.items()})
  assert one["x_language_id"].shape == () and one["x_language_id"].dtype == np.int32
