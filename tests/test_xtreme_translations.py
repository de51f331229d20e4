"""Translate-train / translate-test / pseudo test sets: readers, seqio tasks, run settings (offline)."""

import csv
import json
import os
import re
import shutil
import socket

import gin
import numpy as np
import pytest
import seqio

import xtreme_tasks.xtreme as xt
from xtreme_jax import cli, errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers import xtreme_readers as xr
from xtreme_jax.data.translation import xtreme_translations as tr
from xtreme_jax.runs import xtreme

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = paths.sample_xtreme_dir()
SAMPLE_TR = os.path.join(SAMPLE, "translations")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
  def refuse(*args, **kwargs):
    raise AssertionError(f"network access attempted: {args!r}")
  monkeypatch.setattr(socket.socket, "connect", refuse)
  monkeypatch.setattr(socket, "create_connection", refuse)


def _write_csv(path, rows):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, delimiter="\t").writerows(rows)


def _write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(text.encode("utf-8"))


# ----------------------------------------------------------------------------- readers


def test_translate_train_pairs_keep_quotes_and_map_contradictory(tmp_path):
  _write_csv(tmp_path / "XNLI/translate-train/en-fr-translated.tsv", [
      ['He said "hi".', "He spoke.", 'Il a dit "salut".', "Il a parlé.", "contradictory"],
      ["A", "B", "Un", "Deux", "neutral"]])
  raw = (tmp_path / "XNLI/translate-train/en-fr-translated.tsv").read_bytes()
  assert raw.count(b"\r\n") == 2 and b'"Il a dit ""salut""."' in raw  # csv writer: CRLF, quote-wrapped
  assert tr.read("xnli", str(tmp_path), "fr", "translate_train") == [
      # No quote char: the quote-wrapping and doubled quotes stay literal, as xtreme_readers keeps them.
      {"id": "xnli-fr-translate_train-0", "text_a": '"Il a dit ""salut""."', "text_b": "Il a parlé.",
       "label": "contradiction"},
      {"id": "xnli-fr-translate_train-1", "text_a": "Un", "text_b": "Deux", "label": "neutral"}]


def test_translate_train_needs_five_columns_and_known_labels(tmp_path, caplog):
  path = tmp_path / "XNLI/translate-train/en-de-translated.tsv"
  _write(path, "a\tb\tc\td\tneutral\r\na\tb\tc\tneutral\r\n")
  with pytest.raises(ValueError, match=r"en-de-translated\.tsv:2: malformed row: 4 tab-separated columns, "
                                       r"expected 5 \(en_s1, en_s2, translated_s1, translated_s2, label\)"):
    tr.read("xnli", str(tmp_path), "de", "translate_train")
  _write(path, "a\tb\tc\td\tneutral\na\tb\tc\td\tyes\n")
  with pytest.raises(ValueError, match=r":2: malformed row: unknown label 'yes'; valid labels: contradiction"):
    tr.read("xnli", str(tmp_path), "de", "translate_train")
  # PAWS-X's published files have wrongly populated rows: skipped and counted, as the TFDS builder does.
  _write(tmp_path / "PAWSX/translate-train/en-de-translated.tsv",
         "a\tb\tc\td\t1\r\na\tb\tc\t0\r\ne\tf\tg\th\t0\na\tb\tc\td\tyes\n")
  with caplog.at_level("WARNING"):
    rows = tr.read("pawsx", str(tmp_path), "de", "translate_train")
  assert rows == [{"id": "pawsx-de-translate_train-0", "text_a": "c", "text_b": "d", "label": "1"},
                  {"id": "pawsx-de-translate_train-1", "text_a": "g", "text_b": "h", "label": "0"}]
  assert "skipped 2 malformed row(s)" in caplog.text and "[2, 4]" in caplog.text


def test_missing_file_names_path_and_gsutil_command(tmp_path):
  with pytest.raises(FileNotFoundError) as e:
    tr.read("xnli", str(tmp_path), "de", "translate_train")
  msg = str(e.value)
  assert str(tmp_path / "XNLI/translate-train/en-de-translated.tsv") in msg
  assert f"gsutil -m cp -r gs://xtreme_translations/* {tmp_path}/" in msg
  with pytest.raises(FileNotFoundError, match=r"mlqa\.translate\.test\.de-en\.json does not exist\. This path is "
                                              r"defined by xtreme-jax"):
    tr.read("mlqa", str(tmp_path), "de", "translate_test")


