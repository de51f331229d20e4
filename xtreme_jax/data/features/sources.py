"""Deterministic, randomly addressable batch sources.

A source holds `num_examples` examples and builds the rows of a batch on
demand: row by row (`example(i, rng)`) or a batch at once (`examples`).
Training batch `p` is a pure function of `(seed, p)`: epoch permutations come
from `(seed, epoch)` and randomness either from one generator per row,
seeded `(seed, p, row)`, or from one generator per batch, seeded `(seed, p)`,
whose draws cover the global batch. So a run resumed at position p sees
exactly the stream an uninterrupted run sees, and each host builds only its
own rows, equal to those rows of the single-host batch.
"""

from __future__ import annotations

import abc
import functools
from typing import Iterator

import numpy as np

from xtreme_jax import errors


class IndexedSource(abc.ABC):
  """Subclasses define `num_examples`, `weight_keys` and `example` or `examples`; set `batch_size`, `seed`."""

  batch_size: int
  seed: int

  @property
  @abc.abstractmethod
  def num_examples(self) -> int: ...

  def example(self, index: int, rng: np.random.Generator | None) -> dict:
    """Feature dict of example `index` (numpy arrays), for the row-by-row `examples`."""
    raise NotImplementedError(f"{type(self).__name__} defines neither `example` nor `examples`")

  weight_keys: tuple = ()  # features zeroed in the padding rows of eval batches
  example_rng: bool = True  # False where `example` ignores its rng: then no generator is built

  def examples(self, indices: list[int], rows: range, seed: tuple, row_seeds: list[tuple]) -> dict:
    """Rows `rows` (of a global batch of `batch_size`), holding examples `indices`.

    This default stacks `example(i, default_rng(row_seed))` (rng None when
    `example_rng` is False). A source building a batch at once overrides it,
    drawing from one `default_rng(seed)` for the whole global batch and keeping
    the draws of `rows`.
    """
    del seed
    if not self.example_rng:
      return stack([self.example(i, None) for i in indices])
    return stack([self.example(i, np.random.default_rng(s)) for i, s in zip(indices, row_seeds)])

  @functools.lru_cache(maxsize=4)
  def _order(self, epoch: int) -> np.ndarray:
    return np.random.default_rng((self.seed, epoch)).permutation(self.num_examples)

  def _rows(self, host_index: int, host_count: int) -> range:
    if self.batch_size % host_count:
      raise errors.ConfigError(f"{type(self).__name__}.batch_size = {self.batch_size} is not divisible by the "
                               f"{host_count} processes (hosts); use a multiple of {host_count}")
    per_host = self.batch_size // host_count
    return range(host_index * per_host, (host_index + 1) * per_host)

  def batch(self, position: int, host_index: int = 0, host_count: int = 1) -> dict:
    """This host's rows of global training batch number `position`."""
    rows = self._rows(host_index, host_count)
    epochs, offsets = np.divmod(position * self.batch_size + np.asarray(rows), self.num_examples)
    indices = np.concatenate([self._order(int(e))[offsets[epochs == e]] for e in np.unique(epochs)])
    return self.examples(indices.tolist(), rows, (self.seed, position), [(self.seed, position, r) for r in rows])

  def eval_batches(self, host_index: int = 0, host_count: int = 1) -> Iterator[dict]:
    """Every example once, in order; the last batch is padded with weight-0 rows.

    Randomness: eval batch `b` (from example `b * batch_size`) has the batch
    seed `(seed, b, 1)`, its example `i` the row seed `(seed, i)`.
    """
    n, rows = self.num_examples, self._rows(host_index, host_count)
    for number, start in enumerate(range(0, n, self.batch_size)):
      numbers = [start + row for row in rows]
      batch = self.examples([min(i, n - 1) for i in numbers], rows, (self.seed, number, 1),
                            [(self.seed, i) for i in numbers])
      padding = np.asarray(numbers) >= n
      if padding.any():
        for k in self.weight_keys:
          batch[k] = batch[k].copy()
          batch[k][padding] = 0
      yield batch

  def tokens_per_batch(self, batch: dict) -> int:
    return int(np.sum(batch["input_mask"]))


def stack(examples: list[dict]) -> dict:
  return {k: np.stack([e[k] for e in examples]) for k in examples[0]}


class FeatureListSource(IndexedSource):
  """Batches over precomputed fixed-length feature dicts (windows of tasks' examples).

  `drop_keys` are bookkeeping fields kept for decoding (e.g. `word_index`,
  `token_to_char`) but not fed to the model.
  """

  def __init__(self, features: list[dict], batch_size: int, seed: int = 0,
               weight_keys: tuple = ("example_weights",), model_keys: tuple | None = None):
    if not features:
      raise errors.DataError("no examples to batch: the feature list is empty")
    self.features, self.batch_size, self.seed, self.weight_keys = features, batch_size, seed, weight_keys
    self.model_keys = model_keys

  @property
  def num_examples(self) -> int:
    return len(self.features)

  example_rng = False

  def example(self, index: int, rng: np.random.Generator | None) -> dict:
    f = self.features[index]
    keys = self.model_keys or f.keys()
    return {k: np.asarray(f[k]) for k in keys}
