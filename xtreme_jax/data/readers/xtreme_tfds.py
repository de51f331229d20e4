"""XTREME tasks read through TensorFlow Datasets builders instead of the official files.

`read(task, data_dir, language, split)` has the signature and the return schema of
`xtreme_readers.read` (see that module for the schemas), so one can be swapped for the
other; here `data_dir` is the TFDS data dir (None = the TFDS default,
`$TFDS_DATA_DIR` or `~/tensorflow_datasets`). `read_translation(task, data_dir,
language, kind, official_data_dir=None)` mirrors `xtreme_translations.read` for the
translations TFDS ships.
Task / language / split names and their validation are the official ones
(`xtreme_readers.TASKS`); `TABLE` below maps each (task, split) to a TFDS builder,
config, split and conversion function, and `source(task, language, split)` resolves
one entry.

Nothing is ever downloaded: datasets are opened with `tfds.load(..., download=False)`
and a dataset that has not been prepared under `data_dir` raises
`errors.MissingInputError` (a FileNotFoundError) naming the builder and how to prepare
it (`tfds build NAME/CONFIG --data_dir DIR`, or `tfds.builder("NAME/CONFIG",
data_dir=DIR).download_and_prepare()`, on a machine with internet, then copy the data
dir over). Reading a prepared dataset needs only tensorflow-datasets (imported lazily,
so this module imports without TensorFlow). Preparing one (tensorflow-datasets 4.9.x)
needs more, listed by the `tfds-build` extra of xtreme-jax: `importlib_resources`
(every builder on Python >= 3.9: TFDS imports it but declares it for Python < 3.9
only), `apache-beam` (the `tfds` command line imports it, whatever it builds) and
`conllu` (xtreme_pos, universal_dependencies). The Beam datasets of the pretraining
tasks need `apache-beam[gcp]` (wiki40b reads gs://tfds-data) and also `gcld3`
(c4/multilingual, in practice built on Dataflow).

TFDS calls run inside `quiet_tfds`: TFDS's routine log lines (and its warning for
every probe of an unprepared dataset), progress bars and deprecation warnings are
silenced; its other warnings pass.

Mapping (official split -> TFDS builder/config : TFDS split):

* xnli: train -> `multi_nli:train` (English MultiNLI); dev / test -> `xnli:validation` /
  `xnli:test`, taking the requested language from the Translation (premise) and
  TranslationVariableLanguages (hypothesis) features.
* pawsx: train (en) / dev / test -> `paws_x_wiki/{lg}:train` / `:validation` / `:test`.
* panx: `wikiann/{lg}:train` / `:validation` / `:test`.
* udpos: `xtreme_pos/xtreme_pos_{cfg}:train` / `:dev` / `:test` (see the Tamil/Tagalog note).
* squad: `squad/v1.1:train` / `:validation`; xquad: test -> `xquad/{lg}:test`;
  mlqa: dev / test -> `mlqa/{lg}:validation` / `:test`.
* tydiqa: train -> `tydi_qa/goldp:train` filtered to the questions whose id starts
  with the language's name (`arabic-...`), as the official preprocessing splits it;
  test -> `tydi_qa/goldp:validation-{lg}` (the per-language GoldP dev files).
* bucc2018: dev / test -> `bucc/bucc_{lg}:validation` / `:test` (see BUCC below).
* tatoeba: test -> `tatoeba/tatoeba_{lg}:train` (the builder's only split).

Translations (`read_translation`): translate_train: xnli -> `xtreme_xnli:train`, pawsx ->
`xtreme_pawsx/{lg}:train`, xquad and mlqa -> `xquad/{lg}:translate-train` (SQuAD train
translated; the same data for squad, xquad and mlqa), tydiqa ->
`tydi_qa/goldp:translate-train-{lg}`; translate_dev (SQuAD dev translated): squad,
xquad, mlqa -> `xquad/{lg}:translate-dev`; translate_test: xquad ->
`xquad/{lg}:translate-test`. TFDS has no translate_test data for xnli, pawsx or mlqa
and no pseudo_test data: asking for it raises an error pointing to
`xtreme_translations`. (`paws_x_wiki/{lg}:train` for lg != en is PAWS-X's own
machine-translated train set, a different translation than `xtreme_pawsx`.)

Where the TFDS data differs from the official layout (read from the builders' code
in tensorflow-datasets 4.9.x; not checked against the prepared data, which cannot be
fetched here):

* Order and ids. Every one of these builders shuffles examples by a hash of its key
  when the dataset is prepared, so records come in a fixed but different order than
  the official files. Pair and tagging ids are `f"{task}-{lg}-{split}-{i}"` with `i`
  the TFDS position, so they do NOT name the same example as the official reader's ids
  (for xnli dev/test, position `i` is the same pair in every language, as in the
  official per-language files). QA ids are the stored question ids.
* Gold labels on test sets. TFDS keeps the gold labels / tags / answers the official
  layout strips: xnli test has labels, panx test has tags, xquad test has its answer
  texts (the official `xquad.{lg}.json` has `text: ''`). They are returned, not hidden;
  drop them yourself for a blind setting.
* QA duplicate ids. TFDS merges all questions sharing an id into one example (answers
  concatenated, context of the first), where the official reader keeps each with a
  `-dupN` suffix; so `id == orig_id` here. This matters for the translated SQuAD data,
  whose answers XTREME stores flattened into one question per answer. A merged
  example keeps only the answers found in its (first) context (`own_answers`): an
  answer of another paragraph never brings its offset along. TyDiQA train ids are the
  full GoldP ids (`arabic-<n>-<k>`) and keep their article titles, where the official
  per-language train files keep only the last `-` part of the id and no title; the
  language is read from the id prefix (the builder has no language feature), and ids
  without a known prefix, or a language without questions, are refused.
* Checks as on the official route: QA training sets (squad / tydiqa train,
  translate_train) go through `xtreme_readers.check_training_answers`; XQuAD
  translate_test ids must be those of the test set (`read_translation`).
* BUCC. The `bucc` builder yields only the gold sentence pairs (each with its ids),
  not the full monolingual corpora in which BUCC mines those pairs among many
  non-parallel sentences. Mining over gold sentences only is a different, much easier
  task, so `read("bucc2018", ...)` raises unless called with `bucc_gold_only=True`;
  then `source` / `target` hold just the sentences of the gold pairs (unique, sorted by
  id) and `gold` the pairs. Unlike the official layout, the test split has gold (TFDS
  test = the BUCC 2018 "training" release, which the official download renames to
  test after deleting its gold file; validation = the "sample" release = official dev).
* Tatoeba. TFDS keeps the raw LASER alignment: `source[i]` translates `target[i]`
  (the official released English side is sorted, hiding the gold). Trailing line ends,
  which the builder stores, are removed.
* udpos. TFDS's `xtreme_pos` swaps Tamil and Tagalog (config `xtreme_pos_ta` reads the
  UD Tagalog treebank and `xtreme_pos_tl` UD Tamil); the table maps by treebank
  language name, so `udpos`/`ta` reads Tamil. The builder keeps every CoNLL-U word
  whose form and UPOS are not `_`: multiword-token range lines (UPOS `_`) are dropped,
  so the syntactic words are kept (e.g. French `de` `le`, not `du`). It selects
  treebanks with the glob `*_{LanguageName}*`, which also picks up folders such as
  UD_Ancient_Greek, UD_Old_French, UD_Old_Russian, UD_Classical_Chinese and mixed ones
  (UD_Hindi_English, UD_Turkish_German, UD_Swiss_German) where they exist in UD 2.5,
  and it skips UD_Arabic-NYUAD; the official download selects files by their ISO code
  prefix. Token and sentence counts can therefore differ.
* panx. Tokens are cut at the first `:` (as the official preprocessing does) but not
  whitespace-stripped.
* pawsx. `paws_x_wiki` parses the TSVs with Python's csv module and its default `"`
  quoting, so quote-wrapped fields lose their wrapping quotes (the official files keep
  the csv-writer quoting literally), and rows whose label is not 0/1 are dropped.
  Labels are returned as the official strings "0" / "1".
* xnli train comes from MultiNLI 1.0 itself (sentence1 / sentence2, examples without a
  gold label skipped); the official `train-en.tsv` comes from XNLI-MT's
  `multinli.train.en.tsv`: the same pairs, text normalisation not verified.
  `xtreme_xnli` keys its examples by the English (premise, hypothesis) pair, so
  repeated English pairs collapse into one translated example.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from typing import Any, Callable, Iterable, NamedTuple, Optional

import numpy as np

from xtreme_jax import errors, text
from xtreme_jax.data.readers import xtreme_readers as xr
from xtreme_jax.data.translation import xtreme_translations
from xtreme_jax.registry import XTREME
from xtreme_jax.registry.xtreme import UPOS_TAGS

QA_TASKS = tuple(name for name, spec in XTREME.specs.items() if spec.kind == "span_qa")  # squad included
# ClassLabel names of the TFDS features (index -> name).
XNLI_TFDS_LABELS = ("entailment", "neutral", "contradiction")  # xnli, multi_nli, xtreme_xnli
PAWSX_TFDS_LABELS = ("different_meaning", "paraphrase")  # paws_x_wiki, xtreme_pawsx -> "0", "1"
WIKIANN_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
UPOS_TFDS_LABELS = (*UPOS_TAGS, "_")  # xtreme_pos's ClassLabel: the 17 UD tags, then "_"
TYDIQA_LANGUAGE_NAMES = {"ar": "arabic", "bn": "bengali", "en": "english", "fi": "finnish",
                         "id": "indonesian", "ko": "korean", "ru": "russian", "sw": "swahili",
                         "te": "telugu"}
# UD treebank language name of each udpos language (to find the xtreme_pos config).
UDPOS_LANGUAGE_NAMES = {
    "af": "Afrikaans", "ar": "Arabic", "bg": "Bulgarian", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fr": "French",
    "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "kk": "Kazakh", "ko": "Korean", "mr": "Marathi", "nl": "Dutch", "pt": "Portuguese", "ru": "Russian",
    "ta": "Tamil", "te": "Telugu", "th": "Thai", "tl": "Tagalog", "tr": "Turkish", "ur": "Urdu",
    "vi": "Vietnamese", "yo": "Yoruba", "zh": "Chinese"}


class TfdsSource(NamedTuple):
  """One resolved table entry: `tfds.load(name, split=split)` then `convert(examples, ...)`."""
  name: str  # builder or builder/config
  split: str  # TFDS split name
  convert: Callable[..., Any]  # (numpy examples, task, language, split) -> records


# ----------------------------------------------------------------------------- per-example conversions


def _s(x) -> str:
  """TFDS string value (bytes / np.bytes_ / str) -> str."""
  if isinstance(x, (bytes, np.bytes_)):
    return bytes(x).decode("utf-8")
  return str(x)


def _label(value, names: tuple, what: str) -> str:
  i = int(value)
  if not 0 <= i < len(names):
    raise errors.DataError(f"{what}: class index {i} out of range for labels {', '.join(names)}")
  return names[i]


def translation_text(feature, language: str) -> str:
  """Text of `language` from a decoded Translation or TranslationVariableLanguages value.

  Translation -> `{lang: text}`; TranslationVariableLanguages -> `{"language": [...],
  "translation": [...]}` (parallel arrays, first match taken).
  """
  if "language" in feature and "translation" in feature and language not in feature:
    langs = [_s(x) for x in feature["language"]]
    if language not in langs:
      raise KeyError(f"no {language!r} text in this example (it has {' '.join(sorted(set(langs)))})")
    return _s(feature["translation"][langs.index(language)])
  if language not in feature:
    raise KeyError(f"no {language!r} text in this example (it has {' '.join(sorted(feature))})")
  return _s(feature[language])


def xnli_pair(example: dict, language: str) -> tuple[str, str, str]:
  """(premise, hypothesis, label name) of one `xnli` / `xtreme_xnli` example in `language`."""
  return (translation_text(example["premise"], language), translation_text(example["hypothesis"], language),
          _label(example["label"], XNLI_TFDS_LABELS, "xnli label"))


def mnli_pair(example: dict) -> tuple[str, str, str]:
  """(premise, hypothesis, label name) of one `multi_nli` example."""
  return (_s(example["premise"]), _s(example["hypothesis"]),
          _label(example["label"], XNLI_TFDS_LABELS, "multi_nli label"))


def pawsx_pair(example: dict) -> tuple[str, str, str]:
  """(sentence1, sentence2, "0" | "1") of one `paws_x_wiki` / `xtreme_pawsx` example."""
  _label(example["label"], PAWSX_TFDS_LABELS, "pawsx label")
  return _s(example["sentence1"]), _s(example["sentence2"]), str(int(example["label"]))


def _tagged(example: dict, tag_key: str, names: tuple, what: str) -> tuple[list, list]:
  tokens = [_s(t) for t in example["tokens"]]
  tags = [_label(t, names, what) for t in example[tag_key]]
  if len(tokens) != len(tags):
    raise errors.DataError(f"{what}: {len(tokens)} tokens but {len(tags)} tags in one example")
  return tokens, tags


def wikiann_sentence(example: dict) -> tuple[list, list]:
  """(tokens, IOB2 tag names) of one `wikiann` example."""
  return _tagged(example, "tags", WIKIANN_TAGS, "wikiann tags")


def xtreme_pos_sentence(example: dict) -> tuple[list, list]:
  """(tokens, UPOS names) of one `xtreme_pos` example."""
  return _tagged(example, "upos", UPOS_TFDS_LABELS, "xtreme_pos upos")


def own_answers(context: str, texts: list[str], starts: list[int]) -> tuple[list[str], list[int]]:
  """The answers that are in `context`: each at its `answer_start`, else at its nearest occurrence.

  TFDS merges the questions that share an id across paragraphs into one example with
  the first paragraph's context and the answers of all, so an answer whose text is not
  in that context comes from another paragraph: it is dropped, and no answer keeps an
  offset into another paragraph. Empty (stripped) answers are kept. If no answer is in
  the context, they are all returned as given (the data itself is broken; training
  counts such questions, `xtreme_readers.check_training_answers`).
  """
  own = [(t, s if not t else text.locate_answer(context, t, s)) for t, s in zip(texts, starts)]
  own = [(t, s) for t, s in own if s is not None]
  if not own:
    return texts, starts
  return [t for t, _ in own], [s for _, s in own]


def squad_record(example: dict) -> dict:
  """One SQuAD-like TFDS example (squad, xquad, mlqa, tydi_qa) -> a `xtreme_readers` QA record
  with the answers of its own context (`own_answers`)."""
  answers = example["answers"]
  texts = [_s(t) for t in answers["text"]]
  starts = [int(a) for a in answers["answer_start"]]
  qid = _s(example["id"])
  if len(texts) != len(starts):
    raise errors.DataError(f"QA example {qid}: {len(texts)} answer texts but {len(starts)} starts")
  context = _s(example["context"])
  texts, starts = own_answers(context, texts, starts)
  return {"id": qid, "orig_id": qid, "title": _s(example["title"]), "context": context,
          "question": _s(example["question"]), "answers": {"text": texts, "answer_start": starts}}


def tydiqa_language(question_id: str) -> Optional[str]:
  """Language code of a TyDiQA-GoldP question id (`arabic-1234-0` -> `ar`), None if unknown."""
  name = question_id.split("-", 1)[0]
  return {v: k for k, v in TYDIQA_LANGUAGE_NAMES.items()}.get(name)


def _strip_line_end(text: str) -> str:
  text = text[:-1] if text.endswith("\n") else text
  return text[:-1] if text.endswith("\r") else text


# ----------------------------------------------------------------------------- list conversions


def _pairs(fn: Callable) -> Callable:
  def convert(examples: Iterable[dict], task: str, language: str, split: str) -> list[dict]:
    out = []
    for i, ex in enumerate(examples):
      a, b, label = fn(ex)
      out.append({"id": f"{task}-{language}-{split}-{i}", "text_a": a, "text_b": b, "label": label})
    return out
  return convert


def convert_xnli(examples, task, language, split):
  return _pairs(lambda ex: xnli_pair(ex, language))(examples, task, language, split)


convert_mnli = _pairs(mnli_pair)
convert_pawsx = _pairs(pawsx_pair)


def _tagging(fn: Callable) -> Callable:
  def convert(examples: Iterable[dict], task: str, language: str, split: str) -> list[dict]:
    out = []
    for i, ex in enumerate(examples):
      tokens, tags = fn(ex)
      out.append({"id": f"{task}-{language}-{split}-{i}", "tokens": tokens, "tags": tags})
    return out
  return convert


convert_wikiann = _tagging(wikiann_sentence)
convert_xtreme_pos = _tagging(xtreme_pos_sentence)


def _squad_records(examples, what: str) -> list[dict]:
  """QA records; answers from other paragraphs (`own_answers`) are counted in one log line."""
  out, dropped = [], 0
  for ex in examples:
    out.append(squad_record(ex))
    dropped += len(ex["answers"]["text"]) - len(out[-1]["answers"]["text"])
  if dropped:
    logging.info("%s: dropped %d answers not in their question's context (TFDS merges the questions that share "
                 "an id across paragraphs, keeping the first paragraph's context)", what, dropped)
  return out


def convert_squad(examples, task, language, split):
  return _squad_records(examples, f"{task} {language} {split}")


def convert_tydiqa_train(examples, task, language, split):
  """The combined GoldP train set restricted to `language` by question-id prefix (`arabic-...`).

  The builder has no language feature, so an id without a known prefix cannot be
  routed: it is refused, as is a language without questions (never 0 examples silently).
  """
  name, tfds_split, _ = TABLE["tydiqa"]["train"]
  records = _squad_records(examples, f"{task} {language} {split}")
  unknown = [r["id"] for r in records if tydiqa_language(r["id"]) is None]
  if unknown:
    raise errors.DataError(
        f"tfds:{name}:{tfds_split}: {len(unknown)} of {len(records)} question ids carry no TyDiQA language "
        f"prefix (e.g. {unknown[:3]}) and the builder has no language feature, so their language is unknown; "
        f"expected ids like 'finnish-<n>-<k>' with a prefix in {sorted(TYDIQA_LANGUAGE_NAMES.values())}. Use "
        f"the official layout (per-language train files) instead")
  mine = [r for r in records if tydiqa_language(r["id"]) == language]
  if not mine:
    raise errors.DataError(f"tfds:{name}:{tfds_split} holds no {TYDIQA_LANGUAGE_NAMES[language]} question (no id "
                           f"starts with '{TYDIQA_LANGUAGE_NAMES[language]}-') among its {len(records)}")
  return mine


def convert_bucc(examples, task, language, split) -> dict:
  """Gold-pair examples -> `{"source", "target", "gold"}` (sentences unique, sorted by id)."""
  src, tgt, gold = {}, {}, []
  for ex in examples:
    sid, tid = _s(ex["source_id"]), _s(ex["target_id"])
    src.setdefault(sid, _s(ex["source_sentence"]))
    tgt.setdefault(tid, _s(ex["target_sentence"]))
    gold.append((sid, tid))
  return {"source": sorted(src.items()), "target": sorted(tgt.items()), "gold": sorted(gold)}


def convert_tatoeba(examples, task, language, split) -> dict:
  """Aligned pairs -> `{"source", "target"}`, line ends removed; `source[i]` translates `target[i]`."""
  src, tgt = [], []
  for ex in examples:
    src.append(_strip_line_end(_s(ex["source_sentence"])))
    tgt.append(_strip_line_end(_s(ex["target_sentence"])))
  return {"source": src, "target": tgt}


# ----------------------------------------------------------------------------- the table


def xtreme_pos_config(language: str) -> str:
  """`xtreme_pos` config holding the UD treebanks of `language`.

  The builder maps config `ta` to Tagalog and `tl` to Tamil (swapped); the config is
  found by treebank language name from the builder's own table when importable.
  """
  want = UDPOS_LANGUAGE_NAMES[language]
  try:
    from tensorflow_datasets.datasets.xtreme_pos import xtreme_pos_dataset_builder as m
    names = dict(m._LANGS)  # pylint: disable=protected-access
  except (ImportError, AttributeError):
    names = {}
  for code, name in names.items():
    if name == want:
      return f"xtreme_pos_{code}"
  return f"xtreme_pos_{language}"


# task -> official split -> (TFDS name template, TFDS split template, conversion).
# Templates take {lg} (language), {pos} (xtreme_pos config).
TABLE: dict[str, dict[str, tuple[str, str, Callable]]] = {
    "xnli": {"train": ("multi_nli", "train", convert_mnli),
             "dev": ("xnli", "validation", convert_xnli),
             "test": ("xnli", "test", convert_xnli)},
    "pawsx": {"train": ("paws_x_wiki/{lg}", "train", convert_pawsx),
              "dev": ("paws_x_wiki/{lg}", "validation", convert_pawsx),
              "test": ("paws_x_wiki/{lg}", "test", convert_pawsx)},
    "panx": {"train": ("wikiann/{lg}", "train", convert_wikiann),
             "dev": ("wikiann/{lg}", "validation", convert_wikiann),
             "test": ("wikiann/{lg}", "test", convert_wikiann)},
    "udpos": {"train": ("xtreme_pos/{pos}", "train", convert_xtreme_pos),
              "dev": ("xtreme_pos/{pos}", "dev", convert_xtreme_pos),
              "test": ("xtreme_pos/{pos}", "test", convert_xtreme_pos)},
    "xquad": {"test": ("xquad/{lg}", "test", convert_squad)},
    "mlqa": {"dev": ("mlqa/{lg}", "validation", convert_squad),
             "test": ("mlqa/{lg}", "test", convert_squad)},
    "tydiqa": {"train": ("tydi_qa/goldp", "train", convert_tydiqa_train),
               "test": ("tydi_qa/goldp", "validation-{lg}", convert_squad)},
    "squad": {"train": ("squad/v1.1", "train", convert_squad),
              "dev": ("squad/v1.1", "validation", convert_squad)},
    "bucc2018": {"dev": ("bucc/bucc_{lg}", "validation", convert_bucc),
                 "test": ("bucc/bucc_{lg}", "test", convert_bucc)},
    "tatoeba": {"test": ("tatoeba/tatoeba_{lg}", "train", convert_tatoeba)},
}

# (task, kind) -> (languages, TFDS name template, TFDS split template, conversion).
# Kinds and languages as in `xtreme_translations` (which reads the same files from disk).
TRANSLATION_KINDS = ("translate_train", "translate_dev", "translate_test", "pseudo_test")
_NOT_EN = {task: tuple(lg for lg in langs if lg != "en") for task, langs in
           {"xnli": xr.XNLI_LANGS, "pawsx": xr.PAWSX_LANGS, "xquad": xr.XQUAD_LANGS, "mlqa": xr.MLQA_LANGS,
            "tydiqa": xr.TYDIQA_LANGS}.items()}
_NOT_EN["squad"] = _NOT_EN["xquad"]
TRANSLATIONS: dict[tuple[str, str], tuple[tuple, str, str, Callable]] = {
    ("xnli", "translate_train"): (_NOT_EN["xnli"], "xtreme_xnli", "train", convert_xnli),
    ("pawsx", "translate_train"): (_NOT_EN["pawsx"], "xtreme_pawsx/{lg}", "train", convert_pawsx),
    ("squad", "translate_train"): (_NOT_EN["squad"], "xquad/{lg}", "translate-train", convert_squad),
    ("xquad", "translate_train"): (_NOT_EN["xquad"], "xquad/{lg}", "translate-train", convert_squad),
    ("mlqa", "translate_train"): (_NOT_EN["mlqa"], "xquad/{lg}", "translate-train", convert_squad),
    ("tydiqa", "translate_train"): (_NOT_EN["tydiqa"], "tydi_qa/goldp", "translate-train-{lg}", convert_squad),
    ("squad", "translate_dev"): (_NOT_EN["squad"], "xquad/{lg}", "translate-dev", convert_squad),
    ("xquad", "translate_dev"): (_NOT_EN["xquad"], "xquad/{lg}", "translate-dev", convert_squad),
    ("mlqa", "translate_dev"): (_NOT_EN["mlqa"], "xquad/{lg}", "translate-dev", convert_squad),
    ("xquad", "translate_test"): (_NOT_EN["xquad"], "xquad/{lg}", "translate-test", convert_squad),
}
# Translations `xtreme_translations` reads from disk that no TFDS builder ships.
TRANSLATIONS_NOT_IN_TFDS = {("xnli", "translate_test"), ("pawsx", "translate_test"),
                            ("mlqa", "translate_test"), ("xnli", "pseudo_test"), ("xquad", "pseudo_test")}


def source(task: str, language: str, split: str) -> TfdsSource:
  """The TFDS builder/config, split and conversion for one official (task, language, split)."""
  if task not in TABLE:
    raise errors.ConfigError(f"unknown XTREME task {task!r}; valid tasks: {', '.join(sorted(TABLE))}")
  xr.check_split(task, language, split)
  name, tfds_split, convert = TABLE[task][split]
  fields = {"lg": language, "pos": xtreme_pos_config(language) if task == "udpos" else ""}
  return TfdsSource(name.format(**fields), tfds_split.format(**fields), convert)


# TFDS log messages (format strings, matched from their start) that need no action here:
# `is_prepared` probing a dataset that is not prepared (`XtremeData.available` then says
# False, `read` raises naming the `tfds build` command), and TFDS's notices about its own
# use of deprecated fields.
HARMLESS_TFDS_LOGS = (r"Variant folder %s has no %s", r"`\w+\.dtype` is deprecated")
# Modules whose deprecation warnings are TFDS's / TF's own business, not the user's.
_TFDS_MODULES = r"(tensorflow_datasets|tensorflow|tf_keras|keras|etils)(\.|$)"
_QUIET_LOGGERS = ("absl", "tensorflow")  # TFDS logs through absl; TF's deprecation notices through "tensorflow"


class _TfdsNoise(logging.Filter):
  """Drops TFDS's routine log records (below WARNING, or in `HARMLESS_TFDS_LOGS`) and
  TF's deprecation notices (about calls inside TFDS); everything else passes."""

  def filter(self, record: logging.LogRecord) -> bool:
    path = record.pathname.replace(os.sep, "/")
    if "/tensorflow/python/util/deprecation" in path or any(re.match(p, str(record.msg)) for p in HARMLESS_TFDS_LOGS):
      return False  # (by message: absl names itself as the caller when its logger was made before absl was imported)
    return "/tensorflow_datasets/" not in path or record.levelno >= logging.WARNING


