"""Sentence (pair) classification examples from a tab-separated file.

Reads rows as the official XTREME TSVs are read: split on tabs, no quote
handling (quote characters stay literal), CRLF tolerated. Pairs are
truncated longest-first to fit `seq_len` with the vocabulary's specials.
A file that is not UTF-8, is empty or has a bad row raises `errors.DataError`
naming it (and the line).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np

from xtreme_jax import errors, fs
from xtreme_jax.data import paths
from xtreme_jax.data.features.sources import IndexedSource
from xtreme_jax.data.vocab.vocabularies import load_vocabulary
from xtreme_jax.text import read_utf8


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
  """Drop tokens from the end of the longer side until len(a)+len(b) <= budget."""
  a, b = list(a), list(b)
  while len(a) + len(b) > budget:
    (a if len(a) >= len(b) else b).pop()
  return a, b


@dataclasses.dataclass(frozen=True, eq=False)
class TsvClassificationSource(IndexedSource):
  """`text_a [\\t text_b] \\t label` rows; `labels` lists the label strings in class order."""

  path: str
  vocabulary: str
  labels: tuple
  data_dir: Optional[str] = None
  seq_len: int = 128
  batch_size: int = 32
  seed: int = 0
  text_columns: tuple = (0, 1)
  label_column: int = 2

  weight_keys = ("example_weights",)
  example_rng = False

  @functools.cached_property
  def vocab(self):
    return load_vocabulary(paths.resolve(self.data_dir, self.vocabulary))

  @functools.cached_property
  def rows(self) -> list[tuple[list[str], int]]:
    index = {label: i for i, label in enumerate(self.labels)}
    need = max(max(self.text_columns), self.label_column) + 1
    rows = []
    path = paths.resolve(self.data_dir, self.path)
    if not fs.isfile(path):
      raise errors.MissingInputError(f"classification data file {path} does not exist")
    expected = f"tab-separated rows, label in column {self.label_column} (0-based)"
    for lineno, line in enumerate(read_utf8(path, expected).split("\n"), 1):
      line = line.rstrip("\r")
      if not line:
        continue
      cols = line.split("\t")
      if len(cols) < need:
        raise errors.DataError(f"{path}:{lineno}: expected at least {need} tab-separated columns, got {len(cols)}")
      label = cols[self.label_column].strip()
      if label not in index:
        raise errors.DataError(f"{path}:{lineno}: label {label!r} is not one of {list(self.labels)}")
      rows.append(([cols[c] for c in self.text_columns], index[label]))
    return rows

  @property
  def num_examples(self) -> int:
    return len(self.rows)

  def example(self, index: int, rng: np.random.Generator | None) -> dict:
    del rng
    texts, label = self.rows[index]
    return {**encode_pair(self.vocab, texts, self.seq_len), "labels": np.asarray(label, np.int32),
            "example_weights": np.asarray(1.0, np.float32)}


def encode_pair(vocab, texts: list[str], seq_len: int) -> dict:
  """input_ids / input_mask / token_type_ids of one text or a pair, padded to `seq_len`."""
  pieces = [vocab.encode(t) for t in texts]
  specials = len(vocab.build_inputs([], [] if len(pieces) > 1 else None)[0])
  if len(pieces) > 1:
    a, b = truncate_pair(pieces[0], pieces[1], seq_len - specials)
    ids, types = vocab.build_inputs(a, b)
  else:
    ids, types = vocab.build_inputs(pieces[0][: seq_len - specials])
  pad = seq_len - len(ids)
  return {"input_ids": np.asarray(list(ids) + [vocab.pad_id] * pad, np.int32),
          "input_mask": np.asarray([1] * len(ids) + [0] * pad, np.int32),
          "token_type_ids": np.asarray(list(types) + [0] * pad, np.int32)}
