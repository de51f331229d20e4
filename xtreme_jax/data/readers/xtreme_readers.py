"""Plain-Python readers for the official XTREME download layout (no jax; no TF for local paths).

`data_dir` is the `download/` root that the official XTREME
`scripts/download_data.sh` (github.com/google-research/xtreme) leaves after
its preprocessing; it may be a URL (`gs://bucket/download`, read through
`xtreme_jax.fs`). Every reader takes `(data_dir, language, split)`; `read`
dispatches by task name and `TASKS` lists, per task, the reader and the
languages of each split that exists (from the task registry,
`xtreme_jax.registry.xtreme`, which also holds the label and tag sets).

Schemas (all strings are returned exactly as stored, apart from line ends):

* xnli, pawsx -> list of `{"id": f"{task}-{lg}-{split}-{i}", "text_a", "text_b",
  "label": str | None}`. The files come from Python's csv writer (CRLF, quote-
  wrapped fields with doubled quotes) but the official reader uses no quote
  char, so quote characters stay literal. Test files have no label column.
* panx, udpos -> list of `{"id", "tokens": [...], "tags": [...] | None}`;
  `tags` is None for test files, which hold tokens only.
* xquad, mlqa, tydiqa, squad -> one dict per question `{"id", "orig_id",
  "title", "context", "question", "answers": {"text": [...],
  "answer_start": [...]}}`. Ids repeated within a file (the per-language
  tydiqa train files keep only the last `-`-part of the original id) get a
  deterministic `-dupN` suffix in file order; `orig_id` is the id as stored.
  Stripped test answers (`text: ''`) are kept as given.
* bucc2018 -> `{"source": [(id, sent)], "target": [(id, sent)],
  "gold": [(src_id, tgt_id)] | None}` (gold is public for dev only).
* tatoeba -> `{"source": [...], "target": [...]}`, line i with line i. The
  released English side is sorted (which hides the gold); it is read as is.

Bad files raise `errors.DataError` (a `ValueError`) naming the file and, where
there is one, the line (and byte): a file that is not UTF-8 or is empty
(whitespace only), a malformed row, an unknown label or, in train / dev files, an
unknown tag (`PANX_TAGS`, `UPOS_TAGS`), invalid JSON, a SQuAD file without
questions, and a training QA file (squad / tydiqa train) in which more than
`MAX_BAD_ANSWER_FRACTION` of the questions have an answer that is not in their
context (fewer are logged in one warning per file; training skips them). A missing
file raises `errors.MissingInputError`, an unknown task / language / split
`errors.ConfigError`. Blank lines are skipped in row formats (xnli, pawsx,
bucc2018, including the trailing blank line some bucc2018 files end with); tagging
files use them between sentences; tatoeba reads every line as a sentence.

PAN-X `lg:` token prefixes: the raw WikiANN files hold tokens like
`en:London`. The official `utils_preprocess.py::panx_preprocess`
(google-research/xtreme) cuts every token at its first `:`
(`token = items[0][items[0].find(':') + 1:].strip()`) before writing
`panx/{split}-{lg}.tsv`, so the released files carry no prefix. A file in
which *every* token starts with `{lg}:` (i.e. a raw, unpreprocessed file) has
that prefix removed; otherwise tokens are left untouched, so genuine tokens
such as `10:30` or `de:` never lose characters.

UD v2.5 has no training treebank for th, tl, yo and no dev set for kk, th,
tl, yo, so the official download writes no udpos files for those (language,
split) pairs; `TASKS` leaves them out.

TFDS builders holding the same data (not used here; they download on first
use): xnli -> `xtreme_xnli`, pawsx -> `xtreme_pawsx`, udpos -> `xtreme_pos`,
panx -> `wikiann`, xquad -> `xquad`, mlqa -> `mlqa`, tydiqa -> `tydi_qa`,
bucc2018 -> `bucc`, tatoeba -> `tatoeba`, squad -> `squad`.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, NamedTuple, Optional

from xtreme_jax import errors, fs, text
from xtreme_jax.registry.xtreme import (  # noqa: F401  (re-exported: the readers' label and language sets)
  BUCC_LANGS, MLQA_LANGS, PANX_LANGS, PANX_TAGS, PAWSX_LABELS, PAWSX_LANGS, TATOEBA_LANGS, TYDIQA_LANGS,
  UDPOS_LANGS, UPOS_TAGS, XNLI_LABELS, XNLI_LANGS, XQUAD_LANGS, XTREME)

# A training QA file in which more than this fraction of the questions have an answer that is
# not in their context is refused (`check_training_answers`); fewer are logged and skipped.
MAX_BAD_ANSWER_FRACTION = 0.05

# Relative paths under `download/`; `{lg}` / `{split}` are filled in.
PATHS: dict[str, Any] = {
    "xnli": "xnli/{split}-{lg}.tsv",
    "pawsx": "pawsx/{split}-{lg}.tsv",
    "panx": "panx/{split}-{lg}.tsv",
    "udpos": "udpos/{split}-{lg}.tsv",
    "xquad": "xquad/xquad.{lg}.json",
    "mlqa": "mlqa/MLQA_V1/{split}/{split}-context-{lg}-question-{lg}.json",
    "tydiqa": {"train": "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.{lg}.train.json",
               "test": "tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lg}.dev.json"},
    "squad": {"train": "squad/train-v1.1.json", "dev": "squad/dev-v1.1.json"},
    "bucc2018": {"source": "bucc2018/{lg}-en.{split}.{lg}", "target": "bucc2018/{lg}-en.{split}.en",
                 "gold": "bucc2018/{lg}-en.{split}.gold"},
    "tatoeba": {"source": "tatoeba/{lg}-en.{lg}", "target": "tatoeba/{lg}-en.en"},
}

TFDS_BUILDERS = {name: spec.tfds_builder for name, spec in XTREME.specs.items()}


class Reader(NamedTuple):
  reader: Callable[[str, str, str], Any]
  languages: dict  # split -> tuple of languages that have that split (the registry's)


def file_path(task: str, data_dir: str, language: str, split: str, part: Optional[str] = None) -> str:
  """Path of one file of the official layout (`part` selects a bucc/tatoeba/tydiqa side)."""
  template = PATHS[task]
  if isinstance(template, dict):
    template = template[part if part is not None else split]
  return os.path.join(data_dir, template.format(lg=language, split=split))


def check_split(task: str, language: str, split: str) -> None:
  """Raises ConfigError unless XTREME's `task` has a `split` for `language` (naming what is valid)."""
  if task not in TASKS:
    raise errors.ConfigError(f"unknown XTREME task {task!r}; valid tasks: {', '.join(sorted(TASKS))}")
  splits = TASKS[task].languages
  if split not in splits:
    raise errors.ConfigError(f"{task} has no split {split!r}; valid splits: {', '.join(splits)}")
  every = sorted({lg for lgs in splits.values() for lg in lgs})
  if language not in every:
    raise errors.ConfigError(f"unknown language {language!r} for {task}; valid languages: {' '.join(every)}")
  if language not in splits[split]:
    raise errors.ConfigError(f"{task} has no {split!r} split for {language!r}; languages with {split}: "
                             f"{' '.join(splits[split])}")


