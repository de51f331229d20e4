"""FILTER's paired data: each text with its translation, read through the task registry (no jax / TF).

A pair is `{"id", "language", "source", "target"}`: `source` the English
side, `target` the side in `language`, both records in the schema the task's
reader gives (`xtreme_readers` / `xglue_readers`); `id` is the target's.
`data` is the run's `XtremeData` / `XglueData`; translations are read under
`translations_dir` (default: `data.translations_root`).

**Training pairs** (`training_pairs`, one call per language): English pairs
each training record with itself; another language pairs each translated
training record with the English one it translates:

| tasks | translation | matched by |
|---|---|---|
| XTREME xnli, pawsx; XGLUE XNLI, PAWSX | XTREME's translate-train TSV (`xtreme_translations`), which holds both sides | its row |
| XTREME xquad, mlqa (SQuAD's), tydiqa; XGLUE MLQA (SQuAD's) | XTREME's translate-train SQuAD JSON | question id, in the English training file |
| the others: XTREME udpos, panx; XGLUE NER, POS, NC, QADSM, QAM, WPR | the user's `{TASK}/translate-train/en-{lg}.tsv` | position (row / sentence i of the English training file) |

Both sides of a classification pair carry the English label; a translated
tagging sentence keeps its tags if the file has them (else it has no gold
and only the KL teaches it); QA sides keep their own answers.

**Inference pairs** (`inference_pairs`): one per record of the target's dev
or test file, in its order, with the English text it translates or is
parallel to. `english` chooses which comes first when both exist:

* `translate_test`: the target file translated into English: for XTREME's
  test sets XTREME's translate-test files (`xtreme_translations`, checked
  against the test file), otherwise the user's
  `{TASK}/translate-test/{split}-{lg}-en.tsv` (`.json` for QA);
* `parallel`: the dataset's own English (`PARALLEL`: XNLI and PAWS-X dev /
  test rows are translations of the English rows at the same position; XQuAD
  and MLQA questions share their ids across languages), as the released code
  uses for MLQA / XQuAD.

Without either, a tagging sentence is paired with itself, as the paper does;
any other task is refused (`MissingInputError` naming the expected file).
English is always paired with itself.

The user's files (`{TASK}` is the task's name upper-cased) are in the task's
own format (`parse_translation` of the readers; labels and tags optional),
translated row by row / sentence by sentence (a translated sentence may have
another number of tokens), keeping QA question ids. `filter_translations`
writes them with any translation function, `runs/translate_task.gin` with
the model of a translation run (`runs/translate.gin`). Sides whose counts or ids disagree raise `errors.DataError`
naming both files.
"""

from __future__ import annotations

import logging
import os
from typing import Optional, Sequence

from xtreme_jax import errors, fs
from xtreme_jax.data.readers import xglue_readers, xtreme_readers
from xtreme_jax.data.translation import xtreme_translations as translations

ENGLISH_SOURCES = ("translate_test", "parallel")
# tasks whose dev / test records in every language translate the English records: by position, or (QA) by id
PARALLEL = {"xtreme": ("xnli", "pawsx", "xquad", "mlqa"), "xglue": ("XNLI", "PAWSX", "MLQA")}
# XGLUE tasks whose data is XTREME's: XTREME's translate-train files are theirs
_XTREME_TRANSLATIONS = {"XNLI": "xnli", "PAWSX": "pawsx", "MLQA": "squad"}
_PARSERS = {"xtreme": xtreme_readers.parse_translation, "xglue": xglue_readers.parse_translation}


def _spec(task: str, data):
  return data.benchmark.task(task)


def _root(data, translations_dir: Optional[str]) -> Optional[str]:
  return translations_dir or data.translations_root


def bucket_task(task: str, data) -> Optional[str]:
  """The XTREME translate-train task whose files hold `task`'s translations (None: the user's layout)."""
  if data.benchmark.name == "xglue":
    return _XTREME_TRANSLATIONS.get(task)
  return _spec(task, data).translate_train


