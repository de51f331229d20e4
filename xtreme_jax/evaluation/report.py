"""Human-readable XTREME reports: markdown tables, per-language plots, a report folder.

Input is the result dict of `scorer.score_submission` (or of
`results_from_metrics`, which builds the same dict from in-memory metrics):

    {"tasks": {task: {"languages": {lg: metrics}, "missing": {lg: reason},
                      "average": {...}, "score": float | None, "complete": bool}},
     "missing_tasks": [...], "categories": {...}, "overall": float | None}

and, optionally (rendered when present), what the runner knows of its models:

    "runs": {model: {"task": str, "criterion": str | None, "selected_step": int | None,
                     "train_steps": int, "history": [[step, loss], ...],
                     "train_accuracy": float | None (x100)}},
    "retrieval": {"bucc2018" | "tatoeba": {"layer": int, "pooling": "cls" | "mean",
                                           "max_len": int}}

* `markdown_task_table`: one task, the languages scored as columns (English
  first, then the benchmark's order, then any other language), an `avg`
  column, the task's metrics as rows, as in the XTREME paper's appendix
  tables; `not_scored_line` lists the other languages in one line.
* `transfer_gap_table`: per task, the English score, the mean of the other
  languages and their difference (DATA_AND_METRICS.md: "English score minus
  mean of the other languages"; QA tasks on EM, as XTREME's Table 3); `-`
  where a task has no English test set.
* `summary_table`: task scores, category scores, overall.
* `finetuning_table` / `retrieval_lines`: the models (selected step or
  "final", train accuracy, the loss smoothed over the last 10% of the steps)
  and the retrieval embeddings (layer, pooling, maximum length).
* with `results["published"]` (entries of `published.for_run`), the
  papers' scores of the run's model beside the run's own, each source named
  (`published.published_section`).
* `mark_not_in_data`: a missing language whose test data is not on disk (a
  sample without it) reads "not in the data", not "no prediction file".
* `plot_task`: bar chart of one task's score per language, grouped and
  coloured by language family, every family in the legend, a score of 0 drawn
  at zero height, marked and labelled "0.0"; `plot_losses`: training loss
  per model, each line its own colour / line style pair; both drawn by
  `plots.py` (matplotlib, Agg canvas, no pyplot state).
* `render_markdown` / `write_report`: the whole report, opening with the
  score table; every file is written atomically through `atomic` (temporary
  file in the same folder, then `os.replace`; a `gs://` folder gets whole
  uploads), plots rendered to PNG bytes in memory first.

Numbers are shown with one decimal; nothing is printed.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence

from xtreme_jax import atomic, fs
from xtreme_jax.evaluation import metrics, plots, published
from xtreme_jax.evaluation.tables import ENGLISH, METRIC_LABEL, fmt, markdown, mean, ordered_languages
from xtreme_jax.registry import MBERT, BenchmarkSpec

QA_ROW = "F1 / EM"
# Rows of each task's table: (label, metric key); `None` is the QA "F1 / EM" cell.
# Rows whose metric no language has are left out (e.g. BUCC without P / R).
_QA_ROWS = ((QA_ROW, None), ("(EM + F1) / 2", "em_f1"))
TASK_ROWS = {
    "xnli": (("Acc.", "accuracy"),),
    "pawsx": (("Acc.", "accuracy"),),
    "udpos": (("F1 (leaderboard)", "f1"), ("Token acc.", "accuracy")),
    "panx": (("F1", "f1"), ("P", "precision"), ("R", "recall")),
    "xquad": _QA_ROWS,
    "mlqa": _QA_ROWS,
    "tydiqa": _QA_ROWS,
    "bucc2018": (("F1", "f1"), ("P", "precision"), ("R", "recall")),
    "tatoeba": (("Acc.", "accuracy"),),
}
CATEGORY_LABEL = {"classification": "Classification", "structured_prediction": "Structured prediction",
                  "qa": "Question answering", "retrieval": "Retrieval"}
# Optional keys of the results that are not tasks (see the module docstring).
EXTRA_KEYS = ("runs", "retrieval", "published")
# The `missing` reason of a language whose test data is not on disk (`mark_not_in_data`).
NOT_IN_DATA = metrics.NOT_IN_DATA
# The transfer gap of QA tasks is on exact match (XTREME's Table 3).
GAP_METRIC = {task: ("exact_match", "EM") for task in metrics.QA_TASKS}


# ---------------------------------------------------------------------------
# Helpers.


def _check_task(task: str) -> None:
  if task not in metrics.TASK_METRIC:
    raise ValueError(f"unknown task {task!r}; known: {list(metrics.TASK_METRIC)}")


def _as_metrics(task: str, result) -> dict:
  """A language's metrics dict; a bare float is the task's score."""
  if isinstance(result, Mapping):
    return dict(result)
  return {metrics.TASK_METRIC[task]: float(result)}


def _score(task: str, result) -> float:
  """A language's task score: `metrics.language_score`, also for a QA dict holding only "em_f1"."""
  if isinstance(result, Mapping) and "exact_match" not in result and "em_f1" in result:
    return float(result["em_f1"])
  return metrics.language_score(task, result)


