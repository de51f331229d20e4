"""CoNLL 2002 / 2003 NER (en de es nl) and the Chinese NER set of Levow (2006), read into BIO tags.

`read(path)` gives `{"id", "tokens", "tags"}` per sentence. Lines are
whitespace-separated columns, the word first and the NER tag last, so every
variant reads alike: CoNLL-2003 English `word POS chunk NER`, German `word
lemma POS chunk NER` (its extra lemma column), CoNLL-2002 Spanish `word NER`
and Dutch `word POS NER`, and the Chinese set's `character NER` (its outside
tag `N`, in some copies, reads as `O`). A blank line or a `-DOCSTART-` line
ends a sentence. Tags must be `O` or `B-` / `I-` plus one of `TYPES`.

The original CoNLL-2003 English and German files are IOB1 (a chunk starts
with `I-`; `B-` only separates two adjacent chunks of one type); `to_bio`
converts them to BIO (IOB2), and is the identity on valid BIO, so every file
goes through it. It is also the post-processing of predicted tags (the paper
does not define its own): an `I-X` that follows `O` or a tag of another type
opens a span, i.e. becomes `B-X`, so every predicted span is valid and
`metrics.entity_f1` scores what the tags mean.

Encodings: the original CoNLL-2002 Spanish and Dutch files and the German
CoNLL-2003 files (`esp.*`, `ned.*`, `deu.*`, `ORIGINAL_ENCODINGS`) are
Latin-1 (ISO-8859-1). `read(path)` reads a file with such a name as UTF-8
when it decodes as UTF-8 (a converted copy; ASCII reads the same either
way), else as Latin-1, and every other file (English CoNLL-2003, the
Chinese set) as UTF-8, whose decode failure is one line naming the file,
line, byte and the `encoding` option. `read(path, encoding=...)` (a Python
codec name: 'latin-1', 'utf-8', 'gb18030', ...) reads exactly that.
"""

from __future__ import annotations

import codecs
import os
from typing import Optional, Sequence

from xtreme_jax import errors, fs, text
from xtreme_jax.data.readers.xtreme_readers import malformed
from xtreme_jax.registry.mbert import NER_TAGS as TAGS, NER_TYPES as TYPES

DOCSTART = text.DOCSTART
OUTSIDE = {"O": "O", "N": "O"}
EXPECTED = "`word ... TAG` per line, a blank line between sentences"
# The encodings of the original files, by the part of the file name before its first dot.
ORIGINAL_ENCODINGS = {"esp": "latin-1", "ned": "latin-1", "deu": "latin-1"}


def to_bio(tags: Sequence[str]) -> list[str]:
  """IOB1 (or any sequence of `B-` / `I-` / `O` tags) to valid BIO: an `I-X` not preceded by `B-X` / `I-X` is
  `B-X`."""
  out = []
  for tag in tags:
    if tag.startswith("I-") and (not out or out[-1] == "O" or out[-1][2:] != tag[2:]):
      tag = "B-" + tag[2:]
    out.append(tag)
  return out


def _codec(path: str, encoding: str) -> str:
  """Python's name of `encoding` ('utf-8', 'iso8859-1', ...); an unknown one is a `ConfigError`."""
  try:
    return codecs.lookup(encoding).name
  except LookupError:
    raise errors.ConfigError(f"unknown encoding {encoding!r} for {path}; expected a Python codec name such as "
                             "'latin-1' or 'utf-8'") from None


def _decode(path: str, encoding: str) -> str:
  """The file's text in a codec other than UTF-8; a byte it cannot decode is a `DataError` naming file, line,
  byte."""
  data = fs.read_bytes(path)
  try:
    return data.decode(encoding)
  except UnicodeDecodeError as e:
    where = errors.location(path, data.count(b"\n", 0, e.start) + 1, e.start)
    raise errors.DataError(f"{where}: not {encoding} (byte 0x{data[e.start]:02x}: {e.reason}); pass the file's "
                           "encoding as `encoding`") from None


def file_text(path: str, encoding: Optional[str] = None) -> str:
  """The text of a NER file in `encoding`; by default UTF-8, or Latin-1 for an original Latin-1 file that is not
  UTF-8 (module docstring)."""
  if encoding is not None and _codec(path, encoding) != "utf-8":
    return _decode(path, encoding)
  try:
    return text.read_utf8(path)
  except errors.DataError as e:
    original = ORIGINAL_ENCODINGS.get(os.path.basename(path).split(".")[0])
    if encoding is None and original:
      return _decode(path, original)
    raise errors.DataError(f"{e}; the original CoNLL-2002 Spanish / Dutch and CoNLL-2003 German files are Latin-1: "
                           "read it with encoding='latin-1' (conll_ner.read) or convert it to UTF-8") from None


def _numbered(path: str, content: str) -> list[tuple[int, str]]:
  """(1-based line number, line) without `\\n` / `\\r\\n`, as `xtreme_readers.numbered_lines`; an empty file
  is a `DataError`."""
  if not content.strip():
    raise errors.DataError(f"{path} is empty; expected {EXPECTED}")
  lines = content.split("\n")
  if lines[-1] == "":
    lines.pop()
  return [(n, line[:-1] if line.endswith("\r") else line) for n, line in enumerate(lines, 1)]


def read(path: str, encoding: Optional[str] = None) -> list[dict]:
  """Sentences of one CoNLL NER file in BIO tags (module docstring); ids `<file name>-<i>`; `encoding` as
  `file_text`'s."""
  name = os.path.basename(path)
  sentences, tokens, tags = [], [], []
  for n, line in _numbered(path, file_text(path, encoding)) + [(0, "")]:
    cols = line.split()
    if not cols or cols[0] == DOCSTART:
      if tokens:
        sentences.append({"id": f"{name}-{len(sentences)}", "tokens": tokens, "tags": to_bio(tags)})
      tokens, tags = [], []
      continue
    if len(cols) < 2:
      raise malformed(path, n, "a word without a tag; expected `word ... TAG`")
    tag = OUTSIDE.get(cols[-1], cols[-1])
    if tag not in TAGS:
      raise malformed(path, n, f"unknown NER tag {cols[-1]!r}; expected O or B- / I- with one of {' '.join(TYPES)}")
    tokens.append(cols[0])
    tags.append(tag)
  if not sentences:
    raise errors.DataError(f"{path} holds no sentences; expected `word ... TAG` lines")
  return sentences
