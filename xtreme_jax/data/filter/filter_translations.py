"""Writes the translation files FILTER's pairs read from the user's layout (`filter_pairs.user_path`).

`write_translation(task, data, language, split, translate)` translates the
text fields of one file and writes them in the task's own format, where
`filter_pairs` reads them: split `train` the English training file into
`language` (`{TASK}/translate-train/en-{lg}.tsv`), `dev` / `test` the
`language` file into English (`{TASK}/translate-test/{split}-{lg}-en.tsv`,
`.json` for QA; XNLI / PAWS-X training pairs: XTREME's translate-train file,
both sides in one row). `translate` maps a list of texts to their translations, in
order: a model of `runs/translate.py` (`translate.translate_task`) or any
MT system wrapped as a function.

What is translated, and how it is written back:

* pair classification / ranking rows: `text_a` and `text_b`, written as the
  task's columns (XGLUE: padded to the task's text columns; PAWS-X with its
  header and id column); a training row keeps its English label.
* tagging: the sentence (tokens joined by spaces), written one token per
  line (the translation split on whitespace), no tags; a translation that
  comes back empty keeps the original tokens (counted in a warning), so the
  sentences stay aligned.
* span QA: each context (once) and each question, written as SQuAD v1.1
  JSON with the original question ids and no answers (inference only: the
  QA training pairs are XTREME's translations).
"""

from __future__ import annotations

import json
import logging
from typing import Callable, Sequence

from xtreme_jax import atomic, errors, fs
from xtreme_jax.data.filter import filter_pairs
from xtreme_jax.data.readers import xglue_readers

Translate = Callable[[Sequence[str]], Sequence[str]]


def _translated(translate: Translate, texts: list[str]) -> list[str]:
  out = list(translate(texts))
  if len(out) != len(texts):
    raise errors.DataError(f"the translation function returned {len(out)} texts for {len(texts)}")
  return [" ".join(t.split()) for t in out]  # one line each: no tabs or line breaks inside a field


def _rows(task: str, data, records: list[dict], translate: Translate, keep_labels: bool) -> str:
  texts = _translated(translate, [r["text_a"] for r in records] + [r["text_b"] for r in records])
  a, b = texts[:len(records)], texts[len(records):]
  width, with_id = 2, False
  if data.benchmark.name == "xglue":
    width, with_id = xglue_readers.TEXT_COLUMNS[task], task == "PAWSX"  # XGLUE PAWS-X: an id column, a header
  lines = ["id\tsentence1\tsentence2\tlabel\n"] if with_id else []
  for i, (r, x, y) in enumerate(zip(records, a, b)):
    cols = ([str(i)] if with_id else []) + [x, y] + [""] * (width - 2 - with_id)
    if keep_labels and r.get("label") is not None:
      cols.append(r["label"])
    lines.append("\t".join(cols) + "\n")
  return "".join(lines)


def _translate_train_rows(records: list[dict], translate: Translate) -> str:
  """XTREME's translate-train layout: `en_s1, en_s2, translated_s1, translated_s2, label`."""
  texts = _translated(translate, [r["text_a"] for r in records] + [r["text_b"] for r in records])
  english = [(" ".join(r["text_a"].split()), " ".join(r["text_b"].split()), r["label"]) for r in records]
  return "".join(f"{x}\t{y}\t{a}\t{b}\t{label}\n"
                 for (x, y, label), a, b in zip(english, texts[:len(records)], texts[len(records):]))


def _tagging(records: list[dict], translate: Translate, where: str) -> str:
  texts = _translated(translate, [" ".join(r["tokens"]) for r in records])
  empty = [i for i, t in enumerate(texts) if not t]
  if empty:
    logging.warning("%s: %d translation(s) came back empty (e.g. sentence %d); the original tokens are kept",
                    where, len(empty), empty[0])
  sentences = [t.split() or r["tokens"] for r, t in zip(records, texts)]
  return "\n".join("".join(token + "\n" for token in tokens) for tokens in sentences)


def _squad(records: list[dict], translate: Translate) -> str:
  contexts = list(dict.fromkeys(r["context"] for r in records))
  texts = _translated(translate, contexts + [r["question"] for r in records])
  context_of = dict(zip(contexts, texts[:len(contexts)]))
  paragraphs: dict[str, dict] = {}
  for r, question in zip(records, texts[len(contexts):]):
    paragraph = paragraphs.setdefault(r["context"], {"context": context_of[r["context"]], "qas": []})
    paragraph["qas"].append({"id": r.get("orig_id", r["id"]), "question": question, "answers": []})
  return json.dumps({"version": "1.1", "data": [{"title": "", "paragraphs": list(paragraphs.values())}]},
                    ensure_ascii=False)


def write_translation(task: str, data, language: str, split: str, translate: Translate,
                      translations_dir: str | None = None) -> str:
  """Translates (task, language, split) with `translate` into `filter_pairs`' layout; returns the file written
  (atomically; see the module docstring)."""
  root = translations_dir or data.translations_root
  if root is None:
    raise errors.ConfigError("write_translation needs translations_dir: the folder FILTER reads translations from")
  if split == "train":
    if language == "en":
      raise errors.ConfigError(f"{task}: translate-train is from English into another language, not 'en'")
    records = data.read(*data.benchmark.task(task).train)
  else:
    records = data.read(task, language, split)
  kind, bucket = data.benchmark.task(task).kind, filter_pairs.bucket_task(task, data)
  path = filter_pairs.user_path(task, data, root, language, split)
  if split == "train" and bucket is not None:
    if kind == "span_qa":
      raise errors.ConfigError(f"{task}: QA training pairs read XTREME's translate-train files (answers aligned "
                               "by their translators), not a translation written here")
    path, content = filter_pairs.training_path(task, data, language, root), _translate_train_rows(records, translate)
    if path is None:
      raise errors.ConfigError(f"{task}: XTREME's translate-train layout has no language {language!r}")
  elif kind == "tagging":
    content = _tagging(records, translate, path)
  elif kind == "span_qa":
    content = _squad(records, translate)
  elif kind in ("pair_classification", "ranking"):
    content = _rows(task, data, records, translate, keep_labels=split == "train")
  else:
    raise errors.ConfigError(f"{task}: FILTER does not pair {kind} tasks")
  fs.makedirs(fs.dirname(path))
  atomic.write_text(path, content)
  return path