def score_label(task: str) -> str:
  """Display name of the task's score ("Acc.", "F1", "(EM + F1) / 2"; udpos: leaderboard F1)."""
  return "F1 (leaderboard)" if task == "udpos" else METRIC_LABEL[metrics.TASK_METRIC[task]]


def _normalise(results: Mapping) -> Mapping:
  """The scorer's result dict: `results` itself, or built by `results_from_metrics` (extra keys kept)."""
  if "tasks" in results:
    return results
  per_task = {k: v for k, v in results.items() if k not in EXTRA_KEYS}
  return {**results_from_metrics(per_task), **{k: results[k] for k in EXTRA_KEYS if k in results}}


def _tasks(results: Mapping) -> dict:
  return dict(_normalise(results)["tasks"])


def _ordered_tasks(tasks: Mapping) -> list[str]:
  return [t for t in metrics.TASK_METRIC if t in tasks] + [t for t in tasks if t not in metrics.TASK_METRIC]


def results_from_metrics(per_task: Mapping[str, Mapping[str, object]]) -> dict:
  """The `score_submission` result dict from `{task: {lg: metrics dict or score}}`.

  Benchmark languages that are not given are `missing` (the task is then
  incomplete, left out of categories and overall), as in the scorer.
  """
  tasks = {}
  for task in metrics.TASK_METRIC:
    if task not in per_task:
      continue
    per_language = {lg: _as_metrics(task, r) for lg, r in per_task[task].items()}
    missing = {lg: "not evaluated" for lg in metrics.TASK_LANGUAGES[task] if lg not in per_language}
    average = {}
    if per_language:
      keys = [k for k in next(iter(per_language.values())) if k not in metrics.COUNT_KEYS]
      average = {k: sum(r[k] for r in per_language.values()) / len(per_language) for k in keys
                 if all(k in r for r in per_language.values())}
    tasks[task] = {"languages": per_language, "missing": missing, "average": average,
                   "score": metrics.task_score(task, dict(per_task[task])) if per_language else None,
                   "complete": not missing}
  unknown = [t for t in per_task if t not in metrics.TASK_METRIC]
  if unknown:
    raise ValueError(f"unknown tasks {unknown}; known: {list(metrics.TASK_METRIC)}")
  complete = {task: t["score"] for task, t in tasks.items() if t["complete"]}
  return {"tasks": tasks, "missing_tasks": [t for t in metrics.TASK_METRIC if t not in tasks],
          "categories": metrics.category_scores(complete), "overall": metrics.overall(complete)}


