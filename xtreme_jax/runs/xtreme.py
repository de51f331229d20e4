"""A benchmark run end to end (XTREME, XGLUE, the mBERT paper's tasks): fine-tune, predict, mine, score, report.

`xtreme`, `xglue` and `mbert` (the Gin run modes) claim the run directory (`run_fingerprint`), check everything
a user can get wrong before any training (`check_run`), then `run_benchmark`: the runner's `store` fine-tunes
the models its setting names (`runs/fine_tuning.py`), `predictions` writes the submission, `retrieval` mines
BUCC and searches Tatoeba, and the benchmark's protocol (`runs/benchmarks.py`) scores and reports
(`runs/scoring.py`). The recipes are `runs/recipes.py`; docs/xtreme.md is the user's guide (settings,
selection, re-runs, translations, FILTER).
"""

from __future__ import annotations

import logging
import os
from typing import Mapping, Optional, Sequence

from xtreme_jax import errors, fs
from xtreme_jax.data import paths
from xtreme_jax.data.vocab.vocabularies import load_vocabulary
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.registry import BENCHMARKS, MBERT, XGLUE, XTREME, BenchmarkSpec
from xtreme_jax.runs import benchmarks, bookkeeping, fine_tuning, language_ids, scoring, task_kinds
from xtreme_jax.runs.model_store import ModelStore
from xtreme_jax.runs.predictions import Predictions
from xtreme_jax.runs.recipes import SETTINGS
from xtreme_jax.runs.run_checks import check_run, run_fingerprint
# The recipes, bound in Gin files as xtreme.TaskSettings, xtreme.RetrievalSettings, xtreme.FinetuneSettings.
from xtreme_jax.runs.recipes import FinetuneSettings, RetrievalSettings, TaskSettings  # noqa: F401
from xtreme_jax.runs.sentence_retrieval import SentenceRetrieval
from xtreme_jax.training.checkpoints import RunDirectory
from xtreme_jax.training.partitioning import PartitionConfig

TASKS = XTREME.task_names


def filter_pairs():
  """`data/filter/filter_pairs` (FILTER's paired data), imported when a FILTER setting reads pairs."""
  from xtreme_jax.data.filter import filter_pairs as module  # pylint: disable=g-import-not-at-top
  return module


def outputs(setting: str, split: str = "test") -> dict[str, str]:
  """Names of one setting's outputs in the run directory (zero_shot: `submission`, `scores.json`, `report`;
  predictions of the dev split, XGLUE's SPLIT='dev': `submission-dev`, ...)."""
  suffix = ("" if split == "test" else f"-{split}") + ("" if setting == fine_tuning.ZERO_SHOT.name else f"-{setting}")
  return {"submission": f"submission{suffix}", "scores": f"scores{suffix}.json", "report": f"report{suffix}",
          "pseudo_submission": f"submission-{setting}-pseudo", "pseudo_scores": f"scores-{setting}-pseudo.json"}


_LABELS = {fine_tuning.SETTINGS[s].label(lg) for s in SETTINGS for b in BENCHMARKS.values() for t in b.tasks
           for lg in t.languages.get("train", ())}
# Everything the benchmark writes into its run directory: a directory made before runs were claimed holds them.
RUN_ENTRIES = frozenset(
    {"models", "runs.json", "config.gin", "pseudo-labels"}
    | {name for s in _LABELS for sp in ("test", "dev") for name in outputs(s, sp).values()}
    | {outputs(s, sp)[k] + ".records.json" for s in _LABELS for sp in ("test", "dev")
       for k in ("submission", "pseudo_submission")})


