"""Biaffine dependency parser (Dozat & Manning 2017) on the encoder's first-subword states (Wu & Dredze 2019).

Features (one window per sentence, `W` word slots):
`input_ids, input_mask, token_type_ids` (the subwords), `word_starts` (W,)
the position of each word's first subword, `word_mask` (W,) 1 for a word,
`heads` (W,) the gold head of each word (0 the root, i the i-th word), `rels`
(W,) its coarse relation id, and with gold POS (`num_upos`) `upos` (W,).
A training sentence cut short (`data/features/parsing_features.py`) marks a word
whose head was cut away with head -1: it is read and can be a head, but
adds nothing to the loss.

The states are the fine-tuned encoder's, or (`lstm_hidden`: the paper's
feature-based setting) a BiLSTM's over the fixed encoder's mixed layers
(`models/feature_based.mixed_lstm_states`).
The root is the `[CLS]` state (slot 0 of the word axis); words are slots
1..W. Each state (with gold POS: concatenated with a learned tag embedding,
the paper's second setting) goes through four MLPs (arc-dependent,
arc-head, relation-dependent, relation-head; LeakyReLU 0.1 and dropout as
Dozat & Manning). Arc scores are biaffine, `s[d, h] = dep_d U head_h +
head_h . u`; relation scores for every (dependent, head) pair are
`dep_d U_r head_h + W_r [dep_d; head_h] + b_r`. Training: cross-entropy of
each word's gold head over the root and the sentence's words, plus the
cross-entropy of its relation at the gold head. Prediction returns the arc
scores and each pair's best relation; `decode` takes the maximum spanning
tree with one root word (`xtreme_jax.trees.mst_heads`) and each word's
best relation at its tree head.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax.trees import mst_heads
from xtreme_jax.models.base import Model
from xtreme_jax.models.feature_based import mixed_lstm_states
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder, batch_inputs

NEG = -1e9


def _mlp(config: TransformerConfig, features: int, rate: float, deterministic: bool, name: str):
  p = config.precision
  dense = nn.Dense(features, name=name, dtype=p.output_dtype, param_dtype=p.param_dtype,
                   kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), ("embed", "mlp")))
  return lambda x: nn.Dropout(rate)(nn.leaky_relu(dense(x), 0.1), deterministic=deterministic)


class BiaffineParserNetwork(nn.Module):
  config: TransformerConfig
  num_rels: int
  num_upos: Optional[int] = None
  arc_dim: int = 500
  rel_dim: int = 100
  tag_dim: int = 50
  mlp_dropout: float = 0.33
  lstm_hidden: Optional[int] = None  # the feature-based setting: BiLSTM units per direction
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> dict:
    """Arc and relation scores; like every task head, the scorers compute in the precision policy's output dtype
    (float32; their parameters are float32)."""
    p = self.config.precision
    if self.lstm_hidden is not None:
      seq = mixed_lstm_states(self.config, batch, self.lstm_hidden, 2, self.deterministic)
    else:
      seq = p.output(TransformerEncoder(self.config, self.deterministic, name="backbone")(
          **batch_inputs(batch)).sequence)
    words = jnp.take_along_axis(seq, batch["word_starts"][..., None].astype(jnp.int32), axis=1)
    states = jnp.concatenate([seq[:, :1], words], axis=1)  # slot 0: [CLS] as the root
    if self.num_upos is not None:
      tags = jnp.concatenate([jnp.full_like(batch["upos"][:, :1], self.num_upos), batch["upos"]], axis=1)
      upos = nn.Embed(self.num_upos + 1, self.tag_dim, dtype=p.output_dtype, param_dtype=p.param_dtype,
                      name="upos_embedding")
      states = jnp.concatenate([states, upos(tags)], -1)
    states = nn.Dropout(self.config.dropout_rate)(states, deterministic=self.deterministic)
    mlp = lambda dim, name: _mlp(self.config, dim, self.mlp_dropout, self.deterministic, name)(states)  # noqa: E731
    arc_dep, arc_head = mlp(self.arc_dim, "arc_dep"), mlp(self.arc_dim, "arc_head")
    rel_dep, rel_head = mlp(self.rel_dim, "rel_dep"), mlp(self.rel_dim, "rel_head")
    u = self.param("arc_bilinear", nn.initializers.zeros, (self.arc_dim, self.arc_dim))
    u_head = self.param("arc_head_bias", nn.initializers.zeros, (self.arc_dim,))
    arcs = jnp.einsum("bdi,ij,bhj->bdh", arc_dep, u, arc_head) + (arc_head @ u_head)[:, None, :]
    u_rel = self.param("rel_bilinear", nn.initializers.zeros, (self.num_rels, self.rel_dim, self.rel_dim))
    w_dep = self.param("rel_dep_linear", nn.initializers.xavier_uniform(), (self.rel_dim, self.num_rels))
    w_head = self.param("rel_head_linear", nn.initializers.xavier_uniform(), (self.rel_dim, self.num_rels))
    b_rel = self.param("rel_bias", nn.initializers.zeros, (self.num_rels,))
    rels = (jnp.einsum("bdi,rij,bhj->bdhr", rel_dep, u_rel, rel_head) + (rel_dep @ w_dep)[:, :, None, :]
            + (rel_head @ w_head)[:, None, :, :] + b_rel)
    return {"arcs": arcs, "rels": rels}  # (B, W + 1, W + 1) [dependent, head], (B, W + 1, W + 1, R)


def _head_mask(word_mask: jax.Array) -> jax.Array:
  """(B, W + 1) 1 for the root and the sentence's words: the possible heads."""
  return jnp.concatenate([jnp.ones_like(word_mask[:, :1]), word_mask], axis=1).astype(bool)


