"""Plain-text MLM input: tokenize, pack into fixed-length chunks, mask.

Every line of every file is tokenized; the token stream of each file is cut
into chunks of `seq_len - 2` tokens wrapped in the vocabulary's start / end
tokens (XLM-R's "full sentences" packing). A batch is masked at once
(`masking.mask_batch`) from one generator per batch (see `sources.IndexedSource`).

Everything is held in memory: this is for samples and small corpora; the
seqio pretraining tasks read large corpora.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np

from xtreme_jax import errors, fs, text
from xtreme_jax.data.features import masking
from xtreme_jax.data import paths
from xtreme_jax.data.features.sources import IndexedSource
from xtreme_jax.data.vocab.vocabularies import load_vocabulary


def _expand(patterns) -> list[str]:
  files = []
  for pattern in patterns:
    matched = fs.glob(pattern)
    if not matched:
      raise errors.MissingInputError(f"no file matches {pattern!r}")
    files += matched
  return files


@dataclasses.dataclass(frozen=True, eq=False)
class MlmTextSource(IndexedSource):
  """Masked-LM batches from plain-text files (one sentence or document per line).

  `files` (glob patterns; UTF-8 text, lines split at `\n`) and `vocabulary`
  are relative to `data_dir` unless absolute or URLs. `split='eval'` keeps
  every `holdout_every`-th chunk (and `'train'` the rest); `holdout_every=0`
  uses all chunks for both.
  """

  files: tuple
  vocabulary: str
  data_dir: Optional[str] = None
  seq_len: int = 128
  batch_size: int = 32
  mask_prob: float = 0.15
  seed: int = 0
  split: str = "train"
  holdout_every: int = 0

  def __post_init__(self):
    if isinstance(self.files, str):
      object.__setattr__(self, "files", (self.files,))
    if self.split not in ("train", "eval"):
      raise errors.ConfigError(f"split={self.split!r}; expected 'train' or 'eval'")
    if self.seq_len < 3:
      raise errors.ConfigError(f"seq_len={self.seq_len} leaves no room for text between the special tokens")

  @functools.cached_property
  def vocab(self):
    return load_vocabulary(paths.resolve(self.data_dir, self.vocabulary))

  @functools.cached_property
  def masker(self) -> masking.VocabMasker:
    return masking.VocabMasker(self.vocab)

  @functools.cached_property
  def chunks(self) -> np.ndarray:
    """(num_chunks, seq_len) int32 token ids, padded with the pad id."""
    body = self.seq_len - 2
    rows = []
    for path in _expand(paths.resolve(self.data_dir, f) for f in self.files):
      lines = text.read_utf8(path).split("\n")
      stream = [i for line in lines if line.strip() for i in self.vocab.encode(line.strip())]
      if not stream:
        raise errors.DataError(f"{path} holds no text; expected one sentence or document per line (remove it from "
                               f"{self.files} to train without it)")
      for start in range(0, len(stream), body):
        piece = [self.vocab.cls_id] + stream[start:start + body] + [self.vocab.sep_id]
        rows.append(piece + [self.vocab.pad_id] * (self.seq_len - len(piece)))
    if not rows:
      raise errors.DataError(f"files {self.files} hold no text")
    chunks = np.asarray(rows, np.int32)
    if self.holdout_every:
      held = np.arange(len(chunks)) % self.holdout_every == self.holdout_every - 1
      chunks = chunks[held if self.split == "eval" else ~held]
    return chunks

  @property
  def max_predictions(self) -> int:
    return masking.max_predictions_for(self.seq_len, self.mask_prob)

  @property
  def num_examples(self) -> int:
    return len(self.chunks)

  weight_keys = ("masked_weights",)

  def examples(self, indices: list[int], rows: range, seed: tuple, row_seeds: list[tuple]) -> dict:
    ids = self.chunks[indices]
    out = self.masker(ids, np.random.default_rng(seed), self.mask_prob, self.max_predictions, rows, self.batch_size)
    out["input_mask"] = (ids != self.vocab.pad_id).astype(np.int32)
    out["token_type_ids"] = np.zeros_like(ids)
    return out