def user_path(task: str, data, root: str, language: str, split: str) -> str:
  """The user's translation file of (task, language): split `train` the English training file translated into
  `language`, dev / test the `language` file translated into English."""
  suffix = "json" if _spec(task, data).kind == "span_qa" else "tsv"
  name = (f"translate-train/en-{language}.{suffix}" if split == "train"
          else f"translate-test/{split}-{language}-en.{suffix}")
  return os.path.join(root, task.upper(), name)


def _need_root(task: str, data, translations_dir: Optional[str]) -> str:
  root = _root(data, translations_dir)
  if root is None:
    raise errors.ConfigError(f"{task}: FILTER's pairs read translations, but no translations_dir is set (needed "
                             f"with the {data.source} data source)")
  return root


def training_path(task: str, data, language: str, root: str) -> Optional[str]:
  """The translation file of `language`'s training pairs (None: XTREME's translations have no such language)."""
  bucket = bucket_task(task, data)
  if bucket is None:
    return user_path(task, data, root, language, "train")
  if language not in translations.languages(bucket, "translate_train"):
    return None
  return translations.translation_path(bucket, root, language, "translate_train")


def _user_missing(task: str, path: str, what: str, language: str, split: str) -> errors.MissingInputError:
  return errors.MissingInputError(
      f"{task}: {path} does not exist (the {what}, read as the other side of FILTER's pairs). Write it with a "
      f"translation run's model: xtreme-jax run --gin_file=<its experiment> --gin_file=runs/translate_task.gin "
      f"--gin.TASK=\"'{task}'\" --gin.LANGUAGE=\"'{language}'\" --gin.SPLIT=\"'{split}'\" (or with any MT system "
      f"through xtreme_jax.data.filter.filter_translations.write_translation)")


def has_training_pairs(task: str, data, language: str, translations_dir: Optional[str] = None) -> bool:
  """Whether `language` has FILTER training pairs of `task` (English: its training file; others: the
  translation file)."""
  spec, bucket = _spec(task, data), bucket_task(task, data)
  if language == "en":
    return data.available(*spec.train)
  if data.benchmark.name == "xtreme" and bucket not in (None, "xnli", "pawsx"):  # QA: files or TFDS
    return language in translations.languages(bucket, "translate_train") and \
        data.available(bucket, language, "translate_train")
  root = _root(data, translations_dir)
  path = training_path(task, data, language, root) if root else None
  return path is not None and fs.isfile(path)


def _english_training(task: str, data) -> tuple[list[dict], str]:
  train = _spec(task, data).train
  return data.read(*train), data.location(*train)


def _pairs(language: str, sources: Sequence[dict], targets: Sequence[dict]) -> list[dict]:
  return [{"id": t["id"], "language": language, "source": s, "target": t} for s, t in zip(sources, targets)]


def _by_position(task: str, english: list, english_at: str, translated: list, translated_at: str) -> None:
  if len(english) != len(translated):
    raise errors.DataError(f"{task}: {translated_at} has {len(translated)} records but {english_at} has "
                           f"{len(english)}; record i of one must translate record i of the other")


def _by_id(task: str, english: list, english_at: str, wanted: list, wanted_at: str) -> list[dict]:
  """The English record of each of `wanted`'s questions (same id)."""
  index = {r["id"]: r for r in english}
  unknown = [r["id"] for r in wanted if r["id"] not in index]
  if unknown:
    raise errors.DataError(f"{task}: {len(unknown)} question id(s) of {wanted_at} are not in {english_at}, e.g. "
                           f"{unknown[:5]}; translated questions must keep their original ids")
  return [index[r["id"]] for r in wanted]