def mark_not_in_data(results: Mapping, on_disk: Mapping[str, Sequence[str]]) -> dict:
  """`results` with the missing languages of each task in `on_disk` ({task: languages with test data on disk})
  that have no test data given the reason `NOT_IN_DATA` (a sample's task without that language), so that they
  read differently from a language whose prediction is missing. Tasks without a `missing` dict are kept."""
  tasks = {}
  for task, t in results["tasks"].items():
    if isinstance(t, Mapping) and isinstance(t.get("missing"), Mapping) and task in on_disk:
      t = {**t, "missing": {lg: reason if lg in on_disk[task] else NOT_IN_DATA for lg, reason in t["missing"].items()}}
    tasks[task] = t
  return {**results, "tasks": tasks}


# ---------------------------------------------------------------------------
# Tables.


def markdown_task_table(task: str, per_language_metrics: Mapping[str, object]) -> str:
  """One task's table: languages as columns (English first) plus `avg`, metrics as rows.

  Columns are the languages given only (English first, then the benchmark's
  order, then any other language), then `avg`; the task's other languages
  belong in `not_scored_line`.

  Values are the per-language metrics dicts of the scorer (a bare float is
  the task's score). QA cells are `F1 / EM` (plus an `(EM + F1) / 2` row only
  when some language is given as a bare score); `avg` is the mean over the
  languages given (for QA: mean F1 / mean EM). Rows whose metric no
  language has are left out.
  """
  _check_task(task)
  per_language = {lg: _as_metrics(task, r) for lg, r in per_language_metrics.items()}
  languages = ordered_languages(task, list(per_language))
  qa_bare = False
  if task in metrics.QA_TASKS:
    qa_bare = any("em_f1" in r and not ("f1" in r and "exact_match" in r) for r in per_language.values())
    for r in per_language.values():  # The score row then also holds the languages with EM and F1.
      if "em_f1" not in r and "exact_match" in r and "f1" in r:
        r["em_f1"] = (r["exact_match"] + r["f1"]) / 2
  rows = []
  for label, key in TASK_ROWS[task]:
    if key is None:  # QA: F1 / EM.
      have = [lg for lg in languages if "f1" in per_language[lg] and "exact_match" in per_language[lg]]
      if not have:
        continue
      cells = [f"{fmt(per_language[lg]['f1'])} / {fmt(per_language[lg]['exact_match'])}"
               if lg in have else "-" for lg in languages]
      avg = (f"{fmt(mean([per_language[lg]['f1'] for lg in have]))} / "
             f"{fmt(mean([per_language[lg]['exact_match'] for lg in have]))}")
    else:
      have = [lg for lg in languages if key in per_language[lg]]
      if not have or (key == "em_f1" and not qa_bare):
        continue
      cells = [fmt(per_language[lg][key]) if lg in have else "-" for lg in languages]
      avg = fmt(mean([per_language[lg][key] for lg in have]))
    rows.append([label, *cells, avg])
  return markdown(["Metric", *languages, "avg"], ["---"] + ["---:"] * (len(languages) + 1), rows)


def not_scored_line(missing: Mapping[str, str], task: Optional[str] = None) -> str:
  """One line naming the languages without a result, grouped by reason ("" when none).

  E.g. "Not scored: ar, bg (no prediction file); fr (no label file)."
  """
  by_reason: dict[str, list[str]] = {}
  for lg in ordered_languages(task, list(missing)):
    by_reason.setdefault(missing[lg], []).append(lg)
  if not by_reason:
    return ""
  return "Not scored: " + "; ".join(f"{', '.join(lgs)} ({reason})" for reason, lgs in by_reason.items()) + "."


def invalid_line(task: str, per_language_metrics: Mapping[str, object]) -> str:
  """One line counting the invalid predictions per language ("" when none)."""
  counts = {lg: r.get("invalid") for lg, r in per_language_metrics.items() if isinstance(r, Mapping)}
  found = [f"{lg} {counts[lg]}" for lg in ordered_languages(task, list(counts)) if counts[lg]]
  if not found:
    return ""
  return "Invalid predictions (scored as the official scorer does): " + ", ".join(found) + "."


