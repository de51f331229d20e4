"""Feature-based transfer (Wu & Dredze 2019): a fixed encoder, a learned mix of its layers, a BiLSTM on top.

The encoder's states are not trained (`jax.lax.stop_gradient`; the optimizer
also freezes `backbone`, `runs` wiring). `ScalarMix` is ELMo's: `gamma *
sum_j softmax(w)_j * h_j` over the embeddings and every layer (13 for mBERT
base). A two-layer bidirectional LSTM (Flax `nn.RNN` of `OptimizedLSTMCell`,
`hidden` units per direction; default `PAPER_LSTM_HIDDEN`, the paper's d_h =
768, Gin `task_kinds.FeatureBasedSettings.lstm_hidden` in runs), trained from scratch,
reads the mix; tagging predicts from its state at each position, sentence /
document classification from its states max-pooled over the text's
positions, and the biaffine parser (`models/parser.py`, `lstm_hidden`) reads
its states in place of the fine-tuned encoder's (`mixed_lstm_states`).

Features as the plain models': tagging `input_ids, input_mask,
token_type_ids, labels, label_weights` (`models/tagging.py`), classification
`input_ids, input_mask, token_type_ids, labels, example_weights`.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax.models.base import Model, masked_cross_entropy
from xtreme_jax.models.classification import dense
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder, batch_inputs

PAPER_LSTM_HIDDEN = 768  # the BiLSTM's units per direction in Wu & Dredze 2019 (d_h = 768)


class ScalarMix(nn.Module):
  """`gamma * sum_j softmax(w)_j * layers[j]` over the leading axis of `layers` (ELMo's scalar mix), in float32
  (`precision.Precision.statistics_dtype`: a softmax and a sum over the layers)."""

  @nn.compact
  def __call__(self, layers: jax.Array) -> jax.Array:
    w = self.param("weights", nn.initializers.zeros, (layers.shape[0],), jnp.float32)
    gamma = self.param("gamma", nn.initializers.ones, (), jnp.float32)
    layers = layers.astype(jnp.float32)
    return gamma * jnp.einsum("l,l...->...", jax.nn.softmax(w), layers)


def mixed_lstm_states(config: TransformerConfig, batch: dict, hidden: int, lstm_layers: int,
                      deterministic: bool) -> jax.Array:
  """(B, L, 2 * hidden) BiLSTM states over the fixed encoder's mixed layers. Call inside a compact module:
  its submodules (`backbone`, `scalar_mix`, `bilstm_{i}_forward` / `_backward`) are the caller's. Like every
  task head, the BiLSTM computes in the precision policy's output dtype (float32)."""
  out = TransformerEncoder(config, True, name="backbone")(**batch_inputs(batch), return_all=True)
  x = ScalarMix(name="scalar_mix")(jax.lax.stop_gradient(jnp.concatenate([out.embeddings[None], out.all_layers])))
  lengths = jnp.sum(batch["input_mask"], axis=-1).astype(jnp.int32)
  p = config.precision
  for i in range(lstm_layers):
    # The cells carry the names: their parameters live in this scope (`bilstm_{i}_forward` / `_backward`).
    forward, backward = (nn.RNN(nn.OptimizedLSTMCell(hidden, dtype=p.output_dtype, param_dtype=p.param_dtype,
                                                     name=f"bilstm_{i}_{d}")) for d in ("forward", "backward"))
    x = nn.Bidirectional(forward, backward)(x, seq_lengths=lengths)
    x = nn.Dropout(config.dropout_rate)(x, deterministic=deterministic)
  return x


class FeatureBasedNetwork(nn.Module):
  config: TransformerConfig
  num_outputs: int
  pooled: bool  # True: one prediction per text (max-pooling); False: one per position
  hidden: int = PAPER_LSTM_HIDDEN
  lstm_layers: int = 2
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> jax.Array:
    x = mixed_lstm_states(self.config, batch, self.hidden, self.lstm_layers, self.deterministic)
    if self.pooled:
      x = jnp.max(jnp.where(batch["input_mask"].astype(bool)[..., None], x, -jnp.inf), axis=1)
    return dense(self.config, self.num_outputs, "classifier")(x)


@dataclasses.dataclass(frozen=True)
class FeatureBasedModel(Model):
  """Cross-entropy per tagged position (`pooled=False`) or per text (`pooled=True`); metrics loss, accuracy."""

  config: TransformerConfig
  num_outputs: int = 2
  pooled: bool = True
  hidden: int = PAPER_LSTM_HIDDEN

  def network(self, deterministic: bool) -> nn.Module:
    return FeatureBasedNetwork(self.config, self.num_outputs, self.pooled, self.hidden, deterministic=deterministic)

  def loss_terms(self, logits, batch):
    if self.pooled:
      return masked_cross_entropy(logits, batch["labels"], batch["example_weights"])
    return masked_cross_entropy(logits, jnp.maximum(batch["labels"], 0), batch["label_weights"])
