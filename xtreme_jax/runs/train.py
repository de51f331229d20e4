"""Run modes: `pretrain`, `finetune`, `evaluate` (bound and selected in Gin).

Each run function takes fully built objects (model config or model, data
sources, optimizer / trainer / partition configs), claims its run directory
(`RunDirectory`: lock, fingerprint check, commit once training started) and
hands over to the `Trainer`.

`resume_overrides` (Gin `RESUME_OVERRIDES`, e.g. `{'learning_rate': 1e-5}`)
changes optimizer settings of a run being resumed, e.g. after a NaN stop: the
fingerprint check lets exactly those keys differ, the change is logged and
recorded in run_config.json's "overrides" (with the step it applied from),
later re-runs keep applying it, and the restored optimizer state is kept.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Callable, Optional

import jax

from xtreme_jax import atomic, errors, hf
from xtreme_jax.data import paths
from xtreme_jax.models.base import Model, load_backbone
from xtreme_jax.models.mlm import MlmModel
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.training.checkpoints import RunDirectory
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.partitioning import PartitionConfig
from xtreme_jax.training.progress import format_scores
from xtreme_jax.training.trainer import Trainer, TrainerConfig


def describe(obj: Any) -> Any:
  """A JSON-able description of (nested) config dataclasses, for run fingerprints; paths into the bundled
  sample by their package-relative names (`paths.portable`), the same in every install."""
  if dataclasses.is_dataclass(obj):
    return {"class": type(obj).__name__, **{f.name: describe(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
  if isinstance(obj, (list, tuple)):
    return [describe(x) for x in obj]
  return paths.portable(obj) if isinstance(obj, str) else obj


def _check_vocab(config: TransformerConfig, *sources) -> None:
  for source in sources:
    vocab = getattr(source, "vocab", None)
    if vocab is not None and vocab.vocab_size > config.vocab_size:
      raise errors.ConfigError(f"the vocabulary {source.vocabulary} has {vocab.vocab_size} ids but the model's "
                               f"vocab_size is {config.vocab_size}; raise vocab_size in the model preset")


def _check_languages(config: TransformerConfig, *sources) -> Optional[tuple]:
  """With language embeddings on, the data's language index (returned) must fit the embedding table."""
  if config.num_languages == 0:
    return None
  index = None
  for source in sources:
    langs = getattr(source, "languages_index", None)
    if langs is None:
      raise errors.ConfigError(f"num_languages={config.num_languages} (language embeddings) but "
                               f"{type(source).__name__} gives no per-token language ids")
    if len(langs) > config.num_languages:
      raise errors.ConfigError(f"the data has {len(langs)} languages {list(langs)} but num_languages="
                               f"{config.num_languages}; raise num_languages in the model preset")
    if config.languages and tuple(langs) != config.languages:
      raise errors.ConfigError(f"the data's language ids {list(langs)} differ from TransformerConfig.languages "
                               f"{list(config.languages)}; give the source the same language order")
    if index is not None and tuple(langs) != index:
      raise errors.ConfigError(f"the evaluation data's language ids {list(langs)} differ from the training data's "
                               f"{list(index)}; give both sources the same languages")
    index = tuple(langs)
  return index


def pretrained_loader(init_checkpoint: Optional[str], config: TransformerConfig,
                      transform: Optional[Callable[[dict], dict]] = None):
  """`init_params` for the Trainer that loads an imported checkpoint's backbone (None: fresh init).

  The checkpoint's config is checked here; its parameters are read only when
  the Trainer calls the loader, i.e. for a fresh run (a resume reads none).
  `transform` maps the imported parameters to the model's backbone tree first
  (e.g. `veco_assembly.seq2seq_backbone` for an encoder-decoder).
  """
  if not init_checkpoint:
    return None
  pre_config = hf.imported_config(init_checkpoint)
  for field in ("vocab_size", "hidden_size", "num_layers", "num_heads", "mlp_dim", "num_languages", "languages",
                "language_positions"):
    if getattr(pre_config, field) != getattr(config, field):
      raise errors.ConfigError(f"{init_checkpoint}: {field}={getattr(pre_config, field)} but the model preset has "
                               f"{getattr(config, field)}; use the preset that matches the checkpoint")

  def load(params):
    _, pre_params = hf.load_imported(init_checkpoint)
    return load_backbone(params, transform(pre_params) if transform is not None else pre_params, config)

  return load


