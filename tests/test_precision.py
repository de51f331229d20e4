"""Mixed-precision policies (`networks/precision.py`): float32 state, bfloat16 compute, float32 statistics and loss.

Tolerances of the bfloat16 policy against the float32 reference (same parameters and batch, no dropout). bfloat16
keeps 8 significant bits: each rounding errs by up to 2^-8 (0.4%) relative. The loss is a float32 log-softmax of
logits computed in bfloat16: within one rounding, `LOSS_RTOL` = 2^-8. The gradient compounds the roundings of the
forward and backward passes of every layer: the whole gradient (relative L2 error) within `GRAD_RTOL` = 2e-2, a few
roundings, and each parameter's within `LEAF_RTOL` = 1e-1 of its float32 norm, or of 1e-3 of the whole gradient's
if smaller (the attention key bias's gradient is 0 in exact arithmetic, a softmax ignores a shift of its logits:
rounding noise in both). The worst are biases: their gradient is a sum over every token, which XLA accumulates in
bfloat16. Measured here: loss 1e-4, gradient 6e-3, worst parameter 2.4e-2.
"""

import re

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core

from conftest import TINY
from xtreme_jax import errors, main
from xtreme_jax.models.classification import ClassificationModel
from xtreme_jax.models.mlm import MlmModel
from xtreme_jax.models.seq2seq import Seq2SeqModel
from xtreme_jax.models.tagging import TaggingModel
from xtreme_jax.models.veco import VecoModel
from xtreme_jax.networks import precision
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.seq2seq import Seq2SeqConfig
from xtreme_jax.training import optim, steps

TIER = "integration"  # conftest.py: this file's tier

LOSS_RTOL = 2.0 ** -8
GRAD_RTOL = 2e-2
LEAF_RTOL = 1e-1
B, L, P = 4, 12, 3  # batch, sequence length, masked slots
CONFIG = TINY.replace(num_layers=1)  # hidden 32: one layer has every brick (and compiles in half the time of two)


def _batches() -> dict:
  """{kind: (model class and arguments, batch)} for the encoder heads, seq2seq and VECO."""
  r = np.random.default_rng(0)
  ids = lambda n=L: r.integers(5, CONFIG.vocab_size, (B, n)).astype(np.int32)  # noqa: E731
  mask = np.ones((B, L), np.int32)
  mask[1, -4:] = 0
  text = {"input_ids": ids() * mask, "input_mask": mask, "token_type_ids": np.zeros((B, L), np.int32)}
  masked = lambda: {"masked_positions": r.integers(0, L - 4, (B, P)).astype(np.int32),  # noqa: E731
                    "masked_ids": ids(P), "masked_weights": np.ones((B, P), np.float32)}
  veco = {f"{s}_{k}": v for s in "xy" for k, v in {**text, **masked()}.items()}
  return {
      "classification": ((ClassificationModel, {"num_classes": 3}),
                         {**text, "labels": r.integers(0, 3, B).astype(np.int32),
                          "example_weights": np.ones(B, np.float32)}),
      "tagging": ((TaggingModel, {"num_labels": 5}),
                  {**text, "labels": r.integers(0, 5, (B, L)).astype(np.int32), "label_weights": mask.astype(np.float32)}),
      "mlm": ((MlmModel, {}), {**text, **masked()}),
      "seq2seq": ((Seq2SeqModel, {"seq2seq": Seq2SeqConfig(decoder_layers=1)}),
                  {"input_ids": text["input_ids"], "input_mask": mask, "targets": ids(8),
                   "target_mask": mask[:, :8], "decoder_start": np.full(B, 3, np.int32)}),
      "veco": ((VecoModel, {"objectives": ("cs",)}), veco),  # IS-MLM is the MLM model's encoder path
  }


BATCHES = _batches()
KINDS = tuple(BATCHES)


def _model(kind: str, dtype: str):
  (cls, kwargs), batch = BATCHES[kind]
  return cls(CONFIG.replace(dtype=dtype), **kwargs), batch