def gap_label(task: str) -> str:
  """The metric of the task's transfer gap: EM for QA tasks, else the task's score."""
  return GAP_METRIC[task][1] if task in GAP_METRIC else score_label(task)


def _gap_scores(task: str, per_language: Mapping[str, object]) -> dict[str, float]:
  if task not in GAP_METRIC:
    return {lg: _score(task, r) for lg, r in per_language.items()}
  key = GAP_METRIC[task][0]
  return {lg: float(r[key]) for lg, r in per_language.items() if isinstance(r, Mapping) and key in r}


def transfer_gaps(results: Mapping) -> dict[str, dict]:
  """Per task: `{"en", "non_en_mean", "gap", "n_non_en"}` (None where not defined).

  Scores are the task's score, except QA tasks: exact match (XTREME's
  Table 3); QA languages given without EM are left out.
  """
  out = {}
  tasks = _tasks(results)
  for task in _ordered_tasks(tasks):
    scores = _gap_scores(task, tasks[task]["languages"])
    others = [s for lg, s in scores.items() if lg != ENGLISH]
    en = scores.get(ENGLISH)
    gap = metrics.transfer_gap(scores, ENGLISH) if en is not None and others else None
    out[task] = {"en": en, "non_en_mean": mean(others), "gap": gap, "n_non_en": len(others)}
  return out


def transfer_gap_table(results: Mapping) -> str:
  """Tasks as rows: English score, mean of the non-English languages, gap (en minus mean)."""
  rows = [[task, gap_label(task), fmt(g["en"]), fmt(g["non_en_mean"]), fmt(g["gap"])]
          for task, g in transfer_gaps(results).items()]
  return markdown(["Task", "Metric", "en", "Non-en mean", "Gap"], ["---", "---", "---:", "---:", "---:"], rows)


def summary_table(results: Mapping) -> str:
  """Task scores (`*` = incomplete), then category scores and overall, present ones only.

  Incomplete tasks are averaged over the languages present and, as in the
  scorer, left out of categories and overall. Tasks not scored at all are
  listed under the table.
  """
  results = _normalise(results)
  tasks = results["tasks"]
  rows, incomplete = [], False
  for task in _ordered_tasks(tasks):
    t = tasks[task]
    n_total = len(t["languages"]) + len(t["missing"])
    mark = "" if t["complete"] else "*"
    incomplete |= not t["complete"]
    absent = sum(reason == NOT_IN_DATA for reason in t["missing"].values())
    counted = f"{len(t['languages'])}/{n_total}" + (f" ({absent} not in the data)" if absent else "")
    rows.append([task, score_label(task), counted, fmt(t["score"]) + mark])
  for category, score in results.get("categories", {}).items():
    rows.append([f"*{CATEGORY_LABEL.get(category, category)}*", "", "", fmt(score)])
  if results.get("overall") is not None:
    rows.append(["**Overall**", "", "", f"**{fmt(results['overall'])}**"])
  text = markdown(["Task", "Metric", "Languages", "Score"], ["---", "---", "---:", "---:"], rows)
  if incomplete:
    text += "\n\n\\* incomplete: mean over the languages present only; not used in categories or overall."
  if results.get("missing_tasks"):
    text += "\n\nNot scored: " + ", ".join(results["missing_tasks"]) + "."
  return text


def _selected(run: Mapping) -> str:
  step = run.get("selected_step")
  if step is None:
    return "final"
  return f"{step} ({run['criterion']})" if run.get("criterion") else str(step)


LAST_LOSS_SHARE = 0.1  # the last loss: the mean over the logged points of the last 10% of the steps


