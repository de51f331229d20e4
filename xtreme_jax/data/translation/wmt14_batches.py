"""WMT14 training batches streamed from TFDS: token-count rows of packed pairs, memory bounded, resumable.

`WmtStream` is the trainer's source for `runs/translate.py`. Every host reads
its own shard of the TFDS training split (`wmt14.dataset`, `shard(hosts,
host)`; or of the parallel text files in `text_dir`), optionally the first `limit` pairs only, shuffled through a buffer
of `shuffle_buffer` pairs (seeded; another order every epoch; TFDS already
wrote the records in a shuffled order when it prepared the dataset) and
repeated. Pairs are tokenized as they are read (`encode_pair`: the source as
the encoder's `[CLS] source [SEP]` inputs, the target ending with EOS, the
decoder started by BOS) and packed into rows (`packing.next_row`): a batch is
`rows` rows of `source_len` source and `target_len` target token slots (VECO's
64k-token En-De batches: 256 rows of 256), each row holding as many pairs as
fit. Pairs with an empty side are dropped.

Resume: a row takes a varying number of pairs, so the state before batch p is
the stream's pair cursor, the pairs read but not consumed and the tf.data
iterator's checkpoint (shuffle buffer included): `input_state` /
`restore_input_state`, kept with every checkpoint, continue exactly; without
one (an older checkpoint, or batches asked for out of order) the source
replays: it re-reads and re-packs from the first pair up to batch p. Either
way batch p is what an uninterrupted run (with the same hosts) gets.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Mapping, Optional

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.translation import wmt14
from xtreme_jax.data.features.packing import next_row
from xtreme_jax.data.features.sources import IndexedSource, stack
from xtreme_jax.data.pretraining.stream_state import Stream, StreamedSource, stream_options
from xtreme_jax.data.vocab.vocabularies import load_vocabulary

MODEL_KEYS = ("input_ids", "input_mask", "targets", "target_mask", "decoder_start", "input_segments",
              "input_positions", "target_segments", "target_positions")


def encode_pair(vocab, source: str, target: str, source_len: int, target_len: int) -> tuple[list, list]:
  """(source ids, target ids): the encoder's `[CLS] source [SEP]` inputs (as the decoding features) and the
  target's ids + EOS, each cut to its length."""
  specials = len(vocab.build_inputs([])[0])
  return (vocab.build_inputs(vocab.encode(source)[: max(source_len - specials, 0)])[0],
          vocab.encode(target)[: target_len - 1] + [vocab.eos_id])


