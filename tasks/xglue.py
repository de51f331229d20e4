"""seqio Tasks and Mixtures for XGLUE's understanding and generation tasks, generated from the task registry.

Importing `xtreme_tasks.xglue` registers, for every task of
`xtreme_jax.registry.XGLUE` (names lower-cased: `xglue_nc_de`), what its
spec declares; nothing here lists a task or a language.

Data: `XglueData(get_data_dir())`, the object the run mode reads through
(`runs/xtreme.py`, `XtremeRunner.read`), so a Task yields exactly the
examples the runner fine-tunes and predicts on (in the row schemas of
`tasks/xtreme.py`: pair rows, ranking rows with their query `group`, tagging
rows, SQuAD rows; QG / NTG: `id`, `inputs` (the source text), `targets`
(the reference, "" where the test targets are hidden), raw text). The
directory is looked up when a dataset is built:
`set_data_dir(path)` wins, else `$XTREME_JAX_XGLUE_DIR` (the unpacked
`xglue_full_dataset` folder).

Tasks
* `xglue_{task}_{lg}`: train / dev / test of every language of the task (a
  non-English train split is the user-supplied translated training data at
  the layout's path, `registry/xglue.py`; building it without the file names
  the file).
* `xglue_{task}_{lg}_eval`: dev / test only (the evaluation members of the
  mixtures, so that their train split is the setting's training data only).

Every Task's `metric_fns` is the official score of its language
(`xglue_scorer.score_examples`, 0-1 scale, keyed by the spec's `score`):
`metric(targets, predictions)` takes the Task's examples and the predicted
labels / tag lists / {question id: answer} / texts (QG, NTG: `bleu`, the
scorer's lowercased sacreBLEU / 100; the examples may also be the reference
strings).

Mixtures (the settings of `BenchmarkSpec.settings`)
* `xglue_{task}_zero_shot`: English training data, every language evaluated.
* `xglue_{task}_pivot_{lg}`: the training data of `{lg}`, every language evaluated.
* `xglue_{task}_multi_language`: the training data of every language, each
  drawn in proportion to its number of examples, every language evaluated.
  Its members are fixed at registration, so building its train split needs
  every language's training file (the release has English only; the run
  mode's `multi_language` uses the files it finds).
* `xglue_multi_task`: the English training data of the paper's Table 9 tasks
  (`registry.xglue.MULTI_TASK`), each `xglue_{task}_en_multitask` in the union
  schema of `tasks/xtreme.py` with its `task` name, mixed in proportion to
  their sizes (the merged training sets).
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Mapping, Optional, Sequence, Union

import seqio
import tensorflow as tf

from xtreme_jax.data.readers.xglue_data import XglueData
from xtreme_jax.evaluation import xglue_scorer
from xtreme_jax.registry import XGLUE
from xtreme_jax.registry.xglue import MULTI_TASK
from xtreme_jax.runs.fine_tuning import SETTINGS
from xtreme_tasks.xtreme import XtremeSource, dataset_from_rows, output_features, register_mixture, train_examples_rate

DATA_DIR_ENV = "XTREME_JAX_XGLUE_DIR"
_data_dir: Optional[str] = globals().get("_data_dir")  # kept across importlib.reload


def set_data_dir(path: Optional[Union[str, os.PathLike]]) -> None:
  """Sets the unpacked `xglue_full_dataset` folder read when datasets are built (None clears it)."""
  global _data_dir
  _data_dir = None if path is None else os.fspath(path)


def get_data_dir() -> str:
  """The folder from `set_data_dir`, else `$XTREME_JAX_XGLUE_DIR`; a clear error if neither is set."""
  path = _data_dir or os.environ.get(DATA_DIR_ENV)
  if not path:
    raise ValueError(f"The XGLUE data directory is not set: call xtreme_tasks.xglue.set_data_dir(path) or set "
                     f"{DATA_DIR_ENV} to the unpacked xglue_full_dataset folder")
  return path


def data() -> XglueData:
  return XglueData("official", get_data_dir())


def task_name(task: str, language: str, variant: str = "") -> str:
  """`xglue_{task}_{language}[_{variant}]` (task lower-cased), validated against the registry."""
  spec = XGLUE.task(task)
  if language not in spec.test_languages:
    raise ValueError(f"unknown language {language!r} for XGLUE task {task}; valid: {' '.join(spec.test_languages)}")
  return f"xglue_{task.lower()}_{language}" + (f"_{variant}" if variant else "")


def _metric(task: str, language: str, targets: Sequence[dict], predictions: Sequence) -> dict:
  return {XGLUE.task(task).score: xglue_scorer.score_examples(task, language, targets, predictions)}


def _reference(example) -> str:
  """A generation Task's reference: from its row (`targets`), a reader record (`target`) or the string itself."""
  if isinstance(example, Mapping):
    example = example["targets"] if "targets" in example else example["target"]
  return example.decode("utf-8") if isinstance(example, bytes) else example


