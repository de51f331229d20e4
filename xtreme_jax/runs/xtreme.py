"""The XTREME benchmark end to end: fine-tune, predict, mine, score, report.

For every task: read the official layout (`xtreme_readers`), fine-tune a task
model (zero-shot: on English, SQuAD for XQuAD / MLQA, English TyDiQA-GoldP for
TyDiQA; or in-language for POS / NER / TyDiQA, see `FinetuneSettings.setting`),
predict the test set of every language, and write the leaderboard submission
`<run_dir>/submission/<task>/test-<lg>.tsv|json`. BUCC and Tatoeba use
sentence embeddings of the pretrained encoder (`RetrievalSettings`). The
submission's `manifest.json` records the data source (official order or
TFDS's shuffled order, `scorer.write_manifest`). With a labels folder, the
tasks of this invocation (TASKS) are scored (`scorer.score_submission`; other
task folders of the submission are ignored) and the report (tables, plots) is
written; position-matched tasks whose labels come from another data source
are refused at start-up.

Recipes. Each fine-tuned task has its own `TaskSettings` (epochs, batch,
learning rate, warm-up, weight decay, max length, QA stride, dev evaluation
interval and checkpoint selection); `gin_configs/runs/xtreme.gin` binds the
official scripts' recipe per task with Gin scopes (`xnli/xtreme.TaskSettings`,
...). XQuAD and MLQA share the SQuAD model and its settings (key `squad`).

Checkpoint selection (`TaskSettings.selection`, Gin `SELECTION`). A
classification or tagging model is evaluated on dev data every `eval_every`
updates and at the end, and the parameters with the best dev score predict
the test sets: `english_dev` (the English dev set, as the official scripts)
or `mean_dev` (the mean over every dev language on disk, as XGLUE and
FILTER). The dev score is the one the official scripts select on: accuracy
(XNLI, PAWS-X) or seqeval-0.0.x chunk F1 (`evaluation.metrics`: entity F1 for
PAN-X, the leaderboard F1 for UD-POS, as `run_tag.py` computes it). QA models,
`final`, and tasks without the dev data keep the final model. `runs.json`
names each model's `criterion` and `selected_step`.

Every fine-tuned model lives in its own resumable run directory
`<run_dir>/models/<name>` (`RunDirectory`: locked while training, its
fingerprint written after its first step): a re-run reuses finished models.
After fine-tuning, the first `train_accuracy_examples` training examples are
predicted once with the final parameters (did the model fit its data?); each
model's loss history, steps, selection and training accuracy go to
`<run_dir>/runs.json` and the report (`results["runs"]`). After a NaN stop,
`resume_overrides` (Gin `RESUME_OVERRIDES`, e.g. `{'learning_rate': 1e-5}`)
changes the optimizer of the models being resumed (an unfinished
`models/<name>`), as in `runs/train.py`; finished and new models keep theirs.

The run directory itself is claimed too (`run_fingerprint`): a lock refuses a
second concurrent run; a directory holding a benchmark run of another
configuration (model, vocabulary, data, per-task recipes, initial checkpoint,
seed) is refused naming the differing keys; the fingerprint
(`run_config.json`) is written only after the start-up checks passed. The
task and language selection (TASKS, LANGUAGES), the setting, LABELS_DIR and
PSEUDO_TEST are not part of it: a run directory may be re-entered to run other
tasks or languages, and the settings share it (the zero-shot models serve
translate_test; every other setting has its own models and its own outputs:
`submission-<setting>/`, `scores-<setting>.json`, `report-<setting>/`).

Re-runs skip finished predictions: beside each submission folder,
`<folder>.records.json` holds, per prediction file, a digest of what made it
(the model directory's `run_config.json` and summary, or for retrieval the
encoder and its settings; the prediction settings; path, size and mtime of
every input file) and of the file's own content. A file is rewritten only when
that digest changed (a retrained model, edited data, new settings) or the file
no longer matches; a model whose predictions are all up to date is not loaded.

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
  or by question id (QA; the translated ids must be the original ones), checked
  at start-up. Classification translate-test needs DATA_SOURCE='official' (its
  rows follow the official test files, which TFDS shuffles). For
  QA the predicted answer is the English span: mapping it back into the source
  language would need an alignment the translation files do not carry, so QA
  translate-test scores against the source-language gold are a lower bound.

FILTER settings (`filter_teacher`, `filter_student`; both benchmarks): each
fine-tuned task's examples are pairs of a text and its translation
(`data/filter_pairs.py`, `read`), fine-tuned with `filter_kinds.Filter` (the
task's kind on both sides of `networks/filter.py`). One model per task
trains on the pairs of every language with translations (`filter_sources`).
The teacher's soft labels (its target-side logits on the training rows,
`runs/soft_labels.py`) are written into its model directory; the student
trains on them (training the teacher first unless
`FilterSettings.train_teacher` is False). Dev and test are predicted from
inference pairs (the text with its English translation). With scores of
several settings in one run directory, `report-<setting>/settings.md` puts
them side by side.

The mBERT paper's tasks (`mbert`, benchmark "mbert": MLDoc, NER, POS,
dependency parsing) run zero-shot from English in the same runner, or in the
setting `feature_based` (the fixed encoder's layers mixed under a BiLSTM,
`task_kinds.FeatureBased`; also XTREME's classification and tagging tasks,
for the paper's XNLI); their scores come from `evaluation/mbert_scorer.py`
and their report adds the subword overlap with the English training data.

In the translation settings, tasks without translations (panx, udpos, bucc2018,
tatoeba) stay zero-shot, as the in-language settings do for tasks without
in-language data; in the FILTER settings a tagging task trains on English and
the languages whose translation the user supplies, and the retrieval tasks
stay zero-shot. With `pseudo_test=True` the English test sets machine-translated into
other languages (`XNLI/pseudo-test`, `XQuAD/pseudo-test`, every language found
on disk) are also predicted, into `<run_dir>/submission-<setting>-pseudo/`,
and scored against the gold inside the pseudo files (written to
`<run_dir>/pseudo-labels/` in the leaderboard layout) with
`evaluation.scorer.score_file`; the scores go to
`<run_dir>/scores-<setting>-pseudo.json`.

Everything a user can get wrong (task, language, setting, recipe, a missing
labels folder or data file) is checked before any training (`check_run`).
Progress: one line or bar per phase (the Trainer's bar per fine-tuned model,
one bar per task for predicting and for retrieval); details go to
`logging.info`. All benchmark data is read through `XtremeRunner.read` and
every on-disk availability check goes through `available`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import sys
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from xtreme_jax import atomic, errors, fs, text
from xtreme_jax.data import paths, xtreme_readers as readers, xtreme_translations as translations
from xtreme_jax.data.classification_source import encode_pair
from xtreme_jax.data.sources import FeatureListSource
from xtreme_jax.data.vocabularies import load_vocabulary
from xtreme_jax.data.xglue_data import XglueData
from xtreme_jax.data.xtreme_data import XtremeData
from xtreme_jax.evaluation import metrics, retrieval
from xtreme_jax.models.feature_based import PAPER_LSTM_HIDDEN
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks import layers
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.registry import BENCHMARKS, MBERT, XGLUE, XTREME, BenchmarkSpec, xglue as xglue_registry
from xtreme_jax.runs import benchmarks, filter_kinds, fine_tuning, soft_labels, task_kinds
from xtreme_jax.runs.train import apply_overrides, describe, pretrained_loader
from xtreme_jax.training.checkpoints import RunDirectory
from xtreme_jax.training.optim import OptimizerConfig, check_frozen_depth
from xtreme_jax.training.partitioning import PartitionConfig
from xtreme_jax.training import validation as v
from xtreme_jax.training.trainer import PlateauSchedule, Trainer, TrainerConfig


TASKS = XTREME.task_names


def predict_features(trainer: Trainer, params: Any, features: list, keys: tuple, batch_size: int) -> Any:
  """The model's outputs for every feature dict, in order (batches of `keys`; the last key weights out the
  padding rows of the last batch)."""
  source = FeatureListSource(features, batch_size, model_keys=keys, weight_keys=(keys[-1],))
  outs = list(trainer.predict(params, source.eval_batches(*trainer.feed_slot)))
  return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[: len(features)], *outs)


def filter_pairs():
  """`data/filter_pairs` (FILTER's paired data), imported when a FILTER setting reads pairs."""
  from xtreme_jax.data import filter_pairs as module  # pylint: disable=g-import-not-at-top
  return module


def retrieval_tasks(benchmark: BenchmarkSpec) -> tuple:
  """The benchmark's tasks that are not fine-tuned (XTREME's BUCC and Tatoeba: `RetrievalSettings` keys)."""
  return tuple(t.name for t in benchmark.tasks if not t.fine_tuned)


def finetuned_models(benchmark: BenchmarkSpec) -> tuple:
  """The benchmark's fine-tuned models (`TaskSettings` keys; tasks with the same training data share one)."""
  return tuple(dict.fromkeys(t.model for t in benchmark.tasks if t.fine_tuned))


RETRIEVAL_TASKS = retrieval_tasks(XTREME)
FINETUNED = finetuned_models(XTREME)  # XTREME's settings keys
# Every benchmark's settings (`BenchmarkSpec.settings`; a run allows its benchmark's only).
SETTINGS = tuple(dict.fromkeys(s for b in BENCHMARKS.values() for s in b.settings))
TRANSLATION_KINDS = translations.KINDS
SELECTIONS = ("english_dev", "mean_dev", "final")
RANKING_HEADS = ("classification", "regression")  # WPR: classes over the ratings, or rounded regression
HISTORY_POINTS = 500  # the loss history in runs.json: at most this many [step, mean loss] points


def outputs(setting: str, split: str = "test") -> dict[str, str]:
  """Names of one setting's outputs in the run directory (zero_shot: `submission`, `scores.json`, `report`;
  predictions of the dev split, XGLUE's SPLIT='dev': `submission-dev`, ...)."""
  suffix = ("" if split == "test" else f"-{split}") + ("" if setting == fine_tuning.ZERO_SHOT.name else f"-{setting}")
  return {"submission": f"submission{suffix}", "scores": f"scores{suffix}.json", "report": f"report{suffix}",
          "pseudo_submission": f"submission-{setting}-pseudo", "pseudo_scores": f"scores-{setting}-pseudo.json"}


_LABELS = {fine_tuning.SETTINGS[s].label(lg) for s in SETTINGS for b in BENCHMARKS.values() for t in b.tasks
           for lg in t.languages.get("train", ())}
# Everything the benchmark writes into its run directory: a directory made before runs were claimed holds them.
RUN_ENTRIES = frozenset(
    {"models", "runs.json", "config.gin", "pseudo-labels"}
    | {name for s in _LABELS for sp in ("test", "dev") for name in outputs(s, sp).values()}
    | {outputs(s, sp)[k] + ".records.json" for s in _LABELS for sp in ("test", "dev")
       for k in ("submission", "pseudo_submission")})


# -- settings ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TaskSettings:
  """The fine-tuning recipe of one task (defaults: the official scripts' XNLI / PAWS-X recipe).

  `seq_len` is the maximum length in subword tokens (QA: of one window of the
  question and the context, windows `doc_stride` tokens apart). `batch_size`
  is the effective (global) batch; `accum_steps` splits it into micro-batches.
  `eval_every` (updates between dev evaluations, or "epoch": after every
  pass over the training windows, as XGLUE's scripts; None: only after the
  last update) and `selection` choose the parameters that predict the test sets
  (`english_dev`: best English dev score, as the official scripts;
  `mean_dev`: best mean over the dev languages on disk, as XGLUE and FILTER;
  `final`: the last update, as the official QA scripts, which QA models and
  tasks without dev data always use). See the module doc. `ranking_head`:
  the head of a ranking task (XGLUE WPR), `classification` over the ratings or
  rounded `regression` (`runs/task_kinds.py`). `generation`: the encoder-decoder,
  target length and decoding of a generation task (XGLUE QG / NTG). `filter`:
  FILTER's layers, self-teaching and inference pairs (the FILTER settings).
  `plateau`: lower the learning rate when the selected dev score stops
  improving, stop below a floor (`trainer.PlateauSchedule`; the mBERT paper's
  feature-based recipe); needs a dev selection. `lstm_hidden`: the BiLSTM's
  units per direction in the feature-based setting (the paper's d_h = 768).
  """

  epochs: float = 5.0
  batch_size: int = 32
  accum_steps: int = 1
  seq_len: int = 128
  doc_stride: int = 128
  max_query_len: int = 64
  max_answer_len: int = 30
  tagging_context: Optional[int] = None  # default: half of seq_len (64 of 128, as Wu & Dredze)
  optimizer: OptimizerConfig = OptimizerConfig(learning_rate=2e-5, warmup_ratio=0.0, warmup_steps=0,
                                              weight_decay=0.0)
  eval_every: Optional[Union[int, str]] = None
  selection: str = "english_dev"
  ranking_head: str = "classification"
  generation: task_kinds.GenerationSettings = task_kinds.GenerationSettings()
  filter: filter_kinds.FilterSettings = filter_kinds.FilterSettings()
  plateau: Optional[PlateauSchedule] = None
  lstm_hidden: int = PAPER_LSTM_HIDDEN

  def eval_interval(self, windows: int) -> Optional[int]:
    """Updates between dev evaluations for `windows` training windows ("epoch": one pass, at least 1)."""
    if self.eval_every == "epoch":
      return max(1, round(windows / self.batch_size))
    return self.eval_every

  def __post_init__(self):
    v.require(self, "epochs", v.positive, "a number > 0")
    for name in ("batch_size", "accum_steps", "seq_len", "doc_stride", "max_query_len", "max_answer_len"):
      v.require(self, name, v.positive_int, "a positive integer")
    v.require(self, "batch_size", lambda b: b % self.accum_steps == 0,
              f"a multiple of accum_steps ({self.accum_steps})")
    v.require(self, "tagging_context", v.optional(v.non_negative_int), "None or an integer >= 0")
    v.require(self, "optimizer", lambda o: isinstance(o, OptimizerConfig), "an optim.OptimizerConfig")
    v.require(self, "eval_every", lambda x: x is None or x == "epoch" or v.positive_int(x),
              "None, a positive integer or 'epoch'")
    v.require(self, "selection", lambda x: x in SELECTIONS, f"one of {SELECTIONS}")
    v.require(self, "ranking_head", lambda x: x in RANKING_HEADS, f"one of {RANKING_HEADS}")
    v.require(self, "generation", lambda g: isinstance(g, task_kinds.GenerationSettings),
              "a task_kinds.GenerationSettings")
    v.require(self, "filter", lambda f: isinstance(f, filter_kinds.FilterSettings), "a filter_kinds.FilterSettings")
    v.require(self, "plateau", v.optional(lambda p: isinstance(p, PlateauSchedule)), "None or a PlateauSchedule")
    v.require(self, "lstm_hidden", v.positive_int, "a positive integer")


@dataclasses.dataclass(frozen=True)
class RetrievalSettings:
  """Sentence embeddings for BUCC / Tatoeba, as the official `run_retrieval.py` makes them.

  The states of hidden layer `layer` (0 = the embedding output, i = the
  output of encoder layer i; None: `official_layer`) of each sentence cut to
  `seq_len` tokens, pooled by `pool`: `cls` (the first token: the official
  BUCC script's `--pool_type cls`) or `mean` (over the real tokens: the
  Tatoeba script's default, which the XTREME paper's analysis prefers).
  """

  pool: str = "mean"
  layer: Optional[int] = None
  seq_len: int = 512
  batch_size: int = 32

  def __post_init__(self):
    v.require(self, "pool", lambda x: x in retrieval.POOLINGS, f"one of {retrieval.POOLINGS}")
    v.require(self, "layer", v.optional(v.non_negative_int), "None or an integer >= 0")
    v.require(self, "seq_len", lambda x: v.is_int(x) and x >= 3, "an integer >= 3")
    v.require(self, "batch_size", v.positive_int, "a positive integer")


def official_layer(task: str, num_layers: int) -> int:
  """The hidden layer the official scripts embed `task` with (0 = embeddings, i = after layer i).

  `run_retrieval.py` keeps the last `--num_layers` (default 12) of the L + 1
  hidden states and takes index `--specific_layer` (default 7) of those, i.e.
  layer L - num_layers + 1 + specific_layer. `run_bucc2018.sh` passes neither:
  L - 4, so 8 for 12-layer models (mBERT, XLM-R base) and 20 for XLM-R large.
  `run_tatoeba.sh` passes (12, 7) for mBERT (layer 8) and (24, 13) for XLM-R
  large (layer 14); it gives xlm-roberta-base the large model's (24, 13),
  which indexes past a 12-layer model's states, so 12-layer models get
  mBERT's layer 8 here. Models under 12 layers (no script setting): 2L // 3,
  mBERT's depth ratio, at least 1.
  """
  if num_layers < 12:
    return max(1, 2 * num_layers // 3)
  kept, index = (24, 13) if task == "tatoeba" and num_layers >= 24 else (12, 7)
  return num_layers - kept + 1 + index


@dataclasses.dataclass(frozen=True)
class FinetuneSettings:
  """The run's setting and every task's recipe.

  `tasks` maps each fine-tuned model (`finetuned_models`; XTREME: xnli,
  pawsx, udpos, panx, squad (the model of XQuAD and MLQA), tydiqa; XGLUE: its
  nine task names) to its `TaskSettings` and each retrieval task (bucc2018,
  tatoeba) to its `RetrievalSettings`; a task not given gets the defaults.
  After fine-tuning, the first `train_accuracy_examples` training examples
  (None: all) are predicted once to measure the training accuracy.

  Settings of the benchmark (`BenchmarkSpec.settings`; the module doc has
  XTREME's): `pivot_language` trains each task on the training data of
  `pivot_language` (XGLUE's pivot-language tables; `en` is zero_shot) and
  `multi_language` on the training data of `train_languages` (None: every
  language of the task with training data on disk) at once, each language's
  examples drawn in proportion to `language_rates` ({language: weight};
  None: to its number of examples, i.e. the concatenated sets): a language
  is repeated or cut to its share of the concatenation's size. `multi_task`
  fine-tunes the pair-classification tasks `multi_tasks` as one model (a
  shared encoder, one head per task) on their training data at once (the
  concatenation; XGLUE's Table 9 merges the English training sets of XNLI,
  PAWS-X, NC, QAM and QADSM, the default), with the recipe of the first of
  them, selecting on the mean over those tasks of their dev scores; the
  other tasks stay zero-shot.
  """

  setting: str = "zero_shot"  # one of SETTINGS
  tasks: Mapping[str, Union[TaskSettings, RetrievalSettings]] = dataclasses.field(default_factory=dict)
  seed: int = 0
  log_every: int = 50
  train_accuracy_examples: Optional[int] = 2000
  pivot_language: str = "en"
  train_languages: Optional[Sequence[str]] = None
  language_rates: Optional[Mapping[str, float]] = None
  multi_tasks: Sequence[str] = xglue_registry.MULTI_TASK

  def __post_init__(self):
    v.require(self, "setting", lambda x: x in SETTINGS, f"one of {SETTINGS}")
    v.require(self, "tasks", lambda x: isinstance(x, Mapping), "a dict {task: settings}")
    v.require(self, "train_accuracy_examples", v.optional(v.positive_int), "None or a positive integer")
    v.require(self, "pivot_language", lambda x: isinstance(x, str) and bool(x), "a language code, e.g. 'de'")
    v.require(self, "train_languages", lambda x: x is None or (not isinstance(x, str) and len(x) > 0 and all(
        isinstance(lg, str) for lg in x)), "None or a non-empty list of language codes")
    v.require(self, "language_rates", lambda x: x is None or (isinstance(x, Mapping) and all(
        isinstance(r, (int, float)) and r > 0 for r in x.values())), "None or a dict {language: weight > 0}")
    v.require(self, "multi_tasks", lambda x: not isinstance(x, str) and len(x) >= 2 and all(
        isinstance(t, str) for t in x), "a list of two or more task names")
    keys = {k for b in BENCHMARKS.values() for k in finetuned_models(b) + retrieval_tasks(b)}
    unknown = sorted(set(self.tasks) - keys)
    errors.require(not unknown, f"FinetuneSettings.tasks: unknown key(s) {unknown}; valid: XTREME "
                   f"{list(FINETUNED + RETRIEVAL_TASKS)} (XQuAD and MLQA fine-tune the 'squad' model), XGLUE "
                   f"{list(finetuned_models(XGLUE))}")
    for key, value in self.tasks.items():
      want = RetrievalSettings if key in RETRIEVAL_TASKS else TaskSettings
      errors.require(isinstance(value, want), f"FinetuneSettings.tasks[{key!r}] is a {type(value).__name__}; "
                     f"expected xtreme.{want.__name__}")

  def recipe(self, key: str) -> TaskSettings:
    """The `TaskSettings` of fine-tuned task `key` (a `FINETUNED` name)."""
    return self.tasks.get(key, TaskSettings())

  def retrieval(self, task: str) -> RetrievalSettings:
    return self.tasks.get(task, RetrievalSettings())


def test_languages(task: str, data: Union[str, XtremeData, XglueData], languages: Optional[Sequence[str]],
                   split: str = "test") -> list[str]:
  """The requested languages, or every benchmark language whose `split` (test, or XGLUE's dev) is available.

  `data`: an `XtremeData` / `XglueData`, or XTREME's official `download/` folder.
  """
  if isinstance(data, str):
    data = XtremeData("official", data)
  valid = data.benchmark.task(task).test_languages
  errors.require(not (data.source == "tfds" and task == "bucc2018"),
                 "bucc2018 cannot run on TFDS: the `bucc` builder holds only the gold pairs, not the corpora "
                 "BUCC mines from; drop it from TASKS or use DATA_SOURCE='official'")
  if languages is not None:
    errors.require(not isinstance(languages, str) and all(isinstance(lg, str) for lg in languages),
                   f"LANGUAGES[{task!r}]={languages!r}; expected a list of language codes")
    unknown = sorted(set(languages) - set(valid))
    errors.require(not unknown, f"{task}: unknown language(s) {unknown}; valid: {list(valid)}")
    errors.require(bool(languages), f"LANGUAGES[{task!r}] is empty; drop {task} from TASKS instead")
    return list(languages)
  found = [lg for lg in valid if data.available(task, lg, split)]
  if not found:
    raise errors.MissingInputError(f"{task}: no {split} set for any language in the {data.source} data at "
                                   f"{data.data_dir} (expected e.g. {data.location(task, valid[0], split)})")
  return found


def selected(model: Mapping) -> tuple[str, int]:
  """(criterion, step) of the parameters a finished model (`XtremeRunner.finished_model`) predicts with."""
  selection, best = model["config"].get("selection"), model["summary"].get("best")
  if selection and best:
    return selection["criterion"], int(best["step"])
  return "final", int(model["summary"]["train_steps"])


def loss_history(records: Sequence[Mapping], points: int = HISTORY_POINTS) -> list[list]:
  """[[step, loss], ...] from the Trainer's per-step records; beyond `points` records, the mean loss of
  consecutive equal-sized buckets at each bucket's last step."""
  pairs = [(int(r["step"]), float(r["loss"])) for r in records if "loss" in r]
  size = max(1, math.ceil(len(pairs) / points))
  buckets = [pairs[i:i + size] for i in range(0, len(pairs), size)]
  return [[b[-1][0], sum(loss for _, loss in b) / len(b)] for b in buckets]


# -- bookkeeping: progress, records of finished predictions ----------------------

def _say(message: str) -> None:
  """One status line (process 0), printed without breaking an open progress bar."""
  if jax.process_index() == 0:
    tqdm.write(message)


def _progress(items: Sequence, desc: str, unit: str = "lang", leave: bool = True, min_items: int = 0) -> tqdm:
  """A progress bar over `items` (process 0, at least `min_items` of them; sparse updates when stderr is not
  a terminal, as the Trainer's bar)."""
  return tqdm(items, desc=desc, unit=unit, leave=leave, disable=jax.process_index() != 0 or len(items) < min_items,
              dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 15)


def _normalized(obj: Any) -> Any:
  return json.loads(json.dumps(obj, sort_keys=True, default=str))


def _digest(obj: Any) -> str:
  return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _file_digest(path: str) -> Optional[str]:
  if not fs.isfile(path):
    return None
  return hashlib.sha256(fs.read_bytes(path)).hexdigest()


def _stamp(path: str) -> list:
  """[path, size, mtime_ns] of a file or folder, [path] if there is none (or it is not a local path)."""
  try:
    st = os.stat(path)
  except (OSError, ValueError):
    return [path]
  return [path, st.st_size, st.st_mtime_ns]


def _read_json(path: str) -> Optional[Any]:
  """The JSON of a run file; None when there is none or it is unreadable (rewritten then)."""
  if not fs.isfile(path):
    return None
  try:
    return json.loads(fs.read_text(path))
  except ValueError:
    return None


class PredictionRecords:
  """`<submission folder>.records.json`: per prediction file, what made it and a digest of its content.

  `up_to_date(path, made_by)` holds when the file still has the recorded
  content and was made by the same `made_by` digest (see
  `XtremeRunner.made_by`); None (a model not finished yet) never is.
  """

  def __init__(self, directory: str):
    self.directory = directory
    self.path = directory.rstrip(os.sep) + ".records.json"
    self.entries = _read_json(self.path) or {}

  def up_to_date(self, path: str, made_by: Optional[str]) -> bool:
    entry = self.entries.get(fs.relpath(path, self.directory))
    return made_by is not None and entry == {"made_by": made_by, "content": _file_digest(path)}

  def record(self, path: str, made_by: Optional[str]) -> None:
    name = fs.relpath(path, self.directory)
    if made_by is None:
      self.entries.pop(name, None)
    else:
      self.entries[name] = {"made_by": made_by, "content": _file_digest(path)}
    if jax.process_index() == 0:
      atomic.write_json(self.path, self.entries)


# -- one task ----------------------------------------------------------------

class XtremeRunner:
  """Fine-tunes, predicts and writes the submission for the configured tasks of one benchmark.

  `benchmark`: "xtreme" or "xglue" (`registry.BENCHMARKS`); every task fact
  (languages, kind, labels, model, submission file) comes from its specs.
  `split`: the split predicted (XTREME: test; XGLUE: test or dev).
  """

  def __init__(self, run_dir, data_dir, config, vocabulary, init_checkpoint, settings, partition,
               translations_dir: Optional[str] = None, data_source: str = "official",
               resume_overrides: Optional[Mapping] = None, benchmark: str = "xtreme", split: str = "test"):
    self.run_dir, self.data_dir, self.config = run_dir, data_dir, config
    self.protocol: benchmarks.Protocol = benchmarks.PROTOCOLS[benchmark]
    self.data = self.protocol.data(data_source, data_dir, translations_dir)
    self.benchmark: BenchmarkSpec = self.data.benchmark
    self.split = split
    self.translations_dir = self.data.translations_root
    self.vocabulary = fs.abspath(paths.resolve(data_dir, vocabulary))
    self.vocab = load_vocabulary(self.vocabulary)
    self.init_checkpoint = fs.abspath(init_checkpoint) if init_checkpoint else None
    self.settings, self.partition = settings, partition
    self.setting: fine_tuning.Setting = fine_tuning.SETTINGS[settings.setting]
    self.resume_overrides = resume_overrides
    label = self.setting.label(settings.pivot_language)
    named = {k: os.path.join(run_dir, name) for k, name in outputs(label, split).items()}
    self.submission, self.pseudo_submission = named["submission"], named["pseudo_submission"]
    self.scores_path, self.report_dir = named["scores"], named["report"]
    self.pseudo_scores_path = named["pseudo_scores"]
    self.pseudo_labels = os.path.join(run_dir, "pseudo-labels")
    self._model_in_memory = (None, None)
    self._training_rows = (None, None)  # FILTER: (key, (examples, features, owners)) of the last training set
    self._filter_sources: dict[str, tuple] = {}  # FILTER: model -> its training sources (`filter_sources`)
    self._records: dict[str, PredictionRecords] = {}
    self.models: dict[str, str] = {}  # every fine-tuned model this run used -> its settings key
    self.resumed_with_overrides: list[str] = []  # models this run resumed with `resume_overrides`

  def read(self, task: str, language: str, split: str):
    """Every read of benchmark data goes through here: an official split, or a translation kind. In the FILTER
    settings a fine-tuned task's examples are pairs (`filter_pairs`): `filter_train` the training pairs of
    one language, dev and test the inference pairs."""
    if self.filtering and split == "filter_train":
      return filter_pairs().training_pairs(task, self.data, [language], self.translations_dir)
    if self.filtering and split in ("dev", "test") and task not in RETRIEVAL_TASKS:
      return filter_pairs().inference_pairs(task, self.data, language, split, self.recipe(task).filter.english,
                                            self.translations_dir)
    return self.data.read(task, language, split)

  def available(self, task: str, language: str, split: str) -> bool:
    """Whether `read(task, language, split)` has data to read."""
    if split == "filter_train":
      return filter_pairs().has_training_pairs(task, self.data, language, self.translations_dir)
    return self.data.available(task, language, split)

  @property
  def filtering(self) -> bool:
    """Whether this run is one of the FILTER settings (teacher or student)."""
    return self.setting.filter_stage is not None

  def records(self, directory: str) -> PredictionRecords:
    if directory not in self._records:
      self._records[directory] = PredictionRecords(directory)
    return self._records[directory]

  def say(self, message: str) -> None:
    """One status line (`_say`)."""
    _say(message)

  def spec(self, task: str):
    """The registry's `TaskSpec` of `task` in this run's benchmark."""
    return self.benchmark.task(task)

  def multi_task(self, task: str) -> bool:
    """Whether `task` is fine-tuned in the shared multi-task model (setting multi_task, one of `multi_tasks`)."""
    return self.setting.multi_task(self, task)

  def kind(self, task: str, student: Optional[bool] = None) -> task_kinds.Kind:
    """What fine-tuning does for `task`: its kind (`task_kinds.of`), or the multi-task kind of its model, as the
    setting wraps it (`Setting.kind`; FILTER: the teacher or, `student` / by default in its student setting,
    the student)."""
    if self.multi_task(task):
      return task_kinds.MultiTask([self.spec(t) for t in self.settings.multi_tasks])
    if self.spec(task).kind == "ranking" and self.recipe(task).ranking_head == "regression":
      base = task_kinds.RankingRegression()
    else:
      base = task_kinds.of(self.spec(task))
    return self.setting.kind(base, self.recipe(task), student)

  def recipe_key(self, task: str) -> str:
    """The `FinetuneSettings.tasks` key of `task`'s model (the multi-task model: its first task's)."""
    return self.spec(self.settings.multi_tasks[0] if self.multi_task(task) else task).model

  def recipe(self, task: str) -> TaskSettings:
    """The `TaskSettings` of `task`'s model."""
    return self.settings.recipe(self.recipe_key(task))

  def prediction_path(self, task: str, language: str, directory: Optional[str] = None) -> str:
    return os.path.join(directory or self.submission, self.benchmark.prediction_file(task, language))

  def _write_prediction(self, task: str, language: str, split: str, text: str,
                        directory: Optional[str] = None) -> str:
    path = self.prediction_path(task, language, directory)
    if jax.process_index() == 0:
      atomic.write_text(path, text)
    self.records(directory or self.submission).record(path, self.made_by(task, language, split))
    logging.info("wrote %s", path)
    return path

  def training_set(self, task: str, language: str) -> fine_tuning.TrainingSet:
    """(model name, ((reader task, language, split), ...), example limit) of `task` tested on `language`, as the
    setting says (`fine_tuning`)."""
    return self.setting.training_set(self, task, language)

  def test_split(self, task: str, language: str, pseudo: bool = False) -> str:
    """The split predicted for `language`: pseudo_test, the run's split (XGLUE's dev), or the setting's
    (translate_test: the translated test set where there is one)."""
    if pseudo:
      return "pseudo_test"
    if self.split != "test":
      return self.split
    return self.setting.test_split(task, language)

  def check_inputs(self, task: str, language: str, checked: Optional[set] = None) -> None:
    """The test data of (task, language), the training and dev data of its model exist and read (before any
    compilation, so a malformed file stops the run before it claims its directory; a source in `checked` is
    not read again, and is added to it once read); a translated test set can be matched to the original
    (`XtremeData.check_translate_test`) and is aligned with it (line count, or question ids:
    `xtreme_translations.check_translate_test_ids`). Raises `errors.ConfigError` /
    `errors.MissingInputError` / `errors.DataError`."""
    checked = set() if checked is None else checked
    split = self.test_split(task, language)
    if split == "translate_test":
      self.data.check_translate_test(task)
    needed = [(task, language, split)]
    if task not in RETRIEVAL_TASKS:
      needed += list(self.training_set(task, language)[1])
    for src in needed:
      if not self.available(*src):
        raise errors.MissingInputError(f"{src[0]} {src[2]} data for {src[1]} not found: expected "
                                       f"{self.data.location(*src)}")
    selection = self.selection(task) if task not in RETRIEVAL_TASKS else None
    for src in dict.fromkeys(needed + list(selection["dev"] if selection else ())):
      if src not in checked:
        self.read(*src)  # a malformed file (or a translation not aligned with its original) stops the run here
        checked.add(src)

  # -- fine-tuned models -----------------------------------------------------

  def model_dir(self, name: str) -> str:
    return os.path.join(self.run_dir, "models", name)

  def selection(self, task: str) -> Optional[dict]:
    """How `task`'s models choose the parameters that predict: {"criterion", "metric" (the evaluator's key),
    "dev": ((task, language, "dev"), ...)}; None for the final model (`final`, QA, no dev data on disk)."""
    kind, s = self.kind(task), self.recipe(task)
    if s.selection == "final" or kind.selection is None:
      return None
    members = self.settings.multi_tasks if self.multi_task(task) else (task,)
    devs = []
    for member in members:
      dev = self.spec(member).languages.get("dev", ())
      wanted = ("en",) if s.selection == "english_dev" else dev
      devs += [(member, lg, "dev") for lg in wanted if lg in dev and self.available(member, lg, "dev")]
    if not devs:
      return None
    metric, name = kind.selection
    if len(members) > 1:
      scope = "en dev" if s.selection == "english_dev" else "mean dev"
      criterion = f"mean over {len({d[0] for d in devs})} tasks of their {scope} {name} ({len(devs)} dev sets)"
    else:
      n = len(devs)
      criterion = (f"en dev {name}" if s.selection == "english_dev"
                   else f"mean dev {name} over {n} language" + "s" * (n > 1))
    return {"criterion": criterion, "metric": metric, "dev": tuple(devs)}

  def model_spec(self, task: str, name: str, sources: tuple, limit: Optional[int], student: Optional[bool] = None,
                 seed: Optional[int] = None) -> dict:
    """What defines fine-tuned model `name`, short of its step count (which needs the featurised data).

    The optimizer is a top-level key, as in `runs/train.py`, so that
    RESUME_OVERRIDES ({"optimizer": {...}}) address it the same way.
    `student` / `seed`: a FILTER teacher trained by a student run, and its seed.
    A FILTER student's spec names its teachers' identities (a retrained
    teacher retrains the student).
    """
    s, generation = self.recipe(task), self.spec(task).kind == "generation"
    # `generation` / `filter` only where they apply: changing them retrains only the models they shape
    skip = {"optimizer"} | ({"generation"} if not generation else set()) | ({"filter"} if not self.filtering else set())
    settings = {k: v for k, v in describe(s).items() if k not in skip}
    kind = self.kind(task, student)
    seed = self.settings.seed if seed is None else seed
    spec = {"mode": f"{self.benchmark.name}-finetune",
            "model": describe(kind.model(self.spec(task), self.config, s, self.vocab)), "train": sources,
            "limit": limit, "settings": {**settings, "seed": seed}, "optimizer": describe(s.optimizer),
            "selection": self.selection(task), "init_checkpoint": self.init_checkpoint,
            "vocabulary": paths.portable(self.vocabulary), "data_dir": _data_dir(self.data_dir)}
    if self.data.source != "official":
      spec["data_source"] = self.data.source
    if self.language_rates(sources):
      spec["language_rates"] = self.language_rates(sources)
    if any(src[2] in TRANSLATION_KINDS for src in sources):
      spec["translations"] = [paths.portable(self.data.location(*src)) for src in sources
                              if src[2] in TRANSLATION_KINDS]
    if getattr(kind, "student", False):
      spec["teachers"] = [(self.finished_model(n) or {}).get("identity") for n in self.teacher_names(task)]
    return spec

  def finished_model(self, name: str, summary: Optional[dict] = None) -> Optional[dict]:
    """{"config", "summary", "identity"} of model `name` when its directory holds a finished run, else None.

    The identity digests the directory's `run_config.json` and its summary's
    steps, losses and best checkpoint: a retrained model gets a new one.
    `summary`: the one `Trainer.fit` returned (the same on every process),
    instead of reading `summary.json`.
    """
    run_dir = self.model_dir(name)
    config = _read_json(os.path.join(run_dir, "run_config.json"))
    summary = summary if summary is not None else _read_json(os.path.join(run_dir, "summary.json"))
    finished = (isinstance(config, dict) and isinstance(summary, dict)
                and summary.get("train_steps") == config.get("steps"))
    if not finished:
      return None
    stable = {k: summary.get(k) for k in ("train_steps", "first_loss", "final_loss", "best")}
    return {"config": config, "summary": summary, "identity": _digest({"config": config, "summary": stable})}

  def finetuned(self, task: str, language: str):
    """(trainer, params) of the model `task` uses for `language` (one model in memory at a time)."""
    name, sources, limit = self.training_set(task, language)
    self.models.setdefault(name, self.recipe_key(task))
    if self._model_in_memory[0] != name:
      self._model_in_memory = (None, None)  # free the previous model first
      self._model_in_memory = (name, self._finetune(task, name, sources, limit))
    return self._model_in_memory[1]

  def _finetune(self, task: str, name: str, sources: tuple, limit: Optional[int]):
    """Train (or resume, or reload when finished) `name`; (trainer, the parameters `selection` chose). A
    FILTER teacher also writes the soft labels of its training rows (`teacher_soft_labels`)."""
    result = self._train(task, name, sources, limit)
    self.setting.after_training(self, task, sources, limit)
    return result

  def _train(self, task: str, name: str, sources: tuple, limit: Optional[int], student: Optional[bool] = None,
             seed: Optional[int] = None):
    """Train (or resume, or reload when finished) `name` in its own run directory; (trainer, the parameters
    `selection` chose: the best on dev, or the final ones). `student` / `seed`: as `model_spec`."""
    spec = self.spec(task)
    kind, s = self.kind(task, student), self.recipe(task)
    seed = self.settings.seed if seed is None else seed
    examples, features, owners = self.training_features(task, sources, limit)
    if getattr(kind, "student", False):
      features = filter_kinds.with_soft_labels(features, self.teacher_soft_labels(task, sources, limit))
    source = FeatureListSource(features, s.batch_size, seed, weight_keys=(kind.weight_key,),
                               model_keys=kind.model_keys)
    steps = max(1, int(round(s.epochs * len(features) / s.batch_size)))
    selection = self.selection(task)
    if selection is None and s.selection != "final" and kind.selection is not None:
      logging.warning("%s: no dev data for the %s selection; the final model predicts", name, s.selection)
    if selection is None and s.plateau is not None:
      logging.warning("%s: the plateau schedule needs a dev selection; the rate follows the optimizer alone", name)
    config = TrainerConfig(train_steps=steps, accum_steps=s.accum_steps, log_every=min(self.settings.log_every, steps),
                           checkpoint_every=steps, keep_checkpoints=1, seed=seed,
                           eval_every=s.eval_interval(len(features)) if selection else None,
                           select_metric=selection["metric"] if selection else None,
                           plateau=s.plateau if selection else None)
    dev = self._dev_sets(task, s, selection) if selection else None  # all data is read before training starts
    run_dir = self.model_dir(name)
    fingerprint = {**self.model_spec(task, name, sources, limit, student, seed), "steps": steps}
    with RunDirectory(run_dir, fingerprint, overrides=self._overrides(name)) as claim:
      claim.check()
      trainer = Trainer(kind.model(spec, self.config, s, self.vocab), apply_overrides(claim, s.optimizer), config,
                        self.partition, run_dir, run_directory=claim)
      evaluator = functools.partial(self.dev_scores, task, s, trainer, selection["metric"], dev) if dev else None
      _say(f"fine-tuning {name}: {len(examples)} examples ({len(features)} windows), {steps} steps"
           + (f", selecting on {selection['criterion']}" if selection else ""))
      logging.info("fine-tuning %s on %s", name, sources)
      try:
        loader = pretrained_loader(self.init_checkpoint, self.config, kind.pretrained(s, self.config))
        state, summary = trainer.fit(source, None, loader, evaluator)
        self._measure_train_accuracy(spec, s, name, summary, trainer, state.params, examples, features, owners, kind)
        best = trainer.restore_best_params() if selection else None
      finally:
        trainer.close()
    return trainer, state.params if best is None else best

  def filter_sources(self, task: str) -> tuple:
    """The FILTER training sources of `task`'s model, ((task, language, "filter_train"), ...): English and
    every language of the model's tasks with training pairs on disk (`FinetuneSettings.train_languages`: of
    those, only these), read as the model's first task (XQuAD and MLQA share SQuAD's pairs)."""
    model = self.spec(task).model
    if model in self._filter_sources:
      return self._filter_sources[model]
    members = [t for t in self.benchmark.tasks if t.fine_tuned and t.model == model]
    first, wanted = members[0].name, self.settings.train_languages
    languages = [lg for lg in dict.fromkeys(["en"] + [lg for t in members for lg in t.test_languages])
                 if wanted is None or lg in wanted]
    missing = filter_pairs().left_out(first, self.data, languages, self.translations_dir)
    self._filter_sources[model] = tuple((first, lg, "filter_train") for lg in languages
                                        if lg not in missing and self.available(first, lg, "filter_train"))
    return self._filter_sources[model]

  def teacher_names(self, task: str) -> list[str]:
    """The model names of `task`'s FILTER teachers (`FilterSettings.teachers`; seeds seed, seed + 1, ...)."""
    base = f"{self.spec(task).model}_filter_teacher"
    return [base] + [f"{base}_seed{self.settings.seed + i}" for i in range(1, self.recipe(task).filter.teachers)]

  def teacher_soft_labels(self, task: str, sources: tuple, limit: Optional[int]) -> dict[str, np.ndarray]:
    """The teachers' target-side logits for the training rows (`soft_labels`), from the first teacher's
    directory; missing or stale ones are made by training (or reloading) the teachers and predicting the rows,
    unless a student run may not (`FilterSettings.train_teacher=False`: refused, naming the expected file)."""
    s, key, names = self.recipe(task), self.recipe_key(task), self.teacher_names(task)
    kind = self.kind(task, student=False)
    _, features, _ = self.training_features(task, sources, limit)
    digest, directory = soft_labels.rows_digest(features), self.model_dir(names[0])
    identities = lambda: [(self.finished_model(n) or {}).get("identity") for n in names]  # noqa: E731
    try:
      return soft_labels.load(directory, key, digest, identities())
    except errors.ConfigError:
      if self.setting.filter_stage == "student" and not s.filter.train_teacher:
        raise
    outputs = []
    for i, name in enumerate(names):
      self.models.setdefault(name, key)
      trainer, params = self._train(task, name, sources, limit, student=False, seed=self.settings.seed + i)
      _say(f"{name}: soft labels of {len(features)} training windows")
      outputs.append(kind.soft_labels(predict_features(trainer, params, features, kind.predict_keys, s.batch_size)))
      del trainer, params
    arrays = {k: soft_labels.average([o[k] for o in outputs]) for k in kind.soft_label_keys}
    if jax.process_index() == 0:
      logging.info("wrote %s", soft_labels.save(directory, key, digest, identities(), arrays))
    return arrays

  def language_rates(self, sources: tuple) -> Optional[dict]:
    """{language: weight} of a multi-language model with `FinetuneSettings.language_rates` (None otherwise)."""
    return self.setting.language_rates(self, sources)

  def training_features(self, task: str, sources: tuple, limit: Optional[int]) -> tuple[list, list, list]:
    """(examples, features, owners) of `task`'s model's training data; each source is featurised as its own
    task (the multi-task model's sources are several tasks)."""
    kind, s = self.kind(task), self.recipe(task)
    if self.filtering:  # the teachers and the student train on the same rows: featurised once
      cached = self._training_rows
      if cached[0] != (self.recipe_key(task), sources, limit):
        self._training_rows = (None, None)
        examples = self.training_examples(sources, limit)
        self._training_rows = ((self.recipe_key(task), sources, limit),
                               (examples, *kind.features(self.spec(task), examples, self.vocab, s, training=True)))
      return self._training_rows[1]
    if not self.multi_task(task):
      examples = self.training_examples(sources, limit)
      return (examples, *kind.features(self.spec(task), examples, self.vocab, s, training=True))
    examples, features, owners = [], [], []
    for src in sources:
      part = self.training_examples((src,), limit)
      f, o = kind.features(self.spec(src[0]), part, self.vocab, s, training=True)
      features += f
      owners += [len(examples) + i for i in o]
      examples += part
    return examples, features, owners

  def training_examples(self, sources: tuple, limit: Optional[int]) -> list[dict]:
    """The training examples of `sources` (each cut to `limit`), concatenated; with `language_rates`, each
    language's share of the concatenation's size is its weight's share, its examples repeated in order or
    cut (a deterministic sample of the mixture, so that a resumed run sees the same data)."""
    parts = [self.read(*src)[:limit] for src in sources]
    rates = self.language_rates(sources)
    if rates is None:
      return [ex for part in parts for ex in part]
    total, weight = sum(len(p) for p in parts), sum(rates.values())
    errors.require(weight > 0, f"FinetuneSettings.language_rates {self.settings.language_rates} gives no training "
                   f"language of {[src[1] for src in sources]} a weight")
    out = []
    for (_, lg, _), part in zip(sources, parts):
      share = round(total * rates[lg] / weight)
      out += [part[i % len(part)] for i in range(share)] if part else []
    return out

  def _overrides(self, name: str) -> Optional[dict]:
    """`resume_overrides` as RunDirectory overrides when model `name` is being resumed (its directory holds an
    unfinished run), else None: finished models and new ones keep their configured optimizer."""
    if not self.resume_overrides or self.finished_model(name) is not None:
      return None
    if not fs.isfile(os.path.join(self.model_dir(name), "run_config.json")):
      logging.warning("RESUME_OVERRIDES %s not applied to %s: it holds no run to resume (a run stopped at its "
                      "first step is not kept), so it starts with its configured optimizer", self.resume_overrides,
                      self.model_dir(name))
      return None
    self.resumed_with_overrides.append(name)
    return {"optimizer": dict(self.resume_overrides)}

  def _dev_sets(self, task: str, s: TaskSettings, selection: dict) -> list[tuple]:
    """[(task, language, examples, features, owners)] of the dev sets `selection` evaluates, featurised once."""
    dev, kind = [], self.kind(task)
    for member, lg, split in selection["dev"]:
      examples = self.read(member, lg, split)
      dev.append((member, lg, examples, *kind.features(self.spec(member), examples, self.vocab, s, training=False)))
    return dev

  def dev_scores(self, task: str, s: TaskSettings, trainer: Trainer, metric: str, dev: Sequence[tuple],
                 params: Any) -> dict[str, float]:
    """The `Trainer.fit` evaluator (`params` bound last): {metric: the mean dev score, metric/<lg>: each
    language's (when several)}, predicted with the step the test predictions use (compiled once). A
    multi-task model's score is the mean over its tasks of their means (keys metric/<task>/<lg>)."""
    kind = self.kind(task)
    by_task: dict[str, dict[str, float]] = {}
    for member, lg, examples, features, owners in dev:
      predicted = self._decode(self.spec(member), s, trainer, params, examples, features, owners, kind)
      by_task.setdefault(member, {})[lg] = kind.dev_score(examples, predicted)
    several = len(by_task) > 1
    each = {f"{metric}/{member + '/' if several else ''}{lg}": value
            for member, scores in by_task.items() for lg, value in scores.items()}
    means = [sum(scores.values()) / len(scores) for scores in by_task.values()]
    return {**(each if len(each) > 1 else {}), metric: sum(means) / len(means)}

  def _measure_train_accuracy(self, spec, s, name, summary, trainer, params, examples, features, owners,
                              kind: task_kinds.Kind) -> None:
    """Predict the first `train_accuracy_examples` training examples once; saved beside the model."""
    n = len(examples) if self.settings.train_accuracy_examples is None else self.settings.train_accuracy_examples
    keep = [k for k, owner in enumerate(owners) if owner < n]
    model = self.finished_model(name, summary)
    path = os.path.join(self.model_dir(name), "train_accuracy.json")
    if not keep or model is None or (_read_json(path) or {}).get("model") == model["identity"]:
      return  # nothing to predict, or measured when this model was trained
    subset = examples[:n]
    predicted = self._decode(spec, s, trainer, params, subset, [features[k] for k in keep],
                             [owners[k] for k in keep], kind)
    if jax.process_index() == 0:
      atomic.write_json(path, {"model": model["identity"], "examples": len(subset),
                               "train_accuracy": kind.train_accuracy(subset, predicted)})

  def run_entry(self, name: str) -> Optional[dict]:
    """runs.json's entry of model `name`: task (settings key), criterion and selected step (`selected`), steps,
    loss history, training accuracy of the final parameters (None when unmeasured); None while unfinished."""
    model = self.finished_model(name)
    if model is None:
      return None
    summary, steps = model["summary"], model["summary"]["train_steps"]
    criterion, step = selected(model)
    measured = _read_json(os.path.join(self.model_dir(name), "train_accuracy.json")) or {}
    return {"task": self.models.get(name, name), "criterion": criterion, "selected_step": step, "train_steps": steps,
            "history": loss_history(summary.get("history", [])),
            "train_accuracy": measured.get("train_accuracy") if measured.get("model") == model["identity"] else None}

  def write_runs(self) -> dict:
    """{model: run_entry} of every model this run used, merged into `<run_dir>/runs.json`."""
    runs = {name: entry for name in self.models if (entry := self.run_entry(name)) is not None}
    if jax.process_index() == 0 and runs:
      path = os.path.join(self.run_dir, "runs.json")
      atomic.write_json(path, {**(_read_json(path) or {}), **runs})
    return runs

  # -- predictions -------------------------------------------------------------

  def _decode(self, spec, s: TaskSettings, trainer, params, examples, features, owners,
              kind: Optional[task_kinds.Kind] = None):
    """Per-example predictions: a label (classification), a tag list (tagging), or {id: answer} (QA)."""
    predict = lambda keys: predict_features(trainer, params, features, keys, s.batch_size)  # noqa: E731
    return (kind or self.kind(spec.name)).decode(spec, s, predict, examples, features, owners, self.vocab)

  def made_by(self, task: str, language: str, split: str) -> Optional[str]:
    """Digest of everything that makes the prediction of (task, language, split): the finished model
    (None while it is not) or the retrieval encoder and settings, and the input files' stamps."""
    if task in RETRIEVAL_TASKS:
      maker = {"encoder": self._encoder_identity(),
               "retrieval": {**describe(self.settings.retrieval(task)), "layer": self.retrieval_layer(task)}}
    else:
      name, sources, limit = self.training_set(task, language)
      model = self.finished_model(name)
      if model is None or any(model["config"].get(k) != v for k, v in
                              _normalized(self.model_spec(task, name, sources, limit)).items()):
        return None
      maker = {"model": model["identity"], "selected": selected(model)}  # run_config.json holds the settings
    return _digest({"task": task, "language": language, "split": split, **maker,
                    "inputs": [_stamp(p) for p in self._input_paths(task, language, split)]})

  def _input_paths(self, task: str, language: str, split: str) -> list[str]:
    """Every file (TFDS: the builder location) that predicting (task, language, split) reads."""
    splits = [split] + (["test"] if split == "translate_test" else []) + (["dev"] if task == "bucc2018" else [])
    out = []
    for sp in splits:
      if task in RETRIEVAL_TASKS and self.data.source == "official":
        out += [readers.file_path(task, self.data_dir, language, sp, part) for part in readers.PATHS[task]]
      elif hasattr(self.data, "locations"):  # several files read as one (the mBERT paper's parsing treebanks)
        out += self.data.locations(task, language, sp)
      else:
        out.append(self.data.location(task, language, sp))
    return out

  def predict_task(self, task: str, languages: Sequence[str], pseudo: bool = False) -> None:
    """Predicts `task` for `languages`, model by model; prediction files that are up to date are kept."""
    directory = self.pseudo_submission if pseudo else self.submission
    groups: dict[str, list[str]] = {}
    for lg in languages:
      name = self.training_set(task, lg)[0]
      self.models.setdefault(name, self.recipe_key(task))
      made_by = self.made_by(task, lg, self.test_split(task, lg, pseudo))
      if not self.records(directory).up_to_date(self.prediction_path(task, lg, directory), made_by):
        groups.setdefault(name, []).append(lg)
    kept = len(languages) - sum(len(g) for g in groups.values())
    if kept:
      _say(f"{task}{' (pseudo test)' if pseudo else ''}: {kept} of {len(languages)} predictions up to date, kept")
    for name, todo in groups.items():
      self.finetuned(task, todo[0])  # fine-tune (its own progress bar) before the prediction bar
      bar = _progress(todo, f"predict {task}" + (" (pseudo test)" if pseudo else ""))
      for lg in bar:
        bar.set_postfix_str(lg, refresh=False)
        self.predict_language(task, lg, pseudo)

  def predict_language(self, task: str, language: str, pseudo: bool = False) -> str:
    """Predicts the test set of `language` (the translated / pseudo one where the setting says so); its path."""
    spec = self.spec(task)
    kind, s = self.kind(task), self.recipe(task)
    split = self.test_split(task, language, pseudo)
    examples = self.read(task, language, split)
    trainer, params = self.finetuned(task, language)
    features, owners = kind.features(spec, examples, self.vocab, s, training=False)
    predicted = self._decode(spec, s, trainer, params, examples, features, owners)
    # translate_test rows are line-aligned with the original test file, and QA keeps the original question ids
    # (checked by the reader, `check_inputs`): id-keyed answers are mapped back in the original order.
    by_id = split == "translate_test" and not spec.by_position
    questions = self.read(task, language, "test") if by_id else examples
    text = kind.submission_text(predicted, questions, f"{task} {language}")
    return self._write_prediction(task, language, split, text, self.pseudo_submission if pseudo else None)

  def pseudo_languages(self, task: str) -> list[str]:
    """Pseudo test languages of `task` found on disk (none for tasks without pseudo test sets)."""
    if task not in translations.tasks("pseudo_test") or self.translations_dir is None:
      return []
    return translations.pseudo_languages_on_disk(task, self.translations_dir)

  def write_pseudo_gold(self, task: str, language: str) -> str:
    """The gold of a pseudo test set in the leaderboard labels layout (under `pseudo_labels`)."""
    examples = self.read(task, language, "pseudo_test")
    path = self.prediction_path(task, language, self.pseudo_labels)
    if self.spec(task).prediction_suffix == "json":  # QA: the labels hold the SQuAD JSON
      source = translations.translation_path(task, self.translations_dir, language, "pseudo_test")
      gold = json.dumps(json.loads(text.read_utf8(source)), ensure_ascii=False)  # the SQuAD JSON, as labels hold it
    else:
      gold = "".join(f"{ex['label']}\n" for ex in examples)
    if jax.process_index() == 0:
      atomic.write_text(path, gold)
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
    init = lambda rng: nn.unbox(TransformerEncoder(self.config).init(  # noqa: E731  (jitted: faster than eager)
        rng, ids, ids + 1, method=TransformerEncoder.init_all))["params"]
    return jax.jit(init)(jax.random.PRNGKey(self.settings.seed))

  def _encoder_identity(self) -> dict:
    source = _stamp(self.init_checkpoint) if self.init_checkpoint else {"random_init_seed": self.settings.seed}
    return {"config": describe(self.config), "vocabulary": self.vocabulary, "init_checkpoint": source}

  def retrieval_layer(self, task: str) -> int:
    """The hidden layer `task` embeds with: its `RetrievalSettings.layer`, else `official_layer`."""
    layer = self.settings.retrieval(task).layer
    return official_layer(task, self.config.num_layers) if layer is None else layer

  def embed(self, sentences: Sequence[str], task: str) -> np.ndarray:
    """Sentence embeddings of `task`'s `RetrievalSettings` (pooling, layer, max length)."""
    rs = self.settings.retrieval(task)
    feats = [encode_pair(self.vocab, [s], rs.seq_len) for s in sentences]
    return sentence_embeddings(self.config, self.encoder_params, feats, self.retrieval_layer(task), rs.batch_size,
                               rs.pool)

  def retrieve_task(self, task: str, languages: Sequence[str]) -> None:
    """Mines / searches `task` for `languages`; prediction files that are up to date are kept."""
    records = self.records(self.submission)
    todo = [lg for lg in languages
            if not records.up_to_date(self.prediction_path(task, lg), self.made_by(task, lg, "test"))]
    if len(todo) < len(languages):
      _say(f"{task}: {len(languages) - len(todo)} of {len(languages)} predictions up to date, kept")
    if not todo:
      return
    bar = _progress(todo, f"retrieval {task}")
    for lg in bar:
      bar.set_postfix_str(lg, refresh=False)
      self.retrieve_language(task, lg)

  def retrieve_language(self, task: str, language: str) -> str:
    if task == "tatoeba":
      data = self.read(task, language, "test")
      src, tgt = self.embed(data["source"], task), self.embed(data["target"], task)
      nearest = retrieval.tatoeba_predict(src, tgt)
      return self._write_prediction(task, language, "test", "".join(f"{int(i)}\n" for i in nearest))
    threshold = None
    if self.available(task, language, "dev"):
      dev = self.read(task, language, "dev")
      threshold = metrics.bucc_best_threshold(self._mine(dev, task), dev["gold"])
    test = self.read(task, language, "test")
    candidates = self._mine(test, task)
    pairs = metrics.apply_threshold(candidates, threshold) if threshold is not None else list(candidates)
    return self._write_prediction(task, language, "test", "".join(f"{s}\t{t}\n" for s, t in pairs))

  def _mine(self, data: dict, task: str) -> dict:
    """{(src_id, tgt_id): margin score} of the mined candidate pairs."""
    src_ids, src = zip(*data["source"])
    tgt_ids, tgt = zip(*data["target"])
    # duplicates="drop": sentences occurring twice are left out, as the official BUCC evaluation does.
    mined = retrieval.mine_bucc(self.embed(src, task), self.embed(tgt, task), src_ids, tgt_ids, src, tgt,
                                duplicates="drop")
    return {(s, t): score for s, t, score in mined}

  def retrieval_summary(self, tasks: Iterable[str]) -> dict:
    """{task: {"layer", "pooling", "max_len"}} of the retrieval tasks among `tasks` (the keys the report reads)."""
    return {t: {"layer": self.retrieval_layer(t), "pooling": self.settings.retrieval(t).pool,
                "max_len": self.settings.retrieval(t).seq_len} for t in tasks if t in RETRIEVAL_TASKS}

  def settings_comparison(self) -> Optional[str]:
    """Markdown of this run directory's scores in each of `report.COMPARED_SETTINGS` (translate-train against
    FILTER's teacher and student) side by side, per task and language; None unless this setting and another
    were scored here."""
    from xtreme_jax.evaluation import report
    found = {}
    for name in report.COMPARED_SETTINGS:
      scores = _read_json(os.path.join(self.run_dir, outputs(name, self.split)["scores"]))
      if isinstance(scores, dict):
        found[name] = scores
    if len(found) < 2 or self.settings.setting not in found:
      return None
    return ("# Settings side by side\n\nScores of the settings run in " + self.run_dir + " (0-100; `-`: not "
            "run).\n\n" + report.settings_table(found) + "\n")

  def write_manifests(self, *folders: str) -> None:
    """Record the data source (official or TFDS order) in each existing prediction / label folder."""
    from xtreme_jax.evaluation import scorer
    if not self.protocol.ordered_predictions:  # the manifest records XTREME's TFDS-or-official order
      return
    for folder in folders:
      if jax.process_index() == 0 and fs.isdir(folder):
        scorer.write_manifest(folder, self.data.source)


@functools.partial(jax.jit, static_argnames=("config", "layer", "pool"))
def _pooled(params: Any, batch: dict, *, config: TransformerConfig, layer: int, pool: str) -> jax.Array:
  out = TransformerEncoder(config).apply({"params": params}, batch["input_ids"], batch["input_mask"],
                                         batch["token_type_ids"], return_all=True)
  states = out.embeddings if layer == 0 else out.all_layers[layer - 1]
  return retrieval.pool_states(states, batch["input_mask"], pool)


def sentence_embeddings(config: TransformerConfig, params: Any, features: list[dict], layer: int,
                        batch_size: int, pool: str = "mean") -> np.ndarray:
  """`pool` (`retrieval.pool_states`: 'cls' | 'mean') of the hidden states after `layer` (0 = embedding output)."""
  errors.require(0 <= layer <= config.num_layers, f"retrieval layer {layer}; expected 0..{config.num_layers}")
  keys = ("input_ids", "input_mask", "token_type_ids")
  starts = range(0, len(features), batch_size)
  chunks = []
  for start in _progress(starts, "embed", unit="batch", leave=False, min_items=50):
    part = features[start:start + batch_size]
    part = part + [part[-1]] * (batch_size - len(part))
    batch = {k: np.stack([f[k] for f in part]) for k in keys}
    chunks.append(np.asarray(_pooled(params, batch, config=config, layer=layer, pool=pool)))
  return np.concatenate(chunks)[: len(features)]


# -- the benchmark -------------------------------------------------------------

def _check_overrides(runner: XtremeRunner) -> None:
  """RESUME_OVERRIDES is None or a dict of keys every task's optimizer may change when resuming."""
  overrides = runner.resume_overrides
  if overrides is None:
    return
  errors.require(isinstance(overrides, Mapping), f"RESUME_OVERRIDES={overrides!r}; expected None or a dict of "
                 "optimizer settings, e.g. {'learning_rate': 1e-5}")
  for key in finetuned_models(runner.benchmark):  # unknown keys, max_grad_norm switched on / off: checked early
    runner.settings.recipe(key).optimizer.with_overrides(dict(overrides))


def check_run(runner: XtremeRunner, tasks: Sequence[str], languages: Optional[Mapping],
              labels_dir: Optional[str]) -> dict[str, list[str]]:
  """Everything a user can get wrong, checked before any training; returns {task: [languages]}."""
  bench = runner.benchmark
  valid = list(bench.task_names)
  errors.require(not isinstance(tasks, str), f"TASKS={tasks!r}; expected a tuple of task names, e.g. ('{valid[0]}',)")
  errors.require(bool(tasks), f"TASKS={tasks!r} is empty; name at least one of {valid}")
  unknown = sorted(set(tasks) - set(valid))
  errors.require(not unknown, f"unknown {bench.name.upper()} task(s) {unknown}; valid: {valid}")
  setting = runner.settings.setting
  errors.require(setting in bench.settings, f"SETTING={setting!r} is not a {bench.name.upper()} setting; valid: "
                 f"{list(bench.settings)}")
  runner.setting.check(runner, tasks)
  keys = set(finetuned_models(bench) + retrieval_tasks(bench))
  foreign = sorted(set(runner.settings.tasks) - keys)
  errors.require(not foreign, f"FinetuneSettings.tasks names {foreign}, not {bench.name.upper()} models; valid: "
                 f"{sorted(keys)}")
  errors.require(languages is None or isinstance(languages, Mapping),
                 f"LANGUAGES={languages!r}; expected None or a dict {{task: [language, ...]}}")
  extra = sorted(set(languages or {}) - set(tasks))
  errors.require(not extra, f"LANGUAGES names task(s) {extra} that are not in TASKS {list(tasks)}")
  if labels_dir:
    runner.protocol.check_labels(runner, tasks, labels_dir)
  _check_overrides(runner)
  config, longest = runner.config, layers.max_tokens(runner.config)  # RoBERTa positions start after pad
  errors.require(runner.vocab.vocab_size <= config.vocab_size, f"the vocabulary {runner.vocabulary} has "
                 f"{runner.vocab.vocab_size} ids but the model's vocab_size is {config.vocab_size}; raise "
                 "vocab_size in the model preset")
  pretrained_loader(runner.init_checkpoint, config)  # INIT_CHECKPOINT exists and fits the model (its config.json)
  for task in tasks:
    if task in RETRIEVAL_TASKS:
      layer, seq_len = runner.retrieval_layer(task), runner.settings.retrieval(task).seq_len
      errors.require(0 <= layer <= config.num_layers, f"{task}: RetrievalSettings.layer={layer}; the model's hidden "
                     f"layers are 0 (embeddings) .. {config.num_layers}")
    else:
      seq_len = runner.recipe(task).seq_len
      check_frozen_depth(runner.recipe(task).optimizer.freeze, config.num_layers)
    errors.require(seq_len <= longest, f"{task}: max length {seq_len} exceeds the model's {longest} positions "
                   f"(max_positions={config.max_positions}); lower the task's seq_len")
  plan = {t: test_languages(t, runner.data, (languages or {}).get(t), runner.split) for t in tasks}
  if labels_dir:
    runner.protocol.check_plan(runner, plan, labels_dir)
  checked: set = set()  # each source is read once, whichever task and language need it
  for task, langs in plan.items():
    for lg in langs:
      runner.check_inputs(task, lg, checked)
  return plan


def run_fingerprint(runner: XtremeRunner) -> dict:
  """What defines a benchmark run directory: model, vocabulary, data, every task's recipe, initial checkpoint,
  seed. Not the task / language selection, the setting, the labels, PSEUDO_TEST or the partitioning (module doc)."""
  s = runner.settings
  bench = runner.benchmark
  # FILTER's settings are each FILTER model's own (`model_spec`): changing them keeps the run directory
  recipes = {**{k: {f: v for f, v in describe(s.recipe(k)).items() if f != "filter"} for k in finetuned_models(bench)},
             **{k: describe(s.retrieval(k)) for k in retrieval_tasks(bench)}}
  return {"mode": bench.name, "model": describe(runner.config), "vocabulary": paths.portable(runner.vocabulary),
          "data_source": runner.data.source, "data_dir": _data_dir(runner.data_dir),
          "init_checkpoint": runner.init_checkpoint, "seed": s.seed, "tasks": recipes}


def _data_dir(data_dir: Optional[str]) -> Optional[str]:
  """The data folder as fingerprints record it: absolute, the bundled sample by its package-relative name."""
  return paths.portable(fs.abspath(data_dir)) if data_dir else None


def xtreme(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
           labels_dir: Optional[str] = None, tasks: Sequence[str] = TASKS,
           languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
           settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig(),
           translations_dir: Optional[str] = None, pseudo_test: bool = False, data_source: str = "official",
           resume_overrides: Optional[dict] = None, published_model: Optional[str] = None) -> dict:
  """Runs the XTREME benchmark in `settings.setting`; returns the scores (when `labels_dir` is given).

  `data_source`: "official" (`data_dir` is the `download/` folder) or "tfds"
  (`data_dir` is the TFDS data dir, None: TFDS's default); see `xtreme_data`.
  `translations_dir`: the copy of gs://xtreme_translations (default `<data_dir>/translations`).
  `pseudo_test`: also predict and score the pseudo test languages found there
  (the result then has a `pseudo` entry: {task: {language: metrics}}).
  `resume_overrides`: optimizer settings for the models being resumed, e.g.
  after a NaN stop (module doc).
  `published_model`: the model preset the run fine-tunes (e.g. 'xlmr_large'): the report shows the papers'
  scores of it in this setting beside the run's (`evaluation/published.py`); None: none.
  The result also holds `runs` ({model: run entry}, as `<run_dir>/runs.json`)
  and `retrieval` (layer, pooling and max length of BUCC / Tatoeba).
  `run_dir` is claimed for the whole run (`RunDirectory`, `run_fingerprint`).
  """
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        translations_dir, data_source, resume_overrides)
  return _run(runner, tasks, languages, labels_dir, pseudo_test, published_model)


def xglue(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
          labels_dir: Optional[str] = None, tasks: Sequence[str] = XGLUE.task_names,
          languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
          settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig(),
          split: str = "test", resume_overrides: Optional[dict] = None, translations_dir: Optional[str] = None,
          published_model: Optional[str] = None) -> dict:
  """Runs XGLUE's tasks in `settings.setting` (`XGLUE.settings`).

  `data_dir`: the unpacked `xglue_full_dataset` folder. `split`: the split
  predicted, `test` (the leaderboard submission, `<run_dir>/submission/`)
  or `dev` (`<run_dir>/submission-dev/`), written in the official layout
  `<TASK>/<lg>.prediction`. With `labels_dir` (a folder in the dataset
  layout whose `split` files carry labels: for dev, `data_dir` itself) the
  submission is scored as the official scorer does (`xglue_scorer`) and the
  report written. `translations_dir`: your translations of XGLUE's data, which
  the FILTER settings pair with it (`data/filter_pairs.py`). The rest as
  `xtreme`.
  """
  errors.require(split in ("dev", "test"), f"SPLIT={split!r}; expected 'dev' or 'test'")
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        translations_dir, resume_overrides=resume_overrides, benchmark="xglue", split=split)
  return _run(runner, tasks, languages, labels_dir, published_model=published_model)


