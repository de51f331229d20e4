"""FILTER's task models: classification, tagging and QA heads on both sides of `FilterEncoder`, with the
paper's losses (Fang et al. 2021, Eq. 6), and self-teaching.

Batches: the target side (the language predicted; at training the
translation, at inference the test text) carries the plain kinds' features
(`input_ids, input_mask, token_type_ids` and the labels); the source side
(English) the same names prefixed `source_`. Predictions always come from the
target side. A head is one module applied to both sides:

* classification: each side's own first token (never position 1 of the
  target side, a defect of the authors' code), `ClassificationModel`'s head;
  both sides share `labels`;
* tagging: a label per token of each side, `source_labels` /
  `source_label_weights` and `labels` / `label_weights` (all zero where the
  side has no gold tags: a translation);
* QA: start / end logits per side, `source_start_positions`, ... and
  `source_example_weights`; `example_weights` (zero where the side's span is
  unknown); a student's batches add `window_weights` (1 for every real
  window: the KL's units).

Loss per unit (an example; a token for tagging; a window for QA), Eq. 6:
L = L_src + lambda_i * L_tgt + (1 - lambda_i) * KL(teacher || student), where
lambda_i = `lam` if the unit has a target label, else 0. The teacher
(`kl_weight=None`) trains with lambda_i = 1 where the target has labels and no
KL. A student (`kl_weight` = 1 - lambda: the paper's tagging 1.0,
classification 0.5, QA 0.1) reads the teacher's target-side logits
(`teacher_logits`; QA `teacher_start_logits` / `teacher_end_logits`). The KL
is computed per distribution: per example over the classes, per token over
the tags, per window over the positions of its start (and end) logits, the
padding left out: T^2 KL(softmax(teacher / T) || softmax(student / T)), both
sides softened by `temperature` T and the T^2 factor as in the authors' code
(the task kinds' T: classification 0.1, QA 6, tagging 1), summed over classes
(not averaged: the authors' classification KL is, and their QA KL is one
distribution over the whole batch's positions; docs/filter.md). QA's CE and
KL are the means of the start and end terms, as `QaModel`'s loss. Each side's
terms are divided by that side's total weight (tagging: its tokens), so L is
the mean over the batch.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax import errors
from xtreme_jax.models.base import Model
from xtreme_jax.models.classification import HEADS, head_logits, dense
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import EncoderOutput
from xtreme_jax.networks.filter import FilterEncoder, check_depths

Array = jax.Array
_MASKED = -1e9  # logit of a padding position in a QA distribution: probability exactly 0


def _softened(logits: Array, temperature: float, mask: Optional[Array]) -> Array:
  x = logits.astype(jnp.float32) / temperature
  return x if mask is None else jnp.where(mask, x, _MASKED)


def soft_targets(teacher_logits: Array, temperature: float = 1.0, mask: Optional[Array] = None) -> Array:
  """The student's soft labels, softmax(teacher_logits / T) over the last axis; `mask` (same shape, 1 = part of
  the distribution) gives the other entries probability 0."""
  return jax.nn.softmax(_softened(teacher_logits, temperature, mask))


def kl_divergence(teacher_logits: Array, student_logits: Array, temperature: float = 1.0,
                  mask: Optional[Array] = None) -> Array:
  """T^2 KL(softmax(teacher / T) || softmax(student / T)) over the last axis, one value per distribution (summed
  over its entries); T^2 as the authors' code (the gradient's scale kept across temperatures). `mask` (same
  shape, 1 = part of the distribution) leaves entries out of both."""
  log_p = jax.nn.log_softmax(_softened(teacher_logits, temperature, mask))
  log_q = jax.nn.log_softmax(_softened(student_logits, temperature, mask))
  terms = jnp.exp(log_p) * (log_p - log_q)
  return temperature ** 2 * jnp.sum(terms if mask is None else jnp.where(mask, terms, 0.0), axis=-1)


def cross_entropy(logits: Array, targets: Array) -> Array:
  """Per-unit softmax cross-entropy (float32) of integer `targets` (negative ones give 0: no label)."""
  logp = jax.nn.log_softmax(logits.astype(jnp.float32))
  nll = -jnp.take_along_axis(logp, jnp.maximum(targets, 0)[..., None], axis=-1)[..., 0]
  return jnp.where(targets >= 0, nll, 0.0)


def _accuracy(logits: Array, targets: Array) -> Array:
  return (jnp.argmax(logits, -1) == targets).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class FilterModel(Model):
  """The shared part: m / k, the self-teaching settings and Eq. 6's assembly (`_combine`)."""

  config: TransformerConfig
  local_layers: int = 1
  fusion_layers: int = 1
  kl_weight: Optional[float] = None  # None: the teacher (no KL); a student: 1 - lambda
  temperature: float = 1.0  # of the KL; the task kinds pass the authors' per kind (`filter_kinds.TEMPERATURES`)

  def __post_init__(self):
    check_depths(self.local_layers, self.fusion_layers, self.config.num_layers)
    if self.kl_weight is not None and not 0.0 <= self.kl_weight <= 1.0:
      raise errors.ConfigError(f"FILTER kl_weight = {self.kl_weight!r}; expected None (a teacher) or 0..1 "
                               "(1 - lambda; the paper: tagging 1.0, classification 0.5, QA 0.1)")
    if not self.temperature > 0:
      raise errors.ConfigError(f"FILTER temperature = {self.temperature!r}; expected a positive number")

  @property
  def student(self) -> bool:
    return self.kl_weight is not None

  def soft_targets(self, teacher_logits: Array, mask: Optional[Array] = None) -> Array:
    """What the student's KL matches: `soft_targets` at this model's temperature."""
    return soft_targets(teacher_logits, self.temperature, mask)

  def _combine(self, source_ce, source_w, target_ce, target_w, target_labelled, kl=None, kl_w=None) -> tuple:
    """Eq. 6 summed over units, each side divided by its total weight, times the source weight (the trainer
    divides the sum by `weight`): (loss sum, metric sums)."""
    lam = jnp.where(target_labelled, 1.0 - self.kl_weight if self.student else 1.0, 0.0)
    w_src = jnp.sum(source_w)
    norm = lambda x, w: jnp.sum(x * w) / jnp.maximum(jnp.sum(w), 1e-8) * w_src  # noqa: E731
    src = norm(source_ce, source_w)
    tgt = norm(lam * target_ce, target_w)
    sums = {"weight": w_src, "source_loss": src}
    if self.student:
      sums["kl"] = norm((1.0 - lam) * kl, kl_w)
    loss = src + tgt + sums.get("kl", 0.0)
    sums["loss"] = loss
    return loss, sums