@contextlib.contextmanager
def quiet_tfds():
  """TFDS calls without its routine log lines, progress bars and deprecation warnings.

  Actionable messages still pass: TFDS warnings other than `HARMLESS_TFDS_LOGS` (e.g.
  a dataset found only in another version), errors, and every exception. Everything
  is restored on exit.
  """
  import tensorflow_datasets as tfds  # heavy: imported on use only (and before the "absl" logger is used)
  from tensorflow_datasets.core.utils import tqdm_utils
  loggers, noise = [logging.getLogger(name) for name in _QUIET_LOGGERS], _TfdsNoise()
  bars = getattr(tqdm_utils, "_active", True)
  for logger in loggers:
    logger.addFilter(noise)
  tfds.display_progress_bar(False)
  try:
    with warnings.catch_warnings():
      for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=_TFDS_MODULES)
      yield
  finally:
    tfds.display_progress_bar(bars)
    for logger in loggers:
      logger.removeFilter(noise)


def _load(name: str, split: str, data_dir: Optional[str]):
  """Numpy examples of a prepared TFDS dataset; never downloads. Call inside `quiet_tfds`."""
  import tensorflow_datasets as tfds  # heavy: imported on use only
  try:
    ds = tfds.load(name, split=split, data_dir=data_dir, download=False, shuffle_files=False, try_gcs=False)
  except AssertionError as e:  # what tfds raises for a dataset that was never prepared
    if "could not find data" not in str(e):
      raise
    builder, _, config = name.partition("/")
    where = data_dir or "the default TFDS data dir ($TFDS_DATA_DIR or ~/tensorflow_datasets)"
    dd = f" --data_dir {data_dir}" if data_dir else ""
    dd_kw = f", data_dir={data_dir!r}" if data_dir else ""
    raise errors.MissingInputError(
        f"TFDS dataset {name!r} (builder {builder!r}" + (f", config {config!r}" if config else "") +
        f") is not prepared in {where}; nothing is downloaded here. On a machine with internet run "
        f"`tfds build {name}{dd}` (or `tfds.builder({name!r}{dd_kw}).download_and_prepare()` in Python; "
        f"`pip install 'xtreme-jax[tfds-build]'` first) and copy the resulting data dir here.") from None
  return tfds.as_numpy(ds)


