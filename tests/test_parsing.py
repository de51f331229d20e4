"""Dependency parsing pieces: MST decoding against brute force, CoNLL-U reading, UAS / LAS by hand."""

import itertools

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data import conllu
from xtreme_jax.evaluation import parsing

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
    score = parsing.tree_score(scores, heads)
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
    heads = parsing.mst_heads(scores)
    best, _ = _brute_force(scores)
    assert _is_single_root_tree(list(heads)), heads
    assert parsing.tree_score(scores, heads) == pytest.approx(best)


def test_mst_contracts_a_cycle():
  # words 1 and 2 prefer each other (a cycle); entering it from the root at 1 is best
  scores = np.full((4, 4), -5.0)
  scores[2, 1], scores[1, 2] = 10.0, 10.0
  scores[0, 1], scores[0, 2] = 2.0, 1.0
  scores[1, 3] = 4.0
  assert list(parsing.mst_heads(scores)) == [0, 0, 1, 1]


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
