"""Readers for the official XTREME `download/` layout, on tiny fixtures in the real formats."""

import csv
import json
import logging
import os
import re
import subprocess
import sys

import pytest

from xtreme_jax import errors
from xtreme_jax.data.readers import xtreme_readers as xr
from xtreme_jax.data.features.classification_source import TsvClassificationSource

TIER = "unit"  # conftest.py: this file's tier


def _write(root, rel, data):
  path = root / rel
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
  return str(path)


def _write_csv(root, rel, rows):
  """Exactly as the official preprocessing writes xnli / pawsx (csv.writer, tab, CRLF, QUOTE_MINIMAL)."""
  path = root / rel
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, delimiter="\t").writerows(rows)
  return str(path)


# ----------------------------------------------------------------------------- xnli / pawsx


def test_xnli_keeps_csv_quotes_literally_and_reads_crlf(tmp_path):
  _write_csv(tmp_path, "xnli/train-en.tsv", [
      ['He said "hi" .', "He spoke .", "entailment"],
      ["Plain premise", "Plain hypothesis", "contradiction"]])
  raw = (tmp_path / "xnli/train-en.tsv").read_bytes()
  assert raw == b'"He said ""hi"" ."\tHe spoke .\tentailment\r\nPlain premise\tPlain hypothesis\tcontradiction\r\n'
  assert xr.read_xnli(str(tmp_path), "en", "train") == [
      {"id": "xnli-en-train-0", "text_a": '"He said ""hi"" ."', "text_b": "He spoke .", "label": "entailment"},
      {"id": "xnli-en-train-1", "text_a": "Plain premise", "text_b": "Plain hypothesis", "label": "contradiction"}]


def test_xnli_dev_unicode_and_test_without_labels(tmp_path):
  _write_csv(tmp_path, "xnli/dev-ar.tsv", [["القطة نائمة", "الحيوان يستريح", "neutral"]])
  _write_csv(tmp_path, "xnli/test-zh.tsv", [["猫在睡觉。", '他说"你好"'], ["a", "b"]])
  assert xr.read("xnli", str(tmp_path), "ar", "dev") == [
      {"id": "xnli-ar-dev-0", "text_a": "القطة نائمة", "text_b": "الحيوان يستريح", "label": "neutral"}]
  assert xr.read("xnli", str(tmp_path), "zh", "test") == [
      {"id": "xnli-zh-test-0", "text_a": "猫在睡觉。", "text_b": '"他说""你好"""', "label": None},
      {"id": "xnli-zh-test-1", "text_a": "a", "text_b": "b", "label": None}]


def test_pawsx_labels_and_lf_files(tmp_path):
  _write(tmp_path, "pawsx/dev-de.tsv", "Satz eins\tSatz zwei\t1\nNoch einer\tUnd noch\t0")
  assert xr.read_pawsx(str(tmp_path), "de", "dev") == [
      {"id": "pawsx-de-dev-0", "text_a": "Satz eins", "text_b": "Satz zwei", "label": "1"},
      {"id": "pawsx-de-dev-1", "text_a": "Noch einer", "text_b": "Und noch", "label": "0"}]


def test_pair_malformed_rows_name_file_and_line(tmp_path):
  path = _write(tmp_path, "pawsx/dev-fr.tsv", "a\tb\t1\r\nc\td\t2\r\n")
  with pytest.raises(ValueError,
                     match=rf"^{re.escape(path)}:2: malformed row: unknown label '2'; valid labels: 0, 1$"):
    xr.read_pawsx(str(tmp_path), "fr", "dev")
  path = _write(tmp_path, "xnli/dev-fr.tsv", "a\tb\tneutral\r\nc\td\r\n")
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:2: malformed row: 2 tab-separated columns, expected 3$"):
    xr.read_xnli(str(tmp_path), "fr", "dev")
  path = _write(tmp_path, "xnli/test-fr.tsv", "a\tb\r\nno tab here\r\n")
  with pytest.raises(ValueError,
                     match=rf"^{re.escape(path)}:2: malformed row: 1 tab-separated columns, expected 2 or 3$"):
    xr.read_xnli(str(tmp_path), "fr", "test")


