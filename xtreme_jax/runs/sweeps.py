"""The best run of a sweep, per fine-tuned model (`xtreme-jax sweep-summary RUN_ROOT`).

`tpu_scripts/sweep.sh` writes one run directory per value of a Gin macro
under RUN_ROOT (`RUN_ROOT/LEARNING_RATE=5e-06/`, ...). Each benchmark run
lists its models in `runs.json` and each model's selected dev score in
`models/<model>/summary.json` (`best`: the value of the criterion the recipe
selects on: `english_dev`, `mean_dev`). `summarize` reads them and picks, per
model, the run with the highest selected dev score, as the papers choose
their learning rate (FILTER: the mean dev score over all languages; the mBERT
paper: English dev). Models selected on their final step (`final`) have no
dev score and are listed without a choice. `write` puts `sweep.json` and
`sweep.md` into RUN_ROOT.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from xtreme_jax import atomic, errors, fs


def _json(path: str) -> Optional[dict]:
  if not fs.isfile(path):
    return None
  try:
    return json.loads(fs.read_text(path))
  except json.JSONDecodeError as e:
    raise errors.DataError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None


def summarize(root: str) -> dict:
  """{"runs": [run names], "models": {model: {"criterion", "metric", "scores": {run: value | None}, "best":
  run | None}}} of the run directories under `root` (module docstring)."""
  if not fs.isdir(root):
    raise errors.MissingInputError(f"sweep folder {root} does not exist")
  runs = sorted(d for d in fs.listdir(root) if fs.isfile(os.path.join(root, d, "runs.json")))
  if not runs:
    raise errors.MissingInputError(f"{root} holds no run directory with a runs.json (a finished benchmark run); "
                                   "expected RUN_ROOT of tpu_scripts/sweep.sh")
  models: dict[str, dict] = {}
  for run in runs:
    for model, entry in (_json(os.path.join(root, run, "runs.json")) or {}).items():
      summary = _json(os.path.join(root, run, "models", model, "summary.json")) or {}
      best = summary.get("best") if entry.get("criterion") != "final" else None
      row = models.setdefault(model, {"criterion": entry.get("criterion"), "metric": None, "scores": {}})
      row["scores"][run] = None if best is None else float(best["value"])
      row["metric"] = row["metric"] or (best or {}).get("metric")
  for row in models.values():
    scored = {run: value for run, value in row["scores"].items() if value is not None}
    row["best"] = max(scored, key=scored.get) if scored else None  # ties: the first run in name order
  return {"runs": runs, "models": dict(sorted(models.items()))}


def markdown(summary: dict) -> str:
  runs = summary["runs"]
  lines = ["| model | selected on | " + " | ".join(runs) + " | best |", "|---|---|" + "---:|" * len(runs) + "---|"]
  for model, row in summary["models"].items():
    cells = ["-" if row["scores"].get(r) is None else
             (f"**{row['scores'][r]:.2f}**" if r == row["best"] else f"{row['scores'][r]:.2f}") for r in runs]
    lines.append(f"| {model} | {row['criterion']} | " + " | ".join(cells) + f" | {row['best'] or '-'} |")
  return "\n".join(lines) + "\n"


def write(root: str) -> dict:
  """`summarize(root)`, written to `root/sweep.json` and `root/sweep.md`."""
  summary = summarize(root)
  atomic.write_json(os.path.join(root, "sweep.json"), summary)
  atomic.write_text(os.path.join(root, "sweep.md"), markdown(summary))
  return summary


def main(argv: list[str]) -> int:
  parser = errors.ArgumentParser(prog="xtreme-jax sweep-summary",
                                 description="The best run of a tpu_scripts/sweep.sh sweep per fine-tuned model.")
  parser.add_argument("run_root", metavar="RUN_ROOT", help="the sweep's folder of run directories")
  args = parser.parse_args(argv)
  summary = write(args.run_root)
  print(markdown(summary), end="")
  print(f"wrote {os.path.join(args.run_root, 'sweep.md')} and sweep.json")
  return 0
