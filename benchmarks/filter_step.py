#!/usr/bin/env python
"""FILTER train-step time vs plain fine-tuning at the same total sequence length (issue 14, deliverable 8).

FILTER reads a text and its translation: two sides of `--side_len` tokens,
fused in k of the layers, so one example is 2 x side_len tokens (tagging:
2 x 128 = 256; QA: 2 x 384 = 768). The plain model here reads one sequence of
that total length. Both are xtreme-jax's own jitted, sharded `Trainer` step
(AdamW, dropout on) on random ids with random lengths, mBERT-base shape by
default (`--preset tiny` for a quick CPU check):

- plain: `ClassificationModel` / `TaggingModel` / `QaModel` on (batch, 2L)
- FILTER: `FilterClassificationModel` / ... (teacher loss: both sides
  supervised) on (batch, L) + (batch, L), m = `--local_layers`, k =
  `--fusion_layers`; the student adds only the KL terms (no extra network
  pass).

FILTER's local layers attend within each side through a block-diagonal
mask over the concatenation (`networks/filter.py`), so it does the plain
model's work plus the per-side embeddings and head; the ratio printed is
FILTER / plain seconds per step (median after `--warmup` untimed steps).
There is no PyTorch side: the comparison the issue asks for is FILTER
against plain fine-tuning, both ours.

    python benchmarks/filter_step.py --preset tiny --task tagging --warmup 2 --steps 5
    python benchmarks/filter_step.py --task qa --side_len 384 --batch_size 16 --dtype bfloat16   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time

from machine import cpu_count, loadavg, peak_rss_gib, print_sections, progress, version

PRESETS = {
    "mbert_base": dict(vocab_size=119547, hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072,
                       max_positions=512, type_vocab_size=2),
    "tiny": dict(vocab_size=1024, hidden_size=64, num_layers=2, num_heads=4, mlp_dim=256, max_positions=512,
                 type_vocab_size=2),
}
SIDE_LEN = {"classification": 128, "tagging": 128, "qa": 384}
NUM_LABELS = 17


def side(rng, batch_size: int, length: int, vocab_size: int) -> tuple:
  """Random ids (>= 5) with random lengths (>= length // 4, the first row full), padded with 0; the mask."""
  import numpy as np
  lengths = rng.integers(max(2, length // 4), length + 1, size=batch_size)
  lengths[0] = length
  mask = np.arange(length)[None] < lengths[:, None]
  ids = np.where(mask, rng.integers(5, vocab_size, size=(batch_size, length)), 0)
  return ids.astype(np.int32), mask.astype(np.int32)


def labels(rng, task: str, prefix: str, ids, mask) -> dict:
  import numpy as np
  b, n = ids.shape
  if task == "classification":
    return {} if prefix else {"labels": rng.integers(0, 3, b).astype(np.int32),
                              "example_weights": np.ones(b, np.float32)}
  if task == "tagging":
    return {f"{prefix}labels": np.where(mask, rng.integers(0, NUM_LABELS, (b, n)), -100).astype(np.int32),
            f"{prefix}label_weights": mask.astype(np.float32)}
  start = rng.integers(1, n // 4, b).astype(np.int32)
  return {f"{prefix}start_positions": start, f"{prefix}end_positions": start + 2,
          f"{prefix}example_weights": np.ones(b, np.float32)}


def batches(args, shape: dict) -> dict:
  """{"plain": one (batch, 2L) batch, "filter": the (batch, L) + (batch, L) pair batch}."""
  import numpy as np
  rng = np.random.default_rng(args.seed)
  src, tgt = (side(rng, args.batch_size, args.side_len, shape["vocab_size"]) for _ in range(2))
  filter_batch = {"source_input_ids": src[0], "source_input_mask": src[1], "input_ids": tgt[0],
                  "input_mask": tgt[1], **labels(rng, args.task, "source_", *src), **labels(rng, args.task, "", *tgt)}
  ids, mask = side(rng, args.batch_size, 2 * args.side_len, shape["vocab_size"])
  return {"filter": filter_batch, "plain": {"input_ids": ids, "input_mask": mask,
                                            **labels(rng, args.task, "", ids, mask)}}


def models(args, config) -> dict:
  from xtreme_jax.models import filter as filter_models
  from xtreme_jax.models.classification import ClassificationModel
  from xtreme_jax.models.qa import QaModel
  from xtreme_jax.models.tagging import TaggingModel
  depths = {"local_layers": args.local_layers, "fusion_layers": args.fusion_layers}
  return {"classification": (ClassificationModel(config, 3), filter_models.FilterClassificationModel(
              config, num_classes=3, **depths)),
          "tagging": (TaggingModel(config, NUM_LABELS), filter_models.FilterTaggingModel(
              config, num_labels=NUM_LABELS, **depths)),
          "qa": (QaModel(config), filter_models.FilterQaModel(config, **depths))}[args.task]


def time_steps(name: str, model, batch: dict, args) -> dict:
  import jax

  from xtreme_jax.training.optim import OptimizerConfig
  from xtreme_jax.training.partitioning import PartitionConfig
  from xtreme_jax.training.trainer import Trainer, TrainerConfig
  total = args.warmup + args.steps
  times = []
  with tempfile.TemporaryDirectory(prefix="xtreme_jax_bench_") as run_dir:
    trainer = Trainer(model, OptimizerConfig(learning_rate=2e-5, weight_decay=0.01), TrainerConfig(
        train_steps=total, seed=args.seed, progress_bar=False), PartitionConfig(), run_dir)
    state = trainer.init_state(batch)
    for i in range(total):
      t = time.perf_counter()
      state, metrics = trainer.train_step(state, batch)
      metrics["loss"].block_until_ready()
      times.append(time.perf_counter() - t)
      progress(f"{name} step {i + 1}/{total}{' (warm-up)' if i < args.warmup else ''}: {times[-1]:.3f} s, "
               f"loss {float(metrics['loss']):.4f}")
    trainer.close()
    del state
  timed = times[args.warmup:]
  dev = jax.devices()[0]
  return {"first_step_s": times[0], "median_s": statistics.median(timed), "min_s": min(timed),
          "device": f"{dev.platform} {dev.device_kind} x{jax.device_count()}",
          "device_peak_bytes": (dev.memory_stats() or {}).get("peak_bytes_in_use")}


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--preset", choices=sorted(PRESETS), default="mbert_base")
  p.add_argument("--task", choices=sorted(SIDE_LEN), default="tagging")
  p.add_argument("--side_len", type=int, default=None, help="tokens per side (default: tagging / classification "
                 "128, QA 384); the plain model reads twice this")
  p.add_argument("--batch_size", type=int, default=32)
  p.add_argument("--local_layers", type=int, default=1)
  p.add_argument("--fusion_layers", type=int, default=None, help="default: 1 (QA: 20 of 24 layers, scaled)")
  p.add_argument("--dtype", default="float32")
  p.add_argument("--warmup", type=int, default=3)
  p.add_argument("--steps", type=int, default=10)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--json", help="also write the results here")
  args = p.parse_args(argv)
  args.side_len = args.side_len or SIDE_LEN[args.task]
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  shape = dict(PRESETS[args.preset], max_positions=max(PRESETS[args.preset]["max_positions"], args.side_len * 2))
  if args.fusion_layers is None:
    args.fusion_layers = max(1, round(shape["num_layers"] * 20 / 24)) - args.local_layers if args.task == "qa" else 1
  from xtreme_jax.networks.config import TransformerConfig
  config = TransformerConfig(**shape, pad_token_id=0, dtype=args.dtype)
  plain, fused = models(args, config)
  data = batches(args, shape)
  results = {"plain": time_steps("plain", plain, data["plain"], args),
             "filter": time_steps("FILTER", fused, data["filter"], args)}
  import jax
  print_sections(machine={"python": platform.python_version(), "jax": version("jax"), "flax": version("flax"),
                          "cpus": cpu_count(), "load": loadavg(), "device": results["plain"]["device"]},
                 setup={"preset": args.preset, "task": args.task, "batch": args.batch_size,
                        "plain length": 2 * args.side_len, "FILTER sides": f"2 x {args.side_len}",
                        "FILTER m / k": f"{args.local_layers} / {args.fusion_layers} of {shape['num_layers']}",
                        "dtype": args.dtype, "steps": f"{args.warmup} warm-up + {args.steps} timed",
                        "backend": jax.default_backend()})
  print("\n== seconds / step (median) ==")
  for name in ("plain", "filter"):
    r = results[name]
    print(f"  {name:<8} {r['median_s']:.4f}   (first step {r['first_step_s']:.1f} s incl. compilation)")
  ratio = results["filter"]["median_s"] / results["plain"]["median_s"]
  print(f"  FILTER / plain: {ratio:.2f}x   peak RSS {peak_rss_gib():.2f} GiB")
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"args": vars(args), "results": results, "ratio": ratio}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
