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
"""

from __future__ import annotations

import os
from typing import Sequence

from xtreme_jax import errors, text
from xtreme_jax.data.xtreme_readers import malformed, numbered_lines
from xtreme_jax.registry.mbert import NER_TAGS as TAGS, NER_TYPES as TYPES

DOCSTART = text.DOCSTART
OUTSIDE = {"O": "O", "N": "O"}


def to_bio(tags: Sequence[str]) -> list[str]:
  """IOB1 (or any sequence of `B-` / `I-` / `O` tags) to valid BIO: an `I-X` not preceded by `B-X` / `I-X` is
  `B-X`."""
  out = []
  for tag in tags:
    if tag.startswith("I-") and (not out or out[-1] == "O" or out[-1][2:] != tag[2:]):
      tag = "B-" + tag[2:]
    out.append(tag)
  return out


def read(path: str) -> list[dict]:
  """Sentences of one CoNLL NER file in BIO tags (module docstring); ids `<file name>-<i>`."""
  name = os.path.basename(path)
  sentences, tokens, tags = [], [], []
  for n, line in numbered_lines(path, "`word ... TAG` per line, a blank line between sentences") + [(0, "")]:
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
