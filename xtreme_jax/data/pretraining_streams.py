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

Resume: the number of documents (pairs) a host's rows have consumed from each
stream before batch p (its cursor) depends only on the language draws of
batches 0..p-1, so `batch(p)` is a pure function of (seed, p, host_index,
host_count, the data). Batches asked for in order continue the open streams;
`batch(p)` for any other p replays the draws of the batches before p (cheap:
no data is read) and re-opens the streams whose cursor changed with
`dataset.skip(cursor)` (which reads, but does not tokenize, the skipped
examples). A run resumed at position p therefore sees exactly the stream of an
uninterrupted run (with the same number of hosts).

Memory: one open tf.data iterator per language (pair) actually drawn, each
reading `READ_CHUNK` examples at a time (plus one prefetched chunk), and the
look-ahead buffer of skipped documents; no list of documents is ever built.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
from typing import Any, Callable, Mapping

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.pretraining_corpora import (
  VECO_ALPHA,
  PairFeatures,
  adjacent_pairs,
  alternating_kind,
  language_sampling_probs,
  segment_document,
)
from xtreme_jax.data.sources import IndexedSource, stack


READ_CHUNK = 64  # examples fetched from tf.data at a time (read ahead of the cursor, bounded)


def _unbatched(chunks):
  """The examples of an iterator of batched feature dicts, one dict at a time."""
  for chunk in chunks:
    for i in range(len(next(iter(chunk.values())))):
      yield {k: v[i] for k, v in chunk.items()}


class _Stream:
  """Examples of one task from document `cursor` on (cycling), prepared lazily; see the module docstring."""

  def __init__(self, name: str, iterator, cursor: int, prepare: Callable, max_lookahead: int):
    self.name, self.iterator, self.cursor, self.prepare = name, iterator, cursor, prepare
    self.max_lookahead = max_lookahead
    self.buffer: collections.deque = collections.deque()  # prepared examples cursor, cursor + 1, ...

  def _fetch(self):
    try:
      return self.prepare(next(self.iterator))
    except StopIteration:
      raise errors.DataError(f"seqio task {self.name!r} yields no examples") from None

  def take(self):
    """The prepared example at the cursor (or the first usable one after it); advances the cursor by one."""
    i = 0
    while True:
      if i == len(self.buffer):
        self.buffer.append(self._fetch())
      if self.buffer[i] is not None:
        item = self.buffer[i]
        break
      i += 1
      if i > self.max_lookahead:
        raise errors.DataError(f"seqio task {self.name!r}: {i} consecutive examples from example {self.cursor} "
                               "on give no usable pair (too short after tokenization)")
    self.buffer.popleft()
    self.cursor += 1
    return item


@dataclasses.dataclass(frozen=True, eq=False)
class SeqioPairSource(PairFeatures):
  """VecoPairSource's batches streamed from seqio tasks; see the module docstring.

  `vocabulary`: a path (relative to `data_dir` unless absolute) or a vocabulary
  object. `task_modules` are imported before the tasks are looked up (they
  register them). `counts` optionally overrides n per language (pair).
  """

  vocabulary: Any
  monolingual_tasks: Any = ()
  parallel_tasks: Any = ()
  split: str = "train"
  task_modules: tuple = ("xtreme_tasks.pretraining",)
  counts: Mapping | None = None
  data_dir: str | None = None
  segment_len: int = 64
  batch_size: int = 32
  alpha: float = VECO_ALPHA
  mono_mask_prob: float = 0.15
  bi_mask_prob: float = 0.25
  flip_prob: float = 0.5
  seed: int = 0
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

  @functools.cached_property
  def _state(self) -> dict:
    return {"host": None, "position": None, "cursors": {}, "streams": {}, "last": None}

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

  def _open(self, key: str, bilingual: bool, cursor: int, host_index: int, host_count: int) -> _Stream:
    import seqio  # lazy: imports tensorflow
    task = (self.bi_tasks if bilingual else self.mono_tasks)[key]
    shard = seqio.ShardInfo(host_index, host_count) if host_count > 1 else None
    ds = task.get_dataset(None, split=self.split, shuffle=False, shard_info=shard, num_epochs=None,
                          try_in_mem_cache=False)
    if cursor:
      ds = ds.skip(cursor)
    keys = ("source", "target") if bilingual else ("text",)
    ds = ds.map(lambda ex: {k: ex[k] for k in keys})  # other (maybe ragged) features would not batch
    # Read in chunks (tf.data's per-element overhead dominates otherwise); rows still consume one at a time.
    chunks = ds.batch(READ_CHUNK).prefetch(1).as_numpy_iterator()
    return _Stream(task.name, _unbatched(chunks), cursor, self._prepare_bi if bilingual else self._prepare_mono,
                   self.max_lookahead)

  def _seek(self, position: int, host_index: int, host_count: int) -> None:
    """Sets every cursor to its value before batch `position`; streams at another cursor are closed."""
    st = self._state
    same_host = st["host"] == (host_index, host_count)
    if same_host and st["position"] is not None and st["position"] <= position:
      cursors = self.cursors(position, host_index, host_count, start=st["position"], initial=st["cursors"])
    else:
      cursors = self.cursors(position, host_index, host_count)
    streams = st["streams"] if same_host else {}
    st.update(host=(host_index, host_count), position=position, cursors=cursors, last=None,
              streams={k: s for k, s in streams.items() if s.cursor == cursors.get(k, 0)})

  def batch(self, position: int, host_index: int = 0, host_count: int = 1) -> dict:
    """This host's rows of global batch `position`; equal to what an uninterrupted run gives."""
    st = self._state
    rows = self._rows(host_index, host_count)
    if st["last"] is not None and st["last"][0] == (position, host_index, host_count):
      return dict(st["last"][1])
    if st["host"] != (host_index, host_count) or st["position"] != position:
      self._seek(position, host_index, host_count)
    st["position"] = None  # until the batch is complete: a failed batch makes the next call re-seek
    bilingual = self.is_bilingual_batch(position)
    keys = self.row_languages(position)
    lang_ids = {l: i for i, l in enumerate(self.languages_index)}
    out = []
    for row in rows:
      key = keys[row]
      stream = st["streams"].get(key)
      if stream is None:
        stream = st["streams"][key] = self._open(key, bilingual, st["cursors"].get(key, 0), host_index, host_count)
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
    result = stack(out)
    st["position"] = position + 1
    st["last"] = ((position, host_index, host_count), result)
    return dict(result)

  def close(self) -> None:
    """Drops the open streams (they re-open where they were on the next `batch`)."""
    self._state.update(streams={}, last=None)
