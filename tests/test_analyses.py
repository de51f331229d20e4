"""XTREME's analyses (evaluation/analyses.py): seen / unseen entities and tag trigrams, families and scripts."""

from xtreme_jax.evaluation import analyses
from xtreme_jax.evaluation.plots import language_family

TIER = "unit"  # conftest.py: this file's tier

TRAIN = [{"tokens": ["Paris", "is", "in", "France"], "tags": ["B-LOC", "O", "O", "B-LOC"]},
         {"tokens": ["Anna", "Meyer", "works"], "tags": ["B-PER", "I-PER", "O"]}]


def test_entities_are_seen_by_their_string_and_recalled_exactly():
  tokens = [["Paris", "und", "Berlin"], ["Anna", "Meyer", "lacht"]]
  gold = [["B-LOC", "O", "B-LOC"], ["B-PER", "I-PER", "O"]]
  predicted = [["B-LOC", "O", "B-ORG"], ["B-PER", "O", "O"]]
  got = analyses.entities_seen_unseen(TRAIN, tokens, gold, predicted)
  # seen: Paris (found), Anna Meyer (cut short: missed); unseen: Berlin (wrong type: missed)
  assert got == {"seen": {"entities": 2, "recall": 50.0}, "unseen": {"entities": 1, "recall": 0.0}}


def test_tag_trigrams_split_tokens_into_seen_and_unseen():
  train = [{"tokens": ["a", "b"], "tags": ["DET", "NOUN"]}]  # trigrams (<s> DET NOUN), (DET NOUN </s>)
  gold = [["DET", "NOUN"], ["NOUN", "VERB"]]
  predicted = [["DET", "VERB"], ["NOUN", "VERB"]]
  got = analyses.pos_trigrams_seen_unseen(train, gold, predicted)
  assert got == {"seen": {"tokens": 2, "accuracy": 50.0}, "unseen": {"tokens": 2, "accuracy": 100.0}}


def test_groups_and_report(tmp_path):
  scores = {"de": 80.0, "nl": 70.0, "ru": 60.0, "ja": 40.0}
  assert analyses.by_group(scores, language_family) == {"IE: Germanic": 75.0, "IE: Slavic": 60.0, "Japonic": 40.0}
  assert analyses.by_group(scores, lambda lg: analyses.SCRIPT[lg]) == {"Latin": 75.0, "Cyrillic": 60.0,
                                                                      "Japanese": 40.0}
  seen = {"panx": {"de": {"seen": {"entities": 2, "recall": 50.0}, "unseen": {"entities": 1, "recall": 0.0}}}}
  path = analyses.write_report(str(tmp_path), {"panx": scores}, seen)
  text = open(path, encoding="utf-8").read()
  assert "| IE: Germanic | 75.0 |" in text and "| script: Cyrillic | 60.0 |" in text
  assert "| de | 50.0 | 0.0 | 2 | 1 |" in text
