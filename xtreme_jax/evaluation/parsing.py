"""UAS / LAS of dependency trees (the mBERT paper's parsing, Wu & Dredze 2019; the trees are decoded by
`xtreme_jax.trees.mst_heads`).

`attachment_scores` is UAS / LAS over the words whose gold UPOS is not
`PUNCT` or `SYM` (the paper's exclusion), labels compared as coarse
relations (the part before `:`).
"""

from __future__ import annotations

from typing import Sequence

from xtreme_jax import errors
from xtreme_jax.trees import coarse

EXCLUDED_UPOS = ("PUNCT", "SYM")


def attachment_scores(gold_heads: Sequence[Sequence[int]], gold_labels: Sequence[Sequence[str]],
                      predicted_heads: Sequence[Sequence[int]], predicted_labels: Sequence[Sequence[str]],
                      gold_upos: Sequence[Sequence[str]]) -> dict[str, float]:
  """{"uas", "las", "words"}: percentages over the words (per sentence, 1..n; no root entry) whose gold UPOS is not
  PUNCT / SYM; labels compared coarse."""
  if not len(gold_heads) == len(gold_labels) == len(predicted_heads) == len(predicted_labels) == len(gold_upos):
    raise errors.DataError("attachment scores: gold and predicted sentence counts differ")
  words = heads_ok = both_ok = 0
  for i, (gh, gl, ph, pl, upos) in enumerate(zip(gold_heads, gold_labels, predicted_heads, predicted_labels,
                                                 gold_upos)):
    if not len(gh) == len(gl) == len(ph) == len(pl) == len(upos):
      raise errors.DataError(f"attachment scores: sentence {i} has {len(gh)} gold words but {len(ph)} predicted")
    for h, label, p, q, tag in zip(gh, gl, ph, pl, upos):
      if tag in EXCLUDED_UPOS:
        continue
      words += 1
      if h == p:
        heads_ok += 1
        both_ok += coarse(label) == coarse(q)
  scale = 100.0 / words if words else float("nan")
  return {"uas": heads_ok * scale, "las": both_ok * scale, "words": words}
