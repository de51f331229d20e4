"""seqio Tasks and Mixtures for every XTREME task, language and fine-tuning setting.

Importing this module (`import xtreme_tasks.xtreme`) registers everything
below; importing or reloading it again re-registers the same names (each name
is removed from the seqio registry before it is added).

Data
----
Examples come from `xtreme_jax.data.readers.xtreme_data.XtremeData` (`data()`): by
default the plain-Python readers in `xtreme_jax.data.readers.xtreme_readers`, which
read the official XTREME `download/` layout; with `set_data_source("tfds")`
(or `$XTREME_JAX_DATA_SOURCE=tfds`) the TFDS builders (`xtreme_tfds`, never
downloading), with the same example schemas. The directory is looked up when
a dataset is *built* (never at import): `set_data_dir(path)` wins, else the
environment variable `XTREME_JAX_DATA_DIR`; with neither, building a dataset
of the official source raises a ValueError that names both (for TFDS it is
the TFDS data dir, unset: TFDS's default). Nothing here touches the network.

Every Task uses an `XtremeSource` (a `seqio.FunctionDataSource`) whose splits
are the splits the reader registry (`xtreme_readers.TASKS`) lists for that
language, and yields raw text, untokenized (the project's feature converters
tokenize later). Output features are declared as
`seqio.Feature(PassThroughVocabulary(size=0), add_eos=False, dtype=..., rank=...)`
for *every* field, because `seqio.Mixture.get_dataset` keeps only the declared
output features of each example. Features, per task family:

* xnli, pawsx: `id`, `text_a`, `text_b`, `label` (scalar strings; `label` is ``""``
  in the unlabeled test files).
* panx, udpos: `id` (scalar), `tokens`, `tags` (1-D string vectors; `tags` is
  empty in the token-only test files).
* squad, xquad, mlqa, tydiqa: `id`, `orig_id`, `title`, `context`, `question`
  (scalar strings), `answers/text` (1-D string), `answers/answer_start` (1-D int32).
* bucc2018: ONE example per (language, split) holding the whole corpus as 1-D
  string vectors: `source_id`, `source`, `target_id`, `target` (the `{lg}` and
  `en` sides, file order) and the gold pairs as two aligned vectors
  `gold_source_id`, `gold_target_id` (empty for test, whose gold is not public).
* tatoeba: ONE example per language: `source`, `target` (1-D, line-aligned).

Registered names (`{lg}` ranges over the reader registry's languages)
-----------------------------------------------------------------------
Tasks
* `xtreme_{task}_{lg}` for task in xnli pawsx panx udpos xquad mlqa tydiqa
  bucc2018 tatoeba squad (squad: `en` only; train + dev).
* `xtreme_{task}_{lg}_eval` for panx, udpos, tydiqa and every non-English
  language that has a train split: the same data without the train split
  (members of the zero-shot mixtures, so that their `train` split is English only).
* `xtreme_{task}_{lg}_fewshot1000` for panx, udpos, tydiqa and every language
  with a train split: the train split keeps the first 1,000 examples in file
  order (deterministic); dev / test are complete.
* Every benchmark task's language of a fine-tuned task (xnli pawsx panx udpos
  xquad mlqa tydiqa) has `metric_fns`: the official metrics of that language
  (`scorer.score_examples`) of `metric(targets, predictions)`, the Task's
  examples and the predicted labels / tag lists / {question id: answer}.
* `xtreme_{task}_en_multitask` for xnli pawsx panx udpos squad tydiqa: English
  data in the union schema of all three families plus a scalar `task` feature
  (fields a family lacks are ``""`` or empty vectors), so that one Mixture can
  sample across families.

Mixtures (settings of METHODS.md "XTREME / XGLUE fine-tuning settings")
* `xtreme_{task}_zero_shot` for the nine benchmark tasks: the English training
  task plus every evaluated language. `get_dataset(split="train")` yields
  English training data only (xquad / mlqa train on `xtreme_squad_en`, as the
  official recipe; tydiqa on `xtreme_tydiqa_en`); the sub-task list covers every
  language for evaluation. bucc2018 / tatoeba are not fine-tuned in XTREME, so
  their zero-shot mixtures have no train split (evaluation only).
* `xtreme_{task}_in_language_{lg}` for panx, udpos, tydiqa: that language's own
  train / dev / test.
* `xtreme_{task}_in_language_fewshot_{lg}` for the same: its first 1,000
  training examples (the task `xtreme_{task}_{lg}_fewshot1000`).
* `xtreme_{task}_in_language_all` for panx, udpos, tydiqa: every language's
  train data (multi-task over languages) and every language for evaluation.
* `xtreme_multitask`: English training data of xnli, pawsx, panx, udpos, squad
  (the training data of xquad / mlqa) and tydiqa.

Mixing rates: a mixture with one training task uses rate 1. The
multi-source mixtures (`*_in_language_all`, `xtreme_multitask` and the
translate-train mixtures below) sample each task
in proportion to its number of training examples (examples-proportional
mixing, i.e. the same distribution as shuffling the concatenated training
sets); counts are read lazily when the mixture's dataset is built.

Translations: translate-train, translate-test, pseudo test sets
---------------------------------------------------------------
Read by `xtreme_jax.data.translation.xtreme_translations` (its docstring fixes the layout)
from the translations directory, a local copy of `gs://xtreme_translations`
(`gsutil -m cp -r gs://xtreme_translations/* <data_dir>/translations/`):
`set_translations_dir(path)` wins, else `$XTREME_JAX_TRANSLATIONS_DIR`, else
`<data dir>/translations`. Records have the same features as the original
task's (translate-train rows are the translated pair / SQuAD question).

Tasks (one split each)
* `xtreme_{src}_translate_train_{lg}` (train) for src in xnli, pawsx, squad,
  tydiqa and every non-English language with a translation (squad: the XQuAD
  languages; it is the translate-train data of both xquad and mlqa).
* `xtreme_{task}_translate_test_{lg}` (test) for xnli, pawsx, xquad, mlqa and
  every non-English language: the test set translated into English, with the
  ids of the original test examples (line-aligned; checked against the
  original test file when the dataset is built).
* `xtreme_{task}_pseudo_{lg}` (test) for xnli and xquad and every
  `xtreme_translations.PSEUDO_LANGUAGES[task]` language (the PAN-X languages
  the task does not cover): the English test set machine-translated into
  `{lg}`, with gold labels / answers.

Mixtures (English training data as in `xtreme_{task}_zero_shot`; the
evaluation members are the zero-shot mixture's, i.e. every language's test set;
examples-proportional rates, as concatenating the training sets)
* `xtreme_{task}_translate_train_en_{lg}` for xnli, pawsx, xquad, mlqa, tydiqa:
  train = English + the translation into `{lg}` (translate-train, one model
  per target language).
* `xtreme_{task}_translate_train_all`: train = English + every translation of
  the task's training data (xquad and mlqa: all SQuAD translations). Its
  members are fixed at registration, so building it needs every translation
  file; the run mode's `translate_train_all` uses the files it finds.
* `xtreme_{task}_translate_test` for xnli, pawsx, xquad, mlqa: train = English;
  evaluation on English's own test set and every `translate_test` task.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import seqio
import tensorflow as tf

from xtreme_jax.data.readers import xtreme_readers as readers
from xtreme_jax.data.translation import xtreme_translations as translations
from xtreme_jax.data.readers.xtreme_data import SOURCES, XtremeData
from xtreme_jax.evaluation import scorer
from xtreme_jax.registry import XTREME, BenchmarkSpec
from xtreme_jax.runs.fine_tuning import (FEWSHOT_SIZE, IN_LANGUAGE_TASKS, SETTINGS, TRANSLATE_TEST_TASKS,
                                         TRANSLATE_TRAIN_SOURCE)

DATA_DIR_ENV = "XTREME_JAX_DATA_DIR"
TRANSLATIONS_DIR_ENV = "XTREME_JAX_TRANSLATIONS_DIR"
DATA_SOURCE_ENV = "XTREME_JAX_DATA_SOURCE"

# From the task registry (`xtreme_jax.registry.xtreme`).
BENCHMARK_TASKS = XTREME.task_names
ALL_TASKS = BENCHMARK_TASKS + tuple(t.name for t in XTREME.extra_tasks)
# Zero-shot training data of each benchmark task (None: not fine-tuned).
ZERO_SHOT_TRAIN = {t.name: t.train[0] if t.train else None for t in XTREME.tasks}
MULTITASK_TASKS = tuple(dict.fromkeys(t.train[0] for t in XTREME.tasks if t.train))
PSEUDO_TASKS = XTREME.where(pseudo_test=True)

# Kept across importlib.reload (re-registration must not forget the configured directory).
_data_dir: Optional[str] = globals().get("_data_dir")
_translations_dir: Optional[str] = globals().get("_translations_dir")
_data_source: Optional[str] = globals().get("_data_source")


def set_data_dir(path: Optional[Union[str, os.PathLike]]) -> None:
  """Sets the XTREME `download/` directory read when datasets are built (None clears it)."""
  global _data_dir
  _data_dir = None if path is None else os.fspath(path)


def get_data_dir() -> str:
  """The directory from `set_data_dir`, else `$XTREME_JAX_DATA_DIR`; raises a clear error if neither."""
  path, origin = _data_dir, "set_data_dir()"
  if not path:
    path, origin = os.environ.get(DATA_DIR_ENV), f"${DATA_DIR_ENV}"
  if not path:
    raise ValueError(
        f"The XTREME data directory is not set: call xtreme_tasks.xtreme.set_data_dir(path) or set the "
        f"environment variable {DATA_DIR_ENV} to the `download/` directory left by the official XTREME "
        f"scripts/download_data.sh.")
  if not os.path.isdir(path):
    raise FileNotFoundError(f"The XTREME data directory {path!r} (from {origin}) does not exist or is not a "
                            f"directory; point set_data_dir() or ${DATA_DIR_ENV} at the `download/` directory.")
  return path


def set_translations_dir(path: Optional[Union[str, os.PathLike]]) -> None:
  """Sets the translations directory (a copy of gs://xtreme_translations); None: the default."""
  global _translations_dir
  _translations_dir = None if path is None else os.fspath(path)


def get_translations_dir() -> str:
  """`set_translations_dir`, else `$XTREME_JAX_TRANSLATIONS_DIR`, else `<get_data_dir()>/translations`."""
  path = _translations_dir or os.environ.get(TRANSLATIONS_DIR_ENV)
  return path if path else translations.default_dir(get_data_dir())


def set_data_source(source: Optional[str]) -> None:
  """"official" (the `download/` layout, default) or "tfds" (the TFDS builders); None: the default."""
  global _data_source
  if source is not None and source not in SOURCES:
    raise ValueError(f"data source {source!r}; expected one of {SOURCES}")
  _data_source = source


def get_data_source() -> str:
  """`set_data_source`, else `$XTREME_JAX_DATA_SOURCE`, else "official"."""
  source = _data_source or os.environ.get(DATA_SOURCE_ENV) or "official"
  if source not in SOURCES:
    raise ValueError(f"${DATA_SOURCE_ENV}={source!r}; expected one of {SOURCES}")
  return source


def data() -> XtremeData:
  """The configured data: the official layout under `get_data_dir()`, or TFDS with the data dir as
  the TFDS data dir (unset: TFDS's default) and translations only from an explicitly set directory."""
  if get_data_source() == "tfds":
    return XtremeData("tfds", _data_dir or os.environ.get(DATA_DIR_ENV) or None,
                      _translations_dir or os.environ.get(TRANSLATIONS_DIR_ENV) or None)
  return XtremeData("official", get_data_dir(), get_translations_dir())


# ----------------------------------------------------------------------------- schemas

_S, _I = tf.string, tf.int32
FAMILY_FEATURES: dict[str, dict[str, tuple[tf.DType, int]]] = {
    "pair": {"id": (_S, 0), "text_a": (_S, 0), "text_b": (_S, 0), "label": (_S, 0)},
    "tagging": {"id": (_S, 0), "tokens": (_S, 1), "tags": (_S, 1)},
    "qa": {"id": (_S, 0), "orig_id": (_S, 0), "title": (_S, 0), "context": (_S, 0), "question": (_S, 0),
           "answers/text": (_S, 1), "answers/answer_start": (_I, 1)},
    "bucc": {k: (_S, 1) for k in ("source_id", "source", "target_id", "target", "gold_source_id",
                                   "gold_target_id")},
    "tatoeba": {"source": (_S, 1), "target": (_S, 1)},
}
# Ranking rows (XGLUE WPR) are pairs with their query group (`xglue_readers.query_groups`).
FAMILY_FEATURES["ranking"] = {**FAMILY_FEATURES["pair"], "group": (_I, 0)}
FAMILY_OF_KIND = {"pair_classification": "pair", "ranking": "ranking", "tagging": "tagging", "span_qa": "qa",
                  "bitext_mining": "bucc", "similarity_search": "tatoeba"}
TASK_FAMILY = {name: FAMILY_OF_KIND[spec.kind] for name, spec in XTREME.specs.items()}
# One schema for multi-task mixtures over families: the union plus the task name.
UNION_FEATURES = {"task": (_S, 0), **{k: v for fam in ("pair", "tagging", "qa")
                                      for k, v in FAMILY_FEATURES[fam].items()}}


def _pair_rows(data: list[dict]) -> list[dict]:
  return [{**ex, "label": "" if ex["label"] is None else ex["label"]} for ex in data]


def _tagging_rows(data: list[dict]) -> list[dict]:
  return [{**ex, "tags": [] if ex["tags"] is None else ex["tags"]} for ex in data]


def _qa_rows(data: list[dict]) -> list[dict]:
  return [{"id": ex["id"], "orig_id": ex["orig_id"], "title": ex["title"], "context": ex["context"],
           "question": ex["question"], "answers/text": ex["answers"]["text"],
           "answers/answer_start": ex["answers"]["answer_start"]} for ex in data]


def _bucc_rows(data: dict) -> list[dict]:
  gold = data["gold"] or []
  return [{"source_id": [i for i, _ in data["source"]], "source": [s for _, s in data["source"]],
           "target_id": [i for i, _ in data["target"]], "target": [s for _, s in data["target"]],
           "gold_source_id": [s for s, _ in gold], "gold_target_id": [t for _, t in gold]}]


def _tatoeba_rows(data: dict) -> list[dict]:
  return [{"source": list(data["source"]), "target": list(data["target"])}]


_ROWS = {"pair": _pair_rows, "ranking": _pair_rows, "tagging": _tagging_rows, "qa": _qa_rows, "bucc": _bucc_rows,
         "tatoeba": _tatoeba_rows}
_EMPTY = {0: "", 1: []}


def dataset_from_rows(rows: Sequence[Mapping[str, Any]], features: Mapping[str, tuple]) -> tf.data.Dataset:
  """A tf.data.Dataset of `rows`: rank-0 features as scalars, rank-1 as variable-length 1-D tensors."""
  columns = {}
  for key, (dtype, rank) in features.items():
    if rank == 0:
      columns[key] = tf.constant([r[key] for r in rows], dtype=dtype, shape=[len(rows)])
    else:
      flat = [v for r in rows for v in r[key]]
      columns[key] = tf.RaggedTensor.from_row_lengths(
          tf.constant(flat, dtype=dtype, shape=[len(flat)]),
          tf.constant([len(r[key]) for r in rows], dtype=tf.int64, shape=[len(rows)]))
  ds = tf.data.Dataset.from_tensor_slices(columns)
  # Slices of a ragged tensor come out with a (ragged_rank 0) RaggedTensorSpec; map them to plain
  # TensorSpecs so that padded_batch and the feature converters see ordinary tensors.
  return ds.map(lambda ex: {k: tf.identity(v) for k, v in ex.items()})


class XtremeSource(seqio.FunctionDataSource):
  """Examples of one (task, language) from `xtreme_readers`, read when the dataset is built.

  Args:
    task, language: a task of `xtreme_readers.TASKS` and one of its languages.
    splits: the splits offered (a subset of the reader's splits for `language`).
    train_limit: keep only the first `train_limit` examples of the train split.
    union_schema: emit `UNION_FEATURES` (multi-task mixtures) instead of the family's features.
    kind: read the `xtreme_translations` file of this kind (translate_train,
      translate_test, pseudo_test) instead of the official layout.
    benchmark, data_fn: the task's benchmark spec and a function returning the
      data object read through (`read`, `location`); default XTREME and `data()`.
  """

  def __init__(self, task: str, language: str, splits: Sequence[str], train_limit: Optional[int] = None,
               union_schema: bool = False, kind: Optional[str] = None, benchmark: BenchmarkSpec = XTREME,
               data_fn: Optional[Callable] = None):
    self.task, self.language, self.train_limit, self.union_schema = task, language, train_limit, union_schema
    self.kind = kind
    self._data = data_fn or data
    self.family = FAMILY_OF_KIND[benchmark.task(task).kind]
    self.features = UNION_FEATURES if union_schema else FAMILY_FEATURES[self.family]
    self._counts: dict[tuple, int] = {}
    super().__init__(dataset_fn=self._dataset_fn, splits=tuple(splits))

  def __repr__(self):
    return (f"XtremeSource(task={self.task!r}, language={self.language!r}, splits={self.splits}, "
            f"train_limit={self.train_limit}, union_schema={self.union_schema}, kind={self.kind!r})")

  def _check_split(self, split: str) -> None:
    if split not in self.splits:
      raise ValueError(f"xtreme {self.task} {self.language!r} has no split {split!r} here; "
                       f"available splits: {', '.join(self.splits)}")

  def examples(self, split: str) -> list[dict]:
    """The rows (python dicts keyed by feature name) that the split's dataset yields, in order."""
    self._check_split(split)
    rows = _ROWS[self.family](self._read(split))
    if split == "train" and self.train_limit is not None:
      rows = rows[:self.train_limit]
    if self.union_schema:
      rows = [{"task": self.task, **{k: row.get(k, _EMPTY[rank]) for k, (_, rank) in self.features.items()
                                     if k != "task"}} for row in rows]
    return rows

  def _read(self, split: str):
    return self._data().read(self.task, self.language, self.kind or split)

  def _file(self, split: str) -> tuple[tuple, str]:
    """(data source, file or TFDS location) read for `split` (the cache key of `num_input_examples`)."""
    d = self._data()
    return (d.source, d.data_dir, d.translations_root), d.location(self.task, self.language, self.kind or split)

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None) -> tf.data.Dataset:
    del shuffle_files, seed  # one in-memory "file", read in order; seqio shuffles examples afterwards
    return dataset_from_rows(self.examples(split), self.features)

  def num_input_examples(self, split: str) -> int:
    """Number of examples of `split` (bucc2018 / tatoeba: always 1); cached per file version."""
    self._check_split(split)
    if self.family in ("bucc", "tatoeba"):
      return 1
    data_dir, path = self._file(split)
    stat = os.stat(path) if os.path.isfile(path) else None
    key = (data_dir, split, stat and (stat.st_mtime_ns, stat.st_size, stat.st_ino))
    if key not in self._counts:
      self._counts[key] = len(self.examples(split))
    return self._counts[key]