@dataclasses.dataclass(frozen=True, eq=False)
class WmtStream(StreamedSource):
  """Packed WMT14 training rows of `direction` ('en_de' | 'en_fr'), tokenized by `vocabulary`; see the module
  docstring. `rows` is the global batch size in rows (a multiple of the number of hosts)."""

  state_keys = ("stream",)  # `StreamedSource`

  direction: str
  vocabulary: str
  split: str = "train"
  data_dir: Optional[str] = None
  text_dir: Optional[str] = None  # parallel text files instead of TFDS (`wmt14.text_files`)
  source_len: int = 256
  target_len: int = 256
  rows: int = 256
  limit: Optional[int] = None
  shuffle_buffer: int = 10_000
  seed: int = 0

  def __post_init__(self):
    wmt14.direction(self.direction)
    wmt14.tfds_split(self.split)
    for name in ("source_len", "target_len", "rows", "shuffle_buffer"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise errors.ConfigError(f"WmtStream.{name} = {value!r}; expected a positive integer")
    if self.target_len < 2:
      raise errors.ConfigError(f"WmtStream.target_len = {self.target_len}; expected at least 2 (a token and EOS)")
    if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
      raise errors.ConfigError(f"WmtStream.limit = {self.limit!r}; expected None (every pair) or a positive count")

  @functools.cached_property
  def vocab(self):
    return load_vocabulary(self.vocabulary)

  @property
  def batch_size(self) -> int:
    return self.rows

  def _rows(self, host_index: int, host_count: int) -> range:
    return IndexedSource._rows(self, host_index, host_count)

  def tokens_per_batch(self, batch: dict) -> int:
    return int(np.sum(batch["input_mask"]) + np.sum(batch["target_mask"]))

  # -- the stream ----------------------------------------------------------------

  def _dataset(self, skip: int, host_index: int, host_count: int, chunk: int):
    """This host's shard of the pairs, shuffled per epoch, repeated, from pair `skip` on, in chunks."""
    ds = wmt14.dataset(self.direction, self.split, self.data_dir, text_dir=self.text_dir)
    if self.limit is not None:
      ds = ds.take(self.limit)
    if host_count > 1:
      ds = ds.shard(host_count, host_index)
    ds = ds.shuffle(self.shuffle_buffer, seed=self.seed, reshuffle_each_iteration=True).repeat()
    if skip:
      ds = ds.skip(skip)
    return ds.batch(chunk).prefetch(1).with_options(stream_options())

  def _prepare(self, example: dict) -> tuple[list, list]:
    return encode_pair(self.vocab, bytes(example["source"]).decode("utf-8"),
                       bytes(example["target"]).decode("utf-8"), self.source_len, self.target_len)

  def _open(self, cursor: int, host_index: int, host_count: int, saved: Optional[Mapping] = None) -> Stream:
    """The stream at pair `cursor`: from a saved state (its iterator restored), else by skipping `cursor`."""
    dataset = lambda skip, chunk: self._dataset(skip, host_index, host_count, chunk)  # noqa: E731
    return Stream.opened(wmt14.tfds_name(self.direction), dataset, cursor, self._prepare, 0, saved)

  def _initial_state(self) -> dict:
    """the open stream, a restored state not opened yet (`StreamedSource._state`)."""
    return {"stream": None, "saved": None}

  def _row(self, stream: Stream) -> dict:
    row = next_row(stream, self.source_len, self.target_len, self.vocab.pad_id)
    row["decoder_start"] = np.asarray(self.vocab.bos_id, np.int32)
    return row

  def _seek(self, position: int, host_index: int, host_count: int) -> None:
    """Puts the stream before batch `position`: the open one, a restored state, or a replay from the start."""
    st = self._state
    if st["host"] == (host_index, host_count) and st["position"] == position and \
        (st["stream"] is not None or st["saved"] is not None):
      return
    st.update(host=(host_index, host_count), position=None, last=None, saved=None)
    st["stream"] = self._open(0, host_index, host_count)
    if position:
      logging.warning("WMT14 %s: no input state for batch %d; replaying the stream up to it", self.direction,
                      position)
    for _ in range(position * len(self._rows(host_index, host_count))):
      self._row(st["stream"])
    st["position"] = position

  _at = _seek  # `StreamedSource`: `_seek` itself keeps a stream (or a restored state) already before `position`

  # -- the trainer's interface -------------------------------------------------------

  def data_fingerprint(self, host_count: int = 1) -> dict:
    """What a saved input state belongs to: the data, the tokenization and packing, the order, the hosts."""
    text = {"text_dir": paths.portable(self.text_dir)} if self.text_dir else {}  # (absent before it existed)
    return {"dataset": wmt14.tfds_name(self.direction), "split": self.split, "data_dir": self.data_dir, **text,
            "vocabulary": repr(self.vocab), "source_len": self.source_len, "target_len": self.target_len,
            "rows": self.rows, "limit": self.limit, "shuffle_buffer": self.shuffle_buffer, "seed": self.seed,
            "hosts": host_count}

  def _stream_state(self, position: int, host_index: int, host_count: int) -> dict:
    st = self._state
    return {"stream": st["stream"].state() if st["stream"] is not None else dict(st["saved"])}

  def _restored(self, state: Mapping) -> dict:
    saved = dict(state["stream"])
    if saved.get("iterator") is None:  # the pipeline could not be saved: skip to its cursor
      saved = {"cursor": int(saved["cursor"]), "iterator": None}
    return {"stream": None, "saved": saved}

  def shape_batch(self, host_index: int = 0, host_count: int = 1) -> dict:
    """A batch with the shapes and dtypes of every batch; reads no data."""
    pad = self.vocab.pad_id
    row = {k: np.full(self.source_len if k.startswith("input") else self.target_len, pad if k in
                      ("input_ids", "targets") else 0, np.int32) for k in MODEL_KEYS if k != "decoder_start"}
    row["decoder_start"] = np.asarray(self.vocab.bos_id, np.int32)
    return stack([row for _ in self._rows(host_index, host_count)])

  def _build_batch(self, position: int, host_index: int, host_count: int) -> dict:
    st = self._state
    if st["stream"] is None:
      saved, st["saved"] = st["saved"], None
      st["stream"] = self._open(int(saved["cursor"]), host_index, host_count, saved)
    return stack([self._row(st["stream"]) for _ in self._rows(host_index, host_count)])

  def close(self) -> None:
    """Drops the open stream (the next `batch` re-opens it at its cursor, by skipping)."""
    st = self._state
    if st["stream"] is not None:
      st.update(stream=None, saved={"cursor": st["stream"].cursor, "iterator": None})
    st["last"] = None
