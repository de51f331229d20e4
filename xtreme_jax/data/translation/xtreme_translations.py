"""Machine translations of XTREME: translate-train, translate-test and pseudo test sets (no jax / TF).

The official `scripts/download_data.sh` does not download the translations.
They live in their own directory, `translations_dir`, which by default is
`<data_dir>/translations` (the `download/` root of `xtreme_readers`) and
mirrors the public bucket `gs://xtreme_translations`:

    gsutil -m cp -r gs://xtreme_translations/* <data_dir>/translations/

Layout (relative to `translations_dir`; `{lg}` is filled in):

| task, kind | file | format |
|---|---|---|
| xnli translate_train | `XNLI/translate-train/en-{lg}-translated.tsv` | 5 tab-separated columns `en_s1, en_s2, translated_s1, translated_s2, label`, no quote char (quote characters stay literal); the label `contradictory` means `contradiction` |
| pawsx translate_train | `PAWSX/translate-train/en-{lg}-translated.tsv` | same 5 columns, labels 0 / 1 |
| squad (= xquad, mlqa) translate_train | `SQuAD/translate-train/squad.translate.train.en-{lg}.json` | SQuAD v1.1 JSON (SQuAD train translated into an XQuAD language; MLQA's languages are all XQuAD languages, so both tasks train on it) |
| squad (= xquad, mlqa) translate_dev | `SQuAD/translate-dev/squad.translate.dev.en-{lg}.json` | SQuAD v1.1 JSON |
| tydiqa translate_train | `TyDiQA-GoldP/translate-train/tydiqa.translate.train.en-{lg}.json` | SQuAD v1.1 JSON |
| xquad translate_test | `XQuAD/translate-test/xquad.translate.test.{lg}-en.json` | XQuAD test translated into English, same question ids as `xquad/xquad.{lg}.json` |
| xnli translate_test (*) | `XNLI/translate-test/test-{lg}-en-translated.tsv` | `orig_s1, orig_s2, en_s1, en_s2[, label]`, line i = line i of `xnli/test-{lg}.tsv` |
| pawsx translate_test (*) | `PAWSX/translate-test/test-{lg}-en-translated.tsv` | the same, aligned with `pawsx/test-{lg}.tsv` |
| mlqa translate_test (*) | `MLQA/translate-test/mlqa.translate.test.{lg}-en.json` | MLQA test translated into English, same question ids |
| xnli pseudo_test (*) | `XNLI/pseudo-test/test-{lg}.tsv` | English XNLI test machine-translated into `{lg}`, `premise\\thypothesis\\tlabel` (labels required) |
| xquad pseudo_test (*) | `XQuAD/pseudo-test/xquad.{lg}.json` | English XQuAD machine-translated into `{lg}`, SQuAD JSON with answers |

The first rows are the bucket's paths as the TFDS builders `xtreme_xnli`,
`xtreme_pawsx`, `xquad` and `tydi_qa` use them. (*) marks paths this project
defines itself: the bucket's names for these files are not known to us (the
XNLI / PAWS-X / MLQA translate-test files were never published under a fixed
name, and pseudo test sets are not published at all); put your own
translations there.

`read(task, translations_dir, language, kind, data_dir=None)` returns records
in exactly the schema `xtreme_readers.read` gives that task's train split
(translate_train, translate_dev: the SQuAD dev schema) or test split
(translate_test, pseudo_test), so the feature code works unchanged:

* xnli / pawsx translate_train: `{"id": f"{task}-{lg}-translate_train-{i}",
  "text_a", "text_b"}` = the translated columns, plus the label.
* xnli / pawsx translate_test: `text_a` / `text_b` = the English columns; `id`
  = the id the official test reader gives the same line (`{task}-{lg}-test-{i}`),
  so predictions map back line by line; `label` from a fifth column if present,
  else None (as the unlabeled official test file). With `data_dir` the line
  count is checked against `{task}/test-{lg}.tsv` and a difference is refused.
* xquad / mlqa translate_test: the English SQuAD records with the original
  question ids; with `data_dir` the ids are checked against the original test file
  (`check_translate_test_ids`, which the TFDS route uses too).
* squad / xquad / mlqa / tydiqa translate_train: checked as training files
  (`xtreme_readers.check_training_answers`: answers must be in their context).
* pseudo_test: `{"id": f"xnli-{lg}-test-{i}", ..., "label"}` with the gold
  label, or SQuAD records with their gold answers. `{lg}` may be any language
  code (lower-case ISO 639); `PSEUDO_LANGUAGES` lists the codes the seqio tasks
  register: the 40 PAN-X languages the task does not cover.

Rows are split on tabs only (no quote handling, CRLF removed), blank lines are
skipped, as `xtreme_readers` does for the official files; bad files raise the same
`errors.DataError`s (not UTF-8, empty, malformed rows, invalid JSON).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Optional

from xtreme_jax import errors, fs
from xtreme_jax.data.readers import xtreme_readers as readers

KINDS = ("translate_train", "translate_dev", "translate_test", "pseudo_test")
BUCKET = "gs://xtreme_translations"
TRANSLATIONS_SUBDIR = "translations"


def _non_en(langs: tuple) -> tuple:
  return tuple(lg for lg in langs if lg != "en")


# kind -> task -> translations_dir-relative template
PATHS: dict[str, dict[str, str]] = {
    "translate_train": {
        "xnli": "XNLI/translate-train/en-{lg}-translated.tsv",
        "pawsx": "PAWSX/translate-train/en-{lg}-translated.tsv",
        "squad": "SQuAD/translate-train/squad.translate.train.en-{lg}.json",
        "xquad": "SQuAD/translate-train/squad.translate.train.en-{lg}.json",
        "mlqa": "SQuAD/translate-train/squad.translate.train.en-{lg}.json",
        "tydiqa": "TyDiQA-GoldP/translate-train/tydiqa.translate.train.en-{lg}.json",
    },
    "translate_dev": {
        "squad": "SQuAD/translate-dev/squad.translate.dev.en-{lg}.json",
        "xquad": "SQuAD/translate-dev/squad.translate.dev.en-{lg}.json",
        "mlqa": "SQuAD/translate-dev/squad.translate.dev.en-{lg}.json",
    },
    "translate_test": {
        "xnli": "XNLI/translate-test/test-{lg}-en-translated.tsv",
        "pawsx": "PAWSX/translate-test/test-{lg}-en-translated.tsv",
        "xquad": "XQuAD/translate-test/xquad.translate.test.{lg}-en.json",
        "mlqa": "MLQA/translate-test/mlqa.translate.test.{lg}-en.json",
    },
    "pseudo_test": {
        "xnli": "XNLI/pseudo-test/test-{lg}.tsv",
        "xquad": "XQuAD/pseudo-test/xquad.{lg}.json",
    },
}
# Paths taken from the public bucket (the others are ours).
BUCKET_PATHS = {("translate_train", t) for t in PATHS["translate_train"]} | {
    ("translate_dev", t) for t in PATHS["translate_dev"]} | {("translate_test", "xquad")}

_SQUAD_LANGS = _non_en(readers.XQUAD_LANGS)
# kind -> task -> languages (None: any language code, see PSEUDO_LANGUAGES)
LANGUAGES: dict[str, dict[str, Optional[tuple]]] = {
    "translate_train": {"xnli": _non_en(readers.XNLI_LANGS), "pawsx": _non_en(readers.PAWSX_LANGS),
                        "squad": _SQUAD_LANGS, "xquad": _SQUAD_LANGS, "mlqa": _non_en(readers.MLQA_LANGS),
                        "tydiqa": _non_en(readers.TYDIQA_LANGS)},
    "translate_dev": {"squad": _SQUAD_LANGS, "xquad": _SQUAD_LANGS, "mlqa": _non_en(readers.MLQA_LANGS)},
    "translate_test": {"xnli": _non_en(readers.XNLI_LANGS), "pawsx": _non_en(readers.PAWSX_LANGS),
                       "xquad": _non_en(readers.XQUAD_LANGS), "mlqa": _non_en(readers.MLQA_LANGS)},
    "pseudo_test": {"xnli": None, "xquad": None},
}
# The pseudo test languages the seqio tasks register: PAN-X languages the task does not cover.
PSEUDO_LANGUAGES = {task: tuple(lg for lg in readers.PANX_LANGS if lg not in readers.TASKS[task].languages["test"])
                    for task in LANGUAGES["pseudo_test"]}
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}$")


def languages(task: str, kind: str) -> tuple:
  """Languages with a `kind` file for `task` (pseudo_test: the registered `PSEUDO_LANGUAGES`)."""
  _check(task, kind)
  langs = LANGUAGES[kind][task]
  return PSEUDO_LANGUAGES[task] if langs is None else langs


def tasks(kind: str) -> tuple:
  if kind not in KINDS:
    raise errors.ConfigError(f"unknown translation kind {kind!r}; valid kinds: {', '.join(KINDS)}")
  return tuple(LANGUAGES[kind])


def _check(task: str, kind: str, language: Optional[str] = None) -> None:
  valid = tasks(kind)
  if task not in valid:
    raise errors.ConfigError(f"no {kind} data for XTREME task {task!r}; tasks with {kind}: {', '.join(valid)}")
  if language is None:
    return
  langs = LANGUAGES[kind][task]
  if langs is None:
    if not _LANGUAGE_CODE.match(language) or language in readers.TASKS[task].languages["test"]:
      raise errors.ConfigError(f"{task} {kind}: {language!r} is not a pseudo test language: expected a lower-case "
                       f"ISO 639 code of a language {task} does not cover (e.g. "
                       f"{' '.join(PSEUDO_LANGUAGES[task][:5])}); {task}'s own languages: "
                       f"{' '.join(readers.TASKS[task].languages['test'])}")
  elif language not in langs:
    raise errors.ConfigError(f"unknown language {language!r} for {task} {kind}; valid languages: {' '.join(langs)}")


def default_dir(data_dir: str) -> str:
  """`<data_dir>/translations`, where the bucket's copy goes by default."""
  return os.path.join(data_dir, TRANSLATIONS_SUBDIR)