def test_unknown_task_language_or_kind_lists_valid_ones():
  with pytest.raises(ValueError, match=r"unknown language 'en' for xnli translate_train; valid languages: ar bg de"):
    tr.translation_path("xnli", "/t", "en", "translate_train")
  with pytest.raises(ValueError, match=r"no translate_test data for XTREME task 'tydiqa'; tasks with "
                                       r"translate_test: xnli, pawsx, xquad, mlqa"):
    tr.read("tydiqa", "/t", "ar", "translate_test")
  with pytest.raises(ValueError, match=r"unknown translation kind 'translate'; valid kinds: translate_train"):
    tr.read("xnli", "/t", "de", "translate")
  with pytest.raises(ValueError, match=r"'de' is not a pseudo test language"):
    tr.read("xnli", "/t", "de", "pseudo_test")


def test_translate_test_uses_english_columns_and_original_ids():
  got = tr.read("xnli", SAMPLE_TR, "de", "translate_test", data_dir=SAMPLE)
  official_de, official_en = xr.read("xnli", SAMPLE, "de", "test"), xr.read("xnli", SAMPLE, "en", "test")
  assert len(got) == 9 and [g["id"] for g in got] == [f"xnli-de-test-{i}" for i in range(9)]
  assert [g["id"] for g in got] == [o["id"] for o in official_de]
  assert got[0] == {"id": "xnli-de-test-0", "text_a": '"My sister wrote ""thank you"" on the card."',
                    "text_b": "The card was for her teacher.", "label": None}
  assert [(g["text_a"], g["text_b"]) for g in got] == [(e["text_a"], e["text_b"]) for e in official_en]
  # QA: the English questions keep the original ids.
  q = tr.read("xquad", SAMPLE_TR, "de", "translate_test", data_dir=SAMPLE)
  assert [x["id"] for x in q] == [x["id"] for x in xr.read("xquad", SAMPLE, "de", "test")]
  assert q[0]["question"] == "What were windmills used for?"


def test_translate_test_line_count_mismatch_is_refused(tmp_path):
  data = tmp_path / "data"
  shutil.copytree(os.path.join(SAMPLE, "xnli"), data / "xnli")
  rows = (data / "xnli/test-de.tsv").read_text(encoding="utf-8").splitlines()[:8]
  _write(tmp_path / "tr/XNLI/translate-test/test-de-en-translated.tsv",
         "".join(f"{r}\tE1\tE2\tneutral\r\n" for r in rows))  # 8 rows; the optional label column
  with pytest.raises(ValueError, match=r"test-de-en-translated\.tsv has 8 rows but the original test file "
                                       r".*xnli/test-de\.tsv has 9"):
    tr.read("xnli", str(tmp_path / "tr"), "de", "translate_test", data_dir=str(data))
  got = tr.read("xnli", str(tmp_path / "tr"), "de", "translate_test")  # no data_dir: no alignment check
  assert len(got) == 8 and got[7] == {"id": "xnli-de-test-7", "text_a": "E1", "text_b": "E2", "label": "neutral"}
  # QA: a question id the original does not have.
  shutil.copytree(os.path.join(SAMPLE, "xquad"), data / "xquad")
  doc = json.loads(open(os.path.join(SAMPLE_TR, "XQuAD/translate-test/xquad.translate.test.de-en.json")).read())
  doc["data"][0]["paragraphs"][0]["qas"][0]["id"] = "renamed"
  _write(tmp_path / "tr/XQuAD/translate-test/xquad.translate.test.de-en.json", json.dumps(doc))
  with pytest.raises(ValueError, match=r"question ids the original test file .* does not have, e\.g\. \['renamed'\]"):
    tr.read("xquad", str(tmp_path / "tr"), "de", "translate_test", data_dir=str(data))


