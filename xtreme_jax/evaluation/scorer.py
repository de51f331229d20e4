"""Score an XTREME leaderboard submission folder against a labels folder.

Both folders have one sub-folder per task and one file per test language,
`<dir>/<task>/test-<lg>.tsv` (`.json` for xquad, mlqa, tydiqa):

* xnli, pawsx: one label per line.
* panx, udpos: one tag per line, a blank line between sentences (the labels
  hold tags only, no tokens).
* bucc2018: one pair `lg-id<TAB>en-id` per line (predicted / gold pairs).
* tatoeba: one 0-based integer per line: for the i-th English sentence, the index of the
  retrieved non-English sentence (the gold indices are in the labels file).
* QA: predictions `{question_id: answer_text}`; labels the SQuAD v1.1 JSON.

Lines are stripped as in the official `evaluate.py`; trailing blank lines are
ignored and so are repeated blank lines between sentences. A file whose
number of lines (sentences, or tags in a sentence) differs from the labels is
refused with `SubmissionError`; a language without a prediction or label file
is reported under `missing`. Task scores are equal-weight means over the
languages scored; categories and `overall` use complete tasks only.

Invalid predictions (an XNLI label `maybe`, a PAN-X tag `B-FOO` or `b-per`, a
UD-POS tag `NOUNX`, a Tatoeba line that is no index, an empty QA answer) are
scored as the official `evaluate.py` scores them: never equal to a label,
chunked by seqeval 0.0.x's rules (`metrics.get_chunks`), the empty string.
Each file with some gets one warning that counts them, and its result an
`invalid` count (0 otherwise). A gold label or tag outside the task's labels
(the registry's, `VALID`) is refused naming the labels file, line and value.

Order: xnli, pawsx, panx, udpos and tatoeba predictions are matched to the
labels line by line, and the TFDS builders shuffle examples. A folder may
carry `manifest.json` = `{"data_source": "official" | "tfds"}` (`write_manifest`;
absent: "official"); when the submission's source differs from the labels',
those tasks are refused rather than scored near 0. QA predictions are keyed by
question id, and a file covering under half of the gold ids is refused;
bucc2018 pairs carry ids.

`score_submission` backs `xtreme-jax score` for XTREME (`runs/score_command.py`;
`default_out`: the JSON goes beside the submission folder, never inside it).
Folders may be URLs (`gs://...`, through `xtreme_jax.fs`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from typing import Optional, Sequence

from xtreme_jax import atomic, errors, fs, text
from xtreme_jax.evaluation import metrics
from xtreme_jax.registry import XTREME

MANIFEST = "manifest.json"
DATA_SOURCES = ("official", "tfds")
# Tasks whose predictions are matched to the labels by position (no ids).
ORDER_DEPENDENT = XTREME.where(by_position=True)
# A QA prediction file must answer at least this fraction of the gold question ids.
MIN_QA_ID_OVERLAP = 0.5
# The values a prediction may take (besides any value of the labels file).
VALID = {t.name: frozenset(t.labels) for t in XTREME.tasks if t.labels}
_INDEX = re.compile(r"0|[1-9][0-9]*")
_ORDER = {"official": "the official order", "tfds": "TFDS order (the TFDS builders shuffle examples)"}
_SAME_SOURCE = ("predictions and labels in another order or from another split or data source? "
                "(the TFDS builders shuffle examples)")
# How the official scorer treats an invalid prediction, per kind of file.
_AS_OFFICIAL = {
    "labels": "scored as wrong, as the official evaluate.py does",
    "indices": "scored as wrong, as the official evaluate.py does",
    "tags": "chunked as the official scorer's seqeval 0.0.x does (prefix: first character, type: after the last '-')",
    "answers": "scored as the empty string, as the official scorer does",
}


class SubmissionError(errors.DataError):
  """A prediction or label file that cannot be scored (wrong counts, malformed lines, another order)."""


# ---------------------------------------------------------------------------
# Reading.


def unknown_gold(path: str, line: int, value: str, task: str, labels: Sequence[str], what: str = "label",
                 hint: str = "") -> SubmissionError:
  """The error for a gold label or tag outside the task's labels: the file, line, value and the labels."""
  shown = value if len(value) <= 60 else value[:57] + "..."
  return SubmissionError(f"{errors.location(path, line)}: gold {what} {shown!r}; expected one of the {task} "
                         f"{what}s: {', '.join(labels)}" + (f" ({hint})" if hint else ""))