# ----------------------------------------------------------------------------- names


def languages(task: str, split: Optional[str] = None) -> tuple[str, ...]:
  """Languages of `task`, sorted (with `split`: only those that have it, in the reader registry's order)."""
  if task not in readers.TASKS:
    raise ValueError(f"unknown XTREME task {task!r}; valid tasks: {', '.join(ALL_TASKS)}")
  by_split = readers.TASKS[task].languages
  if split is not None:
    if split not in by_split:
      raise ValueError(f"{task} has no split {split!r}; valid splits: {', '.join(by_split)}")
    return tuple(by_split[split])
  return tuple(sorted({lg for lgs in by_split.values() for lg in lgs}))


def task_name(task: str, language: str, variant: str = "") -> str:
  """`xtreme_{task}_{language}[_{variant}]`, validating task and language against the reader registry."""
  langs = languages(task)
  if language not in langs:
    raise ValueError(f"unknown language {language!r} for XTREME task {task!r}; valid languages: {' '.join(langs)}")
  return f"xtreme_{task}_{language}" + (f"_{variant}" if variant else "")


def get_task(task: str, language: str, variant: str = "") -> seqio.Task:
  """The registered seqio Task for (task, language[, variant]), with a clear error if it does not exist."""
  name = task_name(task, language, variant)
  if name not in seqio.TaskRegistry.names():
    raise ValueError(f"no XTREME seqio task {name!r} is registered (variant {variant!r} exists only for "
                     f"some tasks / languages); see the xtreme_tasks.xtreme docstring for the name patterns")
  return seqio.TaskRegistry.get(name)