class XtremeRunner:
  """One benchmark run's context: its data, settings and task kinds, and the three parts that do the work
  (`store`: the fine-tuned models, `predictions`: the prediction files, `retrieval`: the retrieval tasks).

  `benchmark`: "xtreme" or "xglue" (`registry.BENCHMARKS`); every task fact
  (languages, kind, labels, model, submission file) comes from its specs.
  `split`: the split predicted (XTREME: test; XGLUE: test or dev).
  """

  def __init__(self, run_dir, data_dir, config, vocabulary, init_checkpoint, settings, partition,
               translations_dir: Optional[str] = None, data_source: str = "official",
               resume_overrides: Optional[Mapping] = None, benchmark: str = "xtreme", split: str = "test"):
    self.run_dir, self.data_dir, self.config = run_dir, data_dir, config
    self.protocol: benchmarks.Protocol = benchmarks.PROTOCOLS[benchmark]
    self.data = self.protocol.data(data_source, data_dir, translations_dir)
    self.benchmark: BenchmarkSpec = self.data.benchmark
    self.split = split
    self.translations_dir = self.data.translations_root
    self.vocabulary = fs.abspath(paths.resolve(data_dir, vocabulary))
    self.vocab = load_vocabulary(self.vocabulary)
    self.init_checkpoint = fs.abspath(init_checkpoint) if init_checkpoint else None
    self.settings, self.partition = settings, partition
    self.setting: fine_tuning.Setting = fine_tuning.SETTINGS[settings.setting]
    self.resume_overrides = resume_overrides
    label = self.setting.label(settings.pivot_language)
    named = {k: os.path.join(run_dir, name) for k, name in outputs(label, split).items()}
    self.submission, self.pseudo_submission = named["submission"], named["pseudo_submission"]
    self.scores_path, self.report_dir = named["scores"], named["report"]
    self.pseudo_scores_path = named["pseudo_scores"]
    self.pseudo_labels = os.path.join(run_dir, "pseudo-labels")
    self.store = ModelStore(self)
    self.predictions = Predictions(self)
    self.retrieval = SentenceRetrieval(self)

  def read(self, task: str, language: str, split: str):
    """Every read of benchmark data goes through here: an official split, or a translation kind. In the FILTER
    settings a fine-tuned task's examples are pairs (`filter_pairs`): `filter_train` the training pairs of
    one language, dev and test the inference pairs. For a model with named languages, each example carries its
    language's id (`language_ids.with_language_id`; a translated test set: the training language's)."""
    if self.filtering and split == "filter_train":
      return filter_pairs().training_pairs(task, self.data, [language], self.translations_dir)
    if self.filtering and split in ("dev", "test") and not self.spec(task).retrieval:
      return filter_pairs().inference_pairs(task, self.data, language, split, self.recipe(task).filter.english,
                                            self.translations_dir)
    records, spec = self.data.read(task, language, split), self.spec(task)
    if spec.retrieval:  # sentences of two languages, given their ids by `SentenceRetrieval.embed`
      return records
    written_in = spec.train[1] if split == "translate_test" else language  # translated into the training language
    return language_ids.with_language_id(records, written_in, self.config, f"{task} {language} {split}")

  def available(self, task: str, language: str, split: str) -> bool:
    """Whether `read(task, language, split)` has data to read."""
    if split == "filter_train":
      return filter_pairs().has_training_pairs(task, self.data, language, self.translations_dir)
    return self.data.available(task, language, split)

  @property
  def filtering(self) -> bool:
    """Whether this run is one of the FILTER settings (teacher or student)."""
    return self.setting.filter_stage is not None

  def say(self, message: str) -> None:
    """One status line (`bookkeeping.say`)."""
    bookkeeping.say(message)

  def spec(self, task: str):
    """The registry's `TaskSpec` of `task` in this run's benchmark."""
    return self.benchmark.task(task)

  def multi_task(self, task: str) -> bool:
    """Whether `task` is fine-tuned in the shared multi-task model (setting multi_task, one of `multi_tasks`)."""
    return self.setting.multi_task(self, task)

  def kind(self, task: str, student: Optional[bool] = None) -> task_kinds.Kind:
    """What fine-tuning does for `task`: its kind (`task_kinds.of`), or the multi-task kind of its model, as the
    setting wraps it (`Setting.kind`; FILTER: the teacher or, `student` / by default in its student setting,
    the student)."""
    if self.multi_task(task):
      return task_kinds.MultiTask([self.spec(t) for t in self.settings.multi_tasks])
    if self.spec(task).kind == "ranking" and self.recipe(task).ranking.head == "regression":
      base = task_kinds.RankingRegression()
    else:
      base = task_kinds.of(self.spec(task))
    return self.setting.kind(base, self.recipe(task), student)

  def recipe_key(self, task: str) -> str:
    """The `FinetuneSettings.tasks` key of `task`'s model (the multi-task model: its first task's)."""
    return self.spec(self.settings.multi_tasks[0] if self.multi_task(task) else task).model

  def recipe(self, task: str) -> TaskSettings:
    """The `TaskSettings` of `task`'s model."""
    return self.settings.recipe(self.recipe_key(task))

  def training_set(self, task: str, language: str) -> fine_tuning.TrainingSet:
    """(model name, ((reader task, language, split), ...), example limit) of `task` tested on `language`, as the
    setting says (`fine_tuning`)."""
    return self.setting.training_set(self, task, language)

  def test_split(self, task: str, language: str, pseudo: bool = False) -> str:
    """The split predicted for `language`: pseudo_test, the run's split (XGLUE's dev), or the setting's
    (translate_test: the translated test set where there is one)."""
    if pseudo:
      return "pseudo_test"
    if self.split != "test":
      return self.split
    return self.setting.test_split(task, language)

  def check_inputs(self, task: str, language: str, checked: Optional[set] = None) -> None:
    """The test data of (task, language), the training and dev data of its model exist and read (before any
    compilation, so a malformed file stops the run before it claims its directory; a source in `checked` is
    not read again, and is added to it once read); a translated test set can be matched to the original
    (`XtremeData.check_translate_test`) and is aligned with it (line count, or question ids:
    `xtreme_translations.check_translate_test_ids`). Raises `errors.ConfigError` /
    `errors.MissingInputError` / `errors.DataError`."""
    checked = set() if checked is None else checked
    split = self.test_split(task, language)
    if split == "translate_test":
      self.data.check_translate_test(task)
    needed = [(task, language, split)]
    if not self.spec(task).retrieval:
      needed += list(self.training_set(task, language)[1])
    else:  # both sides' languages have ids in a model with named languages
      for lg in (language, self.spec(task).pivot):
        language_ids.with_language_id([], lg, self.config, f"{task} {language}")
    for src in needed:
      if not self.available(*src):
        raise errors.MissingInputError(f"{src[0]} {src[2]} data for {src[1]} not found: expected "
                                       f"{self.data.location(*src)}")
    selection = None if self.spec(task).retrieval else self.store.selection(task)
    for src in dict.fromkeys(needed + list(selection["dev"] if selection else ())):
      if src not in checked:
        self.read(*src)  # a malformed file (or a translation not aligned with its original) stops the run here
        checked.add(src)

  def language_rates(self, sources: tuple) -> Optional[dict]:
    """{language: weight} of a multi-language model with `FinetuneSettings.language_rates` (None otherwise)."""
    return self.setting.language_rates(self, sources)

  def settings_comparison(self) -> Optional[str]:
    """Markdown of this run directory's scores in each of `report.COMPARED_SETTINGS` (translate-train against
    FILTER's teacher and student) side by side, per task and language; None unless this setting and another
    were scored here."""
    from xtreme_jax.evaluation import report
    found = {}
    for name in report.COMPARED_SETTINGS:
      scores = bookkeeping.read_json(os.path.join(self.run_dir, outputs(name, self.split)["scores"]))
      if isinstance(scores, dict):
        found[name] = scores
    if len(found) < 2 or self.settings.setting not in found:
      return None
    return ("# Settings side by side\n\nScores of the settings run in " + self.run_dir + " (0-100; `-`: not "
            "run).\n\n" + report.settings_table(found) + "\n")


