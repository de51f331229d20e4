"""Dependency parsing pieces: MST decoding against brute force, CoNLL-U reading, UAS / LAS by hand."""

import itertools

import numpy as np
import pytest

from xtreme_jax import errors, trees
from xtreme_jax.data.readers import conllu
from xtreme_jax.data.features import parsing_features as pf
from xtreme_jax.data import paths
from xtreme_jax.data.readers.mbert_data import MbertData
from xtreme_jax.data.vocab.vocabularies import load_vocabulary
from xtreme_jax.evaluation import parsing
from xtreme_jax.registry.mbert import PARSING_TREEBANKS

TIER = "unit"  # conftest.py: this file's tier


def _is_single_root_tree(heads):
  n = len(heads) - 1
  if sum(1 for d in range(1, n + 1) if heads[d] == 0) != 1:
    return False
  for d in range(1, n + 1):
    seen, node = set(), d
    while node != 0:
      if node in seen:
        return False
      seen.add(node)
      node = heads[node]
  return True


def _brute_force(scores):
  n = scores.shape[0] - 1
  best, best_heads = -np.inf, None
  for choice in itertools.product(range(n + 1), repeat=n):
    heads = (0,) + choice
    if any(heads[d] == d for d in range(1, n + 1)) or not _is_single_root_tree(heads):
      continue
    score = trees.tree_score(scores, heads)
    if score > best:
      best, best_heads = score, heads
  return best, best_heads


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_mst_equals_brute_force_over_every_single_root_tree(n):
  rng = np.random.default_rng(n)
  for trial in range(40 if n < 5 else 12):
    scores = rng.normal(size=(n + 1, n + 1))
    if trial % 3 == 0:  # root arcs scored high: the unconstrained MST would attach several words to the root
      scores[0] += 3.0
    heads = trees.mst_heads(scores)
    best, _ = _brute_force(scores)
    assert _is_single_root_tree(list(heads)), heads
    assert trees.tree_score(scores, heads) == pytest.approx(best)


def test_mst_contracts_a_cycle():
  # words 1 and 2 prefer each other (a cycle); entering it from the root at 1 is best
  scores = np.full((4, 4), -5.0)
  scores[2, 1], scores[1, 2] = 10.0, 10.0
  scores[0, 1], scores[0, 2] = 2.0, 1.0
  scores[1, 3] = 4.0
  assert list(trees.mst_heads(scores)) == [0, 0, 1, 1]


CONLLU = """# sent_id = s1
# text = The cat's toy fell.
1\tThe\tthe\tDET\t_\t_\t3\tdet\t_\t_
2-3\tcat's\t_\t_\t_\t_\t_\t_\t_\t_
2\tcat\tcat\tNOUN\t_\t_\t4\tnmod:poss\t_\t_
3\t's\t's\tPART\t_\t_\t2\tcase\t_\t_
4\ttoy\ttoy\tNOUN\t_\t_\t5\tnsubj\t_\t_
4.1\tgone\t_\tVERB\t_\t_\t_\t_\t5:conj\t_
5\tfell\tfall\tVERB\t_\t_\t0\troot\t_\t_
6\t.\t.\tPUNCT\t_\t_\t5\tpunct\t_\t_

# sent_id = s2
1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_
2\t!\t!\tPUNCT\t_\t_\t1\tpunct\t_\t_
"""


def test_conllu_skips_multiword_tokens_and_empty_nodes(tmp_path):
  path = tmp_path / "en_ewt-ud-test.conllu"
  path.write_text(CONLLU, encoding="utf-8")
  first, second = conllu.read(str(path))
  assert first["id"] == "s1" and first["tokens"] == ["The", "cat", "'s", "toy", "fell", "."]
  assert first["heads"] == [3, 4, 2, 5, 0, 5] and first["deprels"][1] == "nmod:poss"
  assert second["upos"] == ["INTJ", "PUNCT"]


def test_attachment_scores_exclude_punct_and_sym_and_compare_coarse_labels(tmp_path):
  path = tmp_path / "gold.conllu"
  path.write_text(CONLLU, encoding="utf-8")
  gold = conllu.read(str(path))
  # sentence 1: word 1 head wrong; word 2 label `nmod` (coarse of nmod:poss: right); word 4 label wrong;
  # the PUNCT words are wrong but not counted. sentence 2: right.
  predicted_heads = [[2, 4, 2, 5, 0, 1], [0, 2]]
  predicted_labels = [["det", "nmod", "case", "obj", "root", "det"], ["root", "det"]]
  got = parsing.attachment_scores([s["heads"] for s in gold], [s["deprels"] for s in gold], predicted_heads,
                                  predicted_labels, [s["upos"] for s in gold])
  assert got["words"] == 6  # 5 + 1 scored words
  assert got["uas"] == pytest.approx(100 * 5 / 6)
  assert got["las"] == pytest.approx(100 * 4 / 6)