def _abstract_params(model, batch):
  return jax.eval_shape(lambda: nn.unbox(model.init(jax.random.PRNGKey(0), batch)))


def _params(model, batch) -> dict:
  """Random parameters of `model`'s shapes, without compiling its init: layer-norm scales 1, the rest N(0, 0.02)."""
  r = np.random.default_rng(1)
  return jax.tree_util.tree_map_with_path(
      lambda path, x: jnp.ones(x.shape, x.dtype) if jax.tree_util.keystr(path).endswith("['scale']")
      else jnp.asarray(r.normal(0, 0.02, x.shape), x.dtype), _abstract_params(model, batch))


def _loss(model, batch):
  return lambda params: model.loss_fn(params, batch, None, deterministic=True)


def _floats(tree) -> dict:
  return {jax.tree_util.keystr(k): jnp.dtype(v.dtype) for k, v in jax.tree_util.tree_leaves_with_path(tree)
          if jnp.issubdtype(v.dtype, jnp.floating)}


def _eqns(jaxpr):
  """Every equation of `jaxpr`, nested jaxprs (jit, custom_jvp, scan, remat) included."""
  for eqn in jaxpr.eqns:
    yield eqn
    for value in eqn.params.values():
      for sub in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(sub, (jax_core.Jaxpr, jax_core.ClosedJaxpr)):
          yield from _eqns(getattr(sub, "jaxpr", sub))


def test_policies_are_named_by_the_config_and_float32_is_the_default():
  assert TransformerConfig(vocab_size=8).precision is precision.POLICIES["float32"]
  bf16 = TINY.replace(dtype="bfloat16").precision
  assert (bf16.compute_dtype, bf16.param_dtype, bf16.statistics_dtype, bf16.output_dtype) == (
      jnp.bfloat16, jnp.float32, jnp.float32, jnp.float32)
  assert TINY.replace(dtype="bfloat16").compute_dtype == jnp.bfloat16
  msg = "precision (TransformerConfig.dtype, Gin PRECISION) = 'float16'; expected one of ('float32', 'bfloat16')"
  with pytest.raises(errors.ConfigError, match=re.escape(msg)):
    TINY.replace(dtype="float16")


def test_gin_precision_macro_switches_the_policy_and_keeps_the_default_config():
  try:
    gin.clear_config(clear_constants=True)
    main.parse_gin(["models/tiny.gin"], [])
    default = gin.get_configurable(TransformerConfig)()
    gin.clear_config(clear_constants=True)
    main.parse_gin(["models/tiny.gin"], ["PRECISION='bfloat16'"])
    bf16 = gin.get_configurable(TransformerConfig)()
  finally:
    gin.clear_config(clear_constants=True)
  # The float32 preset builds the config it built before the macro existed (same fields: same fingerprints).
  assert default == TransformerConfig(**{k: v for k, v in default.to_dict().items() if k != "dtype"})
  assert default.dtype == "float32" and bf16 == default.replace(dtype="bfloat16")


@pytest.mark.parametrize("kind", KINDS)
def test_bfloat16_train_step_keeps_params_optimizer_state_and_metrics_float32(kind):
  """The state and metrics of a train step (traced abstractly: dtypes only) in the bfloat16 policy."""
  model, batch = _model(kind, "bfloat16")
  config = optim.OptimizerConfig()
  params = _abstract_params(model, batch)
  tx, _ = optim.build_optimizer(config, optim.hyperparameters(config, 10), params)
  state = steps.TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=jax.eval_shape(tx.init, params),
                           rng=jax.random.PRNGKey(0))
  new, metrics = jax.eval_shape(
      lambda s: steps.train_step(s, batch, optim.hyperparameters(config, 10), model=model, optimizer=config), state)
  for tree in (params, new.params, new.opt_state, metrics):
    floats = _floats(tree)
    assert floats and set(floats.values()) == {jnp.dtype(jnp.float32)}, {k: v for k, v in floats.items()
                                                                         if v != jnp.float32}
  assert len(_floats(new.opt_state)) >= 2 * len(_floats(params))  # Adam's two moments per parameter


