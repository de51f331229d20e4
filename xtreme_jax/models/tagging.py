"""Token classification (POS / NER): a label per first subword, as BertForTokenClassification.

Features: `input_ids, input_mask, token_type_ids, labels` (-100 where a
position is not predicted) and `label_weights`.
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


class TaggerNetwork(nn.Module):
  config: TransformerConfig
  num_labels: int
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> jax.Array:
    out = TransformerEncoder(self.config, self.deterministic, name="backbone")(**batch_inputs(batch))
    x = nn.Dropout(self.config.dropout_rate)(out.sequence, deterministic=self.deterministic)
    return dense(self.config, self.num_labels, "classifier")(x)


@dataclasses.dataclass(frozen=True)
class TaggingModel(Model):
  """Per-token softmax cross-entropy on the weighted positions; metrics: loss, accuracy."""

  config: TransformerConfig
  num_labels: int = 17

  def network(self, deterministic: bool) -> nn.Module:
    return TaggerNetwork(self.config, self.num_labels, deterministic)

  def loss_terms(self, logits, batch):
    return masked_cross_entropy(logits, jnp.maximum(batch["labels"], 0), batch["label_weights"])
