"""What every source streamed from tf.data shares: chunked reading with a look-ahead (`Stream`), tf.data iterator
checkpoints kept as base64 text, the check that a saved input state fits the run, and the resume protocol
(`StreamedSource`: batches equal to an uninterrupted run's, input states saved with each checkpoint)."""

from __future__ import annotations

import base64
import collections
import functools
import logging
import uuid
import weakref
from typing import Any, Callable, Mapping, Optional, Sequence

from xtreme_jax import errors, nested


READ_CHUNK = 64  # examples fetched from tf.data at a time (read ahead of the cursor, bounded)
STATE_FORMAT = 1  # version of the `input_state` dict


def stream_options():
  """The tf.data options of every checkpointed stream: deterministic; a save that would be wrong fails (external
  state); no autotuning: a stream reads one small chunk at a time, and on a busy CPU every read waited on the
  autotuner's background thread (a streamed test: 21 s against 5 s without it). Iterators saved with autotuning
  on restore into these pipelines."""
  import tensorflow as tf
  options = tf.data.Options()
  options.deterministic = True
  options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.FAIL
  options.autotune.enabled = False
  return options


def b64(data: bytes) -> str:
  """`data` as ASCII text (JSON-safe)."""
  return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
  """The bytes of `b64`'s text."""
  return base64.b64decode(text.encode("ascii"), validate=True)


def save_iterator(iterator) -> dict[str, str]:
  """The checkpoint of a tf.data iterator as {file suffix: base64 bytes} (written to TF's in-memory file system)."""
  import tensorflow as tf
  prefix = f"ram://xtreme_jax_iterators/{uuid.uuid4().hex}/iterator"
  tf.train.Checkpoint(iterator=iterator).write(prefix)
  files = tf.io.gfile.glob(prefix + "*")
  try:
    return {f[len(prefix):]: b64(tf.io.gfile.GFile(f, "rb").read()) for f in files}
  finally:
    for f in files:
      tf.io.gfile.remove(f)


def restore_iterator(iterator, saved: Mapping[str, str]) -> None:
  """Restores `iterator` (of the same pipeline) from `save_iterator`'s output."""
  import tensorflow as tf
  prefix = f"ram://xtreme_jax_iterators/{uuid.uuid4().hex}/iterator"
  try:
    for suffix, data in saved.items():
      with tf.io.gfile.GFile(prefix + suffix, "wb") as f:
        f.write(unb64(data))
    tf.train.Checkpoint(iterator=iterator).read(prefix).assert_consumed()
  finally:
    for f in tf.io.gfile.glob(prefix + "*"):
      tf.io.gfile.remove(f)


def check_input_state(state: Mapping, fingerprint: Mapping, position: int, host_index: int, host_count: int) -> None:
  """A saved input state fits this run: the same data fingerprint and hosts (ConfigError naming what changed)
  and the train state's batch `position` (DataError)."""
  diffs = nested.differing_keys(state["data"], fingerprint)
  if list(state["host"]) != [host_index, host_count]:
    diffs["host"] = (f"{state['host'][0]} of {state['host'][1]}", f"{host_index} of {host_count}")
  if diffs:
    raise errors.ConfigError(
        "the checkpoint's input state was written for other data or settings: " + nested.describe(diffs) +
        ". Resume with the data, settings and number of hosts of that run, or start a new RUN_DIR")
  if state["position"] != position:
    raise errors.DataError(f"the input state is of batch {state['position']}, the train state of batch {position}")


