"""The recipes of a benchmark run: each fine-tuned model's `TaskSettings`, each retrieval task's
`RetrievalSettings`, and the run's `FinetuneSettings` (its setting and every task's recipe). Gin binds them as
`xtreme.TaskSettings` ... (`runs/xtreme.py` re-exports them; `gin_configs/runs/xtreme.gin`)."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence, Union

from xtreme_jax import errors
from xtreme_jax.evaluation import retrieval
from xtreme_jax.registry import BENCHMARKS, XGLUE, XTREME, BenchmarkSpec, xglue as xglue_registry
from xtreme_jax.runs import filter_kinds, task_kinds
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training import validation as v
from xtreme_jax.training.stopping import PlateauSchedule


def retrieval_tasks(benchmark: BenchmarkSpec) -> tuple:
  """The benchmark's tasks that are not fine-tuned (XTREME's BUCC and Tatoeba: `RetrievalSettings` keys)."""
  return tuple(t.name for t in benchmark.tasks if t.retrieval)


def finetuned_models(benchmark: BenchmarkSpec) -> tuple:
  """The benchmark's fine-tuned models (`TaskSettings` keys; tasks with the same training data share one)."""
  return tuple(dict.fromkeys(t.model for t in benchmark.tasks if t.fine_tuned))


RETRIEVAL_TASKS = retrieval_tasks(XTREME)
FINETUNED = finetuned_models(XTREME)  # XTREME's settings keys
# Every benchmark's settings (`BenchmarkSpec.settings`; a run allows its benchmark's only).
SETTINGS = tuple(dict.fromkeys(s for b in BENCHMARKS.values() for s in b.settings))
SELECTIONS = ("english_dev", "mean_dev", "final")


@dataclasses.dataclass(frozen=True)
class TaskSettings:
  """The fine-tuning recipe of one task (defaults: the official scripts' XNLI / PAWS-X recipe).

  `seq_len` is the maximum length in subword tokens (QA: of one window of the
  question and the context). `batch_size` is the effective (global) batch;
  `accum_steps` splits it into micro-batches. `eval_every` (updates between
  dev evaluations, or "epoch": after every pass over the training windows,
  as XGLUE's scripts; None: only after the last update) and `selection`
  choose the parameters that predict the test sets (`english_dev`: best
  English dev score, as the official scripts; `mean_dev`: best mean over the
  dev languages on disk, as XGLUE and FILTER; `final`: the last update, as
  the official QA scripts, which QA models and tasks without dev data always
  use). See docs/xtreme.md. `plateau`: lower the learning rate when the
  selected dev score stops improving, stop below a floor
  (`trainer.PlateauSchedule`; the mBERT paper's feature-based recipe); needs
  a dev selection.

  The parts that one task kind or setting reads (`runs/task_kinds.py`,
  `runs/filter_kinds.py`): `qa` (windows, answer length), `tagging` (window
  context), `ranking` (XGLUE WPR's head), `generation` (the encoder-decoder,
  target length and decoding of XGLUE QG / NTG), `filter` (FILTER's layers,
  self-teaching and inference pairs) and `feature_based` (the mBERT paper's
  BiLSTM).
  """

  epochs: float = 5.0
  batch_size: int = 32
  accum_steps: int = 1
  seq_len: int = 128
  optimizer: OptimizerConfig = OptimizerConfig(learning_rate=2e-5, warmup_ratio=0.0, warmup_steps=0,
                                              weight_decay=0.0)
  eval_every: Optional[Union[int, str]] = None
  selection: str = "english_dev"
  plateau: Optional[PlateauSchedule] = None
  qa: task_kinds.QaSettings = task_kinds.QaSettings()
  tagging: task_kinds.TaggingSettings = task_kinds.TaggingSettings()
  ranking: task_kinds.RankingSettings = task_kinds.RankingSettings()
  generation: task_kinds.GenerationSettings = task_kinds.GenerationSettings()
  filter: filter_kinds.FilterSettings = filter_kinds.FilterSettings()
  feature_based: task_kinds.FeatureBasedSettings = task_kinds.FeatureBasedSettings()

  def eval_interval(self, windows: int) -> Optional[int]:
    """Updates between dev evaluations for `windows` training windows ("epoch": one pass, at least 1)."""
    if self.eval_every == "epoch":
      return max(1, round(windows / self.batch_size))
    return self.eval_every

  def __post_init__(self):
    v.require(self, "epochs", v.positive, "a number > 0")
    for name in ("batch_size", "accum_steps", "seq_len"):
      v.require(self, name, v.positive_int, "a positive integer")
    v.require(self, "batch_size", lambda b: b % self.accum_steps == 0,
              f"a multiple of accum_steps ({self.accum_steps})")
    v.require(self, "optimizer", lambda o: isinstance(o, OptimizerConfig), "an optim.OptimizerConfig")
    v.require(self, "eval_every", lambda x: x is None or x == "epoch" or v.positive_int(x),
              "None, a positive integer or 'epoch'")
    v.require(self, "selection", lambda x: x in SELECTIONS, f"one of {SELECTIONS}")
    v.require(self, "plateau", v.optional(lambda p: isinstance(p, PlateauSchedule)), "None or a PlateauSchedule")
    parts = {"qa": task_kinds.QaSettings, "tagging": task_kinds.TaggingSettings, "ranking": task_kinds.RankingSettings,
             "generation": task_kinds.GenerationSettings, "filter": filter_kinds.FilterSettings,
             "feature_based": task_kinds.FeatureBasedSettings}
    for name, part in parts.items():
      v.require(self, name, lambda x, part=part: isinstance(x, part),
                f"a {part.__module__.rsplit('.', 1)[-1]}.{part.__name__}")


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

  Settings of the benchmark (`BenchmarkSpec.settings`; docs/xtreme.md has
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
      want = RetrievalSettings if any(key in retrieval_tasks(b) for b in BENCHMARKS.values()) else TaskSettings
      errors.require(isinstance(value, want), f"FinetuneSettings.tasks[{key!r}] is a {type(value).__name__}; "
                     f"expected xtreme.{want.__name__}")

  def recipe(self, key: str) -> TaskSettings:
    """The `TaskSettings` of fine-tuned task `key` (a `FINETUNED` name)."""
    return self.tasks.get(key, TaskSettings())

  def retrieval(self, task: str) -> RetrievalSettings:
    return self.tasks.get(task, RetrievalSettings())
