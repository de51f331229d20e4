"""VECO pretraining: IS-MLM on each segment + CS-MLM in both directions.

Batch (per pair of segments x, y; all (batch, ...) arrays):

    x_input_ids, x_input_mask, [x_token_type_ids, x_positions]
    y_input_ids, y_input_mask, [y_token_type_ids, y_positions]
    x_masked_positions, x_masked_ids, x_masked_weights   (batch, max_predictions)
    y_masked_positions, y_masked_ids, y_masked_weights

`*_input_ids` are the *masked* inputs (BERT 80/10/10 already applied). One
set of masked slots per segment serves both objectives:

* IS-MLM(x): `encode(x)` predicts x's masked tokens (same for y);
* CS-MLM(x, y): `decode(y, memory=stop_gradient(encode(x)))` — causal
  self-attention over the masked y, cross-attention to the detached final
  encoder states of x — predicts y's masked tokens at y's masked positions.
  The memory is the (detached) output of the very encoder pass used by
  IS-MLM(x), so each segment is encoded once.

Loss sum = IS(x) + IS(y) + CS(x->y) + CS(y->x) [+ TLM].

TLM (XLM style) runs when the batch carries `tlm_input_ids, tlm_input_mask,
tlm_positions` and `tlm_masked_*`; rows without TLM have zero TLM weights.
`tlm_positions` (like the optional `x_positions` / `y_positions`) count
tokens from each segment's start, 0 at its first token: the concatenated
pair restarts at the second sentence. The embeddings map them to
position-table rows as each segment alone gets them (`layers.position_ids`):
rows 0.. for BERT, `pad_token_id + 1`.. (2..) for RoBERTa / XLM-R. So the
TLM pair may be longer than the position table; what must fit is each
segment: x and y (whose lengths bound the TLM pair's two parts, specials
included) are checked against `layers.max_tokens` at trace time (a one-line
`ConfigError`). Position values themselves are data and are not checked.

Language embeddings (XLM; `config.num_languages > 0`, off by default) read
`x_language_id`, `y_language_id` (batch,) for the segments and
`tlm_language_ids` (batch, T) for the TLM input.

Metric sums (the trainer divides every one by `weight`):

    weight       = sum(x_masked_weights) + sum(y_masked_weights)  (masked tokens)
    loss         = is_loss + cs_loss  -> /weight: mean IS nll + mean CS nll per masked token
    is_loss      = nll sum of IS(x) + IS(y)     -> /weight: IS-MLM mean nll
    cs_loss      = nll sum of CS(x,y) + CS(y,x) -> /weight: CS-MLM mean nll
    is_accuracy, cs_accuracy                    -> /weight: per-objective token accuracy
    tlm_loss, tlm_accuracy, tlm_weight          -> /tlm_weight (the trainer divides
                                                   `<name>_*` by `<name>_weight` when present)

Not here: warm start from XLM-R, the cross-attention-only first stage, NLG
assembly.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import errors
from xtreme_jax.models.base import Model, masked_cross_entropy
from xtreme_jax.networks import layers
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.veco import VecoNetwork

OBJECTIVES = ("is_x", "is_y", "cs_xy", "cs_yx")


def _gather(states: jax.Array, positions: jax.Array) -> jax.Array:
  return jnp.take_along_axis(states, positions[..., None], axis=1)


class VecoPretrainNetwork(nn.Module):
  """Returns logits at the masked slots for each enabled objective."""

  config: TransformerConfig
  deterministic: bool = True
  objectives: tuple = ("is", "cs", "tlm")

  @nn.compact
  def __call__(self, batch: dict) -> dict:
    backbone = VecoNetwork(self.config, self.deterministic, name="backbone")

    languages = self.config.num_languages > 0
    for s in ("x", "y"):  # the segments, alone and as the TLM pair's parts, must fit the position table
      layers.check_length(self.config, batch[f"{s}_input_ids"].shape[-1], f"VECO segment length ({s}_input_ids)",
                          "lower segment_len (a segment is segment_len + 2 tokens)")

    def seg(s):
      ids = batch[f"{s}_input_ids"]
      lang = jnp.broadcast_to(batch[f"{s}_language_id"][:, None], ids.shape) if languages else None
      return ids, batch[f"{s}_input_mask"], batch.get(f"{s}_token_type_ids"), batch.get(f"{s}_positions"), lang

    x_ids, x_mask, x_tt, x_pos, x_lang = seg("x")
    y_ids, y_mask, y_tt, y_pos, y_lang = seg("y")
    hx = backbone.encode(x_ids, x_mask, x_tt, x_pos, x_lang)
    hy = backbone.encode(y_ids, y_mask, y_tt, y_pos, y_lang)
    if self.is_initializing():
      backbone.pool(hx)  # create the pooler params (kept for the NLU encoder tree)
    xp, yp = batch["x_masked_positions"], batch["y_masked_positions"]
    out = {}
    if "is" in self.objectives:
      out["is_x"] = backbone.mlm_logits(_gather(hx, xp))
      out["is_y"] = backbone.mlm_logits(_gather(hy, yp))
    if "cs" in self.objectives or self.is_initializing():  # init creates the cross-attention params
      # CS-MLM: no gradient flows into the encoder pass that produced the memory.
      dy = backbone.decode(y_ids, y_mask, jax.lax.stop_gradient(hx), x_mask, y_tt, y_pos, y_lang)
      dx = backbone.decode(x_ids, x_mask, jax.lax.stop_gradient(hy), y_mask, x_tt, x_pos, x_lang)
      out["cs_xy"] = backbone.mlm_logits(_gather(dy, yp))   # predicts y given x
      out["cs_yx"] = backbone.mlm_logits(_gather(dx, xp))   # predicts x given y
    if "tlm" in self.objectives and "tlm_input_ids" in batch:
      h = backbone.encode(batch["tlm_input_ids"], batch["tlm_input_mask"], batch.get("tlm_token_type_ids"),
                          batch.get("tlm_positions"), batch["tlm_language_ids"] if languages else None)
      out["tlm"] = backbone.mlm_logits(_gather(h, batch["tlm_masked_positions"]))
    return out


@dataclasses.dataclass(frozen=True)
class VecoModel(Model):
  """Sum of the enabled objectives; see the module docstring for the metrics.

  `objectives`: ("is", "cs", "tlm") is VECO; ("is",) is MLM alone on both
  segments (mBERT / XLM-R style); ("is", "tlm") is MLM + TLM (XLM / Unicoder).
  """

  config: TransformerConfig
  objectives: tuple = ("is", "cs", "tlm")

  def __post_init__(self):
    unknown = sorted(set(self.objectives) - {"is", "cs", "tlm"})
    if unknown or not self.objectives:
      raise errors.ConfigError(f"objectives={self.objectives!r}; expected a non-empty subset of ('is', 'cs', 'tlm')")

  def network(self, deterministic: bool) -> nn.Module:
    return VecoPretrainNetwork(self.config, deterministic, tuple(self.objectives))

  def loss_terms(self, logits: dict, batch: dict):
    targets = {"is_x": "x", "is_y": "y", "cs_xy": "y", "cs_yx": "x"}
    terms = {k: masked_cross_entropy(logits[k], batch[f"{s}_masked_ids"], batch[f"{s}_masked_weights"])[1]
             for k, s in targets.items() if k in logits}
    # IS and CS share the masked slots of x and y, so either objective's weight is the total.
    sums = {"weight": jnp.sum(batch["x_masked_weights"]) + jnp.sum(batch["y_masked_weights"]), "loss": 0.0}
    for name, (a, b) in {"is": ("is_x", "is_y"), "cs": ("cs_xy", "cs_yx")}.items():
      if a in terms:
        sums[f"{name}_loss"] = terms[a]["loss"] + terms[b]["loss"]
        sums[f"{name}_accuracy"] = terms[a]["accuracy"] + terms[b]["accuracy"]
        sums["loss"] = sums["loss"] + sums[f"{name}_loss"]
    if "tlm" in logits:
      tlm = masked_cross_entropy(logits["tlm"], batch["tlm_masked_ids"], batch["tlm_masked_weights"])[1]
      sums.update(tlm_loss=tlm["loss"], tlm_accuracy=tlm["accuracy"], tlm_weight=tlm["weight"])
      sums["loss"] = sums["loss"] + tlm["loss"]
    return sums["loss"], sums

  def dummy_batch(self, batch_size: int, seq_len: int, max_predictions: int = 4) -> dict:
    batch = {}
    for s in ("x", "y"):
      batch.update({
          f"{s}_input_ids": np.zeros((batch_size, seq_len), np.int32),
          f"{s}_input_mask": np.ones((batch_size, seq_len), np.int32),
          f"{s}_token_type_ids": np.zeros((batch_size, seq_len), np.int32),
          f"{s}_masked_positions": np.zeros((batch_size, max_predictions), np.int32),
          f"{s}_masked_ids": np.zeros((batch_size, max_predictions), np.int32),
          f"{s}_masked_weights": np.zeros((batch_size, max_predictions), np.float32),
          f"{s}_language_id": np.zeros((batch_size,), np.int32),
      })
    return batch
