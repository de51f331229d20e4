"""Train state and the pure train / eval step functions.

The step RNG is `fold_in(state.rng, state.step)`, so a resumed run draws the
same dropout masks as an uninterrupted one. Gradient accumulation splits the
batch into `accum_steps` micro-batches inside the step (`lax.scan`) and
normalises by the total weight, so the update equals the full-batch update.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from xtreme_jax.models.base import Model
from xtreme_jax.training.optim import OptimizerConfig, build_optimizer


class TrainState(flax.struct.PyTreeNode):
  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array


def _tree_add(a, b):
  return jax.tree_util.tree_map(jnp.add, a, b)


def _split_micro(batch: dict, accum_steps: int) -> dict:
  def split(x):
    if x.shape[0] % accum_steps:
      raise ValueError(f"batch of {x.shape[0]} is not divisible into {accum_steps} micro-batches")
    return x.reshape((accum_steps, x.shape[0] // accum_steps) + x.shape[1:])
  return jax.tree_util.tree_map(split, batch)


def per_token_means(sums: dict) -> dict:
  """Each metric sum divided by its weight: `<name>_weight` for `<name>_*` if present, else `weight`."""
  out = {}
  for key, value in sums.items():
    if key == "weight" or key.endswith("_weight"):
      continue
    weight = sums.get(key.rsplit("_", 1)[0] + "_weight", sums["weight"])
    out[key] = value / jnp.maximum(weight, 1e-8)
  return out


def train_step(state: TrainState, batch: dict, hyperparameters: dict, *, model: Model, optimizer: OptimizerConfig,
               accum_steps: int = 1) -> tuple[TrainState, dict]:
  """One optimizer update; returns the new state and per-step metrics.

  `optimizer` gives the optimizer's structure (static), `hyperparameters`
  (`optim.hyperparameters`) its numbers (data): one compiled step serves
  every learning rate, schedule length and weight decay.
  """
  tx, schedule = build_optimizer(optimizer, hyperparameters, state.params)
  rng = jax.random.fold_in(state.rng, state.step)
  grad_fn = jax.value_and_grad(model.loss_fn, has_aux=True)

  def micro(carry, xs):
    i, mb = xs
    (_, sums), grads = grad_fn(state.params, mb, jax.random.fold_in(rng, i))
    return _tree_add(carry, (grads, sums)), None

  if accum_steps == 1:
    (_, sums), grads = grad_fn(state.params, batch, rng)
  else:
    micro_batches = _split_micro(batch, accum_steps)
    zero = jax.eval_shape(lambda: grad_fn(state.params, jax.tree_util.tree_map(lambda x: x[0], micro_batches), rng))
    zero = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), (zero[1], zero[0][1]))
    (grads, sums), _ = jax.lax.scan(micro, zero, (jnp.arange(accum_steps), micro_batches))
  weight = jnp.maximum(sums["weight"], 1e-8)
  grads = jax.tree_util.tree_map(lambda g: g / weight, grads)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = per_token_means(sums)
  metrics.update(weight=sums["weight"], grad_norm=optax.tree.norm(grads), update_norm=optax.tree.norm(updates),
                 learning_rate=schedule(state.step))
  return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics


def eval_step(params: Any, batch: dict, *, model: Model) -> dict:
  """Metric *sums* (and 'weight') of one batch, no dropout."""
  _, sums = model.loss_fn(params, batch, None, deterministic=True)
  return sums


def predict_step(params: Any, batch: dict, *, model: Model) -> Any:
  """The model's predictions (e.g. logits) for one batch, no dropout."""
  return model.predict_batch(params, batch)
