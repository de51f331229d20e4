"""AdamW with linear warmup + linear decay, decay masks, clipping, freezing.

The optimizer's structure (`structure(config)`) and its numbers
(`hyperparameters(config, steps)`) are kept apart: the compiled train step
depends on the first only and takes the numbers as data.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtreme_jax import errors
from xtreme_jax.training import validation as v

# Settings a resumed run may change (RESUME_OVERRIDES): they keep the optimizer state's structure.
RESUMABLE = ("learning_rate", "warmup_ratio", "warmup_steps", "weight_decay", "b1", "b2", "eps", "max_grad_norm",
             "schedule")
SCHEDULES = ("linear", "constant")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Optimizer hyper-parameters (defaults: the mBERT fine-tuning recipe).

  `freeze` is a regex matched against '/'-joined parameter paths such as
  `encoder/layers_3/feed_forward/output/kernel`; matching parameters get
  zero updates (`freeze_bottom(n)` builds the mBERT-paper pattern).

  `schedule`: after the warm-up, "linear" decays the rate to 0 at the last
  step (BERT's), "constant" keeps it (the feature-based recipe, whose rate
  only falls on dev plateaus: `trainer.PlateauSchedule`).

  Two-stage training (VECO's warm start): for the first `first_stage_steps`
  steps only parameters matching `first_stage_trains` (e.g.
  `"cross_attention/"`) are updated; the others join afterwards, their Adam
  moments and learning-rate schedule starting when they join. Each group clips
  its own gradient norm.
  """

  learning_rate: float = 2e-5
  warmup_ratio: float = 0.1
  warmup_steps: Optional[int] = None  # overrides warmup_ratio when set
  weight_decay: float = 0.01
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  max_grad_norm: Optional[float] = 1.0
  freeze: Optional[str] = None
  first_stage_steps: int = 0
  first_stage_trains: Optional[str] = None
  schedule: str = "linear"

  def __post_init__(self):
    v.require(self, "learning_rate", v.positive, "a number > 0")
    v.require(self, "warmup_ratio", lambda x: v.is_number(x) and 0 <= x <= 1, "a number in [0, 1]")
    v.require(self, "warmup_steps", v.optional(v.non_negative_int), "None or an integer >= 0")
    v.require(self, "weight_decay", v.non_negative, "a number >= 0")
    for name in ("b1", "b2"):
      v.require(self, name, lambda x: v.is_number(x) and 0 <= x < 1, "a number in [0, 1)")
    v.require(self, "eps", v.non_negative, "a number >= 0")
    v.require(self, "max_grad_norm", v.optional(v.positive), "None or a number > 0")
    v.require(self, "first_stage_steps", v.non_negative_int, "an integer >= 0")
    v.require(self, "schedule", lambda x: x in SCHEDULES, f"one of {SCHEDULES}")
    for name in ("freeze", "first_stage_trains"):
      v.require(self, name, v.optional(_is_regex), "None or a regular expression")
    if self.first_stage_steps and not self.first_stage_trains:
      raise errors.ConfigError(f"OptimizerConfig.first_stage_steps = {self.first_stage_steps} but first_stage_trains "
                               "(a parameter regex) is not set")

  def with_overrides(self, changes: dict) -> "OptimizerConfig":
    """This config with `changes` applied; only RESUMABLE keys (the optimizer state keeps its structure)."""
    wrong = sorted(k for k in changes if k not in RESUMABLE)
    if wrong:
      raise errors.ConfigError(f"RESUME_OVERRIDES keys {wrong} cannot change when resuming; allowed: {list(RESUMABLE)}")
    if "max_grad_norm" in changes and (changes["max_grad_norm"] is None) != (self.max_grad_norm is None):
      raise errors.ConfigError("RESUME_OVERRIDES cannot switch max_grad_norm between None and a number (the "
                               "optimizer state would change its structure); change its value instead")
    return dataclasses.replace(self, **changes)


def _is_regex(value) -> bool:
  if not isinstance(value, str):
    return False
  try:
    re.compile(value)
  except re.error:
    return False
  return True


