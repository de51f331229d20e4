"""What differs between the benchmarks the run mode serves (XTREME, XGLUE, the mBERT paper, the transfer lab): one
object each.

`PROTOCOLS[name]` bundles a benchmark's registry spec, its data object, its label checks, its official scorer,
table and report, and what runs after scoring (XTREME's analyses, the mBERT paper's subword overlap). The
runner (`runs/xtreme.py`) and the `score` command (`runs/score_command.py`) ask a protocol and never branch on
which benchmark it is.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from xtreme_jax import errors, fs
from xtreme_jax.data.readers.lab_data import LabData
from xtreme_jax.data.readers.mbert_data import MbertData
from xtreme_jax.data.readers.xglue_data import XglueData
from xtreme_jax.data.readers.xtreme_data import XtremeData
from xtreme_jax.registry import LAB, MBERT, XGLUE, XTREME, BenchmarkSpec


class Protocol:
  """A benchmark's data, label checks, scorer and report (the base: what every benchmark shares)."""

  spec: BenchmarkSpec
  data_class: type
  labels_layout: str = ""  # what LABELS_DIR / `score --labels` must be (help and error lines)
  predictions_layout: str = ""  # a submission's files (help and error lines)
  absent: str = "no predictions folder"  # why the `score` command leaves a task out
  splits: tuple = ("test",)  # the splits the `score` command may score
  ordered_predictions: bool = False  # whether prediction folders record their data source (`write_manifests`)

  def data(self, source: str, data_dir: Optional[str], translations_dir: Optional[str] = None):
    """The benchmark's data object (`read` / `available` / `location`)."""
    return self.data_class(source, data_dir, translations_dir)

  def check_labels(self, runner: Any, tasks: Sequence[str], labels_dir: str) -> None:
    """LABELS_DIR can score `tasks` (called only when it is given)."""
    del runner, tasks
    errors.require(fs.isdir(labels_dir), f"LABELS_DIR {labels_dir} does not exist (expected {self.labels_layout})")

  def check_plan(self, runner: Any, plan: Mapping[str, list], labels_dir: str) -> None:
    """LABELS_DIR can score the planned {task: [languages]} (called only when it is given)."""
    del runner, plan, labels_dir

  def score(self, runner: Any, tasks: Sequence[str], labels_dir: str) -> dict:
    """The scores of a run's submission of `tasks` against `labels_dir`."""
    return self.score_folder(runner.submission, labels_dir, tasks, runner.split)

  def score_folder(self, predictions: str, labels: str, tasks: Optional[Sequence[str]], split: str) -> dict:
    """`xtreme-jax score`: the tasks (None: every one) found in `predictions`, scored against `labels`, with
    `missing_tasks`: those left out (`absent`)."""
    raise NotImplementedError

  def scored(self, results: dict) -> bool:
    """Whether `results` hold at least one scored language."""
    return any(t["languages"] for t in results["tasks"].values())

  def write_report(self, results: dict, folder: str) -> dict:
    """`report.md`, `results.json` and the plots of `results` in `folder`; {name: path written}."""
    raise NotImplementedError

  def table(self, results: dict) -> str:
    raise NotImplementedError

  def after_scoring(self, runner: Any, plan: Mapping[str, list], labels_dir: str, scores: dict) -> None:
    """What the benchmark adds to a scored run's report (on the first process only)."""
    del runner, plan, labels_dir, scores


class Xtreme(Protocol):
  """XTREME: the leaderboard layout (`<task>/test-<lg>.tsv|json`), its scorer, Section 6's analyses."""

  spec, data_class, ordered_predictions = XTREME, XtremeData, True
  labels_layout = "the test gold in the leaderboard layout, <LABELS_DIR>/<task>/test-<language>.tsv|json"
  predictions_layout = "<dir>/<task>/test-<lg>.tsv|json"
  absent = "no predictions or labels folder"

  def check_labels(self, runner, tasks, labels_dir):
    from xtreme_jax.evaluation import scorer
    if not fs.isdir(labels_dir):
      raise errors.MissingInputError(f"LABELS_DIR {labels_dir} does not exist (expected {self.labels_layout})")
    source, blocked = scorer.data_source(labels_dir), [t for t in tasks if t in scorer.ORDER_DEPENDENT]
    errors.require(source == runner.data.source or not blocked,
                   f"cannot score {', '.join(blocked)} against LABELS_DIR {labels_dir}: its labels are in the {source} "
                   f"order (its manifest.json; none: official) but DATA_SOURCE={runner.data.source!r} predicts in the "
                   f"{runner.data.source} order (the TFDS builders shuffle examples), and these tasks match lines by "
                   f"position; score against labels from the same source, or set LABELS_DIR=None or "
                   f"DATA_SOURCE={source!r}")

  def score_folder(self, predictions, labels, tasks, split):
    from xtreme_jax.evaluation import scorer
    return scorer.score_submission(predictions, labels, tasks=tasks)

  def write_report(self, results, folder):
    from xtreme_jax.evaluation import report
    return report.write_report(results, folder)

  def table(self, results):
    from xtreme_jax.evaluation import scorer
    return scorer.format_table(results)

  def after_scoring(self, runner, plan, labels_dir, scores):
    print(f"analyses: {xtreme_analyses(runner, labels_dir, scores)}")


