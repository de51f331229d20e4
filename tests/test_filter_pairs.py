"""FILTER's paired data (`data/filter/filter_pairs.py`) on the bundled samples and hand-written translations."""

import json
import os
import shutil

import pytest

from xtreme_jax import errors
from xtreme_jax.data.filter import filter_pairs as fp, filter_translations as ft
from xtreme_jax.data import paths
from xtreme_jax.data.readers import xtreme_readers as xr
from xtreme_jax.data.readers.xglue_data import XglueData
from xtreme_jax.data.readers.xtreme_data import XtremeData

TIER = "unit"  # conftest.py: this file's tier

SAMPLE = paths.sample_xtreme_dir()
SAMPLE_TR = os.path.join(SAMPLE, "translations")
XTREME_DATA = XtremeData("official", SAMPLE)


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def _sentences(records, with_tags):
  return "\n\n".join("\n".join(f"{t}\t{g}" if with_tags else t for t, g in zip(r["tokens"], r["tags"] or r["tokens"]))
                     for r in records) + "\n"


def test_xnli_training_pairs_hold_both_columns_of_the_translate_train_file():
  pairs = fp.training_pairs("xnli", XTREME_DATA, ["en", "de"])
  english = xr.read("xnli", SAMPLE, "en", "train")
  assert [p["source"] for p in pairs[:len(english)]] == english  # English is paired with itself
  assert [p["target"] for p in pairs[:len(english)]] == english
  de = pairs[len(english):]
  assert len(de) == 4 and {p["language"] for p in de} == {"de"}
  first = de[0]
  assert first["source"]["text_a"] == "A group of friends is climbing a steep mountain trail."
  assert first["target"]["text_a"] == "Eine Gruppe von Freunden klettert einen steilen Bergpfad hinauf."
  assert first["source"]["label"] == first["target"]["label"] == "contradiction"  # `contradictory` renamed
  assert first["id"] == first["target"]["id"] == "xnli-de-translate_train-0"
  assert fp.has_training_pairs("xnli", XTREME_DATA, "ru") and not fp.has_training_pairs("xnli", XTREME_DATA, "ar")


def test_qa_training_pairs_match_translated_questions_by_id(tmp_path):
  pairs = fp.training_pairs("xquad", XTREME_DATA, ["de"])
  assert pairs and all(p["source"]["id"] == p["target"]["id"] for p in pairs)
  english = {r["id"]: r for r in xr.read("squad", SAMPLE, "en", "train")}
  assert all(p["source"] == english[p["id"]] for p in pairs)
  assert pairs[0]["source"]["context"] != pairs[0]["target"]["context"]

  translations = tmp_path / "tr"
  shutil.copytree(SAMPLE_TR, translations)
  path = translations / "SQuAD/translate-train/squad.translate.train.en-de.json"
  squad = json.loads(path.read_text(encoding="utf-8"))
  squad["data"][0]["paragraphs"][0]["qas"][0]["id"] = "no-such-question"
  path.write_text(json.dumps(squad), encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"no-such-question") as e:
    fp.training_pairs("xquad", XtremeData("official", SAMPLE, str(translations)), ["de"])
  assert str(path) in str(e.value) and "train-v1.1.json" in str(e.value)


