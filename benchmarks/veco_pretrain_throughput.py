#!/usr/bin/env python
"""VECO pretraining train-step throughput and the share of step time spent in CS-MLM.

Two `VecoModel`s on the same config, trained with the same `Trainer` setup on
the *same* synthetic batch:

- `is+cs+tlm`: VECO (IS-MLM on x and y, CS-MLM x->y and y->x through the
  causal "virtual decoder" with cross-attention to the detached encoder
  states, plus TLM on the concatenated pair);
- `is+tlm`:    the same without the two CS-MLM decoder passes (XLM-style).

Both are compiled, warmed up, then timed *interleaved* (one step of each per
iteration, the order alternating), so load drift on the machine hits both
alike. The CS-MLM share of the step time is

    cs_share = 1 - t(is+tlm) / t(is+cs+tlm)          (median s/step of each)

(the median of the per-iteration ratios is printed too). Note that both
models hold the same parameter tree: VecoModel's init always creates the
cross-attention parameters, so the is+tlm step still runs AdamW over them
(with zero gradients); the share is the cost of the CS forward/backward
passes, not of the cross-attention parameters' optimizer update.

The batch mirrors `VecoPairSource` (XLM-R special ids: <s>=0, <pad>=1,
</s>=2, <unk>=3, <mask>=vocab-1): `x_*` / `y_*` are `<s> tokens </s>` of
S = segment_len + 2 slots, the TLM input is `<s> x </s></s> y </s>` of
T = 2 * segment_len + 4 slots with positions restarting at the second
sentence, random lengths (segment_len // 4 .. segment_len tokens per side, the
first row full) padded with <pad>, BERT 80/10/10 masking
(`xtreme_jax.data.features.masking.mask_tokens`). By default the batch is *bilingual*
(25% masking, TLM weights on); `--batch_kind monolingual` gives VECO's even
batches (15% masking, TLM weights zero). The compute is the same for both:
the TLM encoder pass runs whenever the batch carries TLM features, which
VecoPairSource batches always do, and the masked-slot arrays have fixed
shapes (max_predictions from the 25% rate).

tokens/s counts the non-pad input tokens of x + y + tlm per step.
FLOPs/step is an analytic matmul estimate on padded lengths, forward x 3
for forward + backward (attention scores counted in full, also for the
causal decoder self-attention); XLA's own count (`Lowered.cost_analysis`) is
printed alongside when available.

Examples:

    python benchmarks/veco_pretrain_throughput.py --preset tiny --warmup 2 --steps 5
    python benchmarks/veco_pretrain_throughput.py --batch_size 4 --segment_len 64 --warmup 1 --steps 3   # CPU
    python benchmarks/veco_pretrain_throughput.py --dtype bfloat16 --warmup 3 --steps 20 --json /tmp/veco.json  # GPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

from machine import cpu_count, loadavg, peak_rss_gib, progress, print_sections, version  # benchmarks/machine.py

PRESETS = {
    # gin_configs/models/veco_small.gin
    "veco_small": {"vocab_size": 250002, "hidden_size": 768, "num_layers": 6, "num_heads": 12, "mlp_dim": 3072,
                   "max_positions": 514, "type_vocab_size": 1, "pad_token_id": 1, "position_style": "roberta",
                   "layer_norm_eps": 1e-5},
    # gin_configs/models/tiny.gin, but with 514 positions so the default --segment_len fits the TLM input
    "tiny": {"vocab_size": 1024, "hidden_size": 64, "num_layers": 2, "num_heads": 4, "mlp_dim": 256,
             "max_positions": 514, "type_vocab_size": 1, "pad_token_id": 1, "position_style": "roberta",
             "layer_norm_eps": 1e-5},
}
# The pretraining run mode (gin_configs/runs/pretrain.gin).
LEARNING_RATE, WARMUP_RATIO, WEIGHT_DECAY, ADAM_EPS, MAX_GRAD_NORM = 1e-4, 0.05, 0.01, 1e-6, 1.0
DROPOUT = 0.1
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 0, 1, 2, 3  # XLM-R; <mask> is vocab_size - 1
MONO_MASK_PROB, BI_MASK_PROB = 0.15, 0.25
VARIANTS = {"is+cs+tlm": ("is", "cs", "tlm"), "is+tlm": ("is", "tlm")}






# -- the shared batch ----------------------------------------------------------


def make_batch(batch_size: int, segment_len: int, vocab_size: int, seed: int, bilingual: bool = True) -> dict:
  """A VecoPairSource-shaped batch of random pairs (numpy); see the module docstring."""
  import numpy as np

  from xtreme_jax.data.features import masking

  rng = np.random.default_rng(seed)
  mask_id = vocab_size - 1
  specials = [BOS_ID, PAD_ID, EOS_ID, UNK_ID, mask_id]
  replacements = masking.regular_ids(vocab_size, specials)
  S, T = segment_len + 2, 2 * segment_len + 4
  M = masking.max_predictions_for(S, max(MONO_MASK_PROB, BI_MASK_PROB))
  MT = masking.max_predictions_for(T, max(MONO_MASK_PROB, BI_MASK_PROB))
  prob = BI_MASK_PROB if bilingual else MONO_MASK_PROB

  def pad(ids, length):
    out = np.full(length, PAD_ID, np.int32)
    out[:len(ids)] = ids
    return out

  rows = []
  for r in range(batch_size):
    lo = max(1, segment_len // 4)
    n_x, n_y = (segment_len, segment_len) if r == 0 else rng.integers(lo, segment_len + 1, size=2)
    x = rng.integers(UNK_ID + 1, mask_id, size=n_x).tolist()
    y = rng.integers(UNK_ID + 1, mask_id, size=n_y).tolist()
    row = {}
    for name, ids in (("x", x), ("y", y)):
      seq = pad([BOS_ID, *ids, EOS_ID], S)
      m = masking.mask_tokens(seq, rng, mask_prob=prob, mask_id=mask_id, special_ids=specials,
                              replacement_ids=replacements, max_predictions=M)
      row[f"{name}_input_ids"] = m["input_ids"]
      row[f"{name}_input_mask"] = (np.arange(S) < len(ids) + 2).astype(np.int32)
      row[f"{name}_token_type_ids"] = np.zeros(S, np.int32)
      for k in ("masked_positions", "masked_ids", "masked_weights"):
        row[f"{name}_{k}"] = m[k]
    # XLM-R pair layout <s> x </s></s> y </s>; positions restart where the second part begins.
    ids = [BOS_ID, *x, EOS_ID, EOS_ID, *y, EOS_ID]
    first = len(x) + 2
    positions = np.zeros(T, np.int32)
    positions[:first] = np.arange(first)
    positions[first:len(ids)] = np.arange(len(ids) - first)
    m = masking.mask_tokens(pad(ids, T), rng, mask_prob=BI_MASK_PROB, mask_id=mask_id, special_ids=specials,
                            replacement_ids=replacements, max_predictions=MT)
    row.update(tlm_input_ids=m["input_ids"], tlm_input_mask=(np.arange(T) < len(ids)).astype(np.int32),
               tlm_token_type_ids=np.zeros(T, np.int32), tlm_positions=positions,
               tlm_masked_positions=m["masked_positions"], tlm_masked_ids=m["masked_ids"],
               tlm_masked_weights=m["masked_weights"] if bilingual else np.zeros_like(m["masked_weights"]))
    rows.append(row)
  return {k: np.stack([row[k] for row in rows]) for k in rows[0]}


def batch_stats(batch: dict) -> dict:
  tok = {s: int(batch[f"{s}_input_mask"].sum()) for s in ("x", "y", "tlm")}
  slots = {s: int(batch[f"{s}_input_mask"].size) for s in ("x", "y", "tlm")}
  return {"non_pad_tokens": sum(tok.values()), "padded_tokens": sum(slots.values()),
          "non_pad_by_segment": tok, "padded_by_segment": slots,
          "masked_slots": {s: int(batch[f"{s}_masked_weights"].sum()) for s in ("x", "y", "tlm")},
          "max_predictions": {"x/y": int(batch["x_masked_positions"].shape[1]),
                              "tlm": int(batch["tlm_masked_positions"].shape[1])}}


def batch_fingerprint(batch: dict) -> str:
  import hashlib
  h = hashlib.sha256()
  for k in sorted(batch):
    h.update(batch[k].tobytes())
  return h.hexdigest()[:16]


# -- analytic FLOPs ------------------------------------------------------------


def analytic_flops(shape: dict, batch_size: int, segment_len: int, M: int, MT: int) -> dict:
  """Forward + backward (3 x forward) matmul FLOPs per step on padded lengths, by path."""
  h, f, n_layers, V = shape["hidden_size"], shape["mlp_dim"], shape["num_layers"], shape["vocab_size"]
  S, T, B = segment_len + 2, 2 * segment_len + 4, batch_size

  def enc(n):  # one sequence through the encoder stack
    return n_layers * (2 * n * (4 * h * h + 2 * h * f) + 4 * n * n * h)

  def dec(n, m):  # causal self-attention + cross-attention to m memory states + FFN
    self_attn = 2 * n * 4 * h * h + 4 * n * n * h
    cross = 2 * n * 2 * h * h + 2 * m * 2 * h * h + 4 * n * m * h
    return n_layers * (self_attn + cross + 2 * n * 2 * h * f)

  head = 2 * h * h + 2 * h * V  # MLM transform + tied vocabulary projection, per predicted slot
  fwd = {"is": B * (2 * enc(S) + 2 * M * head),
         "cs": B * (2 * dec(S, S) + 2 * M * head),
         "tlm": B * (enc(T) + MT * head)}
  out = {k: 3.0 * v for k, v in fwd.items()}
  out["vocab_projection"] = 3.0 * B * (4 * M + MT) * 2 * h * V  # part of the three above
  out["is+cs+tlm"] = out["is"] + out["cs"] + out["tlm"]
  out["is+tlm"] = out["is"] + out["tlm"]
  return out


# -- one variant ---------------------------------------------------------------


class Variant:
  """A Trainer + state for one objective set; `step()` runs and times one train step."""

  def __init__(self, name: str, objectives: tuple, args, shape: dict, batch: dict, run_dir: str):
    import jax

    from xtreme_jax.models.veco import VecoModel
    from xtreme_jax.networks.config import TransformerConfig
    from xtreme_jax.training.optim import OptimizerConfig
    from xtreme_jax.training.partitioning import PartitionConfig
    from xtreme_jax.training.trainer import Trainer, TrainerConfig

    self.name, self.batch = name, batch
    config = TransformerConfig(**shape, dropout_rate=DROPOUT, attention_dropout_rate=DROPOUT, dtype=args.dtype,
                               remat=args.remat)
    model = VecoModel(config, objectives=objectives)
    optimizer = OptimizerConfig(learning_rate=LEARNING_RATE, warmup_ratio=WARMUP_RATIO, weight_decay=WEIGHT_DECAY,
                                eps=ADAM_EPS, max_grad_norm=MAX_GRAD_NORM)
    trainer_config = TrainerConfig(train_steps=args.warmup + args.steps, seed=args.seed, progress_bar=False)
    self.trainer = Trainer(model, optimizer, trainer_config, PartitionConfig(), os.path.join(run_dir, name))
    t0 = time.perf_counter()
    self.state = self.trainer.init_state(batch)
    jax.block_until_ready(self.state)
    self.init_s = time.perf_counter() - t0
    leaves = jax.tree_util.tree_leaves(self.state.params)
    self.n_params = sum(int(x.size) for x in leaves)
    self.times, self.losses, self.metrics = [], [], {}
    self.xla_flops = self._xla_flops() if args.xla_flops else None

  def _xla_flops(self):
    try:
      t = self.trainer
      with t.sharding_context():  # as Trainer.train_step
        cost = t._train_step.lower(self.state, t.to_global(self.batch), t.hyperparameters).cost_analysis()
      if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
      return float(cost["flops"]) if cost and "flops" in cost else None
    except Exception as e:  # noqa: BLE001 -- optional number; never fail the benchmark for it
      progress(f"{self.name}: no XLA cost analysis ({type(e).__name__}: {e})")
      return None

  def step(self, label: str) -> float:
    t = time.perf_counter()
    self.state, metrics = self.trainer.train_step(self.state, self.batch)
    metrics["loss"].block_until_ready()
    dt = time.perf_counter() - t
    self.times.append(dt)
    self.losses.append(float(metrics["loss"]))
    self.metrics = {k: float(v) for k, v in metrics.items() if getattr(v, "ndim", 1) == 0}
    progress(f"{self.name:<10} step {len(self.times)} {label}: {dt:.3f} s, loss {self.losses[-1]:.4f}")
    return dt

  def result(self, warmup: int) -> dict:
    timed = self.times[warmup:]
    return {"objectives": list(VARIANTS[self.name]), "n_params": self.n_params, "init_state_s": self.init_s,
            "first_step_s": self.times[0], "warmup_times_s": self.times[:warmup],
            "median_s": statistics.median(timed), "mean_s": statistics.fmean(timed), "min_s": min(timed),
            "max_s": max(timed), "times_s": timed, "losses": self.losses, "last_metrics": self.metrics,
            "xla_flops_per_step": self.xla_flops}


def run(args, shape: dict, batch: dict) -> tuple[dict, list[float]]:
  """Results per variant and the per-iteration CS shares (interleaved mode only)."""
  import gc

  results, paired = {}, []
  with tempfile.TemporaryDirectory(prefix="xtreme_jax_veco_bench_") as run_dir:
    if args.sequential:  # one variant at a time: half the peak memory, no protection against drift
      for name, objectives in VARIANTS.items():
        progress(f"{name}: init_state (jit + init + compile)")
        v = Variant(name, objectives, args, shape, batch, run_dir)
        for i in range(args.warmup + args.steps):
          v.step("(warm-up)" if i < args.warmup else "")
        results[name] = v.result(args.warmup)
        del v
        gc.collect()
      return results, paired

    variants = {}
    for name, objectives in VARIANTS.items():
      progress(f"{name}: init_state (jit + init + compile)")
      variants[name] = Variant(name, objectives, args, shape, batch, run_dir)
    for v in variants.values():
      for _ in range(args.warmup):
        v.step("(warm-up)")
    full, no_cs = variants["is+cs+tlm"], variants["is+tlm"]
    for i in range(args.steps):
      order = (full, no_cs) if i % 2 == 0 else (no_cs, full)
      dts = {v.name: v.step("") for v in order}
      paired.append(1.0 - dts["is+tlm"] / dts["is+cs+tlm"])
    for name, v in variants.items():
      results[name] = v.result(args.warmup)
  return results, paired


# -- report --------------------------------------------------------------------


def _fmt(v, spec: str) -> str:
  if v is None or (isinstance(v, float) and not math.isfinite(v)):
    return "-"
  return format(v, spec)


def main(argv=None) -> int:
  args = parse_args(argv)
  shape = PRESETS[args.preset]
  t_start = time.perf_counter()
  load_before = loadavg()

  import jax
  import numpy as np

  batch = make_batch(args.batch_size, args.segment_len, shape["vocab_size"], args.seed,
                     bilingual=args.batch_kind == "bilingual")
  stats = batch_stats(batch)
  M, MT = stats["max_predictions"]["x/y"], stats["max_predictions"]["tlm"]
  flops = analytic_flops(shape, args.batch_size, args.segment_len, M, MT)

  results, paired = run(args, shape, batch)
  for name, r in results.items():
    s = r["median_s"]
    r["pairs_per_s"] = args.batch_size / s
    r["tokens_per_s"] = stats["non_pad_tokens"] / s
    r["padded_tokens_per_s"] = stats["padded_tokens"] / s
    r["analytic_flops_per_step"] = flops[name]
    r["analytic_tflops_per_s"] = flops[name] / s / 1e12
    r["xla_tflops_per_s"] = None if r["xla_flops_per_step"] is None else r["xla_flops_per_step"] / s / 1e12
  full, no_cs = results["is+cs+tlm"], results["is+tlm"]
  cs_share = 1.0 - no_cs["median_s"] / full["median_s"]
  cs_share_paired = statistics.median(paired) if paired else None
  cs_flops_share = flops["cs"] / flops["is+cs+tlm"]

  dev = jax.devices()[0]
  machine = {
      "python": platform.python_version(),
      "os": platform.platform(),
      "cpu count (usable / total)": f"{cpu_count()} / {os.cpu_count()}",
      "jax platform / device kind": f"{dev.platform} / {dev.device_kind} x{jax.device_count()}",
      "versions": (f"jax {version('jax')} (jaxlib {version('jaxlib')}), flax {version('flax')}, "
                   f"optax {version('optax')}, numpy {np.__version__}"),
      "load average 1/5/15 min": f"before {load_before}, after {loadavg()} (other work on the machine skews timings)",
  }
  nt, pt = stats["non_pad_by_segment"], stats["padded_by_segment"]
  setup = {
      "preset": f"{args.preset} {shape}",
      "batch": (f"{args.batch_kind}, {args.batch_size} pairs, segment_len {args.segment_len} "
                f"(x/y {args.segment_len + 2} slots, tlm {2 * args.segment_len + 4}), seed {args.seed}"),
      "non-pad tokens / step": (f"{stats['non_pad_tokens']} of {stats['padded_tokens']} slots "
                                f"(x {nt['x']}/{pt['x']}, y {nt['y']}/{pt['y']}, tlm {nt['tlm']}/{pt['tlm']})"),
      "masked slots (x / y / tlm)": (f"{stats['masked_slots']['x']} / {stats['masked_slots']['y']} / "
                                     f"{stats['masked_slots']['tlm']} (max_predictions {M} / {M} / {MT} per row)"),
      "compute dtype": f"{args.dtype} (params float32), remat={args.remat}",
      "optimizer": (f"AdamW lr {LEARNING_RATE:g} ({WARMUP_RATIO:.0%} warmup, linear decay), wd {WEIGHT_DECAY:g}, "
                    f"eps {ADAM_EPS:g}, clip {MAX_GRAD_NORM:g}, dropout {DROPOUT:g}"),
      "params (both variants)": f"{full['n_params']:,} / {no_cs['n_params']:,} (same tree: cross-attention "
                                "params exist in is+tlm too, updated with zero grads)",
      "timing": ("sequential (one variant after the other)" if args.sequential else
                 "interleaved, one step of each per iteration, order alternating")
                + f"; {args.warmup} warm-up + {args.steps} timed steps each",
  }

  print_sections(machine=machine, setup=setup)

  names = list(VARIANTS)
  rows = [  # (label, key, format)
      ("s/step (median)", "median_s", ".4f"),
      ("s/step (min)", "min_s", ".4f"),
      ("s/step (max)", "max_s", ".4f"),
      ("tokens/s (x+y+tlm non-pad)", "tokens_per_s", ".1f"),
      ("tokens/s (padded)", "padded_tokens_per_s", ".1f"),
      ("pairs/s", "pairs_per_s", ".2f"),
      ("GFLOP/step (analytic f+b)", "analytic_gflops", ".1f"),
      ("GFLOP/step (XLA count)", "xla_gflops", ".1f"),
      ("TFLOP/s (analytic)", "analytic_tflops_per_s", ".4f"),
      ("first step s (+compile)", "first_step_s", ".2f"),
      ("init_state s (jit + init)", "init_state_s", ".2f"),
      ("loss first -> last", None, None),
  ]
  for r in results.values():
    r["analytic_gflops"] = r["analytic_flops_per_step"] / 1e9
    r["xla_gflops"] = None if r["xla_flops_per_step"] is None else r["xla_flops_per_step"] / 1e9
  width = 30
  header = f"{'':<{width}}" + "".join(f"{n:>16}" for n in names) + f"{'ratio':>10}"
  print(f"\n== VECO pretrain step on {dev.platform} ({dev.device_kind}): {args.preset}, "
        f"{args.batch_size} pairs x segment {args.segment_len}, {args.dtype}, "
        f"{args.steps} timed steps after {args.warmup} warm-up ==")
  print(header)
  print("-" * len(header))
  for label, key, spec in rows:
    if key is None:
      cells = [f"{results[n]['losses'][0]:.3f}->{results[n]['losses'][-1]:.3f}" for n in names]
      ratio = "-"
    else:
      vals = [results[n].get(key) for n in names]
      cells = [_fmt(v, spec) for v in vals]
      ratio = _fmt(vals[0] / vals[1] if None not in vals and vals[1] else None, ".3f")
    print(f"{label:<{width}}" + "".join(f"{c:>16}" for c in cells) + f"{ratio:>10}")
  print(f"\nCS-MLM share of step time: 1 - t(is+tlm)/t(is+cs+tlm) = {100 * cs_share:.1f}% (medians)"
        + (f", {100 * cs_share_paired:.1f}% (median of {len(paired)} paired iterations)" if paired else ""))
  print(f"CS-MLM share of analytic FLOPs: {100 * cs_flops_share:.1f}%   "
        f"(analytic split of is+cs+tlm: is {flops['is'] / 1e9:.1f}, cs {flops['cs'] / 1e9:.1f}, "
        f"tlm {flops['tlm'] / 1e9:.1f} GFLOP; {100 * flops['vocab_projection'] / flops['is+cs+tlm']:.0f}% "
        "of it in the tied vocabulary projection at the masked slots)")
  where = "cumulative over both variants" if args.sequential else "both variants in one process"
  print(f"peak RSS {peak_rss_gib():.2f} GiB ({where})")
  print(f"\n(total wall time {time.perf_counter() - t_start:.0f} s)")

  if args.json:
    out = {"machine": {**machine, "platform": dev.platform, "device_kind": dev.device_kind,
                       "cpu_count": cpu_count(), "jax_version": jax.__version__},
           "setup": setup, "args": vars(args), "batch": {**stats, "fingerprint": batch_fingerprint(batch)},
           "analytic_flops_per_step": flops, "results": results,
           "cs_share": cs_share, "cs_share_paired_median": cs_share_paired, "cs_share_paired": paired,
           "cs_flops_share": cs_flops_share, "peak_rss_gib": peak_rss_gib()}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      json.dump(out, f, indent=2)
    print(f"wrote {args.json}")
  return 0


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--preset", choices=sorted(PRESETS), default="veco_small")
  p.add_argument("--steps", type=int, default=10, help="timed steps per variant (default 10)")
  p.add_argument("--warmup", type=int, default=2,
                 help="untimed steps per variant first; the first includes compilation (default 2, min 1)")
  p.add_argument("--batch_size", type=int, default=16, help="pairs per step (default 16)")
  p.add_argument("--segment_len", type=int, default=128,
                 help="tokens per segment without <s> </s> (default 128; TLM input is 2 * segment_len + 4)")
  p.add_argument("--batch_kind", choices=("bilingual", "monolingual"), default="bilingual",
                 help="bilingual: 25%% masking, TLM on (default); monolingual: 15%%, TLM weights zero "
                      "(same compute either way)")
  p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                 help="compute dtype (params stay float32)")
  p.add_argument("--remat", action="store_true", help="rematerialise every layer")
  p.add_argument("--sequential", action="store_true",
                 help="run the variants one after the other (half the peak memory) instead of interleaved")
  p.add_argument("--no_xla_flops", dest="xla_flops", action="store_false",
                 help="skip XLA's FLOP count (an extra lowering per variant)")
  p.add_argument("--json", metavar="OUT", help="write all numbers to this JSON file")
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  if args.steps < 1 or args.warmup < 1:
    p.error("--steps and --warmup must be >= 1 (the first step compiles)")
  if args.batch_size < 1 or args.segment_len < 2:
    p.error("--batch_size must be >= 1 and --segment_len >= 2")
  # roberta positions: the x/y segments use pad_id + 1 .. pad_id + S (the TLM positions restart, so are shorter).
  need = args.segment_len + 2 + PRESETS[args.preset]["pad_token_id"] + 1
  if need > PRESETS[args.preset]["max_positions"]:
    p.error(f"--segment_len {args.segment_len} needs {need} positions; the preset has "
            f"{PRESETS[args.preset]['max_positions']}")
  return args


if __name__ == "__main__":
  sys.exit(main())