class _PairNetwork(nn.Module):
  """A head over `FilterEncoder` (named "backbone"); `encode` is called inside the subclass's compact call."""

  config: TransformerConfig
  local_layers: int = 1
  fusion_layers: int = 1
  deterministic: bool = True

  def encode(self, batch: dict):
    """(the encoder module, its output on the batch's two sides)."""
    enc = FilterEncoder(self.config, self.local_layers, self.fusion_layers, self.deterministic, name="backbone")
    return enc, enc(batch["source_input_ids"], batch["source_input_mask"], batch["input_ids"], batch["input_mask"],
                    batch.get("source_token_type_ids"), batch.get("token_type_ids"))


class _Classifier(_PairNetwork):
  num_classes: int = 3
  head: str = "pooler"

  @nn.compact
  def __call__(self, batch: dict) -> dict:
    enc, out = self.encode(batch)
    first = jnp.concatenate([out.source[:, 0], out.target[:, 0]], axis=0)  # each side's own first token
    logits = head_logits(self.config, EncoderOutput(first[:, None], enc.pooled(first)), self.num_classes,
                          self.head, self.deterministic)
    source, target = jnp.split(logits, 2, axis=0)
    return {"source": source, "target": target}


@dataclasses.dataclass(frozen=True)
class FilterClassificationModel(FilterModel):
  """Both sides share `labels`; the student's KL is per example over the classes."""

  num_classes: int = 3
  head: str = "pooler"

  def __post_init__(self):
    super().__post_init__()
    if self.head not in HEADS:
      raise errors.ConfigError(f"head={self.head!r}; expected one of {HEADS}")

  def network(self, deterministic: bool) -> nn.Module:
    return _Classifier(self.config, self.local_layers, self.fusion_layers, deterministic, self.num_classes, self.head)

  def loss_terms(self, outputs, batch):
    w = batch["example_weights"].astype(jnp.float32)
    labels = batch["labels"]
    kl = kl_divergence(batch["teacher_logits"], outputs["target"], self.temperature) if self.student else None
    loss, sums = self._combine(cross_entropy(outputs["source"], labels), w, cross_entropy(outputs["target"], labels),
                               w, labels >= 0, kl, w)
    sums["accuracy"] = jnp.sum(_accuracy(outputs["target"], labels) * w)
    sums["source_accuracy"] = jnp.sum(_accuracy(outputs["source"], labels) * w)
    return loss, sums