# -- the benchmark -------------------------------------------------------------

def xtreme(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
           labels_dir: Optional[str] = None, tasks: Sequence[str] = TASKS,
           languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
           settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig(),
           translations_dir: Optional[str] = None, pseudo_test: bool = False, data_source: str = "official",
           resume_overrides: Optional[dict] = None, published_model: Optional[str] = None) -> dict:
  """Runs the XTREME benchmark in `settings.setting`; returns the scores (when `labels_dir` is given).

  `data_source`: "official" (`data_dir` is the `download/` folder) or "tfds"
  (`data_dir` is the TFDS data dir, None: TFDS's default); see `xtreme_data`.
  `translations_dir`: the copy of gs://xtreme_translations (default `<data_dir>/translations`).
  `pseudo_test`: also predict and score the pseudo test languages found there
  (the result then has a `pseudo` entry: {task: {language: metrics}}).
  `resume_overrides`: optimizer settings for the models being resumed, e.g.
  after a NaN stop (module doc).
  `published_model`: the model preset the run fine-tunes (e.g. 'xlmr_large'): the report shows the papers'
  scores of it in this setting beside the run's (`evaluation/published.py`); None: none.
  The result also holds `runs` ({model: run entry}, as `<run_dir>/runs.json`)
  and `retrieval` (layer, pooling and max length of BUCC / Tatoeba).
  `run_dir` is claimed for the whole run (`RunDirectory`, `run_fingerprint`).
  """
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        translations_dir, data_source, resume_overrides)
  return _run(runner, tasks, languages, labels_dir, pseudo_test, published_model)


