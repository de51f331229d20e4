"""XTREME metrics, equal to the official scorers (plain Python, no jax / TF).

Sources reproduced (see `/work/shared/design/DATA_AND_METRICS.md`):

* google-research/xtreme `evaluate.py`: the leaderboard scorer (accuracy,
  seqeval F1 for panx and udpos, BUCC pair F1, task / category averages).
* seqeval 0.0.x (0.0.12 / 0.0.13, identical here) `get_entities` /
  `end_of_chunk` / `start_of_chunk`: chunking (`get_chunks`) for panx and
  udpos, including what it does to raw UPOS tags and to malformed NER tags
  (prefix = first character, type = part after the last `-`; seqeval >= 1.0
  reads types differently and is not what the leaderboard used).
* SQuAD `evaluate-v1.1.py` (xquad, tydiqa) and facebookresearch/MLQA
  `mlqa_evaluation_v1.py` (mlqa): `normalize_answer`, EM and F1.
* google-research/xtreme `third_party/utils_retrieve.py`: `bucc_optimize` /
  `bucc_extract` (BUCC threshold).

Every score is on a 0-100 scale and computed with the same operation order as
the official code, so the floats match bit for bit.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from typing import Iterable, Mapping, Optional, Sequence

from xtreme_jax.registry import XTREME

# From the task registry (`xtreme_jax.registry.xtreme`): each task's test languages, the key of
# the per-language result that is its score ("em_f1" means (exact_match + f1) / 2; udpos "f1" is
# the leaderboard chunk F1, see `pos_leaderboard_f1`, with token accuracy beside it), categories.
TASK_LANGUAGES = {t.name: t.test_languages for t in XTREME.tasks}
TASK_METRIC = {t.name: t.score for t in XTREME.tasks}
CATEGORIES = dict(XTREME.categories)
QA_TASKS = XTREME.where(kind="span_qa")
# The counts a scorer adds to each language's result beside its metrics (`scorer`, `report`).
COUNT_KEYS = ("total", "missing", "invalid")
NOT_IN_DATA = "not in the data on disk"  # the `missing` reason of a language the task has no test data of


def _check_lengths(predictions: Sequence, labels: Sequence, what: str = "items") -> None:
  if len(predictions) != len(labels):
    raise ValueError(f"{len(predictions)} predicted {what} but {len(labels)} gold {what}")
  if not labels:
    raise ValueError(f"no gold {what}")


def accuracy(predictions: Sequence, labels: Sequence) -> float:
  """Exact-match accuracy x100 (xnli, pawsx, tatoeba)."""
  _check_lengths(predictions, labels)
  correct = sum(int(p == g) for p, g in zip(predictions, labels))
  return float(correct) / len(predictions) * 100


# ---------------------------------------------------------------------------
# Sequence labelling.


def _chunk_ends(prev: str, cur: str, prev_type: str, type_: str) -> bool:
  """seqeval 0.0.x `end_of_chunk` on prefixes `prev` -> `cur` (first characters)."""
  return (prev in ("E", "S") or (prev in ("B", "I") and cur in ("B", "S", "O"))
          or (prev not in ("O", ".") and prev_type != type_))


def _chunk_starts(prev: str, cur: str, prev_type: str, type_: str) -> bool:
  """seqeval 0.0.x `start_of_chunk`."""
  return (cur in ("B", "S") or (prev in ("E", "S", "O") and cur in ("E", "I"))
          or (cur not in ("O", ".") and prev_type != type_))


def get_chunks(sentences: Iterable[Sequence[str]]) -> list[tuple[str, int, int]]:
  """Chunks `(type, start, end)` of tag sentences, as seqeval 0.0.x `get_entities`.

  This is the leaderboard's chunking for panx and udpos alike (XTREME's
  `evaluate.py` installs seqeval unpinned; 0.0.12 / 0.0.13 were current when
  the leaderboard was built). Sentences are concatenated with an "O" between
  them (offsets are global). A tag's *first character* is its prefix and the
  part after its *last* `-` its type (the whole tag when it has none; "O" has
  type "O"). B/S open a chunk, E/S close one, an I or E after O, E or S opens
  one, and any change of type closes and opens one (I-LOC after O or after
  I-PER starts a chunk). Malformed tags follow the same rules, so their chunk
  boundaries come from type changes only: `X-PER` and `b-per` (prefixes X, b)
  continue a chunk of the same type and open one on a type change (`b-per`
  is type "per", not "PER"); `B-` is a B with the empty type; a bare `PER`
  (prefix P) is a one-type run like `I-PER` after O; `B-X-PER` has type PER.
  seqeval >= 1.0 differs (type `tag[1:].split('-', 1)[-1]`): not used.
  """
  flat = [tag for sentence in sentences for tag in (*sentence, "O")]
  chunks = []
  prev, prev_type, begin = "O", "", 0
  for i, tag in enumerate(flat + ["O"]):
    prefix, type_ = tag[:1], tag.split("-")[-1]
    if _chunk_ends(prev, prefix, prev_type, type_):
      chunks.append((prev_type, begin, i - 1))
    if _chunk_starts(prev, prefix, prev_type, type_):
      begin = i
    prev, prev_type = prefix, type_
  return chunks


def _check_sentences(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> None:
  _check_lengths(predictions, labels, "sentences")
  for i, (p, g) in enumerate(zip(predictions, labels), 1):
    if len(p) != len(g):
      raise ValueError(f"sentence {i}: {len(p)} predicted tags but {len(g)} gold tags")


def chunk_scores(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> dict[str, float]:
  """Micro precision / recall / F1 on 0-1 over the chunk sets of all sentences, as seqeval 0.0.x's
  `precision_score` / `recall_score` / `f1_score` compute them."""
  _check_sentences(predictions, labels)
  gold = set(get_chunks(labels))
  pred = set(get_chunks(predictions))
  correct = len(gold & pred)
  p = correct / len(pred) if pred else 0
  r = correct / len(gold) if gold else 0
  f1 = 2 * p * r / (p + r) if p + r > 0 else 0
  return {"f1": f1, "precision": p, "recall": r}


def chunk_prf(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> dict[str, float]:
  """Micro precision / recall / F1 x100 over the chunk sets of all sentences (seqeval 0.0.x)."""
  return {k: v * 100 for k, v in chunk_scores(predictions, labels).items()}


def entity_f1(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> dict[str, float]:
  """Entity-level micro precision / recall / F1 x100 over IOB2 tags (panx).

  Chunked as the leaderboard's seqeval 0.0.x does (`get_chunks`), also for
  malformed tags such as `B-`, `X-PER` or `b-per`.
  """
  return chunk_prf(predictions, labels)


def pos_token_accuracy(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> float:
  """Plain UPOS token accuracy x100 over all tokens of all sentences."""
  _check_sentences(predictions, labels)
  return accuracy([t for s in predictions for t in s], [t for s in labels for t in s])


def pos_leaderboard_f1(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> dict[str, float]:
  """The XTREME leaderboard's udpos "F1": seqeval 0.0.13 chunk F1 on raw UPOS.

  The leaderboard feeds UPOS tags to seqeval as if they were IOB tags: the
  first character is read as the chunk prefix and the whole tag (no `-`) as
  the type. Hence a run of identical tags is *one* chunk (NOUN NOUN = one
  NOUN chunk, so predicting one token of it wrong loses the whole run),
  tags starting with S (SCONJ, SYM) are single-token chunks even when
  repeated, a tag starting with E would close a chunk, and INTJ (prefix I)
  behaves like an I- tag. The value is not token accuracy; report both.
  """
  return chunk_prf(predictions, labels)


# ---------------------------------------------------------------------------
# Extractive QA.

_ASCII_PUNCT = frozenset(string.punctuation)
# SQuAD v1.1 (`lang=None`) removes English articles; MLQA has one rule per
# answer language. The ar pattern is MLQA's verbatim: its first alternative
# can never match (`^` after characters), so *every* "ال" is replaced by a
# space, also inside words.
_ARTICLES = {
    None: r"\b(a|an|the)\b",
    "en": r"\b(a|an|the)\b",
    "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
    "hi": None,
    "vi": r"\b(của|là|cái|chiếc|những)\b",
    "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "ar": r"\sال^|ال",
    "zh": None,
}


def _is_ascii_punct(ch: str) -> bool:
  return ch in _ASCII_PUNCT


def _is_punct(ch: str) -> bool:
  """MLQA's PUNCT: every Unicode P* category character plus ASCII punctuation."""
  return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def _mixed_segmentation(text: str) -> list[str]:
  """MLQA zh tokens: each char in U+4E00..U+9FA5 (or punctuation) alone, other runs split on whitespace."""
  tokens, run = [], ""
  for ch in text:
    if "\u4e00" <= ch <= "\u9fa5" or _is_punct(ch):
      tokens.extend(run.split())
      tokens.append(ch)
      run = ""
    else:
      run += ch
  tokens.extend(run.split())
  return tokens


