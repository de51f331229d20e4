#!/usr/bin/env python
"""Attention kernels and dropout generators side by side, on one GPU: time (forward + backward) and error.

    PYTHONPATH=. python3 benchmarks/attention_kernels.py --json $OUT/attention_kernels.json     # GPU, ~3 min
    PYTHONPATH=. python3 benchmarks/attention_kernels.py --smoke                                # CPU, interpreter

Attention, bf16, [batch, length, heads, 64] with random key lengths (`make_batch`'s: uniform in [length / 4,
length], the first row full), the gradient of sum(out * g) with respect to q, k, v:

- `reference`: `layers.dot_product_attention`'s einsum path, with attention dropout 0.1 as `flax.linen.Dropout`
  draws it (threefry bits, a [b, h, q, k] mask) and without;
- `cudnn`: `jax.nn.dot_product_attention(implementation='cudnn')` with key lengths (no dropout: it has none);
- `flash`: `networks.flash_attention` at rate 0.1 and 0, for each block shape of `--blocks`.

Dropout on a [batch, length, hidden] bf16 activation (the hidden dropout BERT applies 3 times a layer): flax's
`Dropout` with threefry keys, with `jax_threefry_gpu_kernel_lowering`, with 'rbg' / 'unsafe_rbg' keys, and the
flash kernel's hash (`flash_attention.keep_mask`'s function on positions), each jitted alone with its consumer
(x * mask), forward only.

Each time: the median of `--steps` calls after 3 warm-up calls, synchronised. The flash kernel's error against
`flash_attention.reference_attention` (the same masks, float32 softmax) is printed for every shape.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

SHAPES = [(256, 128, 12, 64), (32, 512, 12, 64), (8, 512, 16, 64)]
SMOKE_SHAPES = [(2, 32, 2, 16)]
RATE = 0.1


def timed(fn, args, steps: int) -> float:
  import jax
  for _ in range(3):
    jax.block_until_ready(fn(*args))
  times = []
  for _ in range(steps):
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t)
  return statistics.median(times)


def lengths_for(batch: int, length: int, seed: int = 0):
  import numpy as np
  rng = np.random.default_rng(seed)
  lengths = rng.integers(max(1, length // 4), length + 1, size=batch)
  lengths[0] = length
  return lengths.astype(np.int32)


def attention_variants(blocks, smoke: bool):
  """name -> f(q, k, v, lengths, key) for the attention output."""
  import jax
  import jax.numpy as jnp
  from xtreme_jax.networks import flash_attention as fa
  from xtreme_jax.networks import layers
  from xtreme_jax.networks.config import TransformerConfig

  def config(impl, heads, dim):
    return TransformerConfig(vocab_size=8, hidden_size=heads * dim, num_heads=heads, dtype="bfloat16",
                             attention_dropout_rate=RATE, attention_implementation=impl)

  def mask_of(lengths, length):
    return (jnp.arange(length)[None, :] < lengths[:, None]).astype(jnp.int32)

  def reference(rate):
    def f(q, k, v, lengths, key):
      cfg = config("reference", q.shape[2], q.shape[3])
      drop = None
      if rate:
        drop = lambda p: jnp.where(jax.random.bernoulli(key, 1 - rate, p.shape), p / (1 - rate), 0).astype(p.dtype)  # noqa: E731
      return layers.dot_product_attention(cfg, q, k, v, mask_of(lengths, k.shape[1]), False, drop)
    return f

  def cudnn(q, k, v, lengths, key):
    return jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths, implementation="cudnn")

  def flash(rate, bq, bk):
    def f(q, k, v, lengths, key):
      seed = jax.lax.bitcast_convert_type(jax.random.bits(key, (), jnp.uint32), jnp.int32)
      return fa.flash_attention(q, k, v, lengths, seed, rate, block_q=bq, block_k=bk)
    return f

  variants = {"reference adrop 0.1": reference(RATE), "reference adrop 0": reference(0.0)}
  if not smoke:
    variants["cudnn adrop 0"] = cudnn
  for bq, bk in blocks:
    variants[f"flash {bq}x{bk} adrop 0.1"] = flash(RATE, bq, bk)
  bq, bk = blocks[0]
  variants[f"flash {bq}x{bk} adrop 0"] = flash(0.0, bq, bk)
  return variants


def attention_rows(args, shapes, blocks) -> list[dict]:
  import jax
  import jax.numpy as jnp
  import numpy as np
  from xtreme_jax.networks import flash_attention as fa
  rows = []
  for batch, length, heads, dim in shapes:
    rng = np.random.default_rng(0)
    q, k, v, g = (jnp.asarray(rng.standard_normal((batch, length, heads, dim)), jnp.bfloat16) for _ in range(4))
    lengths = jnp.asarray(lengths_for(batch, length))
    key = jax.random.PRNGKey(0)
    seed = jnp.int32(1234)
    # Error of the kernel (first block shape) against the dense function with the same masks.
    bq, bk = blocks[0]
    loss = lambda fn: (lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) * g.astype(jnp.float32)))  # noqa: E731
    ours = lambda q, k, v: fa.flash_attention(q, k, v, lengths, seed, RATE, block_q=bq, block_k=bk)  # noqa: E731
    dense = lambda q, k, v: fa.reference_attention(  # noqa: E731
        *(x.astype(jnp.float32) for x in (q, k, v)), lengths, seed, RATE)
    o, o_ref = jax.jit(ours)(q, k, v), jax.jit(dense)(q, k, v)
    grads = jax.jit(jax.grad(loss(ours), argnums=(0, 1, 2)))(q, k, v)
    grads_ref = jax.jit(jax.grad(loss(dense), argnums=(0, 1, 2)))(q, k, v)
    rel = lambda a, b: float(jnp.linalg.norm(a.astype(jnp.float32) - b) / jnp.linalg.norm(b))  # noqa: E731
    errors = {"out": rel(o, o_ref), **{f"d{n}": rel(a, b) for n, a, b in zip("qkv", grads, grads_ref)}}
    shape = f"{batch}x{length}x{heads}x{dim}"
    print(f"{shape}: flash {bq}x{bk} against the dense float32 function: "
          + ", ".join(f"{n} {e:.1e}" for n, e in errors.items()), flush=True)
    rows.append({"shape": shape, "variant": "error", **errors})
    for name, f in attention_variants(blocks, args.smoke).items():
      if time.perf_counter() - START > args.budget_s:
        print(f"{shape} {name}: skipped (budget)", flush=True)
        continue
      fwd = jax.jit(lambda q, k, v, f=f: f(q, k, v, lengths, key))
      train = jax.jit(jax.value_and_grad(
          lambda q, k, v, f=f: jnp.sum(f(q, k, v, lengths, key).astype(jnp.float32) * g.astype(jnp.float32)),
          argnums=(0, 1, 2)))
      try:
        t = time.perf_counter()
        jax.block_until_ready(train(q, k, v))
        compile_s = time.perf_counter() - t
        row = {"shape": shape, "variant": name, "fwd_ms": 1e3 * timed(fwd, (q, k, v), args.steps),
               "fwd_bwd_ms": 1e3 * timed(train, (q, k, v), args.steps), "first_s": compile_s}
      except Exception as e:  # noqa: BLE001 (a kernel that does not build is a result)
        row = {"shape": shape, "variant": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
      print(json.dumps(row), flush=True)
      rows.append(row)
  return rows


def dropout_rows(args) -> list[dict]:
  import jax
  import jax.numpy as jnp
  import numpy as np
  from xtreme_jax.networks import flash_attention as fa
  shape = (4, 16, 32) if args.smoke else (256, 128, 768)
  x = jnp.asarray(np.random.default_rng(0).standard_normal(shape), jnp.bfloat16)

  def flax_style(key_impl, gpu_lowering=False):
    def make():
      jax.config.update("jax_threefry_gpu_kernel_lowering", gpu_lowering)
      key = jax.random.key(0, impl=key_impl)

      @jax.jit
      def f(x, key):
        keep = jax.random.bernoulli(key, 1 - RATE, x.shape)
        return jnp.where(keep, x / (1 - RATE), 0).astype(x.dtype)
      jax.block_until_ready(f(x, key))  # traced and compiled under the flag
      return f, (x, key)
    return make

  def hashed():
    @jax.jit
    def f(x, seed):
      rows = jax.lax.broadcasted_iota(jnp.int32, (x.shape[0] * x.shape[1],), 0)
      keep = fa.keep_mask(fa.row_hashes(seed, jnp.int32(0), rows), jnp.arange(x.shape[2]), RATE)
      return jnp.where(keep.reshape(x.shape), x / (1 - RATE), 0).astype(x.dtype)
    return f, (x, jnp.int32(7))

  makers = {"threefry": flax_style("threefry2x32"), "threefry gpu kernel": flax_style("threefry2x32", True),
            "rbg": flax_style("rbg"), "unsafe_rbg": flax_style("unsafe_rbg"), "hash": hashed}
  rows = []
  for name, make in makers.items():
    try:
      f, operands = make()
      row = {"shape": "x".join(map(str, shape)), "variant": f"dropout {name}", "fwd_ms": 1e3 * timed(f, operands,
                                                                                                      args.steps)}
    except Exception as e:  # noqa: BLE001
      row = {"variant": f"dropout {name}", "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    finally:
      jax.config.update("jax_threefry_gpu_kernel_lowering", False)
    print(json.dumps(row), flush=True)
    rows.append(row)
  return rows


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--json", help="write the rows here")
  p.add_argument("--smoke", action="store_true", help="tiny shapes (CPU: Pallas' interpreter)")
  p.add_argument("--steps", type=int, default=20)
  p.add_argument("--blocks", default="64x64,128x64,128x128", help="flash block shapes, q x k")
  p.add_argument("--budget_s", type=float, default=170.0, help="no attention variant starts after this")
  args = p.parse_args(argv)
  import jax
  blocks = [tuple(int(n) for n in b.split("x")) for b in args.blocks.split(",")]
  if args.smoke:
    blocks, args.steps = [(16, 16)], 2
  print(f"device {jax.devices()[0].device_kind}, jax {jax.__version__}", flush=True)
  rows = dropout_rows(args) + attention_rows(args, SMOKE_SHAPES if args.smoke else SHAPES, blocks)
  print(f"\n{'shape':<16} {'variant':<28} {'fwd ms':>9} {'fwd+bwd ms':>11} {'first s':>8}")
  for r in rows:
    if "error" in r and r.get("variant") != "error":
      print(f"{r.get('shape', ''):<16} {r['variant']:<28} failed: {r['error'][:80]}")
    elif r.get("variant") != "error":
      print(f"{r['shape']:<16} {r['variant']:<28} {r['fwd_ms']:>9.3f} {r.get('fwd_bwd_ms', float('nan')):>11.3f} "
            f"{r.get('first_s', float('nan')):>8.1f}")
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"device": jax.devices()[0].device_kind, "jax": jax.__version__, "rows": rows}, f, indent=1)
  return 0


START = time.perf_counter()

if __name__ == "__main__":
  sys.exit(main())
