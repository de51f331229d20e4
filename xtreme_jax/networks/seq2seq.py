"""An encoder-decoder arranged from the same bricks as the encoders.

* encoder: `Encoder` (the `TransformerEncoder` stack: SelfAttention +
  FeedForward per layer, unrolled or scanned);
* decoder: `VecoStack` of `decoder_layers` `VecoLayer`s (causal SelfAttention,
  CrossAttention to the encoder's final states, FeedForward): VECO's layer,
  with its own parameters;
* one `Embeddings` for both sides (shared source / target vocabulary), or,
  with `separate_decoder_embeddings`, the word (and token-type) tables shared
  and the decoder's own position table and embedding LayerNorm
  (`decoder_embeddings`, fairseq's `TransformerDecoder.embed_positions` /
  `layernorm_embedding` beside the encoder's under `--share-all-embeddings`);
* output: logits against the word embeddings (tied, `tie_output=True`) or a
  separate `output_projection` (hidden, vocab), no bias (fairseq's decoder).

Parameter tree (the layout `veco_assembly.nlg_encoder_decoder` writes):

    embeddings/{word,position[,token_type]}_embeddings/embedding, layer_norm
    [decoder_embeddings/position_embeddings/embedding, layer_norm]  (separate_decoder_embeddings; seq2seq_backbone)
    encoder/layers_{i}/{self_attention,feed_forward}/...    (scan_layers: encoder/layers/layer/...)
    decoder/layers_{j}/{self_attention,cross_attention,feed_forward}/...
    [output_projection/kernel]                              (tie_output=False)

The decoder's positions are explicit (0 at the first decoder input), so a
cached step (`decode=True`, one position per call) embeds exactly as the
full teacher-forced pass does. With `Packing`, a row holds several pairs
(segment ids, positions restarting per pair): every attention is masked to
the query's own pair, so each pair computes what it computes alone. Multilingual decoding starts the decoder with
a target-language tag token (`models/seq2seq.py`), as VECO does.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax import errors
from xtreme_jax.networks import layers
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import Encoder
from xtreme_jax.networks.veco import VecoStack

Array = jax.Array


class Packing(NamedTuple):
  """Several (source, target) pairs packed into each row (token-count batches): per token, its pair's segment
  id (1, 2, ...; 0 = padding) and its position within its own source or target (0 at the first token)."""

  input_segments: Array
  input_positions: Array
  target_segments: Array
  target_positions: Array


def same_segment(query_segments: Array, key_segments: Array) -> Array:
  """(batch, queries, keys) int32 mask: 1 where the key is a real token of the query's segment."""
  return ((query_segments[:, :, None] == key_segments[:, None, :]) & (key_segments[:, None, :] > 0)).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class Seq2SeqConfig:
  """What the decoder adds to the encoder's `TransformerConfig`.

  `scale_decoder_embeddings` / `scale_encoder_embeddings` multiply that side's
  word embeddings by sqrt(hidden) (fairseq's `embed_scale`, on both sides
  unless `--no-scale-embedding`; VECO's released NLG model scales both).
  `separate_decoder_embeddings` gives the decoder its own position table and
  embedding LayerNorm (`decoder_embeddings`; fairseq's encoder and decoder each
  own theirs and share only the token table under `--share-all-embeddings`);
  the assembly starts them as copies of the encoder's. All off by default: one
  `Embeddings`, unscaled (XLM-R-format checkpoints, xDAE / xFNP).
  """

  decoder_layers: int = 6
  tie_output: bool = True
  scale_decoder_embeddings: bool = False
  scale_encoder_embeddings: bool = False
  separate_decoder_embeddings: bool = False

  def __post_init__(self):
    if self.decoder_layers < 1:
      raise errors.ConfigError(f"decoder_layers={self.decoder_layers}; expected >= 1")


class PositionEmbeddings(nn.Module):
  """The decoder's own position table, embedding LayerNorm and dropout (`separate_decoder_embeddings`), named as
  in `layers.Embeddings`; the word and token-type tables stay the shared `Embeddings`'."""

  config: TransformerConfig

  def setup(self):
    cfg = self.config
    self.position_embeddings = nn.Embed(
        cfg.max_positions, cfg.hidden_size, dtype=jnp.float32,
        embedding_init=nn.with_logical_partitioning(nn.initializers.normal(0.02), ("positions", "embed")))
    self.layer_norm = layers.layer_norm(cfg, "layer_norm")
    self.dropout = nn.Dropout(cfg.dropout_rate)


