"""Plain-Python readers for the official XGLUE layout (`xglue_full_dataset`; no jax, no TF).

`read(task, data_dir, language, split)` reads one file of the registry's
layout (`xtreme_jax.registry.xglue`, `TaskSpec.files`) into the schemas of
the XTREME readers, so the same task kinds fine-tune on both benchmarks:

* NC, XNLI, PAWSX, QADSM, QAM, WPR -> `{"id", "text_a", "text_b", "label":
  str | None}`. The label is the last tab-separated column, as the official
  scorer reads it; the text columns are those before it, whatever their
  number (Data_Format.txt lists NC rows as `query, title, body, category`,
  the repository's README as `title, body, category`): `text_a` is the first,
  `text_b` the others joined by a space (QADSM: query / ad title + description;
  WPR: query / page title + snippet). PAWSX files start with a header line
  (`id sentence1 sentence2 label`) whose id column is dropped; blank lines are
  skipped. WPR rows also carry `group`, the index of their query group (runs
  of consecutive rows with the same query, `query_groups`, as the
  scorer's nDCG groups them).
* NER, POS -> `{"id", "tokens", "tags": list | None}`: `word label` per line
  (space-separated, the label last), a blank line or a `-DOCSTART-` line
  between sentences.
* MLQA -> the SQuAD v1.1 question records of `xtreme_readers.parse_squad`.
* QG, NTG -> `{"id", "source", "target": str | None, "language"}`, one per line of the
  `.src.` file, line i paired with line i of the `.tgt.` file (`TaskSpec.sides`).
  Lines are split as the official scorer's `open()` iterates them (universal
  newlines: `\n`, `\r\n`, `\r`; every line counts, blank ones too);
  `source` is the line without its line end, `target` the text the scorer
  takes as the reference (the last tab-separated column, stripped). A pair
  whose line counts differ is a `DataError` naming both files and counts.
  A test split without its `.tgt.` file (the release hides test targets)
  reads with `target` None; a missing train / dev `.tgt.` file is an error.

Test files without labels are accepted: a row whose last column is not one
of the task's labels and which has no more columns than the text needs (a
token alone, for tagging) reads as unlabeled (`label` / `tags` None). In
train and dev files every row needs a valid label; otherwise a `DataError`
names the file, the line and the valid labels.
"""

from __future__ import annotations

import io
import os
from typing import Optional, Sequence

from xtreme_jax import errors, fs, text
from xtreme_jax.data.readers.xtreme_readers import check_training_answers, malformed, numbered_lines, parse_squad
from xtreme_jax.registry import XGLUE, TaskSpec

DOCSTART = text.DOCSTART
# Text columns of a labelled row (the fewest; more are joined into text_b). PAWSX counts its id column.
TEXT_COLUMNS = {"NC": 2, "XNLI": 2, "PAWSX": 3, "QADSM": 3, "QAM": 2, "WPR": 3}
HEADER = {"PAWSX": 1}  # lines before the first row


def path(spec: TaskSpec, data_dir: str, language: str, split: str, side: Optional[str] = None) -> str:
  """The file of (task, language, split) (of a pair task: of `side`, default the source); MissingInputError
  naming it when absent."""
  file = os.path.join(data_dir, spec.file(split, language, side))
  if not fs.isfile(file):
    if split == "train" and language != spec.train[1]:
      raise errors.MissingInputError(
          f"XGLUE {spec.name}: no {language} training data at {file}; the release ships {spec.train[1]} only: "
          f"put the {language} training set (e.g. a machine translation of the {spec.train[1]} file) there")
    raise errors.MissingInputError(f"XGLUE {spec.name}: expected file {file} does not exist; pass the unpacked "
                                   "xglue_full_dataset folder (github.com/microsoft/XGLUE) as the data folder")
  return file


def _check(spec: TaskSpec, language: str, split: str) -> None:
  if split not in spec.languages:
    raise errors.ConfigError(f"XGLUE {spec.name} has no split {split!r}; valid: {', '.join(spec.languages)}")
  if language not in spec.languages[split]:
    raise errors.ConfigError(f"XGLUE {spec.name} {split} has no language {language!r}; valid: "
                             f"{' '.join(spec.languages[split])}")


