"""MLDoc (Schwenk & Li 2018) document classification, as the mBERT paper feeds it: the first two sentences.

Files are those the official `mldoc` scripts write from the Reuters corpora:
`{language}.train.{1000,2000,5000,10000}`, `{language}.dev`,
`{language}.test` (`language` the English name: english, german, french,
spanish, italian, japanese, russian, chinese), one document per line,
`LABEL<TAB>text`, labels `LABELS`.

`read(path)` gives `{"id", "text_a", "text_b", "label"}`: the document's
first sentence and its second (empty when it has one), the pair the encoder
reads (Wu & Dredze 2019). Sentences end at `.`, `!` or `?` followed by
white space and a character that is not a lower-case (Latin or Cyrillic)
letter, or at `。`, `！`, `？` (no space in Chinese / Japanese text); a full
stop inside a token (`3.5`) or before a lower-case word (`the U.S. rose`)
does not end one, an abbreviation before a capitalised word (`U.S. Treasury`)
does (the paper names no splitter). Blank lines are
skipped; a row that is not `LABEL<TAB>text` or has another label is a
`DataError` naming the file and line.
"""

from __future__ import annotations

import os
import re

from xtreme_jax import errors
from xtreme_jax.data.xtreme_readers import malformed, numbered_lines
from xtreme_jax.registry.mbert import MLDOC_LABELS as LABELS
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?![a-zà-ÿа-яё])|(?<=[。！？])")


def sentences(text: str, most: int = 2) -> list[str]:
  """The first `most` sentences of `text` (module docstring), stripped, empty ones dropped."""
  parts = [p.strip() for p in _SENTENCE_END.split(text.strip(), maxsplit=most)]
  return [p for p in parts if p][:most]


def read(path: str) -> list[dict]:
  """The documents of one MLDoc file as sentence pairs (module docstring); ids `<file name>-<i>`."""
  name, out = os.path.basename(path), []
  for n, line in numbered_lines(path, "`LABEL<TAB>document` rows"):
    if not line.strip():
      continue
    label, tab, text = line.partition("\t")
    if not tab:
      raise malformed(path, n, "no tab; expected `LABEL<TAB>document`")
    if label.strip() not in LABELS:
      raise malformed(path, n, f"unknown label {label.strip()!r}; valid labels: {', '.join(LABELS)}")
    first_two = sentences(text) + ["", ""]
    out.append({"id": f"{name}-{len(out)}", "text_a": first_two[0], "text_b": first_two[1], "label": label.strip()})
  if not out:
    raise errors.DataError(f"{path} holds no documents; expected `LABEL<TAB>document` rows")
  return out
