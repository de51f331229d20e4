"""Sequence (pair) classification on the pooled output, as BertForSequenceClassification.

`head='pooler'`: dropout(tanh(Dense(CLS))) -> Dense(classes) (BERT).
`head='roberta'`: dropout(CLS) -> Dense -> tanh -> dropout -> Dense(classes)
(RobertaClassificationHead, used for XLM-R).
Features: `input_ids, input_mask, token_type_ids, labels, example_weights`.

`MultiTaskClassificationModel`: one shared encoder and one such head per
task (XGLUE's multi-task fine-tuning); each example is classified by the head
of its `task_ids` entry, over that task's classes.

`RatingRegressionModel`: the same head with one output, a real-valued rating
trained with squared error against the integer `labels` (XGLUE WPR's 0-4).
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
from xtreme_jax.networks.encoder import TransformerEncoder, batch_inputs

HEADS = ("pooler", "roberta")


def dense(cfg: TransformerConfig, features: int, name: str) -> nn.Dense:
  """A task-head projection with logically named axes (`embed` -> `classes`), computing in the precision policy's
  output dtype (float32: `precision.Precision`)."""
  return nn.Dense(features, name=name, dtype=cfg.precision.output_dtype, param_dtype=cfg.precision.param_dtype,
                  kernel_init=nn.with_logical_partitioning(nn.initializers.normal(0.02), ("embed", "classes")),
                  bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("classes",)))


def head_logits(cfg: TransformerConfig, out, num_classes: int, head: str, deterministic: bool,
                prefix: str = "") -> jax.Array:
  """The `head` over the encoder output `out`; called inside a compact method (its layers join that module,
  named `{prefix}dense`, `{prefix}classifier`)."""
  drop = lambda x: nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)  # noqa: E731
  if head == "pooler":
    x = drop(out.pooled)
  else:
    x = jnp.tanh(dense(cfg, cfg.hidden_size, f"{prefix}dense")(drop(out.sequence[:, 0])))
    x = drop(x)
  return dense(cfg, num_classes, f"{prefix}classifier")(x)


def _encode(cfg: TransformerConfig, batch: dict, deterministic: bool):
  return TransformerEncoder(cfg, deterministic, name="backbone")(**batch_inputs(batch))


class ClassifierNetwork(nn.Module):
  config: TransformerConfig
  num_classes: int
  head: str = "pooler"
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> jax.Array:
    out = _encode(self.config, batch, self.deterministic)
    return head_logits(self.config, out, self.num_classes, self.head, self.deterministic)


# Logit of the classes a task does not have (the padding up to the widest task): never chosen, no probability.
_ABSENT = -1e9


class MultiTaskClassifierNetwork(nn.Module):
  """One encoder, one head per task (`task_<i>_dense` / `task_<i>_classifier`); logits [batch, widest task],
  each row from its `task_ids` head, classes beyond that task's padded with -1e9."""

  config: TransformerConfig
  num_classes: tuple
  head: str = "pooler"
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> jax.Array:
    out = _encode(self.config, batch, self.deterministic)
    width = max(self.num_classes)
    heads = [jnp.pad(head_logits(self.config, out, n, self.head, self.deterministic, f"task_{i}_"),
                     ((0, 0), (0, width - n)), constant_values=_ABSENT) for i, n in enumerate(self.num_classes)]
    stacked = jnp.stack(heads, axis=1)  # [batch, tasks, width]
    return jnp.take_along_axis(stacked, batch["task_ids"][:, None, None], axis=1)[:, 0]


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


@dataclasses.dataclass(frozen=True)
class MultiTaskClassificationModel(ClassificationModel):
  """`ClassificationModel` with one head per task: `num_classes[i]` classes for task i; batches carry
  `task_ids` (int32 [batch]) and labels index the example's own task's classes."""

  num_classes: tuple = (3,)

  def network(self, deterministic: bool) -> nn.Module:
    return MultiTaskClassifierNetwork(self.config, tuple(self.num_classes), self.head, deterministic)

  def dummy_batch(self, batch_size: int, seq_len: int) -> dict:
    return {**super().dummy_batch(batch_size, seq_len), "task_ids": np.zeros((batch_size,), np.int32)}


@dataclasses.dataclass(frozen=True)
class RatingRegressionModel(ClassificationModel):
  """A rating per pair: the classification head with one output, squared error against `labels` (the rating,
  an integer); metrics: loss (the squared error sum), accuracy (the rounded rating equals the label)."""

  num_classes: int = 1

  def network(self, deterministic: bool) -> nn.Module:
    return ClassifierNetwork(self.config, 1, self.head, deterministic)

  def loss_terms(self, outputs, batch):
    rating = outputs[..., 0].astype(jnp.float32)
    target = batch["labels"].astype(jnp.float32)
    weights = batch["example_weights"].astype(jnp.float32)
    loss = jnp.sum(jnp.square(rating - target) * weights)
    correct = (jnp.round(rating) == target).astype(jnp.float32)
    return loss, {"weight": jnp.sum(weights), "loss": loss, "accuracy": jnp.sum(correct * weights)}
