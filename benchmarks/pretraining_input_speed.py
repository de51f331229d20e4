#!/usr/bin/env python
"""Pretraining input speed: the in-memory `VecoPairSource` vs the streamed `SeqioPairSource`.

Both read the bundled sample (monolingual text of every sample language and
the `{lg}-en` parallel files), tokenize with the sample sentencepiece model
and build the same VECO / TLM feature dict; the streamed source reads the
seqio tasks `pretrain_sample_text_{lg}` / `pretrain_sample_parallel_{lg}_en`
one document at a time. Printed per side: set-up time (in-memory: reading and
tokenizing every file; streamed: opening the tasks and counting), batches/s
and rows/s over `--batches` consecutive batches after one warm-up batch, and
the time to resume at batch `--resume_at` from a fresh source (in-memory: a
pure function of the position; streamed: replaying the language draws and
skipping every stream to its cursor).

    python benchmarks/pretraining_input_speed.py
    python benchmarks/pretraining_input_speed.py --batch_size 256 --batches 20 --resume_at 2000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import machine  # noqa: E402
from xtreme_jax.data import paths  # noqa: E402
from xtreme_jax.data.pretraining_corpora import VecoPairSource  # noqa: E402
from xtreme_jax.data.pretraining_streams import SeqioPairSource  # noqa: E402


def _sources(args):
  langs = sorted(f[:-4] for f in os.listdir(os.path.join(paths.sample_dir(), "pretrain")) if f.endswith(".txt"))
  pairs = sorted(f.split(".")[0] for f in os.listdir(os.path.join(paths.sample_dir(), "parallel")) if f.endswith(".en"))
  common = dict(vocabulary=paths.sample_vocab(), segment_len=args.segment_len, batch_size=args.batch_size)
  memory = lambda: VecoPairSource(data_dir=paths.sample_dir(), monolingual_dir="pretrain",  # noqa: E731
                                  parallel_dir="parallel", **common)
  streamed = lambda: SeqioPairSource(  # noqa: E731
      monolingual_tasks={lg: f"pretrain_sample_text_{lg}" for lg in langs},
      parallel_tasks={p: f"pretrain_sample_parallel_{p.replace('-', '_')}" for p in pairs}, **common)
  return {"in-memory": memory, "streamed": streamed}


def _measure(make, args) -> dict:
  t0 = time.perf_counter()
  source = make()
  source.batch(0)
  setup = time.perf_counter() - t0
  t0 = time.perf_counter()
  for p in range(1, args.batches + 1):
    source.batch(p)
  run = time.perf_counter() - t0
  fresh = make()
  fresh.batch(0)  # set-up excluded: only the jump to a far position is timed
  t0 = time.perf_counter()
  fresh.batch(args.resume_at)
  resume = time.perf_counter() - t0
  for s in (source, fresh):
    getattr(s, "close", lambda: None)()
  return {"set-up + first batch s": setup, "batches/s": args.batches / run,
          "rows/s": args.batches * args.batch_size / run, f"resume at {args.resume_at} s": resume}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--batch_size", type=int, default=64)
  ap.add_argument("--segment_len", type=int, default=64)
  ap.add_argument("--batches", type=int, default=20)
  ap.add_argument("--resume_at", type=int, default=1000)
  args = ap.parse_args()
  print(f"# {machine.cpu_count()} CPUs, load {machine.loadavg()}; batch {args.batch_size} x segment "
        f"{args.segment_len}, {args.batches} batches")
  results = {name: _measure(make, args) for name, make in _sources(args).items()}
  keys = list(next(iter(results.values())))
  print(f"{'':28}{'in-memory':>12}{'streamed':>12}{'ratio':>8}")
  for k in keys:
    a, b = results["in-memory"][k], results["streamed"][k]
    print(f"{k:28}{a:12.3f}{b:12.3f}{b / a:8.2f}")
  print(f"peak RSS {machine.peak_rss_gib():.2f} GiB (both sources in one process)")


if __name__ == "__main__":
  main()