def _missing(task: str, path: str) -> errors.MissingInputError:
  return errors.MissingInputError(
      f"{task}: expected file {path} does not exist. Obtain the data by running the official XTREME "
      f"`scripts/download_data.sh` (github.com/google-research/xtreme) and pass its `download/` directory "
      f"as data_dir (the TFDS builder `{TFDS_BUILDERS[task]}` holds the same data).")


def _path(task: str, data_dir: str, language: str, split: str, part: Optional[str] = None) -> str:
  path = file_path(task, data_dir, language, split, part)
  if not fs.isfile(path):
    raise _missing(task, path)
  return path


def numbered_lines(path: str, expected: str) -> list[tuple[int, str]]:
  """(1-based line number, line) with `\\n` / `\\r\\n` removed; no other whitespace touched.

  Only `\\n` splits lines (not the Unicode separators str.splitlines honours), so
  text fields holding U+2028, U+0085 and similar survive intact. The file must be
  UTF-8 and not empty (`text.read_utf8`; `expected` says what it should hold).
  """
  lines = text.read_utf8(path, expected).split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return [(n, line[:-1] if line.endswith("\r") else line) for n, line in enumerate(lines, 1)]


def malformed(path: str, lineno: int, why: str) -> errors.DataError:
  """The `DataError` of a malformed row: `path:line: malformed row: why`."""
  return errors.DataError(f"{errors.location(path, lineno)}: malformed row: {why}")