def last_loss(history: Sequence[Sequence[float]]) -> Optional[float]:
  """The mean loss of the [step, loss] points at steps >= 90% of the last step (at least the last point)."""
  if not history:
    return None
  start = (1 - LAST_LOSS_SHARE) * float(history[-1][0])
  return mean([float(loss) for step, loss in history if float(step) >= start])


def finetuning_table(runs: Mapping[str, Mapping]) -> str:
  """Models as rows: task, training steps, the step selected (and by what) or "final", train accuracy, the loss
  over the last 10% of the steps (`last_loss`: one noisy batch does not decide it)."""
  losses = {name: last_loss(run.get("history") or []) for name, run in runs.items()}
  rows = [[name, str(run.get("task", "-")), str(run.get("train_steps", "-")), _selected(run),
           fmt(run.get("train_accuracy")), "-" if losses[name] is None else f"{losses[name]:.3f}"]
          for name, run in runs.items()]
  return markdown(["Model", "Task", "Steps", "Selected step", "Train acc.", "Loss (last 10%)"],
                  ["---", "---", "---:", "---", "---:", "---:"], rows)


def retrieval_lines(retrieval: Mapping[str, Mapping]) -> str:
  """One line per retrieval task: the encoder layer, pooling and maximum length of its sentence embeddings."""
  lines = []
  for task in _ordered_tasks(retrieval):
    settings = retrieval[task]
    parts = [f"layer {settings['layer']}" if "layer" in settings else "",
             f"{settings['pooling']} pooling" if "pooling" in settings else "",
             f"max length {settings['max_len']}" if "max_len" in settings else ""]
    lines.append(f"- {task}: " + (", ".join(p for p in parts if p) or "no settings recorded") + ".")
  return "\n".join(lines)


# ---------------------------------------------------------------------------
# Plots (`plots.py` draws them).


def task_figure(task: str, per_language_scores: Mapping[str, object], label: Optional[str] = None):
  """The `plot_task` figure (matplotlib `Figure`, Agg canvas); `label` names the score of a task XTREME does
  not know (its scores then bare numbers on 0-100)."""
  scores = {lg: _score(task, r) if isinstance(r, Mapping) or task in metrics.TASK_METRIC else float(r)
            for lg, r in per_language_scores.items()}
  if not scores:
    raise ValueError(f"{task}: no language to plot")
  order = ordered_languages(task, list(scores))
  label = label or (score_label(task) if task in metrics.TASK_METRIC else "Score")
  return plots.language_bars(f"{task}: {label} per language", label, scores, order, ENGLISH)


def plot_task(task: str, per_language_scores: Mapping[str, object], out_png: str, label: Optional[str] = None) -> str:
  """Bar chart of the score per language, grouped and coloured by language family.

  `per_language_scores` maps language -> score (or the scorer's metrics dict).
  English is hatched and annotated; a dashed line is the non-English mean; a
  score of exactly 0 has zero height, marked on the axis and labelled "0.0". The legend lists every family
  present; languages not in `LANGUAGE_FAMILY` are grouped as "Other". Written
  atomically to `out_png`, which is returned.
  """
  return plots.save_png(task_figure(task, per_language_scores, label), out_png)


# ---------------------------------------------------------------------------
# Report.

LOSS_PLOT = "plots/loss.png"


def _plot_name(task: str) -> str:
  return f"plots/{task}.png"


