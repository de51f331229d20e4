"""Token tagging features (POS / NER) in sliding windows, as in Wu & Dredze (2019).

Each word is labelled on its first subword only. A sentence longer than one
window is split into windows of at most `max_seq_len` tokens (specials
included); each following window starts with the last `context` subwords of
the previous one as left context, which is not predicted again, so every word
is predicted exactly once. A window ends, when possible, before a word start,
so that a word's subwords are not cut across two windows.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from xtreme_jax.errors import ConfigError, DataError

IGNORE_LABEL = -100


def tagging_windows(tokens: Sequence[str], vocab, max_seq_len: int = 128, context: int = 64,
                    tags: Optional[Sequence] = None,
                    label_map: Optional[dict] = None) -> list[dict]:
  """Fixed-length windows of a tokenized sentence.

  `tags`: one per word, mapped through `label_map` if given (else ints); without
  tags the predicted positions get label 0. Each window holds numpy arrays
  (length `max_seq_len`): "input_ids", "input_mask", "token_type_ids", "labels"
  (int32, -100 where not predicted), "label_weights" (float32, 1 where
  predicted) and "word_index" (int32, the word predicted there, else -1, also
  on context positions). A word that tokenizes to nothing gets one unk id.
  """
  ids, word_of, first = [], [], []
  for w, word in enumerate(tokens):
    pieces = list(vocab.encode(word)) or [vocab.unk_id]
    ids += pieces
    word_of += [w] * len(pieces)
    first += [True] + [False] * (len(pieces) - 1)
  if tags is None:
    word_labels = [0] * len(tokens)
  else:
    if len(tags) != len(tokens):
      raise DataError(f"{len(tags)} tags for {len(tokens)} words")
    unknown = sorted({t for t in tags if t not in label_map}) if label_map is not None else []
    if unknown:
      raise DataError(f"unknown tag(s) {unknown}; allowed tags: {' '.join(label_map)}")
    word_labels = [label_map[t] if label_map is not None else int(t) for t in tags]
  specials, _ = vocab.build_inputs([])
  budget = max_seq_len - len(specials)
  if not 0 <= context < budget:
    raise ConfigError(f"context={context} must be in [0, {budget}) for max_seq_len={max_seq_len}")
  prefix = len(specials) - 1  # [CLS] ... [SEP]: subwords start after the first special

  windows, start, pred_start = [], 0, 0
  while True:
    end = min(start + budget, len(ids))
    if end < len(ids):  # back off to a word start when that still predicts something
      end = next((k for k in range(end, pred_start, -1) if first[k]), end)
    input_ids, types = vocab.build_inputs(ids[start:end])
    assert list(input_ids[prefix:prefix + end - start]) == ids[start:end]
    pad = max_seq_len - len(input_ids)
    labels = np.full(max_seq_len, IGNORE_LABEL, np.int32)
    word_index = np.full(max_seq_len, -1, np.int32)
    for k in range(pred_start, end):
      if first[k]:
        labels[prefix + k - start] = word_labels[word_of[k]]
        word_index[prefix + k - start] = word_of[k]
    windows.append({
        "input_ids": np.asarray(list(input_ids) + [vocab.pad_id] * pad, np.int32),
        "input_mask": np.asarray([1] * len(input_ids) + [0] * pad, np.int32),
        "token_type_ids": np.asarray(list(types) + [0] * pad, np.int32),
        "labels": labels, "label_weights": (word_index >= 0).astype(np.float32),
        "word_index": word_index})
    if end >= len(ids):
      return windows
    start, pred_start = max(0, end - context), end


def merge_window_predictions(windows: Sequence[dict], predicted_label_ids,
                             num_words: int) -> list[int]:
  """Per-word label ids from per-window predictions ([num_windows, max_seq_len])."""
  if len(windows) != len(predicted_label_ids):
    raise ValueError(f"{len(predicted_label_ids)} predictions for {len(windows)} windows")
  out: list = [None] * num_words
  for window, pred in zip(windows, predicted_label_ids):
    pred = np.asarray(pred)
    for pos in np.flatnonzero(window["word_index"] >= 0):
      word = int(window["word_index"][pos])
      if out[word] is not None:
        raise ValueError(f"word {word} is predicted more than once")
      out[word] = int(pred[pos])
  missing = [w for w, p in enumerate(out) if p is None]
  if missing:
    raise ValueError(f"words {missing[:10]} are never predicted")
  return out
