"""Token-count batches for sequence-to-sequence training: several (source, target) pairs packed into each row.

fairseq batches translation by tokens (VECO: 64k tokens per update for
En-De); here every batch keeps one fixed shape (one compilation) and holds a
fixed number of token slots, `rows x source_len` on the source side, filled
with as many pairs as fit. `pack_pairs` fills rows greedily in the pairs'
order: a pair goes into the current row while both its source and its
target still fit, else it opens the next row (a pair longer than a row is
cut to it). Each token carries its pair's segment id (1, 2, ... within the
row; 0 = padding) and its position within its own source or target, the
features `networks/seq2seq.Packing` masks attention with.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from xtreme_jax import errors


def pack_pairs(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], source_len: int, target_len: int,
               pad_id: int) -> list[dict]:
  """Rows of packed pairs: input_ids / input_mask / input_segments / input_positions (source_len,) and
  targets / target_mask / target_segments / target_positions (target_len,), int32."""
  if source_len < 1 or target_len < 1:
    raise errors.ConfigError(f"source_len={source_len}, target_len={target_len}; expected positive lengths")
  rows: list[list[tuple[list, list]]] = [[]]
  used = [0, 0]
  for source, target in pairs:
    source, target = list(source)[:source_len], list(target)[:target_len]
    if not source or not target:
      continue
    if rows[-1] and (used[0] + len(source) > source_len or used[1] + len(target) > target_len):
      rows.append([])
      used = [0, 0]
    rows[-1].append((source, target))
    used = [used[0] + len(source), used[1] + len(target)]
  return [_row(row, source_len, target_len, pad_id) for row in rows if row]


def _row(pairs: list[tuple[list, list]], source_len: int, target_len: int, pad_id: int) -> dict:
  out = {}
  for side, name, length in ((0, "input", source_len), (1, "target", target_len)):
    ids = [t for pair in pairs for t in pair[side]]
    segments = [i + 1 for i, pair in enumerate(pairs) for _ in pair[side]]
    positions = [p for pair in pairs for p in range(len(pair[side]))]
    pad = length - len(ids)
    out["input_ids" if side == 0 else "targets"] = np.asarray(ids + [pad_id] * pad, np.int32)
    out[f"{name}_mask"] = np.asarray([1] * len(ids) + [0] * pad, np.int32)
    out[f"{name}_segments"] = np.asarray(segments + [0] * pad, np.int32)
    out[f"{name}_positions"] = np.asarray(positions + [0] * pad, np.int32)
  return out