def run_training(mode: str, run_dir: str, model: Model, train_data, eval_data, optimizer: OptimizerConfig,
                 trainer: TrainerConfig, partition: PartitionConfig, init_checkpoint: Optional[str],
                 resume_overrides: Optional[dict] = None, transform: Optional[Callable[[dict], dict]] = None) -> dict:
  """One training run of `mode` (pretrain, finetune, translate) in `run_dir`, claimed and resumable: checks the
  data against the model, fingerprints the run, trains (`Trainer.fit`, from `init_checkpoint` when given) and
  returns its summary. `transform` changes each batch before the step sees it."""
  _check_vocab(model.config, train_data, *([eval_data] if eval_data is not None else []))
  languages = _check_languages(model.config, train_data, *([eval_data] if eval_data is not None else []))
  fingerprint = {"mode": mode, "model": describe(model), "train_data": describe(train_data),
                 "eval_data": describe(eval_data), "optimizer": describe(optimizer),
                 "train_steps": trainer.train_steps, "accum_steps": trainer.accum_steps, "seed": trainer.seed,
                 "init_checkpoint": init_checkpoint}
  fingerprint.update(select_metric=trainer.select_metric, eval_every=trainer.eval_every)
  overrides = dict(resume_overrides or {})
  optimizer.with_overrides(overrides)  # unknown keys fail before the directory is touched
  files = {"languages.json": {lg: i for i, lg in enumerate(languages)}} if languages else None
  # export-encoder's LANGUAGE_ID indexes languages.json.
  with RunDirectory(run_dir, fingerprint, overrides={"optimizer": overrides} if overrides else None,
                    files=files) as claim:
    resumed = claim.check()
    logging.info("%s run in %s (%s)", mode, run_dir, "resuming" if resumed else "new")
    optimizer = apply_overrides(claim, optimizer)
    runner = Trainer(model, optimizer, trainer, partition, run_dir, run_directory=claim)
    try:
      _, summary = runner.fit(train_data, eval_data, pretrained_loader(init_checkpoint, model.config, transform))
    finally:
      runner.close()
      for source in (train_data, eval_data):
        getattr(source, "close", lambda: None)()  # streamed sources hold open tf.data iterators
  print(format_summary(summary, run_dir))
  return summary


def apply_overrides(claim: RunDirectory, optimizer: OptimizerConfig) -> OptimizerConfig:
  """The optimizer with the run directory's recorded overrides and this run's applied (logged)."""
  changes = claim.effective_overrides().get("optimizer", {})
  if not changes:
    return optimizer
  updated = optimizer.with_overrides(changes)
  logging.warning("resuming %s with optimizer overrides %s (configured: %s)%s", claim.run_dir,
                  ", ".join(f"{k}={val!r}" for k, val in changes.items()),
                  ", ".join(f"{k}={getattr(optimizer, k)!r}" for k in changes),
                  "" if claim.new_overrides() else " as recorded in run_config.json")
  return updated


