"""Fused attention with attention-probability dropout: a Pallas (Triton) kernel, forward and backward.

`flash_attention(q, k, v, key_lengths, seed, rate)` computes, over [batch, length, heads, head_dim] inputs,

    softmax(q k^T / sqrt(d) + mask) * keep / (1 - rate)  @  v

without ever writing the [batch, heads, queries, keys] matrix to memory (FlashAttention-2: an online softmax over
blocks of keys; the backward recomputes the probabilities from the saved log-sum-exp). The mask is BERT's: the
first `key_lengths[b]` keys of row b are real (padding at the end of each row, as every feature converter here
writes it), padded queries still attend to the real keys; `causal` adds the position mask.

Dropout is the kernel's own: `keep[b, h, i, j]` comes from a counter-based hash of (seed, b, h, i, j)
(`keep_mask`, murmur3's 32-bit finaliser), so the forward and the backward draw the same mask without storing
it, and `seed` is a traced int32: a compiled train step draws new masks at every step from its step RNG. The
masks are not those of `flax.linen.Dropout` (a different generator), so a run changes numbers when it switches
between this kernel and the reference path; every other number is the same function of the inputs.

On a GPU the kernels compile through Pallas' Triton backend; elsewhere they run in Pallas' interpreter (slow:
for tests on tiny shapes). `reference_attention` is the same function in plain jnp (the dense mask included),
the tests' reference.
"""

from __future__ import annotations

import functools
import math
import typing

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

LOG2E = math.log2(math.e)
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)  # finite: a fully masked block gives exp2(...) = 0, not NaN


def _i32(x: int) -> np.int32:
  return np.uint32(x).view(np.int32)


MIX_1, MIX_2 = _i32(0x85EBCA6B), _i32(0xC2B2AE35)  # murmur3 fmix32
ROW_STEP, KEY_STEP, HEAD_STEP = _i32(0x9E3779B1), _i32(0x85EBCA77), _i32(0x27D4EB2F)


def _mix(x):
  """murmur3's 32-bit finaliser on int32 (wrapping products, logical shifts): a bijection with full avalanche."""
  shr = jax.lax.shift_right_logical
  x = x ^ shr(x, 16)
  x = x * MIX_1
  x = x ^ shr(x, 13)
  x = x * MIX_2
  return x ^ shr(x, 16)


def row_hashes(seed, head_row, queries):
  """One int32 per query row of one (batch, head): `head_row` = batch * heads + head, `queries` the positions."""
  return _mix(_mix(seed ^ (head_row * HEAD_STEP)) ^ (queries.astype(jnp.int32) * ROW_STEP))


def keep_mask(rows, keys, rate: float):
  """Keep (True) with probability 1 - rate: [queries] row hashes x [keys] key positions -> [queries, keys]."""
  bits = _mix(rows[:, None] ^ (keys.astype(jnp.int32) * KEY_STEP)[None, :])
  threshold = min(int(round(rate * 2.0 ** 31)), 2 ** 31 - 1)
  return jax.lax.shift_right_logical(bits, 1) >= np.int32(threshold)  # 31 random bits against rate * 2^31


def _cdiv(a, b: int):
  """Ceiling division of a traced non-negative int32 (Triton lowers `lax.div`, not `//` on traced ints)."""
  return jax.lax.div(a + (b - 1), b)


def dropout(seed, x, rate: float):
  """Dropout of any array with the kernel's masks: element (r, j), r the row over all but the last axis, is kept
  as `keep_mask` keeps query r's key j (plain elementwise jnp: XLA fuses it into its neighbours)."""
  if rate == 0.0:
    return x
  rows = jax.lax.iota(jnp.int32, math.prod(x.shape[:-1]))
  keep = keep_mask(row_hashes(seed, jnp.int32(0), rows), jnp.arange(x.shape[-1]), rate).reshape(x.shape)
  return jnp.where(keep, x / jnp.asarray(1.0 - rate, x.dtype), jnp.zeros((), x.dtype))


def _valid(queries, keys, length, causal: bool):
  valid = keys[None, :] < length
  if causal:
    valid = valid & (keys[None, :] <= queries[:, None])
  return valid