def xglue(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
          labels_dir: Optional[str] = None, tasks: Sequence[str] = XGLUE.task_names,
          languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
          settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig(),
          split: str = "test", resume_overrides: Optional[dict] = None, translations_dir: Optional[str] = None,
          published_model: Optional[str] = None) -> dict:
  """Runs XGLUE's tasks in `settings.setting` (`XGLUE.settings`).

  `data_dir`: the unpacked `xglue_full_dataset` folder. `split`: the split
  predicted, `test` (the leaderboard submission, `<run_dir>/submission/`)
  or `dev` (`<run_dir>/submission-dev/`), written in the official layout
  `<TASK>/<lg>.prediction`. With `labels_dir` (a folder in the dataset
  layout whose `split` files carry labels: for dev, `data_dir` itself) the
  submission is scored as the official scorer does (`xglue_scorer`) and the
  report written. `translations_dir`: your translations of XGLUE's data, which
  the FILTER settings pair with it (`data/filter/filter_pairs.py`). The rest as
  `xtreme`.
  """
  errors.require(split in ("dev", "test"), f"SPLIT={split!r}; expected 'dev' or 'test'")
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        translations_dir, resume_overrides=resume_overrides, benchmark="xglue", split=split)
  return _run(runner, tasks, languages, labels_dir, published_model=published_model)


def mbert(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
          labels_dir: Optional[str] = None, tasks: Sequence[str] = MBERT.task_names,
          languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
          settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig(),
          resume_overrides: Optional[dict] = None, published_model: Optional[str] = None) -> dict:
  """Runs the mBERT paper's tasks (`registry/mbert.py`: MLDoc, CoNLL NER, UD POS, parsing) zero-shot from
  English.

  `data_dir`: the folder of their datasets in their own layouts; `labels_dir`
  (usually `data_dir`: the test files carry the gold) scores the submission
  with `evaluation/mbert_scorer.py`. The rest as `xtreme`.
  """
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        resume_overrides=resume_overrides, benchmark="mbert")
  return _run(runner, tasks, languages, labels_dir, published_model=published_model)


def lab(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
        labels_dir: Optional[str] = None, tasks: Sequence[str] = ("pos", "topic"),
        languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
        settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig()) -> dict:
  """Runs the transfer lab's fine-tuned tasks (`registry/lab.py`) on a generated lab folder `data_dir` (its
  test files carry the gold: `labels_dir` is usually `data_dir`); the lab run mode (`runs/lab.py`) calls it
  once per condition and seed. The rest as `xtreme`."""
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        benchmark="lab")
  return _run(runner, tasks, languages, labels_dir)


def _run(runner: XtremeRunner, tasks: Sequence[str], languages: Optional[dict], labels_dir: Optional[str],
         pseudo_test: bool = False, published_model: Optional[str] = None) -> dict:
  """Claims the run directory, checks everything (`check_run`), then `run_benchmark`."""
  from xtreme_jax.evaluation import published
  published.check_model(published_model)
  errors.require(not (pseudo_test and runner.filtering), "PSEUDO_TEST=True with a FILTER setting: the pseudo test sets "
                 "have no English side to pair with; run them in another setting")
  with RunDirectory(runner.run_dir, run_fingerprint(runner), known=RUN_ENTRIES) as claim:
    resumed = claim.check()
    plan = check_run(runner, tasks, languages, labels_dir)
    claim.commit()
    logging.info("%s run in %s (%s): %s", runner.benchmark.name.upper(), runner.run_dir,
                 "re-entered" if resumed else "new", plan)
    return run_benchmark(runner, plan, labels_dir, pseudo_test, published_model)


def run_benchmark(runner: XtremeRunner, plan: Mapping[str, list[str]], labels_dir: Optional[str],
                  pseudo_test: bool = False, published_model: Optional[str] = None) -> dict:
  """Fine-tune, predict and retrieve `plan` ({task: [languages]}, from `check_run`), then score and report."""
  pseudo_plan = {t: runner.predictions.pseudo_languages(t) for t in plan} if pseudo_test else {}
  for task, langs in plan.items():
    if runner.spec(task).retrieval:
      runner.retrieval.run_task(task, langs)
    else:
      runner.predictions.predict_task(task, langs)
    if pseudo_plan.get(task):
      runner.predictions.predict_task(task, pseudo_plan[task], pseudo=True)
  runner.predictions.write_manifests(runner.submission)
  if runner.resume_overrides and not runner.store.resumed_with_overrides:
    logging.warning("RESUME_OVERRIDES %s unused: no model in %s was being resumed", runner.resume_overrides,
                    os.path.join(runner.run_dir, "models"))
  extras = {"runs": runner.store.write_runs(), "retrieval": runner.retrieval.summary(plan)}
  if pseudo_test:
    extras["pseudo"] = scoring.score_pseudo(runner, pseudo_plan)
  if not labels_dir:
    print(f"submission written to {runner.submission}; pass LABELS_DIR to score it")
    return extras
  return scoring.score_run(runner, plan, labels_dir, extras, published_model)
