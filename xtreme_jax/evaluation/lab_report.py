"""The transfer lab's results (`runs/lab.py`): means over seeds, the four published claims checked, plots.

`results` ({"languages", "experiment", "conditions": {condition: {"pretrained_on", "retrieval": {lg: acc},
"zero_shot": {seed: {task: {lg: score}}}, "translate_train": ...}}, "chance": {task: score}}, and while the lab
runs, "partial": which encoders are done) is written as
`results.json`; `report.md` shows per task the zero-shot score per language and condition (mean +- standard
deviation over seeds) beside translate-train, the transfer gap (the base language's score minus the
language's), the retrieval accuracy, and the claims:

(a) zero-shot to a language with no shared word form and the same order is well above chance (K et al. 2020): its
    score recovers at least half of the base's margin over chance;
(b) a reordered language (its own forms) transfers clearly worse than a same-order one (Dufter & Schütze 2020,
    Deshpande et al. 2022): every reordered language's mean is below the same-order languages' (no overlap)
    by more than twice the largest spread over seeds among them (testable where those transfer, (a));
(c) transfer grows with overlap (Wu & Dredze 2019): the languages' scores rise with their share of base word
    forms (Pearson r > 0 over the base, share 1, and the same-order languages: three or more, two shares);
(d) retrieval accuracy correlates with the zero-shot score across conditions and languages (Pearson r >= 0.5
    over three or more points).

A claim the lab's languages cannot test (e.g. no reordered language) says so. Scores are accuracies in %.
"""

from __future__ import annotations

import collections
import math
import os
from typing import Mapping, Optional, Sequence

import numpy as np

from xtreme_jax import atomic
from xtreme_jax.data.synthetic.lab_dataset import parse_recipe
from xtreme_jax.data.synthetic.transforms import PartialOverlap, ScriptChange, VocabularyShift
from xtreme_jax.evaluation import plots
from xtreme_jax.evaluation.tables import fmt, markdown
from xtreme_jax.registry.lab import BASE

PLOTS = {"zero_shot": "plots/{task}_zero_shot.png", "overlap": "plots/{task}_overlap.png",
         "retrieval": "plots/{task}_retrieval.png"}  # per task


def chance(data, tasks: Sequence[str]) -> dict[str, float]:
  """{task: %} of always predicting the base test set's most frequent tag / label."""
  out = {}
  for task in tasks:
    records = data.read(task, BASE, "test")
    labels = [t for r in records for t in r["tags"]] if "tags" in records[0] else [r["label"] for r in records]
    out[task] = 100.0 * collections.Counter(labels).most_common(1)[0][1] / len(labels)
  return out


def language_facts(recipes: Mapping[str, str]) -> dict[str, dict]:
  """{language: {"overlap": share of base word forms kept, "reordered": bool}} from the recipes."""
  facts = {}
  for name, recipe in recipes.items():
    share, reordered = 1.0, False
    for t in parse_recipe(recipe):
      if isinstance(t, (VocabularyShift, ScriptChange)):
        share = 0.0
      elif isinstance(t, PartialOverlap):
        share *= t.share
      else:
        reordered = True
    facts[name] = {"overlap": share, "reordered": reordered}
  return facts


def seeds_stats(values: Sequence[float]) -> tuple[float, float]:
  """(mean, standard deviation over seeds; 0 for one seed)."""
  array = np.asarray(values, dtype=float)
  return float(array.mean()), (float(array.std(ddof=1)) if len(array) > 1 else 0.0)


def by_language(entry: Mapping, setting: str, task: str) -> dict[str, tuple[float, float]]:
  """{language: (mean, std)} over the seeds of one condition's `setting` (zero_shot / translate_train)."""
  runs = list((entry.get(setting) or {}).values())
  langs = list(runs[0][task]) if runs else []
  return {lg: seeds_stats([run[task][lg] for run in runs]) for lg in langs}


