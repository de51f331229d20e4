"""VECO: one Transformer stack that is both an encoder and a "virtual decoder".

Each `VecoLayer` holds a SelfAttention, a CrossAttention and a FeedForward
sub-layer (post-LN bricks from `layers.py`). The same SelfAttention and
FeedForward parameters serve two call paths of `VecoNetwork`:

* `encode` (the IS-MLM / NLU path): bidirectional self-attention + FFN, no
  cross-attention — exactly `TransformerEncoder`;
* `decode` (the CS-MLM path): *causal* self-attention (same module, same
  parameters), cross-attention to `memory` (final encoder states of the
  other segment), FFN.

Parameter tree (a superset of `TransformerEncoder`'s, unrolled layers only):

    embeddings/{word,position,token_type[,language]}_embeddings/embedding, layer_norm
    encoder/layers_{i}/self_attention/{attention/{query,key,value,out}, layer_norm}
    encoder/layers_{i}/cross_attention/{attention/{query,key,value,out}, layer_norm}
    encoder/layers_{i}/feed_forward/{intermediate,output,layer_norm}
    pooler/dense
    mlm_head/{dense,layer_norm,bias[,decoder]}   (decoder: tie_word_embeddings=False)

Dropping every `cross_attention` subtree gives a `TransformerEncoder` tree
(NLU fine-tuning). `init` must go through `init_all` (or a caller that uses
both paths and the pooler) to create the cross-attention and pooler params.
`scan_layers=True` is not supported (raises).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax import errors
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import EncoderOutput
from xtreme_jax.networks.layers import (
  CrossAttention,
  Embeddings,
  FeedForward,
  MlmHead,
  Pooler,
  SelfAttention,
)

Array = jax.Array


class VecoLayer(nn.Module):
  """SelfAttention (optionally causal) -> [CrossAttention to memory] -> FeedForward.

  Also the seq2seq decoder's layer (`networks/seq2seq.py`); `decode=True`
  gives its attention sub-layers their incremental-decoding caches.
  """

  config: TransformerConfig
  deterministic: bool = True
  decode: bool = False

  def setup(self):
    self.self_attention = SelfAttention(self.config, self.deterministic, self.decode)
    self.cross_attention = CrossAttention(self.config, self.deterministic, self.decode)
    self.feed_forward = FeedForward(self.config, self.deterministic)

  def __call__(self, x: Array, input_mask: Array, memory: Array | None = None,
               memory_mask: Array | None = None, causal: bool = False) -> Array:
    x = self.self_attention(x, input_mask, causal=causal)
    if memory is not None:
      x = self.cross_attention(x, input_mask, memory.astype(x.dtype), memory_mask)
    return self.feed_forward(x)


class VecoStack(nn.Module):
  """`num_layers` VecoLayers named `layers_{i}` (one parameter copy each); also the seq2seq decoder."""

  config: TransformerConfig
  deterministic: bool = True
  decode: bool = False

  def setup(self):
    cfg = self.config
    # static_argnums counts `self` as 0: (self, x, mask, memory, memory_mask, causal).
    layer_cls = nn.remat(VecoLayer, static_argnums=(5,)) if cfg.remat and not self.decode else VecoLayer
    # A list attribute named `layers` gives the submodules the names `layers_{i}`.
    self.layers = [layer_cls(cfg, self.deterministic, self.decode) for _ in range(cfg.num_layers)]

  def __call__(self, x: Array, input_mask: Array, memory: Array | None = None,
               memory_mask: Array | None = None, causal: bool = False, return_all: bool = False):
    states = []
    for layer in self.layers:
      x = layer(x, input_mask, memory, memory_mask, causal)
      states.append(x)
    return x, (jnp.stack(states) if return_all else None)


class VecoNetwork(nn.Module):
  """Embeddings -> VecoStack -> (Pooler | MLM head), with `encode` and `decode` paths."""

  config: TransformerConfig
  deterministic: bool = True

  def setup(self):
    if self.config.scan_layers:
      raise errors.ConfigError("VecoNetwork supports unrolled layers only: set scan_layers=False")
    self.embeddings = Embeddings(self.config)
    self.encoder = VecoStack(self.config, self.deterministic)
    self.pooler = Pooler(self.config)
    self.mlm_head = MlmHead(self.config)

  def _embed(self, input_ids, input_mask, token_type_ids, positions, language_ids=None):
    return self.embeddings(input_ids, input_mask, token_type_ids, positions, deterministic=self.deterministic,
                           language_ids=language_ids)

  def encode(self, input_ids: Array, input_mask: Array, token_type_ids: Array | None = None,
             positions: Array | None = None, language_ids: Array | None = None) -> Array:
    """Final states (batch, length, embed) of the bidirectional encoder (no cross-attention)."""
    x = self._embed(input_ids, input_mask, token_type_ids, positions, language_ids)
    return self.encoder(x, input_mask)[0]

  def decode(self, input_ids: Array, input_mask: Array, memory: Array, memory_mask: Array,
             token_type_ids: Array | None = None, positions: Array | None = None,
             language_ids: Array | None = None) -> Array:
    """Final states of the virtual decoder: causal self-attention, cross-attention to `memory`, FFN.

    `memory` is used as given: callers that want CS-MLM's detached encoder
    states pass `jax.lax.stop_gradient(encode(...))`.
    """
    x = self._embed(input_ids, input_mask, token_type_ids, positions, language_ids)
    return self.encoder(x, input_mask, memory, memory_mask, causal=True)[0]

  def __call__(self, input_ids: Array, input_mask: Array, token_type_ids: Array | None = None,
               positions: Array | None = None, return_all: bool = False) -> EncoderOutput:
    """The encoder path with `TransformerEncoder`'s signature and output."""
    emb = self._embed(input_ids, input_mask, token_type_ids, positions)
    seq, all_layers = self.encoder(emb, input_mask, return_all=return_all)
    return EncoderOutput(seq, self.pooler(seq), all_layers, emb if return_all else None)

  def pool(self, sequence: Array) -> Array:
    return self.pooler(sequence)

  def mlm_logits(self, sequence: Array) -> Array:
    """Vocabulary logits (float32) for every position of `sequence`."""
    return self.mlm_head(sequence, self.embeddings)

  def init_all(self, input_ids: Array, input_mask: Array):
    """Touches every sub-module (both paths) so `init` creates the full parameter tree."""
    langs = jnp.zeros_like(input_ids) if self.config.num_languages else None
    emb = self._embed(input_ids, input_mask, None, None, langs)
    seq = self.encoder(emb, input_mask)[0]
    out = EncoderOutput(seq, self.pooler(seq), None, None)
    dec = self.decode(input_ids, input_mask, out.sequence, input_mask, language_ids=langs)
    return self.mlm_logits(out.sequence), self.mlm_logits(dec), out.pooled


def drop_cross_attention(params: dict) -> dict:
  """VECO parameters -> a `TransformerEncoder` tree (NLU fine-tuning assembly).

  Works on a plain (unboxed or boxed) dict tree; leaves are not copied.
  """
  params = dict(params)
  enc = {}
  for name, layer in params["encoder"].items():
    enc[name] = {k: v for k, v in layer.items() if k != "cross_attention"} if name.startswith("layers_") else layer
  params["encoder"] = enc
  return params