# ----------------------------------------------------------------------------- registration

_PASSTHROUGH = seqio.PassThroughVocabulary(size=0)


def output_features(features: Mapping[str, tuple]) -> dict[str, seqio.Feature]:
  """Untokenized seqio features: the pass-through vocabulary, no EOS, the given dtype and rank."""
  return {k: seqio.Feature(_PASSTHROUGH, add_eos=False, dtype=dtype, rank=rank)
          for k, (dtype, rank) in features.items()}


def register_task(task: str, language: str, variant: str = "", *, splits: Optional[Sequence[str]] = None,
                  train_limit: Optional[int] = None, union_schema: bool = False) -> seqio.Task:
  """Registers (replacing any previous one) the Task `task_name(task, language, variant)`.

  `splits` defaults to every split the reader registry lists for `language`.
  """
  name = task_name(task, language, variant)
  available = [s for s in readers.TASKS[task].languages if language in readers.TASKS[task].languages[s]]
  splits = available if splits is None else list(splits)
  if not splits or any(s not in available for s in splits):
    raise ValueError(f"{name}: splits {splits} must be a non-empty subset of {available}")
  source = XtremeSource(task, language, splits, train_limit=train_limit, union_schema=union_schema)
  seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(name, source=source, output_features=output_features(source.features),
                                preprocessors=[], metric_fns=[] if union_schema else metric_fns(task, language))


