"""VECO / XLM pretraining pairs streamed from seqio tasks (corpora of any size; memory bounded).

`SeqioPairSource` gives exactly the feature dict of
`pretraining_corpora.VecoPairSource` (same shapes, dtypes and layout, built by
the shared `PairFeatures.pair_features`, `tlm_language_ids` included) but
reads its text from seqio tasks (`xtreme_tasks.pretraining`: files, wiki40b,
mC4, OPUS) one example at a time instead of holding the corpora in memory.

Tasks
  `monolingual_tasks` yield a `text` feature (a document, sentences separated
  by "\\n"); `parallel_tasks` yield `source` / `target`. Each is given as a
  mapping language (pair `src-tgt`) -> task name, or as a sequence of task
  names whose source carries `pretrain_language` / `pretrain_language_pair`
  (as every task of `xtreme_tasks.pretraining` does). The language index
  (`languages_index`, which `x_language_id`, `y_language_id` and
  `tlm_language_ids` index) is the sorted set of the configured languages
  (both sides of the pairs), fixed by the configuration, not by the data.

Sampling (as VecoPairSource): batch `p` is monolingual when p is even and
bilingual when p is odd (one kind only if only one kind of task is given).
The language (pair) of every row of batch p is drawn with probability
proportional to n^alpha, n = `num_input_examples(split)` of its task (TFDS
split metadata, or the file's document count; tasks without a size are
counted by reading their stream once) or `counts[key]` if given. The draws
of a whole batch come from one generator `rng(seed, p)` (vectorised: about
50 us per batch of 1,024 rows, so 500,000 batches replay in under half a
minute); everything else about row r comes from `rng(seed, p, r)`.

Rows
  * monolingual: the row takes the *next* document of its language's stream,
    segments it (`segment_document`, `adjacent_pairs`) and picks one adjacent
    segment pair uniformly, flipped with probability `flip_prob`. A document
    that gives no pair (fewer than two tokens) is skipped: the row looks ahead
    to the first following document that gives one (at most `max_lookahead`
    documents) without consuming it, so that every row consumes exactly one
    document (the next row of that language takes the looked-at document
    again).
  * bilingual: the next pair of the pair's stream, each side truncated to
    `segment_len` tokens (a pair with no token on one side is skipped the
    same way).
  Streams cycle (repeat) at their end. Tasks are read with `shuffle=False`,
  and with `shard_info=(host_index, host_count)` when there are several hosts,
  so each host reads its own shard of every stream (a stream with fewer usable
  documents than hosts leaves some host's shard without any: that host raises).

Resume: every checkpoint holds each host's input state (`input_state`): the
position, the number of documents (pairs) each stream has consumed (its
cursor), and for every open stream the examples it has read but not consumed
(the rest of the chunk it reads from, the look-ahead included) plus the
checkpoint of its tf.data iterator (`tf.train.Checkpoint`: the file offsets
of TextLineDataset / TFRecordDataset readers, the prefetch buffer, the repeat
epoch). `restore_input_state` re-builds each stream's pipeline and restores
its iterator, which seeks in the files instead of reading up to the cursor:
resuming costs the streams' set-up plus one chunk each, whatever the position.
The language draws need no state (batch p's come from `rng(seed, p)`). We
chose the iterator checkpoint over a seekable position (TFDS split slicing)
because it applies after seqio's preprocessing, empty-document filter and
per-host sharding, and to text-file tasks as well as TFDS. A stream whose
pipeline cannot be checkpointed (a Python generator, `tf.py_function`) is
saved as its cursor alone and resumes by skipping (with a warning).

The state records the data it belongs to (`data_fingerprint`: tasks, their
sources and sizes, sampling settings, the number of hosts); restoring it into
a source of other data is a ConfigError naming what changed. Without a saved
state (a checkpoint of an older version, or `batch(p)` asked for out of
order) the source falls back to replaying: the cursors follow from the
language draws of batches 0..p-1 (no data read), and each stream re-opens
with `dataset.skip(cursor)`, which reads every skipped example. Either way a
run resumed at position p sees exactly the stream of an uninterrupted run
(with the same number of hosts).

Memory: one open tf.data iterator per language (pair) actually drawn, each
reading `READ_CHUNK` examples at a time (plus one prefetched chunk), and the
look-ahead buffer of skipped documents; no list of documents is ever built.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Any, Mapping

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.pretraining.pretraining_corpora import (
  PairFeatures,
  adjacent_pairs,
  alternating_kind,
  language_sampling_probs,
  segment_document,
)
from xtreme_jax.data.features.sources import IndexedSource, stack
from xtreme_jax.data.pretraining.stream_state import READ_CHUNK, Stream, StreamedSource, describe_source, stream_options


@dataclasses.dataclass(frozen=True, eq=False)
class SeqioPairSource(StreamedSource, PairFeatures):
  """VecoPairSource's batches streamed from seqio tasks; see the module docstring.

  `vocabulary`: a path (relative to `data_dir` unless absolute) or a vocabulary
  object. `task_modules` are imported before the tasks are looked up (they
  register them). `counts` optionally overrides n per language (pair).
  """

  state_keys = ("cursors", "streams")  # `StreamedSource`

  vocabulary: Any
  monolingual_tasks: Any = ()
  parallel_tasks: Any = ()
  split: str = "train"
  task_modules: tuple = ("xtreme_tasks.pretraining",)
  counts: Mapping | None = None
  data_dir: str | None = None
  max_lookahead: int = 1000

  def __post_init__(self):
    if self.vocabulary is None:
      raise errors.ConfigError("SeqioPairSource needs a vocabulary (a path or a vocabulary object); in Gin set VOCAB")
    for name in ("monolingual_tasks", "parallel_tasks", "task_modules"):
      value = getattr(self, name)
      if isinstance(value, str):
        object.__setattr__(self, name, (value,))
      elif not isinstance(value, Mapping):
        object.__setattr__(self, name, tuple(value))
    if not self.monolingual_tasks and not self.parallel_tasks:
      raise errors.ConfigError("SeqioPairSource needs monolingual_tasks, parallel_tasks or both")
    self._check_pair_args()

  # -- tasks -----------------------------------------------------------------

  def _resolve(self, tasks, bilingual: bool) -> dict[str, Any]:
    import seqio  # lazy: imports tensorflow
    for module in self.task_modules:
      importlib.import_module(module)
    if isinstance(tasks, Mapping):
      named = dict(tasks)
    else:
      named = {}
      attr = "pretrain_language_pair" if bilingual else "pretrain_language"
      for name in tasks:
        label = getattr(seqio.get_mixture_or_task(name).source, attr, None)
        if label is None:
          raise errors.ConfigError(f"the source of seqio task {name!r} has no `{attr}`; give "
                                   f"{'parallel' if bilingual else 'monolingual'}_tasks as a mapping "
                                   f"{'src-tgt' if bilingual else 'language'} -> task name")
        key = "-".join(label) if bilingual else label
        if key in named:
          raise errors.ConfigError(f"seqio tasks {named[key]!r} and {name!r} are both for {key!r}; give a mapping")
        named[key] = name
    out = {}
    for key, name in sorted(named.items()):
      if bilingual and (not isinstance(key, str) or key.count("-") != 1):
        raise errors.ConfigError(f"language pair {key!r}; expected 'src-tgt'")
      task = seqio.get_mixture_or_task(name)
      features = ("source", "target") if bilingual else ("text",)
      missing = [f for f in features if f not in task.output_features]
      if missing:
        raise errors.ConfigError(f"seqio task {name!r} ({key}) has no output feature(s) {missing}; "
                                 f"{'parallel' if bilingual else 'monolingual'} tasks yield {list(features)}")
      out[key] = task
    return out

  @functools.cached_property
  def mono_tasks(self) -> dict[str, Any]:
    """language -> seqio Task, languages sorted."""
    return self._resolve(self.monolingual_tasks, False) if self.monolingual_tasks else {}

  @functools.cached_property
  def bi_tasks(self) -> dict[str, Any]:
    """'src-tgt' -> seqio Task, sorted."""
    return self._resolve(self.parallel_tasks, True) if self.parallel_tasks else {}

  @functools.cached_property
  def languages_index(self) -> tuple:
    """The configured languages (monolingual and both sides of pairs), sorted; `*_language_id(s)` index it."""
    langs = set(self.mono_tasks)
    for key in self.bi_tasks:
      langs.update(key.split("-"))
    return tuple(sorted(langs))

  def _count(self, task) -> int:
    try:
      n = task.num_input_examples(self.split)
    except Exception:  # e.g. TFDS data without split metadata
      n = None
    if not n or n <= 0:
      ds = task.get_dataset(None, split=self.split, shuffle=False, try_in_mem_cache=False)
      n = int(ds.reduce(np.int64(0), lambda count, _: count + 1))
    return int(n)

  @functools.cached_property
  def example_counts(self) -> dict[str, int]:
    """n per language (pair): `counts`, else the task's `num_input_examples`, else counted from the stream."""
    given = dict(self.counts or {})
    out = {}
    for key, task in (*self.mono_tasks.items(), *self.bi_tasks.items()):
      out[key] = int(given[key]) if key in given else self._count(task)
    return out

  @functools.cached_property
  def _tables(self) -> dict[bool, tuple[list[str], np.ndarray]]:
    """kind -> (keys sorted, cdf of their n^alpha probabilities)."""
    out = {}
    for bilingual, tasks in ((False, self.mono_tasks), (True, self.bi_tasks)):
      if tasks:
        probs = language_sampling_probs({k: self.example_counts[k] for k in tasks}, self.alpha)
        keys = sorted(probs)
        cdf = np.cumsum([probs[k] for k in keys])
        cdf[-1] = 1.0
        out[bilingual] = (keys, cdf)
    return out

  @property
  def mono_probs(self) -> dict[str, float]:
    return language_sampling_probs({k: self.example_counts[k] for k in self.mono_tasks}, self.alpha) \
        if self.mono_tasks else {}

  @property
  def bi_probs(self) -> dict[str, float]:
    return language_sampling_probs({k: self.example_counts[k] for k in self.bi_tasks}, self.alpha) \
        if self.bi_tasks else {}

  # -- addressing ------------------------------------------------------------

  def is_bilingual_batch(self, position: int) -> bool:
    return alternating_kind(position, bool(self.mono_tasks), bool(self.bi_tasks))

  def _rows(self, host_index: int, host_count: int) -> range:
    return IndexedSource._rows(self, host_index, host_count)

  def row_draws(self, position: int) -> np.ndarray:
    """Index (into the sorted keys of the batch's kind) of the language (pair) of every row of batch `position`."""
    keys, cdf = self._tables[self.is_bilingual_batch(position)]
    u = np.random.default_rng((self.seed, position)).random(self.batch_size)
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(keys) - 1)

  def row_languages(self, position: int) -> list[str]:
    keys, _ = self._tables[self.is_bilingual_batch(position)]
    return [keys[i] for i in self.row_draws(position)]

  def cursors(self, position: int, host_index: int = 0, host_count: int = 1,
              start: int = 0, initial: Mapping[str, int] | None = None) -> dict[str, int]:
    """Examples of each stream consumed by this host's rows of batches `start`..`position - 1`
    (added to `initial`): replays the language draws only."""
    rows = self._rows(host_index, host_count)
    totals = {kind: np.zeros(len(keys), np.int64) for kind, (keys, _) in self._tables.items()}
    for p in range(start, position):
      totals[self.is_bilingual_batch(p)] += np.bincount(self.row_draws(p)[rows.start:rows.stop],
                                                        minlength=len(totals[self.is_bilingual_batch(p)]))
    out = dict(initial or {})
    for kind, (keys, _) in self._tables.items():
      for key, n in zip(keys, totals[kind].tolist()):
        out[key] = out.get(key, 0) + n
    return out

  # -- streams ---------------------------------------------------------------

  def _initial_state(self) -> dict:
    """cursors, open streams, saved stream states not re-opened yet (`StreamedSource._state`)."""
    return {"cursors": {}, "streams": {}, "saved": {}}

  def _prepare_mono(self, example: dict):
    text = example["text"]
    text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
    sentences = [s.strip() for s in text.split("\n")]
    pairs = adjacent_pairs(segment_document([self.vocab.encode(s) for s in sentences if s], self.segment_len))
    return pairs or None

  def _prepare_bi(self, example: dict):
    n = self.segment_len
    sides = [example[k].decode("utf-8") if isinstance(example[k], bytes) else str(example[k])
             for k in ("source", "target")]
    x, y = (self.vocab.encode(s.strip())[:n] for s in sides)
    return (x, y) if x and y else None

  def _dataset(self, task, bilingual: bool, skip: int, host_index: int, host_count: int, chunk: int):
    """The task's examples (this host's shard, repeated, from example `skip` on) in chunks of `chunk`."""
    import seqio  # lazy: imports tensorflow
    shard = seqio.ShardInfo(host_index, host_count) if host_count > 1 else None
    ds = task.get_dataset(None, split=self.split, shuffle=False, shard_info=shard, num_epochs=None,
                          try_in_mem_cache=False)
    if skip:
      ds = ds.skip(skip)
    keys = ("source", "target") if bilingual else ("text",)
    ds = ds.map(lambda ex: {k: ex[k] for k in keys})  # other (maybe ragged) features would not batch
    # Read in chunks (tf.data's per-element overhead dominates otherwise); rows still consume one at a time.
    return ds.batch(chunk).prefetch(1).with_options(stream_options())

  def _open(self, key: str, bilingual: bool, host_index: int, host_count: int) -> Stream:
    """The stream of `key` at its cursor: restored from its saved state if there is one, else by skipping."""
    st = self._state
    task = (self.bi_tasks if bilingual else self.mono_tasks)[key]
    dataset = lambda skip, chunk: self._dataset(task, bilingual, skip, host_index, host_count, chunk)  # noqa: E731
    return Stream.opened(task.name, dataset, st["cursors"].get(key, 0),
                         self._prepare_bi if bilingual else self._prepare_mono, self.max_lookahead,
                         st["saved"].pop(key, None))

  def _seek(self, position: int, host_index: int, host_count: int) -> None:
    """Sets every cursor to its value before batch `position` (replaying draws); streams at another cursor close."""
    st = self._state
    same_host = st["host"] == (host_index, host_count)
    if same_host and st["position"] is not None and st["position"] <= position:
      cursors = self.cursors(position, host_index, host_count, start=st["position"], initial=st["cursors"])
    else:
      cursors = self.cursors(position, host_index, host_count)
    streams, saved = (st["streams"], st["saved"]) if same_host else ({}, {})
    st.update(host=(host_index, host_count), position=position, cursors=cursors, last=None,
              streams={k: s for k, s in streams.items() if s.cursor == cursors.get(k, 0)},
              saved={k: s for k, s in saved.items() if s["cursor"] == cursors.get(k, 0)})

  # -- checkpointed state ----------------------------------------------------

  def data_fingerprint(self, host_count: int = 1) -> dict:
    """What a saved input state belongs to: the tasks (source, size), the sampling settings, the number of hosts."""
    streams = {}
    for key, task in (*self.mono_tasks.items(), *self.bi_tasks.items()):
      streams[key] = {"task": task.name, "source": describe_source(task.source),
                      "examples": self.example_counts[key]}
    return {"streams": streams, "split": self.split, "hosts": host_count, "batch_size": self.batch_size,
            "seed": self.seed, "alpha": self.alpha, "segment_len": self.segment_len,
            "mask_probs": [self.mono_mask_prob, self.bi_mask_prob], "flip_prob": self.flip_prob,
            "max_lookahead": self.max_lookahead}

  def _stream_state(self, position: int, host_index: int, host_count: int) -> dict:
    st = self._state
    streams = {k: dict(v) for k, v in st["saved"].items()}
    streams.update({k: {**s.state(), "chunk": READ_CHUNK} for k, s in st["streams"].items()})
    return {"cursors": dict(st["cursors"]), "streams": streams}

  def _restored(self, state: Mapping) -> dict:
    return {"cursors": dict(state["cursors"]), "streams": {},
            "saved": {k: dict(v) for k, v in state["streams"].items()}}

  def shape_batch(self, host_index: int = 0, host_count: int = 1) -> dict:
    """A batch with the shapes and dtypes of every batch (arbitrary values); reads no data."""
    v = self.vocab
    rng = np.random.default_rng(0)
    return stack([self.pair_features([v.cls_id], [v.cls_id], 0, 0, False, rng)
                  for _ in self._rows(host_index, host_count)])

  def _build_batch(self, position: int, host_index: int, host_count: int) -> dict:
    st = self._state
    rows = self._rows(host_index, host_count)
    bilingual = self.is_bilingual_batch(position)
    keys = self.row_languages(position)
    lang_ids = {l: i for i, l in enumerate(self.languages_index)}
    out = []
    for row in rows:
      key = keys[row]
      stream = st["streams"].get(key)
      if stream is None:
        stream = st["streams"][key] = self._open(key, bilingual, host_index, host_count)
      item = stream.take()
      st["cursors"][key] = stream.cursor
      rng = np.random.default_rng((self.seed, position, row))
      if bilingual:
        x, y = item
        x_lang, y_lang = key.split("-")
      else:
        x, y = item[int(rng.integers(len(item)))]
        if rng.random() < self.flip_prob:
          x, y = y, x
        x_lang = y_lang = key
      out.append(self.pair_features(x, y, lang_ids[x_lang], lang_ids[y_lang], bilingual, rng))
    return stack(out)

  def close(self) -> None:
    """Drops the open streams (they re-open where they were on the next `batch`, by skipping)."""
    self._state.update(streams={}, last=None)