def freeze_bottom(num_layers: Optional[int]) -> Optional[str]:
  """Regex freezing the bottom `num_layers` layers in the mBERT paper's numbering (layer 0 the embeddings, n
  included): the embeddings and encoder layers 0..n-1. None: nothing frozen (Gin `FREEZE_BOTTOM`)."""
  if num_layers is None:
    return None
  if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
    raise errors.ConfigError(f"FREEZE_BOTTOM = {num_layers!r}; expected None (fine-tune everything) or a layer "
                             "number >= 0 (0: the embeddings)")
  layers = "|".join(str(i) for i in range(num_layers))
  return rf"(^|/)(embeddings|encoder/layers_({layers}))/" if num_layers else r"(^|/)embeddings/"


def _check_frozen_layers(pattern: str, paths: list[str]) -> None:
  """Refuses a pattern naming encoder layers the model (its parameter `paths`) does not have."""
  check_frozen_depth(pattern, len({m.group(1) for p in paths if (m := re.search(r"(?:^|/)encoder/layers_(\d+)/", p))}))


def check_frozen_depth(pattern: Optional[str], depth: int) -> None:
  """Refuses a freeze pattern naming encoder layers beyond `depth` (`freeze_bottom` beyond the model)."""
  named = [int(i) for group in re.findall(r"layers_\(([\d|]+)\)", pattern or "") for i in group.split("|")]
  if named and max(named) >= depth:
    raise errors.ConfigError(f"freezing the bottom {max(named) + 1} layers, but the encoder has {depth}: "
                             f"FREEZE_BOTTOM must be 0..{depth} (0: the embeddings only)")


def param_path(path) -> str:
  return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)


def _warmup(config: OptimizerConfig, total_steps: int) -> int:
  warmup = config.warmup_steps if config.warmup_steps is not None else int(config.warmup_ratio * total_steps)
  return max(0, min(warmup, total_steps))


def hyperparameters(config: OptimizerConfig, total_steps: int) -> dict:
  """The numbers of the optimizer and its schedules, as float32 scalars.

  The train step takes them as data, not as compiled-in constants, so runs
  that differ only in learning rate, warm-up, weight decay, Adam's constants,
  the clipping norm or the number of steps share one compiled step.
  """
  later_total = max(1, total_steps - config.first_stage_steps)
  numbers = {"learning_rate": config.learning_rate, "weight_decay": config.weight_decay, "b1": config.b1,
             "b2": config.b2, "eps": config.eps, "max_grad_norm": config.max_grad_norm or 0.0,
             "total_steps": total_steps, "warmup_steps": _warmup(config, total_steps),
             "first_stage_steps": config.first_stage_steps,
             "later_total_steps": later_total, "later_warmup_steps": _warmup(config, later_total),
             "constant": config.schedule == "constant"}
  return {k: np.float32(x) for k, x in numbers.items()}


def structure(config: OptimizerConfig) -> OptimizerConfig:
  """`config` with its numbers replaced by fixed ones: what the optimizer's structure (and so its compiled
  step) depends on: clipping on or off, freezing, the two stages and which parameters train first."""
  return dataclasses.replace(config, learning_rate=1.0, warmup_ratio=0.0, warmup_steps=None, weight_decay=0.0,
                             b1=0.9, b2=0.999, eps=1e-8, max_grad_norm=None if config.max_grad_norm is None else 1.0,
                             first_stage_steps=min(config.first_stage_steps, 1), schedule="linear")


def warmup_linear_decay(peak, warmup, total, constant=0.0) -> optax.Schedule:
  """0 -> `peak` over `warmup` steps, then `peak` -> 0 at `total`, or (`constant` nonzero) `peak` to the end
  (numbers may be traced scalars)."""

  def schedule(count):
    count = jnp.asarray(count, jnp.float32)
    rising = peak * count / jnp.maximum(warmup, 1.0)
    falling = peak * jnp.maximum(total - count, 0.0) / jnp.maximum(total - warmup, 1.0)
    return jnp.where(count < warmup, rising, jnp.where(constant > 0, peak, falling))

  return schedule


