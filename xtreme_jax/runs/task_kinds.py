"""What fine-tuning does for each kind of task, looked up by the registry's `TaskSpec.kind`.

One object per kind (`KINDS`): the task model it builds, the features of
its examples (model windows and the example each window belongs to), how
predictions are decoded back to examples, the training accuracy and the dev
score checkpoint selection uses, and the text of a submission file. The
benchmark runner (`runs/xtreme.py`) asks `of(spec)` instead of branching on
a task's name or kind, so a task of a new benchmark with a known kind needs
no runner code.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.features import parsing_features
from xtreme_jax.data.features.classification_source import encode_pair
from xtreme_jax.data.features.qa_features import qa_windows
from xtreme_jax.data.features.tagging_features import merge_window_predictions, tagging_windows
from xtreme_jax.evaluation import bleu, metrics, parsing
from xtreme_jax.evaluation.span_decoding import best_spans
from xtreme_jax.models.classification import (ClassificationModel, MultiTaskClassificationModel,
                                               RatingRegressionModel)
from xtreme_jax.models.feature_based import PAPER_LSTM_HIDDEN, FeatureBasedModel
from xtreme_jax.models.parser import BiaffineParserModel, decode as decode_parse
from xtreme_jax.models.qa import QaModel
from xtreme_jax.models.seq2seq import DecodeSettings, Seq2SeqModel
from xtreme_jax.models.tagging import TaggingModel
from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, seq2seq_backbone
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.seq2seq import Seq2SeqConfig
from xtreme_jax.registry import TaskSpec
from xtreme_jax.runs.language_ids import add_language_ids
from xtreme_jax.registry.xtreme import UPOS_TAGS
from xtreme_jax.training import validation as v

# -- the per-kind parts of a task's recipe (`TaskSettings.qa`, `.tagging`, `.ranking`, `.feature_based`;
# `GenerationSettings` below) ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QaSettings:
  """Span QA's windows and answers: the question cut to `max_query_len` subwords, windows of the question and
  the context `doc_stride` tokens apart, answers of at most `max_answer_len` tokens (SQuAD's script)."""

  doc_stride: int = 128
  max_query_len: int = 64
  max_answer_len: int = 30

  def __post_init__(self):
    for name in ("doc_stride", "max_query_len", "max_answer_len"):
      v.require(self, name, v.positive_int, "a positive integer")


@dataclasses.dataclass(frozen=True)
class TaggingSettings:
  """Tagging's sliding windows: `context` subwords of context on each side of a window's predicted middle
  (None: half of the recipe's `seq_len`, 64 of 128, as Wu & Dredze)."""

  context: Optional[int] = None

  def __post_init__(self):
    v.require(self, "context", v.optional(v.non_negative_int), "None or an integer >= 0")


RANKING_HEADS = ("classification", "regression")  # WPR: classes over the ratings, or rounded regression


@dataclasses.dataclass(frozen=True)
class RankingSettings:
  """A ranking task's head (XGLUE WPR): `classification` over the ratings (`Ranking`) or rounded `regression`
  (`RankingRegression`)."""

  head: str = "classification"

  def __post_init__(self):
    v.require(self, "head", lambda x: x in RANKING_HEADS, f"one of {RANKING_HEADS}")


@dataclasses.dataclass(frozen=True)
class FeatureBasedSettings:
  """The feature-based setting's BiLSTM (`FeatureBased`): `lstm_hidden` units per direction (the mBERT paper's
  d_h = 768)."""

  lstm_hidden: int = PAPER_LSTM_HIDDEN

  def __post_init__(self):
    v.require(self, "lstm_hidden", v.positive_int, "a positive integer")


# predict(model keys) -> the model's outputs for every window, in order
Predict = Callable[[tuple], Any]


class Featurised(NamedTuple):
  """Examples and the model windows made of them (`Kind.featurise`): window k belongs to example `owners[k]`."""

  examples: list
  features: list
  owners: list

  def head(self, n: int) -> "Featurised":
    """The first `n` examples and their windows."""
    keep = [k for k, owner in enumerate(self.owners) if owner < n]
    return Featurised(self.examples[:n], [self.features[k] for k in keep], [self.owners[k] for k in keep])


class Kind:
  """The interface; see the module docstring. `selection`: (the evaluator's metric key, its name in the
  criterion) of the dev score, or None when this kind always keeps the final model."""

  model_keys: tuple = ()
  predict_keys: tuple = ()
  weight_key: str = "example_weights"
  selection: Optional[tuple] = None
  gold_key: Optional[str] = "label"  # the example field holding the gold answer (None: always there)

  def model(self, spec: TaskSpec, config: TransformerConfig, settings=None, vocab=None):
    raise NotImplementedError

  def features(self, spec: TaskSpec, examples: Sequence[dict], vocab, settings, training: bool) -> tuple[list, list]:
    """(model windows, the example each window belongs to)."""
    raise NotImplementedError

  def featurise(self, spec: TaskSpec, examples: Sequence[dict], vocab, settings, training: bool) -> Featurised:
    """`examples` with their windows (`features`); a window of an example with a `language_id`
    (`language_ids.with_language_id`) carries it."""
    features, owners = self.features(spec, examples, vocab, settings, training)
    add_language_ids(features, owners, examples)
    return Featurised(list(examples), features, owners)

  def decode(self, spec: TaskSpec, settings, predict: Predict, data: Featurised, vocab=None):
    """Per-example predictions of `data` from the model's outputs over its windows (`predict`)."""
    raise NotImplementedError

  def pretrained(self, settings, config: TransformerConfig) -> Optional[Callable[[dict], dict]]:
    """How an imported checkpoint's parameters become this kind's backbone (None: as they are)."""
    return None

  def train_accuracy(self, examples: Sequence[dict], predicted) -> float:
    raise NotImplementedError

  def dev_score(self, examples: Sequence[dict], predicted) -> float:
    raise NotImplementedError

  def submission_text(self, predicted, questions: Sequence[dict] = (), where: str = "") -> str:
    raise NotImplementedError


def classification_head(config: TransformerConfig) -> str:
  """RoBERTa's classification head for XLM-R-style models, BERT's pooler head otherwise."""
  return "roberta" if config.position_style == "roberta" else "pooler"


class PairClassification(Kind):
  """A label per text pair: [CLS] a [SEP] b [SEP], a head on the first token; accuracy."""

  model_keys = ("input_ids", "input_mask", "token_type_ids", "labels", "example_weights")
  predict_keys = model_keys
  selection = ("dev_accuracy", "accuracy")

  def model(self, spec, config, settings=None, vocab=None):
    return ClassificationModel(config, len(spec.labels), classification_head(config))

  def features(self, spec, examples, vocab, settings, training):
    index = {label: i for i, label in enumerate(spec.labels)}
    out = []
    for ex in examples:
      texts = [ex["text_a"]] if ex["text_b"] is None else [ex["text_a"], ex["text_b"]]  # None: one sentence
      f = encode_pair(vocab, texts, settings.seq_len)
      if training and ex["label"] not in index:
        raise errors.DataError(f"example {ex['id']}: label {ex['label']!r} is not one of {list(spec.labels)}")
      f["labels"] = np.asarray(index[ex["label"]] if training else 0, np.int32)
      f["example_weights"] = np.asarray(1.0, np.float32)
      out.append(f)
    return out, list(range(len(examples)))

  def decode(self, spec, settings, predict, data, vocab=None):
    return [spec.labels[i] for i in predict(self.predict_keys).argmax(-1)]

  def train_accuracy(self, examples, predicted):
    return metrics.accuracy(predicted, [ex["label"] for ex in examples])

  def dev_score(self, examples, predicted):
    return metrics.accuracy(predicted, [ex["label"] for ex in examples])

  def submission_text(self, predicted, questions=(), where=""):
    return "".join(f"{label}\n" for label in predicted)


class Ranking(PairClassification):
  """A relevance rating per (query, page) pair (XGLUE WPR), as classification over the ratings.

  The official submission holds one rating per row and is scored with nDCG
  per query group, ties between a query's pages averaged: a classifier's
  argmax gives those integer ratings directly. `RankingRegression` (rounded
  regression) is the alternative, chosen with `RankingSettings.head`;
  which is better is a dev-nDCG comparison on the real WPR data.
  Checkpoints are selected on the mean dev nDCG x100 over query groups
  (`metrics.grouped_ndcg`, the scorer's definition; rows carry `group`).
  """

  selection = ("dev_ndcg", "nDCG")

  def dev_score(self, examples, predicted):
    ndcg = metrics.grouped_ndcg([ex["group"] for ex in examples], [float(ex["label"]) for ex in examples],
                                [float(p) for p in predicted])
    return 0.0 if ndcg is None else 100 * ndcg


class RankingRegression(Ranking):
  """WPR's rating as rounded regression: one real output per pair trained with squared error, rounded to the
  nearest rating and clipped to the scale for the submission (`RankingSettings(head='regression')`)."""

  def model(self, spec, config, settings=None, vocab=None):
    return RatingRegressionModel(config, head=classification_head(config))

  def decode(self, spec, settings, predict, data, vocab=None):
    ratings = np.clip(np.rint(predict(self.predict_keys)[..., 0]), 0, len(spec.labels) - 1).astype(int)
    return [spec.labels[r] for r in ratings]


class MultiTask(PairClassification):
  """Several pair-classification tasks fine-tuned as one model: a shared encoder and one head per task
  (`MultiTaskClassificationModel`; XGLUE's multi-task setting). `specs` are the member tasks in head order;
  each window carries `task_ids`, the index of its task's head, and is decoded with that task's labels."""

  # task_ids before the weights: the last key is the one padding rows are weighted out by
  model_keys = ("input_ids", "input_mask", "token_type_ids", "task_ids", "labels", "example_weights")
  predict_keys = model_keys

  def __init__(self, specs: Sequence[TaskSpec]):
    bad = [s.name for s in specs if s.kind != "pair_classification"]
    if bad or len(specs) < 2:
      which = f" (not pair classification: {', '.join(bad)})" if bad else ""
      raise errors.ConfigError(f"multi-task fine-tuning takes two or more pair-classification tasks; got "
                               f"{[s.name for s in specs]}{which}")
    self.specs = tuple(specs)
    self.index = {s.name: i for i, s in enumerate(self.specs)}

  def model(self, spec, config, settings=None, vocab=None):
    return MultiTaskClassificationModel(config, num_classes=tuple(len(s.labels) for s in self.specs),
                                        head=classification_head(config))

  def features(self, spec, examples, vocab, settings, training):
    out, owners = super().features(spec, examples, vocab, settings, training)
    for f in out:
      f["task_ids"] = np.asarray(self.index[spec.name], np.int32)
    return out, owners

  def decode(self, spec, settings, predict, data, vocab=None):
    best = predict(self.predict_keys).argmax(-1)  # within the row's own task: the other columns are -1e9
    return [self.specs[int(f["task_ids"])].labels[i] for f, i in zip(data.features, best)]


class Tagging(Kind):
  """A tag per word, on its first subword; sentences in sliding windows; seqeval 0.0.x chunk F1 on dev."""

  model_keys = ("input_ids", "input_mask", "token_type_ids", "labels", "label_weights")
  predict_keys = model_keys
  weight_key = "label_weights"
  selection = ("dev_f1", "F1")
  gold_key = "tags"

  def model(self, spec, config, settings=None, vocab=None):
    return TaggingModel(config, len(spec.labels))

  def features(self, spec, examples, vocab, settings, training):
    label_map = {t: i for i, t in enumerate(spec.labels)}
    context = settings.tagging.context if settings.tagging.context is not None else settings.seq_len // 2
    windows, owners = [], []
    for i, ex in enumerate(examples):
      tags = ex["tags"] if training else None
      for w in tagging_windows(ex["tokens"], vocab, settings.seq_len, context, tags, label_map):
        windows.append(w)
        owners.append(i)
    return windows, owners

  def decode(self, spec, settings, predict, data, vocab=None):
    examples, features, owners = data
    predicted = predict(self.predict_keys).argmax(-1)
    windows: dict[int, list[int]] = {}
    for k, owner in enumerate(owners):
      windows.setdefault(owner, []).append(k)
    return [[spec.labels[t] for t in merge_window_predictions(
        [features[k] for k in windows[i]], predicted[windows[i]], len(ex["tokens"]))]
            for i, ex in enumerate(examples)]

  def train_accuracy(self, examples, predicted):
    return metrics.pos_token_accuracy(predicted, [ex["tags"] for ex in examples])

  def dev_score(self, examples, predicted):
    # The official run_tag.py selects on seqeval 0.0.x chunk F1: entity F1 for NER, the leaderboard F1 for POS.
    return metrics.chunk_prf(predicted, [ex["tags"] for ex in examples])["f1"]

  def submission_text(self, predicted, questions=(), where=""):
    return "\n".join("".join(f"{tag}\n" for tag in tags) for tags in predicted)


class TaggingByAccuracy(Tagging):
  """Tagging whose task is scored by token accuracy (the mBERT paper's POS): dev selection on accuracy too."""

  selection = ("dev_accuracy", "accuracy")

  def dev_score(self, examples, predicted):
    return metrics.pos_token_accuracy(predicted, [ex["tags"] for ex in examples])


class SpanQa(Kind):
  """An answer span per question (SQuAD v1.1 windows); the final model predicts (no dev selection)."""

  model_keys = ("input_ids", "input_mask", "token_type_ids", "start_positions", "end_positions", "example_weights")
  predict_keys = ("input_ids", "input_mask", "token_type_ids", "example_weights")
  gold_key = None

  def model(self, spec, config, settings=None, vocab=None):
    return QaModel(config)

  def features(self, spec, examples, vocab, settings, training):
    windows, owners = [], []
    for i, ex in enumerate(examples):
      for w in qa_windows(ex, vocab, settings.seq_len, settings.qa.doc_stride, settings.qa.max_query_len, training):
        w["example_weights"] = np.asarray(1.0, np.float32)
        windows.append(w)
        owners.append(i)
    return windows, owners

  def decode(self, spec, settings, predict, data, vocab=None):
    out = predict(self.predict_keys)
    return best_spans(data.features, out["start_logits"], out["end_logits"],
                      max_answer_len=settings.qa.max_answer_len)

  def train_accuracy(self, examples, predicted):
    """SQuAD exact match x100 over the questions that have a prediction (`predicted` = {id: answer})."""
    answered = [ex for ex in examples if ex["id"] in predicted]
    hits = sum(max(metrics.qa_exact_match(predicted[ex["id"]], gold) for gold in ex["answers"]["text"])
               for ex in answered)
    return 100.0 * hits / max(1, len(answered))

  def submission_text(self, predicted: Mapping[str, str], questions=(), where=""):
    """The submission JSON {id: answer} in the questions' order; questions without a span are warned about
    (written as empty answers, which the scorer counts as `invalid`)."""
    empty = [q["id"] for q in questions if not predicted.get(q["id"])]
    if empty:
      logging.warning("%s: %d of %d questions got no answer span (written as empty answers), e.g. %s",
                      where, len(empty), len(questions), empty[:3])
    return json.dumps({q["id"]: predicted.get(q["id"], "") for q in questions}, ensure_ascii=False, indent=1)


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
  """The seq2seq side of a generation task's recipe (`TaskSettings.generation`).

  `target_len`: the most target tokens, EOS included (training targets are
  cut to it; decoding stops there). `seq2seq`: the decoder's shape.
  `beam_size` (1: greedy), `alpha` and `length_penalty` (`models/decoding.py`)
  decode dev and test. `language_tags`: {language: text the vocabulary encodes
  as one token}, whose id starts the decoder for that target language (VECO's
  target-language token; None: the vocabulary's BOS for every language); a
  language without a tag is refused.
  The initial checkpoint (an encoder, or a VECO stack exported with its
  cross-attention) gives the encoder, and copies of its `decoder_from` ("last"
  or "first") `decoder_layers` layers give the decoder (`veco_assembly`); a
  checkpoint without cross-attention leaves the decoder's fresh (XLM-R
  baseline).
  """

  target_len: int = 64
  seq2seq: Seq2SeqConfig = Seq2SeqConfig()
  label_smoothing: float = 0.1
  beam_size: int = 5
  alpha: float = 1.0
  length_penalty: str = "fairseq"
  decoder_from: str = "last"
  language_tags: Optional[Mapping[str, str]] = None

  def __post_init__(self):
    if self.target_len < 2:
      raise errors.ConfigError(f"GenerationSettings.target_len={self.target_len}; expected >= 2 (a token and EOS)")
    if self.decoder_from not in ("last", "first"):
      raise errors.ConfigError(f"GenerationSettings.decoder_from={self.decoder_from!r}; expected 'last' or 'first'")
    self.decoding  # noqa: B018 - checks beam_size, alpha and length_penalty now, not after training

  @property
  def decoding(self) -> DecodeSettings:
    return DecodeSettings(beam_size=self.beam_size, max_length=self.target_len, alpha=self.alpha,
                          length_penalty=self.length_penalty)


class Generation(Kind):
  """A text per source text (XGLUE QG / NTG): encoder-decoder, beam search, sacreBLEU as the official scorer.

  Features: the source as one encoder input ([CLS] source [SEP], cut to
  `seq_len`), the target's tokens + EOS (cut to `generation.target_len`), the
  decoder's start token. Dev selection and the training check use the official
  BLEU x100 (`bleu.xglue_bleu`).
  """

  model_keys = ("input_ids", "input_mask", "targets", "target_mask", "decoder_start")
  predict_keys = ("input_ids", "input_mask", "decoder_start", "example_weights")
  weight_key = "target_mask"
  selection = ("dev_bleu", "BLEU")
  gold_key = "target"

  def model(self, spec, config, settings=None, vocab=None):
    g = settings.generation
    return Seq2SeqModel(config, g.seq2seq, g.label_smoothing, eos_id=vocab.eos_id, decode_settings=g.decoding)

  def pretrained(self, settings, config):
    g = settings.generation
    assembly = Seq2SeqAssembly(g.seq2seq.decoder_layers, g.decoder_from, g.seq2seq.scale_decoder_embeddings,
                               fresh_cross_attention=True)
    return lambda params: seq2seq_backbone(params, config, assembly)

  def start_id(self, vocab, settings, language: str) -> int:
    tags = settings.generation.language_tags
    if tags is None:
      return vocab.bos_id
    if language not in tags:
      raise errors.ConfigError(f"target language {language!r} has no tag in GenerationSettings.language_tags "
                               f"(tags for: {', '.join(sorted(tags))})")
    ids = vocab.encode(tags[language])
    if len(ids) != 1:
      raise errors.ConfigError(f"the tag {tags[language]!r} of {language!r} is {len(ids)} tokens in the "
                               "vocabulary; expected one")
    return ids[0]

  def features(self, spec, examples, vocab, settings, training):
    g, out = settings.generation, []
    for ex in examples:
      f = encode_pair(vocab, [ex["source"]], settings.seq_len)
      del f["token_type_ids"]
      target = [] if ex.get("target") is None else vocab.encode(ex["target"])[: g.target_len - 1] + [vocab.eos_id]
      pad = g.target_len - len(target)
      f["targets"] = np.asarray(target + [vocab.pad_id] * pad, np.int32)
      f["target_mask"] = np.asarray([1] * len(target) + [0] * pad, np.int32)
      f["decoder_start"] = np.asarray(self.start_id(vocab, settings, ex["language"]), np.int32)
      f["example_weights"] = np.asarray(1.0, np.float32)
      out.append(f)
    return out, list(range(len(examples)))

  def decode(self, spec, settings, predict, data, vocab=None):
    result = predict(self.predict_keys)
    return [vocab.detokenize(seq[:n]).strip() for seq, n in zip(result.sequences[:, 0], result.lengths[:, 0])]

  def train_accuracy(self, examples, predicted):
    return 100 * bleu.xglue_bleu(list(predicted), [ex["target"] for ex in examples])

  def dev_score(self, examples, predicted):
    return 100 * bleu.xglue_bleu(list(predicted), [ex["target"] for ex in examples])

  def submission_text(self, predicted, questions=(), where=""):
    return "".join(" ".join(text.split()) + "\n" for text in predicted)  # one line per source line


class Parsing(Kind):
  """Dependency trees (the mBERT paper's biaffine parser, `models/parser.py`): one window per sentence, words on
  their first subword, MST decoding; dev LAS.

  Training cuts a sentence longer than `seq_len` subwords (the paper: 128) to its first words that fit, as the
  authors' code (`parsing_features.parse_features(truncate=True)`); evaluation takes those of at most
  `EVAL_MAX_WORDS` words, in windows of the smaller of their longest subword length and `EVAL_MAX_SUBWORDS`.
  Longer sentences are not predicted (None) and leave no block in the submission (the scorer skips them); one
  within 140 words but over 512 subwords (none in UD) is predicted as a chain from its first word.
  """

  weight_key = "word_mask"
  selection = ("dev_las", "LAS")
  gold_key = "heads"

  def __init__(self, gold_pos: bool = False):
    """`gold_pos`: the paper's second setting, the gold UPOS tags embedded beside the encoder's states."""
    self.upos = UPOS_TAGS if gold_pos else None
    extra = ("upos",) if gold_pos else ()
    self.predict_keys = ("input_ids", "input_mask", "token_type_ids", "word_starts") + extra + ("word_mask",)
    self.model_keys = self.predict_keys[:-1] + ("heads", "rels", "word_mask")

  def model(self, spec, config, settings=None, vocab=None):
    return BiaffineParserModel(config, num_rels=len(spec.labels), num_upos=None if self.upos is None
                               else len(self.upos))

  def features(self, spec, examples, vocab, settings, training):
    if training:
      words = subwords = settings.seq_len
    else:
      lengths = [parsing_features.subword_length(ex, vocab) for ex in examples
                 if len(ex["tokens"]) <= parsing_features.EVAL_MAX_WORDS] or [2]
      subwords = min(max(lengths), parsing_features.EVAL_MAX_SUBWORDS)
      words = min(max(len(ex["tokens"]) for ex in examples), parsing_features.EVAL_MAX_WORDS)
    out, owners = [], []
    for i, ex in enumerate(examples):
      f = parsing_features.parse_features(ex if training else {**ex, "heads": None}, vocab, words, subwords,
                                          spec.labels, self.upos, truncate=training)
      if f is not None:
        out.append(f)
        owners.append(i)
    if training:
      cut = sum(int(f["word_mask"].sum()) < len(examples[i]["tokens"]) for f, i in zip(out, owners))
      if cut or len(out) < len(examples):
        logging.info("%s: %d of %d training sentences exceed %d subwords: %d cut to their first words that fit, "
                     "%d left out (not even their first word fits)", spec.name, cut + len(examples) - len(out),
                     len(examples), subwords, cut, len(examples) - len(out))
    return out, owners

  def decode(self, spec, settings, predict, data, vocab=None):
    examples, owners = data.examples, data.owners
    out = predict(self.predict_keys)
    predicted = [None if len(ex["tokens"]) > parsing_features.EVAL_MAX_WORDS else
                 ([0] + list(range(1, len(ex["tokens"]))), ["dep"] * len(ex["tokens"])) for ex in examples]
    for k, i in enumerate(owners):
      heads, rels = decode_parse(out["arcs"][k], out["rel_ids"][k], len(examples[i]["tokens"]))
      predicted[i] = (heads, [spec.labels[r] for r in rels])
    return predicted

  @staticmethod
  def _scores(examples, predicted) -> dict:
    pairs = [(ex, p) for ex, p in zip(examples, predicted) if p is not None]
    return parsing.attachment_scores([ex["heads"] for ex, _ in pairs], [ex["deprels"] for ex, _ in pairs],
                                     [p[0] for _, p in pairs], [p[1] for _, p in pairs],
                                     [ex["upos"] for ex, _ in pairs])

  def train_accuracy(self, examples, predicted):
    return self._scores(examples, predicted)["uas"]

  def dev_score(self, examples, predicted):
    return self._scores(examples, predicted)["las"]

  def submission_text(self, predicted, questions=(), where=""):
    return "\n".join("".join(f"{h}\t{r}\n" for h, r in zip(*p)) for p in predicted if p is not None)


class FeatureBased(Kind):
  """The mBERT paper's feature-based transfer of a pair-classification, tagging or parsing kind: the same
  features, decoding and scores, the fixed encoder's layers mixed under a BiLSTM trained from scratch
  (`models/feature_based.py`; max-pooled for texts; the parser's biaffine scorers on its states). The
  optimizer should leave the encoder alone (`runs/mbert.gin`'s feature-based experiment freezes `backbone/`)."""

  @staticmethod
  def takes(base: Kind) -> bool:
    """Whether `base` has a feature-based form."""
    return type(base) in (PairClassification, Tagging, TaggingByAccuracy, Parsing)

  def __init__(self, base: Kind, hidden: int = PAPER_LSTM_HIDDEN):
    """`hidden`: the BiLSTM's units per direction (`FeatureBasedSettings.lstm_hidden`; the paper's 768)."""
    if not self.takes(base):
      raise errors.ConfigError(f"the feature-based setting takes pair-classification, tagging and parsing tasks, "
                               f"not {type(base).__name__}")
    self.base, self.hidden = base, hidden
    self.model_keys, self.predict_keys = base.model_keys, base.predict_keys
    self.weight_key, self.selection, self.gold_key = base.weight_key, base.selection, base.gold_key

  def model(self, spec, config, settings=None, vocab=None):
    if isinstance(self.base, Parsing):
      return dataclasses.replace(self.base.model(spec, config, settings, vocab), lstm_hidden=self.hidden)
    return FeatureBasedModel(config, num_outputs=len(spec.labels), pooled=isinstance(self.base, PairClassification),
                             hidden=self.hidden)

  def features(self, spec, examples, vocab, settings, training):
    return self.base.features(spec, examples, vocab, settings, training)

  def decode(self, spec, settings, predict, data, vocab=None):
    return self.base.decode(spec, settings, predict, data, vocab)

  def train_accuracy(self, examples, predicted):
    return self.base.train_accuracy(examples, predicted)

  def dev_score(self, examples, predicted):
    return self.base.dev_score(examples, predicted)

  def submission_text(self, predicted, questions=(), where=""):
    return self.base.submission_text(predicted, questions, where)


KINDS: dict[str, Kind] = {"pair_classification": PairClassification(), "ranking": Ranking(), "tagging": Tagging(),
                          "span_qa": SpanQa(), "generation": Generation(), "parsing": Parsing(),
                          "parsing_gold_pos": Parsing(gold_pos=True)}
TAGGING_BY_ACCURACY = TaggingByAccuracy()


def of(spec: TaskSpec) -> Kind:
  """The fine-tuning kind of `spec` (ConfigError for a kind that is not fine-tuned, e.g. retrieval)."""
  if spec.kind not in KINDS:
    raise errors.ConfigError(f"{spec.benchmark} {spec.name}: kind {spec.kind!r} is not fine-tuned; fine-tuned "
                             f"kinds: {', '.join(KINDS)}")
  if spec.kind == "tagging" and spec.score == "accuracy":
    return TAGGING_BY_ACCURACY
  return KINDS[spec.kind]