def translation_path(task: str, translations_dir: str, language: str, kind: str) -> str:
  """Path of the `kind` file of (task, language) under `translations_dir` (validated, not checked on disk)."""
  _check(task, kind, language)
  return os.path.join(translations_dir, PATHS[kind][task].format(lg=language))


def exists(task: str, translations_dir: str, language: str, kind: str) -> bool:
  return fs.isfile(translation_path(task, translations_dir, language, kind))


def pseudo_languages_on_disk(task: str, translations_dir: str) -> list[str]:
  """Languages whose pseudo test file of `task` is present, sorted."""
  _check(task, "pseudo_test")
  template = PATHS["pseudo_test"][task]
  folder = os.path.join(translations_dir, os.path.dirname(template))
  head, tail = os.path.basename(template).split("{lg}")
  found = []
  if fs.isdir(folder):
    for name in sorted(fs.listdir(folder)):
      lg = name[len(head):len(name) - len(tail)] if name.startswith(head) and name.endswith(tail) else ""
      if _LANGUAGE_CODE.match(lg) and lg not in readers.TASKS[task].languages["test"]:
        found.append(lg)
  return found


def _missing(task: str, kind: str, path: str, translations_dir: str) -> errors.MissingInputError:
  if (kind, task) in BUCKET_PATHS:
    how = (f"Copy the public translations with `gsutil -m cp -r {BUCKET}/* {translations_dir}/` "
           f"(or pass translations_dir where your copy is).")
  else:
    how = (f"This path is defined by xtreme-jax (its name in {BUCKET}, if the bucket has it at all, is "
           f"not known): put your translations there in the format of the "
           f"xtreme_jax.data.translation.xtreme_translations docstring. The bucket's files are fetched with "
           f"`gsutil -m cp -r {BUCKET}/* {translations_dir}/`.")
  return errors.MissingInputError(f"{task} {kind}: expected file {path} does not exist. {how}")


