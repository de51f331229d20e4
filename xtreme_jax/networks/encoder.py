"""BERT / XLM-R compatible Transformer encoder built from the bricks.

Parameter tree (unrolled; `scan_layers=True` stacks `layers_*` into one
`layers` subtree with a leading `layers` axis):

    embeddings/{word,position,token_type}_embeddings/embedding, layer_norm
    encoder/layers_{i}/self_attention/{attention/{query,key,value,out}, layer_norm}
    encoder/layers_{i}/feed_forward/{intermediate,output,layer_norm}
    pooler/dense
    mlm_head/{dense,layer_norm,bias[,decoder]}   (decoder: tie_word_embeddings=False)
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax

from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.layers import Embeddings, FeedForward, MlmHead, Pooler, SelfAttention

Array = jax.Array


class EncoderLayer(nn.Module):
  """SelfAttention then FeedForward (each post-LN)."""

  config: TransformerConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x: Array, input_mask: Array) -> Array:
    x = SelfAttention(self.config, self.deterministic, name="self_attention")(x, input_mask)
    return FeedForward(self.config, self.deterministic, name="feed_forward")(x)


class Fusion(NamedTuple):
  """Layers `start` .. `stop - 1` attend with `mask` instead of the input mask (FILTER's fusion layers)."""

  mask: Array  # (batch, queries, keys)
  start: int
  stop: int


class _ScannedLayer(nn.Module):
  """`EncoderLayer` in the (carry, x) -> (carry, y) form `nn.scan` needs; with `fused` (scanned per layer)
  it attends with `fusion_mask` where `fused` is true."""

  config: TransformerConfig
  deterministic: bool = True
  collect: bool = False

  @nn.compact
  def __call__(self, x: Array, input_mask: Array, fusion_mask: Optional[Array] = None,
               fused: Optional[Array] = None):
    layer = nn.remat(EncoderLayer) if self.config.remat else EncoderLayer
    mask = input_mask if fused is None else jax.numpy.where(fused, fusion_mask, input_mask)
    x = layer(self.config, self.deterministic, name="layer")(x, mask)
    return x, (x if self.collect else None)


class Encoder(nn.Module):
  """A stack of `num_layers` EncoderLayers, unrolled or scanned.

  Returns the final states and, with `return_all=True`, the output of every
  layer stacked on a leading axis (embeddings excluded). With `fusion`, the
  layers it names attend with its mask (`input_mask` then is a whole
  (batch, queries, keys) mask too).
  """

  config: TransformerConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x: Array, input_mask: Array, return_all: bool = False, fusion: Optional[Fusion] = None):
    cfg = self.config
    if cfg.scan_layers:
      extra, in_axes = (), nn.broadcast
      if fusion is not None:
        layer = jax.numpy.arange(cfg.num_layers)
        extra, in_axes = (fusion.mask, (layer >= fusion.start) & (layer < fusion.stop)), (nn.broadcast,) * 2 + (0,)
      stack = nn.scan(
          _ScannedLayer,
          variable_axes={"params": 0},
          split_rngs={"params": True, "dropout": True},
          in_axes=in_axes,
          length=cfg.num_layers,
          metadata_params={nn.PARTITION_NAME: "layers"},
      )(cfg, self.deterministic, return_all, name="layers")
      x, all_states = stack(x, input_mask, *extra)
      return x, all_states
    layer_cls = nn.remat(EncoderLayer) if cfg.remat else EncoderLayer
    states = []
    for i in range(cfg.num_layers):
      fused = fusion is not None and fusion.start <= i < fusion.stop
      x = layer_cls(cfg, self.deterministic, name=f"layers_{i}")(x, fusion.mask if fused else input_mask)
      states.append(x)
    return x, (jax.numpy.stack(states) if return_all else None)


class EncoderOutput(NamedTuple):
  sequence: Array                      # (batch, length, embed) final states
  pooled: Array                        # (batch, embed) tanh(Dense(CLS))
  all_layers: Optional[Array] = None   # (layers, batch, length, embed)
  embeddings: Optional[Array] = None   # (batch, length, embed) layer-0 input


def batch_inputs(batch: dict) -> dict:
  """`TransformerEncoder`'s inputs from a task batch: ids, mask, and where present token types, positions and
  `language_ids` (one per example, (batch,), given to every token; for a config with language embeddings)."""
  languages = batch.get("language_ids")
  if languages is not None and languages.ndim == 1:
    languages = jax.numpy.broadcast_to(languages[:, None], batch["input_ids"].shape)
  return {"input_ids": batch["input_ids"], "input_mask": batch["input_mask"],
          "token_type_ids": batch.get("token_type_ids"), "positions": batch.get("positions"),
          "language_ids": languages}


class TransformerEncoder(nn.Module):
  """Embeddings -> Encoder -> Pooler (+ MLM head on request)."""

  config: TransformerConfig
  deterministic: bool = True

  def setup(self):
    self.embeddings = Embeddings(self.config)
    self.encoder = Encoder(self.config, self.deterministic)
    self.pooler = Pooler(self.config)
    self.mlm_head = MlmHead(self.config)

  def __call__(self, input_ids: Array, input_mask: Array, token_type_ids: Optional[Array] = None,
               positions: Optional[Array] = None, return_all: bool = False,
               language_ids: Optional[Array] = None) -> EncoderOutput:
    """`language_ids`: per-token language ids, for a config with language embeddings (`num_languages`)."""
    emb = self.embeddings(input_ids, input_mask, token_type_ids, positions, deterministic=self.deterministic,
                          language_ids=language_ids)
    seq, all_layers = self.encoder(emb, input_mask, return_all=return_all)
    return EncoderOutput(seq, self.pooler(seq), all_layers, emb if return_all else None)

  def mlm_logits(self, sequence: Array) -> Array:
    """Vocabulary logits (float32) for every position of `sequence`."""
    return self.mlm_head(sequence, self.embeddings)

  def init_all(self, input_ids, input_mask):
    """Touches every sub-module so `init` creates the full parameter tree."""
    languages = jax.numpy.zeros_like(input_ids) if self.config.num_languages else None
    out = self(input_ids, input_mask, language_ids=languages)
    return self.mlm_logits(out.sequence), out.pooled


def stack_layer_params(encoder_params: dict, num_layers: int) -> dict:
  """Unrolled `layers_{i}` subtrees -> the scanned `layers/layer` layout."""
  layers = [encoder_params[f"layers_{i}"] for i in range(num_layers)]
  stacked = jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *layers)
  rest = {k: v for k, v in encoder_params.items() if not k.startswith("layers_")}
  return {**rest, "layers": {"layer": stacked}}


def unstack_layer_params(encoder_params: dict, num_layers: int) -> dict:
  """The scanned `layers/layer` layout -> unrolled `layers_{i}` subtrees."""
  stacked = encoder_params["layers"]["layer"]
  rest = {k: v for k, v in encoder_params.items() if k != "layers"}
  for i in range(num_layers):
    rest[f"layers_{i}"] = jax.tree_util.tree_map(lambda x, i=i: x[i], stacked)
  return rest
