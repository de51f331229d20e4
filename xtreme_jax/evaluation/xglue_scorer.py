"""Score an XGLUE submission as the official scorer does (`evaluation/xglue_evaluate.py`, microsoft/XGLUE).

Predictions: `<dir>/<TASK>/<lg>.prediction`, one line per input line (for
NER / POS one tag per line, a blank line between sentences; MLQA a JSON
object `{qas_id: answer}`). Ground truth: the official `xglue_full_dataset`
layout (the registry's `TaskSpec.files`) of `split` (dev or test); the label
is the last tab-separated column (NER / POS: the last space-separated one).
Scores are on the official 0-1 scale:

* NER: entity F1, POS: chunk *precision* (seqeval 0.0.x `precision_score`:
  UPOS tags count as one-token-type chunks, so this is not token accuracy);
  prediction sentences shorter than the gold one are padded with `O`; gold
  sentences end at blank lines and `-DOCSTART-` lines.
* NC, XNLI, PAWSX (the header line skipped, blank lines too), QADSM, QAM:
  accuracy.
* WPR: nDCG per query group (consecutive rows with the same query, the first
  column), `sklearn.metrics.ndcg_score([gold ratings], [predicted ratings])`
  (ties in the predictions averaged, an all-zero group 0), groups of fewer
  than two rows skipped; the mean over groups.
* MLQA: the MLQA v1 F1 (answer-language normalisation) / 100.
* QG, NTG: `sacrebleu.corpus_bleu(predictions, [references], lowercase=True)
  .score / 100` (`bleu.xglue_bleu`): one predicted text per line of the
  source file, every line counted (blank ones too), stripped; the references
  are the lines of the `.tgt.` file (its last tab-separated column, stripped).

A task's score is the mean over its languages in the scorer's order (English
included); `avg_u` the mean over the nine understanding tasks when all are
scored, `avg_g` over the two generation tasks when both are; `average` the
mean over the tasks scored (all eleven: the XGLUE average). Unlike the official
scorer, which crashes on some mismatches and silently misaligns others (WPR
truncates, extra NER / POS sentences pass), a prediction file whose line,
sentence or tag count differs from the ground truth is refused naming both
counts; a gold label or tag outside the task's labels (the registry's; a WPR
rating outside 0-4) names its file, line and the labels.

`score_submission` backs `xtreme-jax score --benchmark xglue --predictions DIR
--labels DIR [--split dev|test] [--tasks T,...] [--out FILE] [--report DIR]`
(`runs/score_command.py`; `--report`: `report.write_xglue_report`, tables and
plots x100).
"""

from __future__ import annotations

import io
import json
import logging
import os
from typing import Optional, Sequence

import numpy as np

from xtreme_jax import atomic, errors, fs, text
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.evaluation import bleu, metrics
from xtreme_jax.evaluation.scorer import SubmissionError, unknown_gold
from xtreme_jax.registry import XGLUE, TaskSpec

SPLITS = ("dev", "test")
DOCSTART = text.DOCSTART
UNLABELLED = "a file without labels? XGLUE's released test files have none"  # hint for an unknown gold label
CATEGORY_AVERAGES = {"understanding": "avg_u", "generation": "avg_g"}  # results key of each category's mean


def prediction_path(pred_dir: str, task: str, language: str) -> str:
  return os.path.join(pred_dir, XGLUE.prediction_file(task, language))


def gold_file(task: str, split: str, language: str) -> str:
  """The ground-truth file of (task, split, language) under the dataset root (generation: the `.tgt.` file)."""
  spec = XGLUE.task(task)
  return spec.file(split, language, spec.sides[-1] if spec.sides else None)


def _raw_lines(path: str) -> list[str]:
  """The file's lines as Python's `open` iterates them (universal newlines, line ends kept)."""
  return io.StringIO(text.read_utf8(path), newline=None).readlines()


def _predicted_lines(path: str) -> list[str]:
  lines = [line.strip() for line in _raw_lines(path)]
  while lines and not lines[-1]:  # a trailing blank line is no prediction
    lines.pop()
  return lines


