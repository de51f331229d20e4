"""The XTREME benchmark end to end: fine-tune, predict, mine, score, report.

For every task: read the official layout (`xtreme_readers`), fine-tune a task
model (zero-shot: on English, SQuAD for XQuAD / MLQA, English TyDiQA-GoldP for
TyDiQA; or in-language for POS / NER / TyDiQA, see `FinetuneSettings.setting`),
predict the test set of every language, and write
the leaderboard submission `<run_dir>/submission/<task>/test-<lg>.tsv|json`.
BUCC and Tatoeba use sentence embeddings (mean of a chosen layer) of the
pretrained encoder. With a labels folder, the submission is scored
(`scorer.score_submission`) and the report (tables, plots) is written.

Each fine-tuned model lives in its own resumable run directory
`<run_dir>/models/<name>`: a re-run reuses finished models (predictions are
recomputed, cheaply). Settings other than zero-shot write to
`<run_dir>/submission-<setting>/`.

Translation settings (`xtreme_translations`; files under `translations_dir`,
default `<data_dir>/translations`, a copy of gs://xtreme_translations):

* translate_train: per target language, one model trained on English plus the
  translation of the English training data into that language (xnli, pawsx;
  SQuAD translations for xquad / mlqa, shared by both; tydiqa). English and
  languages without a translation (pseudo test languages) use the English model.
* translate_train_all: one model on English plus every translation on disk.
* translate_test: the zero-shot English model (the same `models/<name>`
  directory as zero_shot) predicts the test set translated into English
  (xnli, pawsx, xquad, mlqa); predictions are written under the ORIGINAL
  language's file `test-<lg>.tsv|json`, mapped back line by line (classification)
  or by question id (QA). For QA the predicted answer is the English span:
  mapping it back into the source language would need an alignment the
  translation files do not carry, so QA translate-test scores against the
  source-language gold are a lower bound.

Tasks without translations (panx, udpos, bucc2018, tatoeba) stay zero-shot in
these settings, as the in-language settings do for tasks without in-language
data. With `pseudo_test=True` the English test sets machine-translated into
other languages (`XNLI/pseudo-test`, `XQuAD/pseudo-test`, every language found
on disk) are also predicted, into `<run_dir>/submission-<setting>-pseudo/`,
and scored against the gold inside the pseudo files (written to
`<run_dir>/pseudo-labels/` in the leaderboard layout) with
`evaluation.scorer.score_file`; the scores go to
`<run_dir>/scores-<setting>-pseudo.json`.

All benchmark data is read through `XtremeRunner.read` and every on-disk
availability check goes through `available`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from typing import Any, Optional, Sequence, Union

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import atomic
from xtreme_jax.data import paths, xtreme_readers as readers, xtreme_translations as translations
from xtreme_jax.data.classification_source import encode_pair
from xtreme_jax.data.qa_features import qa_windows
from xtreme_jax.data.sources import FeatureListSource
from xtreme_jax.data.tagging_features import merge_window_predictions, tagging_windows
from xtreme_jax.data.vocabularies import load_vocabulary
from xtreme_jax.data.xtreme_data import XtremeData
from xtreme_jax.evaluation import metrics, retrieval
from xtreme_jax.evaluation.span_decoding import best_spans
from xtreme_jax.models.classification import ClassificationModel
from xtreme_jax.models.qa import QaModel
from xtreme_jax.models.tagging import TaggingModel
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.runs.train import describe, pretrained_loader
from xtreme_jax.training.checkpoints import claim_run_directory
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.partitioning import PartitionConfig
from xtreme_jax.training.trainer import Trainer, TrainerConfig

PANX_TAGS = ("B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER", "O")
UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
             "PUNCT", "SCONJ", "SYM", "VERB", "X")


@dataclasses.dataclass(frozen=True)
class TaskRecipe:
  kind: str                      # classification | tagging | qa | bucc | tatoeba
  train: Optional[tuple] = None  # (reader task, language, split) of the English training data
  labels: tuple = ()
  model_name: str = ""           # zero-shot run sub-directory; tasks sharing training data share a model


RECIPES = {
    "xnli": TaskRecipe("classification", ("xnli", "en", "train"), readers.XNLI_LABELS, "xnli"),
    "pawsx": TaskRecipe("classification", ("pawsx", "en", "train"), readers.PAWSX_LABELS, "pawsx"),
    "udpos": TaskRecipe("tagging", ("udpos", "en", "train"), UPOS_TAGS, "udpos"),
    "panx": TaskRecipe("tagging", ("panx", "en", "train"), PANX_TAGS, "panx"),
    "xquad": TaskRecipe("qa", ("squad", "en", "train"), (), "squad"),
    "mlqa": TaskRecipe("qa", ("squad", "en", "train"), (), "squad"),
    "tydiqa": TaskRecipe("qa", ("tydiqa", "en", "train"), (), "tydiqa"),
    "bucc2018": TaskRecipe("bucc"),
    "tatoeba": TaskRecipe("tatoeba"),
}
TASKS = tuple(RECIPES)
IN_LANGUAGE_TASKS = ("panx", "udpos", "tydiqa")
TRANSLATION_SETTINGS = ("translate_train", "translate_train_all", "translate_test")
SETTINGS = ("zero_shot", "in_language", "in_language_fewshot", "in_language_multi") + TRANSLATION_SETTINGS
# Task -> reader task whose translations are its translate-train data (xquad / mlqa: SQuAD).
TRANSLATE_TRAIN_SOURCE = {"xnli": "xnli", "pawsx": "pawsx", "xquad": "squad", "mlqa": "squad", "tydiqa": "tydiqa"}
TRANSLATE_TEST_TASKS = ("xnli", "pawsx", "xquad", "mlqa")
TRANSLATION_KINDS = translations.KINDS


@dataclasses.dataclass(frozen=True)
class FinetuneSettings:
  """Fine-tuning hyper-parameters shared by the tasks (mBERT recipe defaults)."""

  epochs: float = 2.0
  batch_size: int = 32
  seq_len: int = 128
  tagging_context: Optional[int] = None  # default: half of seq_len (64 of 128, as Wu & Dredze)
  qa_seq_len: int = 384
  doc_stride: int = 128
  max_query_len: int = 64
  max_answer_len: int = 30
  optimizer: OptimizerConfig = OptimizerConfig()
  log_every: int = 50
  seed: int = 0
  setting: str = "zero_shot"  # one of SETTINGS

  def __post_init__(self):
    if self.setting not in SETTINGS:
      raise ValueError(f"setting={self.setting!r}; expected one of {SETTINGS}")


def test_languages(task: str, data: Union[str, XtremeData], languages: Optional[Sequence[str]]) -> list[str]:
  """The requested languages, or every benchmark language whose test set is available.

  `data`: an `XtremeData`, or the official `download/` folder.
  """
  if isinstance(data, str):
    data = XtremeData("official", data)
  valid = readers.TASKS[task].languages["test"]
  if languages:
    unknown = sorted(set(languages) - set(valid))
    if unknown:
      raise ValueError(f"{task}: unknown language(s) {unknown}; valid: {list(valid)}")
    return list(languages)
  if data.source == "tfds" and task == "bucc2018":
    raise ValueError("bucc2018 cannot run on TFDS: the `bucc` builder holds only the gold pairs, not the corpora "
                     "BUCC mines from; drop it from TASKS or use DATA_SOURCE='official'")
  found = [lg for lg in valid if data.available(task, lg, "test")]
  if not found:
    raise FileNotFoundError(f"{task}: no test set for any language in the {data.source} data at {data.data_dir} "
                            f"(expected e.g. {data.location(task, valid[0], 'test')})")
  return found


# -- features ----------------------------------------------------------------

def classification_features(examples, vocab, recipe, seq_len, training):
  index = {label: i for i, label in enumerate(recipe.labels)}
  out = []
  for ex in examples:
    f = encode_pair(vocab, [ex["text_a"], ex["text_b"]], seq_len)
    if training and ex["label"] not in index:
      raise ValueError(f"example {ex['id']}: label {ex['label']!r} is not one of {list(recipe.labels)}")
    f["labels"] = np.asarray(index[ex["label"]] if training else 0, np.int32)
    f["example_weights"] = np.asarray(1.0, np.float32)
    out.append(f)
  return out


def tagging_features(examples, vocab, recipe, settings, training):
  label_map = {t: i for i, t in enumerate(recipe.labels)}
  windows, owners = [], []
  for i, ex in enumerate(examples):
    tags = ex["tags"] if training else None
    context = settings.tagging_context if settings.tagging_context is not None else settings.seq_len // 2
    for w in tagging_windows(ex["tokens"], vocab, settings.seq_len, context, tags, label_map):
      windows.append(w)
      owners.append(i)
  return windows, owners


def qa_features(examples, vocab, settings, training):
  out = []
  for ex in examples:
    for w in qa_windows(ex, vocab, settings.qa_seq_len, settings.doc_stride, settings.max_query_len, training):
      w["example_weights"] = np.asarray(1.0, np.float32)
      out.append(w)
  return out


MODEL_KEYS = {
    "classification": ("input_ids", "input_mask", "token_type_ids", "labels", "example_weights"),
    "tagging": ("input_ids", "input_mask", "token_type_ids", "labels", "label_weights"),
    "qa": ("input_ids", "input_mask", "token_type_ids", "start_positions", "end_positions", "example_weights"),
}
QA_PREDICT_KEYS = ("input_ids", "input_mask", "token_type_ids", "example_weights")


def _model(recipe: TaskRecipe, config: TransformerConfig):
  if recipe.kind == "classification":
    return ClassificationModel(config, len(recipe.labels), "roberta" if config.position_style == "roberta" else "pooler")
  if recipe.kind == "tagging":
    return TaggingModel(config, len(recipe.labels))
  return QaModel(config)


def _features(recipe, examples, vocab, settings, training):
  if recipe.kind == "classification":
    return classification_features(examples, vocab, recipe, settings.seq_len, training), None
  if recipe.kind == "tagging":
    return tagging_features(examples, vocab, recipe, settings, training)
  return qa_features(examples, vocab, settings, training), None


# -- one task ----------------------------------------------------------------

class XtremeRunner:
  """Fine-tunes, predicts and writes the submission for the configured tasks."""

  def __init__(self, run_dir, data_dir, config, vocabulary, init_checkpoint, settings, partition,
               translations_dir: Optional[str] = None, data_source: str = "official"):
    self.run_dir, self.data_dir, self.config = run_dir, data_dir, config
    self.data = XtremeData(data_source, data_dir, translations_dir)
    self.translations_dir = self.data.translations_root
    self.vocabulary = os.path.abspath(paths.resolve(data_dir, vocabulary))
    self.vocab = load_vocabulary(self.vocabulary)
    self.init_checkpoint, self.settings, self.partition = init_checkpoint, settings, partition
    suffix = "" if settings.setting == "zero_shot" else f"-{settings.setting}"
    self.submission = os.path.join(run_dir, "submission" + suffix)
    self.pseudo_submission = os.path.join(run_dir, f"submission-{settings.setting}-pseudo")
    self.pseudo_labels = os.path.join(run_dir, "pseudo-labels")
    self._model_in_memory = (None, None)

  def read(self, task: str, language: str, split: str):
    """Every read of benchmark data goes through here: an official split, or a translation kind."""
    return self.data.read(task, language, split)

  def available(self, task: str, language: str, split: str) -> bool:
    """Whether `read(task, language, split)` has data to read."""
    return self.data.available(task, language, split)

  def _write(self, task: str, language: str, suffix: str, text: str, directory: Optional[str] = None) -> str:
    path = os.path.join(directory or self.submission, task, f"test-{language}.{suffix}")
    if jax.process_index() == 0:
      atomic.write_text(path, text)
    return path

  def training_set(self, task: str, language: str) -> tuple[str, tuple, Optional[int]]:
    """(model name, ((reader task, language, split), ...), example limit) for `task` tested on `language`.

    zero_shot: English training data. in_language / in_language_fewshot: the
    test language's own training data (first 1,000 examples for few-shot);
    in_language_multi: every language's training data, one model. Tasks without
    in-language training data (classification, XQuAD, MLQA) stay zero-shot.
    translate_train: English + the translation into `language` (English and
    languages without a translation: English only); translate_train_all:
    English + every translation on disk; translate_test: English (the zero-shot
    model). Tasks without translations stay zero-shot.
    """
    recipe, setting = RECIPES[task], self.settings.setting
    if setting in TRANSLATION_SETTINGS:
      src = TRANSLATE_TRAIN_SOURCE.get(task)
      if setting == "translate_test" or src is None:
        return recipe.model_name, (recipe.train,), None
      if setting == "translate_train_all":
        langs = [lg for lg in translations.languages(src, "translate_train")
                 if self.available(src, lg, "translate_train")]
        return (f"{recipe.model_name}_translate_train_all",
                (recipe.train,) + tuple((src, lg, "translate_train") for lg in langs), None)
      if language not in translations.languages(task, "translate_train"):
        return recipe.model_name, (recipe.train,), None
      return (f"{recipe.model_name}_translate_train_{language}",
              (recipe.train, (src, language, "translate_train")), None)
    if setting == "zero_shot" or task not in IN_LANGUAGE_TASKS:
      return recipe.model_name, (recipe.train,), None
    train_langs = readers.TASKS[task].languages["train"]
    if setting == "in_language_multi":
      return f"{task}_all", tuple((task, lg, "train") for lg in train_langs
                                  if self.available(task, lg, "train")), None
    if language not in train_langs:
      raise ValueError(f"{task}: {language} has no training split for the {setting} setting; "
                       f"languages with one: {list(train_langs)}")
    few = setting == "in_language_fewshot"
    return f"{task}_{language}" + ("_fewshot1000" if few else ""), ((task, language, "train"),), 1000 if few else None

  def finetuned(self, task: str, language: str):
    """(trainer, params) of the model `task` uses for `language` (one model in memory at a time)."""
    name, sources, limit = self.training_set(task, language)
    if self._model_in_memory[0] != name:
      self._model_in_memory = (name, self._finetune(task, name, sources, limit))
    return self._model_in_memory[1]

  def _finetune(self, task: str, name: str, sources: tuple, limit: Optional[int]):
    """Train (or resume, or reload when finished) `name` in its own run directory."""
    s, recipe = self.settings, RECIPES[task]
    examples = [ex for src in sources for ex in self.read(*src)[:limit]]
    features, _ = _features(recipe, examples, self.vocab, s, training=True)
    model = _model(recipe, self.config)
    source = FeatureListSource(features, s.batch_size, s.seed,
                               weight_keys=("label_weights",) if recipe.kind == "tagging" else ("example_weights",),
                               model_keys=MODEL_KEYS[recipe.kind])
    steps = max(1, int(round(s.epochs * len(features) / s.batch_size)))
    run_dir = os.path.join(self.run_dir, "models", name)
    trained_by = {k: v for k, v in describe(s).items() if k not in ("setting", "log_every")}  # not model-changing
    fingerprint = {"mode": "xtreme-finetune", "model": describe(model), "train": sources,
                   "limit": limit, "settings": trained_by, "steps": steps,
                   "init_checkpoint": self.init_checkpoint, "vocabulary": self.vocabulary,
                   "data_dir": os.path.abspath(self.data_dir) if self.data_dir else None}
    if self.data.source != "official":  # only then: older run dirs stay valid
      fingerprint["data_source"] = self.data.source
    if any(src[2] in TRANSLATION_KINDS for src in sources):  # only then: older run dirs stay valid
      fingerprint["translations"] = [self.data.location(*src) for src in sources if src[2] in TRANSLATION_KINDS]
    claim_run_directory(run_dir, fingerprint)
    trainer = Trainer(model, s.optimizer, TrainerConfig(train_steps=steps, log_every=min(s.log_every, steps),
                                                        checkpoint_every=steps, keep_checkpoints=1, seed=s.seed),
                      self.partition, run_dir)
    logging.info("fine-tuning %s on %d windows of %s for %d steps", name, len(features), sources, steps)
    state, _ = trainer.fit(source, None, pretrained_loader(self.init_checkpoint, self.config))
    trainer.checkpointer.close()
    return trainer, state.params

  def _predict(self, trainer, params, features, keys) -> list:
    source = FeatureListSource(features, self.settings.batch_size, model_keys=keys,
                               weight_keys=(keys[-1],))
    outs = list(trainer.predict(params, source.eval_batches(jax.process_index(), jax.process_count())))
    merged = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outs)
    return jax.tree_util.tree_map(lambda x: x[: len(features)], merged)

  def test_split(self, task: str, language: str, pseudo: bool = False) -> str:
    """The split predicted for `language`: test, translate_test (translate_test setting) or pseudo_test."""
    if pseudo:
      return "pseudo_test"
    if (self.settings.setting == "translate_test" and task in TRANSLATE_TEST_TASKS
        and language in translations.languages(task, "translate_test")):
      return "translate_test"
    return "test"

  def predict_language(self, task: str, language: str, pseudo: bool = False) -> str:
    """Predicts the test set of `language` (the translated / pseudo one where the setting says so)."""
    recipe = RECIPES[task]
    split = self.test_split(task, language, pseudo)
    examples = self.read(task, language, split)
    directory = self.pseudo_submission if pseudo else None
    trainer, params = self.finetuned(task, language)
    features, owners = _features(recipe, examples, self.vocab, self.settings, training=False)
    if recipe.kind == "classification":
      logits = self._predict(trainer, params, features, MODEL_KEYS["classification"])
      # translate_test rows are line-aligned with the original test file (checked by the reader).
      return self._write(task, language, "tsv", "".join(f"{recipe.labels[i]}\n" for i in logits.argmax(-1)),
                         directory)
    if recipe.kind == "tagging":
      logits = self._predict(trainer, params, features, MODEL_KEYS["tagging"])
      by_sentence: dict[int, list[int]] = {}
      for k, owner in enumerate(owners):
        by_sentence.setdefault(owner, []).append(k)
      predicted = logits.argmax(-1)
      lines = []
      for i, ex in enumerate(examples):
        mine = by_sentence[i]
        ids = merge_window_predictions([features[k] for k in mine], predicted[mine], len(ex["tokens"]))
        lines.append("".join(f"{recipe.labels[t]}\n" for t in ids))
      return self._write(task, language, "tsv", "\n".join(lines), directory)
    out = self._predict(trainer, params, features, QA_PREDICT_KEYS)
    answers = best_spans(features, out["start_logits"], out["end_logits"],
                         max_answer_len=self.settings.max_answer_len)
    # translate_test keeps the original question ids (checked by the reader): map back by id, in the
    # original file's order.
    order = self.read(task, language, "test") if split == "translate_test" else examples
    return self._write(task, language, "json", json.dumps({ex["id"]: answers.get(ex["id"], "") for ex in order},
                                                          ensure_ascii=False, indent=1), directory)

  def pseudo_languages(self, task: str) -> list[str]:
    """Pseudo test languages of `task` found on disk (none for tasks without pseudo test sets)."""
    if task not in translations.tasks("pseudo_test") or self.translations_dir is None:
      return []
    return translations.pseudo_languages_on_disk(task, self.translations_dir)

  def write_pseudo_gold(self, task: str, language: str) -> str:
    """The gold of a pseudo test set in the leaderboard labels layout (under `pseudo_labels`)."""
    examples = self.read(task, language, "pseudo_test")
    path = os.path.join(self.pseudo_labels, task, f"test-{language}.{'tsv' if RECIPES[task].kind != 'qa' else 'json'}")
    if RECIPES[task].kind == "qa":
      with open(translations.translation_path(task, self.translations_dir, language, "pseudo_test"),
                encoding="utf-8-sig") as f:
        text = json.dumps(json.load(f), ensure_ascii=False)  # the SQuAD JSON with answers, as the labels hold it
    else:
      text = "".join(f"{ex['label']}\n" for ex in examples)
    if jax.process_index() == 0:
      atomic.write_text(path, text)
    return path

  # -- retrieval -------------------------------------------------------------

  @functools.cached_property
  def encoder_params(self):
    if self.init_checkpoint:
      loader = pretrained_loader(self.init_checkpoint, self.config)  # checks the shapes, converts the layout
      return loader({"backbone": jax.eval_shape(lambda: self._fresh_encoder())})["backbone"]
    logging.info("no INIT_CHECKPOINT: retrieval uses a randomly initialised encoder")
    return self._fresh_encoder()

  def _fresh_encoder(self):
    ids = jnp.zeros((1, 4), jnp.int32)
    return nn.unbox(TransformerEncoder(self.config).init(jax.random.PRNGKey(self.settings.seed), ids, ids + 1,
                                                          method=TransformerEncoder.init_all))["params"]

  def embed(self, sentences: Sequence[str], layer: int) -> np.ndarray:
    """Mean-pooled states of `layer` (0 = embeddings) for each sentence."""
    feats = [encode_pair(self.vocab, [s], self.settings.seq_len) for s in sentences]
    return sentence_embeddings(self.config, self.encoder_params, feats, layer, self.settings.batch_size)

  def retrieve_language(self, task: str, language: str, layer: int) -> str:
    if task == "tatoeba":
      data = self.read(task, language, "test")
      src, tgt = self.embed(data["source"], layer), self.embed(data["target"], layer)
      nearest = retrieval.tatoeba_predict(src, tgt)
      return self._write(task, language, "tsv", "".join(f"{int(i)}\n" for i in nearest))
    threshold = None
    if self.available(task, language, "dev"):
      dev = self.read(task, language, "dev")
      threshold = metrics.bucc_best_threshold(self._mine(dev, layer), dev["gold"])
    test = self.read(task, language, "test")
    candidates = self._mine(test, layer)
    pairs = metrics.apply_threshold(candidates, threshold) if threshold is not None else list(candidates)
    return self._write(task, language, "tsv", "".join(f"{s}\t{t}\n" for s, t in pairs))

  def _mine(self, data: dict, layer: int) -> dict:
    """{(src_id, tgt_id): margin score} of the mined candidate pairs."""
    src_ids, src = zip(*data["source"])
    tgt_ids, tgt = zip(*data["target"])
    # duplicates="drop": sentences occurring twice are left out, as the official BUCC evaluation does.
    mined = retrieval.mine_bucc(self.embed(src, layer), self.embed(tgt, layer), src_ids, tgt_ids, src, tgt,
                                duplicates="drop")
    return {(s, t): score for s, t, score in mined}


@functools.partial(jax.jit, static_argnames=("config", "layer"))
def _mean_pooled(params: Any, batch: dict, *, config: TransformerConfig, layer: int) -> jax.Array:
  out = TransformerEncoder(config).apply({"params": params}, batch["input_ids"], batch["input_mask"],
                                         batch["token_type_ids"], return_all=True)
  states = out.embeddings if layer == 0 else out.all_layers[layer - 1]
  mask = batch["input_mask"][..., None].astype(jnp.float32)
  return (states.astype(jnp.float32) * mask).sum(1) / jnp.maximum(mask.sum(1), 1.0)


def sentence_embeddings(config: TransformerConfig, params: Any, features: list[dict], layer: int,
                        batch_size: int) -> np.ndarray:
  """Mean over real tokens of the hidden states after `layer` (0 = embedding output)."""
  if not 0 <= layer <= config.num_layers:
    raise ValueError(f"retrieval layer {layer}; expected 0..{config.num_layers}")
  keys = ("input_ids", "input_mask", "token_type_ids")
  chunks = []
  for start in range(0, len(features), batch_size):
    part = features[start:start + batch_size]
    part = part + [part[-1]] * (batch_size - len(part))
    batch = {k: np.stack([f[k] for f in part]) for k in keys}
    chunks.append(np.asarray(_mean_pooled(params, batch, config=config, layer=layer)))
  return np.concatenate(chunks)[: len(features)]


def xtreme(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
           labels_dir: Optional[str] = None, tasks: Sequence[str] = TASKS,
           languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
           settings: FinetuneSettings = FinetuneSettings(), retrieval_layer: Optional[int] = None,
           partition: PartitionConfig = PartitionConfig(), translations_dir: Optional[str] = None,
           pseudo_test: bool = False, data_source: str = "official") -> dict:
  """Runs the XTREME benchmark in `settings.setting`; returns the scores (when `labels_dir` is given).

  `data_source`: "official" (`data_dir` is the `download/` folder) or "tfds"
  (`data_dir` is the TFDS data dir, None: TFDS's default); see `xtreme_data`.
  `translations_dir`: the copy of gs://xtreme_translations (default `<data_dir>/translations`).
  `pseudo_test`: also predict and score the pseudo test languages found there
  (the result then has a `pseudo` entry: {task: {language: metrics}}).
  """
  unknown = sorted(set(tasks) - set(TASKS))
  if unknown:
    raise ValueError(f"unknown task(s) {unknown}; valid: {list(TASKS)}")
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        translations_dir, data_source)
  plan = {t: test_languages(t, runner.data, (languages or {}).get(t)) for t in tasks}
  pseudo_plan = {t: runner.pseudo_languages(t) for t in tasks} if pseudo_test else {}
  layer = retrieval_layer if retrieval_layer is not None else (2 * model_config.num_layers) // 3
  for task, langs in plan.items():
    for lg in langs:
      if RECIPES[task].kind in ("bucc", "tatoeba"):
        path = runner.retrieve_language(task, lg, layer)
      else:
        path = runner.predict_language(task, lg)
      logging.info("wrote %s", path)
    for lg in pseudo_plan.get(task, ()):
      logging.info("wrote %s", runner.predict_language(task, lg, pseudo=True))
  pseudo = score_pseudo(runner, pseudo_plan) if pseudo_test else None
  if not labels_dir:
    print(f"submission written to {runner.submission}; pass LABELS_DIR to score it")
    return {} if pseudo is None else {"pseudo": pseudo}
  from xtreme_jax.evaluation import report, scorer
  results = scorer.score_submission(runner.submission, labels_dir, out=os.path.join(run_dir, "scores.json"))
  report.write_report(results, os.path.join(run_dir, "report"))
  print(scorer.format_table(results))
  print(f"report: {os.path.join(run_dir, 'report', 'report.md')}")
  if pseudo is not None:
    results = {**results, "pseudo": pseudo}
  return results


def score_pseudo(runner: XtremeRunner, plan: dict) -> dict:
  """Scores the pseudo test predictions against their gold; {task: {language: metrics}}, also written to JSON."""
  from xtreme_jax.evaluation import metrics as task_metrics, scorer
  scores: dict = {}
  for task, langs in plan.items():
    suffix = "json" if RECIPES[task].kind == "qa" else "tsv"
    for lg in langs:
      gold = runner.write_pseudo_gold(task, lg)
      pred = os.path.join(runner.pseudo_submission, task, f"test-{lg}.{suffix}")
      scores.setdefault(task, {})[lg] = scorer.score_file(task, lg, pred, gold)
  out = os.path.join(runner.run_dir, f"scores-{runner.settings.setting}-pseudo.json")
  if jax.process_index() == 0:
    atomic.write_json(out, scores)
  if not scores:
    print("pseudo test: no pseudo test file found under", runner.translations_dir)
  for task, by_lang in scores.items():
    print(f"pseudo {task}: " + "  ".join(f"{lg} {task_metrics.language_score(task, m):.1f}"
                                         for lg, m in by_lang.items()))
  return scores