def test_numbered_lines_and_malformed_rows_are_public_helpers(tmp_path):
  """What the translation readers share with the official ones: lines split on \\n only, CRLF removed."""
  path = _write(tmp_path, "rows.tsv", "a\tb\r\n\nc\u2028d\r\n")
  assert xr.numbered_lines(path, "rows") == [(1, "a\tb"), (2, ""), (3, "c\u2028d")]
  assert str(xr.malformed(path, 3, "why")) == f"{path}:3: malformed row: why"
  with pytest.raises(errors.DataError, match=r"empty\.tsv is empty; expected rows$"):
    xr.numbered_lines(_write(tmp_path, "empty.tsv", "\n"), "rows")


# ----------------------------------------------------------------------------- panx / udpos


def test_panx_sentences_crlf_and_missing_final_blank_line(tmp_path):
  _write(tmp_path, "panx/train-en.tsv", b"London\tB-LOC\r\nis\tO\r\n\r\nJohn\tB-PER\r\nSmith\tI-PER\r\n\r\n\r\n"
                                        b"10:30\tO\r\nUN\tB-ORG")
  assert xr.read_panx(str(tmp_path), "en", "train") == [
      {"id": "panx-en-train-0", "tokens": ["London", "is"], "tags": ["B-LOC", "O"]},
      {"id": "panx-en-train-1", "tokens": ["John", "Smith"], "tags": ["B-PER", "I-PER"]},
      {"id": "panx-en-train-2", "tokens": ["10:30", "UN"], "tags": ["O", "B-ORG"]}]


def test_panx_test_has_tokens_only(tmp_path):
  _write(tmp_path, "panx/test-hi.tsv", "नई\nदिल्ली\n\nभारत\n")
  assert xr.read_panx(str(tmp_path), "hi", "test") == [
      {"id": "panx-hi-test-0", "tokens": ["नई", "दिल्ली"], "tags": None},
      {"id": "panx-hi-test-1", "tokens": ["भारत"], "tags": None}]


def test_panx_strips_language_prefix_only_when_every_token_has_it(tmp_path):
  _write(tmp_path, "panx/dev-de.tsv", "de:Berlin\tB-LOC\nde:ist\tO\n\nde:10:30\tO\n")
  assert [ex["tokens"] for ex in xr.read_panx(str(tmp_path), "de", "dev")] == [["Berlin", "ist"], ["10:30"]]
  _write(tmp_path, "panx/dev-fr.tsv", "fr:\tO\nParis\tB-LOC\n")  # released layout: a real token "fr:"
  assert xr.read_panx(str(tmp_path), "fr", "dev")[0]["tokens"] == ["fr:", "Paris"]


def test_udpos_as_written_by_official_preprocess(tmp_path):
  # udpos_preprocess writes no newline after the last token, then "\n": no final blank line.
  _write(tmp_path, "udpos/train-tr.tsv", "Ali\tPROPN\ngeldi\tVERB\n\nBen\tPRON\n.\tPUNCT\n")
  _write(tmp_path, "udpos/test-zh.tsv", "我\n来\n\n好\n")
  assert xr.read_udpos(str(tmp_path), "tr", "train") == [
      {"id": "udpos-tr-train-0", "tokens": ["Ali", "geldi"], "tags": ["PROPN", "VERB"]},
      {"id": "udpos-tr-train-1", "tokens": ["Ben", "."], "tags": ["PRON", "PUNCT"]}]
  assert xr.read("udpos", str(tmp_path), "zh", "test") == [
      {"id": "udpos-zh-test-0", "tokens": ["我", "来"], "tags": None},
      {"id": "udpos-zh-test-1", "tokens": ["好"], "tags": None}]


def test_tagging_line_without_tab_names_file_and_line(tmp_path):
  path = _write(tmp_path, "udpos/dev-en.tsv", "The\tDET\n\ncat NOUN\n")
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:3: malformed row: no tab between token and tag"):
    xr.read_udpos(str(tmp_path), "en", "dev")
  path = _write(tmp_path, "panx/train-ja.tsv", "東京\tB-LOC\tX\n")
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:1: malformed row: 3 tab-separated columns"):
    xr.read_panx(str(tmp_path), "ja", "train")


