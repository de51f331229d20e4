"""The bricks every network here is built from.

`Embeddings`, `SelfAttention`, `CrossAttention` and `FeedForward` are plain
`flax.linen` modules over a frozen `TransformerConfig`. Each sub-layer is
post-LN (`LayerNorm(x + Dropout(f(x)))`, as BERT and XLM-R). Every parameter
carries logical axis names (`vocab, embed, heads, kv, mlp, positions,
token_types, languages`); `xtreme_jax.training.partitioning` maps them to mesh axes.
"""

from __future__ import annotations

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax import errors
from xtreme_jax.networks import flash_attention
from xtreme_jax.networks.config import TransformerConfig

Array = jax.Array


def _init(config: TransformerConfig):
  del config
  return nn.initializers.normal(stddev=0.02)


def _param_init(init, axes):
  return nn.with_logical_partitioning(init, axes)


def layer_norm(config: TransformerConfig, name: str) -> nn.LayerNorm:
  """LayerNorm computed in float32, returning float32 (callers cast)."""
  return nn.LayerNorm(
      epsilon=config.layer_norm_eps,
      dtype=jnp.float32,
      scale_init=_param_init(nn.initializers.ones, ("embed",)),
      bias_init=_param_init(nn.initializers.zeros, ("embed",)),
      name=name)


def _post_ln(config: TransformerConfig, x: Array, y: Array) -> Array:
  """`LayerNorm(x + y)` in float32, cast back to the compute dtype."""
  return layer_norm(config, "layer_norm")(x.astype(jnp.float32) + y.astype(jnp.float32)).astype(config.compute_dtype)


def default_positions(config: TransformerConfig, input_mask: Array) -> Array:
  """Position-table rows as BERT (0..L-1) or RoBERTa (pad+1.. over non-pad tokens, pads get pad)."""
  if config.position_style == "roberta":
    mask = input_mask.astype(jnp.int32)
    return jnp.cumsum(mask, axis=-1) * mask + config.pad_token_id
  return jnp.broadcast_to(jnp.arange(input_mask.shape[-1]), input_mask.shape)


def position_ids(config: TransformerConfig, positions: Array, input_mask: Array) -> Array:
  """Position-table rows for explicit token positions (0 = a segment's first token).

  BERT style uses them as given; RoBERTa style offsets real tokens by
  `pad_token_id + 1` and gives pads `pad_token_id`, so every segment of a
  concatenated (TLM) pair starts where `default_positions` starts a
  segment on its own (row 2 for XLM-R, row 0 for BERT).
  """
  if config.position_style == "roberta":
    return jnp.where(input_mask.astype(bool), positions + config.pad_token_id + 1, config.pad_token_id)
  return positions


def _first_row(config: TransformerConfig) -> int:
  """The position-table row of a sequence's first token."""
  return config.pad_token_id + 1 if config.position_style == "roberta" else 0


def max_tokens(config: TransformerConfig) -> int:
  """The longest sequence (or segment, with explicit positions) the position table allows.

  `max_positions`, less RoBERTa's offset: its positions start after the pad id.
  """
  return max(config.max_positions - _first_row(config), 0)


def check_length(config: TransformerConfig, length: int, what: str = "sequence length",
                 fix: str = "lower SEQ_LEN / the reader's max length") -> None:
  """A one-line `ConfigError` when `length` tokens cannot all have a row of the position table."""
  if length <= max_tokens(config):
    return
  offset = _first_row(config)
  start = f" (RoBERTa positions start at {offset})" if offset else ""
  raise errors.ConfigError(
      f"{what} {length} exceeds the position table: max_positions={config.max_positions} allows "
      f"{max_tokens(config)} tokens{start}; {fix}")


