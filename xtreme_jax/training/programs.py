"""The compiled programs of a training configuration: optimizer, shardings and the jitted init, train, eval and
predict steps of one (model, optimizer structure, mesh, batch shape), built once from `jax.eval_shape` shapes
(nothing is initialised or compiled until a step runs) and shared by every `Trainer` of that configuration."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import flax.linen as nn
import jax
import numpy as np

from xtreme_jax.models.base import Model
from xtreme_jax.training import optim, partitioning
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.steps import TrainState, eval_step, predict_step, train_step


# The programs a fresh run runs once (the random initialisation, the optimizer's initial state) are compiled
# without XLA's backend optimisations: their compile time is what the user waits for, not their run time. On
# 2 CPU cores the initialisation of the tiny preset compiles in 1.3 s instead of 7.0 s, mbert_base's in 7.9 s
# instead of 24.4 s (and runs in 11.0 s instead of 2.0 s); the values differ from an optimised build's by at most
# a few float32 ulps (7.5e-9).
ONE_SHOT = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def batch_shapes(batch: dict) -> tuple:
  """The batch's (key, shape, dtype) triples: what the compiled programs depend on."""
  return tuple(sorted((k, np.shape(v), np.dtype(getattr(v, "dtype", None) or np.asarray(v).dtype).str)
                      for k, v in batch.items()))


@dataclasses.dataclass(frozen=True)
class Programs:
  """The optimizer, shardings and jitted functions of one (model, optimizer, mesh, batch shape)."""

  tx: Any
  param_specs: Any
  state_specs: TrainState
  state_shardings: Any
  abstract_state: TrainState  # shapes, dtypes and shardings: what a checkpoint is restored into
  init_params: Callable  # (rng, batch) -> fresh parameters
  start_state: Callable  # (params, rng) -> the step-0 state over `params` (optimizer state built here, once)
  train_step: Callable
  eval_step: Callable
  predict_step: Callable

  @property
  def abstract_params(self) -> Any:
    return self.abstract_state.params


@functools.lru_cache(maxsize=8)
def compiled(model: Model, optimizer: OptimizerConfig, accum_steps: int, mesh, rules: tuple,
             shapes: tuple) -> Programs:
  """Traced and jitted once per configuration: Trainers of equal configurations (a resumed run, the models
  of a benchmark that share an architecture, whatever their number of steps or learning rate: `optimizer` is
  `optim.structure(...)`, the numbers are data) reuse the compiled steps instead of tracing them again.
  Shapes come from `jax.eval_shape`: nothing is initialised or compiled here."""
  batch = {k: jax.ShapeDtypeStruct(shape, np.dtype(dtype)) for k, shape, dtype in shapes}
  boxed = jax.eval_shape(model.init, jax.random.PRNGKey(0), batch)
  tx, _ = optim.build_optimizer(optimizer, optim.hyperparameters(optimizer, 1), nn.unbox(boxed))
  with nn.logical_axis_rules(rules):  # outside the mesh: unboxing must not add constraints here
    param_specs = partitioning.param_specs(boxed, mesh, rules)

  # The seed's two halves: the parameters' initialisation and the steps' dropout (as one program did before).
  def init_params(rng, batch) -> Any:
    return nn.unbox(model.init(jax.random.split(rng)[0], batch))

  def start_state(params, rng) -> TrainState:
    return TrainState(step=jax.numpy.zeros((), jax.numpy.int32), params=params, opt_state=tx.init(params),
                      rng=jax.random.split(rng)[1])

  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    state_shapes = jax.eval_shape(start_state, jax.eval_shape(init_params, jax.random.PRNGKey(0), batch),
                                  jax.random.PRNGKey(0))
  specs = state_specs(state_shapes, param_specs)
  state_shardings = partitioning.to_shardings(specs, mesh)
  abstract_state = jax.tree_util.tree_map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                                          state_shapes, state_shardings)
  data_sharding = partitioning.batch_sharding(mesh, rules)  # a prefix: every feature is split on its batch dim
  step = functools.partial(train_step, model=model, optimizer=optimizer, accum_steps=accum_steps)
  return Programs(
      tx=tx, param_specs=param_specs, state_specs=specs, state_shardings=state_shardings,
      abstract_state=abstract_state,
      init_params=jax.jit(init_params, out_shardings=state_shardings.params, compiler_options=ONE_SHOT),
      start_state=jax.jit(start_state, out_shardings=state_shardings, compiler_options=ONE_SHOT),
      train_step=jax.jit(step, in_shardings=(state_shardings, data_sharding, None),
                         out_shardings=(state_shardings, None), donate_argnums=(0,)),
      eval_step=jax.jit(functools.partial(eval_step, model=model),
                        in_shardings=(state_shardings.params, data_sharding)),
      predict_step=jax.jit(functools.partial(predict_step, model=model),
                           in_shardings=(state_shardings.params, data_sharding)))


def state_specs(shapes: TrainState, param_specs: Any) -> TrainState:
  """Optimizer moments follow their parameters; scalars are replicated."""
  from jax.sharding import PartitionSpec as P
  params_flat = {jax.tree_util.keystr(p): s for p, s in jax.tree_util.tree_leaves_with_path(
      param_specs, is_leaf=lambda x: isinstance(x, P))}
  param_shapes = {jax.tree_util.keystr(p): x.shape for p, x in jax.tree_util.tree_leaves_with_path(shapes.params)}

  def opt_spec(path, leaf):
    # Moments mirror the param tree (under mu / nu, inside multi_transform): take the
    # longest parameter path the state path ends with, so `['bias']` never shadows
    # `['classifier']['bias']`.
    key = jax.tree_util.keystr(path)
    matches = [p for p in params_flat if key.endswith(p) and param_shapes[p] == leaf.shape]
    return params_flat[max(matches, key=len)] if matches else P()

  opt_specs = jax.tree_util.tree_map_with_path(opt_spec, shapes.opt_state)
  return TrainState(step=P(), params=param_specs, opt_state=opt_specs, rng=P())
