"""Readers of the mBERT paper's tasks (Wu & Dredze 2019): CoNLL 2002 / 2003 NER, the Chinese NER set, MLDoc."""

import pytest

from xtreme_jax import errors
from xtreme_jax.data import conll_ner, mldoc
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
      ("日本の経済は成長した。", "物価は上がった。", "ECAT"),
      ("One sentence only", "", "GCAT")]
  assert docs[2]["id"] == "english.train.1000-2"
  with pytest.raises(errors.DataError, match=r"bad.dev:1: malformed row: unknown label 'XCAT'"):
    mldoc.read(_write(tmp_path, "bad.dev", "XCAT\ttext\n"))