def test_qa_translate_train_answers_and_translate_test_ids_are_checked(tmp_path):
  path = tmp_path / "SQuAD/translate-train/squad.translate.train.en-de.json"
  qas = [{"id": f"q{i}", "question": "?", "answers": [{"text": "Paris" if i == 1 else "Berlin", "answer_start": 0}]}
         for i in range(3)]
  _write(path, json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "Berlin ist groß.", "qas": qas}]}]}))
  with pytest.raises(errors.DataError, match=rf"^{re.escape(str(path))}: 1 of 3 training questions have an answer "
                                             rf"that is not in their context .*e\.g\. ids \['q1'\]: more than the 5%"):
    tr.read("squad", str(tmp_path), "de", "translate_train")
  # translate-test: a question of the original test file missing from the translation.
  doc = json.loads(open(os.path.join(SAMPLE_TR, "XQuAD/translate-test/xquad.translate.test.de-en.json")).read())
  dropped = doc["data"][0]["paragraphs"][0]["qas"].pop()["id"]
  test_path = tmp_path / "XQuAD/translate-test/xquad.translate.test.de-en.json"
  _write(test_path, json.dumps(doc))
  original = xr.file_path("xquad", SAMPLE, "de", "test")
  n = len(xr.read("xquad", SAMPLE, "de", "test"))
  with pytest.raises(errors.DataError, match=rf"^xquad translate_test de: {re.escape(str(test_path))} has {n - 1} "
                                             rf"questions but the original test file {re.escape(original)} has {n}; "
                                             rf"the translation lacks question ids of the original, e\.g\. "
                                             rf"\['{dropped}'\]; translated questions must keep their original ids$"):
    tr.read("xquad", str(tmp_path), "de", "translate_test", data_dir=SAMPLE)


def test_squad_translations_and_pseudo_tests_have_the_reader_schema():
  de = tr.read("squad", SAMPLE_TR, "de", "translate_train")
  assert set(de[0]) == set(xr.read("squad", SAMPLE, "en", "train")[0])
  assert [x["answers"]["text"] for x in de] == [["etwa 42 Quadratkilometer"], ["vom Fluss Selt"], ["die Enge"]]
  # xquad / mlqa translate-train is the same SQuAD file.
  assert tr.translation_path("mlqa", "/t", "de", "translate_train") == tr.translation_path(
      "squad", "/t", "de", "translate_train") == "/t/SQuAD/translate-train/squad.translate.train.en-de.json"
  ru = tr.read("tydiqa", SAMPLE_TR, "ru", "translate_train")
  assert [(x["id"], x["orig_id"]) for x in ru] == [("0", "0"), ("0-dup1", "0")]
  assert tr.read("xnli", SAMPLE_TR, "nl", "pseudo_test")[2] == {
      "id": "xnli-nl-test-2", "text_a": "De rivier bevroor tijdens de koude winter.",
      "text_b": '"Kinderen schaatsten op de ""rivier""."', "label": "neutral"}
  assert [x["answers"]["text"] for x in tr.read("xquad", SAMPLE_TR, "nl", "pseudo_test")] == [
      ["een grote massa ijs die langzaam over land beweegt"], ["waar meer sneeuw valt dan er smelt"]]
  assert tr.pseudo_languages_on_disk("xnli", SAMPLE_TR) == ["nl"]
  assert len(tr.PSEUDO_LANGUAGES["xnli"]) == 40 - 15 and len(tr.PSEUDO_LANGUAGES["xquad"]) == 40 - 11


# ----------------------------------------------------------------------------- seqio


def _py(value):
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if isinstance(value, np.ndarray):
    return [_py(v) for v in value.tolist()]
  if isinstance(value, (np.integer, int)):
    return int(value)
  return value


def _examples(name, split, **kwargs):
  ds = seqio.get_mixture_or_task(name).get_dataset(split=split, shuffle=False, sequence_length=None, **kwargs)
  return [{k: _py(v) for k, v in ex.items()} for ex in ds.as_numpy_iterator()]


@pytest.fixture
def sample_dirs(monkeypatch):
  monkeypatch.delenv(xt.DATA_DIR_ENV, raising=False)
  monkeypatch.delenv(xt.TRANSLATIONS_DIR_ENV, raising=False)
  xt.set_data_dir(SAMPLE)
  xt.set_translations_dir(None)
  yield
  xt.set_data_dir(None)
  xt.set_translations_dir(None)