class Embeddings(nn.Module):
  """Word + position (+ token-type) (+ language) embeddings, LayerNorm, dropout.

  Language embeddings exist only when `config.num_languages > 0`; then
  `language_ids` (same shape as `input_ids`) is required. With
  `config.language_positions` they are a position table per language (rows
  `language * max_positions + position` of `position_embeddings`) instead of a
  vector per language. By default the
  positions are `default_positions`, and a sequence longer than the position
  table allows (`max_tokens`) is a `ConfigError` at trace time. Explicit
  `positions` are token positions counted from each segment's start (see
  `position_ids`), e.g. a TLM pair restarting at its second sentence: the
  sequence may then be longer than the table, and the position values are
  data, not checked here (a row outside the table embeds as NaN, so the loss
  stops the run). Whoever builds them keeps each segment within `max_tokens`
  (VECO's model checks its segments' lengths).
  """

  config: TransformerConfig

  def setup(self):
    cfg = self.config
    # Gathered from the float32 tables (cast after the sum): the backward pass is then a float32 scatter-add,
    # not a bfloat16 one over the whole vocabulary table.
    embed = lambda n, axes, name: nn.Embed(  # noqa: E731
        n, cfg.hidden_size, dtype=jnp.float32, embedding_init=_param_init(_init(cfg), axes), name=name)
    self.word_embeddings = embed(cfg.vocab_size, ("vocab", "embed"), "word_embeddings")
    tables = cfg.num_languages if cfg.language_positions else 1
    self.position_embeddings = embed(tables * cfg.max_positions, ("positions", "embed"), "position_embeddings")
    if cfg.type_vocab_size > 0:
      self.token_type_embeddings = embed(cfg.type_vocab_size, ("token_types", "embed"), "token_type_embeddings")
    if cfg.num_languages > 0 and not cfg.language_positions:
      self.language_embeddings = embed(cfg.num_languages, ("languages", "embed"), "language_embeddings")
    self.layer_norm = layer_norm(cfg, "layer_norm")
    self.dropout = nn.Dropout(cfg.dropout_rate)

  def __call__(self, input_ids: Array, input_mask: Array, token_type_ids: Optional[Array] = None,
               positions: Optional[Array] = None, deterministic: bool = True,
               language_ids: Optional[Array] = None, word_scale: float = 1.0) -> Array:
    """`word_scale` multiplies the word embeddings (fairseq's `embed_scale`, sqrt(d) in some checkpoints)."""
    cfg = self.config
    if positions is None:
      check_length(cfg, input_ids.shape[-1])
      positions = default_positions(cfg, input_mask)
    else:
      positions = position_ids(cfg, positions, input_mask)
    if cfg.num_languages > 0 and language_ids is None:
      raise ValueError(f"this network has language embeddings (num_languages={cfg.num_languages}): "
                       "pass per-token language_ids, or fold one language into the position embeddings "
                       "(veco_assembly.fold_language_embedding) to get a plain encoder")
    if cfg.language_positions:
      positions = language_ids * cfg.max_positions + positions
    words = self.word_embeddings(input_ids)
    x = (words * word_scale if word_scale != 1.0 else words) + self.position_embeddings(positions)
    if cfg.type_vocab_size > 0:
      if token_type_ids is None:
        token_type_ids = jnp.zeros_like(input_ids)
      x = x + self.token_type_embeddings(token_type_ids)
    if cfg.num_languages > 0 and not cfg.language_positions:
      x = x + self.language_embeddings(language_ids)
    x = self.layer_norm(x).astype(cfg.compute_dtype)
    x = hidden_dropout(self, cfg, x, deterministic, self.dropout)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))

  def attend(self, x: Array) -> Array:
    """Logits against the word embedding matrix (tied output layer), the matmul in the compute dtype."""
    cd = self.config.compute_dtype
    return jnp.dot(x.astype(cd), self.word_embeddings.embedding.astype(cd).T)


class HeadsDense(nn.Module):
  """`DenseGeneral` over the trailing `in_dims` input dimensions, with the kernel created in its full shape.

  Same parameters as `nn.DenseGeneral` (`kernel`: input dims + `features`,
  `bias`: `features`). flax's DenseGeneral initialises a flattened kernel and
  reshapes it, which breaks logical-axis constraints under an active mesh.
  """

  features: tuple
  in_dims: int
  kernel_axes: tuple
  bias_axes: tuple
  config: TransformerConfig

  @nn.compact
  def __call__(self, x: Array) -> Array:
    cfg = self.config
    shape = x.shape[-self.in_dims:] + tuple(self.features)
    kernel = self.param("kernel", _param_init(_init(cfg), self.kernel_axes), shape, jnp.float32)
    bias = self.param("bias", _param_init(nn.initializers.zeros, self.bias_axes), tuple(self.features), jnp.float32)
    x, kernel = (a.astype(cfg.compute_dtype) for a in (x, kernel))
    contract = tuple(range(x.ndim - self.in_dims, x.ndim))
    y = jax.lax.dot_general(x, kernel, ((contract, tuple(range(self.in_dims))), ((), ())))
    # The bias is added in float32: its gradient, a sum over every token, is then summed in float32 (XLA sums a
    # bfloat16 reduction in bfloat16: 100,000 ones add up to 8,192).
    return (y.astype(jnp.float32) + bias).astype(cfg.compute_dtype)


