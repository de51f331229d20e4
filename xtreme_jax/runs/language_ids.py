"""The language ids a model with named languages (`TransformerConfig.languages`: language embeddings or a
position table per language) reads: each example's from its language (`with_language_id`, as the runner reads
it), each window's from its example (`add_language_ids`), fed with the task kind's own keys (`fed_keys`)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from xtreme_jax import errors
from xtreme_jax.networks.config import TransformerConfig

LANGUAGE_IDS = "language_ids"


def with_language_id(examples: Sequence[dict], language: str, config: Optional[TransformerConfig],
                     where: str) -> list:
  """`examples` of `language`, each with its `language_id` for a model with named languages (as they are
  otherwise, or without a model); a language the model does not name is refused, naming `where` it came from."""
  if config is None or not config.languages:
    return examples
  errors.require(language in config.languages, f"{where}: language {language!r} has no language id in the model "
                 f"(TransformerConfig.languages: {list(config.languages)})")
  index = config.languages.index(language)
  return [{**ex, "language_id": index} for ex in examples]


def add_language_ids(features: Sequence[dict], owners: Sequence[int], examples: Sequence[dict]) -> None:
  """Each window (`features[k]`, of example `owners[k]`) of an example with a `language_id` carries it as
  `LANGUAGE_IDS` (in place)."""
  if examples and "language_id" in examples[0]:
    for f, owner in zip(features, owners):
      f[LANGUAGE_IDS] = np.asarray(examples[owner]["language_id"], np.int32)


def fed_keys(keys: tuple, features: Sequence[dict]) -> tuple:
  """The model keys of `features`: `keys`, led by `LANGUAGE_IDS` where the windows carry them."""
  return (LANGUAGE_IDS,) + tuple(keys) if features and LANGUAGE_IDS in features[0] else tuple(keys)
