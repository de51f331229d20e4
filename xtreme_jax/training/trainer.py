"""The training loop: sharded init, jitted steps, checkpoints, evaluation, logging.

`Trainer.fit` resumes from the newest readable checkpoint in the run
directory (train state, input position and, for sources that keep one, the
input state: `source.input_state` / `restore_input_state`, e.g. the streamed
`SeqioPairSource`), trains to `train_steps`, saves
every `checkpoint_every` steps and at the end. A resume restores straight
into the sharded layout (shapes from `jax.eval_shape`); only a fresh run
initialises parameters. The device is not kept waiting on the host: batches
are built and placed ahead by a background thread (`TrainerConfig.prefetch`),
step metrics stay on the device and are fetched and checked every `log_every`
steps (and before an evaluation, a checkpoint and at the end), so a
checkpoint is only written after its steps' metrics were checked; evaluation
and prediction fetch each batch's output while later batches run.

On the terminal: one line for start-up (initialisation or restore, and the
first step, which compiles), then one progress bar whose ETA counts training
steps only, and one line per evaluation. Metrics go to `metrics.jsonl` (and
TensorBoard, see `writers`).

A run stops early (`training/stopping.py`) with
- `NonFiniteLossError` (keeping the last good checkpoint) when the loss, the
  gradient norm or the update norm stops being finite; its message gives the
  flag that resumes with a lower learning rate (RESUME_OVERRIDES; from step 0
  if no checkpoint was written yet), or, when the NaN came at the first step
  (the run directory not claimed yet), says to lower the configured rate;
- `Preempted` on SIGTERM / SIGINT, after saving the current step's
  checkpoint (TPU VMs are preempted with SIGTERM); the CLI exits with
  128 + the signal number and a re-run continues exactly. On several
  processes, orbax's preemption sync point decides the step instead.

Evaluation (`eval_source` metrics and / or an `evaluator(params)`) runs every
`eval_every` steps and at the end; with `select_metric` the parameters with
its highest value so far are kept in `<run_dir>/best/`
(`restore_best_params`). A `PlateauSchedule` lowers the learning rate when
that metric stops improving and ends the run early once the rate falls
below its floor; its state is saved with each checkpoint, so a resumed run
goes on with the lowered rate (and a stopped one stays stopped).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import time
from typing import Any, Callable, Iterator, NamedTuple, Optional

import flax.linen as nn
import jax
import numpy as np
from tqdm.auto import tqdm

from xtreme_jax import atomic, errors, fs
from xtreme_jax.models.base import Model
from xtreme_jax.training import locks, partitioning, prefetch, stopping, validation as v, writers
from xtreme_jax.training import programs as compiled_programs
from xtreme_jax.training.progress import Progress, format_scores, window_means
from xtreme_jax.training.checkpoints import BestParams, Checkpointer, ForeignRunDirectoryError, RunDirectory
from xtreme_jax.training import optim
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.steps import TrainState, per_token_means
from xtreme_jax.training.stopping import (  # noqa: F401  (PlateauSchedule: Gin binds trainer.PlateauSchedule)
    PlateauSchedule, PlateauState, Preempted, stop_signals)

SUMMARY = "summary.json"
IN_FLIGHT = 2  # training steps the host may dispatch ahead of the device


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Loop settings. The batch size is the source's (global); `accum_steps` splits it into micro-batches.

  `select_metric`: keep the parameters with the highest value of this
  evaluation metric in `<run_dir>/best/` (higher is better).
  `tensorboard`: True, False or 'auto' (events only when TensorFlow is
  already imported, i.e. the run reads a tf.data pipeline); metrics.jsonl is
  always written.
  `plateau`: a `PlateauSchedule` on `select_metric` (None: the optimizer's
  schedule alone).
  `prefetch`: batches built and placed ahead of the step by a background
  thread (training, evaluation and prediction; 0: built inline). It changes
  when a batch is built, never what it holds.
  `eval_at_start`: a fresh run also evaluates its initial parameters (step 0),
  the baseline the later evaluations are read against.
  """

  train_steps: int = 1000
  accum_steps: int = 1
  log_every: int = 10
  checkpoint_every: int = 500
  keep_checkpoints: int = 3
  eval_every: Optional[int] = None
  seed: int = 0
  progress_bar: bool = True
  select_metric: Optional[str] = None
  tensorboard: Any = "auto"
  plateau: Optional[PlateauSchedule] = None
  prefetch: int = 2
  eval_at_start: bool = False

  def __post_init__(self):
    for name in ("train_steps", "accum_steps", "log_every", "checkpoint_every", "keep_checkpoints"):
      v.require(self, name, v.positive_int, "a positive integer")
    v.require(self, "eval_every", v.optional(v.positive_int), "None or a positive integer")
    v.require(self, "seed", v.is_int, "an integer")
    v.require(self, "progress_bar", lambda x: isinstance(x, bool), "True or False")
    v.require(self, "eval_at_start", lambda x: isinstance(x, bool), "True or False")
    v.require(self, "select_metric", v.optional(lambda x: isinstance(x, str) and bool(x)), "None or a metric name")
    v.require(self, "tensorboard", lambda x: isinstance(x, bool) or x == "auto", "True, False or 'auto'")
    v.require(self, "plateau", v.optional(lambda x: isinstance(x, PlateauSchedule)), "None or a PlateauSchedule")
    v.require(self, "prefetch", v.non_negative_int, "an integer >= 0")
    if self.plateau is not None and not self.select_metric:
      raise errors.ConfigError("TrainerConfig.plateau needs select_metric (the evaluation metric it watches)")


