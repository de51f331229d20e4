"""Network bricks: masks, bf16 compute, scan == unrolled, logical axis names, the position-table limit."""

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors
from xtreme_jax.networks.encoder import TransformerEncoder, stack_layer_params, unstack_layer_params
from xtreme_jax.networks.layers import (attention_implementation, default_positions, dot_product_attention,
                                        dropout_masks, max_tokens)

TIER = "integration"  # conftest.py: this file's tier

IDS = jnp.array([[2, 5, 6, 7, 3, 0], [2, 8, 3, 0, 0, 0]])
MASK = (IDS > 0).astype(jnp.int32)


def init(config):
  return nn.unbox(TransformerEncoder(config).init(jax.random.PRNGKey(0), IDS, MASK,
                                                  method=TransformerEncoder.init_all))["params"]


def _qkv(q_len, k_len, seed=0):
  r = np.random.default_rng(seed)
  return [jnp.asarray(r.normal(size=(2, n, TINY.num_heads, TINY.head_dim)), jnp.float32) for n in (q_len, k_len, k_len)]


def _attend(impl, q, k, v, key_mask, causal):
  return dot_product_attention(TINY.replace(attention_implementation=impl), q, k, v, key_mask, causal)


@pytest.mark.parametrize("kind", ["padding", "causal", "causal_padding", "cross"])
def test_fused_attention_equals_the_reference_for_every_mask_kind(kind):
  q_len = 4 if kind == "cross" else 6
  q, k, v = _qkv(q_len, 6)
  key_mask = MASK if kind != "causal" else jnp.ones_like(MASK)
  causal = kind.startswith("causal")
  reference = _attend("reference", q, k, v, key_mask, causal)
  np.testing.assert_allclose(_attend("xla", q, k, v, key_mask, causal), reference, rtol=1e-5, atol=1e-6)
  # The masks' meaning: padded keys and (causal) later keys change nothing; padded queries see the real keys.
  k2, v2 = k.at[1, 3:].set(9.0), v.at[1, 3:].set(-9.0)
  np.testing.assert_allclose(_attend("reference", q, k2, v2, MASK, causal)[1], _attend(
      "reference", q, k, v, MASK, causal)[1], rtol=1e-6)
  if causal:
    k3, v3 = k.at[:, 4:].set(5.0), v.at[:, 4:].set(5.0)
    np.testing.assert_allclose(_attend("reference", q, k3, v3, key_mask, True)[:, :4], reference[:, :4], rtol=1e-6)
  if kind == "padding":  # a padded query (row 1, position 5) attends to the three real keys
    weights = jax.nn.softmax(jnp.einsum("hd,khd->hk", q[1, 5], k[1, :3]) / np.sqrt(TINY.head_dim), axis=-1)
    np.testing.assert_allclose(reference[1, 5], jnp.einsum("hk,khd->hd", weights, v[1, :3]), rtol=1e-5)


def test_attention_dropout_runs_flash_or_the_reference_path_and_fused_kernels_otherwise(monkeypatch):
  assert attention_implementation(TINY, deterministic=False) == "reference"  # attention dropout 0.1 in training
  assert attention_implementation(TINY, deterministic=True) == "reference"  # auto on CPU
  no_dropout = TINY.replace(attention_dropout_rate=0.0)
  assert attention_implementation(no_dropout.replace(attention_implementation="xla"), deterministic=False) == "xla"
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  assert attention_implementation(no_dropout.replace(dtype="bfloat16"), deterministic=True) == "cudnn"
  assert attention_implementation(no_dropout, deterministic=True) == "reference"  # cuDNN needs bf16 / fp16
  assert attention_implementation(TINY.replace(dtype="bfloat16"), deterministic=False) == "flash"  # dropout
  assert attention_implementation(TINY.replace(attention_implementation="cudnn"), deterministic=False) == "reference"
  assert dropout_masks(TINY) == "hash" and dropout_masks(TINY.replace(dropout_masks="flax")) == "flax"  # on a GPU
  monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
  assert dropout_masks(TINY) == "flax"  # the numbers of every earlier run
  with pytest.raises(errors.ConfigError, match="attention_implementation='flash2'; expected one of"):
    TINY.replace(attention_implementation="flash2")


def test_positions_bert_and_roberta():
  np.testing.assert_array_equal(default_positions(TINY, MASK)[1], [0, 1, 2, 3, 4, 5])
  roberta = TINY.replace(position_style="roberta", pad_token_id=1)
  np.testing.assert_array_equal(default_positions(roberta, MASK)[1], [2, 3, 4, 1, 1, 1])


def test_every_parameter_has_logical_axes():
  boxed = TransformerEncoder(TINY).init(jax.random.PRNGKey(0), IDS, MASK, method=TransformerEncoder.init_all)
  leaves = jax.tree_util.tree_leaves(boxed["params"], is_leaf=lambda x: isinstance(x, nn.LogicallyPartitioned))
  assert leaves and all(isinstance(x, nn.LogicallyPartitioned) and len(x.names) == x.value.ndim for x in leaves)


