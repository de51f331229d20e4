"""SQuAD-style extractive QA features: doc-stride windows with exact character offsets.

The context is split on whitespace (keeping character offsets, as SQuAD does),
each word is tokenized on its own, and its pieces are aligned back to the word's
characters (`align_pieces`), so every context token carries a (start, end) span
of the ORIGINAL context string. Windows follow BERT's `run_squad.py`: the query
is truncated to `max_query_len` tokens and consecutive windows start
`doc_stride` context tokens apart (so they overlap by `window length - doc_stride`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional, Sequence

import numpy as np

from xtreme_jax.errors import ConfigError
from xtreme_jax.text import locate_answer


def whitespace_words(text: str) -> list[tuple[int, int]]:
  """(start, end) character spans of the whitespace-separated words of `text`."""
  return [m.span() for m in re.finditer(r"\S+", text)]


def piece_texts(vocab, ids: Sequence[int]) -> list[Optional[str]]:
  """Surface text of each token ('##' and '▁' markers removed); None for unknown."""
  out = []
  for i in ids:
    if i == vocab.unk_id:
      out.append(None)
      continue
    t = vocab.decode([i])  # sentencepiece drops "▁" here; WordPiece keeps "##"
    out.append(t[2:] if t.startswith("##") and len(t) > 2 else t)
  return out


def _keys(text: str, loose: bool) -> list[str]:
  """Per-character comparison keys: NFKD + casefold (loose: combining marks dropped)."""
  keys = []
  for ch in text:
    k = unicodedata.normalize("NFKD", ch).casefold()
    keys.append("".join(c for c in k if unicodedata.category(c) != "Mn") if loose else k)
  return keys


def _match(word: str, pieces: Sequence[Optional[str]], loose: bool, strict: bool):
  """Character spans of `pieces` in `word` (greedy, left to right), or None.

  Pieces are compared with the word in key space (`_keys`). `strict`: every known
  piece must follow the previous one directly and together they must cover the
  word; otherwise a piece may skip characters (e.g. ones the tokenizer dropped).
  A run of unknown pieces (None) takes the characters up to the next known
  piece, split evenly. Zero-width pieces (a lone '▁') get `None` spans here.
  """
  keys = _keys(word, loose)
  text = "".join(keys)
  owner = [i for i, k in enumerate(keys) for _ in k]  # key position -> word char
  pkeys = [None if p is None else "".join(_keys(p, loose)) for p in pieces]
  key_spans: list = [None] * len(pieces)
  cur, i = 0, 0
  while i < len(pieces):
    if pkeys[i] is None:
      j = i
      while j < len(pieces) and pkeys[j] is None:
        j += 1
      nxt = next((k for k in pkeys[j:] if k), None)
      end = len(text) if nxt is None else text.find(nxt, cur + j - i)
      if end < cur + j - i:
        return None
      bounds = [cur + (end - cur) * k // (j - i) for k in range(j - i + 1)]
      key_spans[i:j] = zip(bounds[:-1], bounds[1:])
      cur, i = end, j
      continue
    pos = (cur if text.startswith(pkeys[i], cur) else -1) if strict else text.find(pkeys[i], cur)
    if pos < 0:
      return None
    key_spans[i] = (pos, pos + len(pkeys[i]))
    cur, i = pos + len(pkeys[i]), i + 1
  if strict and cur != len(text):
    return None
  spans = [(owner[a], owner[b - 1] + 1) if b > a else None for a, b in key_spans]
  # Zero-width pieces share the span of the next (else previous) real piece.
  for k in range(len(spans) - 1, -1, -1):
    if spans[k] is None and k + 1 < len(spans):
      spans[k] = spans[k + 1]
  for k in range(len(spans)):
    if spans[k] is None and k:
      spans[k] = spans[k - 1]
  return None if any(s is None for s in spans) else spans


def align_pieces(word: str, pieces: Sequence[Optional[str]]) -> list[tuple[int, int]]:
  """Non-empty (start, end) character spans, relative to `word`, of its token pieces.

  `pieces` are the tokens' surface texts (`piece_texts`; None = unknown token).
  Tries exact keys (NFKD + casefold) then loose keys (also without combining
  marks, for lower-casing/accent-stripping vocabularies), each strict first and
  then allowing skipped characters. The spans tile the word: the first starts
  at 0, the last ends at `len(word)`, and skipped characters join the piece
  before them. Pieces may overlap when one character is split between tokens
  (e.g. a ligature "ﬁ" -> "f" + "i..."). If no alignment is found, the word is
  split evenly among its pieces.
  """
  n, length = len(pieces), len(word)
  if not n:
    return []
  for loose, strict in ((False, True), (True, True), (False, False), (True, False)):
    spans = _match(word, pieces, loose, strict)
    if spans is not None:
      break
  else:
    starts = [min(k * length // n, length - 1) for k in range(n)]
    return [(s, max(s + 1, (k + 1) * length // n)) for k, s in enumerate(starts)]
  first_start, last_end = spans[0][0], spans[-1][1]
  out = []
  for k, (s, e) in enumerate(spans):
    s = 0 if s == first_start else s
    e = length if e == last_end else max(e, spans[k + 1][0])
    out.append((s, e))
  return out


def tokenize_with_offsets(text: str, vocab) -> tuple[list[int], list[tuple[int, int]]]:
  """Token ids of `text` (word by word) and each token's (start, end) in `text`."""
  ids, spans = [], []
  for ws, we in whitespace_words(text):
    word_ids = list(vocab.encode(text[ws:we]))
    ids += word_ids
    spans += [(ws + s, ws + e) for s, e in align_pieces(text[ws:we], piece_texts(vocab, word_ids))]
  return ids, spans


