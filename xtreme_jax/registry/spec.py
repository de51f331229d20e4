"""The declarative task registry's types: one frozen `TaskSpec` per task, one `BenchmarkSpec` per benchmark.

A spec holds facts only (names, languages, labels, which metric, which
settings); the layers above look behaviour up from it (readers, heads,
metrics, submission files), so no run, scorer or report code needs its own
list of tasks or languages. This module imports nothing of the project, so
every layer may import it.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

from xtreme_jax import errors


RETRIEVAL_KINDS = ("similarity_search", "bitext_mining")  # XTREME's Tatoeba and BUCC, the lab's retrieval


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """One task of a benchmark.

  name: the task's name in the benchmark (`xnli`, `bucc2018`, ...); also its
    reader key and its folder in the submission.
  languages: split -> the languages that have that split in the official
    layout (the test languages are the benchmark's languages of the task).
  kind: the head / feature family: `pair_classification`, `tagging`,
    `span_qa`, `bitext_mining` (BUCC), `similarity_search` (Tatoeba),
    `ranking` (XGLUE WPR), `generation` (text to text: XGLUE QG, NTG).
  labels: the label or tag vocabulary (classification, tagging).
  score: the key of the per-language result that is the task score
    (`em_f1` = (exact_match + f1) / 2; `bleu`), on the benchmark's scale.
  category: the benchmark category the task counts towards.
  train: (reader task, language, split) of the zero-shot training data
    (None: not fine-tuned); `model`: the fine-tuned model's name (tasks with
    the same training data share one model).
  prediction_suffix: the submission file type (`tsv` lines, `json` {id: answer}).
  by_position: predictions are matched to labels by line / sentence position
    (not by id), so they must follow the labels' order.
  in_language: the task has training data in other languages (the in-language
    settings train on it).
  translate_train: the reader task whose translations are its translate-train
    data (None: none); `translate_test`: test sets translated into English
    exist; `pseudo_test`: the English test set machine-translated into other
    languages exists.
  tfds_builder: the TFDS builder holding the same data (None: none).
  files: split (`*`: any) -> the path of a split's file under the dataset
    root, `{lg}` and `{split}` filled in (benchmarks whose readers take their
    layout from the spec); a key `split:lg` overrides it for one language.
  sides: a task whose examples are line-aligned pairs of files (generation)
    names their two sides, source first (XGLUE: `src`, `tgt`), filled in for
    `{side}` in `files`.
  pivot: a retrieval task's target language: each test language's sentences
    (the source side) are matched against their translations in it (XTREME:
    English).
  """

  name: str
  benchmark: str
  languages: Mapping[str, tuple]
  kind: str
  labels: tuple = ()
  score: str = "accuracy"
  category: Optional[str] = None
  train: Optional[tuple] = None
  model: Optional[str] = None
  prediction_suffix: str = "tsv"
  by_position: bool = True
  in_language: bool = False
  translate_train: Optional[str] = None
  translate_test: bool = False
  pseudo_test: bool = False
  tfds_builder: Optional[str] = None
  files: Mapping[str, str] = dataclasses.field(default_factory=dict)
  sides: tuple = ()
  pivot: Optional[str] = None

  def file(self, split: str, language: str, side: Optional[str] = None) -> str:
    """The path of (split, language) under the dataset root (`files`); of a pair task, the file of `side`
    (default: the source, the file the model reads)."""
    template = self.files.get(f"{split}:{language}", self.files.get(split, self.files.get("*")))
    if template is None:
      raise errors.ConfigError(f"{self.benchmark} {self.name} has no file layout for split {split!r}")
    if side is not None and side not in self.sides:
      raise errors.ConfigError(f"{self.benchmark} {self.name} has no side {side!r}; sides: {list(self.sides)}")
    return template.format(lg=language, split=split, side=side or (self.sides[0] if self.sides else ""))

  @property
  def test_languages(self) -> tuple:
    return tuple(self.languages.get("test", ()))

  @property
  def fine_tuned(self) -> bool:
    return self.model is not None

  @property
  def retrieval(self) -> bool:
    """A retrieval task (similarity search, bitext mining): sentences embedded as they are, not fine-tuned."""
    return self.kind in RETRIEVAL_KINDS


@dataclasses.dataclass(frozen=True)
class BenchmarkSpec:
  """A benchmark: its evaluated tasks (in table order), categories and aggregation.

  `tasks` are the evaluated tasks; `extra_tasks` are read but not scored
  (e.g. XTREME's SQuAD, the training data of XQuAD and MLQA). Scores are on
  `scale` (100: percentages); a task's score is the mean over its test
  languages, a category's the mean of its tasks', the overall score the mean
  over every task. `settings` are the fine-tuning settings its runs allow
  (`runs/xtreme.py`); `submission_file` is a prediction file's path in a
  submission, `{task}`, `{lg}` and `{suffix}` (`TaskSpec.prediction_suffix`)
  filled in.
  """

  name: str
  tasks: tuple
  extra_tasks: tuple = ()
  categories: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
  scale: float = 100.0
  settings: tuple = ("zero_shot",)
  submission_file: str = "{task}/test-{lg}.{suffix}"

  def __post_init__(self):
    names = [t.name for t in (*self.tasks, *self.extra_tasks)]
    if len(set(names)) != len(names):
      raise ValueError(f"{self.name}: duplicate task names in {names}")
    unknown = sorted({t for ts in self.categories.values() for t in ts} - set(self.task_names))
    if unknown:
      raise ValueError(f"{self.name}: categories name unknown tasks {unknown}")

  @property
  def task_names(self) -> tuple:
    return tuple(t.name for t in self.tasks)

  @property
  def specs(self) -> dict[str, TaskSpec]:
    """Every task the benchmark reads (evaluated and extra), by name."""
    return {t.name: t for t in (*self.tasks, *self.extra_tasks)}

  def task(self, name: str) -> TaskSpec:
    """The spec of `name`; ConfigError naming the benchmark's tasks if there is none."""
    specs = self.specs
    if name not in specs:
      raise errors.ConfigError(f"unknown {self.name.upper()} task {name!r}; valid tasks: {', '.join(specs)}")
    return specs[name]

  def prediction_file(self, task: str, language: str) -> str:
    """The path of `task`'s prediction for `language` inside a submission folder."""
    return self.submission_file.format(task=task, lg=language, suffix=self.task(task).prediction_suffix)

  def where(self, **facts) -> tuple:
    """Names of the evaluated tasks whose spec has these attribute values, e.g. `where(kind="span_qa")`."""
    return tuple(t.name for t in self.tasks if all(getattr(t, k) == v for k, v in facts.items()))
