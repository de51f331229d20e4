"""The parser's features (data/features/parsing_features.py): first subwords, padding, the paper's length thresholds."""

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data.features import parsing_features as pf
from xtreme_jax.data import paths
from xtreme_jax.data.vocab.vocabularies import load_vocabulary

TIER = "unit"  # conftest.py: this file's tier

UPOS = ("DET", "NOUN", "VERB", "PUNCT")


@pytest.fixture(scope="module")
def vocab():
  return load_vocabulary(paths.sample_vocab())


def _sentence(words, heads=None, deprels=None):
  return {"id": "s1", "tokens": words, "upos": ["NOUN"] * len(words), "heads": heads, "deprels": deprels}


def test_words_sit_on_their_first_subword_with_coarse_relations(vocab):
  record = {"id": "s1", "tokens": ["The", "unbelievably", "cat", "."], "upos": ["DET", "NOUN", "NOUN", "PUNCT"],
            "heads": [3, 3, 0, 3], "deprels": ["det", "amod", "root", "punct"]}
  record["deprels"][0] = "det:poss"
  f = pf.parse_features(record, vocab, max_words=6, max_subwords=24, upos=UPOS)
  pieces = [vocab.encode(w) for w in record["tokens"]]
  expected = np.cumsum([1] + [len(p) for p in pieces[:-1]])  # after [CLS] / <s>
  assert list(f["word_starts"][:4]) == list(expected) and list(f["word_starts"][4:]) == [0, 0]
  ids = list(f["input_ids"])
  for start, p in zip(expected, pieces):
    assert ids[start:start + len(p)] == list(p)
  assert list(f["word_mask"]) == [1, 1, 1, 1, 0, 0] and list(f["heads"]) == [3, 3, 0, 3, 0, 0]
  rels = list(pf.UD_RELATIONS)
  assert list(f["rels"][:4]) == [rels.index("det"), rels.index("amod"), rels.index("root"), rels.index("punct")]
  assert list(f["upos"][:4]) == [0, 1, 1, 3]
  assert f["input_mask"].sum() == sum(map(len, pieces)) + 2


def test_length_thresholds_leave_long_sentences_out(vocab):
  short, long_ = _sentence(["a"] * 5), _sentence(["a"] * 141)
  assert pf.fits(long_, vocab, pf.EVAL_MAX_WORDS, pf.EVAL_MAX_SUBWORDS) == "141 words > 140"
  assert pf.parse_features(long_, vocab, pf.EVAL_MAX_WORDS, pf.EVAL_MAX_SUBWORDS) is None
  kept, dropped = pf.evaluation_sentences([short, long_], vocab)
  assert kept == [short] and dropped == 1
  assert pf.fits(_sentence(["a"] * 20), vocab, 140, 10).endswith("subwords > 10")


def test_unknown_relations_name_the_sentence(vocab):
  record = _sentence(["a", "b"], [0, 1], ["root", "nonsense:x"])
  with pytest.raises(errors.DataError, match=r"sentence s1: unknown relation 'nonsense'"):
    pf.parse_features(record, vocab, 4, 16)