class Stream:
  """Examples of one task from document `cursor` on (cycling), prepared lazily; see the module docstring.

  `pending` holds the examples read from tf.data and not consumed yet (the
  rest of the last chunk, the look-ahead included), `ready` the prepared
  forms of its first ones. `skip` is the `dataset.skip` its pipeline was built
  with: a saved iterator restores only into the same pipeline. `state()` is
  what a checkpoint keeps of it.
  """

  def __init__(self, name: str, dataset, cursor: int, prepare: Callable, max_lookahead: int,
               pending: Sequence[dict] = (), iterator_state: Mapping[str, str] | None = None, skip: int = 0):
    self.name, self.cursor, self.max_lookahead = name, cursor, max_lookahead
    # A source's bound method is held weakly: the source owns its streams, and a cycle back to it would leave
    # the tf.data iterator to the garbage collector, whose teardown of it can stall a later trace for seconds.
    self._prepare = weakref.WeakMethod(prepare) if hasattr(prepare, "__self__") else lambda: prepare
    self.skip = skip
    self.iterator = iter(dataset)
    if iterator_state is not None:
      restore_iterator(self.iterator, iterator_state)
    self.pending: collections.deque = collections.deque(pending)  # raw examples cursor, cursor + 1, ...
    self.ready: collections.deque = collections.deque()  # prepared forms of pending[0], pending[1], ...
    self.checkpointable = True

  @classmethod
  def opened(cls, name: str, dataset: Callable[[int, int], Any], cursor: int, prepare: Callable, max_lookahead: int,
             saved: Optional[Mapping] = None, decode: Callable[[bytes], Any] = bytes) -> "Stream":
    """The stream at `cursor`: restored from `saved` (a `state()` holding a tf.data checkpoint: its iterator, the
    examples read and not consumed, decoded by `decode`, and its pipeline's skip), else by skipping `cursor`
    examples. `dataset(skip, chunk)` builds the pipeline."""
    if saved is not None and saved.get("iterator") is not None:
      pending = [{k: decode(unb64(v)) for k, v in ex.items()} for ex in saved["pending"]]
      skip = int(saved.get("skip", 0))  # the pipeline the iterator was saved from (states before `skip`: 0)
      return cls(name, dataset(skip, saved.get("chunk", READ_CHUNK)), int(saved["cursor"]), prepare, max_lookahead,
                 pending, saved["iterator"], skip)
    return cls(name, dataset(cursor, READ_CHUNK), cursor, prepare, max_lookahead, skip=cursor)

  @property
  def prepare(self) -> Callable:
    return self._prepare()

  def _read_chunk(self) -> None:
    try:
      chunk = next(self.iterator)
    except StopIteration:
      raise errors.DataError(f"seqio task {self.name!r} yields no examples") from None
    chunk = {k: v.numpy() for k, v in chunk.items()}
    self.pending.extend({k: v[i] for k, v in chunk.items()} for i in range(len(next(iter(chunk.values())))))

  def peek(self):
    """The prepared example at the cursor, not consumed (for a `prepare` that never gives None)."""
    if not self.ready:
      if not self.pending:
        self._read_chunk()
      self.ready.append(self.prepare(self.pending[0]))
    return self.ready[0]

  def take(self):
    """The prepared example at the cursor (or the first usable one after it); advances the cursor by one."""
    i = 0
    while True:
      while i >= len(self.ready):
        if len(self.ready) == len(self.pending):
          self._read_chunk()
        self.ready.append(self.prepare(self.pending[len(self.ready)]))
      if self.ready[i] is not None:
        item = self.ready[i]
        break
      i += 1
      if i > self.max_lookahead:
        raise errors.DataError(f"seqio task {self.name!r}: {i} consecutive examples from example {self.cursor} "
                               "on give no usable pair (too short after tokenization)")
    self.pending.popleft()
    self.ready.popleft()
    self.cursor += 1
    return item

  def state(self) -> dict:
    """{"cursor", "pending" (raw examples, base64), "iterator" (tf.data checkpoint, or None if impossible)}."""
    iterator = None
    if self.checkpointable:
      try:
        iterator = save_iterator(self.iterator)
      except Exception as e:  # noqa: BLE001 - e.g. a Python generator or py_function in the pipeline
        self.checkpointable = False
        logging.warning("the tf.data pipeline of seqio task %r cannot be checkpointed (%s); a resumed run re-reads "
                        "its first %d examples", self.name, str(e).splitlines()[0][:160] if str(e) else e,
                        self.cursor)
    if iterator is None:
      return {"cursor": self.cursor, "pending": [], "iterator": None}
    return {"cursor": self.cursor, "iterator": iterator, "skip": self.skip,
            "pending": [{k: b64(bytes(v)) for k, v in ex.items()} for ex in self.pending]}


