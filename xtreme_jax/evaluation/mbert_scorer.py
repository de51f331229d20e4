"""Scores a submission of the mBERT paper's tasks against their test files (`registry/mbert.py`); the transfer
lab's tasks (`registry/lab.py`) are scored the same way, by their kind (classification, tagging, similarity
search: one 0-based index per source sentence, the gold being line i for sentence i; accuracy).

Prediction files `<dir>/<task>/test-<lg>.tsv`, in the order of the test
file:

* mldoc: one label per document line; accuracy.
* ner: one tag per word, a blank line after each sentence (the layout of
  XTREME's tagging submissions); tags repaired to valid BIO
  (`conll_ner.to_bio`) before entity F1 (`metrics.entity_f1`).
* pos: the same layout, UPOS tags; token accuracy.
* parsing: `HEAD<TAB>RELATION` per word, a blank line after each sentence;
  UAS / LAS without PUNCT / SYM on coarse relations (`evaluation/parsing`),
  over the gold sentences of at most `EVAL_MAX_WORDS` words (the paper's
  threshold; the longer ones need no prediction block and are not scored).

`score_submission(dir, data, tasks)` gives `{"tasks": {task: {"languages":
{lg: metrics}, "score": mean of the task's metric, "missing": {lg: why}}}}`,
scores in percent; a prediction file with another number of sentences or
words than the gold is a `DataError` naming the file and the sentence. Files
are read as checked UTF-8 (`text.read_utf8`: a bad byte names the file, line
and byte); the gold readers refuse a label or tag outside the task's.
`score_folders(dir, data, tasks)` backs `xtreme-jax score --benchmark mbert|lab
--predictions DIR --labels DATA_DIR` (the tasks without a folder in DIR listed
under `missing_tasks`).
"""

from __future__ import annotations

import io
import os
from typing import Optional, Sequence

from xtreme_jax import errors, fs, text
from xtreme_jax.data.readers.conll_ner import to_bio
from xtreme_jax.data.features.parsing_features import EVAL_MAX_WORDS
from xtreme_jax.evaluation import metrics, parsing
from xtreme_jax.registry.mbert import MBERT
from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec

METRIC = {t.name: t.score for t in MBERT.tasks}  # each task's score key (the registry's `score`)


def _lines(path: str) -> list[str]:
  """The lines of a checked UTF-8 file (universal newlines, as `open`), line ends removed."""
  return [line.rstrip("\n") for line in io.StringIO(text.read_utf8(path), newline=None)]


def _blocks(path: str) -> list[list[str]]:
  """Blank-line separated blocks of non-empty lines."""
  blocks, current = [], []
  for line in _lines(path) + [""]:
    if line.strip():
      current.append(line)
    elif current:
      blocks.append(current)
      current = []
  return blocks


def _aligned(path: str, predicted: list[list[str]], gold: list[dict]) -> None:
  if len(predicted) != len(gold):
    raise errors.DataError(f"{path}: {len(predicted)} sentences; the test file has {len(gold)}")
  for i, (p, g) in enumerate(zip(predicted, gold)):
    if len(p) != len(g["tokens"]):
      raise errors.DataError(f"{path}: sentence {i + 1} ({g['id']}) has {len(p)} predicted words; the test file has "
                             f"{len(g['tokens'])}")


def _labels(path: str, gold: list[dict], spec: TaskSpec) -> dict:
  del spec
  predicted = [line.strip() for line in _lines(path) if line.strip()]
  if len(predicted) != len(gold):
    raise errors.DataError(f"{path}: {len(predicted)} labels; the test file has {len(gold)} documents")
  return {"accuracy": metrics.accuracy(predicted, [g["label"] for g in gold])}


def _trees(path: str, gold: list[dict], spec: TaskSpec) -> dict:
  del spec
  gold = [g for g in gold if len(g["tokens"]) <= EVAL_MAX_WORDS]
  blocks = _blocks(path)
  _aligned(path, blocks, gold)
  heads, rels = [], []
  for i, block in enumerate(blocks):
    cols = [line.split("\t") for line in block]
    if any(len(c) != 2 or not (c[0].isascii() and c[0].isdigit()) for c in cols):
      raise errors.DataError(f"{path}: sentence {i + 1}: expected `HEAD<TAB>RELATION` per word")
    heads.append([int(c[0]) for c in cols])
    rels.append([c[1] for c in cols])
  return parsing.attachment_scores([g["heads"] for g in gold], [g["deprels"] for g in gold], heads, rels,
                                   [g["upos"] for g in gold])