def doc_windows(num_tokens: int, window_len: int, doc_stride: int) -> list[tuple[int, int]]:
  """(start, length) of BERT's doc-stride windows; one (possibly empty) window at least."""
  if window_len <= 0 or doc_stride <= 0:
    raise ConfigError(f"window_len={window_len} and doc_stride={doc_stride} must be positive")
  spans, start = [], 0
  while True:
    length = min(window_len, num_tokens - start)
    spans.append((start, length))
    if start + length >= num_tokens:
      return spans
    start += min(length, doc_stride)


def max_context_window(spans, num_tokens: int) -> np.ndarray:
  """Per document token, the window with its most context (BERT's rule): the
  highest min(left, right) context + 0.01 * window length, the first on ties."""
  pos = np.arange(num_tokens)
  scores = np.full((len(spans), num_tokens), -np.inf)
  for k, (start, length) in enumerate(spans):
    inside = (pos >= start) & (pos < start + length)
    score = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
    scores[k, inside] = score[inside]
  return scores.argmax(axis=0)


def _answer_chars(example: dict) -> Optional[tuple[int, int]]:
  """Character span of the first answer, located near `answer_start` if misplaced."""
  context, answers = example["context"], example.get("answers") or {}
  texts, starts = answers.get("text") or [], answers.get("answer_start") or []
  if not texts or not texts[0]:
    return None
  text = texts[0]
  start = locate_answer(context, text, int(starts[0]) if starts else 0)
  return None if start is None else (start, start + len(text))


def qa_windows(example: dict, vocab, max_seq_len: int = 384, doc_stride: int = 128,
               max_query_len: int = 64, is_training: bool = False) -> list[dict]:
  """Doc-stride windows of a SQuAD-style example.

  `example`: {"id", "context", "question", "answers": {"text": [...],
  "answer_start": [...]}} (answers only needed for training; the first is used).
  Each window holds "example_id", "context", "window_index" and numpy arrays
  "input_ids", "input_mask", "token_type_ids" (int32 [max_seq_len]),
  "token_to_char" (int32 [max_seq_len, 2]: span in `context`, -1 for
  query/special/pad positions), "is_max_context" (int32 [max_seq_len]); with
  `is_training` also "start_positions" / "end_positions" (int32 scalars: the
  answer's first/last token in this window, 0 = CLS if not fully inside).
  Training examples whose answer cannot be found in the context give [] (the readers
  count them per file and refuse a file with too many:
  `xtreme_readers.check_training_answers`).
  """
  context = example["context"]
  query = list(vocab.encode(example["question"]))[:max_query_len]
  doc_ids, doc_spans = tokenize_with_offsets(context, vocab)
  prefix_ids, _ = vocab.build_inputs(query, [])
  offset = len(prefix_ids) - 1  # context goes before the final separator
  window_len = max_seq_len - len(prefix_ids)
  answer_tokens = None
  if is_training:
    chars = _answer_chars(example)
    inside = [] if chars is None else [
        k for k, (s, e) in enumerate(doc_spans) if s < chars[1] and e > chars[0]]
    if not inside:
      return []
    answer_tokens = (inside[0], inside[-1])
  spans = doc_windows(len(doc_ids), window_len, doc_stride)
  best_window = max_context_window(spans, len(doc_ids))
  windows = []
  for w, (start, length) in enumerate(spans):
    ids, types = vocab.build_inputs(query, doc_ids[start:start + length])
    assert list(ids[offset:offset + length]) == doc_ids[start:start + length]
    pad = max_seq_len - len(ids)
    token_to_char = np.full((max_seq_len, 2), -1, np.int32)
    is_max = np.zeros(max_seq_len, np.int32)
    if length:
      token_to_char[offset:offset + length] = doc_spans[start:start + length]
      is_max[offset:offset + length] = best_window[start:start + length] == w
    window = {"example_id": example["id"], "context": context, "window_index": w,
              "input_ids": np.asarray(list(ids) + [vocab.pad_id] * pad, np.int32),
              "input_mask": np.asarray([1] * len(ids) + [0] * pad, np.int32),
              "token_type_ids": np.asarray(list(types) + [0] * pad, np.int32),
              "token_to_char": token_to_char, "is_max_context": is_max}
    if answer_tokens is not None:
      a, b = answer_tokens
      inside_window = start <= a and b < start + length
      window["start_positions"] = np.asarray(offset + a - start if inside_window else 0, np.int32)
      window["end_positions"] = np.asarray(offset + b - start if inside_window else 0, np.int32)
    windows.append(window)
  return windows