def dropout_seed(module: nn.Module) -> Array:
  """An int32 seed from `module`'s 'dropout' RNG stream (a new one at every call and every step)."""
  return jax.lax.bitcast_convert_type(jax.random.bits(module.make_rng("dropout"), (), jnp.uint32), jnp.int32)


def dropout_masks(config: TransformerConfig) -> str:
  """How hidden dropout draws its masks: `config.dropout_masks`, 'auto' resolved ('hash' on a GPU, else 'flax')."""
  if config.dropout_masks == "auto":
    return "hash" if jax.default_backend() == "gpu" else "flax"
  return config.dropout_masks


def hidden_dropout(module: nn.Module, config: TransformerConfig, x: Array, deterministic: bool,
                   flax_dropout: Optional[nn.Dropout] = None) -> Array:
  """Dropout at `config.dropout_rate` with `dropout_masks(config)`: 'flax' calls `flax_dropout` (or a new
  `nn.Dropout` in `module`, where the bricks always had one), 'hash' `flash_attention.dropout`."""
  if dropout_masks(config) == "hash":
    return x if deterministic else flash_attention.dropout(dropout_seed(module), x, config.dropout_rate)
  return (flax_dropout or nn.Dropout(config.dropout_rate))(x, deterministic=deterministic)


def attention_implementation(config: TransformerConfig, deterministic: bool) -> str:
  """The kernel `dot_product_attention` runs. `flash` (`networks.flash_attention`, the one fused kernel with
  attention-probability dropout) runs as configured, dropout or not; while dropout is active every other choice
  runs `reference` (the other fused kernels have none). `auto`: on a GPU in bfloat16, flash while attention
  dropout is active and cuDNN's fused kernel otherwise; the reference elsewhere (on CPU and TPU, XLA compiles
  both to the same einsum + softmax + einsum; the reference compiles faster here, about 20%, and keeps the numbers
  of earlier runs)."""
  dropping = not deterministic and config.attention_dropout_rate > 0
  if config.attention_implementation == "auto":
    if jax.default_backend() == "gpu" and config.dtype == "bfloat16":
      return "flash" if dropping else "cudnn"
    return "reference"
  if config.attention_implementation == "flash":
    return "flash"
  return "reference" if dropping else config.attention_implementation