# ----------------------------------------------------------------------------- SQuAD-format QA


def _squad(docs):
  return json.dumps({"version": "1.1", "data": docs}, ensure_ascii=False)


def test_xquad_keeps_stripped_answers_and_unicode(tmp_path):
  ctx_ar, ctx_zh = "القاهرة هي عاصمة مصر.", "北京是中国的首都。"
  _write(tmp_path, "xquad/xquad.ar.json", _squad([
      {"paragraphs": [{"context": ctx_ar, "qas": [
          {"id": "q1", "question": "ما هي عاصمة مصر؟", "answers": [{"answer_start": 0, "text": ""}]}]}]},
      {"paragraphs": [{"context": ctx_zh, "qas": [
          {"id": "q2", "question": "中国的首都是哪里？", "answers": [{"answer_start": 0, "text": ""}]}]}]}]))
  assert xr.read_xquad(str(tmp_path), "ar", "test") == [
      {"id": "q1", "orig_id": "q1", "title": "", "context": ctx_ar, "question": "ما هي عاصمة مصر؟",
       "answers": {"text": [""], "answer_start": [0]}},
      {"id": "q2", "orig_id": "q2", "title": "", "context": ctx_zh, "question": "中国的首都是哪里？",
       "answers": {"text": [""], "answer_start": [0]}}]


def test_mlqa_and_squad_paths_titles_and_multiple_answers(tmp_path):
  ctx = "भारत की राजधानी नई दिल्ली है।"
  _write(tmp_path, "mlqa/MLQA_V1/dev/dev-context-hi-question-hi.json", _squad([
      {"title": "भारत", "paragraphs": [{"context": ctx, "qas": [
          {"id": "abc", "question": "राजधानी?", "answers": [{"answer_start": 16, "text": "नई दिल्ली"},
                                                             {"answer_start": 19, "text": "दिल्ली"}]}]}]}]))
  [ex] = xr.read_mlqa(str(tmp_path), "hi", "dev")
  assert ex == {"id": "abc", "orig_id": "abc", "title": "भारत", "context": ctx, "question": "राजधानी?",
                "answers": {"text": ["नई दिल्ली", "दिल्ली"], "answer_start": [16, 19]}}
  assert ctx[16:16 + len("नई दिल्ली")] == "नई दिल्ली" and ctx[19:].startswith("दिल्ली")
  _write(tmp_path, "squad/train-v1.1.json", _squad([{"title": "T", "paragraphs": [{"context": "c", "qas": [
      {"id": "s1", "question": "q", "answers": [{"answer_start": 0, "text": "c"}]}]}]}]))
  assert xr.read("squad", str(tmp_path), "en", "train")[0]["id"] == "s1"


def test_tydiqa_colliding_ids_get_deterministic_suffixes(tmp_path):
  qa = lambda i, q: {"id": i, "question": q, "answers": [{"answer_start": 0, "text": "ع"}]}
  # The split train files keep only the last '-' part of the id; they collide. "7-dup1" also exists already.
  _write(tmp_path, "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.ar.train.json", _squad([
      {"paragraphs": [{"context": "عربي", "qas": [qa("7", "a")]}]},
      {"paragraphs": [{"context": "عربي", "qas": [qa("7", "b"), qa("8", "c")]}]},
      {"paragraphs": [{"context": "عربي", "qas": [qa("7", "d"), qa("7-dup1", "e")]}]}]))
  got = xr.read_tydiqa(str(tmp_path), "ar", "train")
  assert [(ex["id"], ex["orig_id"], ex["question"]) for ex in got] == [
      ("7", "7", "a"), ("7-dup2", "7", "b"), ("8", "8", "c"), ("7-dup3", "7", "d"), ("7-dup1", "7-dup1", "e")]
  assert got == xr.read_tydiqa(str(tmp_path), "ar", "train")
  _write(tmp_path, "tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.ar.dev.json", _squad([
      {"paragraphs": [{"context": "عربي", "qas": [qa("x", "q")]}]}]))
  assert xr.read("tydiqa", str(tmp_path), "ar", "test")[0]["id"] == "x"