class Seq2SeqNetwork(nn.Module):
  """Embeddings -> Encoder (source); Embeddings -> decoder VecoStack -> vocabulary logits (target)."""

  config: TransformerConfig
  seq2seq: Seq2SeqConfig = Seq2SeqConfig()
  deterministic: bool = True
  decode: bool = False

  def setup(self):
    cfg = self.config
    if cfg.num_languages:
      raise errors.ConfigError("the seq2seq network takes no language embeddings (num_languages=0): the decoder "
                               "starts with a target-language tag instead")
    self.embeddings = layers.Embeddings(cfg)
    if self.seq2seq.separate_decoder_embeddings:
      self.decoder_embeddings = PositionEmbeddings(cfg)
    self.encoder = Encoder(cfg, self.deterministic)
    self.decoder = VecoStack(cfg.replace(num_layers=self.seq2seq.decoder_layers, scan_layers=False),
                             self.deterministic, self.decode)
    if not self.seq2seq.tie_output:
      self.output_projection = nn.Dense(
          cfg.vocab_size, use_bias=False, dtype=cfg.compute_dtype, param_dtype=cfg.precision.param_dtype,
          kernel_init=nn.with_logical_partitioning(nn.initializers.normal(0.02), ("embed", "vocab")))

  def encode(self, input_ids: Array, input_mask: Array, packing: Packing | None = None) -> Array:
    """The encoder's final states (batch, source length, embed); `packing`: several sources per row."""
    scale = self._word_scale(self.seq2seq.scale_encoder_embeddings)
    if packing is None:
      x = self.embeddings(input_ids, input_mask, deterministic=self.deterministic, word_scale=scale)
      return self.encoder(x, input_mask)[0]
    x = self.embeddings(input_ids, input_mask, positions=packing.input_positions, deterministic=self.deterministic,
                        word_scale=scale)
    return self.encoder(x, same_segment(packing.input_segments, packing.input_segments))[0]

  def _word_scale(self, on: bool) -> float:
    return math.sqrt(self.config.hidden_size) if on else 1.0

  def decode_logits(self, decoder_input_ids: Array, decoder_mask: Array, memory: Array, memory_mask: Array,
                    positions: Array | None = None, packing: Packing | None = None) -> Array:
    """Float32 vocabulary logits (batch, target length, vocab) of the decoder over `memory`.

    `positions` default to 0..T-1; a cached step (`decode=True`) passes its
    step index. With `decode=True` the first call creates the cache (its
    output is meaningless) and every later call is one position. `packing`:
    several (source, target) pairs per row, each target attending to its own
    prefix and its own source only.
    """
    if packing is not None:
      positions = packing.target_positions
      self_mask = same_segment(packing.target_segments, packing.target_segments)
      memory_mask = same_segment(packing.target_segments, packing.input_segments)
    elif positions is None:
      positions = jnp.broadcast_to(jnp.arange(decoder_input_ids.shape[1]), decoder_input_ids.shape)
    x = self.embed_targets(decoder_input_ids, decoder_mask, positions)
    mask = decoder_mask if packing is None else self_mask
    x = self.decoder(x, mask, memory.astype(x.dtype), memory_mask, causal=True)[0]
    return self.output_logits(x)

  def embed_targets(self, ids: Array, mask: Array, positions: Array) -> Array:
    """The decoder side's embeddings (word embeddings scaled if configured; the shared tables, or the decoder's
    own position table and LayerNorm with `separate_decoder_embeddings`)."""
    if not self.seq2seq.separate_decoder_embeddings:
      return self.embeddings(ids, mask, positions=positions, deterministic=self.deterministic,
                             word_scale=self._word_scale(self.seq2seq.scale_decoder_embeddings))
    return self._finish_targets(self._target_sum(ids, mask, positions))

  def _target_sum(self, ids: Optional[Array], mask: Array, positions: Array) -> Array:
    """Float32 word (scaled; none if `ids` is None) + decoder position + token-type 0 embeddings, before the
    LayerNorm."""
    cfg, emb = self.config, self.embeddings
    own = self.decoder_embeddings if self.seq2seq.separate_decoder_embeddings else emb
    x = own.position_embeddings(layers.position_ids(cfg, positions, mask))
    if ids is not None:
      x = emb.word_embeddings(ids) * self._word_scale(self.seq2seq.scale_decoder_embeddings) + x
    if cfg.type_vocab_size > 0:
      x = x + emb.token_type_embeddings(jnp.zeros_like(mask))
    return x

  def _finish_targets(self, x: Array) -> Array:
    """The decoder side's embedding LayerNorm and dropout over a `_target_sum`."""
    cfg = self.config
    own = self.decoder_embeddings if self.seq2seq.separate_decoder_embeddings else self.embeddings
    x = own.layer_norm(x).astype(cfg.compute_dtype)
    x = layers.hidden_dropout(own, cfg, x, self.deterministic, own.dropout)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))

  def embed_predicting_streams(self, ids: Optional[Array], mask: Array, positions: Array,
                               stream_vectors: Array) -> Array:
    """xFNP (ProphetNet's n-stream decoder): `embed_targets` once per row of `stream_vectors` (n, embed), the
    row added before the embedding LayerNorm, as ProphetNet adds its `ngram_input_embed`; (batch, n T, embed),
    the streams concatenated. With a zero row this is `embed_targets`; `ids` None leaves the word embedding
    out (ProphetNet's predicting streams: position + stream vector)."""
    x = self._target_sum(ids, mask, positions)
    x = x[:, None] + stream_vectors.astype(jnp.float32)[None, :, None]  # (batch, n, T, embed)
    return self._finish_targets(x.reshape(x.shape[0], -1, x.shape[-1]))

  def output_logits(self, x: Array) -> Array:
    """Float32 vocabulary logits of decoder states: tied to the word embeddings or `output_projection`."""
    logits = self.embeddings.attend(x) if self.seq2seq.tie_output else self.output_projection(x)
    return nn.with_logical_constraint(self.config.precision.output(logits), ("batch", "length", "vocab"))

  def __call__(self, input_ids: Array, input_mask: Array, decoder_input_ids: Array, decoder_mask: Array,
               packing: Packing | None = None) -> Array:
    """Teacher-forced logits: encode the source, decode every target position at once."""
    memory = self.encode(input_ids, input_mask, packing)
    return self.decode_logits(decoder_input_ids, decoder_mask, memory, input_mask, packing=packing)
