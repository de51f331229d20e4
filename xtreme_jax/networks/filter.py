"""FILTER's encoder (Fang et al. 2021): a text and its translation, fused in the intermediate layers.

The two sides are embedded separately (positions restart on each side) and
concatenated, source first. The first `local_layers` (m) layers attend within
each side, the next `fusion_layers` (k) over both sides (the joint padding
mask), the remaining depth - m - k within each side again. Every layer is the
encoder's own and shared by both sides: one `Encoder` runs over the
concatenation, and a layer attends "within each side" through a
block-diagonal mask, which is exactly the layer applied to each side alone
(attention is the only place tokens meet; embeddings, feed-forward and
LayerNorm act per token). m = depth, k = 0 is translate-train's encoder run
on each side; m = 0, k = depth the encoder on the concatenated pair.

The parameter tree is `TransformerEncoder`'s (embeddings, encoder, pooler,
mlm_head): every mBERT / XLM-R / tiny checkpoint and preset loads as is, and
the layers shard as the encoder's. A local layer over the concatenation does
twice the attention work of the two sides apart (the feed-forward work is the
same): the price of one fixed-shape stack.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax import errors
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import Encoder, Fusion
from xtreme_jax.networks.layers import Embeddings, MlmHead, Pooler

Array = jax.Array


def check_depths(local_layers: int, fusion_layers: int, num_layers: int) -> None:
  """A one-line ConfigError unless 0 <= m, 0 <= k and m + k <= the backbone's depth."""
  if not (isinstance(local_layers, int) and isinstance(fusion_layers, int) and local_layers >= 0 and
          fusion_layers >= 0 and local_layers + fusion_layers <= num_layers):
    raise errors.ConfigError(f"FILTER local_layers (m) = {local_layers!r}, fusion_layers (k) = {fusion_layers!r}; "
                             f"expected integers m, k >= 0 with m + k <= {num_layers} (the backbone's layers)")


class FilterOutput(NamedTuple):
  source: Array  # (batch, source length, embed) final states of the source (English) side
  target: Array  # (batch, target length, embed) final states of the target side


def side_masks(source_mask: Array, target_mask: Array) -> tuple[Array, Array]:
  """(within-side mask, joint mask), bool (batch, queries, keys) over the concatenation: a query attends to the
  real tokens of its own side, or of both sides."""
  keys = jnp.concatenate([source_mask, target_mask], axis=1).astype(bool)
  side = jnp.concatenate([jnp.zeros(source_mask.shape[1], bool), jnp.ones(target_mask.shape[1], bool)])
  joint = jnp.broadcast_to(keys[:, None, :], keys.shape[:1] + keys.shape[1:] * 2)
  return joint & (side[:, None] == side[None, :])[None], joint


class FilterEncoder(nn.Module):
  """`TransformerEncoder`'s modules in FILTER's arrangement; see the module docstring."""

  config: TransformerConfig
  local_layers: int = 1
  fusion_layers: int = 1
  deterministic: bool = True

  def setup(self):
    check_depths(self.local_layers, self.fusion_layers, self.config.num_layers)
    self.embeddings = Embeddings(self.config)
    self.encoder = Encoder(self.config, self.deterministic)
    self.pooler = Pooler(self.config)
    self.mlm_head = MlmHead(self.config)

  def __call__(self, source_ids: Array, source_mask: Array, target_ids: Array, target_mask: Array,
               source_types: Optional[Array] = None, target_types: Optional[Array] = None) -> FilterOutput:
    embed = lambda ids, mask, types: self.embeddings(ids, mask, types, None, deterministic=self.deterministic)  # noqa: E731
    x = jnp.concatenate([embed(source_ids, source_mask, source_types), embed(target_ids, target_mask, target_types)],
                        axis=1)
    local, joint = side_masks(source_mask, target_mask)
    m, k = self.local_layers, self.fusion_layers
    states, _ = self.encoder(x, local, fusion=Fusion(joint, m, m + k))
    n = source_ids.shape[1]
    return FilterOutput(states[:, :n], states[:, n:])

  def pooled(self, first_tokens: Array) -> Array:
    """The pooler (tanh(Dense)) on (..., embed) first-token states."""
    return self.pooler(first_tokens[:, None])