def xtreme_analyses(runner: Any, labels_dir: str, scores: dict) -> str:
  """XTREME's Section 6 analyses of a scored run (`evaluation/analyses.py`) -> `report/analyses.md`: every
  task's mean score per language family and script; for panx / udpos, the target languages' gold entities /
  tag trigrams seen and unseen in the English training data."""
  from xtreme_jax.evaluation import analyses, metrics, scorer
  task_scores = {t: {lg: metrics.language_score(t, r) for lg, r in result["languages"].items()}
                 for t, result in scores["tasks"].items() if result.get("languages")}
  seen: dict = {}
  for task in ("panx", "udpos"):
    if task not in task_scores:
      continue
    train = runner.data.read(*runner.spec(task).train)  # the records, also in the FILTER settings (not pairs)
    for lg in task_scores[task]:
      if lg == "en":
        continue
      gold = scorer.read_tag_sentences(os.path.join(labels_dir, XTREME.prediction_file(task, lg)))
      predicted = scorer.read_tag_sentences(runner.predictions.path(task, lg))
      seen.setdefault(task, {})[lg] = (
          analyses.entities_seen_unseen(train, [r["tokens"] for r in runner.data.read(task, lg, "test")], gold,
                                        predicted)
          if task == "panx" else analyses.pos_trigrams_seen_unseen(train, gold, predicted))
  return analyses.write_report(runner.report_dir, task_scores, seen)


class Xglue(Protocol):
  """XGLUE: `<TASK>/<lg>.prediction`, its scorer (0-1 scale) over every language of a task."""

  spec, data_class = XGLUE, XglueData
  labels_layout = ("the XGLUE ground truth: the dataset layout with labelled files (official layout and 0-1 "
                   "scale), e.g. the xglue_full_dataset folder for the dev split")
  predictions_layout = "<dir>/<TASK>/<lg>.prediction"
  splits = ("dev", "test")

  def check_plan(self, runner, plan, labels_dir):
    """Scoring XGLUE needs every language of a task (the official average is over all of them), each with a
    labelled ground-truth file for the predicted split (the release hides the test labels)."""
    from xtreme_jax.data.readers import xglue_readers
    partial = {t: [lg for lg in runner.spec(t).test_languages if lg not in langs] for t, langs in plan.items()}
    partial = {t: lgs for t, lgs in partial.items() if lgs}
    errors.require(not partial, f"XGLUE scores a task over all its languages, but these are not predicted: {partial} "
                   "(not in LANGUAGES, or no data on disk); run every language or set LABELS_DIR=None")
    for task, langs in plan.items():
      spec, key = runner.spec(task), runner.kind(task).gold_key
      if key is None:
        continue  # answers are part of every MLQA file
      for lg in langs:
        gold = xglue_readers.read(task, labels_dir, lg, runner.split)
        where = xglue_readers.path(spec, labels_dir, lg, runner.split, spec.sides[-1] if spec.sides else None)
        errors.require(all(ex[key] is not None for ex in gold),
                       f"LABELS_DIR: {where} has no labels (the XGLUE release hides its test labels); score "
                       "SPLIT='dev' or set LABELS_DIR=None")

  def score_folder(self, predictions, labels, tasks, split):
    from xtreme_jax.evaluation import xglue_scorer
    return xglue_scorer.score_submission(predictions, labels, split, tasks)

  def scored(self, results):
    return bool(results["tasks"])

  def write_report(self, results, folder):
    from xtreme_jax.evaluation import report
    return report.write_xglue_report(results, folder)

  def table(self, results):
    from xtreme_jax.evaluation import xglue_scorer
    return xglue_scorer.format_table(results)


class GoldInData(Protocol):
  """A benchmark whose data folder's test files carry the gold (the mBERT paper's, the lab's): submissions
  `<task>/test-<lg>.tsv`, scored by task kind (`evaluation/mbert_scorer.py`)."""

  predictions_layout = "<dir>/<task>/test-<lg>.tsv"

  def gold(self, labels_dir: str):
    """The data object whose test files score a submission."""
    if not fs.isdir(labels_dir):
      raise errors.MissingInputError(f"data folder {labels_dir} does not exist (or is not a folder); expected "
                                     f"{self.labels_layout}")
    return self.data_class(data_dir=labels_dir)

  def score(self, runner, tasks, labels_dir):
    from xtreme_jax.evaluation import mbert_scorer
    return mbert_scorer.score_submission(runner.submission, self.gold(labels_dir), tasks)

  def score_folder(self, predictions, labels, tasks, split):
    from xtreme_jax.evaluation import mbert_scorer
    return mbert_scorer.score_folders(predictions, self.gold(labels), tasks)

  def write_report(self, results, folder):
    from xtreme_jax.evaluation import report
    return report.write_mbert_report(results, folder, self.spec)

  def table(self, results):
    from xtreme_jax.evaluation import mbert_scorer
    return mbert_scorer.format_table(results, self.spec)


class Mbert(GoldInData):
  """The mBERT paper's tasks scored against its data folder; Figure 3's overlap after scoring."""

  spec, data_class = MBERT, MbertData
  labels_layout = "the mBERT paper's data folder: its test files carry the gold, registry/mbert.py"

  def after_scoring(self, runner, plan, labels_dir, scores):
    """The paper's Figure 3 for this run's scores: subword overlap against the transfer score."""
    from xtreme_jax.evaluation import mbert_scorer, overlap
    per_task = {t: {lg: m[mbert_scorer.METRIC[t]] for lg, m in r["languages"].items()}
                for t, r in scores["tasks"].items()}
    written = overlap.write_report(runner.report_dir, overlap.rows(runner.data, per_task, runner.vocab.encode))
    print(f"subword overlap: {written['overlap.md']}")


class Lab(GoldInData):
  """The transfer lab (`runs/lab.py`): its generated folder holds the gold."""

  spec, data_class = LAB, LabData
  labels_layout = "the lab's data folder (its lab.json): its test files carry the gold"


PROTOCOLS: dict[str, Protocol] = {p.spec.name: p for p in (Xtreme(), Xglue(), Mbert(), Lab())}
