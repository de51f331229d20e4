"""Plain-text helpers shared by readers and scorers (no JAX; no TF for local paths)."""

from __future__ import annotations

import codecs
import itertools
from typing import Iterable, Iterator, Optional

from xtreme_jax import errors, fs


DOCSTART = "-DOCSTART-"  # CoNLL's document separator line (CoNLL 2002 / 2003 NER, XGLUE's NER and POS files)


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
    raise _not_utf8(path, data.count(b"\n", 0, byte) + 1, byte, data[byte], e.reason, expected) from None
  if expected is not None and not content.strip():
    raise errors.DataError(f"{path} is empty; expected {expected}")
  return content


def utf8_lines(path: str, expected: str) -> Iterator[str]:
  """The lines of a UTF-8 text file (`\\n` ends a line; line ends kept), read lazily (large corpora); a leading
  byte-order mark is dropped. Errors as `read_utf8`'s; `path` may be a URL."""
  with fs.open_file(path, "rb") as f:
    offset = 0
    for number, raw in enumerate(f, 1):
      skip = len(codecs.BOM_UTF8) if number == 1 and raw.startswith(codecs.BOM_UTF8) else 0
      try:
        line = raw[skip:].decode("utf-8")
      except UnicodeDecodeError as e:
        byte = offset + skip + e.start
        raise _not_utf8(path, number, byte, raw[byte - offset], e.reason, expected) from None
      offset += len(raw)
      yield line


def _not_utf8(path: str, line: int, byte: int, value: int, reason: str, expected: Optional[str]) -> errors.DataError:
  return errors.DataError(f"{errors.location(path, line, byte)}: not UTF-8 (byte 0x{value:02x}: {reason}); "
                          f"expected a UTF-8 text file" + (f" of {expected}" if expected else ""))


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
