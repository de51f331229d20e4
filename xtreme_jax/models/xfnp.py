"""xFNP pretraining (Unicoder, XGLUE): future n-gram prediction with ProphetNet's n-stream decoder.

Batch (from the `pretrain_xfnp_*` seqio tasks, `data/pretraining/denoising.py`):

    input_ids, input_mask                     (batch, S)  the span-masked text
    targets, target_mask                      (batch, T)  the masked spans' original tokens, concatenated
    target_positions                          (batch, T)  each target token's position in the input
    target_offsets                            (batch, T)  its index within its span (0 = the span's first)
    decoder_inputs                            (batch, T)  the original token before each target

The decoder is `Seq2SeqNetwork`'s (the same VecoLayers) run once over the
streams concatenated [main, stream 1, ..., stream n] with ProphetNet's
attention mask (`networks/ngram_masks.ngram_self_attention_mask`): the main
stream reads `decoder_inputs` causally; predicting stream k at step t reads
LayerNorm(position + learned stream vector k), no word embedding, and
sees the main stream's tokens before target t - k + 1. Positions follow
ProphetNet's pretraining (`ngram_s2s_model.py`: main stream at `positions`,
predicting streams at `positions + 1`, stream vector added before
`emb_layer_norm`): each token at its own place in the input, the main
stream (the token before target t) at `target_positions - 1` (0 for a target
at 0, whose BOS precedes the text), the predicting streams at
`target_positions`, where the encoder has the masked token; so no position
lies beyond the input's. Every stream is compared with the same `targets`:
stream k predicts the token k - 1 places after the next one. Stream k is
trained on tokens whose span offset is at least k - 1 (the context it would
need lies inside the span), weighted by `alphas[k - 1]` (xFNP: n = 2,
alphas 1, 1). The main stream predicts nothing. Cross-attention and
feed-forward are position-wise, so one pass over the concatenation is
exactly ProphetNet's per-stream computation.

Metric sums: `weight` / `loss` / `accuracy` over stream 1's tokens (loss =
the weighted sum over streams), `stream{k}_loss` / `_accuracy` / `_weight`
for k >= 2.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import errors
from xtreme_jax.models.base import Model
from xtreme_jax.models.seq2seq import label_smoothed_nll
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.ngram_masks import ngram_self_attention_mask
from xtreme_jax.networks.seq2seq import Seq2SeqConfig, Seq2SeqNetwork

Array = jax.Array


class XfnpNetwork(nn.Module):
  """Logits (batch, n, T, vocab) of the n predicting streams."""

  config: TransformerConfig
  seq2seq: Seq2SeqConfig
  ngram: int = 2
  deterministic: bool = True

  def setup(self):
    self.backbone = Seq2SeqNetwork(self.config, self.seq2seq, self.deterministic)
    self.stream_embeddings = self.param(
        "stream_embeddings", nn.with_logical_partitioning(nn.initializers.normal(0.02), (None, "embed")),
        (self.ngram, self.config.hidden_size), self.config.precision.param_dtype)

  def __call__(self, batch: dict) -> Array:
    net, n = self.backbone, self.ngram
    memory = net.encode(batch["input_ids"], batch["input_mask"])
    mask = batch["target_mask"]
    batch_size, length = mask.shape
    x = self.stream_inputs(batch)
    keys = jnp.tile(mask, (1, 1 + n)).astype(bool)
    attention = jnp.asarray(ngram_self_attention_mask(length, n), bool)[None] & keys[:, None, :]
    states = net.decoder(x, attention.astype(jnp.int32), memory.astype(x.dtype), batch["input_mask"],
                         causal=False)[0]
    logits = net.output_logits(states[:, length:])
    return logits.reshape(batch_size, n, length, -1)

  def stream_inputs(self, batch: dict) -> Array:
    """(batch, (1 + n) T, embed): [main, stream 1, ..., stream n] embedded, placed as ProphetNet does (module
    docstring): the main stream at `target_positions - 1`, the predicting streams at `target_positions`."""
    net, mask, positions = self.backbone, batch["target_mask"], batch["target_positions"]
    main = net.embed_targets(batch["decoder_inputs"], mask, jnp.maximum(positions - 1, 0))
    return jnp.concatenate([main, net.embed_predicting_streams(None, mask, positions, self.stream_embeddings)], 1)


@dataclasses.dataclass(frozen=True)
class XfnpModel(Model):
  """Encoder + n-stream decoder; loss = sum_k alphas[k] * CE(stream k), the streams' weights as above."""

  config: TransformerConfig
  seq2seq: Seq2SeqConfig = Seq2SeqConfig()
  ngram: int = 2
  alphas: tuple = (1.0, 1.0)
  label_smoothing: float = 0.0

  def __post_init__(self):
    if len(self.alphas) != self.ngram:
      raise errors.ConfigError(f"alphas={self.alphas} has {len(self.alphas)} weights; expected one per stream "
                               f"(ngram={self.ngram})")

  def network(self, deterministic: bool) -> nn.Module:
    return XfnpNetwork(self.config, self.seq2seq, self.ngram, deterministic)

  def loss_terms(self, logits, batch):
    targets, offsets = batch["targets"], batch["target_offsets"]
    total, sums = 0.0, {}
    for k in range(self.ngram):
      weights = batch["target_mask"].astype(jnp.float32) * (offsets >= k)
      loss, _ = label_smoothed_nll(logits[:, k], targets, weights, self.label_smoothing)
      loss = jnp.sum(loss)
      correct = jnp.sum((jnp.argmax(logits[:, k], -1) == targets) * weights)
      total = total + self.alphas[k] * loss
      prefix = "" if k == 0 else f"stream{k + 1}_"
      sums.update({f"{prefix}weight": jnp.sum(weights), f"{prefix}accuracy": correct,
                   **({f"{prefix}loss": loss} if k else {})})
    sums["loss"] = total
    return total, sums

  def dummy_batch(self, batch_size: int, source_length: int, target_length: int) -> dict:
    ids = lambda n: np.zeros((batch_size, n), np.int32)  # noqa: E731
    return {"input_ids": ids(source_length), "input_mask": np.ones((batch_size, source_length), np.int32),
            "targets": ids(target_length), "target_mask": np.ones((batch_size, target_length), np.int32),
            "target_positions": ids(target_length), "target_offsets": ids(target_length),
            "decoder_inputs": ids(target_length)}