@dataclasses.dataclass(frozen=True)
class BiaffineParserModel(Model):
  """Arc + relation cross-entropy per word (module docstring); metrics: loss, uas, las (gold-head relations)."""

  config: TransformerConfig
  num_rels: int = 37
  num_upos: Optional[int] = None
  arc_dim: int = 500
  rel_dim: int = 100
  lstm_hidden: Optional[int] = None

  def network(self, deterministic: bool) -> nn.Module:
    return BiaffineParserNetwork(self.config, self.num_rels, self.num_upos, self.arc_dim, self.rel_dim,
                                 lstm_hidden=self.lstm_hidden, deterministic=deterministic)

  def loss_terms(self, outputs, batch):
    heads = batch["heads"].astype(jnp.int32)  # -1: a head cut away by truncation (no loss; still a head)
    weights = batch["word_mask"].astype(jnp.float32) * (heads >= 0)
    heads = jnp.maximum(heads, 0)
    arcs = jnp.where(_head_mask(batch["word_mask"])[:, None, :], outputs["arcs"], NEG)[:, 1:]  # dependents 1..W
    arc_nll = -jnp.take_along_axis(jax.nn.log_softmax(arcs), heads[..., None], axis=-1)[..., 0]
    rels = jnp.take_along_axis(outputs["rels"][:, 1:], heads[:, :, None, None], axis=2)[:, :, 0]  # (B, W, R)
    rel_targets = batch["rels"].astype(jnp.int32)
    rel_nll = -jnp.take_along_axis(jax.nn.log_softmax(rels), rel_targets[..., None], axis=-1)[..., 0]
    loss = jnp.sum((arc_nll + rel_nll) * weights)
    head_ok = (jnp.argmax(arcs, -1) == heads).astype(jnp.float32)
    rel_ok = (jnp.argmax(rels, -1) == rel_targets).astype(jnp.float32)
    return loss, {"weight": jnp.sum(weights), "loss": loss, "uas": jnp.sum(head_ok * weights),
                  "las": jnp.sum(head_ok * rel_ok * weights)}


  def predict_batch(self, params, batch: dict) -> dict:
    """{"arcs": (B, W + 1, W + 1) scores, "rel_ids": (B, W + 1, W + 1) each pair's best relation} (the relation
    scores of every pair, W^2 R floats per sentence, stay on the device)."""
    out = self.network(True).apply({"params": params}, batch)
    return {"arcs": out["arcs"], "rel_ids": jnp.argmax(out["rels"], axis=-1).astype(jnp.int32)}


def decode(arcs: np.ndarray, rel_ids: np.ndarray, words: int) -> tuple[list[int], list[int]]:
  """(heads, relation ids) of one sentence's `words` words from its arc scores (W + 1, W + 1) [dependent, head]
  and each pair's best relation (W + 1, W + 1): the MST with one root word, each word's relation at its head."""
  n = words + 1
  heads = mst_heads(np.asarray(arcs, np.float64)[:n, :n].T)  # mst_heads takes [head, dependent]
  return [int(h) for h in heads[1:]], [int(r) for r in np.asarray(rel_ids)[np.arange(1, n), heads[1:]]]