def test_translation_tasks_read_the_translations_dir(sample_dirs):
  assert xt.get_translations_dir() == SAMPLE_TR  # default: <data dir>/translations
  train = _examples("xtreme_xnli_translate_train_de", "train")
  assert [ex["label"] for ex in train] == ["contradiction", "neutral", "entailment", "entailment"]
  assert tuple(seqio.get_mixture_or_task("xtreme_xnli_translate_train_de").splits) == ("train",)
  test = _examples("xtreme_pawsx_translate_test_de", "test")
  assert len(test) == 10 and test[1]["id"] == "pawsx-de-test-1" and test[1]["label"] == ""
  assert test[1]["text_a"] == xr.read("pawsx", SAMPLE, "en", "test")[1]["text_a"]
  assert [ex["label"] for ex in _examples("xtreme_xnli_pseudo_nl", "test")] == ["entailment", "contradiction",
                                                                                "neutral"]
  assert _examples("xtreme_squad_translate_train_de", "train")[2]["answers/answer_start"] == [
      tr.read("squad", SAMPLE_TR, "de", "translate_train")[2]["context"].index("die Enge")]


def test_translate_train_mixture_is_english_plus_one_translation(sample_dirs):
  mix = seqio.get_mixture_or_task("xtreme_xnli_translate_train_en_de")
  assert {t.name for t in mix.tasks} == {f"xtreme_xnli_{lg}" for lg in xr.XNLI_LANGS} | {
      "xtreme_xnli_translate_train_de"}
  # The mixture samples its members by rate, so check the pool and that both sources occur.
  ids = {ex["id"] for ex in _examples("xtreme_xnli_translate_train_en_de", "train", num_epochs=1, seed=0)}
  assert ids <= {f"xnli-en-train-{i}" for i in range(48)} | {f"xnli-de-translate_train-{i}" for i in range(4)}
  assert any(i.startswith("xnli-de-translate_train-") for i in ids) and any(i.startswith("xnli-en-") for i in ids)
  assert mix.get_rate(seqio.get_mixture_or_task("xtreme_xnli_translate_train_de")) == 4  # examples-proportional
  assert mix.get_rate(seqio.get_mixture_or_task("xtreme_xnli_en")) == 48
  # xquad / mlqa: English SQuAD + the SQuAD translation.
  assert {t.name for t in seqio.get_mixture_or_task("xtreme_mlqa_translate_train_en_de").tasks} == {
      "xtreme_squad_en", "xtreme_squad_translate_train_de"} | {f"xtreme_mlqa_{lg}" for lg in xr.MLQA_LANGS}


def test_translate_train_all_mixture_reads_every_translation(sample_dirs, tmp_path):
  for i, lg in enumerate(tr.languages("xnli", "translate_train")):
    _write_csv(tmp_path / f"XNLI/translate-train/en-{lg}-translated.tsv", [["e1", "e2", f"{lg}1", f"{lg}2", "neutral"]])
  xt.set_translations_dir(tmp_path)
  mix = seqio.get_mixture_or_task("xtreme_xnli_translate_train_all")
  train = [t for t in mix.tasks if "train" in t.splits]
  assert sorted(t.name for t in train) == sorted(["xtreme_xnli_en"] + [
      f"xtreme_xnli_translate_train_{lg}" for lg in xr.XNLI_LANGS if lg != "en"])
  assert sum(mix.get_rate(t) for t in train) == 48 + 14  # one row per translation
  ids = {ex["id"] for ex in _examples("xtreme_xnli_translate_train_all", "train", num_epochs=1, seed=0)}
  assert ids <= {f"xnli-en-train-{i}" for i in range(48)} | {f"xnli-{lg}-translate_train-0" for lg in xr.XNLI_LANGS}
  assert len(seqio.get_mixture_or_task("xtreme_squad_translate_train_de").splits) == 1
  assert {t.name for t in seqio.get_mixture_or_task("xtreme_mlqa_translate_train_all").tasks} >= {
      f"xtreme_squad_translate_train_{lg}" for lg in ("ar", "de", "el", "ru", "th", "tr")}