def mbert(run_dir: str, data_dir: str, model_config: TransformerConfig, vocabulary: str,
          labels_dir: Optional[str] = None, tasks: Sequence[str] = MBERT.task_names,
          languages: Optional[dict] = None, init_checkpoint: Optional[str] = None,
          settings: FinetuneSettings = FinetuneSettings(), partition: PartitionConfig = PartitionConfig(),
          resume_overrides: Optional[dict] = None, published_model: Optional[str] = None) -> dict:
  """Runs the mBERT paper's tasks (`registry/mbert.py`: MLDoc, CoNLL NER, UD POS, parsing) zero-shot from
  English.

  `data_dir`: the folder of their datasets in their own layouts; `labels_dir`
  (usually `data_dir`: the test files carry the gold) scores the submission
  with `evaluation/mbert_scorer.py`. The rest as `xtreme`.
  """
  runner = XtremeRunner(run_dir, data_dir, model_config, vocabulary, init_checkpoint, settings, partition,
                        resume_overrides=resume_overrides, benchmark="mbert")
  return _run(runner, tasks, languages, labels_dir, published_model=published_model)


def _run(runner: XtremeRunner, tasks: Sequence[str], languages: Optional[dict], labels_dir: Optional[str],
         pseudo_test: bool = False, published_model: Optional[str] = None) -> dict:
  """Claims the run directory, checks everything (`check_run`), then `run_benchmark`."""
  from xtreme_jax.evaluation import published
  published.check_model(published_model)
  errors.require(not (pseudo_test and runner.filtering), "PSEUDO_TEST=True with a FILTER setting: the pseudo test sets "
                 "have no English side to pair with; run them in another setting")
  with RunDirectory(runner.run_dir, run_fingerprint(runner), known=RUN_ENTRIES) as claim:
    resumed = claim.check()
    plan = check_run(runner, tasks, languages, labels_dir)
    claim.commit()
    logging.info("%s run in %s (%s): %s", runner.benchmark.name.upper(), runner.run_dir,
                 "re-entered" if resumed else "new", plan)
    return run_benchmark(runner, plan, labels_dir, pseudo_test, published_model)


