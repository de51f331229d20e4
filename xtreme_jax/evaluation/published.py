"""Published scores of the models the papers report, to show beside a run's own (`report`).

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
from typing import Mapping, Optional

from xtreme_jax import errors
from xtreme_jax.data import paths
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
