"""Unicoder's generation pretraining inputs (XGLUE): xDAE noise and xFNP span masking, as seqio preprocessors.

Everything here is TensorFlow (tf.data) code over 1-D int32 token ids, with
stateless randomness: a function of (ids, seed) only. The seqio preprocessors
draw one seed per example with `seqio.map_over_dataset(num_seeds=1)`, so a
dataset built with a fixed `seed` (`Task.get_dataset(seed=...)`, or under
`seqio.map_seed_manager`) is reproducible.

Tokens, not words: every noise works on the vocabulary's tokens
(sentencepiece pieces or WordPiece tokens), as Unicoder's released xDAE code
(microsoft/Unicoder, `generation/fairseq/data/xdae_denoising_dataset.py`)
does for shuffling, dropping and blanking; BART's infilling there can be
widened to whole words (pieces starting with "▁") but not for languages
written without spaces (zh, ja, th), and we keep one rule for all languages.

Special tokens: the leading and trailing runs of `special_ids` (by default
the vocabulary's BOS, EOS and padding) stay in place; the noise applies to the
body between them (a special id inside the body is noised like any token, as
Unicoder's / BART's code does with an inner EOS).

xDAE (`NOISES`; `xdae_noise` applies one, or a list in order; `targets` is the
original, `inputs` the noised copy):
  * `shuffle` (`local_shuffle`): token i gets the key i + u, u ~ U(0, 3), and
    the tokens are sorted by key; a token moves at most 2 places (< 3).
  * `drop` (`token_drop`): each token is dropped with probability 0.1; a
    non-empty body keeps at least one token (Unicoder's rule).
  * `mask` (`token_mask`): each token becomes the mask token with probability 0.1.
  * `text_infilling` (`text_infilling`, the default): BART's infilling. The
    budget is ceil(0.3 n) of the n body tokens (BART's 30%; the XGLUE paper
    gives no ratio and Unicoder's code takes it from a flag); span lengths
    ~ Poisson(3) are drawn until they sum to the budget (the last one cut,
    `span_lengths`). Each span of length >= 1 starts at a distinct uniformly
    drawn token and covers up to its length (cut at the body's end): its first
    token becomes one mask token, the rest are deleted (overlapping spans
    merge; a span whose start another span covers leaves no mask of its own).
    Each 0-length span inserts a mask token at a uniformly drawn slot.

xFNP (`xfnp_span_mask` / `span_mask`, ProphetNet's pretraining): the body is
cut into blocks of 64 tokens; in each block one continuous span of 9 tokens
(a shorter last block of m tokens: max(1, round(9 m / 64))) starting at a
uniform offset is masked, BERT style: 80% -> mask token, 10% -> a random
non-special token, 10% unchanged. Features out (all int32, 1-D):
  inputs            the corrupted sequence (same length as the original)
  targets           the original tokens of the spans, concatenated in order
  target_positions  each target token's index in `inputs`
  target_offsets    each target token's index within its span (0..8):
                    ProphetNet's `target_idx`; predicting stream k (0-based)
                    is trained on the tokens with offset >= k
  decoder_inputs    the original token before each target token (at
                    target_positions - 1; BOS for position 0): the main
                    stream's teacher-forced input, which `models/xfnp.py`
                    embeds at position target_positions - 1 (0 for a
                    target at 0) and the predicting streams at
                    target_positions, one after, as ProphetNet's
                    pretraining does (`real_positions + 1`).

`split_tokens` cuts a tokenized document into sequences that fit the
sequence length once BOS / EOS are added (what the seqio tasks of
`xtreme_tasks.pretraining` run before the noise).
"""

from __future__ import annotations

import functools
from typing import Mapping, Optional, Sequence, Union

import seqio
import tensorflow as tf

from xtreme_jax import errors