def _fwd_kernel(seed_ref, length_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, scale, rate, causal, block_q,
                block_k, num_heads):
  qb, b, h = pl.program_id(0), pl.program_id(1), pl.program_id(2)
  length = length_ref[()]
  queries = qb * block_q + jnp.arange(block_q)
  rows = row_hashes(seed_ref[()], b * num_heads + h, queries) if rate > 0 else None
  q = q_ref[...]

  def body(kb, carry):
    o, m, l = carry
    keys = kb * block_k + jnp.arange(block_k)
    k = k_ref[pl.ds(kb * block_k, block_k), :]
    s = plgpu.dot(q, k, trans_b=True) * (scale * LOG2E)
    s = jnp.where(_valid(queries, keys, length, causal), s, MASK_VALUE)
    m_next = jnp.maximum(m, jnp.max(s, axis=-1))
    correction = jnp.exp2(m - m_next)
    p = jnp.exp2(s - m_next[:, None])
    l = correction * l + jnp.sum(p, axis=-1)
    if rate > 0:
      p = jnp.where(keep_mask(rows, keys, rate), p, 0.0)
    v = v_ref[pl.ds(kb * block_k, block_k), :]
    o = correction[:, None] * o + plgpu.dot(p.astype(v.dtype), v)
    return o, m_next, l

  blocks = _cdiv(length, block_k)
  if causal:
    blocks = jnp.minimum(blocks, _cdiv((qb + 1) * block_q, block_k))
  init = (jnp.zeros((block_q, q.shape[-1]), jnp.float32), jnp.full((block_q,), -jnp.inf, jnp.float32),
          jnp.zeros((block_q,), jnp.float32))
  o, m, l = jax.lax.fori_loop(0, blocks, body, init)
  o = o * (1.0 / ((1.0 - rate) * l))[:, None]
  o_ref[...] = o.astype(o_ref.dtype)
  lse_ref[...] = m + jnp.log2(l)


