"""The contract every model wrapper follows, and backbone weight loading.

A model owns a Flax network whose parameters hold the Transformer under
`params['backbone']` (the `TransformerEncoder` tree) next to task heads.
`loss_fn` returns *sums* (loss and every metric, plus the total `weight`),
so that gradient accumulation and multi-device reduction are exact.
"""

from __future__ import annotations

import abc
import logging
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import errors
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import stack_layer_params, unstack_layer_params


class Model(abc.ABC):
  """`init`, `loss_fn`, `predict_batch` around a Flax network."""

  config: TransformerConfig

  @abc.abstractmethod
  def network(self, deterministic: bool) -> nn.Module:
    """The Flax module; `deterministic=False` enables dropout."""

  @abc.abstractmethod
  def loss_terms(self, outputs: Any, batch: dict) -> tuple[jax.Array, dict]:
    """(sum of losses, dict of metric sums incl. 'weight') from outputs."""

  def init(self, rng: jax.Array, batch: dict) -> Any:
    """Boxed (logically partitioned) parameters for a batch of this shape."""
    return self.network(True).init({"params": rng}, batch)["params"]

  def loss_fn(self, params: Any, batch: dict, rng: jax.Array | None, deterministic: bool = False):
    rngs = None if deterministic else {"dropout": rng}
    outputs = self.network(deterministic).apply({"params": params}, batch, rngs=rngs)
    return self.loss_terms(outputs, batch)

  def predict_batch(self, params: Any, batch: dict) -> Any:
    return self.network(True).apply({"params": params}, batch)


def masked_cross_entropy(logits: jax.Array, targets: jax.Array, weights: jax.Array) -> tuple[jax.Array, dict]:
  """Weighted token cross-entropy sum and accuracy sum (float32)."""
  logits = logits.astype(jnp.float32)
  logp = jax.nn.log_softmax(logits)
  nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
  weights = weights.astype(jnp.float32)
  correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32)
  loss = jnp.sum(nll * weights)
  return loss, {"weight": jnp.sum(weights), "loss": loss, "accuracy": jnp.sum(correct * weights)}


def load_backbone(params: Any, pretrained: dict, config: TransformerConfig) -> Any:
  """`params` with its backbone replaced by `pretrained` (a TransformerEncoder tree of host arrays).

  Only the shapes of `params['backbone']` are read; the result's backbone
  holds numpy arrays, the rest of `params` is returned as given.
  Sub-trees the model has no use for (e.g. the MLM head under a classifier)
  are dropped; anything the model needs that `pretrained` lacks, or holds
  with another shape, raises one error listing every such parameter.
  Cross-attention parameters, which an encoder checkpoint never holds, keep
  their fresh values (VECO's warm start from XLM-R). Converts between the
  scanned and unrolled layer layouts as needed, and gives a model with an
  untied MLM output layer the transposed word embeddings of a tied checkpoint
  (the same logits); a tied model refuses an untied checkpoint's output layer.
  """
  pretrained = _match_output_layer(dict(pretrained), nn.unbox(params["backbone"]), config)
  enc = pretrained["encoder"]
  if config.scan_layers and "layers" not in enc:
    pretrained["encoder"] = stack_layer_params(enc, config.num_layers)
  elif not config.scan_layers and "layers" in enc:
    pretrained["encoder"] = unstack_layer_params(enc, config.num_layers)
  flat_pre = {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_leaves_with_path(pretrained)}
  problems = []

  fresh = []

  def take(path, leaf):
    key = jax.tree_util.keystr(path)
    if key not in flat_pre:
      if "'cross_attention'" in key:  # never part of an encoder checkpoint (VECO warm start)
        fresh.append(key)
        return leaf
      problems.append(f"missing {key} {tuple(leaf.shape)}")
      return leaf
    value = flat_pre.pop(key)
    if tuple(value.shape) != tuple(leaf.shape):
      problems.append(f"shape of {key}: checkpoint {tuple(value.shape)}, model {tuple(leaf.shape)}")
      return leaf
    return np.asarray(value, dtype=leaf.dtype)

  backbone = jax.tree_util.tree_map_with_path(take, nn.unbox(params["backbone"]))
  if problems:
    more = f"; ... and {len(problems) - 8} more" if len(problems) > 8 else ""
    raise errors.ConfigError("pretrained backbone does not fit the model (check the model preset against the "
                             "checkpoint's config.json): " + "; ".join(problems[:8]) + more)
  if fresh:
    logging.info("%d cross-attention parameters are not in the checkpoint and start fresh", len(fresh))
  if flat_pre:
    logging.info("pretrained parameters not used by this model: %s", sorted({k.split("]")[0] + "]" for k in flat_pre}))
  return {**params, "backbone": backbone}


def _match_output_layer(pretrained: dict, backbone: Any, config: TransformerConfig) -> dict:
  """`pretrained` with its MLM output layer in the form (tied or untied) the model's backbone has."""
  head = pretrained.get("mlm_head")
  if "mlm_head" not in backbone or head is None:
    return pretrained  # the model has no MLM head (it is dropped), or the checkpoint lacks one (reported)
  if "decoder" in head and config.tie_word_embeddings:
    raise errors.ConfigError("the checkpoint has an untied MLM output layer (mlm_head/decoder) but the model ties "
                             "it to the word embeddings; set TransformerConfig.tie_word_embeddings = False in the "
                             "model preset")
  if "decoder" not in head and not config.tie_word_embeddings:
    words = np.asarray(pretrained["embeddings"]["word_embeddings"]["embedding"])
    logging.info("the checkpoint ties the MLM output layer to the word embeddings: the untied decoder starts "
                 "from them (the same logits)")
    pretrained["mlm_head"] = {**head, "decoder": {"kernel": np.ascontiguousarray(words.T)}}
  return pretrained


def dummy_inputs(batch_size: int, seq_len: int) -> dict:
  """Shape-only inputs for `init`."""
  return {"input_ids": np.zeros((batch_size, seq_len), np.int32),
          "input_mask": np.ones((batch_size, seq_len), np.int32),
          "token_type_ids": np.zeros((batch_size, seq_len), np.int32)}