def _same_count(pred_path: str, n_pred: int, gold_path: str, n_gold: int, what: str) -> None:
  if n_pred != n_gold:
    raise SubmissionError(f"{pred_path}: {n_pred} {what}, but the ground truth {gold_path} has {n_gold}")


# ---------------------------------------------------------------------------
# Ground truth and predictions of one language, per kind of task.


def _gold_rows(spec: TaskSpec, path: str) -> list[tuple[int, str]]:
  """(line number, raw row) of a row-per-example file (PAWSX: the header and blank lines skipped, as the official
  scorer)."""
  rows = list(enumerate(_raw_lines(path), 1))
  if spec.name == "PAWSX":
    rows = [(n, row) for n, row in rows[1:] if row.strip()]
  return rows


def _score_rows(spec: TaskSpec, pred_path: str, gold_path: str) -> float:
  numbered = _gold_rows(spec, gold_path)
  rows = [row for _, row in numbered]
  labels = [row.split("\t")[-1].strip() for row in rows]
  if spec.kind != "ranking":  # WPR ratings: `_rating`
    for (n, _), label in zip(numbered, labels):
      if label not in spec.labels:
        raise unknown_gold(gold_path, n, label, spec.name, spec.labels, hint=UNLABELLED)
  preds = _predicted_lines(pred_path)
  _same_count(pred_path, len(preds), gold_path, len(labels), "lines")
  invalid = [p for p in preds if p not in spec.labels] if spec.kind != "ranking" else []  # ratings may be any number
  if invalid:
    logging.warning("%s: %d of %d predictions are not %s labels (e.g. %r); scored as wrong, as the official scorer "
                    "does", pred_path, len(invalid), len(preds), spec.name, invalid[0])
  if spec.kind == "ranking":
    return _ndcg(spec, rows, labels, preds, pred_path, gold_path)
  return sum(int(p == g) for p, g in zip(preds, labels)) / len(labels)


def _rating(value: str, path: str, line: int, valid: Sequence[str], what: str) -> float:
  if value not in valid:
    raise SubmissionError(f"{errors.location(path, line)}: {what} {value!r}; expected a rating in {list(valid)}")
  return float(value)


def _ndcg(spec: TaskSpec, rows: list[str], labels: list[str], preds: list[str], pred_path: str,
          gold_path: str) -> Optional[float]:
  gold = [_rating(v, gold_path, i, spec.labels, "label") for i, v in enumerate(labels, 1)]
  predicted = []
  for i, value in enumerate(preds, 1):
    try:
      predicted.append(float(value))
    except ValueError:
      raise SubmissionError(f"{errors.location(pred_path, i)}: prediction {value!r} is not a number") from None
  ndcg = metrics.grouped_ndcg(xglue_readers.query_groups([row.split("\t")[0] for row in rows]), gold, predicted)
  if ndcg is None:
    logging.warning("%s: no query with two or more rows; WPR has no score", gold_path)
  return ndcg


def _gold_sentences(spec: TaskSpec, path: str) -> list[list[str]]:
  sentences, current = [], []
  for n, row in enumerate(_raw_lines(path), 1):
    if not (row.strip() == "" or row.startswith(DOCSTART)):
      tag = row.split()[-1].strip()
      if tag not in spec.labels:
        raise unknown_gold(path, n, tag, spec.name, spec.labels, "tag", hint=UNLABELLED)
      current.append(tag)
    elif current:
      sentences.append(current)
      current = []
  if current:
    sentences.append(current)
  return sentences


def _predicted_sentences(path: str) -> list[list[str]]:
  """As the official reader: a blank line ends a non-empty sentence; a blank line before any tag is a tag ''."""
  sentences, current = [], []
  for row in _raw_lines(path):
    if not row.strip() and current:
      sentences.append(current)
      current = []
      continue
    current.append(row.strip())
  if current:
    sentences.append(current)
  return sentences


