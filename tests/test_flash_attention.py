"""networks/flash_attention.py: the fused attention kernel with dropout, in Pallas' interpreter on CPU, against the
dense function with the same masks; its masks' statistics; its lowering to Triton for a GPU; its place in the
model (`attention_implementation='flash'`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from xtreme_jax.networks import flash_attention as fa
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.networks.layers import attention_implementation

TIER = "integration"  # conftest.py: this file's tier


def _inputs(batch, queries, keys, heads, dim, seed=0):
  rng = np.random.default_rng(seed)
  q, k, v, g = (jnp.asarray(rng.standard_normal((batch, n, heads, dim)), jnp.float32)
                for n in (queries, keys, keys, queries))
  return q, k, v, g


def _grads(fn, q, k, v, g):
  return jax.jit(jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v) * g), argnums=(0, 1, 2)))(q, k, v)


@pytest.mark.parametrize("case", [
    dict(queries=32, keys=32, heads=2, dim=16, lengths=[32, 11], rate=0.25, causal=False),  # padding, 2 key blocks
    dict(queries=20, keys=24, heads=1, dim=12, lengths=[24, 5], rate=0.1, causal=False),  # cross, padded shapes
    dict(queries=32, keys=32, heads=1, dim=16, lengths=[32, 17], rate=0.2, causal=True),
])
def test_kernel_equals_the_dense_function_with_the_same_masks_forward_and_backward(case):
  q, k, v, g = _inputs(2, case["queries"], case["keys"], case["heads"], case["dim"])
  lengths, seed = jnp.asarray(case["lengths"]), jnp.int32(-12345)
  args = dict(seed=seed, rate=case["rate"], causal=case["causal"])
  ours = jax.jit(lambda q, k, v: fa.flash_attention(q, k, v, lengths, block_q=16, block_k=16, **args))
  dense = lambda q, k, v: fa.reference_attention(q, k, v, lengths, **args)  # noqa: E731
  out = ours(q, k, v)
  np.testing.assert_allclose(out, dense(q, k, v), rtol=2e-5, atol=2e-6)
  for a, b in zip(_grads(ours, q, k, v, g), _grads(dense, q, k, v, g)):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
  # The masks' meaning: padded keys change nothing (row 1), and dropout did drop.
  k2, v2 = k.at[1, case["lengths"][1]:].set(7.0), v.at[1, case["lengths"][1]:].set(-7.0)
  np.testing.assert_allclose(ours(q, k2, v2)[1], out[1], rtol=1e-6, atol=1e-6)
  assert not np.allclose(out, fa.reference_attention(q, k, v, lengths, causal=case["causal"]), atol=1e-3)


def test_masks_keep_one_minus_rate_change_with_the_seed_and_not_with_the_block_shape():
  rows = fa.row_hashes(jnp.int32(7), jnp.int32(3), jnp.arange(512))
  for rate in (0.1, 0.5):
    kept = fa.keep_mask(rows, jnp.arange(512), rate)
    assert abs(float(kept.mean()) - (1 - rate)) < 0.005  # 262,144 draws: 5 sigma is 0.003
    assert abs(float(kept[:, ::2].mean()) - float(kept[:, 1::2].mean())) < 0.01  # no stripes along keys
  other = fa.keep_mask(fa.row_hashes(jnp.int32(8), jnp.int32(3), jnp.arange(512)), jnp.arange(512), 0.1)
  assert 0.15 < float(jnp.mean(other != fa.keep_mask(rows, jnp.arange(512), 0.1))) < 0.2  # independent: 2 p (1-p)
  q, k, v, _ = _inputs(1, 32, 32, 1, 16)
  run = lambda bq, bk: fa.flash_attention(q, k, v, jnp.asarray([32]), jnp.int32(5), 0.5, block_q=bq, block_k=bk)  # noqa: E731
  np.testing.assert_allclose(run(16, 16), run(32, 16), rtol=1e-6)
  assert fa.keep_mask(rows, jnp.arange(8), 0.0).all()


def test_kernels_lower_to_valid_triton_modules_for_a_gpu(monkeypatch):
  """The forward and both backward kernels pass Pallas' Triton lowering (what a GPU compiles), from this CPU, and
  each module passes MLIR's verifier (a GPU rejects one that does not: 'scf.for' bounds of two integer types)."""
  from jax._src.pallas.triton import pallas_call_registration as registration
  lower, verified = registration.lowering.lower_jaxpr_to_triton_module, []

  def lower_and_verify(*args, **kwargs):
    result = lower(*args, **kwargs)
    result.module.operation.verify()  # raises on an invalid module
    verified.append(result)
    return result

  monkeypatch.setattr(registration.lowering, "lower_jaxpr_to_triton_module", lower_and_verify)
  shape = jax.ShapeDtypeStruct((2, 128, 2, 64), jnp.bfloat16)

  def step(q, k, v, lengths, seed):
    f = lambda q, k, v: fa.flash_attention(q, k, v, lengths, seed, 0.1, block_q=64, block_k=64,  # noqa: E731
                                           interpret=False)
    return jax.grad(lambda q, k, v: jnp.sum(f(q, k, v).astype(jnp.float32)), argnums=(0, 1, 2))(q, k, v)

  exported = export.export(jax.jit(step), platforms=["cuda"], disabled_checks=[
      export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(
          shape, shape, shape, jax.ShapeDtypeStruct((2,), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32))
  text = exported.mlir_module()
  for kernel in ("flash_attention_forward", "flash_attention_dkdv", "flash_attention_dq"):
    assert f'name = "{kernel}"' in text
  assert len(verified) == 3


def test_the_model_runs_the_kernel_when_configured():
  config = TransformerConfig(vocab_size=32, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=32, max_positions=16,
                             dropout_rate=0.0, attention_dropout_rate=0.1)
  flash = config.replace(attention_implementation="flash")
  assert attention_implementation(flash, deterministic=False) == "flash"
  assert attention_implementation(config, deterministic=False) == "reference"
  ids = jnp.asarray([[5, 6, 7, 8, 9, 10, 11, 12], [5, 6, 7, 0, 0, 0, 0, 0]])
  mask = (ids > 0).astype(jnp.int32)
  params = TransformerEncoder(config).init(jax.random.PRNGKey(0), ids, mask)
  apply = lambda cfg, train, rng: TransformerEncoder(cfg, deterministic=not train).apply(  # noqa: E731
      params, ids, mask, rngs={"dropout": rng} if train else None).sequence
  # Without dropout the kernel computes the reference's function; with it, new masks come with a new RNG.
  np.testing.assert_allclose(apply(flash, False, None), apply(config, False, None), rtol=1e-5, atol=1e-5)
  a, b = (apply(flash, True, jax.random.PRNGKey(s)) for s in (1, 2))
  assert np.isfinite(np.asarray(a)).all() and not np.allclose(a, b, atol=1e-4)
  np.testing.assert_array_equal(a, apply(flash, True, jax.random.PRNGKey(1)))


def test_hash_dropout_keeps_one_minus_rate_scaled_and_the_model_uses_it_when_configured():
  x = jnp.ones((64, 32, 48), jnp.bfloat16)
  y = fa.dropout(jnp.int32(3), x, 0.25)
  kept = np.asarray(y, np.float32) != 0
  assert abs(kept.mean() - 0.75) < 0.01
  np.testing.assert_array_equal(np.asarray(y, np.float32)[kept], np.float32(np.asarray(jnp.bfloat16(1 / 0.75))))
  assert not np.array_equal(kept, np.asarray(fa.dropout(jnp.int32(4), x, 0.25), np.float32) != 0)
  config = TransformerConfig(vocab_size=32, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=32, max_positions=16,
                             dropout_rate=0.3, attention_dropout_rate=0.0)
  hashed = config.replace(dropout_masks="hash")
  ids = jnp.asarray([[5, 6, 7, 8, 9, 10, 11, 12]])
  mask = jnp.ones_like(ids)
  params = TransformerEncoder(config).init(jax.random.PRNGKey(0), ids, mask)
  apply = lambda cfg, train, seed=0: TransformerEncoder(cfg, deterministic=not train).apply(  # noqa: E731
      params, ids, mask, rngs={"dropout": jax.random.PRNGKey(seed)}).sequence
  np.testing.assert_array_equal(apply(hashed, False), apply(config, False))  # inference: no dropout either way
  assert not np.allclose(apply(hashed, True), apply(config, True))  # other masks than flax's
  assert not np.allclose(apply(hashed, True, 1), apply(hashed, True, 2))