def _metric(task: str, language: str, targets: Sequence[Mapping], predictions: Sequence) -> dict:
  return scorer.score_examples(task, language, targets, predictions)


def metric_fns(task: str, language: str) -> list:
  """The official metrics of a fine-tuned benchmark task's language (`scorer.score_examples`): `metric(targets,
  predictions)` takes the Task's examples and the predicted labels / tag lists / {question id: answer}. None
  for retrieval (scored as whole corpora by `scorer.score_file`) and for the extra task squad."""
  fine_tuned = task in BENCHMARK_TASKS and TASK_FAMILY[task] in ("pair", "tagging", "qa")
  return [functools.partial(_metric, task, language)] if fine_tuned else []


def register_mixture(name: str, tasks: Sequence[Any], default_rate: Any = 1.0) -> seqio.Mixture:
  """Registers (replacing any previous one) a seqio Mixture."""
  seqio.MixtureRegistry.remove(name)
  return seqio.MixtureRegistry.add(name, list(tasks), default_rate=default_rate)


def train_examples_rate(task: seqio.Task) -> float:
  """Mixing rate = number of training examples (1 for a task without a train split)."""
  if "train" not in task.splits:
    return 1.0
  return float(max(task.source.num_input_examples("train"), 1))


KIND_SPLIT = {"translate_train": "train", "translate_test": "test", "pseudo_test": "test"}
KIND_NAME = {"translate_train": "translate_train", "translate_test": "translate_test", "pseudo_test": "pseudo"}