def _tags(path: str, gold: list[dict], spec: TaskSpec) -> dict:
  blocks = _blocks(path)
  _aligned(path, blocks, gold)
  if spec.score == "f1":  # named entities: BIO spans
    return metrics.entity_f1([to_bio(b) for b in blocks], [g["tags"] for g in gold])
  return {"accuracy": metrics.pos_token_accuracy(blocks, [g["tags"] for g in gold])}


def _nearest(path: str, gold: dict, spec: TaskSpec) -> dict:
  del spec
  predicted = [line.strip() for line in _lines(path) if line.strip()]
  if len(predicted) != len(gold["source"]):
    raise errors.DataError(f"{path}: {len(predicted)} indices; the test file has {len(gold['source'])} sentences")
  for number, index in enumerate(predicted, 1):
    if not (index.isascii() and index.isdigit()):
      raise errors.DataError(f"{errors.location(path, number)}: expected a 0-based integer index, got {index!r}")
  return {"accuracy": metrics.tatoeba_accuracy(predicted, range(len(predicted)))}


# task kind -> (prediction file, gold records, spec) -> metrics
_BY_KIND = {"pair_classification": _labels, "tagging": _tags, "parsing": _trees, "parsing_gold_pos": _trees,
            "similarity_search": _nearest}


def score_file(task: str, path: str, gold: list[dict], benchmark: BenchmarkSpec = MBERT) -> dict:
  """The metrics of one prediction file against the gold records of its test file (module docstring), by the
  task's kind in `benchmark` (the mBERT paper's, or the transfer lab's)."""
  spec = benchmark.task(task)
  return _BY_KIND[spec.kind](path, gold, spec)


def score_submission(directory: str, data, tasks: Sequence[str] = MBERT.task_names,
                     languages: Optional[Sequence[str]] = None) -> dict:
  """Every task's per-language metrics and mean score over the languages predicted (module docstring)."""
  if not fs.isdir(directory):
    raise errors.MissingInputError(f"submission folder {directory} does not exist (or is not a folder)")
  out, benchmark = {}, data.benchmark
  for task in tasks:
    spec, result = benchmark.task(task), {"languages": {}, "missing": {}}
    for lg in spec.test_languages:
      if languages is not None and lg not in languages:
        continue
      path = os.path.join(directory, benchmark.prediction_file(task, lg))
      if not data.available(task, lg, "test"):
        result["missing"][lg] = "no test file"
      elif not fs.isfile(path):
        result["missing"][lg] = "no prediction file"
      else:
        result["languages"][lg] = score_file(task, path, data.read(task, lg, "test"), benchmark)
    scores = [m[spec.score] for m in result["languages"].values()]
    result["score"] = sum(scores) / len(scores) if scores else None
    out[task] = result
  return {"tasks": out}


def score_folders(directory: str, data, tasks: Optional[Sequence[str]] = None) -> dict:
  """`score_submission` of the tasks (default all of `data`'s benchmark) with a folder in `directory`, plus
  `missing_tasks`: those without one."""
  benchmark = data.benchmark
  selected = [benchmark.task(t).name for t in (benchmark.task_names if tasks is None else tasks)]
  selected = [t for t in benchmark.task_names if t in selected]  # benchmark order
  present = [t for t in selected if fs.isdir(os.path.join(directory, t))]
  results = score_submission(directory, data, present)
  return {**results, "missing_tasks": [t for t in selected if t not in present]}


def format_table(results: dict, benchmark: BenchmarkSpec = MBERT) -> str:
  """A plain-text table: one row per task, its languages' scores (the task's metric, %) and their mean."""
  tasks = results["tasks"]
  langs = list(dict.fromkeys(lg for r in tasks.values() for lg in r["languages"]))
  width = {lg: max(7, len(lg) + 1) for lg in langs}  # the lab's language names are longer than codes
  lines = [f"{'task':<9}" + "".join(f"{lg:>{width[lg]}}" for lg in langs) + f"{'mean':>7}"]
  for task, r in tasks.items():
    metric = benchmark.task(task).score
    cells = [f"{r['languages'][lg][metric]:{width[lg]}.1f}" if lg in r["languages"] else f"{'-':>{width[lg]}}"
             for lg in langs]
    mean = f"{r['score']:7.1f}" if r["score"] is not None else f"{'-':>7}"
    lines.append(f"{task:<9}" + "".join(cells) + mean)
  return "\n".join(lines)