def render_markdown(results: Mapping) -> str:
  """The report: the score table first, then the published scores of the run's model (`results["published"]`),
  the models, retrieval settings, transfer gaps and one section per task.

  A task's section has its table (scored languages only), one "Not scored"
  line for the others, a line counting invalid predictions, and its plot.
  """
  results = _normalise(results)
  tasks = results["tasks"]
  parts = ["# XTREME results", summary_table(results)]
  parts += _published(results, _ordered_tasks(tasks), _xtreme_values(results))
  runs = results.get("runs") or {}
  if runs:
    parts += ["## Fine-tuning", finetuning_table(runs)]
    if plots.histories(runs):
      parts.append(f"![fine-tuning loss per model]({LOSS_PLOT})")
  if results.get("retrieval"):
    parts += ["## Retrieval", "Sentence embeddings:", retrieval_lines(results["retrieval"])]
  parts += ["## Cross-lingual transfer gap",
            "English score minus the mean of the other languages (QA tasks: EM, as in XTREME's Table 3; "
            "`-`: no English test set).",
            transfer_gap_table(results)]
  for task in _ordered_tasks(tasks):
    t = tasks[task]
    parts.append(f"## {task}")
    parts.append(markdown_task_table(task, t["languages"]) if t["languages"] else "No language scored.")
    parts += [line for line in (not_scored_line(t["missing"], task), invalid_line(task, t["languages"])) if line]
    if t["languages"]:
      parts.append(f"![{task}: {score_label(task)} per language]({_plot_name(task)})")
  return "\n\n".join(parts) + "\n"


def _remove_stale_plots(out_dir: str, written: Mapping[str, str], tasks: Sequence[str] = tuple(metrics.TASK_LANGUAGES)
                        ) -> None:
  """Deletes the plots an earlier report left in `out_dir` that this one does not have (a task no longer run);
  `tasks`: every task of the benchmark."""
  for name in [_plot_name(task) for task in tasks] + [LOSS_PLOT]:
    if name not in written:
      fs.remove(os.path.join(out_dir, name), missing_ok=True)


def write_report(results: Mapping, out_dir: str) -> dict[str, str]:
  """Write `results.json`, `report.md`, `plots/<task>.png` (and `plots/loss.png`) under `out_dir`, atomically.

  Returns `{relative path: absolute path (or URL)}` of every file written, e.g.
  `{"results.json": ..., "report.md": ..., "plots/xnli.png": ...}`. A task
  with no language scored gets no plot; the loss plot needs a model with a
  loss history (`results["runs"]`). Plots of an earlier report in `out_dir`
  that this one does not have (a task not in `results`) are deleted, so the
  folder holds this report only.
  """
  results = _normalise(results)
  out_dir = fs.abspath(out_dir)
  paths = {}
  for task in _ordered_tasks(results["tasks"]):
    languages = results["tasks"][task]["languages"]
    if languages:
      name = _plot_name(task)
      paths[name] = plot_task(task, languages, os.path.join(out_dir, name))
  if plots.histories(results.get("runs") or {}):
    paths[LOSS_PLOT] = plots.plot_losses(results["runs"], os.path.join(out_dir, LOSS_PLOT))
  _remove_stale_plots(out_dir, paths)
  paths["results.json"] = os.path.join(out_dir, "results.json")
  atomic.write_json(paths["results.json"], results)
  paths["report.md"] = os.path.join(out_dir, "report.md")
  atomic.write_text(paths["report.md"], render_markdown(results))
  return paths


# ---------------------------------------------------------------------------
# Settings side by side (translate-train against FILTER).

COMPARED_SETTINGS = ("zero_shot", "translate_train", "translate_train_all", "filter_teacher", "filter_student")


def language_scores(results: Mapping) -> dict[str, dict[str, float]]:
  """{task: {language: score, 0-100}} of an XTREME (`score_submission`) or XGLUE (`xglue_scorer`) result."""
  tasks = results.get("tasks", {})
  if all(isinstance(t, Mapping) and "languages" not in t for t in tasks.values()):  # XGLUE: {lg: 0-1, "avg"}
    return {task: {lg: 100 * v for lg, v in scores.items() if lg != "avg" and v is not None}
            for task, scores in tasks.items()}
  return {task: {lg: _score(task, m) for lg, m in t["languages"].items()}
          for task, t in _normalise(results)["tasks"].items()}