def translation_task_name(task: str, language: str, kind: str) -> str:
  """`xtreme_{task}_{translate_train|translate_test|pseudo}_{language}`, validated against the registry."""
  if kind not in KIND_NAME:
    raise ValueError(f"unknown translation kind {kind!r}; valid kinds: {', '.join(KIND_NAME)}")
  translations.translation_path(task, "", language, kind)  # validates task and language
  return f"xtreme_{task}_{KIND_NAME[kind]}_{language}"


def register_translation_task(task: str, language: str, kind: str) -> seqio.Task:
  """Registers (replacing any previous one) the one-split Task of a translation file."""
  name = translation_task_name(task, language, kind)
  source = XtremeSource(task, language, [KIND_SPLIT[kind]], kind=kind)
  seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(name, source=source, output_features=output_features(source.features),
                                preprocessors=[], metric_fns=[])


def zero_shot_members(task: str) -> list[str]:
  """Sub-tasks of `xtreme_{task}_zero_shot`: the English training task, then every evaluated language."""
  train_task = ZERO_SHOT_TRAIN[task]
  members = [task_name(train_task, "en")] if train_task else []
  for lg in languages(task):
    name = task_name(task, lg)
    if name in members:
      continue
    if lg in readers.TASKS[task].languages.get("train", ()):
      name = task_name(task, lg, "eval")  # its train split would leak into the mixture's train split
    members.append(name)
  return members