def dot_product_attention(config: TransformerConfig, q: Array, k: Array, v: Array, key_mask: Array, causal: bool,
                          dropout=None, softmax_length: Optional[int] = None, kv_transposed: bool = False,
                          dropout_seed: Optional[Array] = None) -> Array:
  """Softmax(q k^T / sqrt(d)) v over [batch, length, heads, head_dim] inputs, keys masked by `key_mask`
  ([batch, keys], 1 = real; padded queries still attend to the real keys, as BERT; or a whole
  [batch, queries, keys] mask) and, with `causal`, by position. One function for every attention brick (self,
  causal, cross, n-stream).

  Dropout on the probabilities (`attention_implementation`): `dropout` (a function on them) runs the reference
  path: einsum, float32 softmax, dropout, einsum; `dropout_seed` (int32) runs the `flash` kernel with its own
  masks at `config.attention_dropout_rate`. `xla` / `cudnn` call `jax.nn.dot_product_attention` (float32 softmax
  statistics either way). cudnn and flash take the padding as key lengths, so they need padding at the end of
  each row (as every feature converter here writes it) and keep the mask off the dense-bias path; a whole mask,
  `softmax_length` or `kv_transposed` (decoding) sends flash to the reference path.

  `softmax_length` (reference path): the softmax runs over that many keys, those past `k`'s masked. A cached
  decoding step that reads only a prefix of its buffer (`MultiHeadAttention`) then rounds as over the whole
  buffer: XLA's CPU dots give each logit and each weighted sum of values bit for bit whatever the key count (as
  measured, for multiples of 8 keys), its float32 exp and sum over a row do not. `kv_transposed`: `k` and `v` come
  as [batch, heads, head_dim, keys], the layout the reference path's dots read (cached cross-attention keeps its
  memory so; handed over in the usual layout, XLA would transpose them inside the decoding loop at every step).
  """
  impl = attention_implementation(config, dropout is None and dropout_seed is None)
  if impl == "flash" and (key_mask.ndim == 3 or softmax_length is not None or kv_transposed):
    impl = "reference"
  if (impl == "flash") != (dropout_seed is not None) and (dropout is not None or dropout_seed is not None):
    raise ValueError(f"attention dropout for the {impl!r} kernel needs " + (
        "`dropout_seed`" if impl == "flash" else "`dropout`, a function on the probabilities"))
  if kv_transposed and impl != "reference":
    k, v, kv_transposed = k.transpose(0, 3, 1, 2), v.transpose(0, 3, 1, 2), False
  keys = k.shape[-1] if kv_transposed else k.shape[1]
  kv = "bhdk" if kv_transposed else "bkhd"
  full = key_mask.ndim == 3  # a whole (batch, queries, keys) mask, e.g. ProphetNet's n-stream attention
  if full and impl == "cudnn":
    impl = "xla"  # cudnn takes key lengths only
  if impl == "reference":
    mask = (key_mask[:, None] if full else key_mask[:, None, None, :]).astype(bool)
    if causal:
      mask = mask & jnp.tril(jnp.ones((q.shape[1], keys), dtype=bool))[None, None]
    logits = jnp.einsum(f"bqhd,{kv}->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(config.head_dim).astype(jnp.float32)
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    if softmax_length is not None and softmax_length > keys:
      logits = jnp.pad(logits, [(0, 0)] * 3 + [(0, softmax_length - keys)], constant_values=jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1)[..., :keys].astype(config.compute_dtype)
    if dropout is not None:
      probs = dropout(probs)
    return jnp.einsum(f"bhqk,{kv}->bqhd", probs, v)
  if impl == "flash":
    lengths = jnp.sum(key_mask, axis=-1).astype(jnp.int32)
    rate = config.attention_dropout_rate if dropout_seed is not None else 0.0
    return flash_attention.flash_attention(q, k, v, lengths, dropout_seed, rate, causal)
  if impl == "cudnn":
    lengths = jnp.sum(key_mask, axis=-1).astype(jnp.int32)
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal, key_value_seq_lengths=lengths,
                                        implementation="cudnn")
  mask = key_mask[:, None] if full else key_mask[:, None, None, :]
  return jax.nn.dot_product_attention(q, k, v, mask=mask.astype(bool), is_causal=causal, implementation="xla")


CACHES = ("none", "self", "cross")
# A cached self-attention step reads the first j * `size` cached positions, the fewest that cover the positions
# written so far, `size` the first multiple of BUCKET_STEP from max_length / DECODE_BUCKETS on (`cache_buckets`):
# one compiled attention per bucket, `lax.switch`ed. XLA's CPU dots over a multiple of 8 keys round exactly as the
# same dots over the whole buffer, its other keys masked; over other key counts they need not (measured).
DECODE_BUCKETS = 8
BUCKET_STEP = 8


