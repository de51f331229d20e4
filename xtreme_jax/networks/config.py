"""Frozen configuration of the Transformer networks (BERT / XLM-R / VECO)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from xtreme_jax import errors
from xtreme_jax.networks import precision as precision_lib

POSITION_STYLES = ("absolute", "roberta")
# `layers.dot_product_attention`: auto (cudnn on a GPU in bfloat16, else reference), the reference einsum + softmax
# (the only one with attention-probability dropout), or `jax.nn.dot_product_attention`'s xla / cudnn kernels.
ATTENTION_IMPLEMENTATIONS = ("auto", "reference", "xla", "cudnn", "flash")
DROPOUT_MASKS = ("auto", "flax", "hash")


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Shape and numerics of a BERT-family Transformer.

  `position_style='absolute'` numbers positions 0..L-1 (BERT);
  `'roberta'` numbers non-pad tokens from `pad_token_id + 1` and gives pads
  `pad_token_id` (XLM-R / RoBERTa). `dtype` names the mixed-precision policy
  (`precision.POLICIES`: 'float32' or 'bfloat16', the compute dtype; parameters,
  statistics and losses are float32 in both), exposed as `precision`.
  `num_languages > 0` adds XLM-style language
  embeddings (one vector per language id, summed with the word / position /
  token-type embeddings); every input then needs per-token language ids.
  Off (0) by default, as in mBERT, XLM-R and VECO. `languages` names the ids
  in order (a fine-tuned model then takes each example's id from its
  language); `language_positions=True` gives each language its own position
  table instead of a language vector (Dufter & Schuetze 2020's separate
  position embeddings).
  `tie_word_embeddings=False` gives the MLM head its own output projection
  (`mlm_head/decoder/kernel`, (hidden, vocab)) instead of the word embeddings.
  `attention_implementation` selects the attention kernel
  (`ATTENTION_IMPLEMENTATIONS`, `layers.dot_product_attention`).
  `dropout_masks` how the bricks' hidden dropout draws its masks (`layers.dropout_masks`): 'flax'
  (`flax.linen.Dropout`'s threefry bits), 'hash' (the flash kernel's counter hash of positions, one seed per
  call, elementwise, fused by XLA into its neighbours) or 'auto' (the default): hash on a GPU, where XLA
  computes every threefry mask of a step in a pass of its own (2.1 ms of a 59 ms mbert_base step on an H200),
  flax elsewhere (the numbers of every earlier run).
  """

  vocab_size: int
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  mlp_dim: int = 3072
  max_positions: int = 512
  type_vocab_size: int = 2
  num_languages: int = 0
  languages: tuple = ()
  language_positions: bool = False
  tie_word_embeddings: bool = True
  pad_token_id: int = 0
  position_style: str = "absolute"
  layer_norm_eps: float = 1e-12
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  dtype: str = "float32"
  scan_layers: bool = False
  remat: bool = False
  attention_implementation: str = "auto"
  dropout_masks: str = "auto"

  def __post_init__(self):
    if self.position_style not in POSITION_STYLES:
      raise errors.ConfigError(f"position_style={self.position_style!r}; expected one of {POSITION_STYLES}")
    if self.hidden_size % self.num_heads:
      raise errors.ConfigError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
    if self.num_languages < 0:
      raise errors.ConfigError(f"num_languages={self.num_languages}; expected >= 0 (0: no language embeddings)")
    object.__setattr__(self, "languages", tuple(self.languages))
    if self.languages and len(self.languages) != self.num_languages:
      raise errors.ConfigError(f"languages={list(self.languages)} names {len(self.languages)} language ids but "
                               f"num_languages={self.num_languages}; expected one name per id")
    if self.language_positions and not self.num_languages:
      raise errors.ConfigError("language_positions=True needs num_languages > 0 (a position table per language)")
    if self.attention_implementation not in ATTENTION_IMPLEMENTATIONS:
      raise errors.ConfigError(f"attention_implementation={self.attention_implementation!r}; expected one of "
                               f"{ATTENTION_IMPLEMENTATIONS}")
    if self.dropout_masks not in DROPOUT_MASKS:
      raise errors.ConfigError(f"dropout_masks={self.dropout_masks!r}; expected one of {DROPOUT_MASKS}")
    precision_lib.get(self.dtype)

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads

  @property
  def precision(self) -> precision_lib.Precision:
    return precision_lib.get(self.dtype)

  @property
  def compute_dtype(self) -> Any:
    return self.precision.compute_dtype

  def replace(self, **changes) -> "TransformerConfig":
    return dataclasses.replace(self, **changes)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_dict(cls, d: dict) -> "TransformerConfig":
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
      raise errors.ConfigError(f"unknown TransformerConfig keys {unknown}; expected a subset of {sorted(known)}")
    return cls(**d)
