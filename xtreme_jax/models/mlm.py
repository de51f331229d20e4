"""Masked language modelling (BERT / XLM-R pretraining objective).

Features: `input_ids, input_mask, token_type_ids` plus the masked slots
`masked_positions, masked_ids, masked_weights` (batch, max_predictions);
logits are computed at the masked slots only, as BERT does.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax.models.base import Model, dummy_inputs, masked_cross_entropy
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder, batch_inputs


class MlmNetwork(nn.Module):
  config: TransformerConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> jax.Array:
    backbone = TransformerEncoder(self.config, self.deterministic, name="backbone")
    out = backbone(**batch_inputs(batch))
    states = jnp.take_along_axis(out.sequence, batch["masked_positions"][..., None], axis=1)
    return backbone.mlm_logits(states)


@dataclasses.dataclass(frozen=True)
class MlmModel(Model):
  """MLM over the masked slots; metrics: loss and accuracy per masked token."""

  config: TransformerConfig

  def network(self, deterministic: bool) -> nn.Module:
    return MlmNetwork(self.config, deterministic)

  def loss_terms(self, logits, batch):
    return masked_cross_entropy(logits, batch["masked_ids"], batch["masked_weights"])

  def dummy_batch(self, batch_size: int, seq_len: int, max_predictions: int = 4) -> dict:
    import numpy as np
    return {**dummy_inputs(batch_size, seq_len),
            "masked_positions": np.zeros((batch_size, max_predictions), np.int32),
            "masked_ids": np.zeros((batch_size, max_predictions), np.int32),
            "masked_weights": np.zeros((batch_size, max_predictions), np.float32)}