def cache_buckets(length: int, buckets: Optional[int] = None) -> tuple[int, ...]:
  """Key counts a cached step may read: the multiples of the bucket size below `length`, then `length`."""
  per_bucket = -(-length // max(1, DECODE_BUCKETS if buckets is None else buckets))
  size = -(-per_bucket // BUCKET_STEP) * BUCKET_STEP
  return tuple(range(size, length, size)) + (length,)


def map_self_caches(fn, cache):
  """`cache` (a decoding cache collection) with `fn` applied to each self-attention cache (a dict with
  `cache_index`)."""
  if not hasattr(cache, "items"):
    return cache
  if "cache_index" in cache:
    return fn(dict(cache))
  return {name: map_self_caches(fn, sub) for name, sub in cache.items()}


def index_cache_rows(cache):
  """`cache` with a `cached_rows` index in every self-attention cache, for a search that reorders rows (beams).

  `cached_rows[r, p]` is the row of `cached_key` / `cached_value` that holds
  position p of row r's history: each step writes its keys / values to its own
  row and `reorder_cache_rows` moves only the index, never the keys / values.
  """
  def add(c):
    rows, length = c["cached_key"].shape[:2]
    return {**c, "cached_rows": jnp.broadcast_to(jnp.arange(rows, dtype=jnp.int32)[:, None], (rows, length))}
  return map_self_caches(add, cache)


def reorder_cache_rows(cache, rows: Array):
  """Beam search's reorder for an `index_cache_rows` cache: row r continues the history of row `rows[r]`."""
  return map_self_caches(lambda c: {**c, "cached_rows": jnp.take(c["cached_rows"], rows, axis=0)}, cache)


class MultiHeadAttention(nn.Module):
  """Scaled dot-product attention (`dot_product_attention`) with query/key/value/out projections.

  `cache` (incremental decoding, Flax's `cache` collection): `"self"` keeps
  every key / value computed so far in `cache/cached_{key,value}` (batch,
  max_length, heads, head_dim) with the write position in `cache/cache_index`; a call whose
  cache does not exist yet (the cache-creating call) only creates it, zeroed,
  sized by that call's length; later calls take one new position each and
  attend to every position written so far, reading only the smallest bucket of
  cached positions that holds them (`cache_buckets`: work grows with the prefix,
  not with max_length) and normalising over max_length keys, which keeps the
  results of attending over the whole masked buffer (bit for bit on the CPUs
  measured, `dot_product_attention`'s `softmax_length`). With
  `cache/cached_rows` (`index_cache_rows`, for beam search) the step gathers
  each row's history through that index instead of reading its own row.
  `"cross"` computes the keys / values of the encoder memory once, in the
  cache-creating call, and keeps them as (batch, heads, head_dim, length), the
  layout the single-query dots read, so no step transposes them. `"none"`: no cache.
  """

  config: TransformerConfig
  deterministic: bool = True
  cache: str = "none"

  @nn.compact
  def __call__(self, inputs_q: Array, inputs_kv: Array, key_mask: Array, causal: bool = False) -> Array:
    cfg = self.config
    proj = lambda name: HeadsDense(  # noqa: E731
        (cfg.num_heads, cfg.head_dim), 1, ("embed", "heads", "kv"), ("heads", "kv"), cfg, name=name)
    q = proj("query")(inputs_q)
    q = nn.with_logical_constraint(q, ("batch", "length", "heads", "kv"))
    cached = self.cache != "none" and self.has_variable("cache", "cached_key")
    transposed = self.cache == "cross" and cached
    if transposed:
      k, v = self.get_variable("cache", "cached_key"), self.get_variable("cache", "cached_value")
    else:
      k, v = proj("key")(inputs_kv), proj("value")(inputs_kv)
    if self.cache == "cross" and not cached:
      self.variable("cache", "cached_key", lambda: k.transpose(0, 2, 3, 1))
      self.variable("cache", "cached_value", lambda: v.transpose(0, 2, 3, 1))
    elif self.cache == "self" and not cached:  # the cache-creating call
      for name, x in (("cached_key", k), ("cached_value", v)):
        self.variable("cache", name, jnp.zeros, x.shape, x.dtype)
      self.variable("cache", "cache_index", lambda: jnp.zeros((), jnp.int32))
    dropping = not self.deterministic and cfg.attention_dropout_rate > 0
    decoding = self.cache == "self" and cached
    dropout, seed = None, None
    if dropping and attention_implementation(cfg, False) == "flash" and not decoding and not transposed \
        and key_mask.ndim == 2:
      seed = dropout_seed(self)
    elif dropping:
      drop = nn.Dropout(cfg.attention_dropout_rate)
      dropout = lambda p: drop(p, deterministic=False)  # noqa: E731
    if decoding:
      ctx = self._cached_step(q, k, v, dropout)
    else:
      ctx = dot_product_attention(cfg, q, k, v, key_mask, causal, dropout, kv_transposed=transposed,
                                  dropout_seed=seed)
    out = HeadsDense((cfg.hidden_size,), 2, ("heads", "kv", "embed"), ("embed",), cfg, name="out")(ctx)
    return nn.with_logical_constraint(out, ("batch", "length", "embed"))

  def _cached_step(self, q: Array, k: Array, v: Array, dropout) -> Array:
    """One decoding position: its keys / values written at `cache_index`, the attention over the positions so far."""
    cfg = self.config
    if k.shape[1] != 1:
      raise ValueError(f"a cached decoding step takes one position at a time, got {k.shape[1]}")
    cached_k, cached_v = (self.variable("cache", name, None) for name in ("cached_key", "cached_value"))
    index = self.variable("cache", "cache_index", None)
    i = index.value
    cached_k.value = jax.lax.dynamic_update_slice(cached_k.value, k.astype(cached_k.value.dtype), (0, i, 0, 0))
    cached_v.value = jax.lax.dynamic_update_slice(cached_v.value, v.astype(cached_v.value.dtype), (0, i, 0, 0))
    index.value = i + 1
    rows, length = cached_k.value.shape[:2]
    history = None
    if self.has_variable("cache", "cached_rows"):  # beams: this step's keys / values are in each row's own slot
      cached_rows = self.variable("cache", "cached_rows", None)
      cached_rows.value = jax.lax.dynamic_update_slice(
          cached_rows.value, jnp.arange(rows, dtype=jnp.int32)[:, None], (0, i))
      history = cached_rows.value

    def attend(n):
      def run(q, keys, values, history, i):
        take = (lambda a: a[:, :n]) if history is None else (lambda a: a[history[:, :n], jnp.arange(n)])
        written = jnp.broadcast_to(jnp.arange(n) <= i, (rows, n)).astype(jnp.int32)
        return dot_product_attention(cfg, q, take(keys), take(values), written, False, dropout, softmax_length=length)
      return run

    # Dropout draws from Flax's RNG streams, which lax.switch's branches cannot reach: one bucket then.
    ends = cache_buckets(length) if dropout is None else (length,)
    operands = (q, cached_k.value, cached_v.value, history, i)
    if len(ends) == 1:
      return attend(length)(*operands)
    return jax.lax.switch(i // ends[0], [attend(n) for n in ends], *operands)


class SelfAttention(nn.Module):
  """Post-LN self-attention sub-layer; `causal=True` for a decoder, `decode=True` for cached steps."""

  config: TransformerConfig
  deterministic: bool = True
  decode: bool = False

  @nn.compact
  def __call__(self, x: Array, input_mask: Array, causal: bool = False) -> Array:
    cfg = self.config
    y = MultiHeadAttention(cfg, self.deterministic, "self" if self.decode else "none", name="attention")(
        x, x, input_mask, causal)
    y = hidden_dropout(self, cfg, y, self.deterministic)
    return _post_ln(cfg, x, y)


class CrossAttention(nn.Module):
  """Post-LN attention from `x` to encoder states `memory`; `decode=True` caches the memory's keys / values."""

  config: TransformerConfig
  deterministic: bool = True
  decode: bool = False

  @nn.compact
  def __call__(self, x: Array, input_mask: Array, memory: Array, memory_mask: Array) -> Array:
    cfg = self.config
    del input_mask  # only keys are masked
    y = MultiHeadAttention(cfg, self.deterministic, "cross" if self.decode else "none", name="attention")(
        x, memory, memory_mask)
    y = hidden_dropout(self, cfg, y, self.deterministic)
    return _post_ln(cfg, x, y)


class FeedForward(nn.Module):
  """Post-LN position-wise feed-forward sub-layer with exact (erf) GELU."""

  config: TransformerConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x: Array) -> Array:
    cfg = self.config
    h = HeadsDense((cfg.mlp_dim,), 1, ("embed", "mlp"), ("mlp",), cfg, name="intermediate")(x)
    h = jax.nn.gelu(h, approximate=False)
    h = nn.with_logical_constraint(h, ("batch", "length", "mlp"))
    y = HeadsDense((cfg.hidden_size,), 1, ("mlp", "embed"), ("embed",), cfg, name="output")(h)
    y = hidden_dropout(self, cfg, y, self.deterministic)
    return _post_ln(cfg, x, y)


class Pooler(nn.Module):
  """tanh(Dense(first token)), BERT's pooled output."""

  config: TransformerConfig

  @nn.compact
  def __call__(self, x: Array) -> Array:
    cfg = self.config
    y = HeadsDense((cfg.hidden_size,), 1, ("embed", "mlp"), ("mlp",), cfg, name="dense")(x[:, 0])
    return jnp.tanh(y)


class MlmHead(nn.Module):
  """Dense + GELU + LayerNorm, then logits against the word embeddings (tied) or its own `decoder` kernel."""

  config: TransformerConfig

  @nn.compact
  def __call__(self, x: Array, embeddings: Embeddings) -> Array:
    cfg = self.config
    h = HeadsDense((cfg.hidden_size,), 1, ("embed", "mlp"), ("mlp",), cfg, name="dense")(x)
    h = layer_norm(cfg, "layer_norm")(jax.nn.gelu(h, approximate=False)).astype(cfg.compute_dtype)
    bias = self.param("bias", _param_init(nn.initializers.zeros, ("vocab",)), (cfg.vocab_size,), jnp.float32)
    if cfg.tie_word_embeddings:
      logits = embeddings.attend(h)
    else:
      logits = nn.Dense(cfg.vocab_size, use_bias=False, dtype=cfg.compute_dtype, name="decoder",
                        kernel_init=_param_init(_init(cfg), ("embed", "vocab")))(h)
    logits = logits.astype(jnp.float32) + bias
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))
