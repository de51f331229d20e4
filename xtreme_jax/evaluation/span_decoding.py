"""SQuAD v1.1 answer decoding over doc-stride windows (as BERT's `run_squad.py`).

Answers are cut from the original context with the windows' `token_to_char`
offsets (see `xtreme_jax.data.features.qa_features`), so they are exact substrings of it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def best_spans(windows: Sequence[dict], start_logits, end_logits, n_best: int = 20,
               max_answer_len: int = 30, return_nbest: bool = False):
  """Best answer text per example id from per-window start/end logits.

  Over all windows of an example, candidates pair one of the `n_best` highest
  start logits with one of the `n_best` highest end logits of the same window;
  both tokens must lie in the context, start <= end, end - start + 1 <=
  `max_answer_len`, and the start token must have `is_max_context`. Score =
  start + end logit; the text is `context[start_char:end_char]`, "" if no
  candidate. With `return_nbest`, also returns {id: [up to n_best dicts with
  "text", "score", "probability", "start_logit", "end_logit", "start_char",
  "end_char"]}, best first, one per distinct text.
  """
  if not len(windows) == len(start_logits) == len(end_logits):
    raise ValueError("windows, start_logits and end_logits must have the same length")
  candidates: dict = {}
  for window, s_log, e_log in zip(windows, start_logits, end_logits):
    cands = candidates.setdefault(window["example_id"], [])
    s_log, e_log = np.asarray(s_log, np.float64), np.asarray(e_log, np.float64)
    t2c, is_max = np.asarray(window["token_to_char"]), np.asarray(window["is_max_context"])
    n = len(t2c)
    in_context = t2c[:, 0] >= 0
    starts = np.argsort(-s_log[:n], kind="stable")[:n_best]
    ends = np.argsort(-e_log[:n], kind="stable")[:n_best]
    for s in starts:
      if not (in_context[s] and is_max[s]):
        continue
      for e in ends:
        if in_context[e] and s <= e < s + max_answer_len:
          start_char = int(t2c[s, 0])
          end_char = max(start_char, int(t2c[e, 1]))
          cands.append({"text": window["context"][start_char:end_char],
                        "score": float(s_log[s] + e_log[e]), "start_logit": float(s_log[s]),
                        "end_logit": float(e_log[e]), "start_char": start_char,
                        "end_char": end_char})
  predictions, nbest = {}, {}
  for example_id, cands in candidates.items():
    cands.sort(key=lambda c: -c["score"])
    seen, kept = set(), []
    for c in cands:
      if c["text"] not in seen and len(kept) < n_best:
        seen.add(c["text"])
        kept.append(c)
    if kept:
      scores = np.array([c["score"] for c in kept])
      probs = np.exp(scores - scores.max())
      for c, p in zip(kept, probs / probs.sum()):
        c["probability"] = float(p)
    predictions[example_id] = kept[0]["text"] if kept else ""
    nbest[example_id] = kept
  return (predictions, nbest) if return_nbest else predictions