# ----------------------------------------------------------------------------- pair classification


def _read_pairs(task: str, data_dir: str, language: str, split: str, labels: tuple) -> list[dict]:
  check_split(task, language, split)
  return _parse_pairs(task, _path(task, data_dir, language, split), language, split, labels)


def _parse_pairs(task: str, path: str, language: str, split: str, labels: tuple) -> list[dict]:
  widths = (2, 3) if split == "test" else (3,)
  expected = "`text_a<TAB>text_b" + ("[<TAB>label]` rows" if split == "test" else "<TAB>label` rows")
  out = []
  for n, line in numbered_lines(path, expected):
    if not line.strip():
      continue
    cols = line.split("\t")
    if len(cols) not in widths:
      raise malformed(path, n, f"{len(cols)} tab-separated columns, expected {' or '.join(map(str, widths))}")
    label = cols[2].strip() if len(cols) == 3 else None
    if label is not None and label not in labels:
      raise malformed(path, n, f"unknown label {label!r}; valid labels: {', '.join(labels)}")
    out.append({"id": f"{task}-{language}-{split}-{len(out)}", "text_a": cols[0], "text_b": cols[1],
                "label": label})
  return out


def read_xnli(data_dir: str, language: str, split: str) -> list[dict]:
  """`xnli/{split}-{lg}.tsv`: premise, hypothesis, label (no label in test)."""
  return _read_pairs("xnli", data_dir, language, split, XNLI_LABELS)


def read_pawsx(data_dir: str, language: str, split: str) -> list[dict]:
  """`pawsx/{split}-{lg}.tsv`: sentence1, sentence2, label 0/1 (no label in test)."""
  return _read_pairs("pawsx", data_dir, language, split, PAWSX_LABELS)


# ----------------------------------------------------------------------------- tagging (CoNLL-like)


def _read_tagging(task: str, data_dir: str, language: str, split: str, allowed: tuple,
                  prefix: str = "") -> list[dict]:
  """Sentences of a tagging file; train / dev tags must be in `allowed`."""
  check_split(task, language, split)
  return _parse_tagging(task, _path(task, data_dir, language, split), language, split, allowed, prefix,
                        "ignored" if split == "test" else "required")


def _parse_tagging(task: str, path: str, language: str, split: str, allowed: tuple, prefix: str,
                   tags: str) -> list[dict]:
  """`tags`: "required" (train / dev), "ignored" (test files hold tokens only; a stray tag column is
  ignored) or "optional" (translations: a sentence's words all have a tag or none has)."""
  expected = {"ignored": "one token", "required": "`token<TAB>TAG`",
              "optional": "`token[<TAB>TAG]`"}[tags] + " per line, a blank line between sentences"
  sentences, tokens, labels = [], [], []
  for n, line in numbered_lines(path, expected) + [(0, "")]:  # sentinel flushes a final sentence with no blank line
    if not line.strip():
      if tokens:
        sentences.append((tokens, labels if tags != "ignored" and labels else None))
      tokens, labels = [], []
      continue
    cols = line.split("\t")
    if tags == "ignored" or (tags == "optional" and len(cols) == 1):
      tokens.append(cols[0])
    elif len(cols) != 2:
      why = "no tab between token and tag" if len(cols) == 1 else f"{len(cols)} tab-separated columns"
      raise malformed(path, n, f"{why}, expected `token<TAB>TAG`")
    elif cols[1].strip() not in allowed:
      raise malformed(path, n, f"unknown tag {cols[1].strip()!r}; allowed tags: {' '.join(allowed)}")
    else:
      tokens.append(cols[0])
      labels.append(cols[1].strip())
    if labels and len(labels) != len(tokens):
      raise malformed(path, n, "a sentence mixes tagged and untagged tokens")
  if prefix and sentences and all(t.startswith(prefix) for toks, _ in sentences for t in toks):
    sentences = [([t[len(prefix):] for t in toks], tg) for toks, tg in sentences]
  return [{"id": f"{task}-{language}-{split}-{i}", "tokens": toks, "tags": tg}
          for i, (toks, tg) in enumerate(sentences)]


