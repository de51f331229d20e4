"""Extractive QA: start / end logits per token, as BertForQuestionAnswering.

Features: `input_ids, input_mask, token_type_ids, start_positions,
end_positions, example_weights`. The loss is the mean of the start and end
cross-entropies; positions outside the context are left to span decoding.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn

from xtreme_jax.models.base import Model, masked_cross_entropy
from xtreme_jax.models.classification import dense
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder, batch_inputs


class SpanNetwork(nn.Module):
  config: TransformerConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, batch: dict) -> dict:
    out = TransformerEncoder(self.config, self.deterministic, name="backbone")(**batch_inputs(batch))
    logits = dense(self.config, 2, "qa_outputs")(out.sequence)
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


@dataclasses.dataclass(frozen=True)
class QaModel(Model):
  """(CE(start) + CE(end)) / 2 per window; metrics: loss, start/end accuracy."""

  config: TransformerConfig

  def network(self, deterministic: bool) -> nn.Module:
    return SpanNetwork(self.config, deterministic)

  def loss_terms(self, outputs, batch):
    w = batch["example_weights"]
    start, s = masked_cross_entropy(outputs["start_logits"], batch["start_positions"], w)
    end, e = masked_cross_entropy(outputs["end_logits"], batch["end_positions"], w)
    loss = (start + end) / 2
    return loss, {"weight": s["weight"], "loss": loss, "start_accuracy": s["accuracy"],
                  "end_accuracy": e["accuracy"]}