NOISES = ("shuffle", "drop", "mask", "text_infilling")
DEFAULT_NOISE = "text_infilling"
SHUFFLE_DISTANCE = 3.0
DROP_PROB = 0.1
MASK_PROB = 0.1
INFILLING_RATIO = 0.3
POISSON_LAMBDA = 3.0
BLOCK_SIZE = 64
SPAN_LENGTH = 9
BERT_MASK_PROB = 0.8
BERT_RANDOM_PROB = 0.1
DEFAULT_MAX_LENGTH = 512
XFNP_FEATURES = ("inputs", "targets", "target_positions", "target_offsets", "decoder_inputs")

_EXTRA_SPANS = 16  # Poisson draws beyond the budget (see span_lengths)


# ----------------------------------------------------------------------------- checks


def _check_prob(name: str, value: float) -> None:
  if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
    raise errors.ConfigError(f"{name}={value!r}; expected a probability in [0, 1]")


def _check_positive(name: str, value: float) -> None:
  if not isinstance(value, (int, float)) or not float(value) > 0:
    raise errors.ConfigError(f"{name}={value!r}; expected a number > 0")


def noise_names(noise: Union[str, Sequence[str]]) -> tuple[str, ...]:
  """`noise` (a name or a sequence of names) as a tuple of valid names; ConfigError names the valid ones."""
  names = tuple(noise) if isinstance(noise, (list, tuple)) else (noise,)
  bad = [n for n in names if n not in NOISES]
  if not names or bad:
    raise errors.ConfigError(f"unknown xDAE noise {bad[0] if bad else noise!r}; valid: {', '.join(NOISES)} "
                             "(a name or a list of them, applied in order)")
  return names


def check_xdae_args(noise: Union[str, Sequence[str]] = DEFAULT_NOISE, *, shuffle_distance: float = SHUFFLE_DISTANCE,
                    drop_prob: float = DROP_PROB, mask_prob: float = MASK_PROB,
                    infilling_ratio: float = INFILLING_RATIO, poisson_lambda: float = POISSON_LAMBDA) -> tuple:
  """Validates `xdae_noise`'s settings (ConfigError); returns the noise names."""
  names = noise_names(noise)
  _check_positive("shuffle_distance", shuffle_distance)
  _check_prob("drop_prob", drop_prob)
  _check_prob("mask_prob", mask_prob)
  _check_prob("infilling_ratio", infilling_ratio)
  _check_positive("poisson_lambda", poisson_lambda)
  return names


def check_xfnp_args(*, block_size: int = BLOCK_SIZE, span_length: int = SPAN_LENGTH,
                    mask_prob: float = BERT_MASK_PROB, random_prob: float = BERT_RANDOM_PROB) -> None:
  """Validates `xfnp_span_mask`'s settings (ConfigError)."""
  if not isinstance(block_size, int) or block_size < 1:
    raise errors.ConfigError(f"block_size={block_size!r}; expected an integer >= 1")
  if not isinstance(span_length, int) or not 1 <= span_length <= block_size:
    raise errors.ConfigError(f"span_length={span_length!r}; expected an integer in [1, block_size={block_size}]")
  _check_prob("mask_prob", mask_prob)
  _check_prob("random_prob", random_prob)
  if mask_prob + random_prob > 1.0 + 1e-12:
    raise errors.ConfigError(f"mask_prob + random_prob = {mask_prob + random_prob}; expected at most 1")


# ----------------------------------------------------------------------------- helpers


def _seed(seed) -> tf.Tensor:
  seed = tf.stack(seed) if isinstance(seed, (tuple, list)) else tf.convert_to_tensor(seed)
  return tf.cast(tf.reshape(seed, [2]), tf.int64)


def _split_seed(seed, num: int) -> list[tf.Tensor]:
  return tf.unstack(tf.random.experimental.stateless_split(_seed(seed), num), num=num)


