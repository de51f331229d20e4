"""BERT masking: pick `mask_prob` of the maskable tokens; 80% -> [MASK], 10% -> random, 10% kept.

Plain numpy, vectorised over a batch, so that the input pipeline stays a
deterministic function of (seed, position); special tokens and padding are
never picked.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def max_predictions_for(seq_len: int, mask_prob: float) -> int:
  return max(1, math.ceil(seq_len * mask_prob))


def regular_ids(vocab_size: int, special_ids: Sequence[int]) -> np.ndarray:
  """The ids a random replacement may take: every id that is not special."""
  return np.setdiff1d(np.arange(vocab_size, dtype=np.int32), np.asarray(list(special_ids), np.int32))


def mask_batch(ids: np.ndarray, rng: np.random.Generator, *, mask_prob, mask_id: int,
               special_ids: Sequence[int], replacement_ids: np.ndarray, max_predictions: int,
               rows: range | None = None, batch_size: int | None = None) -> dict:
  """Mask each row of `ids` (B, L int array) independently, with one generator for the batch.

  Returns `input_ids` (masked copy) and the masked slots `masked_positions`
  (sorted), `masked_ids` (original tokens) and `masked_weights` (1 for real
  slots), (B, max_predictions) each, padded with 0. A row with n maskable
  tokens gets round(mask_prob * n) slots (at least one when n > 0), capped at
  `max_predictions`; `mask_prob` is a float or one per row. Random
  replacements are drawn uniformly from `replacement_ids` (see `regular_ids`).

  The random numbers are drawn for a batch of `batch_size` rows (default B),
  of which `ids` holds rows `rows` (default all): a host masking its rows of a
  global batch masks them as a single host masking the whole batch does.
  """
  rows = range(len(ids)) if rows is None else rows
  size = len(ids) if batch_size is None else batch_size
  take = slice(rows.start, rows.stop)
  length = ids.shape[1]
  maskable = np.ones(ids.shape, bool)
  for s in set(special_ids):  # a handful of ids: cheaper than np.isin
    maskable &= ids != s
  n = maskable.sum(1)
  count = np.minimum(max_predictions, np.maximum(1, np.round(np.multiply(mask_prob, n)))).astype(int)
  count[n == 0] = 0
  # A uniform sample of `count` maskable positions: the first ones in a random order of the maskable tokens.
  keys = np.where(maskable, rng.random((size, length))[take], 2.0)
  slots = min(max_predictions, length)
  valid = np.arange(max_predictions) < count[:, None]
  positions = np.zeros((len(ids), max_predictions), np.int64)
  positions[:, :slots] = np.sort(np.where(valid[:, :slots], np.argsort(keys, axis=1)[:, :slots], length), axis=1)
  action = rng.random((size, max_predictions))[take][valid]
  random_ids = replacement_ids[rng.integers(0, len(replacement_ids), (size, max_predictions))[take][valid]]
  row, picked = np.nonzero(valid)[0], positions[valid]
  original = ids[row, picked]
  out = ids.copy()
  out[row, picked] = np.where(action < 0.8, mask_id, np.where(action < 0.9, random_ids, original))
  masked_ids = np.zeros(positions.shape, np.int32)
  masked_ids[valid] = original
  return {"input_ids": out, "masked_positions": np.where(valid, positions, 0).astype(np.int32),
          "masked_ids": masked_ids, "masked_weights": valid.astype(np.float32)}


def mask_tokens(ids: np.ndarray, rng: np.random.Generator, **kwargs) -> dict:
  """`mask_batch` (same keyword arguments) of one sequence `ids` (1-D): its features without the batch axis."""
  return {k: v[0] for k, v in mask_batch(ids[None], rng, **kwargs).items()}


class VocabMasker:
  """`mask_batch` bound to a vocabulary: its special tokens are never picked and
  random replacements are drawn from its other ids."""

  def __init__(self, vocab):
    self.mask_id = vocab.mask_id
    self.special_ids = sorted({vocab.pad_id, vocab.cls_id, vocab.sep_id, vocab.unk_id, vocab.mask_id})
    self.replacement_ids = regular_ids(vocab.vocab_size, self.special_ids)

  def __call__(self, ids: np.ndarray, rng: np.random.Generator, mask_prob, max_predictions: int,
               rows: range | None = None, batch_size: int | None = None) -> dict:
    """Mask the rows of `ids` (B, L); `rows`, `batch_size` as in `mask_batch`."""
    return mask_batch(ids, rng, mask_prob=mask_prob, mask_id=self.mask_id, special_ids=self.special_ids,
                      replacement_ids=self.replacement_ids, max_predictions=max_predictions, rows=rows,
                      batch_size=batch_size)
