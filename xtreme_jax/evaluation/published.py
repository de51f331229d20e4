"""Published scores of the models the papers report, and the report section that shows them beside a run's own
(`published_section`).

Each file of `resources/published/` holds one model's scores on one benchmark
from one source, copied by hand from what the source shows:

    {"model": "xlmr_large",              # a model preset of gin_configs/models/
     "benchmark": "xtreme",              # a key of `registry.BENCHMARKS`
     "settings": ["zero_shot"],          # the run settings the numbers belong to
     "source": {"citation": ..., "table": ..., "read_from": URL at a commit, "row": ..., "note": ...},
     "tasks": {"mlqa": {"f1": {"avg": 70.7, "languages": {"en": 80.6, ...}}, "exact_match": {...}}}}

Scores are on 0-100 (BLEU points for generation); a metric is the task's
score key in the registry or, for a task scored on (EM + F1) / 2, `f1` or
`exact_match`. A run names its model with the `published_model` argument of
`runs/xtreme.py` (Gin `xtreme.xtreme.published_model`, ...): `for_run` then
returns every file of that model, benchmark and setting; a run without one
shows nothing extra.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Mapping, Optional, Sequence

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.evaluation import metrics
from xtreme_jax.evaluation.tables import METRIC_LABEL, fmt, markdown, mean, ordered_languages
from xtreme_jax.registry import BENCHMARKS

SOURCE_KEYS = ("citation", "table", "read_from")  # every source names these (non-empty)


def data_dir() -> str:
  return paths.resources_dir("published")


@functools.lru_cache(maxsize=None)
def entries() -> tuple:
  """Every published-scores file, in file-name order."""
  folder = data_dir()
  out = []
  for name in sorted(os.listdir(folder)):
    if name.endswith(".json"):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        out.append({**json.load(f), "file": name})
  return tuple(out)


def models() -> list[str]:
  """The model presets that have published scores."""
  return sorted({e["model"] for e in entries()})


def metrics_of(benchmark: str, task: str) -> tuple[str, ...]:
  """The metrics a published score of `task` may be on: its score key, or F1 / EM for (EM + F1) / 2."""
  score = BENCHMARKS[benchmark].task(task).score
  return ("f1", "exact_match") if score == "em_f1" else (score,)


def check_model(model: Optional[str]) -> None:
  """Refuses a `published_model` that names no model with published scores (None: no comparison)."""
  if model is not None and model not in models():
    raise errors.ConfigError(f"published_model={model!r} has no published scores; known: {models()} (or None)")


def for_run(model: Optional[str], benchmark: str, setting: str) -> list[dict]:
  """The published entries of `model` on `benchmark` in `setting` ([] for None or none found)."""
  return [e for e in entries() if e["model"] == model and e["benchmark"] == benchmark and setting in e["settings"]]


def label(index: int) -> str:
  """An entry's short name in a report's tables: `[1]`, `[2]`, ..."""
  return f"[{index + 1}]"


def citation_line(index: int, entry: Mapping) -> str:
  """One line naming an entry's source: citation, table (and row), where it was read, its note."""
  s = entry["source"]
  row = f", row '{s['row']}'" if s.get("row") else ""
  note = f" {s['note']}" if s.get("note") else ""
  return f"{label(index)} {s['citation']}: {s['table']}{row}; read from {s['read_from']}.{note}"


def published_section(entries: Sequence[Mapping], tasks: Sequence[str], yours) -> str:
  """The papers' scores of the run's model (`entries`, from `published.for_run`) beside the run's on `tasks`:
  a table of task means, one per task with per-language numbers where the source gives them, then the sources.
  `yours(task, metric)` is the run's {language: score, 0-100}; "" when no entry covers a task of the run."""
  entries = [e for e in entries if any(task in e["tasks"] for task in tasks)]  # numbered [1], [2], ... as cited
  rows, per_language = [], []
  for task in tasks:
    for i, entry in enumerate(entries):
      for metric, scores in entry["tasks"].get(task, {}).items():
        mine = yours(task, metric)
        shown = f"{fmt(mean(mine.values()))} ({len(mine)})" if mine else "-"
        rows.append([task, METRIC_LABEL.get(metric, metric), shown, fmt(scores.get("avg")), label(i)])
        if scores.get("languages"):
          per_language.append((task, metric, i, mine, scores))
  if not rows:
    return ""
  parts = ["## Published scores",
           "The papers' scores of this model (sources below) beside this run's: yours is the mean over the "
           "languages scored here (their number in brackets), the published one over the task's languages.",
           markdown(["Task", "Metric", "Yours", "Published", "Source"], ["---", "---", "---:", "---:", "---"], rows)]
  for task, metric, i, mine, scores in per_language:
    langs = ordered_languages(task if task in metrics.TASK_METRIC else None, [*scores["languages"], *mine])
    name = METRIC_LABEL.get(metric, metric)
    parts += [f"### {task}: {name} per language {label(i)}",
              markdown(["", *langs], ["---"] + ["---:"] * len(langs),
                       [["yours", *(fmt(mine.get(lg)) for lg in langs)],
                        [f"published {label(i)}", *(fmt(scores["languages"].get(lg)) for lg in langs)]])]
  parts.append("\n".join(f"- {citation_line(i, entry)}" for i, entry in enumerate(entries)))
  return "\n\n".join(parts)
