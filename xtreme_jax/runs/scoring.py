"""Scoring a benchmark run's submission: the scores and the report through the benchmark's protocol
(`runs/benchmarks.py`), the papers' numbers beside them, the settings run in the same directory side by side,
and the pseudo test sets. `runner` is the run's `xtreme.XtremeRunner`."""

from __future__ import annotations

import os
from typing import Mapping, Optional

import jax

from xtreme_jax import atomic
from xtreme_jax.evaluation import metrics as task_metrics, published, report, scorer
from xtreme_jax.runs import bookkeeping
from xtreme_jax.runs.run_checks import test_languages


def score_run(runner, plan: Mapping[str, list[str]], labels_dir: str, extras: dict,
              published_model: Optional[str]) -> dict:
  """Scores the submission of `plan` against `labels_dir`, writes `scores.json` and the report (with `extras`:
  the runs, retrieval settings, pseudo scores), prints the table; returns the report's results."""
  bookkeeping.say(f"scoring {runner.submission} against {labels_dir}")
  protocol = runner.protocol
  scores = protocol.score(runner, list(plan), labels_dir)
  on_disk = {t: test_languages(t, runner.data, None, runner.split) for t in plan}  # a sample's languages
  found = published.for_run(published_model, runner.benchmark.name, runner.settings.setting)
  results = report.mark_not_in_data({**scores, **extras, **({"published": found} if found else {})}, on_disk)
  if jax.process_index() == 0:
    atomic.write_json(runner.scores_path, scores)  # the scorer's output, as `xtreme-jax score --out` writes it
    protocol.write_report(results, runner.report_dir)
  print(protocol.table(results))
  print(f"report: {os.path.join(runner.report_dir, 'report.md')}")
  if jax.process_index() == 0:
    protocol.after_scoring(runner, plan, labels_dir, scores)
  compared = runner.settings_comparison()
  if compared is not None and jax.process_index() == 0:
    atomic.write_text(os.path.join(runner.report_dir, "settings.md"), compared)
    print(f"settings side by side: {os.path.join(runner.report_dir, 'settings.md')}")
  return results


def score_pseudo(runner, plan: dict) -> dict:
  """Scores the pseudo test predictions against their gold; {task: {language: metrics}}, also written to JSON."""
  scores: dict = {}
  for task, langs in plan.items():
    for lg in langs:
      gold = runner.predictions.write_pseudo_gold(task, lg)
      pred = runner.predictions.path(task, lg, runner.pseudo_submission)
      scores.setdefault(task, {})[lg] = scorer.score_file(task, lg, pred, gold)
  runner.predictions.write_manifests(runner.pseudo_submission, runner.pseudo_labels)
  if jax.process_index() == 0:
    atomic.write_json(runner.pseudo_scores_path, scores)
  if not scores:
    print("pseudo test: no pseudo test file found under", runner.translations_dir)
  for task, by_lang in scores.items():
    print(f"pseudo {task}: " + "  ".join(f"{lg} {task_metrics.language_score(task, m):.1f}"
                                         for lg, m in by_lang.items()))
  return scores
