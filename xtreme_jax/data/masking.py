"""BERT masking: pick `mask_prob` of the maskable tokens; 80% -> [MASK], 10% -> random, 10% kept.

Plain numpy so that the input pipeline stays a deterministic function of
(seed, position); special tokens and padding are never picked.
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


def mask_tokens(ids: np.ndarray, rng: np.random.Generator, *, mask_prob: float, mask_id: int,
                special_ids: Sequence[int], replacement_ids: np.ndarray, max_predictions: int) -> dict:
  """Mask one sequence `ids` (1-D int array).

  Returns `input_ids` (masked copy) and the masked slots `masked_positions`,
  `masked_ids` (original tokens) and `masked_weights` (1 for real slots),
  each padded to `max_predictions`. The count is round(mask_prob * n) for n
  maskable tokens (at least one when n > 0), capped at `max_predictions`.
  Random replacements are drawn uniformly from `replacement_ids`
  (see `regular_ids`).
  """
  maskable = np.ones(len(ids), bool)
  for s in set(special_ids):  # a handful of ids: cheaper than np.isin on short sequences
    maskable &= ids != s
  candidates = np.flatnonzero(maskable)
  n = min(max_predictions, max(1, int(round(mask_prob * len(candidates))))) if len(candidates) else 0
  picked = np.sort(rng.choice(candidates, size=n, replace=False)) if n else np.zeros(0, np.int64)
  out = ids.copy()
  action = rng.random(n)
  random_ids = replacement_ids[rng.integers(0, len(replacement_ids), size=n)]
  out[picked] = np.where(action < 0.8, mask_id, np.where(action < 0.9, random_ids, ids[picked]))
  positions = np.zeros(max_predictions, np.int32)
  masked_ids = np.zeros(max_predictions, np.int32)
  weights = np.zeros(max_predictions, np.float32)
  positions[:n], masked_ids[:n], weights[:n] = picked, ids[picked], 1.0
  return {"input_ids": out, "masked_positions": positions, "masked_ids": masked_ids, "masked_weights": weights}


class VocabMasker:
  """`mask_tokens` bound to a vocabulary: its special tokens are never picked and
  random replacements are drawn from its other ids."""

  def __init__(self, vocab):
    self.mask_id = vocab.mask_id
    self.special_ids = sorted({vocab.pad_id, vocab.cls_id, vocab.sep_id, vocab.unk_id, vocab.mask_id})
    self.replacement_ids = regular_ids(vocab.vocab_size, self.special_ids)

  def __call__(self, ids: np.ndarray, rng: np.random.Generator, mask_prob: float, max_predictions: int) -> dict:
    return mask_tokens(ids, rng, mask_prob=mask_prob, mask_id=self.mask_id, special_ids=self.special_ids,
                       replacement_ids=self.replacement_ids, max_predictions=max_predictions)