def _check_gold(task: str, label_path: str, golds: list[str], what: str) -> None:
  """Refuses gold labels (tags: blank lines separate sentences) outside the task's labels."""
  for number, gold in enumerate(golds, 1):
    if gold not in VALID[task] and (gold or what == "label"):
      raise unknown_gold(label_path, number, gold, task, XTREME.task(task).labels, what)


def _read_lines(path: str) -> list[str]:
  """Stripped lines (universal newlines, as `open`); trailing blank lines dropped."""
  lines = [line.strip() for line in io.StringIO(text.read_utf8(path), newline=None)]
  while lines and not lines[-1]:
    lines.pop()
  return lines


def read_tag_sentences(path: str) -> list[list[str]]:
  """The tag sentences of a tagging prediction or label file (blank-line separated blocks)."""
  return text.blocks(_read_lines(path))



def _read_json(path: str):
  try:
    return json.loads(text.read_utf8(path))
  except json.JSONDecodeError as e:
    raise SubmissionError(f"{errors.location(path, e.lineno)}: not valid JSON ({e.msg})") from None


def _same_count(pred_path: str, n_pred: int, label_path: str, n_gold: int, what: str, hint: str = "") -> None:
  if n_pred != n_gold:
    raise SubmissionError(f"{pred_path}: {n_pred} {what}, but the labels {label_path} have {n_gold}"
                          + (f": {hint}" if hint else ""))


def _pairs(path: str) -> list[tuple[str, str]]:
  pairs = []
  for number, line in enumerate(_read_lines(path), 1):
    if not line:
      continue
    fields = line.split("\t")
    if len(fields) != 2:
      raise SubmissionError(f"{errors.location(path, number)}: expected 'lg-id<TAB>en-id', got {line!r}")
    pairs.append((fields[0], fields[1]))
  return pairs


# ---------------------------------------------------------------------------
# One file.


def _score_lines(task: str, pred_path: str, label_path: str):
  preds, golds = _read_lines(pred_path), _read_lines(label_path)
  if task == "tatoeba":
    for number, gold in enumerate(golds, 1):
      if not _INDEX.fullmatch(gold):
        raise SubmissionError(f"{errors.location(label_path, number)}: expected a 0-based integer index, got {gold!r}")
    invalid, what = [p for p in preds if not _INDEX.fullmatch(p)], "indices"
  else:
    _check_gold(task, label_path, golds, "label")
    invalid, what = [p for p in preds if p not in VALID[task]], "labels"
  _same_count(pred_path, len(preds), label_path, len(golds), "lines")
  return {"accuracy": metrics.accuracy(preds, golds)}, invalid, len(preds), what


def _score_tags(task: str, pred_path: str, label_path: str):
  gold_lines = _read_lines(label_path)
  _check_gold(task, label_path, gold_lines, "tag")
  preds, golds = read_tag_sentences(pred_path), text.blocks(gold_lines)
  _same_count(pred_path, len(preds), label_path, len(golds), "sentences")
  for i, (p, g) in enumerate(zip(preds, golds), 1):
    _same_count(pred_path, len(p), label_path, len(g), f"tags in sentence {i}", _SAME_SOURCE)
  invalid = [tag for sentence in preds for tag in sentence if tag not in VALID[task]]
  n_tags = sum(len(s) for s in preds)
  if task == "panx":
    return metrics.entity_f1(preds, golds), invalid, n_tags, "tags"
  result = {**metrics.pos_leaderboard_f1(preds, golds), "accuracy": metrics.pos_token_accuracy(preds, golds)}
  return result, invalid, n_tags, "tags"