def read_panx(data_dir: str, language: str, split: str) -> list[dict]:
  """`panx/{split}-{lg}.tsv`: `token\\tTAG` lines (IOB2), blank line between sentences."""
  return _read_tagging("panx", data_dir, language, split, PANX_TAGS, prefix=f"{language}:")


def read_udpos(data_dir: str, language: str, split: str) -> list[dict]:
  """`udpos/{split}-{lg}.tsv`: `word\\tUPOS` lines, blank line between sentences."""
  return _read_tagging("udpos", data_dir, language, split, UPOS_TAGS)


# ----------------------------------------------------------------------------- SQuAD v1.1 JSON


def _read_squad(task: str, data_dir: str, language: str, split: str) -> list[dict]:
  check_split(task, language, split)
  path = _path(task, data_dir, language, split)
  records = parse_squad(path)
  return check_training_answers(records, path) if split == "train" else records


SQUAD_FORMAT = "SQuAD v1.1 JSON (data / paragraphs / context, qas / id, question, answers / text, answer_start)"


def parse_squad(path: str) -> list[dict]:
  """The question records (schema above) of one SQuAD v1.1 JSON file at `path` (at least one)."""
  try:
    data = json.loads(text.read_utf8(path, SQUAD_FORMAT))
  except json.JSONDecodeError as e:
    raise errors.DataError(f"{errors.location(path, e.lineno)}: not valid JSON: {e.msg} (column {e.colno}); "
                           f"expected {SQUAD_FORMAT}") from None
  out, seen = [], set()
  try:
    all_ids = {qa["id"] for doc in data["data"] for par in doc["paragraphs"] for qa in par["qas"]}
    for doc in data["data"]:
      for par in doc["paragraphs"]:
        for qa in par["qas"]:
          uid, k = qa["id"], 0
          while uid in seen or (k and uid in all_ids):
            k += 1
            uid = f"{qa['id']}-dup{k}"
          seen.add(uid)
          out.append({"id": uid, "orig_id": qa["id"], "title": doc.get("title", ""), "context": par["context"],
                      "question": qa["question"],
                      "answers": {"text": [a["text"] for a in qa["answers"]],
                                  "answer_start": [a["answer_start"] for a in qa["answers"]]}})
  except (KeyError, TypeError) as e:
    raise errors.DataError(f"{path}: not in SQuAD v1.1 format (data/paragraphs/qas/answers): missing {e}") from None
  if not out:
    raise errors.DataError(f"{path} holds no questions; expected {SQUAD_FORMAT}")
  return out


def answer_in_context(record: dict) -> bool:
  """Whether the first answer of a QA record (the one trained on) is in its context:
  at its `answer_start`, or elsewhere (`text.locate_answer`; training uses the nearest)."""
  answers = record.get("answers") or {}
  texts, starts = answers.get("text") or [], answers.get("answer_start") or []
  start = int(starts[0]) if starts else 0
  return bool(texts) and text.locate_answer(record["context"], texts[0], start) is not None


def check_training_answers(records: list[dict], where: str) -> list[dict]:
  """`records` of the training QA file `where`, checked: questions whose answer is not in
  their context (`answer_in_context`; no training window can be built for them) are
  counted and logged in one warning; more than `MAX_BAD_ANSWER_FRACTION` of them
  raise `errors.DataError`."""
  bad = [r["id"] for r in records if not answer_in_context(r)]
  if not bad:
    return records
  what = (f"{len(bad)} of {len(records)} training questions have an answer that is not in their context "
          f"(not at answer_start and nowhere else), e.g. ids {bad[:5]}")
  if len(bad) > MAX_BAD_ANSWER_FRACTION * len(records):
    raise errors.DataError(f"{where}: {what}: more than the {MAX_BAD_ANSWER_FRACTION:.0%} allowed; expected "
                           f"answers with text == context[answer_start:answer_start + len(text)]")
  logging.warning("%s: %s; they are not trained on", where, what)
  return records


def read_xquad(data_dir: str, language: str, split: str) -> list[dict]:
  """`xquad/xquad.{lg}.json` (test only; answers stripped in the release)."""
  return _read_squad("xquad", data_dir, language, split)