def test_translate_test_mixture_and_environment_variable(sample_dirs, monkeypatch, tmp_path):
  mix = seqio.get_mixture_or_task("xtreme_xquad_translate_test")
  assert {t.name for t in mix.tasks} == {"xtreme_squad_en", "xtreme_xquad_en"} | {
      f"xtreme_xquad_translate_test_{lg}" for lg in xr.XQUAD_LANGS if lg != "en"}
  assert [ex["id"] for ex in _examples("xtreme_xquad_translate_test", "train", num_epochs=1)] == [
      ex["id"] for ex in xr.read("squad", SAMPLE, "en", "train")]
  monkeypatch.setenv(xt.TRANSLATIONS_DIR_ENV, str(tmp_path))
  assert xt.get_translations_dir() == str(tmp_path)
  with pytest.raises(FileNotFoundError, match=r"XNLI/pseudo-test/test-nl\.tsv does not exist"):
    _examples("xtreme_xnli_pseudo_nl", "test")


def test_registered_translation_names():
  tasks, mixtures = set(seqio.TaskRegistry.names()), set(seqio.MixtureRegistry.names())
  new_tasks = {n for n in tasks if "_translate_" in n or "_pseudo_" in n}
  # translate-train: xnli 14 + pawsx 6 + squad 10 + tydiqa 8; translate-test: 14 + 6 + 10 + 6;
  # pseudo: xnli 25 + xquad 29.
  assert len(new_tasks) == (14 + 6 + 10 + 8) + (14 + 6 + 10 + 6) + (25 + 29)
  new_mixtures = {n for n in mixtures if "_translate_" in n}
  assert len(new_mixtures) == (14 + 6 + 10 + 6 + 8) + 5 + 4
  assert not tasks & mixtures
  assert "xtreme_xquad_translate_train_de" not in tasks  # xquad trains on the SQuAD translation


# ----------------------------------------------------------------------------- run settings


def _runner(tmp_path, setting, translations_dir=None):
  return xtreme.XtremeRunner(str(tmp_path), SAMPLE, None, paths.sample_vocab(), None,
                             xtreme.FinetuneSettings(setting=setting), None, translations_dir)


@pytest.mark.parametrize("setting,task,lang,expected", [
    ("translate_train", "xnli", "de", ("xnli_translate_train_de", (("xnli", "en", "train"),
                                                                   ("xnli", "de", "translate_train")), None)),
    ("translate_train", "mlqa", "de", ("squad_translate_train_de", (("squad", "en", "train"),
                                                                    ("squad", "de", "translate_train")), None)),
    ("translate_train", "tydiqa", "ru", ("tydiqa_translate_train_ru", (("tydiqa", "en", "train"),
                                                                       ("tydiqa", "ru", "translate_train")), None)),
    ("translate_train", "xnli", "en", ("xnli", (("xnli", "en", "train"),), None)),  # no translation into English
    ("translate_train", "xnli", "nl", ("xnli", (("xnli", "en", "train"),), None)),  # pseudo language
    ("translate_train", "panx", "de", ("panx", (("panx", "en", "train"),), None)),  # no translations: zero-shot
    ("translate_train_all", "xnli", "zh", ("xnli_translate_train_all", (
        ("xnli", "en", "train"), ("xnli", "de", "translate_train"), ("xnli", "ru", "translate_train")), None)),
    ("translate_train_all", "xquad", "ar", ("squad_translate_train_all", (
        ("squad", "en", "train"), ("squad", "de", "translate_train")), None)),
    ("translate_train_all", "udpos", "ar", ("udpos", (("udpos", "en", "train"),), None)),
    ("translate_test", "xnli", "de", ("xnli", (("xnli", "en", "train"),), None)),
    ("translate_test", "xquad", "de", ("squad", (("squad", "en", "train"),), None)),
])
def test_training_sets_of_translation_settings(tmp_path, setting, task, lang, expected):
  assert _runner(tmp_path, setting).training_set(task, lang) == expected