class StreamedSource:
  """The resume protocol of a source streamed from tf.data (`SeqioPairSource`, `SeqioSeq2SeqSource`,
  `WmtStream`): `batch(position, host_index, host_count)` gives the rows an uninterrupted run gets (the last
  batch kept, so that the feed and a checkpoint may ask twice), `input_state` / `restore_input_state` carry
  the streams' places across a restart, checked against `data_fingerprint`.

  A subclass gives `data_fingerprint`, `_seek` (the streams before batch `position`), `_build_batch` (this
  host's rows of the next batch), `_stream_state` (the streams' part of `input_state`) and `_restored` (the
  `_state` entries a restored input state sets); `state_keys` are the keys its input states hold.
  """

  state_keys: tuple = ()

  @functools.cached_property
  def _state(self) -> dict:
    """host, position (of the next batch), last batch, and the subclass's streams (`_initial_state`)."""
    return {"host": None, "position": None, "last": None, **self._initial_state()}

  def _initial_state(self) -> dict:
    return {}

  def _at(self, position: int, host_index: int, host_count: int) -> None:
    """Seeks before batch `position` unless the streams are there already."""
    if self._state["host"] != (host_index, host_count) or self._state["position"] != position:
      self._seek(position, host_index, host_count)

  def input_state(self, position: int, host_index: int = 0, host_count: int = 1) -> dict:
    """This host's input state before batch `position` (JSON-serialisable); `restore_input_state` takes it."""
    self._at(position, host_index, host_count)
    return {"format": STATE_FORMAT, "position": position, "host": [host_index, host_count],
            "data": self.data_fingerprint(host_count), **self._stream_state(position, host_index, host_count)}

  def restore_input_state(self, state: Mapping, position: int, host_index: int = 0, host_count: int = 1) -> None:
    """Continue from `input_state(position, ...)` of an earlier run: the next `batch(position)` reads on from it.

    ConfigError (naming what changed) if the state was written for other
    data, settings or hosts; DataError if it is not an input state of this
    source or not of `position`.
    """
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT or any(
        k not in state for k in self.state_keys):
      raise errors.DataError(f"not a {type(self).__name__} input state of format {STATE_FORMAT}")
    check_input_state(state, self.data_fingerprint(host_count), position, host_index, host_count)
    self._state.update(host=(host_index, host_count), position=position, last=None, **self._restored(state))

  def batch(self, position: int, host_index: int = 0, host_count: int = 1) -> dict:
    """This host's rows of global batch `position`; equal to what an uninterrupted run gives."""
    st = self._state
    if st["last"] is not None and st["last"][0] == (position, host_index, host_count):
      return dict(st["last"][1])
    self._at(position, host_index, host_count)
    st["position"] = None  # until the batch is complete: a failed batch makes the next call re-seek
    result = self._build_batch(position, host_index, host_count)
    st.update(position=position + 1, last=((position, host_index, host_count), result))
    return dict(result)


def describe_source(source) -> Any:
  """A seqio data source's identity: its TFDS name and version, its files, or its repr."""
  tfds_dataset = getattr(source, "tfds_dataset", None)
  if tfds_dataset is not None:
    return str(getattr(tfds_dataset, "name", tfds_dataset))
  for files in ("files", "path"):  # xtreme_tasks.pretraining's file sources
    method = getattr(source, files, None)
    if callable(method):
      try:
        return [str(f) for f in method()]
      except Exception:  # noqa: BLE001 - e.g. the file is gone: described by its repr below
        break
  if type(source).__repr__ is not object.__repr__:
    return repr(source)
  return type(source).__name__