@pytest.mark.parametrize("heads,why", [
    ("2 1 0", "cycle through word"),
    ("0 0 2", "2 words attached to the root"),
    ("2 3 1", "0 words attached to the root"),
    ("0 1 9", "word 3 has head 9"),
])
def test_gold_trees_with_a_cycle_or_two_roots_name_the_sentence(tmp_path, heads, why):
  rows = "".join(f"{i}\tw{i}\t_\tNOUN\t_\t_\t{h}\tdep\t_\t_\n" for i, h in enumerate(heads.split(), 1))
  path = tmp_path / "bad.conllu"
  path.write_text("# sent_id = doc7-s3\n" + rows + "\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=rf"bad.conllu:2: sentence doc7-s3: .*{why}"):
    conllu.read(str(path))


def test_conllu_malformed_lines_name_file_and_line(tmp_path):
  path = tmp_path / "x.conllu"
  path.write_text("1\tw\t_\tNOUN\t_\t_\t0\troot\t_\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"x.conllu:1: sentence x.conllu:1: 9 tab-separated fields"):
    conllu.read(str(path))
  path.write_text("# sent_id = s1\n1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
                  "3\tsleeps\tsleep\tVREB\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"x.conllu:4: sentence s1: UPOS 'VREB'; expected one of the 17 UD "
                                             r"tags \(ADJ ADP .* X\)$"):
    conllu.read(str(path))


def _rows(words, heads):
  return "".join(f"{i}\t{w}\t_\tNOUN\t_\t_\t{h}\tdep\t_\t_\n" for i, (w, h) in enumerate(zip(words, heads), 1))


def test_the_treebanks_of_a_language_are_read_as_one(tmp_path):
  """UD v2.2 treebanks of a language concatenated, as Ahmad et al. (2019, Appendix; their prepare_data.py) and
  the mBERT paper's authors prepare them: Spanish AnCora then GSD; a missing file is skipped."""
  assert [folder for folder, _ in PARSING_TREEBANKS["es"]] == ["UD_Spanish-AnCora", "UD_Spanish-GSD"]
  assert len(PARSING_TREEBANKS["cs"]) == 4 and len(PARSING_TREEBANKS["en"]) == 1 and len(PARSING_TREEBANKS) == 31
  root = tmp_path / "ud-treebanks-v2.2"
  (root / "UD_Spanish-GSD").mkdir(parents=True)
  (root / "UD_Spanish-GSD" / "es_gsd-ud-test.conllu").write_text(
      "# sent_id = gsd-1\n" + _rows(["Hola"], [0]) + "\n", encoding="utf-8")
  data = MbertData(data_dir=str(tmp_path))
  assert data.available("parsing", "es", "test")
  assert data.location("parsing", "es", "test").endswith("es_gsd-ud-test.conllu")  # the first on disk
  assert [s["id"] for s in data.read("parsing", "es", "test")] == ["gsd-1"]
  (root / "UD_Spanish-AnCora").mkdir()
  (root / "UD_Spanish-AnCora" / "es_ancora-ud-test.conllu").write_text(
      "# sent_id = ancora-1\n" + _rows(["Sí", "."], [0, 1]) + "\n", encoding="utf-8")
  assert [s["id"] for s in data.read("parsing", "es", "test")] == ["ancora-1", "gsd-1"]
  assert [s["id"] for s in data.read("parsing_gold_pos", "es", "test")] == ["ancora-1", "gsd-1"]
  assert [s["id"] for s in MbertData(data_dir=str(tmp_path), concatenate_treebanks=False).read(
      "parsing", "es", "test")] == ["ancora-1"]
  assert not data.available("parsing", "de", "test")


def test_truncation_keeps_the_first_words_and_marks_heads_cut_away():
  record = {"id": "s", "tokens": ["a", "b", "c", "d"], "upos": ["NOUN"] * 4, "heads": [2, 0, 4, 2],
            "deprels": ["det", "root", "amod", "obj"]}
  cut = conllu.truncate(record, 3)
  assert cut == {"id": "s", "tokens": ["a", "b", "c"], "upos": ["NOUN"] * 3, "heads": [2, 0, -1],
                 "deprels": ["det", "root", "amod"]}
  assert conllu.truncate(record, 4) == record


def test_long_training_sentences_are_truncated_to_the_words_that_fit():
  """The authors' training windows (crosslingual-nlp, ParsingDataset.process_example): words are added while
  they fit, the rest cut; here the window holds [CLS] + subwords + [SEP] within `max_subwords`."""
  vocab = load_vocabulary(paths.sample_vocab())
  words = ["unbelievably", "cat", "the", "dog", "and", "cat"] * 5
  record = {"id": "s", "tokens": words, "upos": ["NOUN"] * 30, "heads": [0] + [1] * 29,
            "deprels": ["root"] + ["dep"] * 29}
  record["heads"][3] = 20  # word 4 hangs on a word past the cut
  pieces = [len(vocab.encode(w)) for w in words]
  assert pf.parse_features(record, vocab, 30, 24) is None  # evaluation: a sentence that does not fit is left out
  f = pf.parse_features(record, vocab, 30, 24, truncate=True)
  kept = int(f["word_mask"].sum())
  assert 0 < kept < 30 and sum(pieces[:kept]) + 2 <= 24 < sum(pieces[:kept + 1]) + 2
  assert int(f["input_mask"].sum()) == sum(pieces[:kept]) + 2
  assert list(f["heads"][:kept]) == [0, 1, 1, -1] + [1] * (kept - 4)
  assert list(f["word_mask"][kept:]) == [0] * (30 - kept)

