"""Subword overlap between English training data and each target language's test data (Wu & Dredze 2019, Fig. 3).

For a task and a target language, with `train` the English training set's
subwords and `test` the target test set's:

* `p_type`: the share of the test set's distinct subwords (types) that occur
  in `train`;
* `p_token`: the share of the test set's subword occurrences (tokens) whose
  type occurs in `train`.

Both in percent. `correlation` is Pearson's r between an overlap measure and
the zero-shot scores over (task, language) points, with its two-sided p-value
(`scipy.stats.pearsonr`); `table` and `scatter_plot` show them, `rows` and
`write_report` make them for a run's scores (the runner writes
`report/overlap.md` for the mBERT paper's runs). The subwords
of a record are those the model's vocabulary gives its text fields
(`record_texts`): words of a tagging sentence, both texts of a pair, question
and context of a QA record.
"""

from __future__ import annotations

import collections
import os
from typing import Iterable, Mapping, Sequence

from xtreme_jax import errors
from xtreme_jax.evaluation import plots


def record_texts(record: Mapping) -> list[str]:
  """The text fields of a reader record (tagging, pair classification, span QA)."""
  if "tokens" in record:
    return [" ".join(record["tokens"])]
  if "question" in record:
    return [record["question"], record["context"]]
  return [record[k] for k in ("text_a", "text_b") if record.get(k)]


def subword_counts(records: Iterable[Mapping], encode) -> collections.Counter:
  """{subword id: occurrences} over the records' texts; `encode` maps a text to subword ids."""
  counts: collections.Counter = collections.Counter()
  for record in records:
    for text in record_texts(record):
      counts.update(encode(text))
  return counts


def overlap(train: Mapping[int, int], test: Mapping[int, int]) -> dict[str, float]:
  """{"p_type", "p_token"} in percent (module docstring); `train` / `test` are subword counts."""
  tokens = sum(test.values())
  if not tokens:
    raise errors.DataError("subword overlap: the test set has no subwords")
  seen = [t for t in test if train.get(t)]
  return {"p_type": 100.0 * len(seen) / len(test), "p_token": 100.0 * sum(test[t] for t in seen) / tokens}


def rows(data, scores: Mapping[str, Mapping[str, float]], encode, english: str = "en") -> list[dict]:
  """One {"task", "language", "p_type", "p_token", "score"} per scored (task, target language): the overlap of
  the language's test set with the task's English training set (`data`: a benchmark data object)."""
  out = []
  for task, languages in scores.items():
    train = subword_counts(data.read(*data.benchmark.task(task).train), encode)
    for lg, score in languages.items():
      if lg != english and data.available(task, lg, "test"):
        out.append({"task": task, "language": lg, **overlap(train, subword_counts(data.read(task, lg, "test"), encode)),
                    "score": float(score)})
  return out


def write_report(out_dir: str, table_rows: Sequence[Mapping]) -> dict[str, str]:
  """`overlap.md` (the table, Pearson's r of each measure with the scores) and one scatter plot per measure
  under `out_dir`; correlations need 3 points or more."""
  from xtreme_jax import atomic
  paths, lines = {}, ["# Subword overlap with the English training data (Wu & Dredze 2019, Figure 3)", "",
                      table(table_rows)]
  for measure in ("p_type", "p_token"):
    if len(table_rows) >= 3:
      c = correlation([r[measure] for r in table_rows], [r["score"] for r in table_rows])
      lines.append(f"- {measure}: Pearson r = {c['r']:.3f} (p = {c['p_value']:.3g}, {c['points']} points)")
    if table_rows:
      paths[measure] = os.path.join(out_dir, f"overlap_{measure}.png")
      scatter_plot(table_rows, measure, paths[measure])
  paths["overlap.md"] = os.path.join(out_dir, "overlap.md")
  atomic.write_text(paths["overlap.md"], "\n".join(lines) + "\n")
  return paths


def correlation(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
  """Pearson's {"r", "p_value", "points"} of two equally long sequences (at least 3 points)."""
  from scipy import stats  # heavy: imported on use
  if len(xs) != len(ys) or len(xs) < 3:
    raise errors.ConfigError(f"a correlation needs two sequences of equal length >= 3; got {len(xs)} and {len(ys)}")
  r, p = stats.pearsonr(xs, ys)
  return {"r": float(r), "p_value": float(p), "points": len(xs)}


def table(rows: Sequence[Mapping]) -> str:
  """A Markdown table of {"task", "language", "p_type", "p_token", "score"} rows."""
  lines = ["| task | language | p_type | p_token | zero-shot score |", "|---|---|---:|---:|---:|"]
  lines += [f"| {r['task']} | {r['language']} | {r['p_type']:.1f} | {r['p_token']:.1f} | {r['score']:.1f} |"
            for r in rows]
  return "\n".join(lines) + "\n"


# What each measure is, for the plot's axis (module docstring).
MEASURE_LABEL = {"p_type": "test subword types seen in English training (%)",
                 "p_token": "test subword tokens whose type is seen in English training (%)"}


def scatter_figure(rows: Sequence[Mapping], measure: str):
  """Zero-shot score against `measure` (p_type / p_token): one colour and marker per task, each point labelled
  with its language, titled with the measure (a matplotlib `Figure`, Agg canvas)."""
  figure = plots.new_figure(6.4, 4.8)
  axes = figure.add_subplot()
  tasks = list(dict.fromkeys(r["task"] for r in rows))
  for task, (colour, _, marker) in zip(tasks, plots.series_styles(len(tasks))):
    points = [r for r in rows if r["task"] == task]
    axes.scatter([r[measure] for r in points], [r["score"] for r in points], label=task, s=28, color=colour,
                 marker=marker)
    for r in points:
      axes.annotate(r["language"], (r[measure], r["score"]), xytext=(3, 3), textcoords="offset points", fontsize=8)
  axes.set_title(f"Zero-shot score against subword overlap ({measure})", fontsize=11)
  axes.set_xlabel(MEASURE_LABEL.get(measure, measure), fontsize=9)
  axes.set_ylabel("zero-shot score (%)", fontsize=9)
  axes.tick_params(labelsize=8)
  axes.grid(alpha=0.3)
  axes.legend(title="task", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
  axes.spines["top"].set_visible(False)
  axes.spines["right"].set_visible(False)
  return figure


def scatter_plot(rows: Sequence[Mapping], measure: str, path: str) -> None:
  """`scatter_figure` saved as PNG at `path` (atomically)."""
  plots.save_png(scatter_figure(rows, measure), path)