def read_mlqa(data_dir: str, language: str, split: str) -> list[dict]:
  """`mlqa/MLQA_V1/{split}/{split}-context-{lg}-question-{lg}.json` (dev, test)."""
  return _read_squad("mlqa", data_dir, language, split)


def read_tydiqa(data_dir: str, language: str, split: str) -> list[dict]:
  """TyDiQA-GoldP: train = per-language train split; test = the GoldP dev set."""
  return _read_squad("tydiqa", data_dir, language, split)


def read_squad(data_dir: str, language: str, split: str) -> list[dict]:
  """`squad/{train,dev}-v1.1.json` (English; the training data of xquad / mlqa)."""
  return _read_squad("squad", data_dir, language, split)


# ----------------------------------------------------------------------------- retrieval


def _read_columns(path: str, width: int, what: str) -> list[tuple]:
  """Rows of `width` tab-separated columns; blank lines (e.g. a trailing one) are skipped."""
  out = []
  for n, line in numbered_lines(path, f"`{what}` lines"):
    if not line.strip():
      continue
    cols = line.split("\t")
    if len(cols) != width:
      raise malformed(path, n, f"{len(cols)} tab-separated columns, expected {width} ({what})")
    out.append(tuple(cols))
  return out


def read_bucc2018(data_dir: str, language: str, split: str) -> dict:
  """`bucc2018/{lg}-en.{split}.{lg,en}` (`id\\tsentence`) and `.gold` (`lg-id\\ten-id`, dev only)."""
  check_split("bucc2018", language, split)
  src, tgt = (_read_columns(_path("bucc2018", data_dir, language, split, side), 2, "id<TAB>sentence")
              for side in ("source", "target"))
  gold_path = file_path("bucc2018", data_dir, language, split, "gold")
  has_gold = fs.isfile(gold_path)
  if split == "dev" and not has_gold:
    raise _missing("bucc2018", gold_path)
  gold = _read_columns(gold_path, 2, "lg-id<TAB>en-id") if has_gold else None
  return {"source": src, "target": tgt, "gold": gold}


def read_tatoeba(data_dir: str, language: str, split: str) -> dict:
  """`tatoeba/{lg}-en.{lg}` and `tatoeba/{lg}-en.en`, one sentence per line."""
  check_split("tatoeba", language, split)
  paths = [_path("tatoeba", data_dir, language, split, side) for side in ("source", "target")]
  src, tgt = ([line for _, line in numbered_lines(p, "one sentence per line")] for p in paths)
  if len(src) != len(tgt):
    raise errors.DataError(f"tatoeba {language}: {paths[0]} has {len(src)} lines but {paths[1]} has {len(tgt)}; "
                     f"the two sides must be line-aligned")
  return {"source": src, "target": tgt}


# ----------------------------------------------------------------------------- registry


_READERS = {"xnli": read_xnli, "pawsx": read_pawsx, "panx": read_panx, "udpos": read_udpos, "xquad": read_xquad,
            "mlqa": read_mlqa, "tydiqa": read_tydiqa, "squad": read_squad, "bucc2018": read_bucc2018,
            "tatoeba": read_tatoeba}
TASKS: dict[str, Reader] = {name: Reader(_READERS[name], dict(spec.languages)) for name, spec in XTREME.specs.items()}


def parse_translation(task: str, path: str, language: str, split: str) -> list[dict]:
  """A user's translation of one (task, language, split) file, in the task's own format (`read`'s schema):
  labels and tags optional (rows with them keep them), ids `{task}-{language}-{split}-{i}`."""
  if task in ("xnli", "pawsx"):
    return _parse_pairs(task, path, language, "test", XTREME.task(task).labels)
  if task in ("panx", "udpos"):
    return _parse_tagging(task, path, language, split, XTREME.task(task).labels, "", "optional")
  if task in ("xquad", "mlqa", "tydiqa", "squad"):
    return parse_squad(path)
  raise errors.ConfigError(f"XTREME {task} has no translation format (its examples are not read as pairs)")


def read(task: str, data_dir: str, language: str, split: str):
  """Read one (task, language, split) of the official layout; see the module docstring for schemas."""
  if task not in TASKS:
    raise errors.ConfigError(f"unknown XTREME task {task!r}; valid tasks: {', '.join(sorted(TASKS))}")
  return TASKS[task].reader(data_dir, language, split)