def read(task: str, data_dir: Optional[str], language: str, split: str, *, bucc_gold_only: bool = False):
  """Read one official (task, language, split) from TFDS; schemas as `xtreme_readers.read`.

  `bucc_gold_only=True` is required for bucc2018, whose TFDS builder holds only the gold
  pairs (see the module docstring).
  """
  src = source(task, language, split)
  if task == "bucc2018" and not bucc_gold_only:
    raise errors.ConfigError(
        f"TFDS has no equivalent of the bucc2018 {split} corpora: the `bucc` builder ({src.name}:{src.split}) "
        f"holds only the gold-aligned sentence pairs, not the full {language}/en corpora BUCC mines from, so "
        f"scores on it are not BUCC scores. Use the official layout (xtreme_readers) for bucc2018, or pass "
        f"bucc_gold_only=True to get the gold sentences and pairs anyway.")
  with quiet_tfds():
    records = src.convert(_load(src.name, src.split, data_dir), task, language, split)
  if split == "train" and task in QA_TASKS:
    where = f"tfds:{src.name}:{src.split}" + (f" ({language} questions)" if task == "tydiqa" else "")
    return xr.check_training_answers(records, where)
  return records


def translation_source(task: str, language: str, kind: str) -> TfdsSource:
  """The TFDS builder/config, split and conversion of one translated set."""
  if kind not in TRANSLATION_KINDS:
    raise errors.ConfigError(f"unknown translation kind {kind!r}; valid kinds: {', '.join(TRANSLATION_KINDS)}")
  if (task, kind) in TRANSLATIONS_NOT_IN_TFDS:
    raise errors.ConfigError(f"TFDS has no {kind} data for {task} (no builder ships it); read it from disk with "
                     f"xtreme_jax.data.translation.xtreme_translations.read instead")
  if (task, kind) not in TRANSLATIONS:
    have = sorted({t for t, k in TRANSLATIONS if k == kind})
    raise errors.ConfigError(f"no TFDS {kind} data for task {task!r}; tasks with {kind} in TFDS: "
                             f"{', '.join(have) or 'none'}")
  langs, name, split, convert = TRANSLATIONS[(task, kind)]
  if language not in langs:
    raise errors.ConfigError(f"unknown language {language!r} for {task} {kind}; valid languages: {' '.join(langs)}")
  return TfdsSource(name.format(lg=language), split.format(lg=language), convert)