class _Tagger(_PairNetwork):
  num_labels: int = 17

  @nn.compact
  def __call__(self, batch: dict) -> dict:
    _, out = self.encode(batch)
    states = jnp.concatenate([out.source, out.target], axis=1)
    x = nn.Dropout(self.config.dropout_rate)(states, deterministic=self.deterministic)
    logits = dense(self.config, self.num_labels, "classifier")(x)
    n = batch["source_input_ids"].shape[1]
    return {"source": logits[:, :n], "target": logits[:, n:]}


@dataclasses.dataclass(frozen=True)
class FilterTaggingModel(FilterModel):
  """A tag per token of each side; the student's KL is per target token (the `label_weights` positions: the
  first subword of each word) over the tags."""

  num_labels: int = 17

  def network(self, deterministic: bool) -> nn.Module:
    return _Tagger(self.config, self.local_layers, self.fusion_layers, deterministic, self.num_labels)

  def loss_terms(self, outputs, batch):
    src_w = batch["source_label_weights"].astype(jnp.float32)
    positions = batch["label_weights"].astype(jnp.float32)  # the target's predicted positions
    labels = batch["labels"]
    labelled = labels >= 0
    kl = kl_divergence(batch["teacher_logits"], outputs["target"], self.temperature) if self.student else None
    loss, sums = self._combine(cross_entropy(outputs["source"], batch["source_labels"]), src_w,
                               cross_entropy(outputs["target"], labels), positions * labelled, labelled, kl,
                               positions)
    target_w = positions * labelled
    sums.update(accuracy=jnp.sum(_accuracy(outputs["target"], labels) * target_w), accuracy_weight=jnp.sum(target_w))
    return loss, sums


class _Spans(_PairNetwork):
  @nn.compact
  def __call__(self, batch: dict) -> dict:
    _, out = self.encode(batch)
    logits = dense(self.config, 2, "qa_outputs")(jnp.concatenate([out.source, out.target], axis=1))
    n = batch["source_input_ids"].shape[1]
    return {"source_start_logits": logits[:, :n, 0], "source_end_logits": logits[:, :n, 1],
            "start_logits": logits[:, n:, 0], "end_logits": logits[:, n:, 1]}


@dataclasses.dataclass(frozen=True)
class FilterQaModel(FilterModel):
  """Start / end spans on each side where known; the student's KL per window over its start (end) positions."""

  def network(self, deterministic: bool) -> nn.Module:
    return _Spans(self.config, self.local_layers, self.fusion_layers, deterministic)

  def loss_terms(self, outputs, batch):
    span_ce = lambda prefix: (cross_entropy(outputs[f"{prefix}start_logits"], batch[f"{prefix}start_positions"]) +  # noqa: E731
                              cross_entropy(outputs[f"{prefix}end_logits"], batch[f"{prefix}end_positions"])) / 2
    src_w = batch["source_example_weights"].astype(jnp.float32)
    tgt_w = batch["example_weights"].astype(jnp.float32)
    kl = None
    if self.student:
      mask = batch["input_mask"].astype(bool)
      kl = (kl_divergence(batch["teacher_start_logits"], outputs["start_logits"], self.temperature, mask) +
            kl_divergence(batch["teacher_end_logits"], outputs["end_logits"], self.temperature, mask)) / 2
    windows = batch["window_weights"].astype(jnp.float32) if self.student else None
    loss, sums = self._combine(span_ce("source_"), src_w, span_ce(""), tgt_w, tgt_w > 0, kl, windows)
    sums["start_accuracy"] = jnp.sum(_accuracy(outputs["start_logits"], batch["start_positions"]) * tgt_w)
    sums["end_accuracy"] = jnp.sum(_accuracy(outputs["end_logits"], batch["end_positions"]) * tgt_w)
    return loss, sums