def _score_qa(task: str, lang: str, pred_path: str, label_path: str):
  predictions = _read_json(pred_path)
  if not isinstance(predictions, dict) or not all(isinstance(v, str) for v in predictions.values()):
    raise SubmissionError(f"{pred_path}: expected a JSON object {{question_id: answer_text}}")
  dataset = _read_json(label_path)
  try:
    ids = metrics.question_ids(dataset)
  except (KeyError, TypeError) as e:
    raise SubmissionError(f"{label_path}: not a SQuAD v1.1 dataset ({type(e).__name__}: {e})") from None
  found = sum(qid in predictions for qid in ids)
  if ids and found < MIN_QA_ID_OVERLAP * len(ids):
    raise SubmissionError(f"{pred_path}: only {found} of the {len(ids)} question ids of the labels {label_path} "
                          "have a prediction: the ids do not match the labels (wrong split or source?)")
  invalid = [qid for qid in ids if qid in predictions and not predictions[qid].strip()]
  if task == "mlqa":
    result = metrics.mlqa_em_f1(dataset, predictions, lang)
  else:
    result = metrics.squad_em_f1(dataset, predictions)
  return result, invalid, found, "answers"


def _score(task: str, lang: str, pred_path: str, label_path: str):
  if task in ("xnli", "pawsx", "tatoeba"):
    return _score_lines(task, pred_path, label_path)
  if task in ("panx", "udpos"):
    return _score_tags(task, pred_path, label_path)
  if task == "bucc2018":
    return metrics.bucc_f1(_pairs(pred_path), _pairs(label_path)), [], 0, "pairs"
  return _score_qa(task, lang, pred_path, label_path)


def score_examples(task: str, lang: str, examples: Sequence[dict], predicted) -> dict:
  """The metrics of `score_file` (without `invalid`) of a fine-tuned task's predictions for in-memory
  examples (the readers' records or the seqio rows): a label per pair, a tag list per sentence, or
  {question id: answer}. The seqio tasks' `metric_fns`."""
  kind = XTREME.task(task).kind
  if kind == "span_qa":
    dataset = metrics.squad_dataset(examples)
    if task == "mlqa":
      return metrics.mlqa_em_f1(dataset, dict(predicted), lang)
    return metrics.squad_em_f1(dataset, dict(predicted))
  if kind == "tagging":
    golds = [ex["tags"] for ex in examples]
    if task == "panx":
      return metrics.entity_f1(predicted, golds)
    return {**metrics.pos_leaderboard_f1(predicted, golds), "accuracy": metrics.pos_token_accuracy(predicted, golds)}
  if kind != "pair_classification":
    raise errors.ConfigError(f"{task}: score_examples scores fine-tuned tasks; use score_file for retrieval")
  return {"accuracy": metrics.accuracy(predicted, [ex["label"] for ex in examples])}


def _warn_invalid(pred_path: str, invalid: list, total: int, what: str) -> None:
  if what == "answers":
    found = f"{len(invalid)} of {total} answers are empty"
  else:
    examples = ", ".join(repr(v) for v in list(dict.fromkeys(invalid))[:3])
    found = f"{len(invalid)} of {total} {what} are invalid (e.g. {examples})"
  logging.warning("%s: %s; %s", pred_path, found, _AS_OFFICIAL[what])


def score_file(task: str, lang: str, pred_path: str, label_path: str) -> dict:
  """Metrics of one language's prediction file (keys as in `metrics`) plus `invalid`.

  `invalid` counts the predictions that are no valid value of the task (or
  empty QA answers); they are scored as the official scorer scores them and
  a file with some logs one warning. Unreadable or mismatched files raise
  `SubmissionError` (one line naming the file).
  """
  if task not in metrics.TASK_METRIC:
    raise errors.ConfigError(f"unknown task {task!r}; known: {list(metrics.TASK_METRIC)}")
  try:
    result, invalid, total, what = _score(task, lang, pred_path, label_path)
  except errors.UserError:  # already names its file
    raise
  except ValueError as e:  # empty files, labels without answers, ...
    raise SubmissionError(f"{pred_path} against the labels {label_path}: {e}") from e
  if invalid:
    _warn_invalid(pred_path, invalid, total, what)
  return {**result, "invalid": len(invalid)}


