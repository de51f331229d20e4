"""The bundled hand-written XTREME sample (`sample_data/xtreme`) and its test gold (`sample_data/xtreme_labels`).

The sample plays the role of the official `download/` directory, so every file must load with the
official-layout readers; the labels folder holds the test gold in the leaderboard prediction layout.
"""

import collections
import json
import os

import pytest

from xtreme_jax.data import paths
from xtreme_jax.data.readers import xtreme_readers as xr

TIER = "unit"  # conftest.py: this file's tier

DATA = os.path.join(paths.sample_dir(), "xtreme")
LABELS = os.path.join(paths.sample_dir(), "xtreme_labels")

_SIX = ("en", "de", "ru", "ar", "zh", "hi")
# task -> split -> languages present in the sample
SAMPLE = {
    "xnli": {"train": ("en",), "dev": _SIX, "test": _SIX},
    "pawsx": {"train": ("en",), "dev": ("en", "de", "zh"), "test": ("en", "de", "zh")},
    "panx": {"train": _SIX, "dev": _SIX, "test": _SIX},
    "udpos": {"train": _SIX, "dev": _SIX, "test": _SIX},
    "xquad": {"test": _SIX},
    "mlqa": {"dev": ("en", "de", "ar", "zh", "hi"), "test": ("en", "de", "ar", "zh", "hi")},
    "tydiqa": {"train": ("en", "ru", "ar"), "test": ("en", "ru", "ar")},
    "squad": {"train": ("en",), "dev": ("en",)},
    "bucc2018": {"dev": ("de", "fr", "ru", "zh"), "test": ("de", "fr", "ru", "zh")},
    "tatoeba": {"test": ("de", "ru", "ar", "zh", "hi", "fr")},
}
CASES = [(task, lg, split) for task, splits in SAMPLE.items() for split, lgs in splits.items() for lg in lgs]
NINE = ("xnli", "pawsx", "panx", "udpos", "xquad", "mlqa", "tydiqa", "bucc2018", "tatoeba")
UPOS = set("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
NER = {"O"} | {f"{p}-{t}" for p in "BI" for t in ("LOC", "ORG", "PER")}


def _read(task, lg, split):
  return xr.read(task, DATA, lg, split)


def _parts(task):
  template = xr.PATHS[task]
  return list(template) if isinstance(template, dict) and task in ("bucc2018", "tatoeba") else [None]


def _label_path(task, lg, ext):
  return os.path.join(LABELS, task, f"test-{lg}.{ext}")


def _label_lines(task, lg):
  with open(_label_path(task, lg, "tsv"), encoding="utf-8", newline="") as f:
    text = f.read()
  assert text.endswith("\n") and "\r" not in text
  return text[:-1].split("\n")


def _blocks(lines):
  blocks, cur = [], []
  for line in lines + [""]:
    if line:
      cur.append(line)
    elif cur:
      blocks.append(cur)
      cur = []
  return blocks


# ----------------------------------------------------------------------------- presence


def test_sample_covers_all_nine_tasks_with_three_or_more_languages():
  assert set(NINE) <= set(SAMPLE)
  for task in NINE:
    langs = {lg for lgs in SAMPLE[task].values() for lg in lgs}
    assert len(langs) >= 3, task
    assert langs <= {lg for lgs in xr.TASKS[task].languages.values() for lg in lgs}, task


@pytest.mark.parametrize("task", sorted(SAMPLE))
def test_exactly_the_sample_files_exist(task):
  """Every (language, split) the sample claims is there, and no other language of the task is."""
  for split, langs in xr.TASKS[task].languages.items():
    for lg in langs:
      expected = lg in SAMPLE[task].get(split, ())
      for part in _parts(task):
        if task == "bucc2018" and part == "gold":
          continue  # dev gold is covered by the reader (it is required for dev)
        path = xr.file_path(task, DATA, lg, split, part)
        assert os.path.isfile(path) == expected, (task, lg, split, part, path)


def test_labels_folder_holds_exactly_the_test_languages():
  for task in NINE:
    ext = "json" if task in ("xquad", "mlqa", "tydiqa") else "tsv"
    want = sorted(f"test-{lg}.{ext}" for lg in SAMPLE[task]["test"])
    assert sorted(os.listdir(os.path.join(LABELS, task))) == want, task


# ----------------------------------------------------------------------------- every file loads, sizes


@pytest.mark.parametrize("task,lg,split", CASES)
def test_every_sample_file_loads_with_the_official_layout_reader(task, lg, split):
  data = _read(task, lg, split)
  if task in ("xnli", "pawsx"):
    labels = xr.XNLI_LABELS if task == "xnli" else xr.PAWSX_LABELS
    if split == "train":
      assert 40 <= len(data) <= 60
      counts = collections.Counter(ex["label"] for ex in data)
      assert set(counts) == set(labels) and max(counts.values()) - min(counts.values()) <= 1, counts
    else:
      assert 9 <= len(data) <= 12
      if split == "test":
        assert all(ex["label"] is None for ex in data)
      else:
        assert {ex["label"] for ex in data} == set(labels)
    assert all(ex["text_a"].strip() and ex["text_b"].strip() for ex in data)
  elif task in ("panx", "udpos"):
    if split == "train":
      assert (30 <= len(data) <= 40) if lg == "en" else (8 <= len(data) <= 40)
    else:
      assert 6 <= len(data) <= 10
    valid = NER if task == "panx" else UPOS
    for ex in data:
      assert ex["tokens"] and all(t and t == t.strip() and "\t" not in t for t in ex["tokens"])
      if split == "test":
        assert ex["tags"] is None
        continue
      assert len(ex["tags"]) == len(ex["tokens"]) and set(ex["tags"]) <= valid, ex
      if task == "panx":  # IOB2: I-X only continues a B-X / I-X
        prev = "O"
        for tag in ex["tags"]:
          assert not tag.startswith("I-") or prev[2:] == tag[2:], ex
          prev = tag
  elif task in ("xquad", "mlqa", "tydiqa", "squad"):
    if split == "train":
      assert (30 <= len(data) <= 40) if lg == "en" else (4 <= len(data) <= 40)
    else:
      assert 6 <= len(data) <= 10
    assert len({ex["id"] for ex in data}) == len(data)
    for ex in data:
      assert ex["context"] and ex["question"]
      if task == "xquad":  # the release strips the test answers
        assert ex["answers"] == {"text": [""], "answer_start": [0]}
        continue
      assert ex["answers"]["text"]
      for text, start in zip(ex["answers"]["text"], ex["answers"]["answer_start"], strict=True):
        assert text and ex["context"][start:start + len(text)] == text, ex
  elif task == "bucc2018":
    for side in ("source", "target"):
      ids = [i for i, _ in data[side]]
      assert 15 <= len(ids) <= 25 and len(set(ids)) == len(ids)
      prefix = (lg if side == "source" else "en") + "-"
      assert all(i.startswith(prefix) and s.strip() for i, s in data[side])
    assert data["gold"] is not None and 8 <= len(data["gold"]) <= 12
    src, tgt = dict(data["source"]), dict(data["target"])
    assert all(s in src and t in tgt for s, t in data["gold"])
    assert len({s for s, _ in data["gold"]}) == len({t for _, t in data["gold"]}) == len(data["gold"])
  elif task == "tatoeba":
    assert 10 <= len(data["source"]) == len(data["target"]) <= 15
    assert all(s.strip() for s in data["source"] + data["target"])
    assert data["target"] != sorted(data["target"])  # not the released sorted layout: line i aligns with line i
  else:  # pragma: no cover
    raise AssertionError(task)


# ----------------------------------------------------------------------------- on-disk quirks


def test_pair_tsvs_are_csv_writer_output_with_quote_wrapped_fields():
  quoted = collections.Counter()
  for task in ("xnli", "pawsx"):
    for split, langs in SAMPLE[task].items():
      for lg in langs:
        path = xr.file_path(task, DATA, lg, split)
        raw = open(path, "rb").read()
        assert raw.endswith(b"\r\n") and raw.count(b"\n") == raw.count(b"\r\n"), path
        width = 2 if split == "test" else 3
        assert all(len(line.split(b"\t")) == width for line in raw.split(b"\r\n")[:-1]), path
        for ex in _read(task, lg, split):
          for text in (ex["text_a"], ex["text_b"]):
            if '"' in text:  # kept literally: wrapped in quotes, inner quotes doubled
              assert text.startswith('"') and text.endswith('"') and '""' in text, text
              quoted[task, split] += 1
  for task in ("xnli", "pawsx"):
    assert quoted[task, "train"] and quoted[task, "test"], quoted


def test_tagging_test_files_hold_tokens_only():
  for task in ("panx", "udpos"):
    for lg in SAMPLE[task]["test"]:
      text = open(xr.file_path(task, DATA, lg, "test"), encoding="utf-8").read()
      assert "\t" not in text and not text.endswith("\n\n")


def test_panx_zh_is_tokenised_per_character():
  for split in ("train", "dev", "test"):
    assert all(len(t) == 1 for ex in _read("panx", "zh", split) for t in ex["tokens"])


def test_xquad_test_files_are_stripped_like_the_official_preprocessing():
  for lg in SAMPLE["xquad"]["test"]:
    with open(xr.file_path("xquad", DATA, lg, "test"), encoding="utf-8") as f:
      raw = json.load(f)
    for doc in raw["data"]:
      assert set(doc) == {"paragraphs"} and len(doc["paragraphs"]) == 1
      (par,) = doc["paragraphs"]
      assert len(par["qas"]) == 1 and par["qas"][0]["answers"] == [{"answer_start": 0, "text": ""}]


def test_tydiqa_train_split_has_colliding_ids_that_the_reader_disambiguates():
  data = _read("tydiqa", "en", "train")
  orig = collections.Counter(ex["orig_id"] for ex in data)
  assert any(n >= 2 for n in orig.values())
  assert len({ex["id"] for ex in data}) == len(data)
  with open(xr.file_path("tydiqa", DATA, "en", "train"), encoding="utf-8") as f:
    assert all("-" not in qa["id"] for doc in json.load(f)["data"] for par in doc["paragraphs"]
               for qa in par["qas"])


def test_parallel_qa_sets_share_question_ids_across_languages():
  for task, split in (("xquad", "test"), ("mlqa", "dev"), ("mlqa", "test")):
    ids = {lg: [ex["id"] for ex in _read(task, lg, split)] for lg in SAMPLE[task][split]}
    assert len({tuple(v) for v in ids.values()}) == 1, (task, split)


# ----------------------------------------------------------------------------- labels folder matches the test files


@pytest.mark.parametrize("task", ["xnli", "pawsx"])
def test_pair_labels_match_test_files(task):
  valid = xr.XNLI_LABELS if task == "xnli" else xr.PAWSX_LABELS
  for lg in SAMPLE[task]["test"]:
    labels = _label_lines(task, lg)
    assert len(labels) == len(_read(task, lg, "test"))
    assert set(labels) == set(valid)


@pytest.mark.parametrize("task", ["panx", "udpos"])
def test_tagging_labels_match_test_files(task):
  valid = NER if task == "panx" else UPOS
  for lg in SAMPLE[task]["test"]:
    blocks = _blocks(_label_lines(task, lg))
    sents = _read(task, lg, "test")
    assert [len(b) for b in blocks] == [len(ex["tokens"]) for ex in sents], lg
    assert {t for b in blocks for t in b} <= valid


@pytest.mark.parametrize("task", ["xquad", "mlqa", "tydiqa"])
def test_qa_labels_match_test_files(task):
  for lg in SAMPLE[task]["test"]:
    test = _read(task, lg, "test")
    with open(_label_path(task, lg, "json"), encoding="utf-8") as f:
      gold = [(qa["id"], par["context"], qa["question"], qa["answers"])
              for doc in json.load(f)["data"] for par in doc["paragraphs"] for qa in par["qas"]]
    assert [g[0] for g in gold] == [ex["orig_id"] for ex in test]
    for (qid, context, question, answers), ex in zip(gold, test):
      assert (context, question) == (ex["context"], ex["question"])
      assert answers and all(a["text"] and context[a["answer_start"]:a["answer_start"] + len(a["text"])]
                             == a["text"] for a in answers), qid


def test_bucc_labels_are_the_test_gold_and_name_existing_ids():
  for lg in SAMPLE["bucc2018"]["test"]:
    data = _read("bucc2018", lg, "test")
    pairs = [tuple(line.split("\t")) for line in _label_lines("bucc2018", lg)]
    assert pairs == [tuple(p) for p in data["gold"]]
    src, tgt = dict(data["source"]), dict(data["target"])
    assert all(s in src and t in tgt for s, t in pairs)


def test_tatoeba_labels_are_gold_indices_into_the_english_side():
  for lg in SAMPLE["tatoeba"]["test"]:
    data = _read("tatoeba", lg, "test")
    gold = [int(x) for x in _label_lines("tatoeba", lg)]
    assert len(gold) == len(data["source"])
    assert sorted(gold) == list(range(len(data["target"])))
    assert gold == list(range(len(gold)))  # this sample keeps the raw (unsorted) alignment


def test_readme_describes_the_sample():
  text = open(os.path.join(DATA, "README.md"), encoding="utf-8").read()
  for word in NINE + ("hand-written", "xtreme_labels", "test.gold"):
    assert word in text, word
