"""Mixed-precision policies: which dtype each kind of number is held and computed in.

One policy per run, named by `TransformerConfig.dtype` (the Gin macro
`PRECISION` of every model preset; `--gin.PRECISION="'bfloat16'"` switches a
run). A `Precision` gives

* `param_dtype`, float32: every parameter, so also the gradients and the
  optimizer's moments (optax keeps them in the parameters' dtype);
* `compute_dtype`: the Transformer's activations and matrix products
  (embeddings, attention, feed-forward, pooler, MLM and seq2seq output
  projections);
* `statistics_dtype`, float32: layer norm's mean and variance (and the
  residual sum it normalises), every softmax (attention) and log-softmax
  (losses), the feature-based scalar mix;
* `output_dtype`, float32: the logits a loss reads, the loss and the metrics;
  the small task heads on the encoder's states (classification, tagging, QA,
  the biaffine parser, the feature-based BiLSTM) compute in it too: their
  matrix products are a small share of a step's work, and their bias
  gradients, sums over every token, stay float32 sums.

`float32` computes everything in float32: the numerics of every run before
the policies existed. `bfloat16` computes in bfloat16 (8 significant bits: a
rounding errs by up to 2^-8, 0.4%, relative); `tests/test_precision.py` bounds
its losses and gradients against float32.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from xtreme_jax import errors


@dataclasses.dataclass(frozen=True)
class Precision:
  """A named mixed-precision policy (module docstring)."""

  name: str
  compute_dtype: jnp.dtype
  param_dtype: jnp.dtype = jnp.dtype("float32")
  statistics_dtype: jnp.dtype = jnp.dtype("float32")
  output_dtype: jnp.dtype = jnp.dtype("float32")

  def output(self, x):
    """`x` in the output dtype (logits for a loss, states entering a task head)."""
    return x.astype(self.output_dtype)


POLICIES = {name: Precision(name, jnp.dtype(name)) for name in ("float32", "bfloat16")}


def get(name: str) -> Precision:
  """The policy called `name`; a one-line ConfigError naming the valid ones otherwise."""
  if not isinstance(name, str) or name not in POLICIES:
    raise errors.ConfigError(f"precision (TransformerConfig.dtype, Gin PRECISION) = {name!r}; expected one of "
                             f"{tuple(POLICIES)}")
  return POLICIES[name]
