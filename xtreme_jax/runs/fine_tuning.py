"""Fine-tuning settings (METHODS.md "XTREME / XGLUE fine-tuning settings"), one object per setting.

Gin names a setting (`SETTING='translate_train'`, i.e. `FinetuneSettings.setting`); `SETTINGS[name]` is its
object. A setting answers, for a task tested on a language: what its model trains on (`training_set`), which
split is predicted (`test_split`), which seqio mixture holds that data (`mixture`: the names `tasks/xtreme.py`
and `tasks/xglue.py` register), how the task's kind is wrapped (`kind`), and what it checks before a run
(`check`). The run mode (`runs/xtreme.py`) passes itself in as the `Run` a setting asks for data and specs.

Pseudo test sets are not a setting: `PSEUDO_TEST=True` predicts them in any setting but FILTER's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional, Protocol, Sequence

from xtreme_jax import errors
from xtreme_jax.data.translation import xtreme_translations as translations
from xtreme_jax.registry import XTREME
from xtreme_jax.registry.spec import TaskSpec

FEWSHOT_SIZE = 1000  # in_language_fewshot: the first 1,000 training examples of the test language
IN_LANGUAGE_TASKS = XTREME.where(in_language=True)  # tasks with training data in other languages than English
# Task -> reader task whose translations are its translate-train data (xquad / mlqa: SQuAD).
TRANSLATE_TRAIN_SOURCE = {t.name: t.translate_train for t in XTREME.tasks if t.translate_train}
TRANSLATE_TEST_TASKS = XTREME.where(translate_test=True)


class TrainingSet(NamedTuple):
  """What one model trains on: its name (its directory under `models/`), its sources ((reader task, language,
  split), ...) and the number of examples kept (None: all)."""

  model: str
  sources: tuple
  limit: Optional[int] = None


class Run(Protocol):
  """What a setting asks of the run it serves (`runs.xtreme.XtremeRunner`)."""

  settings: Any  # `FinetuneSettings`: pivot_language, train_languages, language_rates, multi_tasks
  benchmark: Any  # `BenchmarkSpec`
  data: Any  # the benchmark's data object (`location` of a missing file)
  store: Any  # `model_store.ModelStore`: FILTER's training sources and its teachers' soft labels

  def spec(self, task: str) -> TaskSpec: ...

  def available(self, task: str, language: str, split: str) -> bool: ...

  def kind(self, task: str) -> Any: ...

  def say(self, message: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class Setting:
  """Zero-shot (the base of every setting): each task's model trains on its training language's data
  (English, or the task's own: XGLUE's), whatever language it is tested on."""

  name: str = "zero_shot"
  filter_stage: Optional[str] = None  # FILTER's settings: "teacher" or "student"

  def label(self, pivot_language: str) -> str:
    """The setting's name in the run directory's output names (`runs.xtreme.outputs`)."""
    del pivot_language
    return self.name

  def training_set(self, run: Run, task: str, language: str) -> TrainingSet:
    del language
    spec = run.spec(task)
    return TrainingSet(spec.model, (spec.train,))

  def test_split(self, task: str, language: str) -> str:
    """The split predicted for `language` (of the benchmark's test split)."""
    del task, language
    return "test"

  def multi_task(self, run: Run, task: str) -> bool:
    """Whether `task` is fine-tuned in a model shared with other tasks."""
    del run, task
    return False

  def kind(self, base: Any, recipe: Any, student: Optional[bool] = None) -> Any:
    """The task kind fine-tuning uses, given the task's own (`task_kinds.of`) and recipe (`TaskSettings`)."""
    del recipe, student
    return base

  def language_rates(self, run: Run, sources: tuple) -> Optional[dict]:
    """{language: weight} of a model trained on several languages' data (None: concatenated sets)."""
    del run, sources
    return None

  def after_training(self, run: Any, task: str, sources: tuple, limit: Optional[int]) -> None:
    """What the setting does once `task`'s model is trained (FILTER's teacher: the soft labels)."""
    del run, task, sources, limit

  def check(self, run: Run, tasks: Sequence[str]) -> None:
    """Refuses (`errors.ConfigError`) what this setting cannot run, before any training."""
    del run, tasks

  def mixture(self, benchmark: str, task: str, language: Optional[str] = None) -> Optional[str]:
    """The seqio mixture of this setting's data for `task` (and the test `language` where models differ per
    language); None: the setting has none (FILTER's pairs, the feature-based model)."""
    del language
    return f"{benchmark}_{task.lower()}_{self.name}"


class ZeroShot(Setting):
  """Zero-shot: the base's answers, under its own class name."""


@dataclasses.dataclass(frozen=True)
class InLanguage(Setting):
  """The test language's own training data, one model per language (`few_shot`: its first examples only).
  Tasks without training data in other languages (classification, XQuAD, MLQA) stay zero-shot."""

  name: str = "in_language"
  few_shot: Optional[int] = None

  def training_set(self, run, task, language):
    if not run.spec(task).in_language:
      return super().training_set(run, task, language)
    own = run.spec(task).languages["train"]
    errors.require(language in own, f"{task}: {language} has no training split for the {self.name} setting; "
                   f"languages with one: {list(own)}")
    suffix = f"_fewshot{self.few_shot}" if self.few_shot else ""
    return TrainingSet(f"{task}_{language}{suffix}", ((task, language, "train"),), self.few_shot)

  def mixture(self, benchmark, task, language=None):
    if task not in IN_LANGUAGE_TASKS:
      return ZERO_SHOT.mixture(benchmark, task)
    return f"{benchmark}_{task}_{self.name}_{language}"


class InLanguageMulti(Setting):
  """Every language's training data at once, one model per task (tasks without: zero-shot)."""

  def training_set(self, run, task, language):
    if not run.spec(task).in_language:
      return super().training_set(run, task, language)
    return TrainingSet(f"{task}_all", tuple((task, lg, "train") for lg in run.spec(task).languages["train"]
                                            if run.available(task, lg, "train")))

  def mixture(self, benchmark, task, language=None):
    return f"{benchmark}_{task}_in_language_all" if task in IN_LANGUAGE_TASKS else ZERO_SHOT.mixture(benchmark, task)


class TranslateTrain(Setting):
  """English plus its machine translation into the test language, one model per language (English and
  languages without a translation: English only; tasks without translations: zero-shot)."""

  def training_set(self, run, task, language):
    source = TRANSLATE_TRAIN_SOURCE.get(task)
    if source is None or language not in translations.languages(task, "translate_train"):
      return super().training_set(run, task, language)
    spec = run.spec(task)
    return TrainingSet(f"{spec.model}_translate_train_{language}",
                       (spec.train, (source, language, "translate_train")))

  def mixture(self, benchmark, task, language=None):
    if task not in TRANSLATE_TRAIN_SOURCE or language not in translations.languages(task, "translate_train"):
      return ZERO_SHOT.mixture(benchmark, task)
    return f"{benchmark}_{task}_translate_train_en_{language}"


class TranslateTrainAll(Setting):
  """English plus every translation of it on disk, one model per task."""

  def training_set(self, run, task, language):
    source = TRANSLATE_TRAIN_SOURCE.get(task)
    if source is None:
      return super().training_set(run, task, language)
    spec = run.spec(task)
    langs = [lg for lg in translations.languages(source, "translate_train")
             if run.available(source, lg, "translate_train")]
    return TrainingSet(f"{spec.model}_translate_train_all",
                       (spec.train,) + tuple((source, lg, "translate_train") for lg in langs))

  def mixture(self, benchmark, task, language=None):
    return (f"{benchmark}_{task}_translate_train_all" if task in TRANSLATE_TRAIN_SOURCE
            else ZERO_SHOT.mixture(benchmark, task))


class TranslateTest(Setting):
  """The zero-shot model, predicting the test sets machine-translated into English where they exist."""

  def test_split(self, task, language):
    if task in TRANSLATE_TEST_TASKS and language in translations.languages(task, "translate_test"):
      return "translate_test"
    return "test"

  def mixture(self, benchmark, task, language=None):
    return (f"{benchmark}_{task}_translate_test" if task in TRANSLATE_TEST_TASKS
            else ZERO_SHOT.mixture(benchmark, task))


def _own_training_languages(run: Run, task: str) -> tuple:
  """The languages with training data of `task`'s training task."""
  spec = run.spec(task)
  train_task = spec.train[0] if spec.train else task
  return train_task, run.spec(train_task).languages.get("train", ())


def _check_training_languages(run: Run, tasks: Sequence[str], wanted: Sequence[str]) -> None:
  """The named training languages are languages of at least one task (a language no task has is a typo)."""
  own = {lg for task in tasks for lg in _own_training_languages(run, task)[1]}
  unknown = sorted(set(wanted) - own)
  errors.require(not unknown, f"training language(s) {unknown} are languages of none of the tasks {list(tasks)}; "
                 f"valid: {' '.join(sorted(own))}")


class PivotLanguage(Setting):
  """The training data of `FinetuneSettings.pivot_language` (XGLUE's pivot-language tables); a task without
  it stays zero-shot. Its outputs are kept apart per pivot (`pivot_language-de`)."""

  def label(self, pivot_language):
    return f"{self.name}-{pivot_language}"

  def training_set(self, run, task, language):
    spec, pivot = run.spec(task), run.settings.pivot_language
    train_task, own = _own_training_languages(run, task)
    if pivot != spec.train[1] and pivot in own:
      return TrainingSet(f"{spec.model}_pivot_{pivot}", ((train_task, pivot, "train"),))
    return super().training_set(run, task, language)

  def check(self, run, tasks):
    pivot = run.settings.pivot_language
    _check_training_languages(run, tasks, [pivot])
    for task in tasks:
      if pivot not in _own_training_languages(run, task)[1]:
        run.say(f"{task}: {pivot} is not one of its languages; it stays zero-shot ({run.spec(task).train[1]})")

  def mixture(self, benchmark, task, language=None):
    return f"{benchmark}_{task.lower()}_pivot_{language}"


class MultiLanguage(Setting):
  """The training data of `FinetuneSettings.train_languages` (None: every language with training data on
  disk) at once, drawn by `language_rates` (None: the concatenated sets)."""

  def training_set(self, run, task, language):
    spec, wanted = run.spec(task), run.settings.train_languages
    train_task, own = _own_training_languages(run, task)
    langs = ([lg for lg in own if lg in wanted] if wanted is not None  # the task's own order
             else [lg for lg in own if run.available(train_task, lg, "train")])
    return TrainingSet(f"{spec.model}_multi_{'_'.join(langs)}", tuple((train_task, lg, "train") for lg in langs))

  def language_rates(self, run, sources):
    rates = run.settings.language_rates
    if rates is None or len(sources) < 2:
      return None
    return {lg: float(rates.get(lg, 0.0)) for _, lg, _ in sources}

  def check(self, run, tasks):
    s = run.settings
    _check_training_languages(run, tasks, list(s.train_languages or []) + list(s.language_rates or {}))
    for task in tasks:
      spec = run.spec(task)
      errors.require(bool(self.training_set(run, task, spec.test_languages[0]).sources),
                     f"{task}: no training data for any of the training languages on disk (expected e.g. "
                     f"{run.data.location(spec.train[0], spec.train[1], 'train')})")


class MultiTask(Setting):
  """The pair-classification tasks `FinetuneSettings.multi_tasks` as one model (a shared encoder, a head per
  task) on their training data at once; the other tasks stay zero-shot."""

  def multi_task(self, run, task):
    return task in run.settings.multi_tasks

  def training_set(self, run, task, language):
    if not self.multi_task(run, task):
      return super().training_set(run, task, language)
    tasks = run.settings.multi_tasks
    return TrainingSet("multi_task_" + "_".join(tasks), tuple(run.spec(t).train for t in tasks))

  def check(self, run, tasks):
    multi, bench = run.settings.multi_tasks, run.benchmark
    unknown = sorted(set(multi) - set(bench.task_names))
    errors.require(not unknown, f"FinetuneSettings.multi_tasks: unknown {bench.name.upper()} task(s) {unknown}; "
                   f"valid: {list(bench.task_names)}")
    run.kind(multi[0])  # refuses tasks of other kinds

  def mixture(self, benchmark, task, language=None):
    return f"{benchmark}_multi_task"


@dataclasses.dataclass(frozen=True)
class Filter(Setting):
  """FILTER (Fang et al., 2021): one model on the paired training data of every language (`filter_sources`);
  the teacher also writes the soft labels its student trains on."""

  name: str = "filter_teacher"
  filter_stage: Optional[str] = "teacher"

  def training_set(self, run, task, language):
    return TrainingSet(f"{run.spec(task).model}_filter_{self.filter_stage}", run.store.filter_sources(task))

  def kind(self, base, recipe, student=None):
    from xtreme_jax.runs import filter_kinds  # lazy: the models (the seqio registrations import this module)
    return filter_kinds.Filter(base, recipe.filter, self.filter_stage == "student" if student is None else student)

  def after_training(self, run, task, sources, limit):
    if self.filter_stage == "teacher":
      run.store.teacher_soft_labels(task, sources, limit)

  def mixture(self, benchmark, task, language=None):
    return None


class FeatureBased(Setting):
  """The mBERT paper's feature-based setting: English training data, the fixed encoder's layers mixed under
  a BiLSTM (`task_kinds.FeatureBased`); classification, tagging and parsing tasks only."""

  def training_set(self, run, task, language):
    spec = run.spec(task)
    return TrainingSet(f"{spec.model}_feature_based", (spec.train,))

  def kind(self, base, recipe, student=None):
    from xtreme_jax.runs import task_kinds  # lazy: the models
    return task_kinds.FeatureBased(base, recipe.feature_based.lstm_hidden)

  def check(self, run, tasks):
    from xtreme_jax.runs import task_kinds  # lazy: the models
    bench = run.benchmark
    unfit = [t for t in tasks if not (bench.task(t).kind in task_kinds.KINDS
                                      and task_kinds.FeatureBased.takes(task_kinds.of(bench.task(t))))]
    errors.require(not unfit, f"SETTING='feature_based' takes classification, tagging and parsing tasks; TASKS holds "
                   f"{unfit}")

  def mixture(self, benchmark, task, language=None):
    return None


ZERO_SHOT = ZeroShot()
SETTINGS: dict[str, Setting] = {s.name: s for s in (
    ZERO_SHOT, InLanguage(), InLanguage("in_language_fewshot", few_shot=FEWSHOT_SIZE),
    InLanguageMulti("in_language_multi"), TranslateTrain("translate_train"),
    TranslateTrainAll("translate_train_all"), TranslateTest("translate_test"), PivotLanguage("pivot_language"),
    MultiLanguage("multi_language"), MultiTask("multi_task"), Filter("filter_teacher", "teacher"),
    Filter("filter_student", "student"), FeatureBased("feature_based"))}
