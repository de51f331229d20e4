"""Machine facts the benchmarks print beside their numbers, and running one side of a comparison."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Callable, Optional


def cpu_count() -> int:
  """CPUs this process may run on (the affinity mask), else os.cpu_count()."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def version(dist: str) -> str:
  try:
    return metadata.version(dist)
  except metadata.PackageNotFoundError:
    return "not installed"


def loadavg() -> str:
  try:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())
  except OSError:
    return "n/a"


def peak_rss_gib() -> float:
  """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return rss / (2**30 if sys.platform == "darwin" else 2**20)


def progress(msg: str) -> None:
  """A timestamped progress line on stderr."""
  print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_sides(script: str, args, argv: list[str], sides: dict[str, Callable], shape: dict,
              names: dict[str, str]) -> Optional[dict]:
  """The results of each side of a comparison, `{"jax": ..., "torch": ...}` ("torch" left out with
  `--skip_torch`), each `sides[side](args, shape)` run in a fresh subprocess (`script` re-run with
  `--_worker side --_result FILE`: no shared thread pools or device memory, its own peak RSS) unless
  `--in_process`. In such a worker: runs its side, writes the results to `--_result` and returns None."""
  if args._worker:
    with open(args._result, "w") as f:
      json.dump(sides[args._worker](args, shape), f)
    return None
  results = {}
  for side in ("jax",) if args.skip_torch else ("jax", "torch"):
    progress(f"running the {names[side]} side")
    results[side] = _run_side(script, side, argv, lambda side=side: sides[side](args, shape), args.in_process)
  return results


def _run_side(script: str, side: str, argv: list[str], run_here: Callable[[], dict], in_process: bool) -> dict:
  if in_process:
    try:
      return run_here()
    except Exception as e:  # report and carry on with the other side
      return {"error": f"{type(e).__name__}: {e}"}
  with tempfile.TemporaryDirectory(prefix="bench_result_") as tmp:
    out = os.path.join(tmp, "result.json")
    cmd = [sys.executable, os.path.abspath(script), *argv, "--_worker", side, "--_result", out]
    t = time.perf_counter()
    proc = subprocess.run(cmd)
    if proc.returncode != 0 or not os.path.exists(out):
      return {"error": f"worker exited with status {proc.returncode} after {time.perf_counter() - t:.1f} s"}
    with open(out) as f:
      return json.load(f)


def print_sections(**sections: dict) -> None:
  """`== name ==` then `  key  value` lines, per section (machine, setup)."""
  for name, items in sections.items():
    print(f"\n== {name} ==")
    for k, v in items.items():
      print(f"  {k:<28} {v}")