def split_ends(ids: tf.Tensor, special_ids: Sequence[int]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """(head, body, tail): the leading and trailing runs of `special_ids` in `ids`, and what lies between."""
  ids = tf.convert_to_tensor(ids)
  n = tf.size(ids)
  if special_ids:
    specials = tf.constant(sorted({int(i) for i in special_ids}), ids.dtype)
    is_special = tf.reduce_any(tf.equal(ids[:, None], specials[None, :]), axis=1)
  else:
    is_special = tf.zeros_like(ids, tf.bool)
  body = tf.cast(tf.where(tf.logical_not(is_special))[:, 0], tf.int32)
  start = tf.reduce_min(tf.concat([body, [n]], 0))
  stop = tf.maximum(tf.reduce_max(tf.concat([body, [-1]], 0)) + 1, start)
  return ids[:start], ids[start:stop], ids[stop:]


def _on_body(fn, ids, special_ids):
  head, body, tail = split_ends(ids, special_ids)
  return tf.concat([head, fn(body), tail], 0)


def _ceil_share(n: tf.Tensor, share: float) -> tf.Tensor:
  """ceil(share * n), robust to float error (ceil(0.3 * 10) = 3)."""
  return tf.cast(tf.math.ceil(tf.cast(n, tf.float64) * float(share) - 1e-9), tf.int32)


def _first_k_of_permutation(n: tf.Tensor, k: tf.Tensor, seed) -> tf.Tensor:
  """k distinct indices of range(n), uniformly drawn (the first k of a random permutation)."""
  return tf.argsort(tf.random.stateless_uniform([n], seed, dtype=tf.float32))[:k]


def _scatter_flags(indices: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
  counts = tf.scatter_nd(indices[:, None], tf.ones_like(indices), [size])
  return counts > 0


def random_regular_ids(shape, seed, vocab_size: int, excluded: Sequence[int]) -> tf.Tensor:
  """Ids drawn uniformly from range(vocab_size) minus `excluded` (int32)."""
  excluded = sorted({int(i) for i in excluded if 0 <= int(i) < vocab_size})
  if vocab_size - len(excluded) < 1:
    raise errors.ConfigError(f"a vocabulary of {vocab_size} ids, all special: no id to draw a random token from")
  r = tf.random.stateless_uniform(shape, _seed(seed), 0, vocab_size - len(excluded), dtype=tf.int32)
  if not excluded:
    return r
  # The r-th regular id is r plus the number of excluded ids e_j with e_j - j <= r.
  shifted = tf.constant([e - j for j, e in enumerate(excluded)], tf.int32)
  flat = tf.reshape(r, [-1])
  return tf.reshape(flat + tf.searchsorted(shifted, flat, side="right", out_type=tf.int32), tf.shape(r))


# ----------------------------------------------------------------------------- xDAE noises (on a body)


def _shuffle_body(body, seed, distance):
  n = tf.size(body)
  keys = tf.cast(tf.range(n), tf.float64) + tf.random.stateless_uniform([n], seed, 0.0, distance, dtype=tf.float64)
  return tf.gather(body, tf.argsort(keys, stable=True))


def _drop_body(body, seed, prob):
  n = tf.size(body)
  s_keep, s_one = _split_seed(seed, 2)
  keep = tf.random.stateless_uniform([n], s_keep) >= prob
  one = tf.random.stateless_uniform([], s_one, 0, tf.maximum(n, 1), dtype=tf.int32)
  keep = tf.where(tf.reduce_any(keep) | tf.equal(n, 0), keep, tf.equal(tf.range(n), one))
  return tf.boolean_mask(body, keep)


def _mask_body(body, seed, prob, mask_id):
  blank = tf.random.stateless_uniform([tf.size(body)], seed) < prob
  return tf.where(blank, tf.cast(mask_id, body.dtype), body)


def span_lengths(budget, seed, poisson_lambda: float = POISSON_LAMBDA) -> tf.Tensor:
  """Span lengths ~ Poisson(lambda), in draw order, summing to exactly `budget` (BART's sampling).

  Lengths are drawn until their sum reaches the budget and the last one is
  cut to it; zeros are kept (0-length spans are insertions). The draws are
  `budget + 16` at once, the last one replaced by the budget, which changes
  the result only when those draws sum below the budget (for a Poisson(3)
  mean, a chance below 1e-20). `budget` 0 gives no span.
  """
  budget = tf.cast(budget, tf.int32)
  draws = tf.random.stateless_poisson([budget + _EXTRA_SPANS], _seed(seed), poisson_lambda, dtype=tf.int32)
  draws = tf.concat([draws[:-1], [budget]], 0)
  total = tf.cumsum(draws)
  last = tf.reduce_sum(tf.cast(total < budget, tf.int32))  # first index whose running sum reaches the budget
  before = tf.where(last > 0, tf.gather(total, tf.maximum(last - 1, 0)), 0)
  lengths = tf.concat([draws[:last], [budget - before]], 0)
  return lengths[:tf.where(budget > 0, last + 1, 0)]


def _replace_spans(body, starts, lengths, mask_id):
  """Each span [start, start + length) (cut at the end) -> one mask at its start, the rest deleted.

  A start covered by another span's tail is deleted (overlapping spans merge).
  """
  n = tf.size(body)
  starts = tf.cast(starts, tf.int32)
  ends = tf.minimum(starts + tf.cast(lengths, tf.int32), n)
  is_start = _scatter_flags(starts, n)
  delta = tf.scatter_nd(tf.concat([starts + 1, ends], 0)[:, None],
                        tf.concat([tf.ones_like(starts), -tf.ones_like(starts)], 0), [n + 1])
  in_tail = tf.cumsum(delta)[:n] > 0  # covered by a span after its first token
  return tf.boolean_mask(tf.where(is_start, tf.cast(mask_id, body.dtype), body), tf.logical_not(in_tail))


def _insert_masks(tokens, count, seed, mask_id):
  """`tokens` with `count` mask tokens at distinct uniformly drawn slots of the result."""
  size = tf.size(tokens) + count
  inserted = _scatter_flags(_first_k_of_permutation(size, count, seed), size)
  source = tf.maximum(tf.cumsum(tf.cast(tf.logical_not(inserted), tf.int32)) - 1, 0)
  return tf.where(inserted, tf.cast(mask_id, tokens.dtype), tf.gather(tokens, source))


def _infill_body(body, seed, mask_id, ratio, poisson_lambda):
  n = tf.size(body)
  s_len, s_start, s_insert = _split_seed(seed, 3)
  lengths = span_lengths(_ceil_share(n, ratio), s_len, poisson_lambda)
  spans = tf.boolean_mask(lengths, lengths > 0)
  starts = _first_k_of_permutation(n, tf.size(spans), s_start)
  kept = _replace_spans(body, starts, spans, mask_id)
  return _insert_masks(kept, tf.size(lengths) - tf.size(spans), s_insert, mask_id)


def local_shuffle(ids, seed, *, distance: float = SHUFFLE_DISTANCE, special_ids: Sequence[int] = ()) -> tf.Tensor:
  """The body's tokens sorted by index + U(0, distance) (specials at the ends stay)."""
  return _on_body(lambda body: _shuffle_body(body, _seed(seed), distance), ids, special_ids)


def token_drop(ids, seed, *, prob: float = DROP_PROB, special_ids: Sequence[int] = ()) -> tf.Tensor:
  """Each body token dropped with probability `prob`; a non-empty body keeps at least one."""
  return _on_body(lambda body: _drop_body(body, seed, prob), ids, special_ids)


def token_mask(ids, seed, *, mask_id: int, prob: float = MASK_PROB, special_ids: Sequence[int] = ()) -> tf.Tensor:
  """Each body token replaced by `mask_id` with probability `prob`."""
  return _on_body(lambda body: _mask_body(body, _seed(seed), prob, mask_id), ids, special_ids)


def text_infilling(ids, seed, *, mask_id: int, ratio: float = INFILLING_RATIO,
                   poisson_lambda: float = POISSON_LAMBDA, special_ids: Sequence[int] = ()) -> tf.Tensor:
  """BART's text infilling of the body (module docstring)."""
  return _on_body(lambda body: _infill_body(body, seed, mask_id, ratio, poisson_lambda), ids, special_ids)


def apply_noise(ids, seed, noise: Union[str, Sequence[str]] = DEFAULT_NOISE, *, mask_id: Optional[int] = None,
                special_ids: Sequence[int] = (), shuffle_distance: float = SHUFFLE_DISTANCE,
                drop_prob: float = DROP_PROB, mask_prob: float = MASK_PROB,
                infilling_ratio: float = INFILLING_RATIO, poisson_lambda: float = POISSON_LAMBDA) -> tf.Tensor:
  """`ids` with the named noise(s) applied in order, each with its own seed split from `seed`."""
  names = check_xdae_args(noise, shuffle_distance=shuffle_distance, drop_prob=drop_prob, mask_prob=mask_prob,
                          infilling_ratio=infilling_ratio, poisson_lambda=poisson_lambda)
  if mask_id is None and {"mask", "text_infilling"} & set(names):
    raise errors.ConfigError(f"the xDAE noise {'/'.join(names)} needs mask_id (the vocabulary's mask token)")
  out = tf.convert_to_tensor(ids)
  for name, s in zip(names, _split_seed(seed, len(names))):
    if name == "shuffle":
      out = local_shuffle(out, s, distance=shuffle_distance, special_ids=special_ids)
    elif name == "drop":
      out = token_drop(out, s, prob=drop_prob, special_ids=special_ids)
    elif name == "mask":
      out = token_mask(out, s, mask_id=mask_id, prob=mask_prob, special_ids=special_ids)
    else:
      out = text_infilling(out, s, mask_id=mask_id, ratio=infilling_ratio, poisson_lambda=poisson_lambda,
                           special_ids=special_ids)
  return out


# ----------------------------------------------------------------------------- xFNP span masking


def span_mask(ids, seed, *, mask_id: int, vocab_size: int, special_ids: Sequence[int] = (),
              random_excluded: Optional[Sequence[int]] = None, bos_id: int = 0, block_size: int = BLOCK_SIZE,
              span_length: int = SPAN_LENGTH, mask_prob: float = BERT_MASK_PROB,
              random_prob: float = BERT_RANDOM_PROB) -> dict[str, tf.Tensor]:
  """xFNP's masking of `ids` (the original): the features `XFNP_FEATURES` (module docstring).

  Random replacements are drawn from the ids below `vocab_size` except
  `random_excluded` (default: `special_ids` and `mask_id`).
  """
  check_xfnp_args(block_size=block_size, span_length=span_length, mask_prob=mask_prob, random_prob=random_prob)
  ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
  head, body, _ = split_ends(ids, special_ids)
  s_offset, s_action, s_random = _split_seed(seed, 3)
  n = tf.size(body)
  blocks = (n + block_size - 1) // block_size
  block_start = tf.range(blocks) * block_size
  block_len = tf.minimum(block_size, n - block_start)
  short = tf.maximum(1, tf.cast(tf.round(tf.cast(block_len * span_length, tf.float64) / block_size), tf.int32))
  span = tf.minimum(tf.where(block_len == block_size, span_length, short), block_len)
  room = tf.cast(block_len - span + 1, tf.float32)
  offset = tf.minimum(tf.cast(tf.random.stateless_uniform([blocks], s_offset) * room, tf.int32), block_len - span)
  offsets = tf.ragged.range(span).flat_values
  positions = tf.ragged.range(block_start + offset, block_start + offset + span).flat_values + tf.size(head)
  targets = tf.gather(ids, positions)
  excluded = list(special_ids) + [mask_id] if random_excluded is None else random_excluded
  randoms = random_regular_ids(tf.shape(positions), s_random, vocab_size, excluded)
  action = tf.random.stateless_uniform(tf.shape(positions), s_action)
  replaced = tf.where(action < mask_prob, mask_id, tf.where(action < mask_prob + random_prob, randoms, targets))
  inputs = tf.tensor_scatter_nd_update(ids, positions[:, None], replaced)
  previous = tf.where(positions > 0, tf.gather(ids, tf.maximum(positions - 1, 0)), bos_id)
  return {"inputs": inputs, "targets": targets, "target_positions": positions, "target_offsets": offsets,
          "decoder_inputs": previous}


# ----------------------------------------------------------------------------- seqio preprocessors


def _vocab_id(vocab, name: str) -> Optional[int]:
  """`vocab.<name>` of a seqio vocabulary, or of the vocabulary it wraps (`SeqioVocabulary.vocab`)."""
  for v in (vocab, getattr(vocab, "vocab", None)):
    value = getattr(v, name, None) if v is not None else None
    if value is not None:
      return int(value)
  return None


def _vocabulary(output_features: Optional[Mapping], key: str = "targets"):
  if output_features and key in output_features:
    return output_features[key].vocabulary
  return None


def default_special_ids(vocab) -> tuple[int, ...]:
  """BOS, EOS and padding of a (seqio) vocabulary: kept in place by the noise."""
  return tuple(sorted({i for i in (_vocab_id(vocab, k) for k in ("bos_id", "eos_id", "pad_id")) if i is not None}))


def _resolve_mask_id(mask_id, vocab) -> int:
  mask_id = _vocab_id(vocab, "mask_id") if mask_id is None else mask_id
  if mask_id is None:
    raise errors.ConfigError("no mask token id: pass mask_id, or give the `targets` feature a vocabulary with "
                             "a mask token (xtreme_jax.data.vocab.seqio_vocabulary.as_seqio(vocab))")
  return int(mask_id)


def xdae_noise(dataset: tf.data.Dataset, output_features: Optional[Mapping] = None, *,
               noise: Union[str, Sequence[str]] = DEFAULT_NOISE, mask_id: Optional[int] = None,
               special_ids: Optional[Sequence[int]] = None, shuffle_distance: float = SHUFFLE_DISTANCE,
               drop_prob: float = DROP_PROB, mask_prob: float = MASK_PROB,
               infilling_ratio: float = INFILLING_RATIO, poisson_lambda: float = POISSON_LAMBDA) -> tf.data.Dataset:
  """seqio preprocessor: `inputs` = the noised `targets` (int32 ids, kept as they are).

  `mask_id` / `special_ids` default to the `targets` vocabulary's mask
  token and its BOS / EOS / padding ids. Other features pass through.
  """
  check_xdae_args(noise, shuffle_distance=shuffle_distance, drop_prob=drop_prob, mask_prob=mask_prob,
                  infilling_ratio=infilling_ratio, poisson_lambda=poisson_lambda)
  vocab = _vocabulary(output_features)
  names = noise_names(noise)
  if {"mask", "text_infilling"} & set(names):
    mask_id = _resolve_mask_id(mask_id, vocab)
  special_ids = default_special_ids(vocab) if special_ids is None else tuple(special_ids)
  noise_fn = functools.partial(apply_noise, noise=names, mask_id=mask_id, special_ids=special_ids,
                               shuffle_distance=shuffle_distance, drop_prob=drop_prob, mask_prob=mask_prob,
                               infilling_ratio=infilling_ratio, poisson_lambda=poisson_lambda)

  @seqio.map_over_dataset(num_seeds=1)
  @tf.autograph.experimental.do_not_convert  # plain TF ops: autograph's conversion only costs tracing time
  def noised(features, seed):
    out = dict(features)
    out["inputs"] = tf.cast(noise_fn(features["targets"], seed), features["targets"].dtype)
    return out

  return noised(dataset)


def xfnp_span_mask(dataset: tf.data.Dataset, output_features: Optional[Mapping] = None, *,
                   mask_id: Optional[int] = None, vocab_size: Optional[int] = None,
                   special_ids: Optional[Sequence[int]] = None, bos_id: Optional[int] = None,
                   block_size: int = BLOCK_SIZE, span_length: int = SPAN_LENGTH,
                   mask_prob: float = BERT_MASK_PROB, random_prob: float = BERT_RANDOM_PROB) -> tf.data.Dataset:
  """seqio preprocessor: the original `targets` -> the xFNP features (`XFNP_FEATURES`, module docstring).

  Ids not given come from the `targets` vocabulary (mask token, size, BOS /
  EOS / padding; random replacements avoid those, unknown and mask).
  """
  check_xfnp_args(block_size=block_size, span_length=span_length, mask_prob=mask_prob, random_prob=random_prob)
  vocab = _vocabulary(output_features)
  mask_id = _resolve_mask_id(mask_id, vocab)
  vocab_size = int(vocab.vocab_size) if vocab_size is None and vocab is not None else vocab_size
  if vocab_size is None:
    raise errors.ConfigError("xfnp_span_mask needs vocab_size (or a `targets` feature with a vocabulary)")
  special_ids = default_special_ids(vocab) if special_ids is None else tuple(special_ids)
  bos_id = _vocab_id(vocab, "bos_id") if bos_id is None else bos_id
  excluded = {*special_ids, mask_id, *(i for i in (_vocab_id(vocab, "unk_id"),) if i is not None)}
  mask_fn = functools.partial(span_mask, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids,
                              random_excluded=sorted(excluded), bos_id=0 if bos_id is None else bos_id,
                              block_size=block_size, span_length=span_length, mask_prob=mask_prob,
                              random_prob=random_prob)

  @seqio.map_over_dataset(num_seeds=1)
  @tf.autograph.experimental.do_not_convert
  def masked(features, seed):
    out = {k: v for k, v in features.items() if k not in XFNP_FEATURES}
    out.update(mask_fn(features["targets"], seed))
    return out

  return masked(dataset)


def split_tokens(dataset: tf.data.Dataset, output_features: Optional[Mapping] = None,
                 sequence_length: Optional[Mapping[str, int]] = None, *, length_feature: str = "targets",
                 max_length: int = DEFAULT_MAX_LENGTH, add_bos: bool = False, add_eos: bool = True,
                 bos_id: Optional[int] = None, eos_id: Optional[int] = None) -> tf.data.Dataset:
  """seqio preprocessor: each example's `targets` ids cut into consecutive pieces, each an example `{"targets"}`.

  A piece holds at most L - add_bos - add_eos tokens, L =
  `sequence_length[length_feature]` when given, else `max_length`; BOS / EOS
  (the `targets` vocabulary's unless given) are then added around it. Empty
  documents give no example; other features are dropped.
  """
  length = (sequence_length or {}).get(length_feature) or max_length
  room = int(length) - int(add_bos) - int(add_eos)
  if room < 1:
    raise errors.ConfigError(f"sequence length {length} of {length_feature!r} leaves no room for a token "
                             "besides BOS / EOS")
  vocab = _vocabulary(output_features)
  bos_id = _vocab_id(vocab, "bos_id") if bos_id is None else bos_id
  eos_id = _vocab_id(vocab, "eos_id") if eos_id is None else eos_id
  if (add_bos and bos_id is None) or (add_eos and eos_id is None):
    raise errors.ConfigError("split_tokens needs bos_id / eos_id (or a `targets` feature with a vocabulary)")

  @tf.autograph.experimental.do_not_convert
  def pieces(features):
    ids = tf.cast(features["targets"], tf.int32)
    n = tf.size(ids)
    bos = tf.fill([int(add_bos)], tf.cast(bos_id if add_bos else 0, tf.int32))
    eos = tf.fill([int(add_eos)], tf.cast(eos_id if add_eos else 0, tf.int32))
    count = tf.cast((n + room - 1) // room, tf.int64)
    return tf.data.Dataset.range(count).map(
        lambda i: {"targets": tf.concat([bos, ids[tf.cast(i, tf.int32) * room:][:room], eos], 0)})

  return dataset.flat_map(pieces)