def _score_tags(spec: TaskSpec, pred_path: str, gold_path: str) -> float:
  gold, preds = _gold_sentences(spec, gold_path), _predicted_sentences(pred_path)
  _same_count(pred_path, len(preds), gold_path, len(gold), "sentences")
  for i, (p, g) in enumerate(zip(preds, gold), 1):
    if len(p) > len(g):
      raise SubmissionError(f"{pred_path}: sentence {i} has {len(p)} tags, but the ground truth {gold_path} has "
                            f"{len(g)} words")
    p.extend(["O"] * (len(g) - len(p)))  # shorter predictions are padded with O, as the official scorer does
  scores = metrics.chunk_scores(preds, gold)
  return scores["precision"] if spec.score == "precision" else scores["f1"]


def _score_qa(spec: TaskSpec, language: str, pred_path: str, gold_path: str) -> float:
  try:
    predictions = json.loads(text.read_utf8(pred_path))
    dataset = json.loads(text.read_utf8(gold_path))
  except json.JSONDecodeError as e:
    raise SubmissionError(f"{pred_path} or {gold_path}: not valid JSON ({e.msg}, line {e.lineno})") from None
  if not isinstance(predictions, dict):
    raise SubmissionError(f"{pred_path}: expected a JSON object {{qas_id: answer}}")
  return metrics.mlqa_em_f1(dataset["data"], predictions, language)["f1"] / 100


def _score_generation(pred_path: str, gold_path: str) -> float:
  preds = [line.strip() for line in _raw_lines(pred_path)]  # every line, as the official scorer
  refs = [line.split("\t")[-1].strip() for line in _raw_lines(gold_path)]
  _same_count(pred_path, len(preds), gold_path, len(refs), "lines")
  return bleu.xglue_bleu(preds, refs)


def score_examples(task: str, language: str, examples: Sequence[dict], predicted: Sequence) -> Optional[float]:
  """The official score (0-1) of `predicted` for `examples` as `xglue_readers.read` gives them: a label per
  row (a rating for WPR, grouped by the rows' `group`), a tag list per sentence (padded with O when shorter),
  {question id: answer} (MLQA) or a text per example (QG, NTG: against their `target`). The semantics of
  `score_file`, for in-memory data (seqio `metric_fns`)."""
  spec = XGLUE.task(task)
  if spec.kind == "span_qa":
    return metrics.mlqa_em_f1(metrics.squad_dataset(examples), dict(predicted), language)["f1"] / 100
  if len(predicted) != len(examples):
    raise SubmissionError(f"{task} {language}: {len(predicted)} predictions for {len(examples)} examples")
  if spec.kind == "generation":
    if any(ex["target"] is None for ex in examples):
      raise errors.DataError(f"{task} {language}: examples without targets (the release hides test targets)")
    return bleu.xglue_bleu([p.strip() for p in predicted], [ex["target"] for ex in examples])
  if spec.kind == "tagging":
    padded = [list(p) + ["O"] * (len(ex["tags"]) - len(p)) for p, ex in zip(predicted, examples)]
    scores = metrics.chunk_scores(padded, [ex["tags"] for ex in examples])
    return scores["precision"] if spec.score == "precision" else scores["f1"]
  if spec.kind == "ranking":
    return metrics.grouped_ndcg([ex["group"] for ex in examples], [float(ex["label"]) for ex in examples],
                                [float(p) for p in predicted])
  return sum(int(p == ex["label"]) for p, ex in zip(predicted, examples)) / len(examples)


