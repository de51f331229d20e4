"""What a benchmark run checks before it trains anything (`check_run`: tasks, languages, setting, recipes,
labels, data files) and what defines its run directory (`run_fingerprint`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Union

from xtreme_jax import errors
from xtreme_jax.data.readers.benchmark_data import BenchmarkData
from xtreme_jax.data.readers.xtreme_data import XtremeData
from xtreme_jax.data import paths
from xtreme_jax.networks import layers
from xtreme_jax.runs import bookkeeping
from xtreme_jax.runs.recipes import finetuned_models, retrieval_tasks
from xtreme_jax.runs.train import describe, pretrained_loader
from xtreme_jax.training.optim import check_frozen_depth

if TYPE_CHECKING:
  from xtreme_jax.runs.xtreme import XtremeRunner


def test_languages(task: str, data: Union[str, BenchmarkData], languages: Optional[Sequence[str]],
                   split: str = "test") -> list[str]:
  """The requested languages, or every benchmark language whose `split` (test, or XGLUE's dev) is available.

  `data`: a benchmark's data object, or XTREME's official `download/` folder.
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


def _check_overrides(runner: XtremeRunner) -> None:
  """RESUME_OVERRIDES is None or a dict of keys every task's optimizer may change when resuming."""
  overrides = runner.resume_overrides
  if overrides is None:
    return
  errors.require(isinstance(overrides, Mapping), f"RESUME_OVERRIDES={overrides!r}; expected None or a dict of "
                 "optimizer settings, e.g. {'learning_rate': 1e-5}")
  for key in finetuned_models(runner.benchmark):  # unknown keys, max_grad_norm switched on / off: checked early
    runner.settings.recipe(key).optimizer.with_overrides(dict(overrides))


def _check_language_ids(runner: XtremeRunner) -> None:
  """A model with language embeddings names its languages (each example's id comes from its language), and
  runs in a setting whose models take one language per example (not FILTER's pairs)."""
  config = runner.config
  if not config.num_languages:
    return
  errors.require(bool(config.languages), f"the model has language embeddings (num_languages={config.num_languages}) "
                 "but TransformerConfig.languages does not name them; a benchmark run feeds each example its "
                 "language's id (export the encoder with LANGUAGE_ID 'all', or fold one language in)")
  errors.require(not runner.filtering, "FILTER's settings take no model with language embeddings (each example is "
                 "a pair of two languages); fold one language in (export-encoder RUN_DIR OUT LANGUAGE_ID)")


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
  _check_language_ids(runner)
  for task in tasks:
    if runner.spec(task).retrieval:
      layer, seq_len = runner.retrieval.layer(task), runner.settings.retrieval(task).seq_len
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
          "data_source": runner.data.source, "data_dir": bookkeeping.fingerprint_dir(runner.data_dir),
          "init_checkpoint": runner.init_checkpoint, "seed": s.seed, "tasks": recipes}