@pytest.fixture(scope="module", params=KINDS)
def runs(request) -> dict:
  """{policy: (loss, metric sums, gradient)} of one model, same parameters (one compiled program for both)."""
  params = _params(*_model(request.param, "float32"))
  policies = ("float32", "bfloat16")
  grad_fns = [jax.value_and_grad(_loss(*_model(request.param, dtype)), has_aux=True) for dtype in policies]
  results = jax.jit(lambda p: [fn(p) for fn in grad_fns])(params)
  return {dtype: (loss, sums, grads) for dtype, ((loss, sums), grads) in zip(policies, results)}


def test_bfloat16_loss_and_gradients_match_float32(runs):
  loss32, _, grads32 = runs["float32"]
  loss16, sums16, grads16 = runs["bfloat16"]
  assert loss16.dtype == jnp.float32 and set(_floats(sums16).values()) == {jnp.dtype(jnp.float32)}
  assert set(_floats(grads16).values()) == {jnp.dtype(jnp.float32)}
  assert abs(loss16 - loss32) <= LOSS_RTOL * abs(loss32), (loss16, loss32)
  flat32, flat16 = (np.concatenate([np.ravel(g) for g in jax.tree_util.tree_leaves(t)]) for t in (grads32, grads16))
  assert np.linalg.norm(flat16 - flat32) <= GRAD_RTOL * np.linalg.norm(flat32)
  floor = 1e-3 * np.linalg.norm(flat32)
  for (path, g32), g16 in zip(jax.tree_util.tree_leaves_with_path(grads32), jax.tree_util.tree_leaves(grads16)):
    assert np.linalg.norm(g16 - g32) <= LEAF_RTOL * max(np.linalg.norm(g32), floor), jax.tree_util.keystr(path)


@pytest.mark.parametrize("kind", KINDS)
def test_bfloat16_computes_the_backbone_in_bfloat16_and_statistics_in_float32(kind):
  """The forward pass and loss, read from its jaxpr: every matrix product of the backbone takes bfloat16
  operands; every reduction (layer norm's mean and variance, the softmax's max and sum, the log-softmax, the loss and
  metric sums) and every exp / log / rsqrt (softmax, log-softmax, layer norm) runs in float32."""
  model, batch = _model(kind, "bfloat16")
  jaxpr = jax.make_jaxpr(_loss(model, batch))(_abstract_params(model, batch)).jaxpr
  seen = {"layer_norm": 0, "attention": 0}
  for eqn in _eqns(jaxpr):
    name, where = eqn.primitive.name, str(eqn.source_info.name_stack)
    dtypes = {str(v.aval.dtype) for v in eqn.invars if hasattr(v.aval, "dtype")}
    if name == "dot_general" and "backbone/" in where:
      assert dtypes == {"bfloat16"}, where
    if name in ("reduce_sum", "reduce_max", "reduce_min", "argmax", "exp", "log", "rsqrt") and dtypes - {"int32"}:
      assert dtypes == {"float32"}, (name, where)
      seen.update({k: seen[k] + 1 for k in seen if k in where})
  assert seen["layer_norm"] and seen["attention"], seen


@pytest.mark.parametrize("kind", KINDS)
def test_float32_policy_computes_everything_in_float32(kind):
  """No behaviour change: the float32 policy's forward and backward passes hold no other floating dtype (so no cast
  the policy could have added): the float32 program the code ran before the policies existed."""
  model, batch = _model(kind, "float32")
  jaxpr = jax.make_jaxpr(jax.value_and_grad(_loss(model, batch), has_aux=True))(_abstract_params(model, batch)).jaxpr
  dtypes = {str(v.aval.dtype) for eqn in _eqns(jaxpr) for v in (*eqn.invars, *eqn.outvars) if hasattr(v.aval, "dtype")}
  assert {d for d in dtypes if "float" in d} == {"float32"}, dtypes
