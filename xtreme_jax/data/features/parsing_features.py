"""Features of the biaffine parser (`models/parser.py`): one window per sentence, words on their first subword.

`parse_features(record, vocab, max_words, max_subwords, relations, upos)`
turns a CoNLL-U record (`data/readers/conllu.py`) into `input_ids, input_mask,
token_type_ids` (`[CLS] subwords [SEP]`, padded to `max_subwords`),
`word_starts` / `word_mask` / `heads` / `rels` / `upos` (padded to
`max_words`). A word that tokenizes to nothing gets one unk id.

The mBERT paper's limits (Wu & Dredze 2019): at training, windows of 128
subwords; at evaluation sentences of at most 140 words, the subword length
the smaller of their subwords and 512. A training sentence longer than its
window is truncated (`truncate=True`): its first words that fit with
`[CLS]` / `[SEP]` are kept, as the authors' code keeps words while they fit
(shijie-wu/crosslingual-nlp, `ParsingDataset.process_example`), and a kept
word whose head was cut away gets head -1 (no loss, `models/parser.py`). At
evaluation a sentence that does not fit is `None` from `parse_features`
(`fits` says why): evaluation keeps only the sentences within the
thresholds (`evaluation_sentences`), as the paper does. Relations are
coarse (`nmod:poss` -> `nmod`) ids in `relations`; a relation or UPOS tag
not in its list is a `DataError` naming the sentence.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.readers import conllu
from xtreme_jax.trees import coarse
from xtreme_jax.registry.mbert import UD_RELATIONS

EVAL_MAX_WORDS = 140
EVAL_MAX_SUBWORDS = 512
TRAIN_MAX_SUBWORDS = 128


def _pieces(record: dict, vocab) -> list[list[int]]:
  return [list(vocab.encode(word)) or [vocab.unk_id] for word in record["tokens"]]


def subword_length(record: dict, vocab) -> int:
  """The sentence's subwords plus `[CLS]` and `[SEP]`."""
  return sum(len(p) for p in _pieces(record, vocab)) + len(vocab.build_inputs([])[0])


def fits(record: dict, vocab, max_words: int, max_subwords: int) -> Optional[str]:
  """None when the sentence fits the window, else why not."""
  if len(record["tokens"]) > max_words:
    return f"{len(record['tokens'])} words > {max_words}"
  length = subword_length(record, vocab)
  return f"{length} subwords > {max_subwords}" if length > max_subwords else None


def evaluation_sentences(records: Sequence[dict], vocab, max_words: int = EVAL_MAX_WORDS,
                         max_subwords: int = EVAL_MAX_SUBWORDS) -> tuple[list[dict], int]:
  """(the sentences within the evaluation thresholds, how many were left out)."""
  kept = [r for r in records if fits(r, vocab, max_words, max_subwords) is None]
  return kept, len(records) - len(kept)


def _ids(values: Sequence[str], vocabulary: Sequence[str], what: str, sentence: str) -> list[int]:
  index = {v: i for i, v in enumerate(vocabulary)}
  unknown = [v for v in values if v not in index]
  if unknown:
    raise errors.DataError(f"sentence {sentence}: unknown {what} {unknown[0]!r}; expected one of "
                           f"{' '.join(vocabulary)}")
  return [index[v] for v in values]


def fitting_words(record: dict, vocab, max_words: int, max_subwords: int) -> int:
  """How many of the sentence's first words fit `max_words` and, with `[CLS]` / `[SEP]`, `max_subwords`."""
  room, n = max_subwords - len(vocab.build_inputs([])[0]), 0
  for piece in _pieces(record, vocab)[:max_words]:
    room -= len(piece)
    if room < 0:
      break
    n += 1
  return n


def parse_features(record: dict, vocab, max_words: int, max_subwords: int,
                   relations: Sequence[str] = UD_RELATIONS, upos: Optional[Sequence[str]] = None,
                   truncate: bool = False) -> Optional[dict]:
  """The parser's features of one sentence (module docstring): with `truncate`, of its first words that fit
  (None when not even one does); without, None when it does not fit."""
  if fits(record, vocab, max_words, max_subwords) is not None:
    keep = fitting_words(record, vocab, max_words, max_subwords) if truncate else 0
    if not keep:
      return None
    record = conllu.truncate(record, keep)
  pieces = _pieces(record, vocab)
  ids, types = vocab.build_inputs([i for p in pieces for i in p])
  lead = vocab.build_inputs([-1])[0].index(-1)  # the leading special tokens ([CLS] / <s>)
  starts = [int(s) for s in np.cumsum([0] + [len(p) for p in pieces[:-1]]) + lead]
  n, pad = len(pieces), max_words - len(pieces)
  out = {"input_ids": np.asarray(list(ids) + [vocab.pad_id] * (max_subwords - len(ids)), np.int32),
         "input_mask": np.asarray([1] * len(ids) + [0] * (max_subwords - len(ids)), np.int32),
         "token_type_ids": np.asarray(list(types) + [0] * (max_subwords - len(ids)), np.int32),
         "word_starts": np.asarray(starts + [0] * pad, np.int32),
         "word_mask": np.asarray([1] * n + [0] * pad, np.int32)}
  sentence = record.get("id", "?")
  if record.get("heads") is not None:
    out["heads"] = np.asarray(list(record["heads"]) + [0] * pad, np.int32)
    out["rels"] = np.asarray(_ids([coarse(r) for r in record["deprels"]], relations, "relation", sentence)
                             + [0] * pad, np.int32)
  if upos is not None:
    out["upos"] = np.asarray(_ids(record["upos"], upos, "UPOS tag", sentence) + [0] * pad, np.int32)
  return out