def run_benchmark(runner: XtremeRunner, plan: Mapping[str, list[str]], labels_dir: Optional[str],
                  pseudo_test: bool = False, published_model: Optional[str] = None) -> dict:
  """Fine-tune, predict and retrieve `plan` ({task: [languages]}, from `check_run`), then score and report."""
  pseudo_plan = {t: runner.pseudo_languages(t) for t in plan} if pseudo_test else {}
  for task, langs in plan.items():
    if task in RETRIEVAL_TASKS:
      runner.retrieve_task(task, langs)
    else:
      runner.predict_task(task, langs)
    if pseudo_plan.get(task):
      runner.predict_task(task, pseudo_plan[task], pseudo=True)
  runner.write_manifests(runner.submission)
  if runner.resume_overrides and not runner.resumed_with_overrides:
    logging.warning("RESUME_OVERRIDES %s unused: no model in %s was being resumed", runner.resume_overrides,
                    os.path.join(runner.run_dir, "models"))
  extras = {"runs": runner.write_runs(), "retrieval": runner.retrieval_summary(plan)}
  if pseudo_test:
    extras["pseudo"] = score_pseudo(runner, pseudo_plan)
  if not labels_dir:
    print(f"submission written to {runner.submission}; pass LABELS_DIR to score it")
    return extras
  _say(f"scoring {runner.submission} against {labels_dir}")
  protocol = runner.protocol
  scores = protocol.score(runner, list(plan), labels_dir)
  from xtreme_jax.evaluation import published, report
  on_disk = {t: test_languages(t, runner.data, None, runner.split) for t in plan}  # a sample's languages
  found = published.for_run(published_model, runner.benchmark.name, runner.settings.setting)
  results = report.mark_not_in_data({**scores, **extras, **({"published": found} if found else {})}, on_disk)
  if jax.process_index() == 0:
    atomic.write_json(runner.scores_path, scores)  # the scorer's output, as `xtreme-jax score --out` writes it
    protocol.write_report(results, runner.report_dir)
  print(protocol.table(results))
  print(f"report: {os.path.join(runner.report_dir, 'report.md')}")
  if jax.process_index() == 0:
    protocol.after_scoring(runner, plan, labels_dir, scores)
  compared = runner.settings_comparison()
  if compared is not None and jax.process_index() == 0:
    atomic.write_text(os.path.join(runner.report_dir, "settings.md"), compared)
    print(f"settings side by side: {os.path.join(runner.report_dir, 'settings.md')}")
  return results


def score_pseudo(runner: XtremeRunner, plan: dict) -> dict:
  """Scores the pseudo test predictions against their gold; {task: {language: metrics}}, also written to JSON."""
  from xtreme_jax.evaluation import metrics as task_metrics, scorer
  scores: dict = {}
  for task, langs in plan.items():
    for lg in langs:
      gold = runner.write_pseudo_gold(task, lg)
      pred = runner.prediction_path(task, lg, runner.pseudo_submission)
      scores.setdefault(task, {})[lg] = scorer.score_file(task, lg, pred, gold)
  runner.write_manifests(runner.pseudo_submission, runner.pseudo_labels)
  if jax.process_index() == 0:
    atomic.write_json(runner.pseudo_scores_path, scores)
  if not scores:
    print("pseudo test: no pseudo test file found under", runner.translations_dir)
  for task, by_lang in scores.items():
    print(f"pseudo {task}: " + "  ".join(f"{lg} {task_metrics.language_score(task, m):.1f}"
                                         for lg, m in by_lang.items()))
  return scores