def normalize_answer(text: str, lang: Optional[str] = None) -> str:
  """Lowercase, drop punctuation and articles, re-join tokens with one space.

  `lang=None` is SQuAD v1.1 (ASCII punctuation, English articles, whitespace
  tokens; used for xquad and tydiqa in every language). A language code uses
  MLQA's rules for that answer language: Unicode punctuation, the language's
  articles (en es de vi ar; none for hi zh) and, for zh, one token per CJK
  character.
  """
  if lang not in _ARTICLES:
    raise ValueError(f"unknown MLQA language {lang!r}; known: {sorted(k for k in _ARTICLES if k)}")
  is_punct = _is_ascii_punct if lang is None else _is_punct
  text = "".join(ch for ch in text.lower() if not is_punct(ch))
  if _ARTICLES[lang]:
    text = re.sub(_ARTICLES[lang], " ", text)
  return " ".join(_mixed_segmentation(text) if lang == "zh" else text.split())


def qa_exact_match(prediction: str, gold: str, lang: Optional[str] = None) -> bool:
  """Normalised strings equal (an empty prediction matches a gold like "The")."""
  return normalize_answer(prediction, lang) == normalize_answer(gold, lang)


def qa_f1(prediction: str, gold: str, lang: Optional[str] = None) -> float:
  """Bag-of-tokens F1 (0-1) of the normalised strings; 0 when nothing is shared."""
  pred_tokens = normalize_answer(prediction, lang).split()
  gold_tokens = normalize_answer(gold, lang).split()
  num_same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_tokens)
  recall = 1.0 * num_same / len(gold_tokens)
  return (2 * precision * recall) / (precision + recall)