def _path(task: str, translations_dir: str, language: str, kind: str) -> str:
  path = translation_path(task, translations_dir, language, kind)
  if not fs.isfile(path):
    raise _missing(task, kind, path, translations_dir)
  return path


# ----------------------------------------------------------------------------- readers


def _rows(path: str, widths: tuple, what: str) -> list[tuple[int, list[str]]]:
  out = []
  for n, line in readers.numbered_lines(path, f"`{what}` rows"):
    if not line.strip():
      continue
    cols = line.split("\t")
    if len(cols) not in widths:
      raise readers.malformed(path, n, f"{len(cols)} tab-separated columns, expected "
                                        f"{' or '.join(map(str, widths))} ({what})")
    out.append((n, cols))
  return out


def _label(path: str, n: int, task: str, value: str) -> str:
  labels = readers.XNLI_LABELS if task == "xnli" else readers.PAWSX_LABELS
  label = value.strip()
  if task == "xnli" and label == "contradictory":
    label = "contradiction"
  if label not in labels:
    raise readers.malformed(path, n, f"unknown label {label!r}; valid labels: {', '.join(labels)}"
                                      + (" (or contradictory)" if task == "xnli" else ""))
  return label


def _lenient_pawsx_translate_train(path: str) -> list[tuple[int, list[str]]]:
  """PAWS-X translate-train rows; rows that are not 5 columns with a 0/1 label are skipped and counted.

  Some rows of the published files are wrongly populated (the TFDS `xtreme_pawsx`
  builder, reading the same files, drops them too); XNLI's files are read strictly.
  """
  out, skipped = [], []
  for n, line in readers.numbered_lines(path, "`en_s1, en_s2, translated_s1, translated_s2, label` rows"):
    if not line.strip():
      continue
    cols = line.split("\t")
    if len(cols) != 5 or cols[4].strip() not in readers.PAWSX_LABELS:
      skipped.append(n)
      continue
    out.append((n, cols))
  if skipped:
    logging.warning("%s: skipped %d malformed row(s) (not 5 columns with a 0/1 label), e.g. line(s) %s",
                    path, len(skipped), skipped[:5])
  return out