def register_all() -> None:
  """Registers every XTREME Task and Mixture listed in the module docstring (idempotent)."""
  for task in ALL_TASKS:
    for lg in languages(task):
      register_task(task, lg)
  for task in IN_LANGUAGE_TASKS:
    for lg in languages(task, "train"):
      register_task(task, lg, f"fewshot{FEWSHOT_SIZE}", train_limit=FEWSHOT_SIZE)
      if lg != "en":
        by_split = readers.TASKS[task].languages
        register_task(task, lg, "eval", splits=[s for s in by_split if s != "train" and lg in by_split[s]])
  for task in MULTITASK_TASKS:
    register_task(task, "en", "multitask", union_schema=True)

  # The mixtures' names are the settings' (`fine_tuning.Setting.mixture`).
  for task in BENCHMARK_TASKS:
    register_mixture(SETTINGS["zero_shot"].mixture("xtreme", task), zero_shot_members(task))
  for task in IN_LANGUAGE_TASKS:
    for lg in languages(task, "train"):
      register_mixture(SETTINGS["in_language"].mixture("xtreme", task, lg), [task_name(task, lg)])
      register_mixture(SETTINGS["in_language_fewshot"].mixture("xtreme", task, lg),
                       [task_name(task, lg, f"fewshot{FEWSHOT_SIZE}")])
    register_mixture(SETTINGS["in_language_multi"].mixture("xtreme", task),
                     [task_name(task, lg) for lg in languages(task)], default_rate=train_examples_rate)
  register_mixture("xtreme_multitask", [task_name(t, "en", "multitask") for t in MULTITASK_TASKS],
                   default_rate=train_examples_rate)

  for src in sorted(set(TRANSLATE_TRAIN_SOURCE.values())):
    for lg in translations.languages(src, "translate_train"):
      register_translation_task(src, lg, "translate_train")
  for task in TRANSLATE_TEST_TASKS:
    for lg in translations.languages(task, "translate_test"):
      register_translation_task(task, lg, "translate_test")
  for task in PSEUDO_TASKS:
    for lg in translations.languages(task, "pseudo_test"):
      register_translation_task(task, lg, "pseudo_test")

  for task, src in TRANSLATE_TRAIN_SOURCE.items():
    evaluation = zero_shot_members(task)
    for lg in translations.languages(task, "translate_train"):
      register_mixture(SETTINGS["translate_train"].mixture("xtreme", task, lg),
                       evaluation + [translation_task_name(src, lg, "translate_train")],
                       default_rate=train_examples_rate)
    register_mixture(SETTINGS["translate_train_all"].mixture("xtreme", task),
                     evaluation + [translation_task_name(src, lg, "translate_train")
                                   for lg in translations.languages(src, "translate_train")],
                     default_rate=train_examples_rate)
  for task in TRANSLATE_TEST_TASKS:
    members = [task_name(ZERO_SHOT_TRAIN[task], "en")]
    members += [task_name(task, "en")] if task_name(task, "en") not in members else []
    register_mixture(SETTINGS["translate_test"].mixture("xtreme", task),
                     members + [translation_task_name(task, lg, "translate_test")
                                for lg in translations.languages(task, "translate_test")])


register_all()
