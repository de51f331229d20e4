"""Self-attention masks of ProphetNet's n-stream decoder (xFNP predicts the next n = 2 tokens).

Plain numpy (pass the result to `jnp.asarray`); 1 = may attend, 0 = may not.

Streams over a target of length T. Position t of every stream stands for the
decoder step t: the main stream's input there is the previous token (teacher
forcing: BOS or, in xFNP, `decoder_inputs`, then target[t - 1]), so main-stream
slot j holds the content of the tokens before target j. Predicting stream k
(k = 1..n; its input is a learned stream embedding plus the position one
after the main stream's, ProphetNet's `real_positions + 1`) at step t
predicts target[t] having seen the tokens before target[t - k + 1]: it is
trained as "predict the token k - 1 places after the next one"; ProphetNet's
loss compares every stream with the same target (`ngram_target_weights`).

Masks (exactly microsoft/ProphetNet's `ngram_attention_bias` and causal
`buffered_future_mask`, with -inf -> 0 and 0 -> 1):
  * main stream (T, T): slot t attends to main slots j <= t (causal).
  * predicting stream k (T, 2T): the key axis is [main slots 0..T-1, stream-k
    slots 0..T-1] (ProphetNet concatenates the main stream's keys / values
    with the stream's own). Slot t attends to main slots j <= max(t - k + 1, 0)
    (the content of the previous tokens: for k = 1 everything the main stream
    at t has, for k = 2 one token less; main slot 0, the start token, is always
    visible) and to its own slot t, nothing else (no other predicting slot, no
    other stream).
The masks are over slots, not positions: the predicting streams' position
shift changes none of them (in ProphetNet it shows only in the relative
position buckets, which this decoder does not have).
`ngram_self_attention_mask` gives the same as one ((1 + n) T, (1 + n) T)
mask over the streams concatenated [main, stream 1, ..., stream n] on both
axes, for a single attention call over all streams.
"""

from __future__ import annotations

import numpy as np

from xtreme_jax import errors


def _check(length: int, ngram: int) -> None:
  if not isinstance(length, (int, np.integer)) or length < 1:
    raise errors.ConfigError(f"target length={length!r}; expected an integer >= 1")
  if not isinstance(ngram, (int, np.integer)) or ngram < 1:
    raise errors.ConfigError(f"ngram={ngram!r}; expected an integer >= 1 (the number of predicting streams)")


def main_stream_mask(length: int) -> np.ndarray:
  """(T, T) int32: the causal mask of the main stream (query t, key j: j <= t)."""
  _check(length, 1)
  return np.tril(np.ones((length, length), np.int32))


def predicting_stream_masks(length: int, ngram: int) -> np.ndarray:
  """(n, T, 2T) int32: stream k's (index k - 1) mask over [main slots, its own slots] (module docstring)."""
  _check(length, ngram)
  t = np.arange(length)[:, None]
  j = np.arange(length)[None, :]
  out = np.zeros((ngram, length, 2 * length), np.int32)
  for k in range(1, ngram + 1):
    out[k - 1, :, :length] = j <= np.maximum(t - k + 1, 0)
    out[k - 1, :, length:] = np.eye(length, dtype=np.int32)
  return out


def ngram_attention_masks(length: int, ngram: int) -> tuple[np.ndarray, np.ndarray]:
  """(main_stream_mask(T), predicting_stream_masks(T, n))."""
  return main_stream_mask(length), predicting_stream_masks(length, ngram)


def ngram_self_attention_mask(length: int, ngram: int) -> np.ndarray:
  """((1 + n) T, (1 + n) T) int32 over [main, stream 1, ..., stream n] on both axes (module docstring)."""
  main, predicting = ngram_attention_masks(length, ngram)
  size = (1 + ngram) * length
  out = np.zeros((size, size), np.int32)
  out[:length, :length] = main
  for k in range(1, ngram + 1):
    rows = slice(k * length, (k + 1) * length)
    out[rows, :length] = predicting[k - 1, :, :length]
    out[rows, k * length:(k + 1) * length] = predicting[k - 1, :, length:]
  return out


def mask_to_bias(mask, dtype=np.float32) -> np.ndarray:
  """An additive attention bias: 0 where `mask` is 1, the dtype's most negative value where it is 0."""
  mask = np.asarray(mask)
  return np.where(mask.astype(bool), 0, np.finfo(dtype).min).astype(dtype)


def ngram_target_weights(target_mask, ngram: int, target_offsets=None) -> np.ndarray:
  """(n, ...) float32 loss weights of the predicting streams (ProphetNet's criterion).

  Every stream predicts `targets` (weights: `target_mask`, e.g. 1 on tokens,
  0 on padding); with xFNP's `target_offsets` (each token's index within its
  masked span), stream k (1-based) is trained only on tokens with offset
  >= k - 1, since the tokens it would have seen lie before the span.
  """
  _check(1, ngram)
  weights = np.asarray(target_mask, np.float32)
  out = np.stack([weights] * ngram)
  if target_offsets is not None:
    offsets = np.asarray(target_offsets)
    for k in range(ngram):
      out[k] *= offsets >= k
  return out
