"""Sequence-to-sequence fine-tuning and decoding (XGLUE QG / NTG, WMT14, xDAE) over `Seq2SeqNetwork`.

Batch (all (batch, ...) arrays):

    input_ids, input_mask        (batch, S)  the source
    targets, target_mask         (batch, T)  the target ids, EOS included, then pad
    decoder_start                (batch,)    the decoder's first input: a target-language tag or BOS

Teacher forcing: the decoder reads `shift_right(targets)` (the start token,
then targets[:-1]) and predicts `targets`. Token-count batches pack several
pairs per row: `input_segments`, `input_positions`, `target_segments`,
`target_positions` (`PACKING_KEYS`, `networks/seq2seq.Packing`); each pair
then gets exactly the logits it gets alone. The loss is fairseq's
label-smoothed cross-entropy (`label_smoothed_nll`); metric sums as every
model here: `weight` = target tokens, `loss` (smoothed), `nll`, `accuracy`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import errors
from xtreme_jax.models import decoding
from xtreme_jax.models.base import Model
from xtreme_jax.networks import layers
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.seq2seq import Packing, Seq2SeqConfig, Seq2SeqNetwork

Array = jax.Array
# Packed rows (several pairs per row, `data/features/packing.py`) add these (batch, S) / (batch, T) features.
PACKING_KEYS = ("input_segments", "input_positions", "target_segments", "target_positions")


def shift_right(targets: Array, target_mask: Array, start: Array, pad_id: int,
                positions: Array | None = None) -> Array:
  """Decoder inputs: `start` (batch,) then `targets[:, :-1]`; pad where the target is padding. With packed rows
  (`positions`: each token's position in its own target), every target starts with `start` again."""
  previous = jnp.concatenate([jnp.zeros_like(targets[:, :1]), targets[:, :-1]], axis=1)
  first = jnp.arange(targets.shape[1])[None, :] == 0 if positions is None else positions == 0
  inputs = jnp.where(first, start[:, None].astype(targets.dtype), previous)
  return jnp.where(target_mask.astype(bool), inputs, pad_id)


def label_smoothed_nll(logits: Array, targets: Array, weights: Array, epsilon: float) -> tuple[Array, Array]:
  """Per-token (smoothed loss, nll), fairseq's `label_smoothed_nll_loss`.

  The target distribution puts 1 - epsilon on the gold token and
  epsilon / (V - 1) on each other token: loss = (1 - epsilon - e) * nll + e *
  sum_v(-log p_v) with e = epsilon / (V - 1). Zero where `weights` is 0.
  """
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
  other = epsilon / (logits.shape[-1] - 1)
  loss = (1.0 - epsilon - other) * nll + other * -jnp.sum(logp, axis=-1)
  weights = weights.astype(jnp.float32)
  return loss * weights, nll * weights


class Seq2SeqLmNetwork(nn.Module):
  """`Seq2SeqNetwork` under `backbone`, fed from a batch (teacher forcing)."""

  config: TransformerConfig
  seq2seq: Seq2SeqConfig
  deterministic: bool = True
  decode: bool = False

  def setup(self):
    self.backbone = Seq2SeqNetwork(self.config, self.seq2seq, self.deterministic, self.decode)

  def __call__(self, batch: dict) -> Array:
    packing = Packing(*(batch[k] for k in PACKING_KEYS)) if PACKING_KEYS[0] in batch else None
    decoder_inputs = shift_right(batch["targets"], batch["target_mask"], batch["decoder_start"],
                                 self.config.pad_token_id, None if packing is None else packing.target_positions)
    return self.backbone(batch["input_ids"], batch["input_mask"], decoder_inputs, batch["target_mask"], packing)

  def encode(self, input_ids: Array, input_mask: Array) -> Array:
    return self.backbone.encode(input_ids, input_mask)

  def decode_logits(self, *args, **kwargs) -> Array:
    return self.backbone.decode_logits(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
  """How `Seq2SeqModel.generate` searches (see `decoding`); beam_size 1 runs greedy search."""

  beam_size: int = 5
  max_length: int = 64
  alpha: float = 1.0
  length_penalty: str = "fairseq"
  n_best: int = 1

  def __post_init__(self):  # checked when configured, not after training
    if self.beam_size < 1 or self.max_length < 1:
      raise errors.ConfigError(f"DecodeSettings beam_size={self.beam_size}, max_length={self.max_length}; expected "
                               ">= 1 each")
    if self.length_penalty not in decoding.LENGTH_PENALTIES:
      raise errors.ConfigError(f"DecodeSettings.length_penalty={self.length_penalty!r}; expected one of "
                               f"{decoding.LENGTH_PENALTIES}")
    if not 1 <= self.n_best <= self.beam_size:
      raise errors.ConfigError(f"DecodeSettings.n_best={self.n_best}; expected 1..beam_size ({self.beam_size})")


@dataclasses.dataclass(frozen=True)
class Seq2SeqModel(Model):
  """Encoder-decoder with label-smoothed cross-entropy, greedy and beam-search decoding."""

  config: TransformerConfig
  seq2seq: Seq2SeqConfig = Seq2SeqConfig()
  label_smoothing: float = 0.1
  eos_id: int = 2
  decode_settings: Optional[DecodeSettings] = None  # how `predict_batch` decodes (None: DecodeSettings())

  def __post_init__(self):
    if not 0.0 <= self.label_smoothing < 1.0:
      raise errors.ConfigError(f"label_smoothing={self.label_smoothing}; expected 0 <= value < 1")

  def network(self, deterministic: bool, decode: bool = False) -> nn.Module:
    return Seq2SeqLmNetwork(self.config, self.seq2seq, deterministic, decode)

  def init(self, rng: jax.Array, batch: dict) -> Any:
    layers.check_length(self.config, batch["targets"].shape[1], "target length", "lower the target length")
    return super().init(rng, batch)

  def loss_terms(self, logits, batch):
    loss, nll = label_smoothed_nll(logits, batch["targets"], batch["target_mask"], self.label_smoothing)
    weights = batch["target_mask"].astype(jnp.float32)
    correct = (jnp.argmax(logits, -1) == batch["targets"]).astype(jnp.float32) * weights
    total = jnp.sum(loss)
    return total, {"weight": jnp.sum(weights), "loss": total, "nll": jnp.sum(nll), "accuracy": jnp.sum(correct)}

  def predict_batch(self, params: Any, batch: dict) -> decoding.SearchResult:
    return self.generate(params, batch, self.decode_settings or DecodeSettings())

  def generate(self, params: Any, batch: dict, settings: DecodeSettings) -> decoding.SearchResult:
    """Decode `batch` (input_ids, input_mask, decoder_start) with the KV cache; jit it with static `settings`."""
    step, cache = self.decoder(params, batch, settings.beam_size, settings.max_length)
    common = dict(max_length=settings.max_length, eos_id=self.eos_id, pad_id=self.config.pad_token_id)
    if settings.beam_size == 1:
      return decoding.greedy_search(step, cache, batch["decoder_start"], **common)
    return decoding.beam_search(
        step, cache, batch["decoder_start"], beam_size=settings.beam_size, alpha=settings.alpha,
        style=settings.length_penalty, n_best=settings.n_best, reorder=self.reorder_cache, **common)

  def reorder_cache(self, cache: Any, rows: Array) -> Any:
    """Beam search's reorder of a `decoder` cache: row r continues row `rows[r]` (only the history index moves)."""
    return layers.reorder_cache_rows(cache, rows)

  def decoder(self, params: Any, batch: dict, copies: int, max_length: int) -> tuple[decoding.StepFn, Any]:
    """(step function, its initial cache) over `batch`'s sources, each repeated `copies` times (the beams).

    Encodes once; the cache holds zeroed self-attention keys / values for
    `max_length` positions and the memory's cross-attention keys / values
    (`layers.MultiHeadAttention`). With `copies > 1` it also holds each row's
    history index (`layers.index_cache_rows`): reorder its rows with
    `reorder_cache`, which moves the index only (a whole-leaf gather such as
    `decoding.gather_beams` would break it).
    """
    layers.check_length(self.config, max_length, "max decoding length", "lower max_length")
    net = self.network(True, decode=True)
    memory = net.apply({"params": params}, batch["input_ids"], batch["input_mask"], method=Seq2SeqLmNetwork.encode)
    memory, memory_mask = (jnp.repeat(a, copies, axis=0) for a in (memory, batch["input_mask"]))
    rows = memory.shape[0]
    _, created = net.apply({"params": params}, jnp.zeros((rows, max_length), jnp.int32),
                           jnp.ones((rows, max_length), jnp.int32), memory, memory_mask,
                           method=Seq2SeqLmNetwork.decode_logits, mutable=["cache"])

    def step(tokens, cache, t):
      logits, updated = net.apply({"params": params, "cache": cache}, tokens[:, None],
                                  jnp.ones((rows, 1), jnp.int32), memory, memory_mask,
                                  jnp.full((rows, 1), t, jnp.int32), method=Seq2SeqLmNetwork.decode_logits,
                                  mutable=["cache"])
      return logits[:, 0], updated["cache"]

    return step, (layers.index_cache_rows(created["cache"]) if copies > 1 else created["cache"])

  def dummy_batch(self, batch_size: int, source_length: int, target_length: int) -> dict:
    return {"input_ids": np.zeros((batch_size, source_length), np.int32),
            "input_mask": np.ones((batch_size, source_length), np.int32),
            "targets": np.zeros((batch_size, target_length), np.int32),
            "target_mask": np.ones((batch_size, target_length), np.int32),
            "decoder_start": np.zeros((batch_size,), np.int32)}