def test_qa_bad_structure_names_file(tmp_path):
  path = _write(tmp_path, "xquad/xquad.de.json", _squad([{"paragraphs": [{"context": "c", "qas": [{"id": "1"}]}]}]))
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}: not in SQuAD v1.1 format .*'question'"):
    xr.read_xquad(str(tmp_path), "de", "test")
  path = _write(tmp_path, "xquad/xquad.el.json", '{"data": [\n,]}')
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:2: not valid JSON"):
    xr.read_xquad(str(tmp_path), "el", "test")


# ----------------------------------------------------------------------------- bucc2018 / tatoeba


def test_bucc_dev_with_gold_and_test_without(tmp_path):
  _write(tmp_path, "bucc2018/de-en.dev.de", "de-000000001\tDer Hund bellt.\r\nde-000000002\tHallo \"Welt\"\r\n")
  _write(tmp_path, "bucc2018/de-en.dev.en", "en-000000001\tHello world\nen-000000002\tThe dog barks.\n")
  _write(tmp_path, "bucc2018/de-en.dev.gold", "de-000000001\ten-000000002\n")
  assert xr.read_bucc2018(str(tmp_path), "de", "dev") == {
      "source": [("de-000000001", "Der Hund bellt."), ("de-000000002", 'Hallo "Welt"')],
      "target": [("en-000000001", "Hello world"), ("en-000000002", "The dog barks.")],
      "gold": [("de-000000001", "en-000000002")]}
  _write(tmp_path, "bucc2018/zh-en.test.zh", "zh-000000001\t狗在叫。\n")
  _write(tmp_path, "bucc2018/zh-en.test.en", "en-000000001\tThe dog barks.\n")
  assert xr.read("bucc2018", str(tmp_path), "zh", "test") == {
      "source": [("zh-000000001", "狗在叫。")], "target": [("en-000000001", "The dog barks.")], "gold": None}


def test_bucc_errors(tmp_path):
  _write(tmp_path, "bucc2018/fr-en.dev.fr", "fr-1\tBonjour\n")
  path = _write(tmp_path, "bucc2018/fr-en.dev.en", "en-1\tHello\nen-2 Hello again\n")
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}:2: malformed row: 1 tab-separated columns, expected 2"):
    xr.read_bucc2018(str(tmp_path), "fr", "dev")
  _write(tmp_path, "bucc2018/fr-en.dev.en", "en-1\tHello\n")
  gold = str(tmp_path / "bucc2018/fr-en.dev.gold")
  with pytest.raises(FileNotFoundError, match=f"expected file {re.escape(gold)} does not exist"):
    xr.read_bucc2018(str(tmp_path), "fr", "dev")


def test_tatoeba_line_aligned_and_length_mismatch(tmp_path):
  _write(tmp_path, "tatoeba/ar-en.ar", "مرحبا\r\nشكرا\r\n")
  _write(tmp_path, "tatoeba/ar-en.en", "Hello\nThanks")
  assert xr.read_tatoeba(str(tmp_path), "ar", "test") == {"source": ["مرحبا", "شكرا"],
                                                           "target": ["Hello", "Thanks"]}
  _write(tmp_path, "tatoeba/hi-en.hi", "नमस्ते\n")
  _write(tmp_path, "tatoeba/hi-en.en", "Hello\nThanks\n")
  with pytest.raises(ValueError, match=r"hi-en\.hi has 1 lines but .*hi-en\.en has 2"):
    xr.read("tatoeba", str(tmp_path), "hi", "test")


# ----------------------------------------------------------------------------- registry and errors


