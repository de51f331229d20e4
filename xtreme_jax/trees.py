"""Dependency trees, shared by the parser (decoding) and the parsing data and scores (relations).

`mst_heads(scores)` decodes a biaffine parser's arc scores into the best
tree with exactly one word attached to the root: Chu-Liu/Edmonds' maximum
spanning arborescence (recursive cycle contraction) on scores whose root
arcs are lowered by a constant larger than any difference in tree scores,
so the best tree uses one root arc and, among single-root trees, the order
by score is unchanged (the single-root constraint of UD; Zmigrod et al.
2020 discuss the same reduction). `scores[h, d]` scores head h for word d;
index 0 is the root, words are 1..n; the result `heads[d]` (heads[0] = 0).
`coarse` is a UD relation's universal part. Numpy only.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from xtreme_jax import errors


def _cycle(heads: np.ndarray) -> Optional[list[int]]:
  """A cycle of `heads` (node 0 the root, heads[0] ignored) as a list of nodes, or None."""
  n = len(heads)
  state = np.zeros(n, np.int8)  # 0 unseen, 1 on the current path, 2 done
  state[0] = 2
  for start in range(1, n):
    path, node = [], start
    while state[node] == 0:
      state[node] = 1
      path.append(node)
      node = int(heads[node])
    if state[node] == 1:  # came back to the current path: the cycle is its tail from `node`
      return path[path.index(node):]
    for p in path:
      state[p] = 2
  return None


def _arborescence(scores: np.ndarray) -> np.ndarray:
  """Chu-Liu/Edmonds on `scores` (node 0 the root, -inf for impossible arcs): the best head of every node."""
  n = scores.shape[0]
  heads = scores.argmax(axis=0)
  heads[0] = 0
  cycle = _cycle(heads)
  if cycle is None:
    return heads
  in_cycle = np.zeros(n, bool)
  in_cycle[cycle] = True
  rest = [i for i in range(n) if not in_cycle[i]]  # node 0 is never in a cycle
  c = len(rest)  # the contracted node's index in the smaller graph
  cycle_score = scores[heads[cycle], cycle]
  small = np.full((c + 1, c + 1), -np.inf)
  small[np.ix_(range(c), range(c))] = scores[np.ix_(rest, rest)]
  # arcs into the cycle: entering at v breaks v's cycle arc
  enter = scores[np.ix_(rest, cycle)] - cycle_score[None, :]
  enter_at = enter.argmax(axis=1)
  small[:c, c] = enter[np.arange(c), enter_at]
  # arcs out of the cycle: from its best member
  leave = scores[np.ix_(cycle, rest)]
  leave_from = leave.argmax(axis=0)
  small[c, :c] = leave[leave_from, np.arange(c)]
  np.fill_diagonal(small, -np.inf)
  small[:, 0] = -np.inf
  sub = _arborescence(small)
  out = heads.copy()
  for j, node in enumerate(rest[1:], 1):
    out[node] = cycle[leave_from[j]] if sub[j] == c else rest[sub[j]]
  entry = int(sub[c])  # the contracted node's head: the cycle is entered at cycle[enter_at[entry]]
  out[cycle[enter_at[entry]]] = rest[entry]
  return out


def mst_heads(scores: np.ndarray) -> np.ndarray:
  """The maximum spanning tree of `scores` ((n + 1) x (n + 1), [head, dependent], index 0 the root) with one
  word attached to the root; `heads[d]` for d = 0..n (heads[0] = 0)."""
  scores = np.asarray(scores, np.float64)
  if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or scores.shape[0] < 2:
    raise errors.ConfigError(f"arc scores of shape {scores.shape}; expected (n + 1, n + 1) with n >= 1 words")
  if not np.all(np.isfinite(scores)):
    raise errors.ConfigError("arc scores must be finite")
  s = scores.copy()
  span = float(s.max() - s.min())
  s[0, 1:] -= span * s.shape[0] + 1.0  # every extra root arc costs more than any tree can gain
  np.fill_diagonal(s, -np.inf)
  s[:, 0] = -np.inf
  return _arborescence(s)


def tree_score(scores: np.ndarray, heads: Sequence[int]) -> float:
  return float(sum(scores[heads[d], d] for d in range(1, len(heads))))


def coarse(relation: str) -> str:
  """The universal relation of a UD label: `nmod:poss` -> `nmod`."""
  return relation.split(":", 1)[0]