def settings_table(by_setting: Mapping[str, Mapping]) -> str:
  """Markdown: per task, a row per language (English first) and the mean, a column per setting of
  `by_setting` ({setting: result}) with its score (`-`: not run for that language)."""
  scores = {name: language_scores(result) for name, result in by_setting.items()}
  names = list(scores)
  parts = []
  for task in dict.fromkeys(t for per_task in scores.values() for t in per_task):
    langs = ordered_languages(task if task in metrics.TASK_LANGUAGES else None,
                              [lg for per_task in scores.values() for lg in per_task.get(task, {})])
    rows = [[lg] + [fmt(scores[n].get(task, {}).get(lg)) for n in names] for lg in langs]
    rows.append(["**mean**"] + [fmt(mean(scores[n].get(task, {}).values())) for n in names])
    parts += [f"### {task}", markdown(["Language", *names], ["---"] + ["---:"] * len(names), rows)]
  return "\n\n".join(parts)


# ---------------------------------------------------------------------------
# XGLUE.

def render_xglue_markdown(results: Mapping) -> str:
  """The XGLUE report of `xglue_scorer.score_submission`'s results: the score table (task averages, AVG_U,
  AVG_G, average), then one table per task with its languages as columns. Shown x100 (BLEU points for QG and
  NTG); the JSON keeps 0-1."""
  from xtreme_jax.registry import XGLUE
  pct = lambda v: fmt(None if v is None else 100 * v)  # noqa: E731
  rows = [[task, METRIC_LABEL[XGLUE.task(task).score], str(len(scores) - 1), pct(scores["avg"])]
          for task, scores in results["tasks"].items()]
  summary = markdown(["Task", "Metric", "Languages", "Score"], ["---", "---", "---:", "---:"], rows)
  totals = [f"- {name}: {pct(results[key])}" for key, name in (("avg_u", "AVG_U (nine understanding tasks)"),
                                                                 ("avg_g", "AVG_G (two generation tasks)"),
                                                                 ("average", "Average over the tasks scored"))
            if results.get(key) is not None]
  parts = [f"# XGLUE results ({results.get('split', 'test')})", summary] + (["\n".join(totals)] if totals else [])
  parts += _published(results, list(results["tasks"]), _xglue_values(results))
  runs = results.get("runs") or {}
  if runs:  # which step each model predicts with (the best dev epoch, or the final one)
    parts += ["## Fine-tuning", finetuning_table(runs)]
    if plots.histories(runs):
      parts.append(f"![fine-tuning loss per model]({LOSS_PLOT})")
  for task, scores in results["tasks"].items():
    label = METRIC_LABEL[XGLUE.task(task).score]
    langs = ordered_languages(None, [lg for lg in scores if lg != "avg"])
    parts += [f"## {task}", markdown(["Metric", *langs, "avg"], ["---"] + ["---:"] * (len(langs) + 1),
                                     [[label, *(pct(scores[lg]) for lg in langs), pct(scores["avg"])]])]
    if any(scores[lg] is not None for lg in langs):
      parts.append(f"![{task}: {label} per language]({_plot_name(task)})")
  return "\n\n".join(parts) + "\n"


def write_xglue_report(results: Mapping, out_dir: str) -> dict[str, str]:
  """`results.json`, `report.md`, `plots/<TASK>.png` (x100) and, with `results["runs"]`, `plots/loss.png` of
  XGLUE results under `out_dir`, atomically."""
  from xtreme_jax.registry import XGLUE
  out_dir = fs.abspath(out_dir)
  paths = {}
  if plots.histories(results.get("runs") or {}):
    paths[LOSS_PLOT] = plots.plot_losses(results["runs"], os.path.join(out_dir, LOSS_PLOT))
  for task, scores in results["tasks"].items():
    per_language = {lg: 100 * v for lg, v in scores.items() if lg != "avg" and v is not None}
    if per_language:
      name = _plot_name(task)
      paths[name] = plot_task(task, per_language, os.path.join(out_dir, name),
                              METRIC_LABEL[XGLUE.task(task).score])
  _remove_stale_plots(out_dir, paths, XGLUE.task_names)
  paths["results.json"] = os.path.join(out_dir, "results.json")
  atomic.write_json(paths["results.json"], results)
  paths["report.md"] = os.path.join(out_dir, "report.md")
  atomic.write_text(paths["report.md"], render_xglue_markdown(results))
  return paths