def read_translation(task: str, data_dir: Optional[str], language: str, kind: str,
                     official_data_dir: Optional[str] = None) -> list[dict]:
  """Translated data from TFDS, in the schema `xtreme_readers.read` gives the task's train split
  (translate_train, translate_dev) or test split (translate_test).

  Mirrors `xtreme_translations.read(task, translations_dir, language, kind, data_dir)`:
  translate_train / translate_dev hold English SQuAD / MNLI / PAWS / TyDiQA training
  data machine-translated into `language` (pair ids `f"{task}-{lg}-{kind}-{i}"`, QA
  records keep their question ids); translate_test holds `language`'s test set
  machine-translated into English, with the original question ids, which are checked
  (`xtreme_translations.check_translate_test_ids`) against the original test set: the
  official test file under `official_data_dir` (the official `download/` root) when
  given, else the TFDS test split (`read(task, data_dir, language, "test")`).
  Translated QA training sets are checked as the official ones
  (`xtreme_readers.check_training_answers`).
  """
  src = translation_source(task, language, kind)
  where = f"tfds:{src.name}:{src.split}"
  with quiet_tfds():
    records = src.convert(_load(src.name, src.split, data_dir), task, language, kind)
  if kind == "translate_train" and task in QA_TASKS:
    return xr.check_training_answers(records, where)
  if kind != "translate_test":
    return records
  if official_data_dir is not None:
    original = xr.read(task, official_data_dir, language, "test")
    original_where = xr.file_path(task, official_data_dir, language, "test")
  else:
    test = source(task, language, "test")
    original, original_where = read(task, data_dir, language, "test"), f"tfds:{test.name}:{test.split}"
  return xtreme_translations.check_translate_test_ids(task, language, records, where, original, original_where)
