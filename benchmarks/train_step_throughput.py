#!/usr/bin/env python
"""Fine-tuning train-step throughput: xtreme-jax vs Hugging Face transformers (PyTorch).

Sequence classification (3 classes) on the mBERT-base shape (12 layers,
hidden 768, 12 heads, FFN 3072, vocab 119547, 2 token types, 512 positions),
random init, no downloads, dropout on, AdamW (lr 2e-5, weight decay 0.01 off
biases / LayerNorm, linear warmup 10% + linear decay), gradient clipping at
global norm 1.0. Both sides train on the *same* batch: random token ids with
random lengths, padded with id 0, a second segment (token type 1) in the
second half of every example, random labels.

- xtreme-jax: `ClassificationModel(head='pooler')` + `Trainer` (its jitted,
  sharded, donated step; default data-parallel `PartitionConfig`).
- PyTorch: `BertForSequenceClassification` (eager, `attn_implementation`
  `sdpa` by default), `torch.optim.AdamW`, `clip_grad_norm_`,
  `get_linear_schedule_with_warmup`; bf16 via `torch.autocast`.

Printed side by side: median seconds/step over the timed steps (after
`--warmup` untimed steps, the first of which includes XLA compilation),
examples/s, tokens/s (non-pad tokens), the xtreme-jax / PyTorch ratio, and on
a GPU the model FLOPs utilisation:

    flops/step = 6 * n_params_without_embeddings * batch * seq_len
                 + 12 * layers * seq_len^2 * hidden * batch       (fwd + bwd)
    MFU = flops/step / (s/step) / (--peak_tflops * 1e12)

Each side runs in its own subprocess by default (no shared thread pools or
device memory; per-side peak memory), `--in_process` runs both here.

Examples:

    python benchmarks/train_step_throughput.py --preset tiny --warmup 2 --steps 5
    python benchmarks/train_step_throughput.py --warmup 2 --steps 5 --json /tmp/bench.json
    python benchmarks/train_step_throughput.py --dtype bfloat16 --steps 50 --warmup 5   # on a GPU
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

from machine import cpu_count, loadavg, peak_rss_gib, progress, run_sides, version

PRESETS = {
    "mbert_base": dict(vocab_size=119547, hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072,
                       max_positions=512, type_vocab_size=2),
    "tiny": dict(vocab_size=1024, hidden_size=64, num_layers=2, num_heads=4, mlp_dim=256,
                 max_positions=512, type_vocab_size=2),
}
NUM_CLASSES = 3
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM, WARMUP_RATIO = 2e-5, 0.01, 1.0, 0.1
DROPOUT = 0.1
PAD_ID, CLS_ID, SEP_ID = 0, 101, 102






# -- the shared batch ----------------------------------------------------------


def make_batch(batch_size: int, seq_len: int, vocab_size: int, seed: int):
  """Random ids / lengths (>= seq_len // 4) with padding, pair token types, labels (numpy, int32)."""
  import numpy as np
  rng = np.random.default_rng(seed)
  lengths = rng.integers(max(3, seq_len // 4), seq_len + 1, size=batch_size)
  lengths[0] = seq_len  # at least one full-length example
  pos = np.arange(seq_len)[None, :]
  mask = pos < lengths[:, None]
  low = min(1000, vocab_size // 2)  # clear of pad / special ids
  ids = rng.integers(low, vocab_size, size=(batch_size, seq_len))
  cls_id = CLS_ID if vocab_size > SEP_ID else 1
  sep_id = SEP_ID if vocab_size > SEP_ID else 2
  ids[:, 0] = cls_id
  ids[np.arange(batch_size), lengths - 1] = sep_id
  ids = np.where(mask, ids, PAD_ID)
  token_types = ((pos >= (lengths // 2)[:, None]) & mask).astype(np.int32)
  labels = rng.integers(0, NUM_CLASSES, size=batch_size)
  return {"input_ids": ids.astype(np.int32), "input_mask": mask.astype(np.int32),
          "token_type_ids": token_types, "labels": labels.astype(np.int32)}


def batch_fingerprint(batch) -> str:
  import hashlib
  h = hashlib.sha256()
  for k in ("input_ids", "input_mask", "token_type_ids", "labels"):
    h.update(batch[k].tobytes())
  return h.hexdigest()[:16]


def step_stats(times: list[float]) -> dict:
  return {"median_s": statistics.median(times), "mean_s": statistics.fmean(times),
          "min_s": min(times), "max_s": max(times), "times_s": times}


# -- xtreme-jax side -----------------------------------------------------------


def run_jax(args, shape: dict) -> dict:
  import jax
  import numpy as np

  from xtreme_jax.models.classification import ClassificationModel
  from xtreme_jax.networks.config import TransformerConfig
  from xtreme_jax.training.optim import OptimizerConfig
  from xtreme_jax.training.partitioning import PartitionConfig
  from xtreme_jax.training.trainer import Trainer, TrainerConfig

  dev = jax.devices()[0]
  info = {"platform": dev.platform, "device_kind": dev.device_kind, "device_count": jax.device_count(),
          "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision)}
  config = TransformerConfig(**shape, pad_token_id=PAD_ID, dropout_rate=DROPOUT, attention_dropout_rate=DROPOUT,
                             dtype=args.dtype, scan_layers=args.scan_layers, remat=args.remat)
  model = ClassificationModel(config, num_classes=NUM_CLASSES, head="pooler")
  optimizer = OptimizerConfig(learning_rate=LEARNING_RATE, warmup_ratio=WARMUP_RATIO, weight_decay=WEIGHT_DECAY,
                              max_grad_norm=MAX_GRAD_NORM)
  total = args.warmup + args.steps
  trainer_config = TrainerConfig(train_steps=total, seed=args.seed, progress_bar=False)

  raw = make_batch(args.batch_size, args.seq_len, shape["vocab_size"], args.seed)
  batch = {**raw, "example_weights": np.ones((args.batch_size,), np.float32)}

  times, losses = [], []
  with tempfile.TemporaryDirectory(prefix="xtreme_jax_bench_") as run_dir:
    trainer = Trainer(model, optimizer, trainer_config, PartitionConfig(), run_dir)
    t0 = time.perf_counter()
    state = trainer.init_state(batch)
    jax.block_until_ready(state)
    init_s = time.perf_counter() - t0

    leaves = jax.tree_util.tree_leaves_with_path(state.params)
    n_params = sum(int(x.size) for _, x in leaves)
    n_embed = sum(int(x.size) for p, x in leaves
                  if "embeddings" in [str(getattr(k, "key", k)) for k in p])

    for i in range(total):
      t = time.perf_counter()
      state, metrics = trainer.train_step(state, batch)
      metrics["loss"].block_until_ready()
      times.append(time.perf_counter() - t)
      losses.append(float(metrics["loss"]))
      progress(f"xtreme-jax step {i + 1}/{total}{' (warm-up)' if i < args.warmup else ''}: "
                f"{times[-1]:.3f} s, loss {losses[-1]:.4f}")
    final_step = int(jax.device_get(state.step))
    del state

  mem = dev.memory_stats() or {}
  return {**info, "n_params": n_params, "n_params_embeddings": n_embed, "init_state_s": init_s,
          "first_step_s": times[0], "warmup_times_s": times[:args.warmup], **step_stats(times[args.warmup:]),
          "losses": losses, "final_step": final_step, "batch_fingerprint": batch_fingerprint(raw),
          "compute_dtype": args.dtype, "peak_rss_gib": peak_rss_gib(),
          "device_peak_bytes": mem.get("peak_bytes_in_use")}


# -- PyTorch side --------------------------------------------------------------


def run_torch(args, shape: dict) -> dict:
  import torch
  import transformers
  from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

  transformers.logging.set_verbosity_error()
  threads = cpu_count()
  torch.set_num_threads(threads)
  torch.manual_seed(args.seed)
  if args.torch_device == "auto":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
  else:
    device = torch.device(args.torch_device)
  info = {"platform": "gpu" if device.type == "cuda" else device.type,
          "device_kind": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
          "torch_threads": torch.get_num_threads(),
          "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32) if device.type == "cuda" else None}

  config = BertConfig(vocab_size=shape["vocab_size"], hidden_size=shape["hidden_size"],
                      num_hidden_layers=shape["num_layers"], num_attention_heads=shape["num_heads"],
                      intermediate_size=shape["mlp_dim"], max_position_embeddings=shape["max_positions"],
                      type_vocab_size=shape["type_vocab_size"], pad_token_id=PAD_ID, hidden_act="gelu",
                      hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT, layer_norm_eps=1e-12,
                      num_labels=NUM_CLASSES, attn_implementation=args.torch_attn)
  model = BertForSequenceClassification(config).to(device)
  model.train()
  info["attn_implementation"] = model.config._attn_implementation
  n_params = sum(p.numel() for p in model.parameters())
  n_embed = sum(p.numel() for p in model.bert.embeddings.parameters())

  # BERT's rule, as xtreme_jax.training.optim: no weight decay on biases and LayerNorm parameters.
  decay, no_decay = [], []
  for name, p in model.named_parameters():
    (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
  optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8)
  total = args.warmup + args.steps
  scheduler = get_linear_schedule_with_warmup(optimizer, int(WARMUP_RATIO * total), total)

  raw = make_batch(args.batch_size, args.seq_len, shape["vocab_size"], args.seed)
  host = {"input_ids": torch.from_numpy(raw["input_ids"]).long(),
          "attention_mask": torch.from_numpy(raw["input_mask"]).long(),
          "token_type_ids": torch.from_numpy(raw["token_type_ids"]).long(),
          "labels": torch.from_numpy(raw["labels"]).long()}
  if device.type == "cuda":
    host = {k: v.pin_memory() for k, v in host.items()}
  autocast = args.dtype == "bfloat16"

  def sync():
    if device.type == "cuda":
      torch.cuda.synchronize(device)

  def step() -> float:
    batch = {k: v.to(device, non_blocking=True) for k, v in host.items()}
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
      loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()  # synchronises

  times, losses = [], []
  for i in range(total):
    sync()
    t = time.perf_counter()
    losses.append(step())
    sync()
    times.append(time.perf_counter() - t)
    progress(f"PyTorch step {i + 1}/{total}{' (warm-up)' if i < args.warmup else ''}: "
              f"{times[-1]:.3f} s, loss {losses[-1]:.4f}")

  return {**info, "n_params": n_params, "n_params_embeddings": n_embed, "init_state_s": None,
          "first_step_s": times[0], "warmup_times_s": times[:args.warmup], **step_stats(times[args.warmup:]),
          "losses": losses, "final_step": total, "batch_fingerprint": batch_fingerprint(raw),
          "compute_dtype": "bfloat16 (torch.autocast)" if autocast else "float32",
          "peak_rss_gib": peak_rss_gib(),
          "device_peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None}


# -- driver --------------------------------------------------------------------


SIDES = {"jax": run_jax, "torch": run_torch}




def model_flops_per_step(res: dict, shape: dict, args) -> float:
  tokens = args.batch_size * args.seq_len  # the compute runs over padded tokens
  dense = 6 * (res["n_params"] - res["n_params_embeddings"]) * tokens
  attention = 12 * shape["num_layers"] * args.seq_len ** 2 * shape["hidden_size"] * args.batch_size
  return float(dense + attention)


def derive(res: dict, shape: dict, args, non_pad_tokens: int) -> None:
  if "error" in res:
    return
  s = res["median_s"]
  res["examples_per_s"] = args.batch_size / s
  res["tokens_per_s"] = non_pad_tokens / s
  res["padded_tokens_per_s"] = args.batch_size * args.seq_len / s
  res["model_flops_per_step"] = model_flops_per_step(res, shape, args)
  res["achieved_tflops"] = res["model_flops_per_step"] / s / 1e12
  res["mfu"] = res["achieved_tflops"] / args.peak_tflops if res["platform"] == "gpu" else None


def _fmt(v, spec: str) -> str:
  if v is None or (isinstance(v, float) and not math.isfinite(v)):
    return "-"
  return format(v, spec)


def print_report(machine: dict, setup: dict, results: dict, args) -> None:
  print("\n== machine ==")
  for k, v in machine.items():
    print(f"  {k:<28} {v}")
  print("\n== setup ==")
  for k, v in setup.items():
    print(f"  {k:<28} {v}")

  jx, pt = results.get("jax", {}), results.get("torch")
  sides = [("xtreme-jax", jx)] + ([("PyTorch", pt)] if pt is not None else [])
  for name, r in sides:
    if "error" in r:
      print(f"\n!! {name} side failed: {r['error']}")

  rows = [  # (label, key, format, ratio?)
      ("s/step (median)", "median_s", ".4f", True),
      ("s/step (min)", "min_s", ".4f", True),
      ("s/step (max)", "max_s", ".4f", True),
      ("examples/s", "examples_per_s", ".2f", True),
      ("tokens/s (non-pad)", "tokens_per_s", ".1f", True),
      ("tokens/s (padded)", "padded_tokens_per_s", ".1f", True),
      ("model TFLOP/s", "achieved_tflops", ".4f", True),
      ("first step s (jax: +compile)", "first_step_s", ".2f", False),
      ("init_state s (jit + init)", "init_state_s", ".2f", False),
      ("peak RSS GiB " + ("(cumulative)" if args.in_process else "(process)"), "peak_rss_gib", ".2f", False),
      ("loss first -> last", None, None, False),
  ]
  if any(r.get("platform") == "gpu" for _, r in sides):
    rows.insert(7, ("MFU %", "mfu_pct", ".2f", True))
    rows.append(("peak device memory GiB", "device_peak_gib", ".2f", False))
  for _, r in sides:
    if "error" not in r:
      r["mfu_pct"] = None if r.get("mfu") is None else 100 * r["mfu"]
      r["device_peak_gib"] = None if r.get("device_peak_bytes") is None else r["device_peak_bytes"] / 2**30

  width = 30
  header = f"{'':<{width}}" + "".join(f"{n:>16}" for n, _ in sides) + (f"{'jax/torch':>12}" if pt is not None else "")
  print(f"\n== train step: {args.preset}, batch {args.batch_size} x seq {args.seq_len}, "
        f"{args.steps} timed steps after {args.warmup} warm-up ==")
  print(header)
  print("-" * len(header))
  for label, key, spec, ratio in rows:
    cells = []
    for _, r in sides:
      if "error" in r:
        cells.append("error")
      elif key is None:
        cells.append(f"{r['losses'][0]:.3f}->{r['losses'][-1]:.3f}")
      else:
        cells.append(_fmt(r.get(key), spec))
    line = f"{label:<{width}}" + "".join(f"{c:>16}" for c in cells)
    if pt is not None and ratio and "error" not in jx and "error" not in pt:
      a, b = jx.get(key), pt.get(key)
      line += f"{_fmt(a / b if a is not None and b else None, '.3f'):>12}"
    print(line)
  if pt is not None and "error" not in jx and "error" not in pt:
    speedup = pt["median_s"] / jx["median_s"]
    print(f"\nxtreme-jax / PyTorch throughput ratio (examples/s): {speedup:.3f} "
          f"({'xtreme-jax' if speedup >= 1 else 'PyTorch'} faster by {max(speedup, 1 / speedup):.2f}x)")
  if any(r.get("mfu") is not None for _, r in sides if "error" not in r):
    print(f"MFU against a peak of {args.peak_tflops:g} TFLOP/s (--peak_tflops); compute dtype "
          + ", ".join(f"{n}: {r['compute_dtype']}" for n, r in sides if "error" not in r)
          + ". flops/step = 6 * non-embedding params * batch * seq_len + 12 * layers * seq_len^2 * hidden * batch.")


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--preset", choices=sorted(PRESETS), default="mbert_base")
  p.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
  p.add_argument("--warmup", type=int, default=2,
                 help="untimed steps first; the first xtreme-jax step includes compilation (default 2, min 1)")
  p.add_argument("--batch_size", type=int, default=32, help="global batch (default 32)")
  p.add_argument("--seq_len", type=int, default=128)
  p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                 help="xtreme-jax compute dtype (params stay float32); PyTorch uses torch.autocast to match")
  p.add_argument("--skip_torch", action="store_true", help="run only the xtreme-jax side")
  p.add_argument("--peak_tflops", type=float, default=989.0,
                 help="device peak for MFU on a GPU (default 989: H100 SXM bf16 dense)")
  p.add_argument("--json", metavar="OUT", help="write all numbers to this JSON file")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--scan_layers", action="store_true", help="xtreme-jax: scan over layers (default unrolled)")
  p.add_argument("--remat", action="store_true", help="xtreme-jax: rematerialise every layer")
  p.add_argument("--torch_attn", choices=("sdpa", "eager"), default="sdpa",
                 help="transformers attn_implementation (default sdpa)")
  p.add_argument("--torch_device", choices=("auto", "cpu", "cuda"), default="auto")
  p.add_argument("--in_process", action="store_true",
                 help="run both sides in this process instead of one subprocess each")
  p.add_argument("--_worker", choices=sorted(SIDES), help=argparse.SUPPRESS)
  p.add_argument("--_result", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.steps < 1 or args.warmup < 1:
    p.error("--steps and --warmup must be >= 1 (the first step compiles)")
  if args.seq_len > PRESETS[args.preset]["max_positions"]:
    p.error(f"--seq_len {args.seq_len} exceeds max_positions {PRESETS[args.preset]['max_positions']}")
  if args.seq_len < 4 or args.batch_size < 1:
    p.error("--seq_len must be >= 4 and --batch_size >= 1")
  return args


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  shape = PRESETS[args.preset]

  t_start = time.perf_counter()
  load_before = loadavg()
  results = run_sides(__file__, args, argv, SIDES, shape, {"jax": "xtreme-jax", "torch": "PyTorch"})
  if results is None:  # a worker subprocess: its side's results are written
    return 0

  import numpy as np
  batch = make_batch(args.batch_size, args.seq_len, shape["vocab_size"], args.seed)
  non_pad = int(batch["input_mask"].sum())
  for r in results.values():
    derive(r, shape, args, non_pad)
  fingerprints = {r["batch_fingerprint"] for r in results.values() if "error" not in r}
  if len(fingerprints) > 1:
    print(f"!! the two sides saw different batches: {fingerprints}")

  jx, pt = results["jax"], results.get("torch", {})
  machine = {
      "python": platform.python_version(),
      "os": platform.platform(),
      "cpu count (usable / total)": f"{cpu_count()} / {os.cpu_count()}",
      "jax platform / device kind": (f"{jx.get('platform')} / {jx.get('device_kind')} x{jx.get('device_count')}"
                                     if "error" not in jx else "-"),
      "torch device": (f"{pt.get('platform')} / {pt.get('device_kind')}" if pt and "error" not in pt else "-"),
      "torch threads": pt.get("torch_threads", "-") if pt else "-",
      "torch attention": pt.get("attn_implementation", "-") if pt else "-",
      "versions": (f"jax {version('jax')} (jaxlib {version('jaxlib')}), flax {version('flax')}, "
                   f"optax {version('optax')}, torch {version('torch')}, transformers {version('transformers')}, "
                   f"numpy {np.__version__}"),
      "isolation": "in one process" if args.in_process else "one subprocess per side",
      "load average 1/5/15 min": f"before {load_before}, after {loadavg()} (other work on the machine skews timings)",
  }
  setup = {
      "preset": f"{args.preset} {shape}",
      "task": f"sequence classification, {NUM_CLASSES} classes, pooler head",
      "batch": (f"{args.batch_size} x {args.seq_len}, {non_pad} non-pad tokens "
                f"({non_pad / (args.batch_size * args.seq_len):.1%}), seed {args.seed}"),
      "compute dtype": f"{args.dtype} (params float32)",
      "optimizer": (f"AdamW lr {LEARNING_RATE:g} (10% warmup, linear decay), wd {WEIGHT_DECAY:g} "
                    f"(not on bias/LayerNorm), clip {MAX_GRAD_NORM:g}, dropout {DROPOUT:g}"),
      "params (total / embeddings)": " | ".join(
          f"{n}: {r['n_params']:,} / {r['n_params_embeddings']:,}"
          for n, r in (("xtreme-jax", jx), ("PyTorch", pt)) if r and "error" not in r),
      "xtreme-jax layers": f"scan_layers={args.scan_layers}, remat={args.remat}",
  }
  print_report(machine, setup, results, args)
  print(f"\n(total wall time {time.perf_counter() - t_start:.0f} s)")

  if args.json:
    out = {"machine": machine, "setup": setup, "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
           "results": results}
    if "torch" in results and "error" not in jx and "error" not in results["torch"]:
      out["ratio_jax_over_torch"] = {k: jx[k] / results["torch"][k] for k in
                                     ("median_s", "examples_per_s", "tokens_per_s")}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      json.dump(out, f, indent=2)
    print(f"wrote {args.json}")
  return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
  sys.exit(main())