def score_file(task: str, language: str, pred_path: str, gold_path: str) -> Optional[float]:
  """One language's score on the official 0-1 scale (None: WPR without a query of two rows); `gold_path`: the
  labelled file (`gold_file`)."""
  spec = XGLUE.task(task)
  try:
    if spec.kind == "generation":
      return _score_generation(pred_path, gold_path)
    if spec.kind == "tagging":
      return _score_tags(spec, pred_path, gold_path)
    if spec.kind == "span_qa":
      return _score_qa(spec, language, pred_path, gold_path)
    return _score_rows(spec, pred_path, gold_path)
  except errors.UserError:
    raise
  except (ValueError, KeyError, TypeError) as e:
    raise SubmissionError(f"{pred_path} against {gold_path}: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------
# A submission.


def _selected(tasks: Optional[Sequence[str]]) -> list[str]:
  if tasks is None:
    return list(XGLUE.task_names)
  unknown = [t for t in tasks if t not in XGLUE.task_names]
  if unknown:
    raise errors.ConfigError(f"unknown XGLUE task(s) {unknown}; valid: {', '.join(XGLUE.task_names)}")
  return [t for t in XGLUE.task_names if t in tasks]


def _mean(values: Sequence[float]) -> float:
  total = 0
  for v in values:  # summed in order, as the official scorer
    total += v
  return total / len(values)


def score_submission(pred_dir: str, gold_dir: str, split: str = "test", tasks: Optional[Sequence[str]] = None,
                     out: Optional[str] = None) -> dict:
  """`{"tasks": {TASK: {lg: score, ..., "avg": score}}, "missing_tasks": [TASK, ...], "avg_u", "avg_g",
  "average", "split"}`.

  Every language of a scored task needs its prediction and ground-truth
  file (the official scorer's task average is over all of them); a task
  whose prediction folder is absent is left out (`missing_tasks`).
  """
  if split not in SPLITS:
    raise errors.ConfigError(f"split {split!r}; expected one of {list(SPLITS)}")
  for what, folder in (("submission", pred_dir), ("ground truth", gold_dir)):
    if not fs.isdir(folder):
      raise errors.MissingInputError(f"{what} folder {folder} does not exist (or is not a folder)")
  results, missing_tasks = {}, []
  for task in _selected(tasks):
    if not fs.isdir(os.path.join(pred_dir, task)):
      missing_tasks.append(task)
      continue
    spec = XGLUE.task(task)
    per_language = {}
    for lg in spec.test_languages:
      pred_path, gold_path = prediction_path(pred_dir, task, lg), os.path.join(gold_dir, gold_file(task, split, lg))
      for what, path in (("prediction", pred_path), ("ground-truth", gold_path)):
        if not fs.isfile(path):
          raise errors.MissingInputError(f"{task} {lg}: no {what} file {path} (the task average needs every "
                                         f"language: {' '.join(spec.test_languages)})")
      per_language[lg] = score_file(task, lg, pred_path, gold_path)
    scored = [v for v in per_language.values() if v is not None]
    results[task] = {**per_language, "avg": _mean(scored) if scored else None}
  averages = [r["avg"] for r in results.values() if r["avg"] is not None]
  out_results = {"tasks": results, "missing_tasks": missing_tasks}
  for category, key in CATEGORY_AVERAGES.items():  # only when every task of the category is scored
    members = XGLUE.categories[category]
    complete = all(t in results and results[t]["avg"] is not None for t in members)
    out_results[key] = _mean([results[t]["avg"] for t in members]) if complete else None
  out_results.update(average=float(np.mean(averages)) if averages else None, split=split)
  if out:
    atomic.write_json(out, out_results)
  return out_results


def format_table(results: dict) -> str:
  """Tasks as rows: each language's score and the average, x100 (the official scale is 0-1)."""
  lines = []
  for task, scores in results["tasks"].items():
    cells = " ".join(f"{lg} {'-' if v is None else f'{100 * v:.1f}'}" for lg, v in scores.items() if lg != "avg")
    avg = "-" if scores["avg"] is None else f"{100 * scores['avg']:.1f}"
    lines.append(f"{task:<6} avg {avg:>5}  ({cells})")
  for key, label in (("avg_u", "AVG_U"), ("avg_g", "AVG_G"), ("average", "average")):
    if results.get(key) is not None:
      lines.append(f"{label}: {100 * results[key]:.1f}")
  lines.append("(x100; the JSON holds the official 0-1 scale)")
  return "\n".join(lines)