def _questions(dataset) -> Iterable[Mapping]:
  if isinstance(dataset, Mapping):
    if "data" not in dataset:
      raise ValueError("not a SQuAD dataset: no 'data' key")
    dataset = dataset["data"]
  for article in dataset:
    for paragraph in article["paragraphs"]:
      yield from paragraph["qas"]


def question_ids(dataset) -> list[str]:
  """The question ids of a SQuAD v1.1 dataset (the JSON dict or its "data" list), in file order."""
  return [qa["id"] for qa in _questions(dataset)]


def _qa_em_f1(dataset, predictions: Mapping[str, str], lang: Optional[str]) -> dict:
  exact_match = f1 = total = missing = 0
  for qa in _questions(dataset):
    total += 1
    if qa["id"] not in predictions:
      missing += 1
      continue
    golds = [answer["text"] for answer in qa["answers"]]
    if not golds:
      raise ValueError(f"question {qa['id']!r} has no gold answer")
    prediction = predictions[qa["id"]]
    exact_match += max(qa_exact_match(prediction, g, lang) for g in golds)
    f1 += max(qa_f1(prediction, g, lang) for g in golds)
  if not total:
    raise ValueError("the dataset has no questions")
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total,
          "total": total, "missing": missing}


def squad_dataset(questions: Sequence[Mapping]) -> list:
  """A SQuAD "data" list holding `questions` (records with `id` and gold answers, as the readers give them,
  `answers: {"text": [...]}`, or as seqio rows, `answers/text`), for `squad_em_f1` / `mlqa_em_f1`."""
  qas = [{"id": q["id"], "answers": [{"text": t} for t in (q["answers"]["text"] if "answers" in q
                                                            else q["answers/text"])]} for q in questions]
  return [{"paragraphs": [{"qas": qas}]}]


def squad_em_f1(dataset, predictions: Mapping[str, str]) -> dict:
  """SQuAD v1.1 EM / F1 x100 (max over gold answers) for xquad and tydiqa.

  `dataset` is the SQuAD JSON (dict with "data") or its "data" list;
  `predictions` maps question id -> answer text. A question without a
  prediction scores 0 and is counted in `missing`; ids not in the dataset
  are ignored. Returns `{"exact_match", "f1", "total", "missing"}`.
  """
  return _qa_em_f1(dataset, predictions, None)


def mlqa_em_f1(dataset, predictions: Mapping[str, str], lang: str) -> dict:
  """MLQA v1 EM / F1 x100 with the answer language's normalisation; as `squad_em_f1`."""
  if lang is None:
    raise ValueError("MLQA needs the answer language")
  return _qa_em_f1(dataset, predictions, lang)


# ---------------------------------------------------------------------------
# Ranking (XGLUE WPR).


def grouped_ndcg(groups: Sequence[int], gold: Sequence[float], predicted: Sequence[float]) -> Optional[float]:
  """Mean nDCG over query groups on 0-1, as XGLUE's `simple_ndcg`: per group
  `sklearn.metrics.ndcg_score([gold], [predicted])` (linear gain, log2 discount, ties in the predicted
  scores averaged, 0 for an all-zero group), groups of fewer than two rows skipped; None if none is left."""
  import numpy as np
  from sklearn.metrics import ndcg_score  # the official scorer's function; imported only for ranking
  _check_lengths(predicted, gold)
  rows: dict[int, tuple[list, list]] = {}
  for g, y, p in zip(groups, gold, predicted):
    rows.setdefault(g, ([], []))
    rows[g][0].append(float(y))
    rows[g][1].append(float(p))
  scores = [ndcg_score(np.asarray([y]), np.asarray([p])) for y, p in rows.values() if len(y) >= 2]
  return float(np.array(scores).mean()) if scores else None