def _generation_metric(task: str, language: str, targets: Sequence, predictions: Sequence[str]) -> dict:
  examples = [{"target": _reference(t)} for t in targets]
  return {XGLUE.task(task).score: xglue_scorer.score_examples(task, language, examples, predictions)}


class GenerationSource(seqio.FunctionDataSource):
  """Line pairs of an XGLUE generation task (`xglue_readers`): `id`, `inputs`, `targets` ("" when hidden)."""

  features = {"id": (tf.string, 0), "inputs": (tf.string, 0), "targets": (tf.string, 0)}

  def __init__(self, task: str, language: str, splits: Sequence[str], data_fn: Callable[[], XglueData] = data):
    self.task, self.language, self._data = task, language, data_fn
    self._counts: dict[tuple, int] = {}
    super().__init__(dataset_fn=self._dataset_fn, splits=tuple(splits))

  def __repr__(self):
    return f"GenerationSource(task={self.task!r}, language={self.language!r}, splits={self.splits})"

  def examples(self, split: str) -> list[dict]:
    if split not in self.splits:
      raise ValueError(f"xglue {self.task} {self.language!r} has no split {split!r} here; available splits: "
                       f"{', '.join(self.splits)}")
    return [{"id": ex["id"], "inputs": ex["source"], "targets": ex["target"] or ""}
            for ex in self._data().read(self.task, self.language, split)]

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None) -> tf.data.Dataset:
    del shuffle_files, seed  # read in order; seqio shuffles examples afterwards
    return dataset_from_rows(self.examples(split), self.features)

  def num_input_examples(self, split: str) -> int:
    """Number of line pairs of `split`, cached per version of its source file."""
    path = self._data().location(self.task, self.language, split)
    stat = os.stat(path) if os.path.isfile(path) else None
    key = (path, stat and (stat.st_mtime_ns, stat.st_size, stat.st_ino))
    if key not in self._counts:
      self._counts[key] = len(self.examples(split))
    return self._counts[key]


def register_task(task: str, language: str, variant: str = "") -> seqio.Task:
  """Registers (replacing any previous one) `task_name(task, language, variant)`; variant "eval": no train split;
  "multitask": the union schema with the task's name (the multi-task mixture's members)."""
  spec = XGLUE.task(task)
  splits = [s for s, langs in spec.languages.items() if language in langs and not (variant == "eval" and s == "train")]
  if spec.kind == "generation":
    source, metric = GenerationSource(task, language, splits), _generation_metric
  else:
    source = XtremeSource(task, language, splits, union_schema=variant == "multitask", benchmark=XGLUE, data_fn=data)
    metric = _metric
  name = task_name(task, language, variant)
  seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(name, source=source, output_features=output_features(source.features),
                                preprocessors=[], metric_fns=[functools.partial(metric, task, language)])


def evaluated(task: str, *training: str) -> list[str]:
  """Mixture members: the `training` languages' full tasks, then every other language's `_eval` task."""
  langs = XGLUE.task(task).test_languages
  return [task_name(task, lg) for lg in training] + [task_name(task, lg, "eval") for lg in langs
                                                     if lg not in training]


def register_all() -> None:
  """Registers every XGLUE Task and Mixture listed in the module docstring (idempotent)."""
  for spec in XGLUE.tasks:
    for lg in spec.test_languages:
      register_task(spec.name, lg)
      register_task(spec.name, lg, "eval")
    # The mixtures' names are the settings' (`fine_tuning.Setting.mixture`).
    register_mixture(SETTINGS["zero_shot"].mixture("xglue", spec.name), evaluated(spec.name, spec.train[1]))
    for lg in spec.languages["train"]:
      register_mixture(SETTINGS["pivot_language"].mixture("xglue", spec.name, lg), evaluated(spec.name, lg))
    register_mixture(SETTINGS["multi_language"].mixture("xglue", spec.name),
                     evaluated(spec.name, *spec.languages["train"]), default_rate=train_examples_rate)
  for task in MULTI_TASK:
    register_task(task, XGLUE.task(task).train[1], "multitask")
  register_mixture(SETTINGS["multi_task"].mixture("xglue", MULTI_TASK[0]),
                   [task_name(t, XGLUE.task(t).train[1], "multitask") for t in MULTI_TASK],
                   default_rate=train_examples_rate)


register_all()
