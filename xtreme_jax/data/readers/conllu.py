"""Universal Dependencies CoNLL-U files (UD v1.4 POS, UD v2.2 parsing; the mBERT paper's data).

`read(path)` gives one record per sentence: `{"id", "tokens", "upos",
"heads", "deprels"}`, the syntactic words only: multi-word token lines (ID
`1-2`) and empty nodes (ID `1.1`) are skipped, as the UD evaluation and the
paper's word-level tasks do. `id` is the `# sent_id` comment, else
`<file name>:<n>` (n counted from 1). `deprels` keep their subtypes (`coarse`
in `evaluation/parsing.py` cuts them). HEAD / DEPREL `_` (a file without
trees) reads as None.

`truncate(record, n)` keeps a sentence's first n words (a training window
that cannot hold it all); a kept word whose head was cut away gets head -1.

Gold trees are checked: heads within the sentence, exactly one word attached
to the root (0) and no cycle; a violation, like a malformed line (not 10
tab-separated fields, a non-numeric ID or HEAD, IDs out of order, a UPOS
tag that is not one of UD's 17), is an
`errors.DataError` naming the file, the line and the sentence id.
"""

from __future__ import annotations

import os
from typing import Optional

from xtreme_jax import errors
from xtreme_jax.data.readers.xtreme_readers import numbered_lines
from xtreme_jax.registry.xtreme import UPOS_TAGS

FIELDS = 10


def _fail(path: str, lineno: int, sentence: str, why: str) -> errors.DataError:
  return errors.DataError(f"{errors.location(path, lineno)}: sentence {sentence}: {why}")


def check_tree(heads: list[int], path: str, lineno: int, sentence: str) -> None:
  """Refuses heads (1-based words, 0 the root) that are not one tree with one root word."""
  n = len(heads)
  bad = [i + 1 for i, h in enumerate(heads) if not 0 <= h <= n or h == i + 1]
  if bad:
    raise _fail(path, lineno, sentence, f"word {bad[0]} has head {heads[bad[0] - 1]}; expected 0..{n}, not itself")
  roots = [i + 1 for i, h in enumerate(heads) if h == 0]
  if len(roots) != 1:
    raise _fail(path, lineno, sentence, f"{len(roots)} words attached to the root ({roots}); expected exactly one")
  for start in range(1, n + 1):
    seen, node = set(), start
    while node != 0:
      if node in seen:
        raise _fail(path, lineno, sentence, f"the heads form a cycle through word {node}")
      seen.add(node)
      node = heads[node - 1]


def truncate(record: dict, words: int) -> dict:
  """`record` cut to its first `words` words; heads past them become -1 (no gold head in the cut sentence)."""
  if words >= len(record["tokens"]):
    return record
  out = {**record, **{k: record[k][:words] for k in ("tokens", "upos", "deprels") if record.get(k) is not None}}
  if record.get("heads") is not None:
    out["heads"] = [h if h <= words else -1 for h in record["heads"][:words]]
  return out


def read(path: str, check_trees: bool = True) -> list[dict]:
  """The sentences of one CoNLL-U file (module docstring)."""
  name = os.path.basename(path)
  out: list[dict] = []
  rows: list[tuple[int, list[str]]] = []
  sent_id: Optional[str] = None

  def flush(lineno: int) -> None:
    nonlocal rows, sent_id
    if rows:
      sentence = sent_id or f"{name}:{len(out) + 1}"
      ids = [int(cols[0]) for _, cols in rows]
      if ids != list(range(1, len(ids) + 1)):
        raise _fail(path, rows[0][0], sentence, f"word IDs {ids[:10]}; expected 1, 2, ... in order")
      raw_heads = [cols[6] for _, cols in rows]
      heads = None
      if any(h != "_" for h in raw_heads):
        bad = [(n, h) for (n, _), h in zip(rows, raw_heads) if not h.isdigit()]
        if bad:
          raise _fail(path, bad[0][0], sentence, f"HEAD {bad[0][1]!r}; expected a word number or 0")
        heads = [int(h) for h in raw_heads]
        if check_trees:
          check_tree(heads, path, rows[0][0], sentence)
      deprels = [cols[7] for _, cols in rows]
      out.append({"id": sentence, "tokens": [cols[1] for _, cols in rows], "upos": [cols[3] for _, cols in rows],
                  "heads": heads, "deprels": None if all(d == "_" for d in deprels) else deprels})
    rows, sent_id = [], None

  for n, line in numbered_lines(path, "CoNLL-U: 10 tab-separated fields per word, a blank line after each "
                                      "sentence") + [(0, "")]:
    if not line.strip():
      flush(n)
      continue
    if line.startswith("#"):
      key, _, value = line[1:].partition("=")
      if key.strip() == "sent_id" and not rows:
        sent_id = value.strip()
      continue
    cols = line.split("\t")
    sentence = sent_id or f"{name}:{len(out) + 1}"
    if len(cols) != FIELDS:
      raise _fail(path, n, sentence, f"{len(cols)} tab-separated fields; expected {FIELDS}")
    if "-" in cols[0] or "." in cols[0]:
      continue  # a multi-word token's surface line or an empty node
    if not cols[0].isdigit():
      raise _fail(path, n, sentence, f"ID {cols[0]!r}; expected a word number, a range (1-2) or a decimal (1.1)")
    if cols[3] not in UPOS_TAGS:
      raise _fail(path, n, sentence, f"UPOS {cols[3]!r}; expected one of the 17 UD tags ({' '.join(UPOS_TAGS)})")
    rows.append((n, cols))
  return out
