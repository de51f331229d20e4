"""Sequence-to-sequence pretraining batches (Unicoder's xDAE / xFNP) streamed from a seqio task or mixture.

`SeqioSeq2SeqSource` reads the tokenized, noised examples of a seqio task or
mixture (`xtreme_tasks.pretraining`: `pretrain_{xdae|xfnp}_{corpus}[_{lg}]`;
the mixtures already sample each example's language with n^0.3) and gives the
trainer fixed-shape batches:

  xDAE (`models/seq2seq.Seq2SeqModel`)
    input_ids, input_mask      (rows, source_len)  the noised copy
    targets, target_mask       (rows, target_len)  the original ids + EOS
    decoder_start              (rows,)             the vocabulary's BOS id
  xFNP (`models/xfnp.XfnpModel`)
    input_ids, input_mask      (rows, source_len)  the span-masked text
    targets, target_mask, target_positions, target_offsets, decoder_inputs
                               (rows, target_len)  the task's features of those names

All int32. Each feature is cut to its length (`source_len` for `inputs`,
`target_len` for the target side) and padded (ids with the vocabulary's pad
id, positions and offsets with 0); a mask is 1 over the feature's tokens. The
task is built with these lengths (`sequence_length`), so the xDAE tasks cut
documents into sequences of at most `target_len` tokens and the xFNP tasks
into sequences of at most `source_len`. An example without any input or
target token is skipped (the next one takes its row).

Rows: every host reads its own shard of the data (seqio `shard_info`, by
document) with `shuffle=False`, repeated, and batch p takes the next
`batch_size / host_count` examples of it, so host h's stream has consumed
p * rows examples before batch p. The noise is drawn from `seed` (seqio's
per-example seeds), so a run is reproducible.

Resume (`stream_state.StreamedSource`, as `pretraining_streams.SeqioPairSource`): `input_state` holds the cursor, the examples read
but not consumed, the tf.data iterator's checkpoint and the `skip` its
pipeline was built with (an iterator only restores into the same pipeline);
`restore_input_state` restores the iterator instead of re-reading.
Without a state (a checkpoint without one, or `batch(p)` asked for out of
order) the stream re-opens with `dataset.skip(cursor)`. Either way batch p is
what an uninterrupted run (with the same number of hosts) gets.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.features.sources import IndexedSource, stack
from xtreme_jax.data.pretraining.stream_state import READ_CHUNK, Stream, StreamedSource, describe_source, stream_options

OBJECTIVES = ("xdae", "xfnp")
XFNP_TARGET_FEATURES = ("targets", "target_positions", "target_offsets", "decoder_inputs")
# objective -> the task features it reads (the first is the source side, the rest the target side)
TASK_FEATURES = {"xdae": ("inputs", "targets"), "xfnp": ("inputs", *XFNP_TARGET_FEATURES)}
_ID_FEATURES = ("inputs", "targets", "decoder_inputs")  # padded with the pad id; the others with 0


@dataclasses.dataclass(frozen=True, eq=False)
class SeqioSeq2SeqSource(StreamedSource):
  """Fixed-shape xDAE / xFNP batches from the seqio task or mixture `task`; see the module docstring.

  `objective`: 'xdae' or 'xfnp' (None: 'xfnp' if the task has xFNP's
  features, else 'xdae'). `languages`: for a generation mixture
  `pretrain_{objective}_{corpus}`, mix only these languages' tasks (n^0.3,
  `register_generation_mixture`; e.g. the files you have of the `text`
  corpus). `vocabulary`: a path or vocabulary object handed to
  `xtreme_tasks.pretraining.set_vocabulary` for tasks over the configured
  vocabulary (None: `$XTREME_JAX_PRETRAIN_VOCAB`); tasks with their own (the
  bundled sample's) refuse one. `task_modules` are imported first (they
  register the tasks).
  """

  state_keys = ("stream",)  # `StreamedSource`

  task: str
  objective: Optional[str] = None
  languages: Optional[Sequence[str]] = None
  vocabulary: Any = None
  split: str = "train"
  source_len: int = 512
  target_len: int = 512
  batch_size: int = 32
  seed: int = 0
  task_modules: tuple = ("xtreme_tasks.pretraining",)
  max_lookahead: int = 1000

  def __post_init__(self):
    if not isinstance(self.task, str) or not self.task:
      raise errors.ConfigError(f"SeqioSeq2SeqSource.task = {self.task!r}; expected a seqio task or mixture name")
    if self.objective is not None and self.objective not in OBJECTIVES:
      raise errors.ConfigError(f"SeqioSeq2SeqSource.objective = {self.objective!r}; valid: None (from the task's "
                               f"features), {', '.join(repr(o) for o in OBJECTIVES)}")
    for name in ("source_len", "target_len", "batch_size", "max_lookahead"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise errors.ConfigError(f"SeqioSeq2SeqSource.{name} = {value!r}; expected a positive integer")
    for name in ("task_modules", "languages"):
      value = getattr(self, name)
      if isinstance(value, str):
        object.__setattr__(self, name, (value,))
      elif value is not None:
        object.__setattr__(self, name, tuple(value))
    if self.languages is not None and not self.languages:
      raise errors.ConfigError("SeqioSeq2SeqSource.languages is empty; give None (every language) or some")

  # -- the task ----------------------------------------------------------------

  @functools.cached_property
  def seqio_task(self):
    """The seqio Task or Mixture read (the `languages` sub-mixture if given)."""
    import seqio  # lazy: imports tensorflow
    for module in self.task_modules:
      importlib.import_module(module)
    names = set(seqio.TaskRegistry.names()) | set(seqio.MixtureRegistry.names())
    if self.task not in names:
      close = difflib.get_close_matches(self.task, sorted(names), n=3, cutoff=0.75)
      hint = f"; did you mean {', '.join(close)}?" if close else ""
      raise errors.ConfigError(
          f"unknown seqio task or mixture {self.task!r}{hint} (the generation ones are pretrain_{{xdae|xfnp}}_"
          "{text|sample_text|wiki40b|mc4}[_{lg}], see xtreme_tasks/pretraining.py; list them all with python -c "
          "\"import seqio, xtreme_tasks.pretraining; print(seqio.MixtureRegistry.names(), "
          "seqio.TaskRegistry.names())\")")
    if self.languages is not None:
      return self._sub_mixture()
    return seqio.get_mixture_or_task(self.task)

  def _sub_mixture(self):
    from xtreme_tasks import pretraining  # pylint: disable=g-import-not-at-top
    parts = self.task.split("_", 2)
    if len(parts) != 3 or parts[0] != "pretrain" or parts[1] not in pretraining.GENERATION_OBJECTIVES or \
        parts[2] not in pretraining.GENERATION_CORPORA:
      raise errors.ConfigError(f"SeqioSeq2SeqSource.languages is given but {self.task!r} is not a generation "
                               "mixture pretrain_{xdae|xfnp}_{text|sample_text|wiki40b|mc4}; leave languages None")
    name = f"{self.task}:{'.'.join(lg.replace('-', '_') for lg in self.languages)}"
    return pretraining.register_generation_mixture(parts[1], parts[2], self.languages, name=name)

  @functools.cached_property
  def members(self) -> tuple:
    """The seqio Tasks read: the task itself, or the mixture's tasks."""
    return tuple(getattr(self.seqio_task, "tasks", None) or (self.seqio_task,))

  @functools.cached_property
  def layout(self) -> str:
    """'xdae' or 'xfnp': `objective`, else derived from the task's features."""
    features = self.seqio_task.output_features
    objective = self.objective or ("xfnp" if all(k in features for k in TASK_FEATURES["xfnp"]) else "xdae")
    missing = [k for k in TASK_FEATURES[objective] if k not in features]
    if missing:
      raise errors.ConfigError(f"seqio task {self.task!r} has no feature(s) {', '.join(missing)}, which the "
                               f"{objective} batches need (its features: {', '.join(sorted(features))}); use a "
                               f"pretrain_{objective}_* task{'' if self.objective else ' or set objective'}")
    return objective

  @property
  def task_features(self) -> tuple:
    return TASK_FEATURES[self.layout]

  @functools.cached_property
  def vocab(self):
    """The vocabulary of the task's ids (its `vocab_size`, `bos_id`, `pad_id`)."""
    vocabulary = self.seqio_task.output_features["inputs"].vocabulary
    configured = getattr(vocabulary, "path", "") is None  # a LazyVocabulary of set_vocabulary / $..._VOCAB
    if self.vocabulary is not None:
      if not configured:
        raise errors.ConfigError(f"seqio task {self.task!r} has its own vocabulary {vocabulary!r}; leave "
                                 "SeqioSeq2SeqSource.vocabulary (VOCAB) unset")
      from xtreme_tasks import pretraining  # pylint: disable=g-import-not-at-top
      pretraining.set_vocabulary(self.vocabulary)
    vocab = getattr(vocabulary, "vocab", vocabulary)  # the plain vocabulary behind a seqio view
    if getattr(vocab, "bos_id", None) is None and self.layout == "xdae":
      raise errors.ConfigError(f"the vocabulary {vocab!r} of seqio task {self.task!r} has no BOS id (the xDAE "
                               "decoder's first input)")
    return vocab

  @property
  def pad_id(self) -> int:
    return int(getattr(self.vocab, "pad_id", 0) or 0)

  def _lengths(self) -> dict[str, int]:
    return {k: self.source_len if k == "inputs" else self.target_len for k in self.task_features}

  def _rows(self, host_index: int, host_count: int) -> range:
    return IndexedSource._rows(self, host_index, host_count)

  def tokens_per_batch(self, batch: dict) -> int:
    return int(np.sum(batch["input_mask"]) + np.sum(batch["target_mask"]))

  # -- the stream ----------------------------------------------------------------

  def _dataset(self, skip: int, host_index: int, host_count: int, chunk: int):
    """This host's shard of the examples, repeated, from example `skip` on, padded, in chunks of `chunk`."""
    import seqio  # lazy: imports tensorflow
    import tensorflow as tf
    task, lengths, pad = self.seqio_task, self._lengths(), self.pad_id  # pad_id sets the configured vocabulary
    shard = seqio.ShardInfo(host_index, host_count) if host_count > 1 else None
    ds = task.get_dataset(dict(lengths), split=self.split, shuffle=False, seed=self.seed, shard_info=shard,
                          num_epochs=None, try_in_mem_cache=False)
    if skip:
      ds = ds.skip(skip)

    def fixed(ex):
      out, sizes = {}, []
      for k, n in lengths.items():
        x = tf.cast(ex[k], tf.int32)[:n]
        sizes.append(tf.size(x))
        out[k] = tf.pad(x, [[0, n - tf.size(x)]], constant_values=pad if k in _ID_FEATURES else 0)
      out["lengths"] = tf.stack(sizes)
      return out

    return ds.map(fixed).batch(chunk).prefetch(1).with_options(stream_options())

  def _prepare(self, example: dict) -> Optional[dict]:
    """A row of the batch from a padded example (None: no input or no target token, skipped)."""
    lengths = np.asarray(example["lengths"]).reshape(-1)
    n_in, n_out = int(lengths[0]), int(lengths[1])
    if self.layout == "xfnp" and any(int(n) != n_out for n in lengths[1:]):
      raise errors.DataError(f"seqio task {self.task!r}: the xFNP target features {list(XFNP_TARGET_FEATURES)} "
                             f"have different lengths {lengths[1:].tolist()} in one example")
    if n_in == 0 or n_out == 0:
      return None
    ids = lambda k: np.asarray(example[k], np.int32)  # noqa: E731
    row = {"input_ids": ids("inputs"), "input_mask": (np.arange(self.source_len) < n_in).astype(np.int32),
           "targets": ids("targets"), "target_mask": (np.arange(self.target_len) < n_out).astype(np.int32)}
    if self.layout == "xdae":
      row["decoder_start"] = np.int32(self.vocab.bos_id)
    else:
      row.update({k: ids(k) for k in XFNP_TARGET_FEATURES[1:]})
    return row

  def _initial_state(self) -> dict:
    """the open stream, a saved stream state not re-opened yet (`StreamedSource._state`)."""
    return {"stream": None, "saved": None}

  def _open(self, cursor: int, host_index: int, host_count: int) -> Stream:
    """The stream at `cursor`: restored from the saved state if it is at `cursor`, else by skipping.

    `stream.skip` is the `dataset.skip` its pipeline was built with: a saved
    iterator only restores into the same pipeline, so the state records it.
    """
    saved, self._state["saved"] = self._state["saved"], None
    dataset = lambda skip, chunk: self._dataset(skip, host_index, host_count, chunk)  # noqa: E731
    return Stream.opened(self.seqio_task.name, dataset, cursor, self._prepare, self.max_lookahead,
                         saved if saved is not None and saved["cursor"] == cursor else None,
                         lambda data: np.frombuffer(data, np.int32))

  def _seek(self, position: int, host_index: int, host_count: int) -> None:
    """Positions the source before batch `position`; an open stream elsewhere closes (re-opens by skipping)."""
    st = self._state
    cursor = position * len(self._rows(host_index, host_count))
    if st["host"] != (host_index, host_count):
      st.update(stream=None, saved=None)
    if st["stream"] is not None and st["stream"].cursor != cursor:
      st["stream"] = None
    if st["saved"] is not None and st["saved"]["cursor"] != cursor:
      st["saved"] = None
    st.update(host=(host_index, host_count), position=position, last=None)

  # -- the trainer's interface -------------------------------------------------------

  def data_fingerprint(self, host_count: int = 1) -> dict:
    """What a saved input state belongs to: the task, its members' data and rates, the settings, the hosts."""
    mixture = self.seqio_task
    members = {}
    for task in self.members:
      rate = mixture.get_rate(task) if hasattr(mixture, "get_rate") else 1.0
      members[task.name] = {"source": describe_source(task.source), "rate": float(rate)}
    return {"task": mixture.name, "members": members, "objective": self.layout, "vocabulary": repr(self.vocab),
            "split": self.split, "hosts": host_count, "batch_size": self.batch_size, "seed": self.seed,
            "source_len": self.source_len, "target_len": self.target_len, "max_lookahead": self.max_lookahead}

  def _stream_state(self, position: int, host_index: int, host_count: int) -> dict:
    st = self._state
    if st["stream"] is not None:
      return {"stream": {**st["stream"].state(), "chunk": READ_CHUNK, "skip": st["stream"].skip}}
    if st["saved"] is not None:
      return {"stream": dict(st["saved"])}
    return {"stream": {"cursor": position * len(self._rows(host_index, host_count)), "pending": [], "iterator": None}}

  def _restored(self, state: Mapping) -> dict:
    return {"stream": None, "saved": dict(state["stream"])}

  def shape_batch(self, host_index: int = 0, host_count: int = 1) -> dict:
    """A batch with the shapes and dtypes of every batch (padding only); reads no data."""
    empty = {k: np.full(n, self.pad_id if k in _ID_FEATURES else 0, np.int32) for k, n in self._lengths().items()}
    row = self._prepare({**empty, "lengths": np.ones(len(empty), np.int32)})
    return stack([row for _ in self._rows(host_index, host_count)])

  def _build_batch(self, position: int, host_index: int, host_count: int) -> dict:
    st = self._state
    if st["stream"] is None:
      st["stream"] = self._open(position * len(self._rows(host_index, host_count)), host_index, host_count)
    return stack([st["stream"].take() for _ in self._rows(host_index, host_count)])

  def close(self) -> None:
    """Drops the open stream (it re-opens where it was on the next `batch`, by skipping)."""
    self._state.update(stream=None, last=None)
