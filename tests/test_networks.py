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
from xtreme_jax.networks.layers import attention_mask, default_positions, max_tokens

IDS = jnp.array([[2, 5, 6, 7, 3, 0], [2, 8, 3, 0, 0, 0]])
MASK = (IDS > 0).astype(jnp.int32)


def init(config):
  return nn.unbox(TransformerEncoder(config).init(jax.random.PRNGKey(0), IDS, MASK,
                                                  method=TransformerEncoder.init_all))["params"]


def test_attention_mask_masks_keys_and_optionally_future():
  m = attention_mask(MASK, MASK)
  assert m.shape == (2, 1, 6, 6)
  np.testing.assert_array_equal(m[1, 0, 0], [1, 1, 1, 0, 0, 0])
  np.testing.assert_array_equal(m[1, 0, 5], [1, 1, 1, 0, 0, 0])  # pad queries still see real keys
  c = attention_mask(MASK, MASK, causal=True)
  np.testing.assert_array_equal(c[0, 0, 2], [1, 1, 1, 0, 0, 0])


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