# ---------------------------------------------------------------------------
# A folder.


def write_manifest(submission_dir: str, data_source: str) -> str:
  """Records the data the predictions (or labels) were made from in `<dir>/manifest.json`; returns its path.

  `data_source`: "official" (the official download layout) or "tfds" (the
  TFDS builders, whose examples are shuffled). Written atomically.
  """
  if data_source not in DATA_SOURCES:
    raise errors.ConfigError(f"data_source={data_source!r}; expected one of {list(DATA_SOURCES)}")
  path = os.path.join(submission_dir, MANIFEST)
  atomic.write_json(path, {"data_source": data_source})
  return path


def data_source(folder: str) -> str:
  """The data source recorded in `<folder>/manifest.json`; "official" when there is none."""
  path = os.path.join(folder, MANIFEST)
  if not fs.isfile(path):
    return "official"
  manifest = _read_json(path)
  source = manifest.get("data_source") if isinstance(manifest, dict) else None
  if source not in DATA_SOURCES:
    raise SubmissionError(f"{path}: expected {{\"data_source\": \"official\" | \"tfds\"}}, "
                          f"got {json.dumps(manifest, ensure_ascii=False)}")
  return source


def _check_order(pred_dir: str, labels_dir: str, tasks: Sequence[str]) -> None:
  """Refuses position-matched tasks whose predictions and labels come from different data sources."""
  pred_source, label_source = data_source(pred_dir), data_source(labels_dir)
  blocked = [task for task in tasks if task in ORDER_DEPENDENT]
  if pred_source != label_source and blocked:
    raise SubmissionError(
        f"cannot score {', '.join(blocked)} of {pred_dir}: predictions were written in {_ORDER[pred_source]} "
        f"but the labels {labels_dir} are in {_ORDER[label_source]}, and these tasks match lines by position: "
        f"score against labels made from the same source, or run with DATA_SOURCE='{label_source}'")


def _selected_tasks(tasks: Optional[Sequence[str]]) -> list[str]:
  if tasks is None:
    return list(metrics.TASK_LANGUAGES)
  if isinstance(tasks, str):
    tasks = [tasks]
  unknown = [t for t in tasks if t not in metrics.TASK_LANGUAGES]
  if unknown:
    raise errors.ConfigError(f"unknown task(s) {unknown}; known: {list(metrics.TASK_LANGUAGES)}")
  return [t for t in metrics.TASK_LANGUAGES if t in tasks]


def _average(per_language: dict[str, dict]) -> dict[str, float]:
  keys = [k for k in next(iter(per_language.values())) if k not in metrics.COUNT_KEYS]
  return {k: sum(r[k] for r in per_language.values()) / len(per_language) for k in keys}


def _score_task(task: str, pred_dir: str, labels_dir: str) -> dict:
  per_language, missing = {}, {}
  for lang in metrics.TASK_LANGUAGES[task]:
    pred_path = os.path.join(pred_dir, XTREME.prediction_file(task, lang))
    label_path = os.path.join(labels_dir, XTREME.prediction_file(task, lang))
    if not fs.isfile(pred_path):
      missing[lang] = "no prediction file"
    elif not fs.isfile(label_path):
      missing[lang] = "no label file"
    else:
      per_language[lang] = score_file(task, lang, pred_path, label_path)
  return {"languages": per_language, "missing": missing,
          "average": _average(per_language) if per_language else {},
          "score": metrics.task_score(task, per_language) if per_language else None,
          "complete": not missing}


