"""The training loop: sharded init, jitted steps, checkpoints, logging.

`Trainer.fit` resumes from the newest readable checkpoint in the run
directory (train state and input position), trains to `train_steps`, saves
every `checkpoint_every` steps and at the end, and stops with
`NonFiniteLossError` (keeping the last good checkpoint) when the loss, the
gradient norm or the update norm stops being finite (a checkpoint is only
written after its step's metrics were checked). Metrics of step s are read while step s+1
runs, so the device is never idle waiting for the host.
"""

from __future__ import annotations

import dataclasses
import contextlib
import functools
import json
import logging
import math
import os
import sys
import time
from typing import Any, Iterator, Optional

import flax.linen as nn
import jax
import numpy as np
from tqdm.auto import tqdm

from xtreme_jax.models.base import Model
from xtreme_jax.training import partitioning
from xtreme_jax import atomic
from xtreme_jax.training.checkpoints import Checkpointer
from xtreme_jax.training.optim import OptimizerConfig, make_optimizer
from xtreme_jax.training.steps import TrainState, eval_step, per_token_means, predict_step, train_step


class NonFiniteLossError(RuntimeError):
  """Training produced a NaN / Inf loss or gradient norm."""


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Loop settings. `batch_size` is global; `accum_steps` splits it into micro-batches."""

  train_steps: int = 1000
  accum_steps: int = 1
  log_every: int = 10
  checkpoint_every: int = 500
  keep_checkpoints: int = 3
  eval_every: Optional[int] = None
  seed: int = 0
  progress_bar: bool = True


def initialize_distributed() -> None:
  """`jax.distributed.initialize()` when this is one process of several.

  Detected from JAX_COORDINATOR_ADDRESS, a multi-task SLURM job, or a
  multi-host TPU slice (TPU_WORKER_HOSTNAMES with several hosts).
  """
  multi = (os.environ.get("JAX_COORDINATOR_ADDRESS")
           or int(os.environ.get("SLURM_NTASKS", "1")) > 1
           or "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""))
  if multi and not jax.distributed.is_initialized():
    jax.distributed.initialize()


class Trainer:
  """Owns the mesh, the jitted steps and the checkpointer of one run."""

  def __init__(self, model: Model, optimizer: OptimizerConfig, config: TrainerConfig,
               partition: partitioning.PartitionConfig, run_dir: str, devices=None):
    self.model, self.optimizer, self.config, self.run_dir = model, optimizer, config, run_dir
    self.mesh = partitioning.make_mesh(partition.mesh_shape, devices)
    self.rules = partition.rules
    self.data_sharding = partitioning.batch_sharding(self.mesh, self.rules)
    self.checkpointer = Checkpointer(os.path.join(run_dir, "checkpoints"), config.checkpoint_every,
                                     config.keep_checkpoints)
    self._writer = None

  @contextlib.contextmanager
  def sharding_context(self):
    """The mesh (`jax.set_mesh`) and the logical axis rules: activation constraints apply inside."""
    with jax.set_mesh(self.mesh), nn.logical_axis_rules(self.rules):
      yield

  # -- state ---------------------------------------------------------------

  def _abstract(self, batch: dict):
    """Abstract boxed params and the optimizer, from the batch shapes only."""
    boxed = jax.eval_shape(self.model.init, jax.random.PRNGKey(0), batch)
    tx, schedule = make_optimizer(self.optimizer, self.config.train_steps, nn.unbox(boxed))
    return boxed, tx, schedule

  def init_state(self, batch: dict, init_params: Any = None) -> TrainState:
    """A fresh, sharded train state.

    `init_params(params) -> params` may replace parts of the fresh (sharded)
    parameters with host arrays, e.g. a pretrained backbone; they are placed
    with the parameters' shardings (every host passes the full values).
    """
    boxed, self.tx, self.schedule = self._abstract(batch)
    with nn.logical_axis_rules(self.rules):  # outside the mesh: unboxing must not add constraints here
      self.param_specs = partitioning.param_specs(boxed, self.mesh, self.rules)
    with self.sharding_context():
      state_shapes = jax.eval_shape(self._make_state, jax.random.PRNGKey(self.config.seed), batch)
      self.state_specs = self._state_specs(state_shapes)
      self.state_shardings = partitioning.to_shardings(self.state_specs, self.mesh)
      state = jax.jit(self._make_state, out_shardings=self.state_shardings)(
          jax.random.PRNGKey(self.config.seed), batch)
    if init_params is not None:
      params = jax.device_put(init_params(state.params), partitioning.to_shardings(self.param_specs, self.mesh))
      state = state.replace(params=params, opt_state=jax.jit(
          self.tx.init, out_shardings=self.state_shardings.opt_state)(params))
    self._compile_steps(batch)
    return state

  def _make_state(self, rng, batch) -> TrainState:
    init_rng, step_rng = jax.random.split(rng)
    params = nn.unbox(self.model.init(init_rng, batch))
    return TrainState(step=jax.numpy.zeros((), jax.numpy.int32), params=params,
                      opt_state=self.tx.init(params), rng=step_rng)

  def _state_specs(self, shapes: TrainState) -> TrainState:
    """Optimizer moments follow their parameters; scalars are replicated."""
    from jax.sharding import PartitionSpec as P
    params_flat = {jax.tree_util.keystr(p): s for p, s in jax.tree_util.tree_leaves_with_path(
        self.param_specs, is_leaf=lambda x: isinstance(x, P))}
    param_shapes = {jax.tree_util.keystr(p): x.shape for p, x in jax.tree_util.tree_leaves_with_path(shapes.params)}

    def opt_spec(path, leaf):
      # Moments mirror the param tree (under mu / nu, inside multi_transform): take the
      # longest parameter path the state path ends with, so `['bias']` never shadows
      # `['classifier']['bias']`.
      key = jax.tree_util.keystr(path)
      matches = [p for p in params_flat if key.endswith(p) and param_shapes[p] == leaf.shape]
      return params_flat[max(matches, key=len)] if matches else P()

    opt_specs = jax.tree_util.tree_map_with_path(opt_spec, shapes.opt_state)
    return TrainState(step=P(), params=self.param_specs, opt_state=opt_specs, rng=P())

  def _compile_steps(self, batch: dict) -> None:
    batch_shardings = self.data_sharding  # a prefix: every feature is split on its batch dim
    step = functools.partial(train_step, model=self.model, tx=self.tx, schedule=self.schedule,
                             accum_steps=self.config.accum_steps)
    self._train_step = jax.jit(step, in_shardings=(self.state_shardings, batch_shardings),
                               out_shardings=(self.state_shardings, None), donate_argnums=(0,))
    self._eval_step = jax.jit(functools.partial(eval_step, model=self.model),
                              in_shardings=(self.state_shardings.params, batch_shardings))
    self._predict_step = jax.jit(functools.partial(predict_step, model=self.model),
                                 in_shardings=(self.state_shardings.params, batch_shardings))

  def place_params(self, params: Any) -> Any:
    """Host parameter arrays placed with this run's parameter shardings."""
    return jax.device_put(params, partitioning.to_shardings(self.param_specs, self.mesh))

  def to_global(self, batch: dict) -> dict:
    return partitioning.host_batch_to_global(batch, self.data_sharding)

  # -- loop ----------------------------------------------------------------

  def train_step(self, state: TrainState, batch: dict):
    with self.sharding_context():
      return self._train_step(state, self.to_global(batch))

  def evaluate(self, params: Any, batches: Iterator[dict]) -> dict:
    """Weighted means of the model's metrics over `batches`."""
    totals: dict = {}
    with self.sharding_context():
      for batch in batches:
        sums = jax.device_get(self._eval_step(params, self.to_global(batch)))
        for k, v in sums.items():
          totals[k] = totals.get(k, 0.0) + float(v)
    return {k: float(v) for k, v in per_token_means(totals).items()}

  def predict(self, params: Any, batches: Iterator[dict]) -> Iterator[Any]:
    """Numpy predictions of every batch (gathered from all hosts)."""
    with self.sharding_context():
      for batch in batches:
        out = self._predict_step(params, self.to_global(batch))
        if jax.process_count() > 1:
          from jax.experimental import multihost_utils
          out = multihost_utils.process_allgather(out, tiled=True)
        yield jax.tree_util.tree_map(np.asarray, jax.device_get(out))

  def restore_or_init(self, batch: dict, init_params: Any = None) -> tuple[TrainState, int]:
    """(state, data_position): the newest readable checkpoint, else a fresh state.

    `init_params` (e.g. loading a pretrained backbone) only runs for a fresh
    run. If checkpoints exist but none can be restored, this raises instead of
    silently starting over (which would let old good checkpoints be rotated out).
    """
    resuming = self.checkpointer.latest_step() is not None
    state = self.init_state(batch, None if resuming else init_params)
    if not resuming:
      return state, 0
    abstract = jax.tree_util.tree_map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), state, self.state_shardings)
    restored = self.checkpointer.restore_latest(abstract)
    if restored is None:
      raise RuntimeError(f"{self.run_dir}/checkpoints holds checkpoints {self.checkpointer.all_steps()} but none "
                         "could be restored into this model and optimizer (see the warnings above); refusing to "
                         "start over in this directory")
    state, meta = restored
    logging.info("resumed from step %d (data position %d)", meta["step"], meta["data_position"])
    return state, int(meta["data_position"])

  def fit(self, source, eval_source=None, init_params: Any = None) -> tuple[TrainState, dict]:
    """Train (or resume) to `train_steps`; returns the final state and a summary."""
    cfg = self.config
    host, hosts = jax.process_index(), jax.process_count()
    state, position = self.restore_or_init(source.batch(0, host, hosts), init_params)
    start = int(jax.device_get(state.step))
    history, pending, evals = [], None, []
    bar = tqdm(total=cfg.train_steps, initial=start, disable=not cfg.progress_bar or host != 0,
               desc="train", dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 15)
    # Throughput counts training time only: evaluation and checkpoint time is subtracted (`paused`).
    t_last, examples, tokens, paused = time.perf_counter(), 0, 0, 0.0
    try:
      for step in range(start, cfg.train_steps):
        batch = source.batch(position, host, hosts)
        state, metrics = self.train_step(state, batch)
        position += 1
        examples += source.batch_size
        tokens += source.tokens_per_batch(batch) * hosts
        if pending is not None:
          history.append(self._check(*pending))
        pending = (step + 1, metrics)
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.train_steps:
          record = self._check(*pending)
          pending = None
          history.append(record)
          now = time.perf_counter()
          elapsed = max(now - t_last - paused, 1e-9)
          record.update(examples_per_s=examples / elapsed, tokens_per_s=tokens / elapsed)
          t_last, examples, tokens, paused = now, 0, 0, 0.0
          self._log(done, record, "train")
          bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['learning_rate']:.2e}",
                          ex_s=f"{record['examples_per_s']:.1f}", tok_s=f"{record['tokens_per_s']:.0f}")
        bar.update(1)
        if eval_source is not None and cfg.eval_every and done % cfg.eval_every == 0:
          if pending is not None:
            history.append(self._check(*pending))
            pending = None
          t_pause = time.perf_counter()
          evals.append({"step": done, **self.evaluate(state.params, eval_source.eval_batches(host, hosts))})
          self._log(done, evals[-1], "eval")
          paused += time.perf_counter() - t_pause
        if done % cfg.checkpoint_every == 0 or done == cfg.train_steps:
          if pending is not None:
            history.append(self._check(*pending))
            pending = None
          t_pause = time.perf_counter()
          self.checkpointer.save(done, state, position, force=True)
          paused += time.perf_counter() - t_pause
    finally:
      bar.close()
      self.checkpointer.wait()
      if self._writer is not None:
        self._writer.flush()
    if eval_source is not None and not (evals and evals[-1]["step"] == cfg.train_steps):
      evals.append({"step": cfg.train_steps, **self.evaluate(state.params, eval_source.eval_batches(host, hosts))})
      self._log(cfg.train_steps, evals[-1], "eval")
    if start >= cfg.train_steps and not evals and os.path.exists(os.path.join(self.run_dir, "summary.json")):
      with open(os.path.join(self.run_dir, "summary.json")) as f:
        return state, json.load(f)  # a finished run re-entered: keep its summary
    summary = self._summary(history, evals, start)
    return state, summary

  def _check(self, step: int, metrics: dict) -> dict:
    record = {k: float(v) for k, v in jax.device_get(metrics).items()}
    record["step"] = step
    bad = [k for k in ("loss", "grad_norm", "update_norm") if not math.isfinite(record[k])]
    if bad:
      last = self.checkpointer.latest_step()
      raise NonFiniteLossError(
          f"non-finite {', '.join(f'{k}={record[k]}' for k in bad)} at step {step}; stopping. "
          f"The last good checkpoint is {'step ' + str(last) if last is not None else 'none (no checkpoint yet)'} "
          f"in {self.run_dir}. Lower the learning rate or check the data, then resume.")
    return record

  def _log(self, step: int, record: dict, prefix: str) -> None:
    if jax.process_index() != 0:
      return
    if self._writer is None:
      from tensorboardX import SummaryWriter
      self._writer = SummaryWriter(os.path.join(self.run_dir, "tensorboard"))
    for k, v in record.items():
      if k != "step":
        self._writer.add_scalar(f"{prefix}/{k}", v, step)
    logging.log(logging.INFO if prefix == "eval" else logging.DEBUG, "%s step %d: %s", prefix, step,
                {k: round(v, 5) for k, v in record.items() if k != "step"})

  def _summary(self, history: list[dict], evals: list[dict], start: int) -> dict:
    losses = [h["loss"] for h in history]
    summary = {
        "train_steps": self.config.train_steps, "resumed_from_step": start,
        "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None,
        "history": history, "eval": evals, "devices": jax.device_count(),
        "mesh": dict(self.mesh.shape), "checkpoints": sorted(self.checkpointer.manager.all_steps()),
    }
    if jax.process_index() == 0:
      atomic.write_json(os.path.join(self.run_dir, "summary.json"), summary)
    return summary