def test_translate_test_reads_the_translation_and_other_settings_do_not(tmp_path):
  runner = _runner(tmp_path, "translate_test")
  assert runner.test_split("xnli", "de") == "translate_test"
  assert runner.test_split("xnli", "en") == "test" and runner.test_split("panx", "de") == "test"
  assert _runner(tmp_path, "translate_train").test_split("xnli", "de") == "test"
  assert runner.read("xnli", "de", "translate_test")[0]["text_b"] == "The card was for her teacher."
  assert runner.available("xnli", "de", "translate_test") and not runner.available("xnli", "ar", "translate_test")
  other = _runner(tmp_path, "translate_test", str(tmp_path))
  assert not other.available("xnli", "de", "translate_test") and other.predictions.pseudo_languages("xnli") == []
  assert runner.predictions.pseudo_languages("xnli") == ["nl"] and runner.predictions.pseudo_languages("panx") == []


@pytest.fixture
def clean_gin():
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


@pytest.mark.e2e
def test_translate_train_and_translate_test_runs_on_the_sample(tmp_path, clean_gin, capsys):
  run_dir = tmp_path / "run"
  common = ["run", "--gin_file=experiments/xtreme_quickstart.gin", f"--gin.RUN_DIR='{run_dir}'",
            "--gin.EPOCHS=2.0", "--gin.BATCH_SIZE=8", "--gin.TASKS=('xnli',)",
            "--gin.LANGUAGES={'xnli': ['en', 'de']}", "--gin.PSEUDO_TEST=True"]
  assert cli.main(common + ["--gin.SETTING='translate_train'"]) == 0
  models = run_dir / "models"
  assert sorted(os.listdir(models)) == ["xnli", "xnli_translate_train_de"]
  config = json.loads((models / "xnli_translate_train_de" / "run_config.json").read_text())
  assert config["train"] == [["xnli", "en", "train"], ["xnli", "de", "translate_train"]]
  assert config["steps"] == 13  # round(2 epochs * (48 English + 4 German) / batch 8) = round(13.0)
  assert json.loads((models / "xnli" / "run_config.json").read_text())["steps"] == 12  # 2 * 48 / 8
  sub = run_dir / "submission-translate_train" / "xnli"
  for lg in ("en", "de"):
    lines = (sub / f"test-{lg}.tsv").read_text().splitlines()
    assert len(lines) == 9 and set(lines) <= set(xr.XNLI_LABELS)
  # Pseudo test (Dutch): predicted by the English model, scored against the gold in the pseudo file.
  pred = (run_dir / "submission-translate_train-pseudo" / "xnli" / "test-nl.tsv").read_text().splitlines()
  gold = (run_dir / "pseudo-labels" / "xnli" / "test-nl.tsv").read_text()
  assert gold == "entailment\ncontradiction\nneutral\n" and len(pred) == 3
  scores = json.loads((run_dir / "scores-translate_train-pseudo.json").read_text())
  expected = 100.0 * sum(p == g for p, g in zip(pred, ["entailment", "contradiction", "neutral"])) / 3
  assert list(scores) == ["xnli"] and list(scores["xnli"]) == ["nl"]  # (the scorer may add counts beside it)
  assert scores["xnli"]["nl"]["accuracy"] == pytest.approx(expected)
  assert "pseudo xnli: nl" in capsys.readouterr().out
  for folder in ("submission-translate_train", "submission-translate_train-pseudo", "pseudo-labels"):
    assert json.loads((run_dir / folder / "manifest.json").read_text()) == {"data_source": "official"}
  assert (run_dir / "scores-translate_train.json").exists() and not (run_dir / "scores.json").exists()

  # translate_test reuses the English model and writes German predictions from the English translation.
  gin.clear_config(clear_constants=True)
  assert cli.main(common + ["--gin.SETTING='translate_test'", "--gin.PSEUDO_TEST=False"]) == 0
  assert sorted(os.listdir(models)) == ["xnli", "xnli_translate_train_de"]
  sub = run_dir / "submission-translate_test" / "xnli"
  # The sample's German translation is the English test set itself, so the same model gives the same labels.
  assert (sub / "test-de.tsv").read_text() == (sub / "test-en.tsv").read_text()
  assert len((sub / "test-de.tsv").read_text().splitlines()) == 9
