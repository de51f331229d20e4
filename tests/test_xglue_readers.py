"""XGLUE readers on fixtures in the official layout, with its quirks."""

import json
import os

import pytest

from xtreme_jax import errors
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.registry import XGLUE

TIER = "unit"  # conftest.py: this file's tier


def _write(root, task, split, lg, content):
  path = root / XGLUE.task(task).file(split, lg)
  os.makedirs(path.parent, exist_ok=True)
  path.write_text(content, encoding="utf-8")
  return path


def test_pair_rows_take_the_last_column_as_label(tmp_path):
  _write(tmp_path, "NC", "dev", "de", "Titel\tText des Artikels\tsports\n\nT2\tB2\tnews\n")
  _write(tmp_path, "NC", "test", "fr", "titre\tcorps\n")  # no label column in test
  _write(tmp_path, "NC", "train", "en", "query\ttitle\tbody\tautos\n")  # Data_Format's four columns
  assert xglue_readers.read("NC", str(tmp_path), "de", "dev") == [
      {"id": "NC-de-dev-0", "text_a": "Titel", "text_b": "Text des Artikels", "label": "sports"},
      {"id": "NC-de-dev-1", "text_a": "T2", "text_b": "B2", "label": "news"}]
  assert xglue_readers.read("NC", str(tmp_path), "fr", "test")[0]["label"] is None
  assert xglue_readers.read("NC", str(tmp_path), "en", "train")[0] == {
      "id": "NC-en-train-0", "text_a": "query", "text_b": "title body", "label": "autos"}
  _write(tmp_path, "QADSM", "dev", "fr", "requête\ttitre\tdescription de l'annonce\tGood\n")
  assert xglue_readers.read("QADSM", str(tmp_path), "fr", "dev")[0] == {
      "id": "QADSM-fr-dev-0", "text_a": "requête", "text_b": "titre description de l'annonce", "label": "Good"}


def test_pawsx_header_and_blank_lines_are_skipped(tmp_path):
  _write(tmp_path, "PAWSX", "dev", "es", "id\tsentence1\tsentence2\tlabel\n7\tuno\tdos\t1\n\n8\ttres\tcuatro\t0\n")
  assert xglue_readers.read("PAWSX", str(tmp_path), "es", "dev") == [
      {"id": "PAWSX-es-dev-0", "text_a": "uno", "text_b": "dos", "label": "1"},
      {"id": "PAWSX-es-dev-1", "text_a": "tres", "text_b": "cuatro", "label": "0"}]


def test_wpr_rows_carry_their_query_group(tmp_path):
  _write(tmp_path, "WPR", "dev", "it", "q1\tt\ts\t3\nq1\tt\ts\t0\nq2\tt\ts\t4\nq1\tt\ts\t1\n")
  rows = xglue_readers.read("WPR", str(tmp_path), "it", "dev")
  assert [(r["group"], r["label"]) for r in rows] == [(0, "3"), (0, "0"), (1, "4"), (2, "1")]  # consecutive runs
  assert rows[0]["text_a"] == "q1" and rows[0]["text_b"] == "t s"


def test_tagging_sentences_docstart_and_unlabelled_test(tmp_path):
  _write(tmp_path, "NER", "dev", "nl", "-DOCSTART- -X- O O\n\nJan B-PER\nwoont O\nin O\nAmsterdam B-LOC\n\n"
                                       "Ja O\n-DOCSTART- -X- O O\nZo O\n")
  assert xglue_readers.read("NER", str(tmp_path), "nl", "dev") == [
      {"id": "NER-nl-dev-0", "tokens": ["Jan", "woont", "in", "Amsterdam"], "tags": ["B-PER", "O", "O", "B-LOC"]},
      {"id": "NER-nl-dev-1", "tokens": ["Ja"], "tags": ["O"]},
      {"id": "NER-nl-dev-2", "tokens": ["Zo"], "tags": ["O"]}]
  _write(tmp_path, "POS", "test", "pl", "Ala\nma\nkota\n")
  assert xglue_readers.read("POS", str(tmp_path), "pl", "test") == [
      {"id": "POS-pl-test-0", "tokens": ["Ala", "ma", "kota"], "tags": None}]


def test_mlqa_is_squad_json(tmp_path):
  data = {"data": [{"title": "t", "paragraphs": [{"context": "Berlin ist groß", "qas": [
      {"id": "q1", "question": "Was?", "answers": [{"text": "Berlin", "answer_start": 0}]}]}]}]}
  _write(tmp_path, "MLQA", "dev", "de", json.dumps(data))
  records = xglue_readers.read("MLQA", str(tmp_path), "de", "dev")
  assert [(r["id"], r["context"], r["answers"]["text"]) for r in records] == [("q1", "Berlin ist groß", ["Berlin"])]


