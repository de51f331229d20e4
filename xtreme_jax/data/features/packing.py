"""Token-count batches for sequence-to-sequence training: several (source, target) pairs packed into each row.

fairseq batches translation by tokens (VECO: 64k tokens per update for
En-De); here every batch keeps one fixed shape (one compilation) and holds a
fixed number of token slots, `rows x source_len` on the source side, filled
with as many pairs as fit. Rows fill greedily in the pairs' order: a pair
goes into the current row while both its source and its target still fit,
else it opens the next row (a pair longer than a row is cut to it; a pair
with an empty side is dropped). `next_row` builds one row from a stream of
pairs (`data/translation/wmt14_batches.py` streams the WMT14 training sets through it),
`pack_pairs` all rows of a finite list. Each token carries its pair's segment id (1, 2, ... within the
row; 0 = padding) and its position within its own source or target, the
features `networks/seq2seq.Packing` masks attention with.
"""

from __future__ import annotations

import collections
from typing import Any, Iterable, Optional, Protocol, Sequence

import numpy as np

from xtreme_jax import errors


class PairStream(Protocol):
  """Pairs one at a time: `peek()` shows the next (None: no more), `take()` consumes it."""

  def peek(self) -> Optional[tuple[Sequence[int], Sequence[int]]]: ...

  def take(self) -> Any: ...


def next_row(pairs: PairStream, source_len: int, target_len: int, pad_id: int) -> Optional[dict]:
  """The next packed row of `pairs` (None: `pairs` is exhausted); the pair that does not fit stays in `pairs`.

  The row: input_ids / input_mask / input_segments / input_positions
  (source_len,) and targets / target_mask / target_segments /
  target_positions (target_len,), int32.
  """
  if source_len < 1 or target_len < 1:
    raise errors.ConfigError(f"source_len={source_len}, target_len={target_len}; expected positive lengths")
  row: list[tuple[list, list]] = []
  used = [0, 0]
  while (pair := pairs.peek()) is not None:
    source, target = list(pair[0])[:source_len], list(pair[1])[:target_len]
    if row and source and target and (used[0] + len(source) > source_len or used[1] + len(target) > target_len):
      break
    pairs.take()
    if source and target:
      row.append((source, target))
      used = [used[0] + len(source), used[1] + len(target)]
  return _row(row, source_len, target_len, pad_id) if row else None


class _ListPairs:
  def __init__(self, pairs: Iterable):
    self._pairs = collections.deque(pairs)

  def peek(self):
    return self._pairs[0] if self._pairs else None

  def take(self):
    return self._pairs.popleft()


def pack_pairs(pairs: Iterable[tuple[Sequence[int], Sequence[int]]], source_len: int, target_len: int,
               pad_id: int) -> list[dict]:
  """Every packed row (`next_row`) of a finite sequence of (source ids, target ids) pairs."""
  stream, rows = _ListPairs(pairs), []
  while (row := next_row(stream, source_len, target_len, pad_id)) is not None:
    rows.append(row)
  return rows


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
