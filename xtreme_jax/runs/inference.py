"""A fine-tuned model's outputs and per-example predictions for featurised examples (dev scores, training
accuracy, test predictions and FILTER's soft labels all predict through here)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from xtreme_jax.data.features.sources import FeatureListSource
from xtreme_jax.runs import language_ids, task_kinds
from xtreme_jax.training.trainer import Trainer


def predict_features(trainer: Trainer, params: Any, features: list, keys: tuple, batch_size: int) -> Any:
  """The model's outputs for every feature dict, in order (batches of `keys`; the last key weights out the
  padding rows of the last batch; the windows' language ids join them, `language_ids.fed_keys`)."""
  source = FeatureListSource(features, batch_size, model_keys=language_ids.fed_keys(keys, features),
                             weight_keys=(keys[-1],))
  outs = list(trainer.predict(params, source.eval_batches(*trainer.feed_slot)))
  return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[: len(features)], *outs)


def decode(kind: task_kinds.Kind, spec, recipe, trainer: Trainer, params: Any, data: task_kinds.Featurised,
           vocab) -> list:
  """Per-example predictions of `kind` (a label, a tag list, {id: answer}, ...) for the featurised examples
  `data`, predicted with the recipe's batch size."""
  predict = lambda keys: predict_features(trainer, params, data.features, keys, recipe.batch_size)  # noqa: E731
  return kind.decode(spec, recipe, predict, data, vocab)
