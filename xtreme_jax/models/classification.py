"""Sequence (pair) classification on the pooled output, as BertForSequenceClassification.

`head='pooler'`: dropout(tanh(Dense(CLS))) -> Dense(classes) (BERT).
`head='roberta'`: dropout(CLS) -> Dense -> tanh -> dropout -> Dense(classes)
(RobertaClassificationHead, used for XLM-R).
Features: `input_ids, input_mask, token_type_ids, labels, example_weights`.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import errors
from xtreme_jax.models.base import Model, dummy_inputs, masked_cross_entropy
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder

HEADS = ("pooler", "roberta")


def dense(features: int, name: str) -> nn.Dense:
  """A task-head projection with logically named axes (`embed` -> `classes`)."""
  return nn.Dense(features, name=name,
                  kernel_init=nn.with_logical_partitioning(nn.initializers.normal(0.02), ("embed", "classes")),
                  bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("classes",)))


class ClassifierNetwork(nn.Module):
  config: TransformerConfig
  num_classes: int
  head: str = "pooler"
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> jax.Array:
    cfg = self.config
    out = TransformerEncoder(cfg, self.deterministic, name="backbone")(
        batch["input_ids"], batch["input_mask"], batch.get("token_type_ids"), batch.get("positions"))
    drop = lambda x: nn.Dropout(cfg.dropout_rate)(x, deterministic=self.deterministic)  # noqa: E731
    if self.head == "pooler":
      x = drop(out.pooled)
    else:
      x = jnp.tanh(dense(cfg.hidden_size, "dense")(drop(out.sequence[:, 0])))
      x = drop(x)
    return dense(self.num_classes, "classifier")(x).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class ClassificationModel(Model):
  """Softmax cross-entropy over `num_classes`; metrics: loss, accuracy."""

  config: TransformerConfig
  num_classes: int = 3
  head: str = "pooler"

  def __post_init__(self):
    if self.head not in HEADS:
      raise errors.ConfigError(f"head={self.head!r}; expected one of {HEADS}")

  def network(self, deterministic: bool) -> nn.Module:
    return ClassifierNetwork(self.config, self.num_classes, self.head, deterministic)

  def loss_terms(self, logits, batch):
    return masked_cross_entropy(logits, batch["labels"], batch["example_weights"])

  def dummy_batch(self, batch_size: int, seq_len: int) -> dict:
    return {**dummy_inputs(batch_size, seq_len), "labels": np.zeros((batch_size,), np.int32),
            "example_weights": np.ones((batch_size,), np.float32)}