def test_registry_languages_and_splits():
  counts = {task: len({lg for lgs in spec.languages.values() for lg in lgs}) for task, spec in xr.TASKS.items()}
  assert counts == {"xnli": 15, "pawsx": 7, "panx": 40, "udpos": 33, "xquad": 11, "mlqa": 7, "tydiqa": 9,
                    "squad": 1, "bucc2018": 4, "tatoeba": 36}
  splits = {task: sorted(spec.languages) for task, spec in xr.TASKS.items()}
  assert splits == {"xnli": ["dev", "test", "train"], "pawsx": ["dev", "test", "train"],
                    "panx": ["dev", "test", "train"], "udpos": ["dev", "test", "train"], "xquad": ["test"],
                    "mlqa": ["dev", "test"], "tydiqa": ["test", "train"], "squad": ["dev", "train"],
                    "bucc2018": ["dev", "test"], "tatoeba": ["test"]}
  assert xr.TASKS["xnli"].languages["train"] == ("en",) == xr.TASKS["pawsx"].languages["train"]
  assert set(xr.TASKS["tatoeba"].languages["test"]) == set(xr.PANX_LANGS) - {"en", "ms", "my", "yo"}
  assert len(xr.TASKS["panx"].languages["train"]) == 40 and len(xr.TASKS["tydiqa"].languages["train"]) == 9
  reader, langs = xr.TASKS["xquad"]
  assert reader is xr.read_xquad and langs == {"test": xr.XQUAD_LANGS}
  assert set(xr.TFDS_BUILDERS) == set(xr.TASKS) == set(xr.PATHS)


def test_unknown_task_language_and_split_errors(tmp_path):
  with pytest.raises(ValueError, match=r"unknown XTREME task 'xnlii'; valid tasks: bucc2018, mlqa, panx, pawsx, "
                                       r"squad, tatoeba, tydiqa, udpos, xnli, xquad$"):
    xr.read("xnlii", str(tmp_path), "en", "dev")
  with pytest.raises(ValueError, match=r"unknown language 'xx' for pawsx; valid languages: de en es fr ja ko zh$"):
    xr.read("pawsx", str(tmp_path), "xx", "dev")
  with pytest.raises(ValueError, match=r"xnli has no 'train' split for 'de'; languages with train: en$"):
    xr.read_xnli(str(tmp_path), "de", "train")
  with pytest.raises(ValueError, match=r"xquad has no split 'dev'; valid splits: test$"):
    xr.read_xquad(str(tmp_path), "en", "dev")
  with pytest.raises(ValueError, match=r"unknown language 'en' for tatoeba; valid languages: af ar"):
    xr.read_tatoeba(str(tmp_path), "en", "test")


@pytest.mark.parametrize("task,lg,split,rel,builder", [
    ("xnli", "en", "train", "xnli/train-en.tsv", "xtreme_xnli"),
    ("panx", "sw", "dev", "panx/dev-sw.tsv", "wikiann"),
    ("mlqa", "vi", "test", "mlqa/MLQA_V1/test/test-context-vi-question-vi.json", "mlqa"),
    ("tydiqa", "te", "test", "tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.te.dev.json", "tydi_qa"),
    ("tatoeba", "jv", "test", "tatoeba/jv-en.jv", "tatoeba"),
    ("bucc2018", "ru", "test", "bucc2018/ru-en.test.ru", "bucc"),
])
def test_missing_file_names_path_and_how_to_get_data(tmp_path, task, lg, split, rel, builder):
  with pytest.raises(FileNotFoundError) as e:
    xr.read(task, str(tmp_path), lg, split)
  msg = str(e.value)
  assert f"expected file {os.path.join(str(tmp_path), rel)} does not exist" in msg
  assert "scripts/download_data.sh" in msg and f"`{builder}`" in msg


def test_module_imports_no_jax_or_tensorflow():
  code = ("import sys, xtreme_jax.data.readers.xtreme_readers; "
          "bad = [m for m in ('jax', 'tensorflow', 'tensorflow_datasets') if m in sys.modules]; "
          "assert not bad, bad")
  subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- issue 9: bad data files


