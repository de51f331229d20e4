"""Readers of the mBERT paper's tasks (Wu & Dredze 2019): CoNLL 2002 / 2003 NER, the Chinese NER set, MLDoc."""

import pytest

from xtreme_jax import errors
from xtreme_jax.data.readers import conll_ner, mldoc
from xtreme_jax.evaluation import metrics

TIER = "unit"  # conftest.py: this file's tier

# CoNLL-2003 German: word lemma POS chunk NER, IOB1 (chunks start with I-; B- separates adjacent chunks)
GERMAN = """-DOCSTART- -X- -X- -X- O

Peter peter NE I-NP I-PER
Müller müller NE I-NP I-PER
Paul paul NE I-NP B-PER
besucht besuchen VVFIN I-VP O
Berlin berlin NE I-NP I-LOC
. . $. O O

Die die ART I-NP O
EU eu NE I-NP I-ORG
"""
# CoNLL-2002 Spanish: word NER, already BIO
SPANISH = "La O\nComisión B-ORG\nEuropea I-ORG\nen O\nMadrid B-LOC\n"
# the Chinese set: character NER, `N` outside
CHINESE = "我 N\n在 N\n北 B-LOC\n京 I-LOC\n"


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_iob1_files_read_as_bio_and_bio_files_unchanged(tmp_path):
  de = conll_ner.read(_write(tmp_path, "deu.testa", GERMAN))
  assert [s["tokens"] for s in de] == [["Peter", "Müller", "Paul", "besucht", "Berlin", "."], ["Die", "EU"]]
  assert de[0]["tags"] == ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "O"]
  assert de[1]["tags"] == ["O", "B-ORG"] and de[1]["id"] == "deu.testa-1"
  es = conll_ner.read(_write(tmp_path, "esp.testb", SPANISH))
  assert es[0]["tags"] == ["O", "B-ORG", "I-ORG", "O", "B-LOC"]
  zh = conll_ner.read(_write(tmp_path, "msra_test.txt", CHINESE))
  assert zh[0]["tags"] == ["O", "O", "B-LOC", "I-LOC"]


def test_predicted_spans_are_repaired_before_scoring():
  predicted = ["I-PER", "I-PER", "O", "I-LOC", "I-ORG", "B-MISC", "I-MISC"]
  assert conll_ner.to_bio(predicted) == ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "B-MISC", "I-MISC"]
  gold = ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "B-MISC", "I-MISC"]
  assert metrics.entity_f1([conll_ner.to_bio(predicted)], [gold])["f1"] == pytest.approx(100.0)


def test_bad_ner_rows_name_file_and_line(tmp_path):
  with pytest.raises(errors.DataError, match=r"bad.txt:2: malformed row: unknown NER tag 'B-FOO'"):
    conll_ner.read(_write(tmp_path, "bad.txt", "a O\nb B-FOO\n"))
  with pytest.raises(errors.DataError, match=r"one.txt:1: malformed row: a word without a tag"):
    conll_ner.read(_write(tmp_path, "one.txt", "lonely\n"))


def test_mldoc_reads_the_first_two_sentences_as_a_pair(tmp_path):
  rows = ("CCAT\tThe U.S. company said profits rose 3.5 percent. Shares fell! Analysts were surprised.\n"
          "\n"
          "ECAT\t日本の経済は成長した。物価は上がった。失業率は下がった。\n"
          "GCAT\tOne sentence only\n")
  docs = mldoc.read(_write(tmp_path, "english.train.1000", rows))
  assert [(d["text_a"], d["text_b"], d["label"]) for d in docs] == [
      ("The U.S. company said profits rose 3.5 percent.", "Shares fell!", "CCAT"),
      ("日本の経済は成長した。物価は上がった。失業率は下がった。", "", "ECAT"),  # Punkt does not split at 。
      ("One sentence only", "", "GCAT")]
  assert docs[2]["id"] == "english.train.1000-2"
  with pytest.raises(errors.DataError, match=r"bad.dev:1: malformed row: unknown label 'XCAT'"):
    mldoc.read(_write(tmp_path, "bad.dev", "XCAT\ttext\n"))


# generate_documents.py (facebookresearch/MLDoc) under Python 3 writes
# '{}{}{}\n'.format(label, '\t', doc.encode('utf-8')): the repr of the UTF-8 bytes, quoted b"..." when the text
# holds ' and no ", else b'...' with \' escaped; \t, \n, \\ and every non-ASCII byte escaped.
GENERATED = ("MCAT\tb'Die Deutsche B\\xc3\\xb6rse meldete z.B. 5 Mio. Euro Gewinn. Die Aktie stieg.'\n"
             "CCAT\tb\"L'Or\\xc3\\xa9al gagne 5 %. Les actions montent.\"\n"
             "ECAT\tb'Preise\\tstiegen. Der \\\\ Index fiel.'\n"
             "GCAT\tb'Er sagte \"nein\". Das ist O\\'Neills Sache.'\n")


def test_mldoc_generated_row_fixture_is_the_scripts_format():
  docs = ("Die Deutsche Börse meldete z.B. 5 Mio. Euro Gewinn. Die Aktie stieg.",
          "L'Oréal gagne 5 %. Les actions montent.", "Preise\tstiegen. Der \\ Index fiel.",
          "Er sagte \"nein\". Das ist O'Neills Sache.")
  labels = ("MCAT", "CCAT", "ECAT", "GCAT")
  rows = ["{}{}{}\n".format(label, "\t", doc.encode("utf-8")) for label, doc in zip(labels, docs)]
  assert "".join(rows) == GENERATED