def _read_rows(spec: TaskSpec, file: str, language: str, split: str) -> list[dict]:
  width, labelled = TEXT_COLUMNS[spec.name], split != "test"
  out, queries = [], []
  for n, line in numbered_lines(file, "tab-separated rows, the label last")[HEADER.get(spec.name, 0):]:
    if not line.strip():
      continue
    cols = line.split("\t")
    label = cols[-1].strip()
    has_label = label in spec.labels and len(cols) > width
    if labelled and not has_label:
      if len(cols) <= width:
        raise malformed(file, n, f"{len(cols)} tab-separated columns; expected at least {width + 1} (text, label)")
      raise malformed(file, n, f"unknown label {label!r}; valid labels: {', '.join(spec.labels)}")
    texts = cols[:-1] if has_label else cols
    if len(texts) < width:
      raise malformed(file, n, f"{len(cols)} tab-separated columns; expected at least {width}")
    if spec.name == "PAWSX":
      texts = texts[1:]  # the id column
    row = {"id": f"{spec.name}-{language}-{split}-{len(out)}", "text_a": texts[0], "text_b": " ".join(texts[1:]),
           "label": label if has_label else None}
    queries.append(cols[0])
    out.append(row)
  if spec.kind == "ranking":
    for row, group in zip(out, query_groups(queries)):
      row["group"] = group
  return out


def _read_tagging(spec: TaskSpec, file: str, language: str, split: str) -> list[dict]:
  sentences, tokens, tags, unlabelled = [], [], [], 0
  for n, line in numbered_lines(file, "`word label` per line, a blank line between sentences") + [(0, "")]:
    if not line.strip() or line.startswith(DOCSTART):
      if tokens:
        sentences.append({"id": f"{spec.name}-{language}-{split}-{len(sentences)}", "tokens": tokens,
                          "tags": None if unlabelled else tags})
      tokens, tags, unlabelled = [], [], 0
      continue
    cols = line.split()
    if len(cols) >= 2 and cols[-1] in spec.labels:
      tokens.append(" ".join(cols[:-1]))
      tags.append(cols[-1])
    elif split == "test" and len(cols) == 1:
      tokens.append(cols[0])
      unlabelled += 1
    else:
      raise malformed(file, n, f"expected `word label` with a label in {', '.join(spec.labels)}, got {line!r}")
    if unlabelled and len(tags):
      raise malformed(file, n, "a sentence mixes labelled and unlabelled words")
  return sentences


def _lines(file: str, expected: str) -> list[str]:
  """The file's lines as Python's `open()` iterates them (universal newlines), line ends removed."""
  content = io.StringIO(text.read_utf8(file, expected), newline=None)
  return [line[:-1] if line.endswith("\n") else line for line in content]


def _read_generation(spec: TaskSpec, file: str, data_dir: str, language: str, split: str) -> list[dict]:
  sources = _lines(file, "one source text per line")
  target_file = os.path.join(data_dir, spec.file(split, language, spec.sides[1]))
  if split == "test" and not fs.isfile(target_file):
    targets = [None] * len(sources)  # hidden test targets
  else:
    target_file = path(spec, data_dir, language, split, spec.sides[1])
    targets = [line.split("\t")[-1].strip() for line in _lines(target_file, "one target text per line")]
    if len(targets) != len(sources):
      raise errors.DataError(f"XGLUE {spec.name}: {file} has {len(sources)} lines but {target_file} has "
                             f"{len(targets)}; line i of one must be the target of line i of the other")
  return [{"id": f"{spec.name}-{language}-{split}-{i}", "source": source, "target": target, "language": language}
          for i, (source, target) in enumerate(zip(sources, targets))]


def parse_translation(task: str, file: str, language: str, split: str) -> list[dict]:
  """A user's translation of one (task, language, split) file, in the task's own format (`read`'s schema):
  labels and tags optional, as in a test file."""
  spec = XGLUE.task(task)
  if spec.kind == "tagging":
    return _read_tagging(spec, file, language, "test")
  if spec.kind == "span_qa":
    return parse_squad(file)
  if spec.kind == "generation":
    raise errors.ConfigError(f"XGLUE {task} has no translation format (a generation task is not read as pairs)")
  return _read_rows(spec, file, language, "test")


def read(task: str, data_dir: str, language: str, split: str) -> list[dict]:
  """The examples of one (task, language, split) of the official layout; schemas in the module docstring."""
  spec = XGLUE.task(task)
  _check(spec, language, split)
  file = path(spec, data_dir, language, split)
  if spec.kind == "tagging":
    return _read_tagging(spec, file, language, split)
  if spec.kind == "span_qa":
    records = parse_squad(file)
    return check_training_answers(records, file) if split == "train" else records
  if spec.kind == "generation":
    return _read_generation(spec, file, data_dir, language, split)
  return _read_rows(spec, file, language, split)


def query_groups(queries: Sequence[str]) -> list[int]:
  """Group index of each row: runs of consecutive rows with the same query (XGLUE's scorer; an empty first
  query opens no new group)."""
  groups, group, last = [], 0, ""
  for query in queries:
    if query != last and last:
      group += 1
    last = query
    groups.append(group)
  return groups