def test_bucc_blank_lines_are_skipped(tmp_path):
  # The official files can end with a blank line; one inside holds no id either: both are skipped.
  _write(tmp_path, "bucc2018/ru-en.dev.ru", "ru-1\tПривет\n\nru-2\tМир\n\n")
  _write(tmp_path, "bucc2018/ru-en.dev.en", "en-1\tHello\r\nen-2\tWorld\r\n\r\n")
  _write(tmp_path, "bucc2018/ru-en.dev.gold", "ru-1\ten-1\n\n")
  assert xr.read_bucc2018(str(tmp_path), "ru", "dev") == {
      "source": [("ru-1", "Привет"), ("ru-2", "Мир")], "target": [("en-1", "Hello"), ("en-2", "World")],
      "gold": [("ru-1", "en-1")]}


def test_non_utf8_files_name_line_and_byte(tmp_path):
  path = _write(tmp_path, "xnli/dev-de.tsv", b"a\tb\tneutral\r\nGr\xfc\xdfe\tb\tneutral\r\n")
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)}:2 \(byte 15\): not UTF-8 \(byte 0xfc: invalid "
                                             rf"start byte\); expected a UTF-8 text file of `text_a<TAB>text_b<TAB>"
                                             rf"label` rows$"):
    xr.read_xnli(str(tmp_path), "de", "dev")
  # A byte-order mark is not part of the text but counts in the byte offset.
  path = _write(tmp_path, "xquad/xquad.de.json", b'\xef\xbb\xbf{"data": [\n\n  "\xc3"]}')
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)}:3 \(byte 18\): not UTF-8 \(byte 0xc3"):
    xr.read_xquad(str(tmp_path), "de", "test")
  path = _write(tmp_path, "tr.tsv", b"a\tb\t\x80\n")
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)}:1 \(byte 4\): not UTF-8"):
    _ = TsvClassificationSource(path, "unused", ("x",)).rows


@pytest.mark.parametrize("task,lg,split,rel,data,expected", [
    ("xnli", "fr", "dev", "xnli/dev-fr.tsv", b"", "`text_a<TAB>text_b<TAB>label` rows"),
    ("pawsx", "ko", "test", "pawsx/test-ko.tsv", b"\r\n\r\n", "`text_a<TAB>text_b[<TAB>label]` rows"),
    ("panx", "ta", "train", "panx/train-ta.tsv", b"\n \n", "`token<TAB>TAG` per line, a blank line between"),
    ("udpos", "ja", "test", "udpos/test-ja.tsv", b"", "one token per line"),
    ("squad", "en", "train", "squad/train-v1.1.json", b"  \n", "SQuAD v1.1 JSON"),
    ("tatoeba", "fa", "test", "tatoeba/fa-en.fa", b"", "one sentence per line"),
    ("bucc2018", "zh", "test", "bucc2018/zh-en.test.zh", b"\n", "`id<TAB>sentence` lines"),
])
def test_empty_files_are_refused(tmp_path, task, lg, split, rel, data, expected):
  _write(tmp_path, "tatoeba/fa-en.en", "x\n")  # the other sides, not empty
  _write(tmp_path, "bucc2018/zh-en.test.en", "en-1\tx\n")
  path = _write(tmp_path, rel, data)
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)} is empty; expected {re.escape(expected)}"):
    xr.read(task, str(tmp_path), lg, split)


def test_squad_file_without_questions_is_refused(tmp_path):
  path = _write(tmp_path, "mlqa/MLQA_V1/dev/dev-context-de-question-de.json", _squad([{"paragraphs": []}]))
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)} holds no questions; expected SQuAD v1.1 JSON"):
    xr.read_mlqa(str(tmp_path), "de", "dev")


