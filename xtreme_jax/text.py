"""Plain-text helpers shared by readers and scorers (no JAX, no TF)."""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator


def iter_blocks(lines: Iterable[str]) -> Iterator[list[str]]:
  """Non-empty lines grouped into blocks separated by one or more empty lines, lazily."""
  for nonempty, block in itertools.groupby(lines, key=bool):
    if nonempty:
      yield list(block)


def blocks(lines: Iterable[str]) -> list[list[str]]:
  """`iter_blocks` as a list."""
  return list(iter_blocks(lines))