class _Fed(NamedTuple):
  """One training batch as the feed hands it over."""

  position: int  # its number in the input stream
  batch: dict  # placed with the data sharding
  tokens: int  # this host's non-pad tokens
  input_state: Any  # the source's input state after it, where a planned checkpoint follows (else None)


class Trainer:
  """Owns the mesh, the jitted steps and the checkpointer of one run.

  `run_directory` (a locked and checked `RunDirectory`) is committed once
  start-up succeeded: after the first step ran (it compiles) and was checked.
  """

  def __init__(self, model: Model, optimizer: OptimizerConfig, config: TrainerConfig,
               partition: partitioning.PartitionConfig, run_dir: str, devices=None,
               run_directory: Optional[RunDirectory] = None):
    self.model, self.optimizer, self.config, self.run_dir = model, optimizer, config, run_dir
    self.run_directory = run_directory
    self.mesh = partitioning.make_mesh(partition.mesh_shape, devices)
    self.rules = partition.rules
    self.data_sharding = partitioning.batch_sharding(self.mesh, self.rules)
    # Which rows of each global batch this process passes: (slot, slots) for `source.batch(step, slot, slots)`.
    self.feed_slot = partitioning.feed_slot(self.data_sharding)
    self.checkpointer = Checkpointer(os.path.join(run_dir, "checkpoints"), config.checkpoint_every,
                                     config.keep_checkpoints)
    self.best = BestParams(os.path.join(run_dir, "best"), config.select_metric) if config.select_metric else None
    self._writer = None
    self._resume_step = 0
    self.plateau = PlateauState()
    self.restored_input = None  # the input state of the checkpoint restored by restore_or_init, if any

  @contextlib.contextmanager
  def sharding_context(self):
    """The mesh (`jax.set_mesh`) and the logical axis rules: activation constraints apply inside."""
    with jax.set_mesh(self.mesh), nn.logical_axis_rules(self.rules):
      yield

  # -- state ---------------------------------------------------------------

  def prepare(self, batch: dict) -> compiled_programs.Programs:
    """The shapes, shardings and jitted steps for batches shaped like `batch`; nothing runs or compiles."""
    programs = compiled_programs.compiled(self.model, optim.structure(self.optimizer), self.config.accum_steps,
                                          self.mesh, self.rules, compiled_programs.batch_shapes(batch))
    self.hyperparameters = optim.hyperparameters(self.optimizer, self.config.train_steps)
    self.tx, self.param_specs = programs.tx, programs.param_specs
    self.state_specs, self.state_shardings = programs.state_specs, programs.state_shardings
    self.abstract_params = programs.abstract_params
    self._train_step, self._eval_step, self._predict_step = (
        programs.train_step, programs.eval_step, programs.predict_step)
    return programs

  def init_state(self, batch: dict, init_params: Any = None) -> TrainState:
    """A fresh, sharded train state (the only path that initialises parameters).

    `init_params(params) -> params` may replace parts of the fresh (sharded)
    parameters with host arrays, e.g. a pretrained backbone; they are placed
    with the parameters' shardings (every host passes the full values). The
    optimizer state is built once, over the final parameters.
    """
    programs = self.prepare(batch)
    rng = jax.random.PRNGKey(self.config.seed)
    with self.sharding_context():
      params = programs.init_params(rng, batch)
    if init_params is not None:  # outside the mesh context: a loader may read a checkpoint (orbax)
      params = jax.device_put(init_params(params), partitioning.to_shardings(self.param_specs, self.mesh))
    with self.sharding_context():
      return programs.start_state(params, rng)

  def place_params(self, params: Any) -> Any:
    """Host parameter arrays placed with this run's parameter shardings."""
    return jax.device_put(params, partitioning.to_shardings(self.param_specs, self.mesh))

  def to_global(self, batch: dict) -> dict:
    return partitioning.host_batch_to_global(batch, self.data_sharding)

  # -- loop ----------------------------------------------------------------

  def train_step(self, state: TrainState, batch: dict):
    """One step on this host's rows `batch` (numpy); returns the new state and the step's metrics (on device)."""
    return self._dispatch(state, self.to_global(batch))

  def _dispatch(self, state: TrainState, batch: dict):
    with self.sharding_context():
      return self._train_step(state, batch, self._numbers())

  def _numbers(self) -> dict:
    """The optimizer's numbers for the next step: the configured ones, the rate scaled by the plateau schedule."""
    if self.plateau.scale == 1.0:
      return self.hyperparameters
    return {**self.hyperparameters, "learning_rate": np.float32(self.hyperparameters["learning_rate"]
                                                                * self.plateau.scale)}

  def _placed(self, batches: Iterator[dict]) -> prefetch.Prefetcher:
    """`batches` built and placed on the devices ahead of their use."""
    return prefetch.Prefetcher(map(self.to_global, batches), self.config.prefetch)

  def evaluate(self, params: Any, batches: Iterator[dict]) -> dict:
    """Weighted means of the model's metrics over `batches`."""
    totals: dict = {}
    with self.sharding_context(), self._placed(batches) as placed:
      for sums in prefetch.pipelined(functools.partial(self._eval_step, params), placed):
        for k, val in sums.items():
          totals[k] = totals.get(k, 0.0) + float(val)
    return {k: float(val) for k, val in per_token_means(totals).items()}

  def predict(self, params: Any, batches: Iterator[dict]) -> Iterator[Any]:
    """Numpy predictions of every batch (gathered from all hosts)."""
    def fetch(out):
      if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        out = multihost_utils.process_allgather(out, tiled=True)
      return jax.tree_util.tree_map(np.asarray, jax.device_get(out))

    with self.sharding_context(), self._placed(batches) as placed:
      yield from prefetch.pipelined(functools.partial(self._predict_step, params), placed, fetch=fetch)

  def restore_or_init(self, batch: dict, init_params: Any = None) -> tuple[TrainState, int]:
    """(state, data_position): the newest readable checkpoint, else a fresh state.

    `init_params` (e.g. loading a pretrained backbone) only runs for a fresh
    run. A resume restores straight into the sharded layout, shapes from
    `jax.eval_shape`: nothing is initialised. If checkpoints exist but none can
    be restored, this raises instead of silently starting over (which would let
    old good checkpoints be rotated out).
    """
    if self.checkpointer.latest_step() is None:
      return self.init_state(batch, init_params), 0
    abstract = self.prepare(batch).abstract_state  # shapes from eval_shape: a resume initialises nothing
    restored = self.checkpointer.restore_latest(abstract)
    if restored is None:
      raise ForeignRunDirectoryError(
          f"{self.run_dir}/checkpoints holds checkpoints {self.checkpointer.all_steps()} but none could be restored "
          "into this model and optimizer (see the warnings above); refusing to start over in this directory")
    state, meta = restored
    self.restored_input = meta["input"]
    self.plateau = PlateauState(**meta.get("plateau", {}))
    logging.info("resumed from step %d (data position %d)", meta["step"], meta["data_position"])
    return state, int(meta["data_position"])

  def restore_best_params(self) -> Any:
    """The parameters with the best `select_metric` so far, placed with the parameter shardings; None if none.

    Call after `fit`, `init_state` or `prepare` (they fix the parameter shapes).
    """
    if self.best is None:
      return None
    abstract = jax.tree_util.tree_map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                                      self.abstract_params, partitioning.to_shardings(self.param_specs, self.mesh))
    return self.best.restore(abstract)

  def fit(self, source, eval_source=None, init_params: Any = None,
          evaluator: Optional[Callable[[Any], dict]] = None) -> tuple[TrainState, dict]:
    """Train (or resume) to `train_steps`; returns the final state and a summary.

    `evaluator(params) -> {metric: value}` is called every `eval_every`
    steps and at the end, beside `eval_source`'s metrics; the results are
    logged and listed in the summary's "eval". A finished run re-entered
    returns its stored summary.
    """
    self._check_start(source, eval_source, evaluator)
    evaluate = None
    if eval_source is not None or evaluator is not None:
      evaluate = functools.partial(self._evaluate_at, eval_source=eval_source, evaluator=evaluator)
    # Several processes stop at orbax's preemption sync point (_stop_requested), where all agree on the step;
    # per-process handlers could stop them at different steps (one feed slot does not mean one process).
    with stop_signals(jax.process_count() == 1) as stop:
      state, position, progress = self._resume(source, init_params)
      end = progress.start if self.plateau.stopped else self.config.train_steps
      if progress.start >= end:
        self._commit(progress.start)
        stored = self._stored_summary()
        if stored is not None:
          return state, stored
      if evaluate is not None and self.config.eval_at_start and progress.start == 0:
        t = time.perf_counter()
        evaluate(progress, 0, state.params)
        progress.began += time.perf_counter() - t  # (its own line; not the train step's compile time)
      state = self._loop(source, state, position, progress, end, evaluate, stop)
    return state, self._summary(progress)

  def _resume(self, source, init_params: Any) -> tuple[TrainState, int, Progress]:
    """The restored (else fresh) state, its data position and the progress before it; the source resumes there."""
    host, hosts = self.feed_slot
    began = time.perf_counter()
    first = source.shape_batch(host, hosts) if hasattr(source, "shape_batch") else source.batch(0, host, hosts)
    state, position = self.restore_or_init(first, init_params)
    self._restore_input(source, position)
    start = self._resume_step = int(jax.device_get(state.step))
    progress = Progress(start, began=began)
    if start:
      progress.earlier, progress.evals = writers.read_metrics(self.run_dir, start)
    return state, position, progress

  def _loop(self, source, state: TrainState, position: int, progress: Progress, end: int,
            evaluate: Optional[Callable], stop: list) -> TrainState:
    """The steps from `progress.start` to `end`, with their log lines, evaluations, checkpoints and stops."""
    cfg, start, bar, done = self.config, progress.start, None, progress.start
    offset = start - position  # step = data position + offset
    feed = prefetch.Prefetcher(self._feed(source, position, end - start, lambda p: self._saves(p + offset)),
                               cfg.prefetch)
    try:
      for step in range(start, end):
        fed = next(feed)
        state, metrics = self._dispatch(state, fed.batch)
        position, done = fed.position + 1, step + 1
        if step == start:
          bar = self._started(progress, done, metrics)
        else:
          self._push(progress, done, metrics, source.batch_size, fed.tokens * self.feed_slot[1])
        if done % cfg.log_every == 0 or done == cfg.train_steps or done == 1:  # (1: the run's first loss)
          self._log_step(progress, bar)
        bar.update(1)
        locks.check_held()  # another run took over a lock of this run (gs://): stop here, saving nothing
        if evaluate is not None and cfg.eval_every and done % cfg.eval_every == 0:
          self._flush(progress)
          with progress.pause():
            evaluate(progress, done, state.params)
        signum = self._stop_requested(stop, done)
        if self._saves(done) or signum or self.plateau.stopped:
          self._save(progress, done, state, position, self._input_state(source, position, fed, feed))
        if self.plateau.stopped:
          break
        if signum and done < cfg.train_steps:
          self.checkpointer.wait()
          raise Preempted(f"stopped by {signal.Signals(signum).name} at step {done} after saving its checkpoint "
                          f"in {self.checkpointer.directory}; re-run the same command to resume", signum)
      self._flush(progress)
      if evaluate is not None and not (progress.evals and progress.evals[-1]["step"] == done):
        evaluate(progress, done, state.params)
    finally:
      feed.close()
      if bar is not None:
        bar.close()
      self.checkpointer.wait()
      self._close_writer()
    return state

  # -- loop parts --------------------------------------------------------------

  def _saves(self, step: int) -> bool:
    """Whether a checkpoint is planned after `step` (stops by signal or plateau come on top)."""
    return step % self.config.checkpoint_every == 0 or step == self.config.train_steps

  def _feed(self, source, position: int, count: int, saves: Callable[[int], bool]) -> Iterator[_Fed]:
    """`count` batches from `position` on, placed on the devices (run ahead by the prefetcher). A source that
    keeps an input state has it taken right after each batch that a planned checkpoint follows."""
    host, hosts = self.feed_slot
    keeps_state = hasattr(source, "input_state")
    for p in range(position, position + count):
      batch = source.batch(p, host, hosts)
      after = source.input_state(p + 1, host, hosts) if keeps_state and saves(p + 1) else None
      yield _Fed(p, self.to_global(batch), source.tokens_per_batch(batch), after)

  def _input_state(self, source, position: int, fed: _Fed, feed: prefetch.Prefetcher
                   ) -> Optional[Callable[[], Any]]:
    """What saves the input's state with a checkpoint, for sources that keep one (`input_state`): the state
    taken after the batch (planned checkpoints), else (a stop) the source's own, once the feed has stopped."""
    if not hasattr(source, "input_state"):
      return None
    if fed.input_state is not None:
      return lambda: fed.input_state
    feed.close()  # the source is read ahead: it seeks back to `position`
    return functools.partial(source.input_state, position, *self.feed_slot)

  def _restore_input(self, source, position: int) -> None:
    """Hands a restored checkpoint's input state to the source; without one, says that it replays."""
    if not hasattr(source, "restore_input_state") or position == 0:
      return
    saved = self.restored_input
    if saved is not None:
      source.restore_input_state(saved, position, *self.feed_slot)
    else:
      logging.warning("the checkpoint holds no input state (written by an older version): the input resumes at "
                      "batch %d by replaying the draws and re-reading every stream up to its position", position)

  def _check_start(self, source, eval_source, evaluator) -> None:
    """Refuse settings that cannot work before anything is compiled."""
    cfg = self.config
    writers.check_setting(cfg.tensorboard)
    if cfg.select_metric and eval_source is None and evaluator is None:
      raise errors.ConfigError(f"TrainerConfig.select_metric = {cfg.select_metric!r} needs an evaluation "
                               "(an eval_source or an evaluator)")
    size = getattr(source, "batch_size", None)
    if size is None:
      return
    name = f"{type(source).__name__}.batch_size = {size}"
    if size % cfg.accum_steps:
      raise errors.ConfigError(f"{name} is not divisible into TrainerConfig.accum_steps = {cfg.accum_steps} "
                               "micro-batches")
    axes, devices = partitioning.data_parallelism(self.data_sharding)
    if size % devices:
      raise errors.ConfigError(
          f"{name} is not divisible by the {devices} devices of the mesh's data axes {axes} "
          f"(mesh {dict(self.mesh.shape)}); use a batch size that is a multiple of {devices} "
          f"(e.g. {-(-size // devices) * devices}) or put fewer devices on the data axes (MESH_SHAPE)")

  def _started(self, progress: Progress, done: int, metrics: dict):
    """After the first step: check it (this waits for compilation), commit the run directory, say how long it
    took, write the initial parameters' evaluation (now that the run is committed); returns the progress bar."""
    progress.history.append(self._check(done, metrics))
    self._commit(progress.start)
    resumed = f" (resumed from step {progress.start})" if progress.start else ""
    self._say(f"compiling train step ... {time.perf_counter() - progress.began:.1f} s{resumed}")
    progress.window_start = time.perf_counter()
    if progress.evals and progress.evals[0]["step"] == 0 and progress.start == 0:
      self._write(0, progress.evals[0], "eval")
    return self._bar(done)

  def _stop_requested(self, received: list, step: int) -> Optional[int]:
    """The signal to stop at after `step`: one this process received, or (several processes) orbax's
    preemption sync point, where all processes agree on the step."""
    if received:
      return received[0]
    if jax.process_count() > 1 and self.checkpointer.manager.reached_preemption(step):
      return signal.SIGTERM
    return None

  def _commit(self, step: int) -> None:
    if self.run_directory is not None:
      self.run_directory.commit(step)

  def _bar(self, done: int):
    cfg = self.config
    return tqdm(total=cfg.train_steps, initial=done - 1, disable=not cfg.progress_bar or jax.process_index() != 0,
                desc="train", dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 15)

  def _push(self, progress: Progress, done: int, metrics: dict, examples: int, tokens: int) -> None:
    """Count the step's examples and (all hosts') tokens and keep its metrics on the device until the next flush;
    the host stays at most `IN_FLIGHT` steps ahead of the device (it waits for a step's end, fetching nothing)."""
    progress.examples += examples
    progress.tokens += tokens
    progress.pending.append((done, metrics))
    if len(progress.pending) > IN_FLIGHT:
      jax.block_until_ready(progress.pending[-1 - IN_FLIGHT][1]["loss"])

  def _save(self, progress: Progress, step: int, state: TrainState, position: int,
            input_state: Optional[Callable[[], Any]]) -> None:
    """The checkpoint of `step`, written after its metrics were checked and synced to disk (a kill -9 after it
    commits loses none)."""
    self._flush(progress)
    self._sync_metrics()
    with progress.pause():
      self.checkpointer.save(step, state, position, force=True, input_state=input_state,
                             extra={"plateau": dataclasses.asdict(self.plateau)})

  def _flush(self, progress: Progress) -> None:
    """Fetch the pending steps' metrics (one transfer) and check them in order (NaN stops the run here)."""
    if progress.pending:
      fetched = jax.device_get([metrics for _, metrics in progress.pending])
      steps = [step for step, _ in progress.pending]
      progress.pending = []
      for step, metrics in zip(steps, fetched):
        progress.history.append(self._check(step, metrics))

  def _log_step(self, progress: Progress, bar) -> None:
    self._flush(progress)
    record = progress.history[-1]
    if record["step"] > progress.start + 1:  # the first step's time is compilation, not throughput
      record.update(progress.throughput())
    record.update(window_means([r for r in progress.history[-self.config.log_every:] if r["step"] > progress.logged]))
    progress.logged = record["step"]
    self._write(record["step"], record, "train")
    if bar is not None and "tokens_per_s" in record:
      bar.set_postfix(loss=f"{record.get('mean_loss', record['loss']):.4f}", lr=f"{record['learning_rate']:.2e}",
                      ex_s=f"{record['examples_per_s']:.1f}", tok_s=f"{record['tokens_per_s']:.0f}")

  def _evaluate_at(self, progress: Progress, step: int, params: Any, eval_source=None, evaluator=None) -> None:
    """Evaluate, log, record in `progress.evals`, and keep the parameters if they are the best so far. The
    initial parameters (`eval_at_start`, step 0) are a baseline: not offered as the best, no plateau step, and
    written to the metrics only once the first step has committed the run directory (`_started`)."""
    t = time.perf_counter()
    record: dict = {"step": step}
    if eval_source is not None:
      record.update(self.evaluate(params, eval_source.eval_batches(*self.feed_slot)))
    if evaluator is not None:
      record.update({k: float(val) for k, val in evaluator(params).items()})
    progress.evals.append(record)
    if step == 0:
      self._say(f"eval @ 0 ({time.perf_counter() - t:.1f} s): {format_scores(record)} (the initial parameters)")
      return
    self._write(step, record, "eval")
    improved, best = self._select(step, params, record)
    plateau = self.config.plateau
    note = "" if plateau is None else self.plateau.after_evaluation(
        plateau, improved, float(self.hyperparameters["learning_rate"]))
    self._say(f"eval @ {step} ({time.perf_counter() - t:.1f} s): {format_scores(record)}{best}{note}")

  def _select(self, step: int, params: Any, record: dict) -> tuple[bool, str]:
    """Offer `params` to the best-so-far store; (a new best or not, a note for the eval line)."""
    if self.best is None:
      return False, ""
    metric = self.config.select_metric
    if metric not in record:
      raise errors.ConfigError(f"TrainerConfig.select_metric = {metric!r} is not among the evaluation results "
                               f"{sorted(k for k in record if k != 'step')}")
    if self.best.offer(step, params, record[metric]):
      return True, f" (new best {metric})"
    return False, f" (best {metric} {self.best.meta['value']:.4f} @ {self.best.meta['step']})"

  def _check(self, step: int, metrics: dict) -> dict:
    """The step's metrics as floats (fetched if still on the device); NonFiniteLossError if one is not finite."""
    return stopping.checked(step, jax.device_get(metrics), self._nan_advice)

  def _nan_advice(self) -> str:
    """What a re-run must change (`stopping.nan_advice`); without a RunDirectory, a checkpoint decides whether
    the run is claimed."""
    last = self.checkpointer.latest_step()
    claim = self.run_directory
    claimed = (claim.committed or bool(claim.resumed)) if claim is not None else last is not None
    return stopping.nan_advice(self.optimizer.learning_rate, self.run_dir, last, claimed)

  def _say(self, message: str) -> None:
    """One line on the terminal (beside the progress bar); a log line when the bar is off."""
    if self.config.progress_bar and jax.process_index() == 0:
      tqdm.write(message, file=sys.stderr)
    else:
      logging.info(message)

  def _write(self, step: int, record: dict, prefix: str) -> None:
    if jax.process_index() != 0:
      return
    if self._writer is None:
      self._writer = writers.make_writers(self.run_dir, self.config.tensorboard, resume_step=self._resume_step)
    self._writer.write_scalars(step, {f"{prefix}/{k}": val for k, val in record.items() if k != "step"})
    logging.debug("%s step %d: %s", prefix, step, {k: round(val, 5) for k, val in record.items() if k != "step"})

  def _sync_metrics(self) -> None:
    if self._writer is not None:
      self._writer.flush()

  def _close_writer(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None

  def _stored_summary(self) -> Optional[dict]:
    path = os.path.join(self.run_dir, SUMMARY)
    if not fs.exists(path):
      return None
    return json.loads(fs.read_text(path))

  def _summary(self, progress: Progress) -> dict:
    """The whole run's: a resumed run's history holds the logged steps before it resumed (metrics.jsonl)."""
    history = progress.earlier + progress.history
    losses = [h["loss"] for h in history if "loss" in h]
    summary = {
        "train_steps": self.config.train_steps, "resumed_from_step": progress.start,
        "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None,
        "history": history, "eval": progress.evals, "devices": jax.device_count(),
        "mesh": dict(self.mesh.shape), "checkpoints": self.checkpointer.all_steps(),
    }
    if self.best is not None:
      summary["best"] = self.best.meta
    if self.config.plateau is not None:
      summary["plateau"] = dataclasses.asdict(self.plateau)
      if self.plateau.stopped:
        summary["stopped_at"] = progress.history[-1]["step"] if progress.history else progress.start
    if jax.process_index() == 0:
      atomic.write_json(os.path.join(self.run_dir, SUMMARY), summary)
    return summary

  def close(self) -> None:
    """Wait for and close the checkpoint managers and the metric writers."""
    self._close_writer()
    self.checkpointer.close()
    if self.best is not None:
      self.best.close()