def test_unknown_tags_name_file_line_and_allowed_tags(tmp_path):
  assert len(xr.UPOS_TAGS) == 17 and "_" not in xr.UPOS_TAGS
  assert set(xr.PANX_TAGS) == {f"{p}-{t}" for p in "BI" for t in ("LOC", "ORG", "PER")} | {"O"}
  path = _write(tmp_path, "panx/train-nl.tsv", "Jan\tB-PER\n\nAmsterdam\tB-LOC\nof\tO\nIBM\tB-MISC\n")
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)}:5: malformed row: unknown tag 'B-MISC'; allowed "
                                             rf"tags: B-LOC B-ORG B-PER I-LOC I-ORG I-PER O$"):
    xr.read_panx(str(tmp_path), "nl", "train")
  path = _write(tmp_path, "udpos/dev-nl.tsv", "De\tDET\nkat\tNOUNS\n")
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)}:2: malformed row: unknown tag 'NOUNS'; allowed "
                                             rf"tags: ADJ ADP .* VERB X$"):
    xr.read_udpos(str(tmp_path), "nl", "dev")
  _write(tmp_path, "udpos/test-nl.tsv", "De\tGARBAGE\nkat\n")  # test files: tokens only, a stray column ignored
  assert xr.read_udpos(str(tmp_path), "nl", "test")[0]["tokens"] == ["De", "kat"]


def _squad_train(root, answers):
  """squad/train-v1.1.json with one question per (text, start) answer on the context "Paris is big."."""
  qas = [{"id": f"q{i}", "question": "?", "answers": [{"text": t, "answer_start": s}]} for i, (t, s) in
         enumerate(answers)]
  return _write(root, "squad/train-v1.1.json", _squad([{"title": "T", "paragraphs": [
      {"context": "Paris is big.", "qas": qas}]}]))


def test_training_answers_not_in_the_context_are_counted_and_refused(tmp_path, caplog):
  assert xr.MAX_BAD_ANSWER_FRACTION == 0.05
  good = [("Paris", 0)] * 17 + [("big", 0)]  # "big" is misplaced but found in the context: trained on, not counted
  path = _squad_train(tmp_path, good + [("Rome", 0), ("Paris", 0)])
  with caplog.at_level(logging.WARNING):
    assert len(xr.read_squad(str(tmp_path), "en", "train")) == 20  # 1 of 20 = 5%: logged once, not refused
  assert [r.getMessage() for r in caplog.records] == [
      f"{path}: 1 of 20 training questions have an answer that is not in their context (not at answer_start and "
      f"nowhere else), e.g. ids ['q18']; they are not trained on"]
  _squad_train(tmp_path, good + [("Rome", 0), ("", 0)])  # an empty answer cannot be trained on either
  with pytest.raises(errors.DataError, match=rf"^{re.escape(path)}: 2 of 20 training questions have an answer that "
                                             rf"is not in their context .*e\.g\. ids \['q18', 'q19'\]: more than the "
                                             rf"5% allowed; expected answers with text =="):
    xr.read_squad(str(tmp_path), "en", "train")
  _write(tmp_path, "squad/dev-v1.1.json", (tmp_path / "squad/train-v1.1.json").read_text())
  assert len(xr.read_squad(str(tmp_path), "en", "dev")) == 20  # evaluation files are not checked


def test_reader_errors_are_user_errors(tmp_path):
  with pytest.raises(errors.ConfigError):
    xr.read("nope", str(tmp_path), "en", "dev")
  with pytest.raises(errors.ConfigError):
    xr.read("xnli", str(tmp_path), "xx", "dev")
  with pytest.raises(errors.MissingInputError):
    xr.read("xnli", str(tmp_path), "de", "dev")
  _write(tmp_path, "xnli/dev-de.tsv", "a\tb\n")
  with pytest.raises(errors.DataError, match=r"dev-de\.tsv:1: malformed row"):
    xr.read("xnli", str(tmp_path), "de", "dev")
  _write(tmp_path, "xquad/xquad.de.json", "{")
  with pytest.raises(errors.DataError, match=r"xquad\.de\.json:1: not valid JSON: .* \(column 2\); expected SQuAD"):
    xr.read("xquad", str(tmp_path), "de", "test")
  _write(tmp_path, "tatoeba/fa-en.fa", "a\n")
  _write(tmp_path, "tatoeba/fa-en.en", "a\nb\n")
  with pytest.raises(errors.DataError, match="must be line-aligned"):
    xr.read("tatoeba", str(tmp_path), "fa", "test")