def test_tagging_training_pairs_read_the_users_translations_and_leave_out_languages_without(tmp_path):
  english = xr.read("udpos", SAMPLE, "en", "train")
  data = XtremeData("official", SAMPLE, str(tmp_path))
  assert not fp.has_training_pairs("udpos", data, "de")
  assert fp.left_out("udpos", data, ["en", "de", "ru"]) == ["de", "ru"]

  _write(tmp_path / "UDPOS/translate-train/en-de.tsv", _sentences(english, with_tags=False))
  pairs = fp.training_pairs("udpos", data, ["de"])
  assert fp.has_training_pairs("udpos", data, "de") and len(pairs) == len(english)
  assert pairs[0]["source"] == english[0]
  assert pairs[0]["target"]["tokens"] == english[0]["tokens"] and pairs[0]["target"]["tags"] is None
  assert pairs[0]["id"] == "udpos-de-filter_train-0"

  _write(tmp_path / "UDPOS/translate-train/en-ru.tsv", _sentences(english, with_tags=True))
  assert fp.training_pairs("udpos", data, ["ru"])[0]["target"]["tags"] == english[0]["tags"]

  _write(tmp_path / "UDPOS/translate-train/en-ru.tsv", _sentences(english[:-1], with_tags=True))
  with pytest.raises(errors.DataError, match=r"en-ru.tsv has %d records but .*train-en.tsv has %d"
                     % (len(english) - 1, len(english))):
    fp.training_pairs("udpos", data, ["ru"])

  _write(tmp_path / "UDPOS/translate-train/en-ru.tsv", "Die\tDET\nKatze\n")
  with pytest.raises(errors.DataError, match=r"en-ru.tsv:2: .*mixes tagged and untagged"):
    fp.training_pairs("udpos", data, ["ru"])


def test_inference_pairs_take_translate_test_or_the_parallel_english():
  target = xr.read("xnli", SAMPLE, "de", "test")
  translated = fp.inference_pairs("xnli", XTREME_DATA, "de", "test", "translate_test")
  parallel = fp.inference_pairs("xnli", XTREME_DATA, "de", "test", "parallel")
  english = xr.read("xnli", SAMPLE, "en", "test")
  assert [p["target"] for p in translated] == target == [p["target"] for p in parallel]
  assert [p["id"] for p in translated] == [r["id"] for r in target]
  assert [p["source"]["text_a"] for p in parallel] == [r["text_a"] for r in english]
  tt = XTREME_DATA.read("xnli", "de", "translate_test")
  assert [p["source"]["text_a"] for p in translated] == [r["text_a"] for r in tt]
  # dev has no translate-test file: the parallel English dev set
  dev = fp.inference_pairs("xnli", XTREME_DATA, "de", "dev", "translate_test")
  assert [p["source"] for p in dev] == xr.read("xnli", SAMPLE, "en", "dev")
  # English is itself
  assert all(p["source"] is p["target"] for p in fp.inference_pairs("xnli", XTREME_DATA, "en", "test"))


def test_qa_inference_pairs_match_by_id_and_tasks_without_english_are_refused():
  pairs = fp.inference_pairs("mlqa", XTREME_DATA, "de", "test", "parallel")
  english = {r["id"]: r for r in xr.read("mlqa", SAMPLE, "en", "test")}
  assert pairs and all(p["source"] == english[p["id"]] for p in pairs)
  translated = fp.inference_pairs("xquad", XTREME_DATA, "de", "test", "translate_test")
  tt = {r["id"]: r for r in XTREME_DATA.read("xquad", "de", "translate_test")}
  assert all(p["source"] == tt[p["id"]] for p in translated)
  with pytest.raises(errors.MissingInputError, match=r"TYDIQA/translate-test/test-ru-en.json does not exist"):
    fp.inference_pairs("tydiqa", XTREME_DATA, "ru", "test")


def test_tagging_inference_pairs_with_itself_unless_translated(tmp_path):
  data = XtremeData("official", SAMPLE, str(tmp_path))
  target = xr.read("panx", SAMPLE, "de", "test")
  assert all(p["source"] is p["target"] for p in fp.inference_pairs("panx", data, "de", "test"))
  _write(tmp_path / "PANX/translate-test/test-de-en.tsv", _sentences(
      [{"tokens": ["x"] * (i + 1), "tags": None} for i in range(len(target))], with_tags=False))
  pairs = fp.inference_pairs("panx", data, "de", "test")
  assert [len(p["source"]["tokens"]) for p in pairs] == list(range(1, len(target) + 1))
  assert [p["target"] for p in pairs] == target


