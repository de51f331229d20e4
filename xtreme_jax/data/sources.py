"""Deterministic, randomly addressable batch sources.

A source holds `num_examples` examples and builds example `i` on demand
(`example(i, rng)`). Training batch `p` is a pure function of `(seed, p)`:
epoch permutations come from `(seed, epoch)` and per-example randomness from
`(seed, p, row)`, so a run resumed at position p sees exactly the stream an
uninterrupted run sees, and each host builds only its own rows.
"""

from __future__ import annotations

import abc
import functools
from typing import Iterator

import numpy as np

from xtreme_jax import errors


class IndexedSource(abc.ABC):
  """Subclasses define `num_examples`, `example`, `weight_keys`; set `batch_size`, `seed`."""

  batch_size: int
  seed: int

  @property
  @abc.abstractmethod
  def num_examples(self) -> int: ...

  @abc.abstractmethod
  def example(self, index: int, rng: np.random.Generator) -> dict:
    """Feature dict of example `index` (numpy arrays)."""

  weight_keys: tuple = ()  # features zeroed in the padding rows of eval batches

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
    n = self.num_examples
    examples = []
    for row in self._rows(host_index, host_count):
      epoch, index = divmod(position * self.batch_size + row, n)
      examples.append(self.example(int(self._order(epoch)[index]), np.random.default_rng((self.seed, position, row))))
    return stack(examples)

  def eval_batches(self, host_index: int = 0, host_count: int = 1) -> Iterator[dict]:
    """Every example once, in order; the last batch is padded with weight-0 rows."""
    n = self.num_examples
    for start in range(0, n, self.batch_size):
      examples = []
      for row in self._rows(host_index, host_count):
        i = start + row
        ex = self.example(min(i, n - 1), np.random.default_rng((self.seed, i)))
        if i >= n:
          ex.update({k: np.zeros_like(ex[k]) for k in self.weight_keys})
        examples.append(ex)
      yield stack(examples)

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

  def example(self, index: int, rng: np.random.Generator) -> dict:
    f = self.features[index]
    keys = self.model_keys or f.keys()
    return {k: np.asarray(f[k]) for k in keys}
