"""The mBERT paper's tasks in the registry (registry/mbert.py) and their data object on the bundled sample."""

import os

import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers.mbert_data import MbertData
from xtreme_jax.registry.mbert import MBERT, PARSING_TREEBANKS

TIER = "unit"  # conftest.py: this file's tier

DATA = MbertData(data_dir=paths.sample_mbert_dir())
SAMPLE = {("mldoc", "en", "train"): 8, ("mldoc", "en", "dev"): 4, ("mldoc", "de", "test"): 4,
          ("mldoc", "fr", "test"): 4, ("mldoc", "zh", "test"): 4, ("ner", "en", "train"): 4, ("ner", "en", "dev"): 2,
          ("ner", "de", "test"): 2, ("ner", "es", "test"): 2, ("ner", "nl", "test"): 2, ("ner", "zh", "test"): 2,
          ("pos", "en", "train"): 4, ("pos", "de", "test"): 2, ("pos", "es", "test"): 2,
          ("parsing", "en", "train"): 4, ("parsing", "de", "test"): 2}


def test_the_registry_holds_the_papers_languages():
  assert MBERT.task("mldoc").test_languages == ("de", "en", "es", "fr", "it", "ja", "ru", "zh")
  assert MBERT.task("ner").test_languages == ("en", "de", "es", "nl", "zh")
  assert len(MBERT.task("pos").test_languages) == 15 and len(PARSING_TREEBANKS) == 31
  assert all(t.languages["train"] == ("en",) for t in MBERT.tasks)  # zero-shot from English
  assert MBERT.task("ner").file("dev", "de") == "conll2003/deu.testa"


@pytest.mark.parametrize("source,count", sorted(SAMPLE.items()))
def test_every_sample_file_reads(source, count):
  assert DATA.available(*source)
  assert len(DATA.read(*source)) == count


def test_records_of_each_task():
  en = DATA.read("ner", "en", "train")
  assert en[3]["tokens"][:2] == ["Anna", "Maria"] and en[3]["tags"][:2] == ["B-PER", "B-PER"]  # IOB1 -> BIO
  assert DATA.read("ner", "zh", "test")[1]["tags"][:2] == ["B-PER", "I-PER"]
  doc = DATA.read("mldoc", "zh", "test")[0]  # no Punkt model for Chinese: English's, which does not split at 。
  assert (doc["text_a"], doc["text_b"], doc["label"]) == ("这家汽车制造商公布了更高的季度利润。其股价早盘上涨百分之四。", "", "CCAT")
  doc = DATA.read("mldoc", "de", "test")[1]  # German Punkt
  assert (doc["text_a"], doc["text_b"]) == ("Die Inflation sank im März auf zwei Prozent.",
                                            "Die Zentralbank ließ die Zinsen unverändert.")
  assert DATA.read("pos", "de", "test")[0]["tags"] == ["DET", "NOUN", "VERB", "PUNCT"]
  assert DATA.read("parsing", "en", "test")[1]["heads"] == [2, 0, 4, 2, 2]


def test_missing_files_and_languages_are_named(tmp_path):
  data = MbertData(data_dir=str(tmp_path))
  with pytest.raises(errors.MissingInputError, match=r"mldoc/italian.test does not exist; it comes from the MLDoc"):
    data.read("mldoc", "it", "test")
  assert not data.available("pos", "sv", "test")
  with pytest.raises(errors.ConfigError, match="ner has no train data for 'de'"):
    DATA.location("ner", "de", "train")
  assert os.path.basename(DATA.location("parsing", "zh", "test")) == "zh_gsd-ud-test.conllu"


def test_original_latin1_ner_files_read_from_the_layout(tmp_path):
  """The original CoNLL-2002 / German CoNLL-2003 files are Latin-1; the data object reads them as they come."""
  for stem, word in (("conll2002/esp", "Peñarol"), ("conll2002/ned", "Curaçao"), ("conll2003/deu", "Düsseldorf")):
    (tmp_path / stem).parent.mkdir(exist_ok=True)
    (tmp_path / f"{stem}.testb").write_bytes(f"{word} B-LOC\n. O\n".encode("latin-1"))
  data = MbertData(data_dir=str(tmp_path))
  assert [data.read("ner", lg, "test")[0]["tokens"][0] for lg in ("es", "nl", "de")] == ["Peñarol", "Curaçao",
                                                                                        "Düsseldorf"]


def test_pos_selects_on_token_accuracy_as_it_is_scored():
  from xtreme_jax.runs import task_kinds
  from xtreme_jax.registry import XTREME
  pos = task_kinds.of(MBERT.task("pos"))
  assert pos.selection == ("dev_accuracy", "accuracy")
  gold = DATA.read("pos", "en", "dev")
  predicted = [["NOUN"] * len(s["tags"]) for s in gold]
  assert pos.dev_score(gold, predicted) == pytest.approx(100 * 2 / 8)  # 2 of the dev set's 8 tokens are nouns
  assert task_kinds.of(XTREME.task("udpos")).selection == ("dev_f1", "F1")  # XTREME keeps the official choice