def english_pairs(task: str, translations_dir: str, language: str) -> list[tuple[dict, dict]]:
  """(English record, translated record) of each row of an XNLI / PAWS-X translate-train file: its English
  columns and their translation, both with the row's label (FILTER's training pairs)."""
  _check(task, "translate_train", language)
  if task not in ("xnli", "pawsx"):
    raise errors.ConfigError(f"{task} translate_train files hold no English columns; pair its records by id")
  path = _path(task, translations_dir, language, "translate_train")
  rows = (_lenient_pawsx_translate_train(path) if task == "pawsx"
          else _rows(path, (5,), "en_s1, en_s2, translated_s1, translated_s2, label"))
  out = []
  for i, (n, c) in enumerate(rows):
    label = _label(path, n, task, c[4])
    out.append(({"id": f"{task}-en-translate_train-{i}", "text_a": c[0], "text_b": c[1], "label": label},
                {"id": f"{task}-{language}-translate_train-{i}", "text_a": c[2], "text_b": c[3], "label": label}))
  return out


def _pairs(task: str, translations_dir: str, language: str, kind: str, data_dir: Optional[str]) -> list[dict]:
  if kind == "translate_train":
    return [translated for _, translated in english_pairs(task, translations_dir, language)]
  path = _path(task, translations_dir, language, kind)
  if kind == "pseudo_test":
    rows = _rows(path, (3,), "premise, hypothesis, label")
    return [{"id": f"{task}-{language}-test-{i}", "text_a": c[0], "text_b": c[1],
             "label": _label(path, n, task, c[2])} for i, (n, c) in enumerate(rows)]
  rows = _rows(path, (4, 5), "orig_s1, orig_s2, en_s1, en_s2[, label]")
  if data_dir is not None:
    original = readers.read(task, data_dir, language, "test")
    if len(original) != len(rows):
      raise errors.DataError(f"{task} translate_test {language}: {path} has {len(rows)} rows but the original test "
                       f"file {readers.file_path(task, data_dir, language, 'test')} has {len(original)}; "
                       f"translate-test rows must be line-aligned with the original test file")
  return [{"id": f"{task}-{language}-test-{i}", "text_a": c[2], "text_b": c[3],
           "label": _label(path, n, task, c[4]) if len(c) == 5 else None} for i, (n, c) in enumerate(rows)]


def check_translate_test_ids(task: str, language: str, records: list[dict], where: str, original: list[dict],
                             original_where: str) -> list[dict]:
  """`records` of a QA translate-test set, checked to hold exactly the questions (ids) of the
  original test set, so that every prediction maps back to its question; `errors.DataError` if not."""
  mine, theirs = [r["id"] for r in records], [r["id"] for r in original]
  extra, missing = sorted(set(mine) - set(theirs)), sorted(set(theirs) - set(mine))
  problems = []
  if len(mine) != len(theirs):
    problems.append(f"{where} has {len(mine)} questions but the original test file {original_where} has "
                    f"{len(theirs)}")
  if extra:
    problems.append(f"{where} holds question ids the original test file {original_where} does not have, "
                    f"e.g. {extra[:5]}")
  if missing:
    problems.append(f"the translation lacks question ids of the original, e.g. {missing[:5]}")
  if problems:
    raise errors.DataError(f"{task} translate_test {language}: {'; '.join(problems)}; translated questions must "
                           f"keep their original ids")
  return records


def _squad(task: str, translations_dir: str, language: str, kind: str, data_dir: Optional[str]) -> list[dict]:
  path = _path(task, translations_dir, language, kind)
  records = readers.parse_squad(path)
  if kind == "translate_train":
    return readers.check_training_answers(records, path)
  if kind == "translate_test" and data_dir is not None:
    return check_translate_test_ids(task, language, records, path, readers.read(task, data_dir, language, "test"),
                                    readers.file_path(task, data_dir, language, "test"))
  return records


def read(task: str, translations_dir: str, language: str, kind: str, data_dir: Optional[str] = None) -> list[dict]:
  """Records of one translation file, in the schema `xtreme_readers.read` gives the matching split.

  `data_dir` (the official `download/` root), when given, makes translate_test
  check its alignment with the original test file (line count / question ids).
  """
  _check(task, kind, language)
  if task in ("xnli", "pawsx"):
    return _pairs(task, translations_dir, language, kind, data_dir)
  return _squad(task, translations_dir, language, kind, data_dir)