TITLES = {"mbert": "The mBERT paper's tasks (zero-shot from English)",
          "lab": "The transfer lab's tasks (zero-shot from the base language)"}


def render_mbert_markdown(results: Mapping, benchmark: BenchmarkSpec = MBERT) -> str:
  """The mBERT paper's (or the transfer lab's) report of `mbert_scorer.score_submission`'s results: one table
  per task with its languages as columns (the task's metric, %), the task means, the fine-tuning table."""
  metric = {task: benchmark.task(task).score for task in results["tasks"]}
  rows = [[task, metric[task], str(len(r["languages"])), fmt(r["score"])] for task, r in results["tasks"].items()]
  parts = [f"# {TITLES[benchmark.name]}",
           markdown(["Task", "Metric", "Languages", "Mean"], ["---", "---", "---:", "---:"], rows)]
  parts += _published(results, list(results["tasks"]), _mbert_values(results))
  runs = results.get("runs") or {}
  if runs:
    parts += ["## Fine-tuning", finetuning_table(runs)]
    if plots.histories(runs):
      parts.append(f"![fine-tuning loss per model]({LOSS_PLOT})")
  for task, r in results["tasks"].items():
    langs = ordered_languages(None, list(r["languages"]))
    if langs:
      parts += [f"## {task}", markdown(["Metric", *langs], ["---"] + ["---:"] * len(langs),
                                       [[metric[task], *(fmt(r["languages"][lg][metric[task]]) for lg in langs)]])]
    if r["missing"]:
      parts.append("Not scored: " + ", ".join(f"{lg} ({why})" for lg, why in r["missing"].items()))
  return "\n\n".join(parts) + "\n"


def write_mbert_report(results: Mapping, out_dir: str, benchmark: BenchmarkSpec = MBERT) -> dict[str, str]:
  """`results.json`, `report.md` and, with `results["runs"]`, `plots/loss.png` under `out_dir`, atomically."""
  out_dir = fs.abspath(out_dir)
  paths = {}
  if plots.histories(results.get("runs") or {}):
    paths[LOSS_PLOT] = plots.plot_losses(results["runs"], os.path.join(out_dir, LOSS_PLOT))
  paths["results.json"] = os.path.join(out_dir, "results.json")
  atomic.write_json(paths["results.json"], results)
  paths["report.md"] = os.path.join(out_dir, "report.md")
  atomic.write_text(paths["report.md"], render_mbert_markdown(results, benchmark))
  return paths


# ---------------------------------------------------------------------------
# Published scores beside the run's.

def _xtreme_values(results: Mapping):
  tasks = _tasks(results)
  return lambda task, metric: {lg: float(r[metric]) for lg, r in tasks.get(task, {}).get("languages", {}).items()
                               if isinstance(r, Mapping) and metric in r}


def _xglue_values(results: Mapping):
  from xtreme_jax.registry import XGLUE
  tasks = results["tasks"]
  return lambda task, metric: ({lg: 100 * v for lg, v in tasks[task].items() if lg != "avg" and v is not None}
                               if task in tasks and XGLUE.task(task).score == metric else {})


def _mbert_values(results: Mapping):
  tasks = results["tasks"]
  return lambda task, metric: {lg: float(m[metric]) for lg, m in tasks.get(task, {}).get("languages", {}).items()
                               if metric in m}


def _published(results: Mapping, tasks: Sequence[str], yours) -> list[str]:
  section = published.published_section(results.get("published") or [], tasks, yours)
  return [section] if section else []