# ---------------------------------------------------------------------------
# Retrieval.

Pair = tuple[str, str]


def bucc_f1(predicted_pairs: Iterable[Sequence[str]], gold_pairs: Iterable[Sequence[str]]) -> dict[str, float]:
  """Precision / recall / F1 x100 of the predicted pair set against the gold pair set."""
  predicted = {tuple(p) for p in predicted_pairs}
  gold = {tuple(g) for g in gold_pairs}
  correct = len(predicted & gold)
  if correct > 0:
    precision = correct / len(predicted)
    recall = correct / len(gold)
    f1 = 2 * precision * recall / (precision + recall)
  else:
    precision = recall = f1 = 0
  return {"f1": f1 * 100, "precision": precision * 100, "recall": recall * 100}


def bucc_best_threshold(scored_candidates: Mapping[Pair, float], gold_pairs: Iterable[Sequence[str]]) -> float:
  """The score threshold maximising F1 against `gold_pairs` (XTREME's `bucc_optimize`).

  Candidates are taken in descending score (ties in mapping order); at each
  strict F1 improvement the threshold becomes the midpoint between that
  candidate's score and the next one's. 0 when no candidate is gold. When the
  best cut is after the last candidate the official code indexes past the
  end; the last score is used instead.
  """
  items = sorted(scored_candidates.items(), key=lambda item: -item[1])
  gold = {tuple(g) for g in gold_pairs}
  extracted = correct = 0
  threshold, best_f1 = 0, 0
  for i, (pair, score) in enumerate(items):
    extracted += 1
    correct += tuple(pair) in gold
    if correct > 0:
      precision = correct / extracted
      recall = correct / len(gold)
      f1 = 2 * precision * recall / (precision + recall)
      if f1 > best_f1:
        best_f1 = f1
        threshold = (score + items[i + 1][1]) / 2 if i + 1 < len(items) else score
  return threshold


def apply_threshold(scored_candidates: Mapping[Pair, float], threshold: float) -> list[Pair]:
  """Candidate pairs scoring >= threshold, in mapping order (`bucc_extract`)."""
  return [pair for pair, score in scored_candidates.items() if score >= threshold]


def tatoeba_accuracy(predicted_indices: Sequence[int], gold_indices: Sequence[int]) -> float:
  """Fraction x100 of sentences whose retrieved index is the aligned one."""
  return accuracy([int(i) for i in predicted_indices], [int(i) for i in gold_indices])


# ---------------------------------------------------------------------------
# Aggregation.


def language_score(task: str, result) -> float:
  """One language's task score from its result dict (a float is returned as is)."""
  if not isinstance(result, Mapping):
    return float(result)
  if TASK_METRIC[task] == "em_f1":
    return (result["exact_match"] + result["f1"]) / 2
  return result[TASK_METRIC[task]]


def _mean(values: Iterable[float]) -> float:
  values = list(values)
  if not values:
    raise ValueError("nothing to average")
  return sum(values) / len(values)


def task_score(task: str, per_language: Mapping[str, object]) -> float:
  """Equal-weight mean over the given languages (English included).

  Values are result dicts or floats. For QA tasks the score is
  (mean EM + mean F1) / 2, which is the mean of the per-language (EM + F1) / 2.
  """
  if task not in TASK_METRIC:
    raise ValueError(f"unknown task {task!r}")
  results = list(per_language.values())
  if TASK_METRIC[task] == "em_f1" and results and all(isinstance(r, Mapping) for r in results):
    return (_mean(r["exact_match"] for r in results) + _mean(r["f1"] for r in results)) / 2
  return _mean(language_score(task, r) for r in results)


def category_scores(task_scores: Mapping[str, float]) -> dict[str, float]:
  """Mean task score of every category whose tasks are all in `task_scores`."""
  return {category: _mean(task_scores[t] for t in tasks)
          for category, tasks in CATEGORIES.items() if all(t in task_scores for t in tasks)}


def overall(task_scores: Mapping[str, float]) -> Optional[float]:
  """Mean of the nine task scores, or None unless all nine are given."""
  if any(task not in task_scores for task in TASK_METRIC):
    return None
  return _mean(task_scores[task] for task in TASK_METRIC)


def transfer_gap(per_language: Mapping[str, float], english: str = "en") -> float:
  """Cross-lingual transfer gap: the English score minus the mean of the other languages."""
  if english not in per_language:
    raise ValueError(f"no {english!r} score")
  others = [score for lang, score in per_language.items() if lang != english]
  return per_language[english] - _mean(others)