def _decays(path_str: str) -> bool:
  """BERT's rule: no weight decay on biases and LayerNorm parameters."""
  leaf = path_str.rsplit("/", 1)[-1]
  return leaf != "bias" and "layer_norm" not in path_str


def make_optimizer(config: OptimizerConfig, total_steps: int, params: Any) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """The optax chain and its learning-rate schedule for `params`' structure (numbers as constants)."""
  return build_optimizer(config, hyperparameters(config, total_steps), params)


def build_optimizer(config: OptimizerConfig, numbers: dict, params: Any) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """The optax chain of `config`'s structure with `numbers` (`hyperparameters`, possibly traced)."""
  h = numbers
  schedule = warmup_linear_decay(h["learning_rate"], h["warmup_steps"], h["total_steps"], h["constant"])
  paths = jax.tree_util.tree_map_with_path(lambda p, _: param_path(p), params)
  decay_mask = jax.tree_util.tree_map(_decays, paths)

  def adamw(sched):
    clip = [optax.clip_by_global_norm(h["max_grad_norm"])] if config.max_grad_norm is not None else []
    return optax.chain(*clip, optax.adamw(sched, b1=h["b1"], b2=h["b2"], eps=h["eps"],
                                          weight_decay=h["weight_decay"], mask=decay_mask))

  tx = adamw(schedule)
  labels = jax.tree_util.tree_map(lambda _: "train", paths)
  transforms = {"train": tx}
  if config.first_stage_steps:
    first = re.compile(config.first_stage_trains)
    labels = jax.tree_util.tree_map(lambda p: "train" if first.search(p) else "later", paths)
    if "train" not in jax.tree_util.tree_leaves(labels):
      raise errors.ConfigError(f"OptimizerConfig.first_stage_trains = {config.first_stage_trains!r} matches no "
                               "parameter")
    # The late group warms up and decays over the steps that remain when it joins.
    later = warmup_linear_decay(h["learning_rate"], h["later_warmup_steps"], h["later_total_steps"], h["constant"])
    transforms["later"] = after_steps(adamw(later), h["first_stage_steps"])
  if config.freeze:
    pattern = re.compile(config.freeze)
    leaves = jax.tree_util.tree_leaves(paths)
    if any("layers/layer/" in p for p in leaves) and re.search(r"layers_\(", config.freeze):
      raise errors.ConfigError("freezing bottom layers of a scanned layer stack is not supported; set "
                               f"scan_layers=False to freeze {config.freeze!r}")
    _check_frozen_layers(config.freeze, leaves)
    if any("layers/layer/" in p and pattern.search(p) for p in leaves):
      raise errors.ConfigError("freezing part of a scanned layer stack is not supported; set scan_layers=False "
                               f"to freeze {config.freeze!r}")
    labels = jax.tree_util.tree_map(lambda p, lab: "frozen" if pattern.search(p) else lab, paths, labels)
    if "frozen" not in jax.tree_util.tree_leaves(labels):
      raise errors.ConfigError(f"OptimizerConfig.freeze = {config.freeze!r} matches no parameter")
    transforms["frozen"] = optax.set_to_zero()
  if len(transforms) > 1:
    tx = optax.multi_transform(transforms, labels)
  return tx, schedule


def after_steps(inner: optax.GradientTransformation, start: int) -> optax.GradientTransformation:
  """`inner`, but zero updates (and a frozen inner state) for the first `start` updates."""

  def init(params):
    return jnp.zeros([], jnp.int32), inner.init(params)

  def update(updates, state, params=None):
    count, inner_state = state
    new_updates, new_state = inner.update(updates, inner_state, params)
    active = count >= start
    new_updates = jax.tree_util.tree_map(lambda u: jnp.where(active, u, jnp.zeros_like(u)), new_updates)
    new_state = jax.tree_util.tree_map(lambda n, o: jnp.where(active, n, o), new_state, inner_state)
    return new_updates, (count + 1, new_state)

  return optax.GradientTransformation(init, update)