def test_mldoc_decodes_the_bytes_literals_generate_documents_writes(tmp_path):
  docs = mldoc.read(_write(tmp_path, "german.test", GENERATED))
  assert [(d["text_a"], d["text_b"], d["label"]) for d in docs] == [
      ("Die Deutsche Börse meldete z.B. 5 Mio. Euro Gewinn.", "Die Aktie stieg.", "MCAT"),
      ("L'Oréal gagne 5 %.", "Les actions montent.", "CCAT"),
      ("Preise\tstiegen.", "Der \\ Index fiel.", "ECAT"),
      ('Er sagte "nein".', "Das ist O'Neills Sache.", "GCAT")]
  plain = mldoc.read(_write(tmp_path, "german.dev", "MCAT\tDie Deutsche Börse meldete Gewinne. Die Aktie stieg.\n"))
  assert (plain[0]["text_a"], plain[0]["text_b"]) == ("Die Deutsche Börse meldete Gewinne.", "Die Aktie stieg.")


@pytest.mark.parametrize("row,why", [
    ("CCAT\tb'Die Aktie stieg.\n", r"bad.test:2: malformed row: a bytes literal b'...' that does not parse"),
    ("CCAT\tb'B\\xf6rse'\n", r"bad.test:2: malformed row: the bytes literal is not UTF-8 \(byte 1: 0xf6"),
    ("CCAT\tb'a', b'b'\n", r"bad.test:2: malformed row: tuple where a bytes literal b'...' was expected")],
    ids=["unterminated", "not_utf8", "tuple"])
def test_mldoc_malformed_bytes_literals_name_file_and_line(tmp_path, row, why):
  with pytest.raises(errors.DataError, match=why):
    mldoc.read(_write(tmp_path, "bad.test", "GCAT\tb'Fine.'\n" + row))


def test_mldoc_splits_with_punkt_of_the_files_language(tmp_path):
  text = "Mr. Smith said the U.S. Treasury would sell bonds. Prices fell on Monday. Analysts were surprised."
  assert mldoc.sentences(text) == ["Mr. Smith said the U.S. Treasury would sell bonds.", "Prices fell on Monday."]
  german = "Der Umsatz stieg z.B. um 5 Mio. Euro. Die Aktie fiel."
  assert mldoc.read(_write(tmp_path, "german.dev", f"ECAT\t{german}\n"))[0]["text_a"] == \
      "Der Umsatz stieg z.B. um 5 Mio. Euro."  # German Punkt: `z.B.`, `Mio.` are abbreviations
  assert mldoc.sentences(german, language="en")[0] == "Der Umsatz stieg z.B."  # English Punkt: they are not
  assert mldoc.sentences("Акции выросли на 5 млн. руб. в т.ч. Газпром. Рынок упал.", language="ru") == [
      "Акции выросли на 5 млн. руб. в т.ч. Газпром.", "Рынок упал."]
  chinese = "这家汽车制造商公布了更高的季度利润。其股价早盘上涨百分之四。"  # no Punkt model: English's, one sentence
  zh = mldoc.read(_write(tmp_path, "chinese.test", f"CCAT\t{chinese}\n"))
  assert (zh[0]["text_a"], zh[0]["text_b"]) == (chinese, "")
  assert mldoc.punkt_model("ja") == mldoc.punkt_model("chinese") == "english" and mldoc.punkt_model("es") == "spanish"
  with pytest.raises(errors.ConfigError, match="no sentence splitter for language 'xx'"):
    mldoc.sentences(text, language="xx")


# The original CoNLL-2002 files (esp.*, ned.*) and the German CoNLL-2003 ones are Latin-1.
SPANISH_LATIN1 = "-DOCSTART- O\nEspaña B-LOC\ny O\nMüller B-PER\n\nSeñor O\n".encode("latin-1")


def _write_bytes(tmp_path, name, data):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def test_original_latin1_conll_files_read(tmp_path):
  assert b"Espa\xf1a" in SPANISH_LATIN1 and b"M\xfcller" in SPANISH_LATIN1  # one byte each, not UTF-8
  for name in ("esp.train", "ned.testa", "deu.testb"):
    sentences = conll_ner.read(_write_bytes(tmp_path, name, SPANISH_LATIN1))
    assert [s["tokens"] for s in sentences] == [["España", "y", "Müller"], ["Señor"]], name
  utf8_copy = conll_ner.read(_write_bytes(tmp_path, "esp.testa", SPANISH_LATIN1.decode("latin-1").encode("utf-8")))
  assert utf8_copy[0]["tokens"] == ["España", "y", "Müller"]  # a converted copy of an original reads as UTF-8
  renamed = _write_bytes(tmp_path, "spanish_train.txt", SPANISH_LATIN1)
  assert conll_ner.read(renamed, encoding="latin-1")[1]["tokens"] == ["Señor"]
  with pytest.raises(errors.DataError, match=r"spanish_train.txt:2 \(byte 17\): not UTF-8 \(byte 0xf1.*"
                     r"Latin-1: read it with encoding='latin-1'"):
    conll_ner.read(renamed)
  with pytest.raises(errors.DataError, match=r"esp.train:2 \(byte 17\): not ascii \(byte 0xf1"):
    conll_ner.read(_write_bytes(tmp_path, "esp.train", SPANISH_LATIN1), encoding="ascii")
  with pytest.raises(errors.ConfigError, match="unknown encoding 'latin-9x'"):
    conll_ner.read(renamed, encoding="latin-9x")