def pearson(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
  if len(xs) < 3 or np.std(xs) == 0 or np.std(ys) == 0:
    return None
  return float(np.corrcoef(xs, ys)[0, 1])


CLAIMS = ("(a) zero-shot to a language sharing no word form, same order, well above chance",
          "(b) a reordered language transfers clearly worse than a same-order one",
          "(c) transfer grows with overlap",
          "(d) retrieval accuracy correlates with zero-shot score")  # each claim's line in the report


def claims(results: Mapping, task: str) -> list[tuple[str, str, str]]:
  """[(claim, verdict, numbers)] of the four claims on `task` (module docstring)."""
  facts = language_facts(results["languages"]["languages"])
  scores = by_language(results["conditions"]["pretrained"], "zero_shot", task)
  base, chance_score = scores[BASE][0], results["chance"][task]
  foreign = [lg for lg in scores if lg != BASE]
  same_order = [lg for lg in foreign if not facts[lg]["reordered"]]
  disjoint = [lg for lg in same_order if facts[lg]["overlap"] == 0]
  reordered = [lg for lg in foreign if facts[lg]["reordered"] and facts[lg]["overlap"] == 0]

  def show(lgs):
    return ", ".join(f"{lg} {scores[lg][0]:.1f} +- {scores[lg][1]:.1f}" for lg in lgs)

  out = []
  transfers = disjoint and all(scores[lg][0] - chance_score >= 0.5 * (base - chance_score) for lg in disjoint)
  if disjoint:
    out.append((CLAIMS[0], "reproduced" if transfers else "not reproduced",
                f"{show(disjoint)}; base {base:.1f}, chance {chance_score:.1f}"))
  else:
    out.append((CLAIMS[0], "not testable", "no same-order language without overlap"))
  if disjoint and reordered and not transfers:
    out.append((CLAIMS[1], "not testable",
                f"the same-order language does not transfer (a): {show(disjoint)}; reordered {show(reordered)}"))
  elif disjoint and reordered:
    same = seeds_stats([scores[lg][0] for lg in disjoint])[0]
    worse = max(scores[lg][0] for lg in reordered)
    spread = max(scores[lg][1] for lg in disjoint + reordered)
    out.append((CLAIMS[1], "reproduced" if same - worse > 2 * spread else "not reproduced",
                f"same order {show(disjoint)}; reordered {show(reordered)}"))
  else:
    out.append((CLAIMS[1], "not testable", "needs a same-order and a reordered language without overlap"))
  shares = {lg: facts[lg]["overlap"] for lg in [BASE] + same_order}
  r = pearson([shares[lg] for lg in shares], [scores[lg][0] for lg in shares]) if len(set(shares.values())) > 1 \
      else None
  out.append((CLAIMS[2], "not testable" if r is None else
              ("reproduced" if r > 0 else "not reproduced"),
              "Pearson r over same-order languages (the base: share 1) "
              + ("n/a" if r is None else f"{r:.2f}: " + ", ".join(f"{lg} ({shares[lg]:.2f}) {scores[lg][0]:.1f}"
                                                                   for lg in shares))))
  points = retrieval_points(results, task)
  r = pearson([p[2] for p in points], [p[3] for p in points])
  out.append((CLAIMS[3], "not testable" if r is None else
              ("reproduced" if r >= 0.5 else "not reproduced"),
              ("n/a" if r is None else f"Pearson r = {r:.2f}") + f" over {len(points)} (condition, language) points"))
  return out


def retrieval_points(results: Mapping, task: str) -> list[tuple[str, str, float, float]]:
  """[(condition, language, retrieval accuracy, mean zero-shot score)] over the non-base languages."""
  points = []
  for condition, entry in results["conditions"].items():
    scores = by_language(entry, "zero_shot", task)
    points += [(condition, lg, acc, scores[lg][0]) for lg, acc in entry["retrieval"].items() if lg in scores]
  return points


def _task_table(results: Mapping, task: str) -> str:
  conditions = results["conditions"]
  langs = list(by_language(conditions["pretrained"], "zero_shot", task))
  rows = []
  for condition, entry in conditions.items():
    for setting in ("zero_shot", "translate_train"):
      stats = by_language(entry, setting, task)
      if stats:
        rows.append([f"{condition} {setting.replace('_', '-')}",
                     *(f"{stats[lg][0]:.1f} +- {stats[lg][1]:.1f}" for lg in langs)])
    zero = by_language(entry, "zero_shot", task)
    rows.append([f"{condition} gap", *(fmt(zero[BASE][0] - zero[lg][0]) for lg in langs)])
    rows.append([f"{condition} retrieval", *(fmt(entry["retrieval"].get(lg)) for lg in langs)])
  return markdown(["", *langs], ["---"] + ["---:"] * len(langs), rows)


def render(results: Mapping) -> str:
  """The report's markdown."""
  experiment = results["experiment"]
  parts = ["# Transfer lab", "Languages (recipes of `data/synthetic/lab_dataset.py`): " + ", ".join(
      f"`{lg}` = `{r or 'base'}`" for lg, r in results["languages"]["languages"].items()) +
      f". Pretraining {experiment['pretrain_steps']} steps; fine-tuning seeds {experiment['seeds']}; scores are "
      "accuracy % (mean +- standard deviation over seeds); gap = the base's score minus the language's; retrieval "
      "= Tatoeba-style accuracy against the base's test sentences."]
  if results.get("partial"):
    parts.append(f"**Partial**: {results['partial']}; the lab writes this report after each encoder, and "
                 "re-running its command resumes it.")
  for task in results["chance"]:
    parts += [f"## {task} (chance {results['chance'][task]:.1f})", _task_table(results, task),
              markdown(["Claim", "Verdict", "Numbers"], ["---", "---", "---"], claims(results, task))]
    parts += [f"![{task} {name}]({path.format(task=task)})" for name, path in PLOTS.items()]
  return "\n\n".join(parts) + "\n"


def summary(results: Mapping) -> str:
  """A few lines for the terminal: each task's zero-shot means (pretrained) and the claims' verdicts."""
  lines = []
  for task in results["chance"]:
    scores = by_language(results["conditions"]["pretrained"], "zero_shot", task)
    lines.append(f"lab {task}: " + "  ".join(f"{lg} {m:.1f}" for lg, (m, _) in scores.items())
                 + f"  (chance {results['chance'][task]:.1f})")
    lines += [f"  {claim[:3]} {verdict}" for claim, verdict, _ in claims(results, task)]
  return "\n".join(lines)


def _zero_shot_figure(results: Mapping, task: str):
  conditions = results["conditions"]
  langs = list(by_language(conditions["pretrained"], "zero_shot", task))
  fig = plots.new_figure(1.6 + 1.3 * len(langs))
  ax = fig.add_subplot(1, 1, 1)
  series = [(c, s) for c in conditions for s in ("zero_shot", "translate_train") if conditions[c].get(s)]
  width = 0.8 / len(series)
  for i, ((condition, setting), style) in enumerate(zip(series, plots.series_styles(len(series)))):
    stats = by_language(conditions[condition], setting, task)
    ax.bar(np.arange(len(langs)) + i * width, [stats[lg][0] for lg in langs], width,
           yerr=[stats[lg][1] for lg in langs], color=style[0], label=f"{condition} {setting.replace('_', '-')}")
  ax.axhline(results["chance"][task], color="grey", linestyle="--", label="chance")
  ax.set_xticks(np.arange(len(langs)) + 0.4 - width / 2)
  ax.set_xticklabels(langs, rotation=20, ha="right")  # long names stay apart
  ax.set_ylim(0, 100)
  ax.set_ylabel(f"{task} accuracy (%)")
  ax.set_title(f"{task}: zero-shot from {BASE} per language and condition")
  ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
  return fig


LABEL_STEP = 9.0  # points between stacked labels (a line of fontsize 8)


def label_offsets(boxes: Sequence[tuple[float, float, float]], step: float = LABEL_STEP,
                  floor: float = -math.inf, ceiling: float = math.inf) -> list[float]:
  """Vertical offsets (points) that keep labels apart: `boxes` [(left, right, bottom)] of each label on the
  page, in points. From the highest down, a label overlapping one already placed (horizontally, and less
  than `step` apart vertically, rounding aside) moves to the nearer free place, a step below or above the
  labels it meets, preferring one inside [floor, ceiling] (the axes)."""
  placed: list[tuple[float, float, float]] = []

  def free(left: float, right: float, y: float, direction: int) -> float:
    while clash := [b for lo, hi, b in placed if lo < right and left < hi and abs(b - y) < step - 1e-6]:
      y = min(clash) - step if direction < 0 else max(clash) + step
    return y

  out = [0.0] * len(boxes)
  for i in sorted(range(len(boxes)), key=lambda i: -boxes[i][2]):
    left, right, y = boxes[i]
    places = [free(left, right, y, -1), free(left, right, y, 1)]  # below first: it wins a tie
    inside = [p for p in places if floor <= p and p + step <= ceiling]
    placed.append((left, right, min(inside or places, key=lambda p: abs(p - y))))
    out[i] = placed[-1][2] - y
  return out


def scatter_figure(points, xlabel: str, ylabel: str, title: str):
  """`points` [(x, y, label, group)] as a scatter plot: a colour and marker per group (legend when several),
  each point annotated with its label (`label_offsets` keeps labels of close points apart; a moved label is
  joined to its point by a line)."""
  groups = list(dict.fromkeys(group for *_, group in points))
  fig = plots.new_figure(5.5 + (1.4 if len(groups) > 1 else 0), 4.2)
  ax = fig.add_subplot(1, 1, 1)
  texts = []
  for group, (colour, _, marker) in zip(groups, plots.series_styles(len(groups))):
    mine = [p for p in points if p[3] == group]
    ax.scatter([p[0] for p in mine], [p[1] for p in mine], color=colour, marker=marker, label=group)
    texts += [ax.annotate(label, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points", color=colour)
              for x, y, label, _ in mine]
  if len(groups) > 1:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
  ax.margins(x=0.1, y=0.08)  # room for the labels of the outermost points
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.autoscale_view()  # the final data limits, so the labels' page positions below are those drawn
  renderer, scale = fig.canvas.get_renderer(), 72.0 / fig.dpi
  extents = [t.get_window_extent(renderer) for t in texts]
  boxes = [(b.x0 * scale, b.x1 * scale, b.y0 * scale) for b in extents]
  frame = ax.get_window_extent(renderer)
  for text, extent, dy in zip(texts, extents, label_offsets(boxes, floor=frame.y0 * scale, ceiling=frame.y1 * scale)):
    text.xyann = (3, 3 + dy)
    if dy:  # a line from the moved label's left side to its point
      ax.annotate("", text.xy, xytext=(3, 3 + dy + extent.height * scale / 2), textcoords="offset points",
                  arrowprops=dict(arrowstyle="-", color=text.get_color(), lw=0.5, shrinkA=0, shrinkB=3))
  return fig


def write(out_dir: str, results: Mapping) -> dict[str, str]:
  """`results.json`, `report.md` and each task's plots under `out_dir`, atomically; their paths."""
  facts = language_facts(results["languages"]["languages"])
  paths = {"results.json": os.path.join(out_dir, "results.json"), "report.md": os.path.join(out_dir, "report.md")}
  for task in results["chance"]:
    pretrained = by_language(results["conditions"]["pretrained"], "zero_shot", task)
    points = retrieval_points(results, task)
    r = pearson([p[2] for p in points], [p[3] for p in points])
    order = {lg: "reordered" if facts[lg]["reordered"] else "same order" for lg in pretrained}
    figures = {
        "zero_shot": _zero_shot_figure(results, task),
        "overlap": scatter_figure([(facts[lg]["overlap"], m, lg, order[lg]) for lg, (m, _) in pretrained.items()],
                                  "share of base word forms", f"{task} zero-shot accuracy (%)",
                                  f"{task}: transfer against overlap (pretrained)"),
        "retrieval": scatter_figure([(acc, score, lg, cond) for cond, lg, acc, score in points],
                                    "retrieval accuracy (%)", f"{task} zero-shot accuracy (%)",
                                    f"{task}: transfer against alignment" + ("" if r is None else
                                                                             f" (Pearson r {r:.2f})"))}
    for name, fig in figures.items():
      path = PLOTS[name].format(task=task)
      paths[path] = plots.save_png(fig, os.path.join(out_dir, path))
  atomic.write_json(paths["results.json"], results)
  atomic.write_text(paths["report.md"], render(results))
  return paths