def test_scanned_stack_matches_unrolled_and_layouts_round_trip():
  params = init(TINY)
  ref = TransformerEncoder(TINY).apply({"params": params}, IDS, MASK, return_all=True)
  scanned = TINY.replace(scan_layers=True, remat=True)
  stacked = {**params, "encoder": stack_layer_params(params["encoder"], TINY.num_layers)}
  out = TransformerEncoder(scanned).apply({"params": stacked}, IDS, MASK, return_all=True)
  np.testing.assert_allclose(out.sequence, ref.sequence, atol=1e-5)
  np.testing.assert_allclose(out.all_layers, ref.all_layers, atol=1e-5)
  back = unstack_layer_params(stacked["encoder"], TINY.num_layers)
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, back, params["encoder"]))


def test_bfloat16_compute_keeps_float32_params_and_tracks_float32():
  params = init(TINY)
  assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(params))
  ref = TransformerEncoder(TINY).apply({"params": params}, IDS, MASK)
  bf = TransformerEncoder(TINY.replace(dtype="bfloat16")).apply({"params": params}, IDS, MASK)
  assert bf.sequence.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(bf.sequence, np.float32), ref.sequence, atol=0.1)


def test_dropout_only_when_not_deterministic():
  params = init(TINY)
  a = TransformerEncoder(TINY, deterministic=False).apply({"params": params}, IDS, MASK,
                                                          rngs={"dropout": jax.random.PRNGKey(1)})
  b = TransformerEncoder(TINY).apply({"params": params}, IDS, MASK)
  assert not np.allclose(a.sequence, b.sequence)


def _trace(config, length, positions=False):
  """Traces (no compile) init + apply of the encoder on `length` tokens, with explicit positions if asked."""
  ids = jnp.ones((1, length), jnp.int32)
  pos = jnp.zeros_like(ids) if positions else None
  model = TransformerEncoder(config)
  return jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), ids, ids, None, pos))


@pytest.mark.parametrize("style,pad,limit,start", [("absolute", 0, 24, ""),
                                                   ("roberta", 1, 22, " (RoBERTa positions start at 2)")])
@pytest.mark.parametrize("explicit", [False, True])
def test_sequence_longer_than_the_position_table_is_a_clear_error(style, pad, limit, start, explicit):
  config = TINY.replace(position_style=style, pad_token_id=pad)  # max_positions=24
  assert max_tokens(config) == limit
  _trace(config, limit, explicit)  # the longest sequence that fits
  if explicit:
    # Explicit positions restart per segment (a TLM pair): the sequence may be longer than the table, and
    # the position values are data (VECO checks its segments' lengths, see test_veco.py).
    _trace(config, 2 * limit, explicit)
    return
  msg = (f"sequence length {limit + 1} exceeds the position table: max_positions=24 allows {limit} tokens{start}; "
         "lower SEQ_LEN / the reader's max length")
  with pytest.raises(errors.ConfigError, match=re.escape(msg)):
    _trace(config, limit + 1, explicit)


def test_embeddings_gather_float32_rows_and_scatter_float32_gradients():
  """bf16 compute: the rows are gathered from the float32 table and cast after (the gradient's scatter-add runs
  in float32); float32 compute is unchanged; the tied output projection multiplies in the compute dtype."""
  from xtreme_jax.networks.layers import Embeddings
  bf16 = TINY.replace(dtype="bfloat16", type_vocab_size=0, dropout_rate=0.0)
  module = Embeddings(bf16)
  params = nn.unbox(module.init(jax.random.PRNGKey(0), IDS, MASK))["params"]
  table = params["word_embeddings"]["embedding"]
  positions = params["position_embeddings"]["embedding"]
  assert table.dtype == jnp.float32
  x32 = table[IDS] + positions[jnp.arange(6)][None]  # summed in float32, then LayerNorm, then the cast
  ln = params["layer_norm"]
  mean, var = x32.mean(-1, keepdims=True), x32.var(-1, keepdims=True)
  expected = ((x32 - mean) / jnp.sqrt(var + bf16.layer_norm_eps) * ln["scale"] + ln["bias"]).astype(jnp.bfloat16)
  out = module.apply({"params": params}, IDS, MASK)
  assert out.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(expected, np.float32), atol=1e-2)

  def loss(p):
    return jnp.sum(module.apply({"params": p}, IDS, MASK).astype(jnp.float32))
  jaxpr = str(jax.make_jaxpr(jax.grad(loss))(params))
  scatters = re.findall(r"(\w+)\[[^\]]*\] = scatter-add", jaxpr)
  assert scatters and all(dtype.startswith("f32") for dtype in scatters), scatters
  logits = module.apply({"params": params}, out, method=Embeddings.attend)
  assert logits.dtype == jnp.bfloat16 and logits.shape == (2, 6, TINY.vocab_size)