def test_xglue_pairs_user_layout_and_xtremes_translations(tmp_path):
  data = XglueData("official", paths.sample_xglue_dir(), str(tmp_path))
  english = data.read("NC", "en", "train")
  assert not fp.has_training_pairs("NC", data, "de")
  rows = "".join(f"Titel {i}\tText {i}\n" for i in range(len(english)))  # no label: the English one is used
  _write(tmp_path / "NC/translate-train/en-de.tsv", rows)
  pairs = fp.training_pairs("NC", data, ["de"])
  assert [p["target"]["label"] for p in pairs] == [r["label"] for r in english]
  assert pairs[3]["target"]["text_a"] == "Titel 3" and pairs[3]["source"] == english[3]
  with pytest.raises(errors.MissingInputError, match=r"NC/translate-test/test-de-en.tsv does not exist"):
    fp.inference_pairs("NC", data, "de", "test")
  # XGLUE's XNLI is XTREME's: its translate-train files give the pairs, the parallel English the inference side
  xnli = XglueData("official", paths.sample_xglue_dir(), SAMPLE_TR)
  assert len(fp.training_pairs("XNLI", xnli, ["de"])) == 4
  dev = fp.inference_pairs("XNLI", xnli, "de", "dev")
  assert [p["source"] for p in dev] == xnli.read("XNLI", "en", "dev")
  # XGLUE's MLQA trains on SQuAD: XTREME's translated SQuAD, matched by question id; inference: the parallel English
  squad = tmp_path / "SQuAD" / "translate-train" / "squad.translate.train.en-de.json"
  squad.parent.mkdir(parents=True)
  shutil.copy(os.path.join(paths.sample_xglue_dir(), "MLQA/squad1.1/train-v1.1.json"), squad)
  mlqa = fp.training_pairs("MLQA", data, ["de"])
  assert mlqa and all(p["source"]["id"] == p["target"]["id"] for p in mlqa)
  test = fp.inference_pairs("MLQA", data, "de", "test", "parallel")
  english = {r["id"]: r for r in data.read("MLQA", "en", "test")}
  assert test and all(p["source"] == english[p["id"]] for p in test)
  with pytest.raises(errors.ConfigError, match="english = 'other'"):
    fp.inference_pairs("XNLI", xnli, "de", "dev", "other")


def _upper(texts):
  return [t.upper() for t in texts]


def test_written_translations_are_read_back_as_pairs(tmp_path):
  xtreme_data = XtremeData("official", SAMPLE, str(tmp_path))
  path = ft.write_translation("udpos", xtreme_data, "de", "train", _upper)
  assert path == str(tmp_path / "UDPOS/translate-train/en-de.tsv")
  english = xr.read("udpos", SAMPLE, "en", "train")
  pairs = fp.training_pairs("udpos", xtreme_data, ["de"])
  assert [p["target"]["tokens"] for p in pairs] == [" ".join(r["tokens"]).upper().split() for r in english]
  ft.write_translation("tydiqa", xtreme_data, "ru", "test", _upper)
  qa = fp.inference_pairs("tydiqa", xtreme_data, "ru", "test")
  assert all(p["source"]["question"] == p["target"]["question"].upper() for p in qa)
  assert all(p["source"]["context"] == " ".join(p["target"]["context"].split()).upper() for p in qa)

  xglue = XglueData("official", paths.sample_xglue_dir(), str(tmp_path))
  for task in ("NC", "QADSM", "PAWSX"):
    ft.write_translation(task, xglue, "de", "train", _upper)
    english = xglue.read(task, "en", "train")
    pairs = fp.training_pairs(task, xglue, ["de"])
    assert [p["target"]["text_a"] for p in pairs] == [" ".join(r["text_a"].split()).upper() for r in english]
    assert [p["target"]["label"] for p in pairs] == [r["label"] for r in english]
  ft.write_translation("PAWSX", xglue, "de", "test", _upper)
  test = fp.inference_pairs("PAWSX", xglue, "de", "test", "translate_test")
  assert [p["source"]["text_b"] for p in test] == [" ".join(r["text_b"].split()).upper()
                                                   for r in xglue.read("PAWSX", "de", "test")]
  with pytest.raises(errors.DataError, match="returned 0 texts for"):
    ft.write_translation("NC", xglue, "de", "train", lambda texts: [])