def score_submission(pred_dir: str, labels_dir: str, out: Optional[str] = None,
                     tasks: Optional[Sequence[str]] = None) -> dict:
  """Scores of every task (of `tasks`, default all) and language present in both folders.

  Only the tasks in `tasks` are scored and listed (in benchmark order); other
  task folders are ignored. A missing folder raises `errors.MissingInputError`;
  position-matched tasks whose submission and labels come from different data
  sources (`data_source`) raise `SubmissionError`. The result is written to
  `out` (atomically) if given.

  Returns `{"tasks": {task: {"languages": {lg: metrics}, "missing": {lg: reason},
  "average": {metric: mean}, "score": float | None, "complete": bool}},
  "missing_tasks": [...], "categories": {...}, "overall": float | None}`;
  every language's metrics include its `invalid` count.
  """
  for what, folder in (("submission", pred_dir), ("labels", labels_dir)):
    if not fs.isdir(folder):
      raise errors.MissingInputError(f"{what} folder {folder} does not exist (or is not a folder)")
  selected = _selected_tasks(tasks)
  present = [t for t in selected
             if fs.isdir(os.path.join(pred_dir, t)) and fs.isdir(os.path.join(labels_dir, t))]
  _check_order(pred_dir, labels_dir, present)
  scored = {task: _score_task(task, pred_dir, labels_dir) for task in present}
  complete = {task: t["score"] for task, t in scored.items() if t["complete"]}
  results = {"tasks": scored, "missing_tasks": [t for t in selected if t not in scored],
             "categories": metrics.category_scores(complete), "overall": metrics.overall(complete)}
  if out:
    atomic.write_json(out, results)
  return results


# ---------------------------------------------------------------------------
# Output.


def format_table(results: dict) -> str:
  """Tasks as rows, the scored languages then the task average as columns.

  `miss` marks a benchmark language of the task without a prediction file
  (`n/s` one the data on disk does not hold: `metrics.NOT_IN_DATA`);
  languages no task has a prediction for are left out (see `missing`).
  Languages with invalid predictions are listed under the table.
  """
  tasks = results["tasks"]
  languages = sorted({lg for t in tasks.values() for lg in t["languages"]})
  rows = []
  for task, t in tasks.items():
    rows.append((task, {lg: metrics.language_score(task, r) for lg, r in t["languages"].items()}, t))
    if task == "udpos":
      rows.append(("udpos-acc", {lg: r["accuracy"] for lg, r in t["languages"].items()},
                   {**t, "score": t["average"].get("accuracy")}))
  width = max([len(name) for name, _, _ in rows] + [8])
  lines = [f"{'task':<{width}}" + "".join(f"{lg:>6}" for lg in languages) + f"{'avg':>7}"]
  for name, scores, t in rows:
    cells = []
    for lg in languages:
      if lg in scores:
        cells.append(f"{scores[lg]:6.1f}")
      else:
        reason = t["missing"].get(lg)
        cells.append(f"{'-' if reason is None else 'n/s' if reason == metrics.NOT_IN_DATA else 'miss':>6}")
    avg = "-" if t["score"] is None else f"{t['score']:.1f}" + ("" if t["complete"] else "*")
    lines.append(f"{name:<{width}}" + "".join(cells) + f"{avg:>7}")
  for category, score in results["categories"].items():
    lines.append(f"{category}: {score:.1f}")
  if results["overall"] is not None:
    lines.append(f"overall: {results['overall']:.1f}")
  if any(not t["complete"] for t in tasks.values()):
    lines.append("* average over the languages present only")
  shown = {t["missing"][lg] == metrics.NOT_IN_DATA for t in tasks.values() for lg in languages
           if lg in t["missing"] and lg not in t["languages"]}
  if shown:
    lines.append("; ".join([*(["miss: a language of the task without a prediction file"] if False in shown else []),
                            *(["n/s: a language the data on disk (e.g. the sample) lacks"] if True in shown else []),
                            "-: not a language of the task"]))
  invalid = [f"{task} {lg} {r['invalid']}" for task, t in tasks.items()
             for lg, r in t["languages"].items() if r.get("invalid")]
  if invalid:
    lines.append("invalid predictions (scored as the official scorer does): " + ", ".join(invalid))
  return "\n".join(lines)


def default_out(pred_dir: str) -> str:
  """`<parent>/scores-<name>.json` beside the submission folder `<parent>/<name>`."""
  folder = fs.abspath(pred_dir)  # normalised, a trailing "/" dropped
  return os.path.join(fs.dirname(folder), f"scores-{fs.basename(folder) or 'submission'}.json")


