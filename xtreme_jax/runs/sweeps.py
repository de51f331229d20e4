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

With a `baseline` run (`--baseline 'FREEZE_BOTTOM=None'`), `differences`
gives each other run's test score minus the baseline's per task and
language (from each run's `scores.json`, XTREME's or XGLUE's; a run of
another setting: its `scores-<setting>.json`), added to `sweep.md` and
drawn as `sweep_differences.png`, one panel per task, a line per language
over the runs: the mBERT paper's Figure 1 for a sweep of `FREEZE_BOTTOM`
against fine-tuning everything, with a feature-based run beside them.
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


def _scores_file(run_dir: str) -> str:
  """The run's test scores: `scores.json` (zero-shot), else its one other setting's `scores-<setting>.json`."""
  plain = os.path.join(run_dir, "scores.json")
  if fs.isfile(plain) or not fs.isdir(run_dir):
    return plain
  names = sorted(n for n in fs.listdir(run_dir) if n.startswith("scores-") and n.endswith(".json")
                 and not n.startswith("scores-dev") and not n.endswith("-pseudo.json"))
  if len(names) > 1:
    raise errors.ConfigError(f"{run_dir} holds the test scores of several settings ({', '.join(names)}); a sweep "
                             "run should hold one")
  return os.path.join(run_dir, names[0]) if names else plain


def scores_by_language(run_dir: str) -> dict[str, dict[str, float]]:
  """{task: {language: score}} of a run's test scores (`_scores_file`; XTREME's per-language results or XGLUE's
  floats)."""
  from xtreme_jax.evaluation import metrics  # pylint: disable=g-import-not-at-top
  path = _scores_file(run_dir)
  scores = _json(path)
  if scores is None:
    raise errors.MissingInputError(f"{path} does not exist: the run was not scored (pass LABELS_DIR)")
  out = {}
  for task, result in scores.get("tasks", {}).items():
    if isinstance(result, dict) and "languages" in result:
      out[task] = {lg: metrics.language_score(task, r) for lg, r in result["languages"].items()}
    else:
      out[task] = {lg: float(v) for lg, v in result.items() if lg != "avg" and isinstance(v, (int, float))}
  return out


def differences(root: str, runs: list[str], baseline: str) -> dict:
  """{task: {language: {run: score - baseline's}}} for the runs other than `baseline`."""
  if baseline not in runs:
    raise errors.ConfigError(f"--baseline {baseline!r} is not a run of {root}; runs: {', '.join(runs)}")
  base = scores_by_language(os.path.join(root, baseline))
  out: dict = {}
  for run in runs:
    if run == baseline:
      continue
    for task, languages in scores_by_language(os.path.join(root, run)).items():
      for lg, value in languages.items():
        if lg in base.get(task, {}):
          out.setdefault(task, {}).setdefault(lg, {})[run] = value - base[task][lg]
  return out


def _difference_markdown(diffs: dict, runs: list[str], baseline: str) -> str:
  others = [r for r in runs if r != baseline]
  lines = [f"\nTest score minus {baseline}'s:\n", "| task | language | " + " | ".join(others) + " |",
           "|---|---|" + "---:|" * len(others)]
  for task, languages in diffs.items():
    for lg, values in languages.items():
      lines.append(f"| {task} | {lg} | " + " | ".join("-" if r not in values else f"{values[r]:+.2f}"
                                                       for r in others) + " |")
  return "\n".join(lines) + "\n"


def plot_differences(diffs: dict, runs: list[str], baseline: str, path: str) -> None:
  from xtreme_jax.evaluation.plots import new_figure, save_png  # pylint: disable=g-import-not-at-top
  others = [r for r in runs if r != baseline]
  figure = new_figure(4 * max(len(diffs), 1), 3.5)
  for i, (task, languages) in enumerate(diffs.items()):
    axes = figure.add_subplot(1, len(diffs), i + 1)
    for lg, values in languages.items():
      axes.plot(range(len(others)), [values.get(r, float("nan")) for r in others], marker="o", label=lg)
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.set_xticks(range(len(others)), others, rotation=30, fontsize=7)
    axes.set_title(task)
    axes.set_ylabel(f"score - {baseline}")
    axes.legend(fontsize=6)
  figure.tight_layout()
  save_png(figure, path)


def write(root: str, baseline: Optional[str] = None) -> dict:
  """`summarize(root)`, written to `root/sweep.json` and `root/sweep.md`; with `baseline`, also the test score
  differences (`differences`) in both and the plot `root/sweep_differences.png`."""
  summary = summarize(root)
  text = markdown(summary)
  if baseline is not None:
    summary["baseline"] = baseline
    summary["differences"] = differences(root, summary["runs"], baseline)
    text += _difference_markdown(summary["differences"], summary["runs"], baseline)
    plot_differences(summary["differences"], summary["runs"], baseline, os.path.join(root, "sweep_differences.png"))
  atomic.write_json(os.path.join(root, "sweep.json"), summary)
  atomic.write_text(os.path.join(root, "sweep.md"), text)
  return summary


def grid_value(point, index: int, names: tuple = ()):
  """Element `index` of a grid point (a tuple macro swept as one value, e.g. the mBERT paper's (learning rate,
  batch size, epochs)), for Gin: `LEARNING_RATE = @lr/sweeps.grid_value()`; `names` name the elements in the
  error when the point has the wrong length."""
  if not isinstance(point, (tuple, list)) or not 0 <= index < len(point) or (names and len(point) != len(names)):
    what = f"a tuple ({', '.join(names)})" if names else f"a tuple of at least {index + 1} values"
    raise errors.ConfigError(f"grid point {point!r}; expected {what}")
  return point[index]


def main(argv: list[str]) -> int:
  parser = errors.ArgumentParser(prog="xtreme-jax sweep-summary",
                                 description="The best run of a tpu_scripts/sweep.sh sweep per fine-tuned model.")
  parser.add_argument("run_root", metavar="RUN_ROOT", help="the sweep's folder of run directories")
  parser.add_argument("--baseline", help="a run (e.g. 'FREEZE_BOTTOM=None'): tabulate and plot the other runs' "
                                         "test scores minus its own")
  args = parser.parse_args(argv)
  write(args.run_root, args.baseline)
  print(fs.read_text(os.path.join(args.run_root, "sweep.md")), end="")
  print(f"wrote {os.path.join(args.run_root, 'sweep.md')} and sweep.json")
  return 0