def format_summary(summary: dict, run_dir: str, rows: int = 12) -> str:
  """A short table of the logged training metrics, the evaluations and where things are. Losses are the means
  since the previous log line (`progress.window_means`: each objective over the steps that trained it)."""
  history = [h for h in summary["history"] if "mean_loss" in h] or summary["history"]  # the logged steps
  stride = max(1, len(history) // rows)
  shown = history[::stride] + ([history[-1]] if history and (len(history) - 1) % stride else [])
  objectives = sorted({k for h in history for k in h if k.startswith("mean_") and k.endswith("_loss")} - {"mean_loss"})
  extra = objectives or ["accuracy"]
  names = [k[len("mean_"):] for k in extra]
  lines = [f"{'step':>7} {'loss':>8} " + " ".join(f"{k:>9}" for k in names) + f" {'lr':>9} {'tokens/s':>9}"]
  for h in shown:
    speed = f"{h['tokens_per_s']:>9.0f}" if "tokens_per_s" in h else f"{'-':>9}"
    lines.append(f"{h['step']:>7} {h.get('mean_loss', h['loss']):>8.4f} "
                 + " ".join(f"{h.get(k, float('nan')):>9.4f}" for k in extra)
                 + f" {h['learning_rate']:>9.2e} {speed}")
  for e in summary["eval"]:
    lines.append(f"eval @ {e['step']}: {format_scores(e)}")
  if summary.get("best"):
    best = summary["best"]
    lines.append(f"best {best['metric']} {best['value']:.4f} at step {best['step']} (in best/)")
  lines.append(f"checkpoints {summary['checkpoints']}, metrics.jsonl and summary.json in {run_dir}")
  return "\n".join(lines)


def pretrain(run_dir: str, model_config: TransformerConfig, train_data, eval_data=None,
             optimizer: OptimizerConfig = OptimizerConfig(learning_rate=1e-4),
             trainer: TrainerConfig = TrainerConfig(), partition: PartitionConfig = PartitionConfig(),
             init_checkpoint: Optional[str] = None, model: Optional[Model] = None,
             resume_overrides: Optional[dict] = None, init_transform: Optional[Callable[[dict], dict]] = None) -> dict:
  """Pretraining of `model_config` (from scratch or a warm start).

  `model` is the pretraining objective; the default is masked LM over plain
  text (`MlmModel`); `VecoModel` gives VECO, MLM on pairs, or MLM + TLM.
  `resume_overrides`: optimizer settings to change when resuming (module doc).
  `init_transform` maps `init_checkpoint`'s parameters to the model's backbone
  (`pretrained_loader`), e.g. `veco_assembly.seq2seq_backbone` for an
  encoder-decoder warm-started from an encoder checkpoint.
  """
  model = model if model is not None else MlmModel(model_config)
  if model.config != model_config:
    raise errors.ConfigError("the pretraining model's config differs from MODEL_CONFIG; bind the model's config to "
                             "%MODEL_CONFIG")
  return run_training("pretrain", run_dir, model, train_data, eval_data, optimizer, trainer, partition,
                      init_checkpoint, resume_overrides, init_transform)


def finetune(run_dir: str, model: Model, train_data, eval_data=None, init_checkpoint: Optional[str] = None,
             optimizer: OptimizerConfig = OptimizerConfig(), trainer: TrainerConfig = TrainerConfig(),
             partition: PartitionConfig = PartitionConfig(), resume_overrides: Optional[dict] = None) -> dict:
  """Fine-tune a task model whose backbone starts from an imported checkpoint (`resume_overrides`: module doc)."""
  return run_training("finetune", run_dir, model, train_data, eval_data, optimizer, trainer, partition,
                      init_checkpoint, resume_overrides)


def evaluate(run_dir: str, model: Model, eval_data, init_checkpoint: Optional[str] = None,
             partition: PartitionConfig = PartitionConfig()) -> dict:
  """Metrics of the newest checkpoint in `run_dir` (or of `init_checkpoint` if it has none).

  Only the parameters are restored, so any optimizer setting of the run is
  fine. Writes `run_dir/eval_results.json`.
  """
  _check_vocab(model.config, eval_data)
  runner = Trainer(model, OptimizerConfig(), TrainerConfig(train_steps=1, progress_bar=False), partition, run_dir)
  try:
    step = runner.checkpointer.latest_step()
    if step is None and not init_checkpoint:
      raise errors.MissingInputError(f"{run_dir} holds no checkpoint and no init_checkpoint was given")
    batch = next(iter(eval_data.eval_batches(*runner.feed_slot)))
    if step is None:
      params = runner.init_state(batch, pretrained_loader(init_checkpoint, model.config)).params
    else:
      runner.prepare(batch)
      params = runner.place_params(runner.checkpointer.restore_params(step))
    metrics = {"step": step or 0, **runner.evaluate(params, eval_data.eval_batches(*runner.feed_slot))}
  finally:
    runner.close()
  if jax.process_index() == 0:
    atomic.write_json(os.path.join(run_dir, "eval_results.json"), metrics)
    print(json.dumps(metrics, indent=2))
  return metrics