def test_bad_input_names_file_line_and_what_was_expected(tmp_path):
  path = _write(tmp_path, "QAM", "dev", "de", "frage\tpassage\t1\nfrage\tpassage\t2\n")
  with pytest.raises(errors.DataError, match=rf"{path}:2: malformed row: unknown label '2'; valid labels: 0, 1"):
    xglue_readers.read("QAM", str(tmp_path), "de", "dev")
  _write(tmp_path, "NER", "train", "en", "EU B-ORG\nrejects B-FOO\n")
  with pytest.raises(errors.DataError, match=r"en\.train:2: malformed row: expected `word label` with a label in"):
    xglue_readers.read("NER", str(tmp_path), "en", "train")
  with pytest.raises(errors.ConfigError, match="XGLUE NER dev has no language 'fr'; valid: de en es nl"):
    xglue_readers.read("NER", str(tmp_path), "fr", "dev")
  with pytest.raises(errors.MissingInputError, match=r"XGLUE WPR: expected file .*WPR/xglue\.wpr\.zh\.test"):
    xglue_readers.read("WPR", str(tmp_path), "zh", "test")
  with pytest.raises(errors.ConfigError, match="unknown XGLUE task 'SQUAD'"):
    xglue_readers.read("SQUAD", str(tmp_path), "en", "dev")


def test_missing_non_english_training_data_says_where_to_put_it(tmp_path):
  with pytest.raises(errors.MissingInputError, match=r"XGLUE XNLI: no de training data at .*XNLI/multinli\.train\.de"
                                                    r"\.tsv; the release ships en only: put the de training set"):
    xglue_readers.read("XNLI", str(tmp_path), "de", "train")
  with pytest.raises(errors.MissingInputError, match=r"XGLUE XNLI: expected file .*XNLI/multinli\.train\.en\.tsv does "
                                                    r"not exist; pass the unpacked xglue_full_dataset"):
    xglue_readers.read("XNLI", str(tmp_path), "en", "train")


def _write_pair(root, task, split, lg, src, tgt=None):
  spec = XGLUE.task(task)
  paths = []
  for side, content in zip(spec.sides, (src, tgt)):
    if content is not None:
      path = root / spec.file(split, lg, side)
      os.makedirs(path.parent, exist_ok=True)
      path.write_bytes(content.encode("utf-8"))
      paths.append(path)
  return paths


def test_generation_pairs_line_i_with_line_i(tmp_path):
  assert XGLUE.task("QG").file("dev", "it") == "QG/xglue.qg.it.src.dev"
  assert XGLUE.task("NTG").file("test", "ru", "tgt") == "NTG/xglue.ntg.ru.tgt.test"
  # Lines as Python's open() iterates them (\r\n and a lone \r end lines too); a blank line is an example;
  # the target is the scorer's reference: the last tab-separated column, stripped.
  _write_pair(tmp_path, "QG", "dev", "it", "Roma è la capitale.\r\n\rIl Po è lungo.\n", "Qual è la capitale? \n\n"
              "x\tQuanto è lungo il Po?\n")
  assert xglue_readers.read("QG", str(tmp_path), "it", "dev") == [
      {"id": "QG-it-dev-0", "source": "Roma è la capitale.", "target": "Qual è la capitale?", "language": "it"},
      {"id": "QG-it-dev-1", "source": "", "target": "", "language": "it"},
      {"id": "QG-it-dev-2", "source": "Il Po è lungo.", "target": "Quanto è lungo il Po?", "language": "it"}]
  # The release hides the test targets: no .tgt file reads as target None.
  _write_pair(tmp_path, "NTG", "test", "ru", "Текст новости.\nЕщё одна новость.\n")
  assert [r["target"] for r in xglue_readers.read("NTG", str(tmp_path), "ru", "test")] == [None, None]


def test_generation_bad_input_names_the_files(tmp_path):
  src, tgt = _write_pair(tmp_path, "NTG", "dev", "fr", "un\ndeux\ntrois\n", "1\n2\n")
  with pytest.raises(errors.DataError, match=rf"XGLUE NTG: {src} has 3 lines but {tgt} has 2; line i of one must be"):
    xglue_readers.read("NTG", str(tmp_path), "fr", "dev")
  os.remove(tgt)  # dev and train targets are part of the release
  with pytest.raises(errors.MissingInputError, match=r"expected file .*NTG/xglue\.ntg\.fr\.tgt\.dev does not exist"):
    xglue_readers.read("NTG", str(tmp_path), "fr", "dev")
  _write_pair(tmp_path, "QG", "train", "en", "one\ntwo\n")
  (tmp_path / "QG" / "xglue.qg.en.tgt.train").write_bytes(b"fine\nbad \xff\n")
  with pytest.raises(errors.DataError, match=r"xglue\.qg\.en\.tgt\.train:2 \(byte 9\): not UTF-8"):
    xglue_readers.read("QG", str(tmp_path), "en", "train")
  with pytest.raises(errors.ConfigError, match="XGLUE QG train has no language 'de'; valid: en"):
    xglue_readers.read("QG", str(tmp_path), "de", "train")
  with pytest.raises(errors.ConfigError, match=r"xglue NC has no side 'tgt'; sides: \[\]"):
    XGLUE.task("NC").file("dev", "de", "tgt")
