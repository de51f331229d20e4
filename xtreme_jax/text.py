"""Plain-text helpers shared by readers and scorers (no JAX; no TF for local paths)."""

from __future__ import annotations

import codecs
import itertools
from typing import Iterable, Iterator, Optional

from xtreme_jax import errors, fs


def iter_blocks(lines: Iterable[str]) -> Iterator[list[str]]:
  """Non-empty lines grouped into blocks separated by one or more empty lines, lazily."""
  for nonempty, block in itertools.groupby(lines, key=bool):
    if nonempty:
      yield list(block)


def blocks(lines: Iterable[str]) -> list[list[str]]:
  """`iter_blocks` as a list."""
  return list(iter_blocks(lines))


def read_utf8(path: str, expected: Optional[str] = None) -> str:
  """The text of a UTF-8 data file, a leading byte-order mark dropped, line ends untouched.

  A byte sequence that is not UTF-8 raises `errors.DataError` naming the file, the
  1-based line and the 0-based byte offset (from the start of the file) of the bad
  byte. With `expected` (what the file should hold, for the message), an empty or
  whitespace-only file raises `errors.DataError` too. `path` may be a URL
  (`gs://...`, read through `xtreme_jax.fs`).
  """
  data = fs.read_bytes(path)
  skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
  try:
    content = data[skip:].decode("utf-8")
  except UnicodeDecodeError as e:
    byte = skip + e.start
    line = data.count(b"\n", 0, byte) + 1
    raise errors.DataError(f"{errors.location(path, line, byte)}: not UTF-8 (byte 0x{data[byte]:02x}: {e.reason}); "
                           f"expected a UTF-8 text file" + (f" of {expected}" if expected else "")) from None
  if expected is not None and not content.strip():
    raise errors.DataError(f"{path} is empty; expected {expected}")
  return content


def locate_answer(context: str, answer: str, start: int) -> Optional[int]:
  """Where the answer `answer` starts in `context`: at `start` if it is there, else its occurrence
  nearest to `start` (the first on ties); None if it does not occur or is empty."""
  if not answer:
    return None
  if start >= 0 and context.startswith(answer, start):
    return start
  found, i = [], context.find(answer)
  while i >= 0:
    found.append(i)
    i = context.find(answer, i + 1)
  return min(found, key=lambda f: abs(f - start)) if found else None