def _translated_training(task: str, data, language: str, root: str) -> list[dict]:
  spec, bucket = _spec(task, data), bucket_task(task, data)
  if bucket in ("xnli", "pawsx"):
    return [{"id": t["id"], "language": language, "source": e, "target": t}
            for e, t in translations.english_pairs(bucket, root, language)]
  english, english_at = _english_training(task, data)
  if bucket is not None:  # QA: XTREME's translated SQuAD / TyDiQA, by question id
    if data.benchmark.name == "xtreme":
      translated = data.read(bucket, language, "translate_train")
      where = data.location(bucket, language, "translate_train")
    else:
      translated = translations.read(bucket, root, language, "translate_train")
      where = translations.translation_path(bucket, root, language, "translate_train")
    return _pairs(language, _by_id(task, english, english_at, translated, where), translated)
  path = user_path(task, data, root, language, "train")
  if not fs.isfile(path):
    raise _user_missing(task, path, f"translation of the English training file {english_at} into {language}",
                        language, "train")
  translated = _PARSERS[data.benchmark.name](task, path, language, "train")
  _by_position(task, english, english_at, translated, path)
  translated = [{**t, "id": f"{task}-{language}-filter_train-{i}"} for i, t in enumerate(translated)]
  if spec.kind != "tagging":  # both sides of a classification pair share the English label
    translated = [{**t, "label": e.get("label")} for e, t in zip(english, translated)]
  return _pairs(language, english, translated)


def training_pairs(task: str, data, languages: Sequence[str], translations_dir: Optional[str] = None) -> list[dict]:
  """FILTER's training pairs of `task` for each of `languages`, in that order (module docstring)."""
  out = []
  for language in languages:
    if language == "en":
      english, _ = _english_training(task, data)
      out += _pairs("en", english, english)
    else:
      out += _translated_training(task, data, language, _need_root(task, data, translations_dir))
  return out


def _translate_test(task: str, data, language: str, split: str, root: Optional[str]):
  """(records, where) of `language`'s `split` translated into English, or None when there is no such file."""
  spec = _spec(task, data)
  if data.benchmark.name == "xtreme" and split == "test" and spec.translate_test \
      and data.available(task, language, "translate_test"):
    return data.read(task, language, "translate_test"), data.location(task, language, "translate_test")
  if root is not None:
    path = user_path(task, data, root, language, split)
    if fs.isfile(path):
      return _PARSERS[data.benchmark.name](task, path, language, split), path
  return None


def _parallel(task: str, data, split: str):
  if task in PARALLEL[data.benchmark.name] and data.available(task, "en", split):
    return data.read(task, "en", split), data.location(task, "en", split)
  return None


def inference_pairs(task: str, data, language: str, split: str, english: str = "translate_test",
                    translations_dir: Optional[str] = None) -> list[dict]:
  """One pair per record of (task, language, split), in order, with its English side (module docstring)."""
  if english not in ENGLISH_SOURCES:
    raise errors.ConfigError(f"FILTER english = {english!r}; expected one of {ENGLISH_SOURCES}")
  targets = data.read(task, language, split)
  if language == "en":
    return _pairs(language, targets, targets)
  root, spec = _root(data, translations_dir), _spec(task, data)
  found = None
  for source in ((_translate_test, _parallel) if english == "translate_test" else (_parallel, _translate_test)):
    found = source(task, data, language, split, root) if source is _translate_test else source(task, data, split)
    if found is not None:
      break
  if found is None:
    if spec.kind == "tagging":
      return _pairs(language, targets, targets)
    where = user_path(task, data, root or "<translations_dir>", language, split)
    raise _user_missing(task, where, f"English translation of {data.location(task, language, split)}", language,
                        split)
  records, where = found
  target_at = data.location(task, language, split)
  if spec.kind == "span_qa":
    return _pairs(language, _by_id(task, records, where, targets, target_at), targets)
  _by_position(task, records, where, targets, target_at)
  return _pairs(language, records, targets)


def left_out(task: str, data, languages: Sequence[str], translations_dir: Optional[str] = None) -> list[str]:
  """The languages of `languages` without training pairs, logged in one line with the file the first would
  be read from."""
  out = [lg for lg in languages if lg != "en" and not has_training_pairs(task, data, lg, translations_dir)]
  if out:
    root = _root(data, translations_dir)
    where = (training_path(task, data, out[0], root) if root else None) or "no file of XTREME's translations"
    logging.warning("FILTER %s: no training pairs for %s (expected e.g. %s); they are not trained on", task,
                    " ".join(out), where)
  return out
