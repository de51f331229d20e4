"""The streamed WMT14 training batches (`data/translation/wmt14_batches.WmtStream`) on stand-in TFDS pairs."""

import json

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.translation import wmt14, wmt14_batches
from xtreme_jax.data.features.packing import pack_pairs

TIER = "unit"  # conftest.py: this file's tier

tf = pytest.importorskip("tensorflow")
N = 30
WORDS = (("red", "sun", "sea", "big", "old", "day"), ("cat", "dog", "map", "cup", "box"))
TARGETS = [f"{WORDS[0][i % 6]} {WORDS[1][i // 6]}" for i in range(N)]  # 30 distinct, 2 to 6 pieces each
SOURCES = [f"the {t} " + "bread " * (i % 4) for i, t in enumerate(TARGETS)]


@pytest.fixture(autouse=True)
def pairs(monkeypatch):
  """`wmt14.dataset` (its TFDS route: tests/test_wmt14.py): N pairs of varying lengths, so rows hold varying
  numbers of pairs."""
  def dataset(name, split, data_dir=None, shuffle_files=False, text_dir=None):
    assert (name, split) == ("en_de", "train")
    return tf.data.Dataset.from_tensor_slices({"source": SOURCES, "target": TARGETS})
  monkeypatch.setattr(wmt14, "dataset", dataset)


def _stream(**kw):
  kw = {"source_len": 24, "target_len": 12, "rows": 4, "shuffle_buffer": 8, **kw}
  return wmt14_batches.WmtStream("en_de", paths.sample_vocab(), **kw)


def _equal(a, b):
  return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_rows_are_the_packed_tokenized_pairs_in_reading_order():
  source = _stream(shuffle_buffer=1)  # a buffer of one pair: file order
  vocab = source.vocab
  encoded = [wmt14_batches.encode_pair(vocab, s, t, 24, 12) for s, t in zip(SOURCES, TARGETS)]
  assert encoded[0][0][0] == vocab.build_inputs([])[0][0] and encoded[0][1][-1] == vocab.eos_id
  expected = pack_pairs(encoded, 24, 12, vocab.pad_id)
  got = [source.batch(0), source.batch(1)]
  rows = [{k: b[k][r] for k in b} for b in got for r in range(4)]
  assert all(_equal({k: v for k, v in row.items() if k != "decoder_start"}, want)
             for row, want in zip(rows, expected[:8]))
  assert all(int(row["decoder_start"]) == vocab.bos_id for row in rows)
  assert max(int(row["target_segments"].max()) for row in rows) > 1  # some rows hold several pairs
  assert source.tokens_per_batch(got[0]) == int(got[0]["input_mask"].sum() + got[0]["target_mask"].sum())
  shapes = source.shape_batch()
  assert {k: (v.shape, v.dtype) for k, v in shapes.items()} == {k: (v.shape, v.dtype) for k, v in got[0].items()}


def _pair_numbers(batch, vocab):
  """The index in TARGETS of each pair of `batch`, row by row, segment by segment."""
  index = {tuple(vocab.encode(t)): i for i, t in enumerate(TARGETS)}
  return [index[tuple(targets[segments == s][:-1].tolist())]  # without EOS
          for targets, segments in zip(batch["targets"], batch["target_segments"])
          for s in range(1, int(segments.max()) + 1)]


def test_every_epoch_reads_every_pair_once_in_a_new_order():
  source = _stream(rows=1, target_len=7, shuffle_buffer=N, limit=10)  # one pair per row
  order = [n for p in range(20) for n in _pair_numbers(source.batch(p), source.vocab)]
  assert sorted(order[:10]) == sorted(order[10:]) == list(range(10))
  assert order[:10] != order[10:]


def test_a_restored_input_state_or_a_replay_continues_exactly():
  first = _stream()
  batches = [first.batch(p) for p in range(6)]
  state = json.loads(json.dumps(first.input_state(6)))
  later = [first.batch(p) for p in range(6, 9)]

  resumed = _stream()
  resumed.restore_input_state(state, 6)
  assert all(_equal(resumed.batch(6 + i), b) for i, b in enumerate(later))

  replayed = _stream()  # no state: re-reads from the first pair
  assert _equal(replayed.batch(4), batches[4]) and _equal(replayed.batch(7), later[1])

  first.close()  # re-opens at its cursor by skipping
  assert _equal(first.batch(9), _stream().batch(9))

  with pytest.raises(errors.ConfigError, match="rows"):
    _stream(rows=8).restore_input_state(state, 6)
  with pytest.raises(errors.DataError, match="batch 6"):
    _stream().restore_input_state(state, 5)


def test_hosts_read_disjoint_shards():
  source = _stream(shuffle_buffer=1)
  halves = [source.batch(0, host, 2) for host in (0, 1)]
  assert all(h["input_ids"].shape == (2, 24) for h in halves)
  seen = [set(_pair_numbers(h, source.vocab)) for h in halves]
  assert seen[0] and seen[1] and not seen[0] & seen[1]


@pytest.mark.parametrize("field,value", [("rows", 0), ("target_len", 1), ("limit", 0), ("shuffle_buffer", -1)])
def test_bad_settings_are_refused(field, value):
  with pytest.raises(errors.ConfigError, match=f"WmtStream.{field} = {value}"):
    _stream(**{field: value})