def _dkdv_kernel(seed_ref, length_ref, q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, *, scale,
                 rate, causal, block_q, block_k, num_heads, queries_total):
  kb, b, h = pl.program_id(0), pl.program_id(1), pl.program_id(2)
  length = length_ref[()]
  seed, head_row = seed_ref[()], b * num_heads + h
  keys = kb * block_k + jnp.arange(block_k)
  k = k_ref[...]
  v = v_ref[...]

  def body(qb, carry):
    dk, dv = carry
    queries = qb * block_q + jnp.arange(block_q)
    q = q_ref[pl.ds(qb * block_q, block_q), :]
    do = do_ref[pl.ds(qb * block_q, block_q), :]
    lse = lse_ref[pl.ds(qb * block_q, block_q)]
    delta = delta_ref[pl.ds(qb * block_q, block_q)]
    s = plgpu.dot(q, k, trans_b=True) * (scale * LOG2E)
    s = jnp.where(_valid(queries, keys, length, causal), s, MASK_VALUE)
    p = jnp.exp2(s - lse[:, None])
    dp = plgpu.dot(do, v, trans_b=True)
    if rate > 0:
      keep = keep_mask(row_hashes(seed, head_row, queries), keys, rate)
      dropped = jnp.where(keep, p, 0.0) * (1.0 / (1.0 - rate))
      dp = jnp.where(keep, dp, 0.0) * (1.0 / (1.0 - rate))
    else:
      dropped = p
    dv = dv + plgpu.dot(dropped.astype(do.dtype), do, trans_a=True)
    ds = p * (dp - delta[:, None]) * scale
    dk = dk + plgpu.dot(ds.astype(q.dtype), q, trans_a=True)
    return dk, dv

  first = jax.lax.div(kb * block_k, block_q) if causal else jnp.int32(0)
  # A block of padding gets no gradient. (Bounds of one int32 type: Triton's scf.for wants the same type.)
  last = jnp.where(kb * block_k < length, jnp.int32(queries_total // block_q), first)
  zeros = jnp.zeros((block_k, k.shape[-1]), jnp.float32)
  dk, dv = jax.lax.fori_loop(first, last, body, (zeros, zeros))
  dk_ref[...] = dk.astype(dk_ref.dtype)
  dv_ref[...] = dv.astype(dv_ref.dtype)


def _dq_kernel(seed_ref, length_ref, q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, *, scale, rate,
               causal, block_q, block_k, num_heads):
  qb, b, h = pl.program_id(0), pl.program_id(1), pl.program_id(2)
  length = length_ref[()]
  queries = qb * block_q + jnp.arange(block_q)
  rows = row_hashes(seed_ref[()], b * num_heads + h, queries) if rate > 0 else None
  q, do = q_ref[...], do_ref[...]
  lse, delta = lse_ref[...], delta_ref[...]

  def body(kb, dq):
    keys = kb * block_k + jnp.arange(block_k)
    k = k_ref[pl.ds(kb * block_k, block_k), :]
    v = v_ref[pl.ds(kb * block_k, block_k), :]
    s = plgpu.dot(q, k, trans_b=True) * (scale * LOG2E)
    s = jnp.where(_valid(queries, keys, length, causal), s, MASK_VALUE)
    p = jnp.exp2(s - lse[:, None])
    dp = plgpu.dot(do, v, trans_b=True)
    if rate > 0:
      dp = jnp.where(keep_mask(rows, keys, rate), dp, 0.0) * (1.0 / (1.0 - rate))
    ds = p * (dp - delta[:, None]) * scale
    return dq + plgpu.dot(ds.astype(k.dtype), k)

  blocks = _cdiv(length, block_k)
  if causal:
    blocks = jnp.minimum(blocks, _cdiv((qb + 1) * block_q, block_k))
  dq = jax.lax.fori_loop(0, blocks, body, jnp.zeros((block_q, q.shape[-1]), jnp.float32))
  dq_ref[...] = dq.astype(dq_ref.dtype)


def _specs(block_q: int, block_k: int, queries: int, keys: int, dim: int, grid_over_keys: bool):
  """BlockSpecs of (seed, lengths, q, k, v) and of a [b, h, queries] statistic, for a grid (blocks, b, h)."""
  scalar = pl.BlockSpec((), lambda i, b, h: ())
  length = pl.BlockSpec((None,), lambda i, b, h: (b,))
  tile = lambda rows: pl.BlockSpec((None, rows, None, dim), lambda i, b, h: (b, i, h, 0))  # noqa: E731
  whole = lambda rows: pl.BlockSpec((None, rows, None, dim), lambda i, b, h: (b, 0, h, 0))  # noqa: E731
  if grid_over_keys:
    return (scalar, length, whole(queries), tile(block_k), tile(block_k)), \
        pl.BlockSpec((None, None, queries), lambda i, b, h: (b, h, 0)), whole(queries)
  return (scalar, length, tile(block_q), whole(keys), whole(keys)), \
      pl.BlockSpec((None, None, block_q), lambda i, b, h: (b, h, i)), tile(block_q)


def _params(block_q: int, block_k: int, dim: int):
  return plgpu.CompilerParams(num_warps=4 if block_q * block_k <= 64 * 128 or dim <= 32 else 8, num_stages=2)


def _forward(q, k, v, lengths, seed, *, scale, rate, causal, block_q, block_k, interpret):
  batch, queries, heads, dim = q.shape
  keys = k.shape[1]
  in_specs, stat, out = _specs(block_q, block_k, queries, keys, dim, grid_over_keys=False)
  kernel = functools.partial(_fwd_kernel, scale=scale, rate=rate, causal=causal, block_q=block_q,
                             block_k=block_k, num_heads=heads)
  return pl.pallas_call(
      kernel, grid=(queries // block_q, batch, heads), in_specs=in_specs, out_specs=[out, stat],
      out_shape=[jax.ShapeDtypeStruct(q.shape, q.dtype),
                 jax.ShapeDtypeStruct((batch, heads, queries), jnp.float32)],
      compiler_params=_params(block_q, block_k, dim), interpret=interpret, name="flash_attention_forward",
  )(seed, lengths, q, k, v)


def _backward(q, k, v, lengths, seed, o, lse, do, *, scale, rate, causal, block_q, block_k, interpret):
  batch, queries, heads, dim = q.shape
  keys = k.shape[1]
  delta = jnp.einsum("bqhd,bqhd->bhq", o.astype(jnp.float32), do.astype(jnp.float32))
  common = dict(scale=scale, rate=rate, causal=causal, block_q=block_q, block_k=block_k, num_heads=heads)
  in_specs, stat, _ = _specs(block_q, block_k, queries, keys, dim, grid_over_keys=True)
  key_tile = in_specs[3]
  dk, dv = pl.pallas_call(
      functools.partial(_dkdv_kernel, queries_total=queries, **common), grid=(keys // block_k, batch, heads),
      in_specs=[*in_specs, in_specs[2], stat, stat], out_specs=[key_tile, key_tile],
      out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
      compiler_params=_params(block_q, block_k, dim), interpret=interpret, name="flash_attention_dkdv",
  )(seed, lengths, q, k, v, do, lse, delta)
  in_specs, stat, query_tile = _specs(block_q, block_k, queries, keys, dim, grid_over_keys=False)
  dq = pl.pallas_call(
      functools.partial(_dq_kernel, **common), grid=(queries // block_q, batch, heads),
      in_specs=[*in_specs, query_tile, stat, stat], out_specs=query_tile,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      compiler_params=_params(block_q, block_k, dim), interpret=interpret, name="flash_attention_dq",
  )(seed, lengths, q, k, v, do, lse, delta)
  return dq, dk, dv


class _Options(typing.NamedTuple):
  scale: float
  rate: float
  causal: bool
  block_q: int
  block_k: int
  interpret: bool


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _attention(q, k, v, lengths, seed, options):
  return _forward(q, k, v, lengths, seed, **options._asdict())[0]


def _attention_fwd(q, k, v, lengths, seed, options):
  o, lse = _forward(q, k, v, lengths, seed, **options._asdict())
  return o, (q, k, v, lengths, seed, o, lse)


def _attention_bwd(options, residuals, do):
  q, k, v, lengths, seed, o, lse = residuals
  dq, dk, dv = _backward(q, k, v, lengths, seed, o, lse, do, **options._asdict())
  return dq, dk, dv, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


def _key_lengths(key_lengths, keys: int):
  """int32 key lengths, at most `keys`; a row with none attends to every key."""
  lengths = jnp.asarray(key_lengths, jnp.int32)
  return jnp.where(lengths > 0, jnp.minimum(lengths, keys), keys)


def _block(length: int, preferred: int) -> int:
  """The largest power of two <= `preferred` that is >= 16 and no longer than the (padded) sequence needs."""
  return max(16, min(preferred, pl.next_power_of_2(length)))


def _pad_to(x, axis: int, size: int):
  if x.shape[axis] == size:
    return x
  pad = [(0, 0)] * x.ndim
  pad[axis] = (0, size - x.shape[axis])
  return jnp.pad(x, pad)


def flash_attention(q, k, v, key_lengths, seed=None, rate: float = 0.0, causal: bool = False,
                    block_q: int = 64, block_k: int = 64, interpret: bool | None = None):
  """Attention over q [b, queries, h, d] and k, v [b, keys, h, d] with the first `key_lengths[b]` keys real.

  `seed` (int32 scalar, traced) and `rate`: attention-probability dropout (`keep_mask`). Sequences are padded to
  a multiple of the block (and the head dimension to a power of two) where needed; a row with no real key
  attends to every key, where a dense mask would give it the uniform average. `interpret` defaults to Pallas'
  interpreter off a GPU.
  """
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"attention dropout rate must be in [0, 1), got {rate}")
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  batch, queries, heads, dim = q.shape
  keys = k.shape[1]
  block_q, block_k = _block(queries, block_q), _block(keys, block_k)
  padded_q, padded_k = -(-queries // block_q) * block_q, -(-keys // block_k) * block_k
  padded_dim = max(16, pl.next_power_of_2(dim))
  lengths = _key_lengths(key_lengths, keys)
  seed = jnp.zeros((), jnp.int32) if seed is None else jnp.asarray(seed).astype(jnp.int32).reshape(())
  options = _Options(1.0 / math.sqrt(dim), float(rate), bool(causal), block_q, block_k, bool(interpret))
  pad = lambda x, n: _pad_to(_pad_to(x, 1, n), 3, padded_dim)  # noqa: E731
  out = _attention(pad(q, padded_q), pad(k, padded_k), pad(v, padded_k), lengths, seed, options)
  return out[:, :queries, :, :dim]


def reference_attention(q, k, v, key_lengths, seed=None, rate: float = 0.0, causal: bool = False):
  """`flash_attention`'s function in plain jnp: a dense float32 softmax, the same keep mask, then the values."""
  batch, queries, heads, dim = q.shape
  keys = k.shape[1]
  lengths = _key_lengths(key_lengths, keys)
  s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) / math.sqrt(dim)
  valid = jnp.arange(keys)[None, None, None, :] < lengths[:, None, None, None]
  if causal:
    valid = valid & (jnp.arange(keys)[None, :] <= jnp.arange(queries)[:, None])[None, None]
  p = jax.nn.softmax(jnp.where(valid, s, MASK_VALUE), axis=-1)
  if rate > 0:
    seed = jnp.asarray(seed).astype(jnp.int32).reshape(())
    head_rows = (jnp.arange(batch)[:, None] * heads + jnp.arange(heads)[None, :]).reshape(-1)
    rows = jax.vmap(lambda r: row_hashes(seed, r, jnp.arange(queries)))(head_rows)
    keep = jax.vmap(lambda r: keep_mask(r, jnp.arange(keys), rate))(rows).reshape(batch, heads, queries, keys)
    p = jnp.where(keep, p / (1.0 - rate), 0.0)
  return jnp.einsum("bhqk,bkhd->bqhd", p.astype(v.dtype), v, preferred_element_type=jnp.float32).astype(q.dtype)
