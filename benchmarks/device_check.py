#!/usr/bin/env python
"""One GPU check: xtreme-jax next to Hugging Face PyTorch (eager and torch.compile), one table, one JSON file.

One command, at most about 8 minutes on one H100 / H200 (the device session's budget), run from the repo root:

    PYTHONPATH=. PYTHONUNBUFFERED=1 python3 benchmarks/device_check.py --json $OUT/device_check.json
    PYTHONPATH=. python3 benchmarks/device_check.py --smoke --json /tmp/dc.json   # CPU, tiny shapes (the test)

Sections, in order of importance (each row: xtreme-jax, HF eager, torch.compile unless said otherwise):

1. train step, sequence classification (3 classes), bf16: mbert_base at 256 x 128 and 32 x 512, attention
   dropout 0.1 and 0.0 (hidden dropout 0.1); then XLM-R large at 8 x 512 (attention dropout 0.1).
   - xtreme-jax: `ClassificationModel` + `Trainer` (its jitted, donated train step, compiled ahead with
     `lower().compile()`), precision policy 'bfloat16', `attention_implementation='auto'` (cuDNN fused attention
     when attention dropout is 0, the flash kernel with attention dropout on; hidden dropout's masks hashed),
     AdamW (optax), clip 1.0.
     XLM-R large as gin_configs/models/xlmr_large.gin (scanned layers) but without remat (`--xlmr_remat` turns
     it on; HF keeps every activation too).
   - HF eager: `BertForSequenceClassification` / `XLMRobertaForSequenceClassification`, `attn_implementation=
     'sdpa'`, `torch.autocast(bfloat16)`, `torch.optim.AdamW` (default foreach), `clip_grad_norm_`, linear
     warm-up / decay schedule.
   - torch.compile: the same model and step with every encoder layer compiled (`--torch_compile regional`, the
     default: one compile serves all layers, the cold-start cost PyTorch recommends; `full` compiles the whole
     model), `dynamic=False`, inductor, and `AdamW(fused=True)`.
2. forward-only prediction at the same shapes (eval mode, no dropout; ours: the Trainer's jitted predict step).
3. compile time of our mbert_base train step (256 x 128): cold (this run's first JAX program: a fresh process,
   an empty persistent compilation cache, `xtreme_jax.compilation_cache.configure(dir)`) and warm (a second
   fresh process on the same cache folder): import, init_state (its programs), lower, compile, first step.
4. BUCC-style k-NN mining, 20,000 x 20,000 x 768 float32, k = 4 both directions, host arrays in and out:
   ours `retrieval.blocked_topk_both` (one pass over x @ y.T, precision 'highest') next to torch
   `x @ y.T` + `topk` along both dimensions (float32, TF32 off: torch's default).
5. beam-5 decoding at the base shape (hidden 768, 12 heads, FFN 3072, 6 + 6 layers, vocabulary 32,000), batch 32,
   source 64, exactly 128 generated tokens (EOS forbidden before the last position on both sides), bf16:
   `Seq2SeqModel.generate` (jitted, KV cache) next to HF `BartForConditionalGeneration.generate` (cache on).

Every number: the median over the timed steps (after untimed warm-up steps; the device synchronised around
each step: `block_until_ready` / `torch.cuda.synchronize`), random init, the same random batch on both sides
(random lengths, padding at the end, `train_step_throughput.make_batch`), nothing downloaded. MFU:

    flops/step (train)   = 6 * N * batch * seq_len + 12 * layers * seq_len^2 * hidden * batch
    flops/step (predict) = 2 * N * batch * seq_len +  4 * layers * seq_len^2 * hidden * batch
    N = non-embedding parameters = layers * (4 h^2 + 2 h f + 9 h + f) + h^2 + h + 3 h + 3   (h hidden, f FFN)
    MFU = flops/step / (median s/step) / (peak TFLOP/s * 1e12)

with the dense bf16 peak from the device name (H100 SXM / HBM3 989, H100 NVL 835, H100 PCIe 756, H200 989,
A100 312; any other GPU needs `--peak_tflops`). Ratios are ours / theirs in throughput (their time / ours):
above 1, xtreme-jax is faster.

Processes and memory: the parent imports neither framework. One JAX worker and one PyTorch worker process run
the units (the parent hands them one at a time, never two at once, so no unit is timed while another runs),
and a third, fresh JAX process times the warm compile. The JAX processes run with `XLA_PYTHON_CLIENT_PREALLOCATE=
false` and `XLA_PYTHON_CLIENT_MEM_FRACTION=0.45` (a pool that grows as needed, to at most 45% of the GPU's
memory); the PyTorch worker's caching allocator, emptied after each unit, has the rest.

Order and time guards. Pass 1 runs the headline row of every section in the order above (train mbert_base
256 x 128 at attention dropout 0.1, whose JAX compile is the cold one, and at 0.0; XLM-R large; predict
256 x 128; the warm compile; mining; decoding); pass 2 the other rows (mbert_base 32 x 512 train at 0.1 and 0.0,
predict 32 x 512 and XLM-R). A unit starts only if its estimate (a guess for an H100, replaced by the measured
time of the last unit of its kind) fits in what is left of `--budget_s` (default 440 s from the start); a
skipped unit is listed with the reason (`--sections` / `--passes` run a subset later). A unit still running 20 s
after the budget is killed. The table and the JSON (rewritten after every unit) always come at the end: at
most about 8 minutes in all (give the device tool a timeout_s of 570).

Nothing beyond the GPU image is needed: jax + jaxlib + CUDA plugin, flax, optax, orbax-checkpoint, numpy, torch,
transformers, tqdm, etils; no seqio, TensorFlow, gin or clu (the test runs the smoke run with those blocked).
If a package were missing there, carry it as a wheel (benchmarks/README.md, "device_check.py").

Selection, for a short lease: `--rows` (comma-separated row names as the table writes them, e.g. 'mbert_base
256x128 adrop 0.1') and `--sides` (of xtreme_jax,hf_eager,torch_compile) restrict the train and predict units (the
other sections stay unless `--sections` drops them; an unknown name exits 2 with the valid ones); `--attention IMPL`
sets our `TransformerConfig.attention_implementation` (default: its `auto`), `--label TEXT` tags the run; both go
in the table's header and the JSON.

Profiles: `--profile DIR` runs, after the timed steps of each train unit of `--profile_rows` (default: the first
train row that runs), 3 more steps under the profiler (so the timed numbers are untouched): ours under
`jax.profiler.trace` (its Perfetto JSON: the kernels on the GPU's stream tracks; on a CPU the host XLA op events),
HF / torch.compile under `torch.profiler` (`key_averages()`: self CUDA time per kernel; on a CPU self CPU time per
op). Per unit: the top 25 kernels (us/step, share of the summed kernel time, count), the summed and the busy (union)
time per step and the number of distinct kernels, in the JSON (`profiles`), DIR/profile_summary.json and a block
under the table (top 12); our optimized HLO (DIR/<row>_xtreme_jax_hlo.txt.gz) and trace (..._trace.json.gz, if
under 12 MB). A failing profiler only skips the profile (a one-line reason; the worker saves the timed result
first, so even a crash while profiling keeps it).

`--smoke` (CPU, the test): tiny shapes (hidden 32, 2 layers, vocabulary 128), one train and predict row per
model (mbert_base 4 x 16 with attention dropout 0.1, XLM-R 2 x 32 with 0), every section and both frameworks,
torch.compile with the `aot_eager` backend (dynamo + AOTAutograd, no inductor C++ build), MFU against a nominal
1 TFLOP/s, and the workers overlapping (a second JAX worker for pass 2): its numbers only show that it runs.
"""

from __future__ import annotations

import argparse
import ast
import collections
import gc
import gzip
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback

PROCESS_START = time.perf_counter()

from machine import cpu_count, loadavg, peak_rss_gib, progress, version  # noqa: E402
from train_step_throughput import make_batch  # noqa: E402

NUM_CLASSES, DROPOUT, SEED = 3, 0.1, 0
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM, WARMUP_RATIO = 2e-5, 0.01, 1.0, 0.1
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # the seq2seq batch's

# The shapes of gin_configs/models/{mbert_base,xlmr_large}.gin (tests/test_device_check.py compares them).
MODELS = {
    "mbert_base": dict(vocab_size=119547, hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072,
                       max_positions=512, type_vocab_size=2, pad_token_id=0, position_style="absolute",
                       layer_norm_eps=1e-12, scan_layers=False),
    "xlmr_large": dict(vocab_size=250002, hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096,
                       max_positions=514, type_vocab_size=1, pad_token_id=1, position_style="roberta",
                       layer_norm_eps=1e-5, scan_layers=True),
}
SMOKE_MODELS = {
    "mbert_base": dict(MODELS["mbert_base"], vocab_size=128, hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64,
                       max_positions=64),
    "xlmr_large": dict(MODELS["xlmr_large"], vocab_size=128, hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64,
                       max_positions=66),
}
# Rows (model, batch, seq_len[, attention dropout], pass). Pass 1, the headline row of every section, runs first
# (train rows first: the first one is also the cold compile); pass 2, the other rows, fills what budget is left.
TRAIN_ROWS = [("mbert_base", 256, 128, 0.1, 1), ("mbert_base", 32, 512, 0.1, 2), ("mbert_base", 256, 128, 0.0, 1),
              ("mbert_base", 32, 512, 0.0, 2), ("xlmr_large", 8, 512, 0.1, 1)]
PREDICT_ROWS = [("mbert_base", 256, 128, 1), ("mbert_base", 32, 512, 2), ("xlmr_large", 8, 512, 2)]
SMOKE_TRAIN_ROWS = [("mbert_base", 4, 16, 0.1, 1), ("xlmr_large", 2, 32, 0.0, 2)]
SMOKE_PREDICT_ROWS = [("mbert_base", 4, 16, 1), ("xlmr_large", 2, 32, 2)]
DECODE = dict(vocab_size=32000, hidden_size=768, num_heads=12, mlp_dim=3072, encoder_layers=6, decoder_layers=6,
              max_positions=512, batch=32, source_length=64, length=128, beam=5)
SMOKE_DECODE = dict(vocab_size=128, hidden_size=32, num_heads=2, mlp_dim=64, encoder_layers=2, decoder_layers=2,
                    max_positions=64, batch=2, source_length=8, length=8, beam=5)
MINING = dict(n=20000, dim=768, k=4)
SMOKE_MINING = dict(n=300, dim=32, k=4)

SECTIONS = ("train", "predict", "compile", "mining", "decode")
SIDES = {"train": ("xtreme_jax", "hf_eager", "torch_compile"), "predict": ("xtreme_jax", "hf_eager", "torch_compile"),
         "compile": ("cold", "warm"), "mining": ("xtreme_jax", "torch"), "decode": ("xtreme_jax", "hf_generate")}
SIDE_NAMES = {"xtreme_jax": "xtreme-jax", "hf_eager": "HF eager", "torch_compile": "torch.compile",
              "torch": "torch", "hf_generate": "HF generate", "cold": "cold", "warm": "warm"}
# Dense bf16 peak TFLOP/s by device name, first match wins.
PEAKS = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("A100", 312.0))
FLOP_FORMULA = ("train flops/step = 6*N*batch*seq + 12*layers*seq^2*hidden*batch (predict: 2*N*b*s + 4*L*s^2*h*b); "
                "N = non-embedding params; MFU = flops/step / median s / peak")

# Guessed seconds per unit on an H100 (worker start-up not included), by (side, section, model); the measured
# time of the last unit with the same key replaces the guess. The first JAX unit also compiles the init programs.
ESTIMATES = {
    ("xtreme_jax", "train", "mbert_base"): 40, ("xtreme_jax", "train", "xlmr_large"): 50,
    ("hf_eager", "train", "mbert_base"): 8, ("hf_eager", "train", "xlmr_large"): 10,
    ("torch_compile", "train", "mbert_base"): 30, ("torch_compile", "train", "xlmr_large"): 30,
    ("xtreme_jax", "predict", "mbert_base"): 15, ("xtreme_jax", "predict", "xlmr_large"): 20,
    ("hf_eager", "predict", "mbert_base"): 5, ("hf_eager", "predict", "xlmr_large"): 8,
    ("torch_compile", "predict", "mbert_base"): 15, ("torch_compile", "predict", "xlmr_large"): 20,
    ("xtreme_jax", "compile", "mbert_base"): 40, ("warm", "compile", "mbert_base"): 25,
    ("xtreme_jax", "mining", None): 8, ("torch", "mining", None): 4,
    ("xtreme_jax", "decode", None): 40, ("hf_generate", "decode", None): 20,
}
WORKER_START_ESTIMATE = {"jax": 10, "torch": 15, "probe": 0, "jax2": 10}
RESERVE_S, GRACE_S = 8.0, 20.0
# --profile: steps run under the profiler after the timed ones, kernels kept / printed, the largest trace copied,
# and the extra seconds a profiled unit is guessed to need.
PROFILE_STEPS, PROFILE_TOP, PROFILE_PRINT, PROFILE_TRACE_MAX_BYTES, PROFILE_ESTIMATE_S = 3, 25, 12, 12 << 20, 15.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _attention_choices() -> tuple | None:
  """`ATTENTION_IMPLEMENTATIONS` read from xtreme_jax/networks/config.py as text (the parent imports no framework);
  None (any string accepted, the model validates it) if it cannot be read."""
  try:
    with open(os.path.join(ROOT, "xtreme_jax", "networks", "config.py")) as f:
      m = re.search(r"^ATTENTION_IMPLEMENTATIONS\s*=\s*(\([^)]*\))", f.read(), re.M)
    choices = ast.literal_eval(m.group(1)) if m else None
    return tuple(choices) if choices and all(isinstance(c, str) for c in choices) else None
  except (OSError, ValueError, SyntaxError):
    return None


ATTENTION_CHOICES = _attention_choices()


def shapes(args) -> tuple[dict, list, dict, dict]:
  if args.smoke:
    return SMOKE_MODELS, SMOKE_TRAIN_ROWS, SMOKE_DECODE, SMOKE_MINING
  return MODELS, TRAIN_ROWS, DECODE, MINING


def predict_rows(args) -> list:
  return SMOKE_PREDICT_ROWS if args.smoke else PREDICT_ROWS


def non_embedding_params(spec: dict) -> int:
  """Encoder layers plus the classification head (pooler or RoBERTa head, then 3 classes); no embeddings."""
  h, f = spec["hidden_size"], spec["mlp_dim"]
  return spec["num_layers"] * (4 * h * h + 2 * h * f + 9 * h + f) + h * h + h + h * NUM_CLASSES + NUM_CLASSES


def model_flops(spec: dict, batch: int, seq: int, train: bool) -> float:
  forward = (2 * non_embedding_params(spec) * batch * seq
             + 4 * spec["num_layers"] * seq ** 2 * spec["hidden_size"] * batch)
  return float(3 * forward if train else forward)


def classification_batch(spec: dict, batch: int, seq: int) -> dict:
  """`make_batch`'s random batch (numpy), with the model's pad id and one token type where it has one."""
  import numpy as np
  raw = make_batch(batch, seq, spec["vocab_size"], SEED)
  if spec["pad_token_id"] != PAD_ID:
    raw["input_ids"] = np.where(raw["input_mask"] == 1, raw["input_ids"], spec["pad_token_id"]).astype(np.int32)
  if spec["type_vocab_size"] == 1:
    raw["token_type_ids"] = np.zeros_like(raw["token_type_ids"])
  return raw


def seq2seq_batch(d: dict) -> dict:
  """Random source ids (clear of pad / BOS / EOS), random lengths >= half, padded at the end; the first row full."""
  import numpy as np
  rng = np.random.default_rng(SEED)
  lengths = rng.integers(max(1, d["source_length"] // 2), d["source_length"] + 1, size=d["batch"])
  lengths[0] = d["source_length"]
  mask = np.arange(d["source_length"])[None, :] < lengths[:, None]
  ids = np.where(mask, rng.integers(EOS_ID + 1, d["vocab_size"], size=mask.shape), PAD_ID)
  return {"input_ids": ids.astype(np.int32), "input_mask": mask.astype(np.int32),
          "decoder_start": np.full((d["batch"],), BOS_ID, np.int32)}


def mining_inputs(m: dict):
  import numpy as np
  rng = np.random.default_rng(SEED)
  x, y = (rng.standard_normal((m["n"], m["dim"]), dtype=np.float32) for _ in range(2))
  return x / np.linalg.norm(x, axis=1, keepdims=True), y / np.linalg.norm(y, axis=1, keepdims=True)


def timing(times: list[float], warmup: int) -> dict:
  timed = times[warmup:]
  return {"median_s": statistics.median(timed), "min_s": min(timed), "max_s": max(timed),
          "first_s": times[0], "times_s": times}


# -- kernel profiles (--profile) ----------------------------------------------------


def safe_name(text: str) -> str:
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def busy_us(intervals) -> float:
  """Length of the union of (start, end) intervals: the time anything ran."""
  total, end = 0.0, -math.inf
  for a, b in sorted(intervals):
    if b > end:
      total += b - max(a, end)
      end = b
  return total


def op_summary(totals: dict, busy: float, steps: int, step_s: float | None, source: str) -> dict:
  """{name: [total us, count, detail]} over `steps` steps -> per step, top PROFILE_TOP by time, shares of the sum."""
  total = sum(t for t, _, _ in totals.values())
  top = sorted(totals.items(), key=lambda kv: -kv[1][0])[:PROFILE_TOP]
  return {"source": source, "steps": steps, "n_kernels": len(totals), "n_events": sum(c for _, c, _ in totals.values()),
          "total_us_per_step": total / steps, "busy_us_per_step": busy / steps,
          "step_us_timed": None if step_s is None else 1e6 * step_s,
          "top": [dict({"name": name, "us_per_step": t / steps, "share": t / total if total else 0.0, "count": c,
                        "count_per_step": c / steps}, **({"hlo_op": d} if d and d != name else {}))
                  for name, (t, c, d) in top]}


# Lines of a device plane that XProf derives from the stream kernels (or annotates them with): never summed.
DERIVED_LINES = ("XLA Ops", "XLA Modules", "Steps", "Framework", "TensorFlow", "Source", "Launch", "XLA TraceMe",
                 "Async XLA Ops", "Host Offload")


def trace_records(trace: dict) -> tuple[list, str]:
  """The kernel events of a trace-viewer / Perfetto JSON trace (jax.profiler's), as (pid, tid, name, ts, dur, args),
  only the innermost of nested ones. On a GPU: the 'X' events of the device processes ('/device:GPU:0' ...) on
  their stream tracks; with no device process (CPU): the host events of XLA ops (those carrying an `hlo_op`)."""
  processes, threads = {}, {}
  for e in trace.get("traceEvents", []):
    if e.get("ph") == "M" and e.get("name") == "process_name":
      processes[e.get("pid")] = str((e.get("args") or {}).get("name", ""))
    elif e.get("ph") == "M" and e.get("name") == "thread_name":
      threads[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", ""))
  devices = {pid for pid, name in processes.items() if "/device:" in name or "Stream" in name}
  with_streams = {pid for (pid, _), name in threads.items() if pid in devices and "Stream" in name}

  def wanted(e) -> bool:
    if e.get("ph") != "X" or "dur" not in e or "ts" not in e:
      return False
    pid = e.get("pid")
    if devices:  # the stream tracks if the process has some, else all but the derived lines
      line = threads.get((pid, e.get("tid")), "")
      return pid in devices and ("Stream" in line if pid in with_streams
                                 else not any(d in line for d in DERIVED_LINES))
    return "hlo_op" in (e.get("args") or {}) and not str(e.get("name", "")).startswith("end: ")

  events = [(e.get("pid"), e.get("tid"), str(e.get("name", "")), float(e["ts"]), float(e["dur"]), e.get("args") or {})
            for e in trace.get("traceEvents", []) if wanted(e)]
  source = ("kernels on the streams of " + ", ".join(sorted(processes[p] for p in devices)) if devices
            else "host XLA ops (no device track)")
  return _innermost(events), source


def _innermost(events: list) -> list:
  """Drops every event that contains another one of its track (a while loop's thunk around its body's)."""
  tracks = collections.defaultdict(list)
  for e in events:
    tracks[(e[0], e[1])].append(e)
  out, eps = [], 1e-3
  for evs in tracks.values():
    evs.sort(key=lambda e: (e[3], -e[4]))
    parent, stack = [False] * len(evs), []
    for i, e in enumerate(evs):
      while stack and evs[stack[-1]][3] + evs[stack[-1]][4] <= e[3] + eps:
        stack.pop()
      if stack and e[3] + e[4] <= evs[stack[-1]][3] + evs[stack[-1]][4] + eps:
        parent[stack[-1]] = True
      stack.append(i)
    out += [e for i, e in enumerate(evs) if not parent[i]]
  return out


def xplane_trace(path: str) -> dict:
  """An .xplane.pb (jax.profiler's own protobuf) as the trace-viewer JSON `trace_records` reads: a plane is a
  process, a line a thread (jax._src.profiler.ProfileData, the documented reader of jax.profiler.trace's output)."""
  from jax._src.profiler import ProfileData
  events = []
  for pid, plane in enumerate(ProfileData.from_file(path).planes):
    events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": plane.name}})
    for tid, line in enumerate(plane.lines):
      events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": line.name}})
      for e in line.events:
        events.append({"ph": "X", "pid": pid, "tid": tid, "name": e.name, "ts": e.start_ns / 1e3,
                       "dur": e.duration_ns / 1e3, "args": dict(e.stats)})
  return {"traceEvents": events}


def jax_trace_summary(log_dir: str, steps: int, step_s: float | None) -> tuple[dict, str | None]:
  """The summary of the trace jax.profiler.trace wrote under `log_dir` (its Perfetto JSON, else the trace-viewer
  JSON, else the xplane protobuf), and the path of the Perfetto file (None if there is none)."""
  found = {}
  for root, _, files in os.walk(log_dir):
    for name in files:
      for kind in ("perfetto_trace.json.gz", ".trace.json.gz", ".xplane.pb"):
        if name.endswith(kind):
          found.setdefault(kind, os.path.join(root, name))
  perfetto = found.get("perfetto_trace.json.gz")
  records, source, tried = [], "", []
  for kind in ("perfetto_trace.json.gz", ".trace.json.gz", ".xplane.pb"):
    if kind not in found:
      continue
    if kind == ".xplane.pb":
      trace = xplane_trace(found[kind])
    else:
      with gzip.open(found[kind], "rt") as f:
        trace = json.load(f)
    records, source = trace_records(trace)
    tried.append(os.path.basename(found[kind]))
    if records:
      break
  if not records:
    raise RuntimeError(f"no kernel events in the trace (files: {tried or 'none'})")
  totals = {}
  for _, _, name, _, dur, args in records:
    t = totals.setdefault(name, [0.0, 0, args.get("hlo_op")])
    t[0] += dur
    t[1] += 1
  busy = busy_us([(ts, ts + dur) for _, _, _, ts, dur, _ in records])
  return op_summary(totals, busy, steps, step_s, f"jax.profiler {tried[-1]}, {source}"), perfetto


def profile_text(report: dict) -> list[str]:
  """The compact block printed under the table: per profiled unit, its top PROFILE_PRINT kernels."""
  out, order = [], {side: i for i, side in enumerate(SIDES["train"])}
  profiles = report.get("profiles", {})
  for uid in sorted(profiles, key=lambda u: (u.rsplit("/", 1)[0], order.get(u.rsplit("/", 1)[-1], 9))):
    prof = profiles[uid]
    if "top" not in prof:
      out += ["", f"profile {uid}: skipped ({prof.get('skipped', 'no summary')})"]
      continue
    step = prof.get("step_us_timed")
    out.append("")
    out.append(f"profile {uid}: {prof['n_kernels']} kernels, {prof['total_us_per_step']:.0f} us/step summed, "
               f"{prof['busy_us_per_step']:.0f} us busy" + (f" (timed step {step:.0f} us)" if step else "")
               + f"; {prof['source']}")
    out.append(f"  {'us/step':>10} {'%':>6} {'n/step':>7}  [hlo op:] kernel / op")
    for k in prof["top"][:PROFILE_PRINT]:
      name = f"{k['hlo_op']}: {k['name']}" if k.get("hlo_op") else k["name"]
      out.append(f"  {k['us_per_step']:>10.1f} {100 * k['share']:>6.1f} {k['count_per_step']:>7.4g}  {name[:70]}")
  return out


# -- xtreme-jax worker -----------------------------------------------------------


class JaxSide:
  """The JAX worker's units; everything imported once, at start."""

  def __init__(self, args, cache_dir: str):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")
    t = time.perf_counter()
    import jax
    from xtreme_jax import compilation_cache
    from xtreme_jax.models.classification import ClassificationModel  # noqa: F401 (timed with the imports)
    from xtreme_jax.training.trainer import Trainer  # noqa: F401
    self.args, self.jax = args, jax
    cold = not os.path.isdir(cache_dir) or not os.listdir(cache_dir)
    compilation_cache.configure(cache_dir)
    if args.smoke:  # tiny programs compile in less than the library's threshold: cache them all
      jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
      jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    self.events = collections.Counter()
    jax.monitoring.register_event_listener(lambda event, **kw: self.events.update([event]))
    dev = jax.devices()[0]
    jax.block_until_ready(jax.numpy.zeros(()) + 1)  # backend start-up
    self.info = {"platform": dev.platform, "device_kind": dev.device_kind, "device_count": jax.device_count(),
                 "import_s": time.perf_counter() - t, "cache_dir": cache_dir, "cache_was_empty": cold}

  def cleanup(self) -> None:
    """Nothing to give back: the pool keeps what it grew to (at most XLA_PYTHON_CLIENT_MEM_FRACTION)."""

  def cache_counts(self) -> dict:
    return {"cache_hits": self.events["/jax/compilation_cache/cache_hits"],
            "cache_misses": self.events["/jax/compilation_cache/cache_misses"]}

  def _model(self, unit):
    from xtreme_jax.models.classification import ClassificationModel
    from xtreme_jax.networks.config import TransformerConfig
    spec = shapes(self.args)[0][unit["model"]]
    fields = {k: v for k, v in spec.items() if k != "scan_layers"}
    if self.args.attention:
      fields["attention_implementation"] = self.args.attention
    if self.args.dropout_masks:
      fields["dropout_masks"] = self.args.dropout_masks
    config = TransformerConfig(**fields, dropout_rate=DROPOUT, attention_dropout_rate=unit["attn_dropout"],
                               dtype=self.args.dtype, scan_layers=spec["scan_layers"],
                               remat=unit["model"] == "xlmr_large" and self.args.xlmr_remat)
    head = "roberta" if unit["model"] == "xlmr_large" else "pooler"
    return ClassificationModel(config, num_classes=NUM_CLASSES, head=head), spec

  def _trainer(self, model, run_dir: str, total: int):
    from xtreme_jax.training.optim import OptimizerConfig
    from xtreme_jax.training.partitioning import PartitionConfig
    from xtreme_jax.training.trainer import Trainer, TrainerConfig
    optimizer = OptimizerConfig(learning_rate=LEARNING_RATE, warmup_ratio=WARMUP_RATIO, weight_decay=WEIGHT_DECAY,
                                max_grad_norm=MAX_GRAD_NORM)
    return Trainer(model, optimizer, TrainerConfig(train_steps=max(total, 1), seed=SEED, progress_bar=False),
                   PartitionConfig(), run_dir)

  def _memory(self) -> dict:
    stats = self.jax.devices()[0].memory_stats() or {}
    return {"device_peak_bytes_process": stats.get("peak_bytes_in_use")}

  def train(self, unit) -> dict:
    """`Trainer.init_state`, then its jitted train step lowered and compiled ahead, then the timed steps."""
    import numpy as np
    from xtreme_jax.networks import layers
    jax, args = self.jax, self.args
    model, spec = self._model(unit)
    raw = classification_batch(spec, unit["batch"], unit["seq"])
    batch = {**raw, "example_weights": np.ones((unit["batch"],), np.float32)}
    warmup, steps = unit["warmup"], unit["steps"]
    before = self.cache_counts()
    with tempfile.TemporaryDirectory(prefix="device_check_run_") as run_dir:
      trainer = self._trainer(model, run_dir, warmup + steps)
      try:
        t = time.perf_counter()
        state = jax.block_until_ready(trainer.init_state(batch))
        init_s = time.perf_counter() - t
        programs = trainer.prepare(batch)
        placed, numbers = trainer.to_global(batch), trainer.hyperparameters
        with trainer.sharding_context():
          t = time.perf_counter()
          lowered = programs.train_step.lower(state, placed, numbers)
          lower_s = time.perf_counter() - t
          t = time.perf_counter()
          compiled = lowered.compile()
          compile_s = time.perf_counter() - t
        leaves = jax.tree_util.tree_leaves_with_path(state.params)
        n_params = sum(int(x.size) for _, x in leaves)
        n_embed = sum(int(x.size) for p, x in leaves if "embeddings" in [str(getattr(k, "key", k)) for k in p])
        progress(f"xtreme-jax {unit['id']}: init {init_s:.1f} s, lower {lower_s:.1f} s, compile {compile_s:.1f} s")
        times, losses = [], []
        for _ in range(warmup + steps):
          t = time.perf_counter()
          state, metrics = compiled(state, placed, numbers)
          loss = metrics["loss"].block_until_ready()
          times.append(time.perf_counter() - t)
          losses.append(float(loss))
        after = self.cache_counts()
        result = {**timing(times, warmup), "init_state_s": init_s, "lower_s": lower_s, "compile_s": compile_s,
                  "losses": losses, "n_params": n_params, "n_params_non_embedding": n_params - n_embed,
                  "attention": layers.attention_implementation(model.config, deterministic=False),
                  "compute_dtype": f"{args.dtype} policy", **{k: after[k] - before[k] for k in after},
                  **self._memory()}
        if unit.get("profile"):
          save_timed(unit, result)
          result["profile"], state = self._profile_train(unit, compiled, state, placed, numbers,
                                                         statistics.median(times[warmup:]))
        del state, compiled, lowered
      finally:
        trainer.close()
    return result

  def _profile_train(self, unit, compiled, state, placed, numbers, step_s: float):
    """PROFILE_STEPS more steps under jax.profiler.trace (after the timed ones): the kernel summary, the optimized
    HLO (gzipped) and the Perfetto trace (if small) in --profile's folder. Any failure: a one-line reason."""
    jax, t = self.jax, time.perf_counter()
    prefix = os.path.join(self.args.profile, f"{safe_name(unit['row'])}_xtreme_jax")
    files = {}
    try:
      os.makedirs(self.args.profile, exist_ok=True)
      with gzip.open(f"{prefix}_hlo.txt.gz", "wt") as f:
        f.write(compiled.as_text())
      files["hlo"] = f"{prefix}_hlo.txt.gz"
      with tempfile.TemporaryDirectory(prefix="device_check_trace_") as log_dir:
        with jax.profiler.trace(log_dir, create_perfetto_trace=True):
          for _ in range(PROFILE_STEPS):
            state, metrics = compiled(state, placed, numbers)
          jax.block_until_ready((state, metrics))
        summary, perfetto = jax_trace_summary(log_dir, PROFILE_STEPS, step_s)
        if perfetto and os.path.getsize(perfetto) <= PROFILE_TRACE_MAX_BYTES:
          shutil.copyfile(perfetto, f"{prefix}_trace.json.gz")
          files["trace"] = f"{prefix}_trace.json.gz"
        elif perfetto:
          files["trace"] = f"not copied: {os.path.getsize(perfetto) / 2**20:.0f} MB"
    except Exception as e:  # the timed numbers stand; the profile is only skipped
      progress(f"{unit['id']}: profile skipped: {type(e).__name__}: {e}")
      return {"skipped": f"{type(e).__name__}: {e}"[:300], "files": files}, state
    progress(f"{unit['id']}: profiled {PROFILE_STEPS} steps in {time.perf_counter() - t:.1f} s")
    return {**summary, "files": files, "profile_s": time.perf_counter() - t}, state

  def predict(self, unit) -> dict:
    """The Trainer's jitted predict step (logits, no dropout) lowered and compiled ahead, then timed calls."""
    import numpy as np
    from xtreme_jax.networks import layers
    jax = self.jax
    model, spec = self._model(unit)
    raw = classification_batch(spec, unit["batch"], unit["seq"])
    batch = {**raw, "example_weights": np.ones((unit["batch"],), np.float32)}
    with tempfile.TemporaryDirectory(prefix="device_check_run_") as run_dir:
      trainer = self._trainer(model, run_dir, 1)
      try:
        programs = trainer.prepare(batch)
        placed = trainer.to_global(batch)
        with trainer.sharding_context():
          params = jax.block_until_ready(programs.init_params(jax.random.PRNGKey(SEED), placed))
          t = time.perf_counter()
          compiled = programs.predict_step.lower(params, placed).compile()
          compile_s = time.perf_counter() - t
        times = []
        for _ in range(unit["warmup"] + unit["steps"]):
          t = time.perf_counter()
          logits = jax.block_until_ready(compiled(params, placed))
          times.append(time.perf_counter() - t)
        shape = list(np.shape(logits))
        del params, compiled
      finally:
        trainer.close()
    return {**timing(times, unit["warmup"]), "compile_s": compile_s, "output_shape": shape,
            "attention": layers.attention_implementation(model.config, deterministic=True), **self._memory()}

  def mining(self, unit) -> dict:
    import numpy as np
    from xtreme_jax.evaluation import retrieval
    m = shapes(self.args)[3]
    x, y = mining_inputs(m)
    times = []
    for _ in range(unit["warmup"] + unit["steps"]):  # the first call compiles (one block shape)
      t = time.perf_counter()
      out = retrieval.blocked_topk_both(x, y, m["k"])
      times.append(time.perf_counter() - t)
    np.save(unit["top1_path"], np.stack([out[1][:, 0], out[3][:, 0]]))
    return {**timing(times, unit["warmup"]), "precision": "highest (float32)",
            "function": "retrieval.blocked_topk_both (one pass)", **self._memory()}

  def decode(self, unit) -> dict:
    import dataclasses

    import flax.linen as nn
    import jax.numpy as jnp
    import numpy as np
    from xtreme_jax.models.seq2seq import DecodeSettings, Seq2SeqModel
    from xtreme_jax.networks.config import TransformerConfig
    from xtreme_jax.networks.seq2seq import Seq2SeqConfig
    jax, d = self.jax, shapes(self.args)[2]
    length = d["length"]

    @dataclasses.dataclass(frozen=True)
    class FixedLength(Seq2SeqModel):
      """EOS forbidden before the last position (where the search forces it): every output has `length` tokens."""

      def decoder(self, params, batch, copies, max_length):
        step, cache = super().decoder(params, batch, copies, max_length)

        def fixed(tokens, cache, t):
          logits, cache = step(tokens, cache, t)
          eos = jnp.arange(logits.shape[-1]) == self.eos_id
          return jnp.where(eos & (t < max_length - 1), -jnp.inf, logits), cache
        return fixed, cache

    config = TransformerConfig(vocab_size=d["vocab_size"], hidden_size=d["hidden_size"],
                               num_layers=d["encoder_layers"], num_heads=d["num_heads"], mlp_dim=d["mlp_dim"],
                               max_positions=d["max_positions"], type_vocab_size=1, pad_token_id=PAD_ID,
                               layer_norm_eps=1e-5, dtype=self.args.dtype)
    model = FixedLength(config, Seq2SeqConfig(decoder_layers=d["decoder_layers"]), eos_id=EOS_ID)
    params = nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(SEED), model.dummy_batch(1, 8, 8)))
    batch = {k: jnp.asarray(v) for k, v in seq2seq_batch(d).items()}
    settings = DecodeSettings(beam_size=d["beam"], max_length=length)
    t = time.perf_counter()
    compiled = jax.jit(lambda p, b: model.generate(p, b, settings)).lower(params, batch).compile()
    compile_s = time.perf_counter() - t
    times = []
    for _ in range(unit["warmup"] + unit["steps"]):
      t = time.perf_counter()
      out = jax.block_until_ready(compiled(params, batch))
      times.append(time.perf_counter() - t)
    lengths = np.asarray(out.lengths)
    return {**timing(times, unit["warmup"]), "compile_s": compile_s, "all_full_length": bool(np.all(lengths == length)),
            "n_params": sum(int(x.size) for x in jax.tree_util.tree_leaves(params)), **self._memory()}


# -- PyTorch worker ----------------------------------------------------------------


class TorchSide:
  """The PyTorch worker's units: Hugging Face models, eager or with torch.compile."""

  def __init__(self, args):
    t = time.perf_counter()
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    self.args, self.torch = args, torch
    torch.set_num_threads(1 if args.smoke else cpu_count())  # smoke: beside the JAX worker
    self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if self.device.type == "cuda":
      torch.ones(1, device=self.device).sum().item()  # CUDA context
    self.backend = args.torch_backend or ("inductor" if self.device.type == "cuda" else "aot_eager")
    self.info = {"platform": "gpu" if self.device.type == "cuda" else "cpu",
                 "device_kind": (torch.cuda.get_device_name(self.device) if self.device.type == "cuda"
                                 else platform.processor() or "cpu"),
                 "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if self.device.type == "cuda"
                 else None, "torch_threads": torch.get_num_threads(), "compile_backend": self.backend,
                 "import_s": time.perf_counter() - t}

  def sync(self):
    if self.device.type == "cuda":
      self.torch.cuda.synchronize(self.device)

  def cleanup(self) -> None:
    """The cached blocks back to the device, for the JAX processes."""
    if self.device.type == "cuda":
      self.torch.cuda.empty_cache()

  def _reset_memory(self):
    if self.device.type == "cuda":
      self.torch.cuda.empty_cache()
      self.torch.cuda.reset_peak_memory_stats(self.device)

  def _memory(self) -> dict:
    if self.device.type != "cuda":
      return {}
    return {"device_peak_bytes": self.torch.cuda.max_memory_allocated(self.device)}

  def _model(self, unit, train: bool):
    from transformers import (BertConfig, BertForSequenceClassification, XLMRobertaConfig,
                              XLMRobertaForSequenceClassification)
    torch, args = self.torch, self.args
    spec = shapes(args)[0][unit["model"]]
    xlmr = unit["model"] == "xlmr_large"
    cls_config, cls = ((XLMRobertaConfig, XLMRobertaForSequenceClassification) if xlmr
                       else (BertConfig, BertForSequenceClassification))
    config = cls_config(vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
                        num_hidden_layers=spec["num_layers"], num_attention_heads=spec["num_heads"],
                        intermediate_size=spec["mlp_dim"], max_position_embeddings=spec["max_positions"],
                        type_vocab_size=spec["type_vocab_size"], pad_token_id=spec["pad_token_id"],
                        hidden_act="gelu", hidden_dropout_prob=DROPOUT,
                        attention_probs_dropout_prob=unit["attn_dropout"], layer_norm_eps=spec["layer_norm_eps"],
                        num_labels=NUM_CLASSES, attn_implementation=args.torch_attn)
    torch.manual_seed(SEED)
    with torch.device(self.device):
      model = cls(config)
    model.train(train)
    base = model.roberta if xlmr else model.bert
    raw = classification_batch(spec, unit["batch"], unit["seq"])
    inputs = {"input_ids": raw["input_ids"], "attention_mask": raw["input_mask"],
              "token_type_ids": raw["token_type_ids"]}
    if train:
      inputs["labels"] = raw["labels"]
    inputs = {k: torch.from_numpy(v).long().to(self.device) for k, v in inputs.items()}
    return model, base, inputs

  def _compile(self, model, base) -> None:
    import torch._dynamo
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    for name in ("recompile_limit", "cache_size_limit"):
      if hasattr(torch._dynamo.config, name):
        setattr(torch._dynamo.config, name, 64)
    kwargs = dict(backend=self.backend, dynamic=False)
    if self.args.torch_compile == "full":
      model.compile(**kwargs)
    else:
      for layer in base.encoder.layer:
        layer.compile(**kwargs)

  def _compile_info(self, compiled: bool) -> dict:
    if not compiled:
      return {}
    from torch._dynamo.utils import counters
    return {"compile_mode": self.args.torch_compile, "compile_backend": self.backend,
            "graph_breaks": int(sum(counters["graph_break"].values())),
            "unique_graphs": int(counters["stats"]["unique_graphs"])}

  def _autocast(self):
    return self.torch.autocast(device_type=self.device.type, dtype=self.torch.bfloat16,
                               enabled=self.args.dtype == "bfloat16")

  def train(self, unit) -> dict:
    from transformers import get_linear_schedule_with_warmup
    torch = self.torch
    self._reset_memory()
    model, base, batch = self._model(unit, train=True)
    compiled = unit["compiled"]
    if compiled:
      self._compile(model, base)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
      (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8,
                                  **({"fused": True} if compiled else {}))
    total = unit["warmup"] + unit["steps"]
    scheduler = get_linear_schedule_with_warmup(optimizer, int(WARMUP_RATIO * total), total)
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = sum(p.numel() for p in base.embeddings.parameters())

    def step():
      with self._autocast():
        loss = model(**batch).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
      optimizer.step()
      scheduler.step()
      optimizer.zero_grad(set_to_none=True)
      return loss

    times, losses = [], []
    for i in range(total):
      self.sync()
      t = time.perf_counter()
      loss = step()
      self.sync()
      times.append(time.perf_counter() - t)
      losses.append(float(loss.detach()))
      if i == 0:
        progress(f"{unit['id']}: first step {times[0]:.1f} s")
    out = {**timing(times, unit["warmup"]), "losses": losses, "n_params": n_params,
           "n_params_non_embedding": n_params - n_embed, "attention": model.config._attn_implementation,
           "optimizer": "AdamW fused" if compiled else "AdamW (default)", **self._compile_info(compiled),
           "compute_dtype": "bfloat16 autocast" if self.args.dtype == "bfloat16" else "float32", **self._memory()}
    if unit.get("profile"):
      save_timed(unit, out)
      out["profile"] = self._profile_train(unit, step, statistics.median(times[unit["warmup"]:]))
    del model, optimizer, batch
    return out

  def _profile_train(self, unit, step, step_s: float) -> dict:
    """PROFILE_STEPS more steps under torch.profiler (after the timed ones): per kernel its self device time (CUDA;
    on a CPU its self CPU time) from key_averages(). Any failure: a one-line reason."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    t, cuda = time.perf_counter(), self.device.type == "cuda"
    try:
      activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
      self.sync()
      with profile(activities=activities) as prof:
        for _ in range(PROFILE_STEPS):
          step()
        self.sync()
      want = DeviceType.CUDA if cuda else DeviceType.CPU
      totals = {}
      for e in prof.key_averages():
        if e.device_type == want:
          us = ((e.self_device_time_total if hasattr(e, "self_device_time_total") else e.self_cuda_time_total)
                if cuda else e.self_cpu_time_total)
          totals[e.key] = [float(us), int(e.count), None]
      if not totals:
        raise RuntimeError(f"no {want.name} events in the profile")
      busy = busy_us([(e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == want])
      source = ("torch.profiler, CUDA kernels (self device time)" if cuda
                else "torch.profiler, CPU ops (self CPU time; no device)")
      summary = op_summary(totals, busy, PROFILE_STEPS, step_s, source)
    except Exception as e:  # the timed numbers stand; the profile is only skipped
      progress(f"{unit['id']}: profile skipped: {type(e).__name__}: {e}")
      return {"skipped": f"{type(e).__name__}: {e}"[:300]}
    progress(f"{unit['id']}: profiled {PROFILE_STEPS} steps in {time.perf_counter() - t:.1f} s")
    return {**summary, "profile_s": time.perf_counter() - t}

  def predict(self, unit) -> dict:
    torch = self.torch
    self._reset_memory()
    model, base, batch = self._model(unit, train=False)
    compiled = unit["compiled"]
    if compiled:
      self._compile(model, base)
    times = []
    with torch.inference_mode():
      for _ in range(unit["warmup"] + unit["steps"]):
        self.sync()
        t = time.perf_counter()
        with self._autocast():
          logits = model(**batch).logits
        self.sync()
        times.append(time.perf_counter() - t)
    out = {**timing(times, unit["warmup"]), "output_shape": list(logits.shape),
           "attention": model.config._attn_implementation, **self._compile_info(compiled), **self._memory()}
    del model, batch
    return out

  def mining(self, unit) -> dict:
    import numpy as np
    torch = self.torch
    self._reset_memory()
    m = shapes(self.args)[3]
    x, y = mining_inputs(m)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)

    def knn():
      a, b = xs.to(self.device), ys.to(self.device)
      s = a @ b.T
      fwd, bwd = s.topk(m["k"], dim=1), s.topk(m["k"], dim=0)
      return [t.cpu().numpy() for t in (fwd.values, fwd.indices, bwd.values.T, bwd.indices.T)]  # synchronises

    times = []
    for _ in range(unit["warmup"] + unit["steps"]):
      t = time.perf_counter()
      out = knn()
      times.append(time.perf_counter() - t)
    np.save(unit["top1_path"], np.stack([out[1][:, 0], out[3][:, 0]]))
    tf32 = bool(torch.backends.cuda.matmul.allow_tf32) if self.device.type == "cuda" else False
    return {**timing(times, unit["warmup"]), "precision": f"float32 (TF32 {'on' if tf32 else 'off'})",
            "function": "x @ y.T, topk(dim=1), topk(dim=0)", **self._memory()}

  def decode(self, unit) -> dict:
    from transformers import BartConfig, BartForConditionalGeneration, GenerationConfig
    torch, d = self.torch, shapes(self.args)[2]
    self._reset_memory()
    length = d["length"]
    config = BartConfig(vocab_size=d["vocab_size"], d_model=d["hidden_size"], encoder_layers=d["encoder_layers"],
                        decoder_layers=d["decoder_layers"], encoder_attention_heads=d["num_heads"],
                        decoder_attention_heads=d["num_heads"], encoder_ffn_dim=d["mlp_dim"],
                        decoder_ffn_dim=d["mlp_dim"], max_position_embeddings=d["max_positions"],
                        activation_function="gelu", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                        scale_embedding=False, pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                        decoder_start_token_id=BOS_ID, forced_eos_token_id=EOS_ID, tie_word_embeddings=True,
                        attn_implementation=self.args.torch_attn)
    torch.manual_seed(SEED)
    with torch.device(self.device):
      model = BartForConditionalGeneration(config).eval()
    raw = seq2seq_batch(d)
    ids, mask = (torch.from_numpy(raw[k]).long().to(self.device) for k in ("input_ids", "input_mask"))
    gen = GenerationConfig(max_new_tokens=length, min_new_tokens=length, num_beams=d["beam"], do_sample=False,
                           use_cache=True, length_penalty=1.0, early_stopping=False, no_repeat_ngram_size=0,
                           num_return_sequences=1, decoder_start_token_id=BOS_ID, bos_token_id=BOS_ID,
                           eos_token_id=EOS_ID, pad_token_id=PAD_ID, forced_eos_token_id=EOS_ID)
    times = []
    for _ in range(unit["warmup"] + unit["steps"]):
      self.sync()
      t = time.perf_counter()
      with torch.inference_mode(), self._autocast():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen)
      self.sync()
      times.append(time.perf_counter() - t)
    new = out[:, 1:].cpu()
    full = new.shape[1] == length and all(
        (row == EOS_ID).nonzero().flatten().tolist() == [length - 1] for row in new)
    out_info = {**timing(times, unit["warmup"]), "all_full_length": bool(full),
                "n_params": sum(p.numel() for p in model.parameters()), **self._memory()}
    del model
    return out_info


def save_timed(unit: dict, result: dict) -> None:
  """The unit's result before its profile runs: the parent takes it should the worker die or hang profiling."""
  if unit.get("_timed"):
    _write_json(unit["_timed"], {**result, "wall_s": time.perf_counter() - unit["_t0"], "peak_rss_gib": peak_rss_gib()})


def worker_main(args) -> int:
  """A worker: imports its framework, writes ready.json, then runs one unit per stdin line ({unit, out})."""
  if args._worker == "torch":
    side = TorchSide(args)
  else:
    side = JaxSide(args, args.cache_dir)
  info = {**side.info, "pid": os.getpid(), "process_start_to_ready_s": time.perf_counter() - PROCESS_START}
  _write_json(os.path.join(args._dir, "ready.json"), info)
  for line in sys.stdin:
    if not line.strip():
      continue
    msg = json.loads(line)
    unit = msg["unit"]
    t = time.perf_counter()
    unit.update(_timed=f"{msg['out']}.timed", _t0=t)
    try:
      result = getattr(side, unit["kind"])(unit)
    except Exception as e:  # report it and carry on with the next unit
      result = {"error": f"{type(e).__name__}: {e}"[:2000], "traceback": traceback.format_exc()[-4000:]}
      progress(f"{unit['id']} failed: {result['error'][:300]}")
    gc.collect()
    side.cleanup()
    result["wall_s"] = time.perf_counter() - t
    result["peak_rss_gib"] = peak_rss_gib()
    _write_json(msg["out"], result)
  return 0


# -- the parent: plan, run, report -------------------------------------------------------


def _write_json(path: str, obj) -> None:
  tmp = f"{path}.tmp"
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1, default=str)
  os.replace(tmp, path)


class Worker:
  """One worker process (`--_worker kind`), handed one unit at a time through its stdin."""

  def __init__(self, kind: str, argv: list[str], directory: str):
    self.kind, self.dir, self.count = kind, directory, 0
    os.makedirs(directory, exist_ok=True)
    worker_kind = "torch" if kind == "torch" else "jax"  # jax, probe, jax2 (smoke)
    cmd = [sys.executable, "-u", os.path.abspath(__file__), *argv, "--_worker", worker_kind, "--_dir", directory]
    self.started = time.perf_counter()
    self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, start_new_session=True)

  def poll(self, path: str, deadline: float) -> dict | None:
    """The result at `path` once written; an error if the worker died or ran past `deadline` (then killed)."""
    if os.path.exists(path):
      with open(path) as f:
        return json.load(f)
    if self.proc.poll() is not None:
      return self._timed(path, f"the {self.kind} worker exited with status {self.proc.returncode}")
    if time.perf_counter() > deadline:
      self.kill()
      return self._timed(path, f"killed: still running {GRACE_S:.0f} s after the time budget")
    return None

  def _timed(self, path: str, error: str) -> dict:
    """The error, or the timed result the worker saved before profiling (then the profile is what failed)."""
    if not os.path.exists(f"{path}.timed"):
      return {"error": error}
    with open(f"{path}.timed") as f:
      result = json.load(f)
    result["profile"] = {"skipped": f"while profiling: {error}"}
    return result

  def ready(self, deadline: float) -> dict:
    path = os.path.join(self.dir, "ready.json")
    while (info := self.poll(path, deadline)) is None:
      time.sleep(0.05)
    info["start_s"] = time.perf_counter() - self.started
    return info

  def send(self, unit: dict):
    """Hands `unit` over; the path its result will be written to (an error dict if the worker is gone)."""
    self.count += 1
    out = os.path.join(self.dir, f"unit{self.count}.json")
    try:
      self.proc.stdin.write(json.dumps({"unit": unit, "out": out}) + "\n")
      self.proc.stdin.flush()
    except (BrokenPipeError, OSError) as e:
      return {"error": f"the {self.kind} worker is gone: {e}"}
    return out

  def alive(self) -> bool:
    return self.proc.poll() is None

  def kill(self) -> None:
    if self.proc.poll() is None:
      try:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session: it and its compile workers
      except ProcessLookupError:
        pass
      self.proc.wait()

  def close(self, wait: bool = True) -> None:
    """End of input: the worker exits after its unit (killed if it has not within 10 s of `wait`)."""
    if self.proc.poll() is None:
      try:
        self.proc.stdin.close()
        if wait:
          self.proc.wait(timeout=10)
      except (subprocess.TimeoutExpired, OSError):
        self.kill()


def row_name(model: str, batch: int, seq: int, drop: float | None = None) -> str:
  return f"{model} {batch}x{seq}" + ("" if drop is None else f" adrop {drop:g}")


def plan(args) -> list[dict]:
  """Every unit, (section, row, side) with what its worker needs: pass 1 (the headline row of each section, in
  order of importance), then pass 2 (the other rows)."""
  models, train_rows, decode, mining = shapes(args)
  warmup, steps = (1, 2) if args.smoke else (args.warmup, args.steps)
  sections = args.sections
  units = []

  def add(section, row, side, worker, kind, pass_, **kw):
    if section in ("train", "predict") and ((args.rows is not None and row not in args.rows)
                                            or side not in args.sides):
      return
    if section == "train" and args.profile and row in args.profile_rows:
      kw["profile"] = True
    if pass_ in args.passes and section in sections:
      units.append({"id": f"{section}/{row}/{side}", "section": section, "row": row, "side": side, "pass": pass_,
                    "worker": worker, "kind": kind, "warmup": warmup, "steps": steps, **kw})

  # The compile section's cold side is the JAX worker's first unit: the first train row (or a unit of its own).
  model, batch, seq, drop, _ = train_rows[0]
  cold = row_name(model, batch, seq)
  probe = dict(model=model, batch=batch, seq=seq, attn_dropout=drop, warmup=0, steps=1)
  runs_first_train_row = ("train" in sections and 1 in args.passes and "xtreme_jax" in args.sides
                          and (args.rows is None or row_name(*train_rows[0][:4]) in args.rows))
  if not runs_first_train_row:
    add("compile", cold, "cold", "jax", "train", 1, cold_row=cold, **probe)
  cold_id = f"compile/{cold}/cold" if not runs_first_train_row else f"train/{row_name(*train_rows[0][:4])}/xtreme_jax"
  reps = dict(warmup=1, steps=2 if args.smoke else 3)
  for pass_ in (1, 2):
    for i, (model, batch, seq, drop, p) in enumerate(train_rows):
      if p == pass_:
        row, common = row_name(model, batch, seq, drop), dict(model=model, batch=batch, seq=seq, attn_dropout=drop)
        cold_row = {"cold_row": cold} if i == 0 and "compile" in sections else {}
        add("train", row, "xtreme_jax", "jax", "train", p, **common, **cold_row)
        add("train", row, "hf_eager", "torch", "train", p, compiled=False, **common)
        add("train", row, "torch_compile", "torch", "train", p, compiled=True, **common)
    for model, batch, seq, p in predict_rows(args):
      if p == pass_:  # no dropout in prediction; the config of a train row of that shape shares its init program
        drop = next((d for m, b, s, d, _ in train_rows if (m, b, s) == (model, batch, seq)), DROPOUT)
        row, common = row_name(model, batch, seq), dict(model=model, batch=batch, seq=seq, attn_dropout=drop)
        add("predict", row, "xtreme_jax", "jax", "predict", p, **common)
        add("predict", row, "hf_eager", "torch", "predict", p, compiled=False, **common)
        add("predict", row, "torch_compile", "torch", "predict", p, compiled=True, **common)
    if pass_ == 1:
      add("compile", cold, "warm", "probe", "train", 1, after=cold_id, **probe)
      row = f"{mining['n']}x{mining['n']}x{mining['dim']} k={mining['k']}"
      add("mining", row, "xtreme_jax", "jax", "mining", 1, **reps)
      add("mining", row, "torch", "torch", "mining", 1, **reps)
      row = (f"beam {decode['beam']}, {decode['batch']}x{decode['source_length']} -> {decode['length']} "
             f"({decode['encoder_layers']}+{decode['decoder_layers']} layers, h {decode['hidden_size']})")
      add("decode", row, "xtreme_jax", "jax", "decode", 1, **reps)
      add("decode", row, "hf_generate", "torch", "decode", 1, **reps)
  return units


def display_order(args, units: list[dict]) -> list[tuple[str, str]]:
  """(section, row) of every planned unit in table order: sections as SECTIONS, rows as their lists."""
  order = [("train", row_name(m, b, s, d)) for m, b, s, d, _ in shapes(args)[1]]
  order += [("predict", row_name(m, b, s)) for m, b, s, _ in predict_rows(args)]
  planned = list(dict.fromkeys((u["section"], u["row"]) for u in units))
  known = [key for key in order if key in planned] + [key for key in planned if key not in order]
  return sorted(known, key=lambda key: SECTIONS.index(key[0]))


def estimate_key(unit: dict) -> tuple:
  if unit["section"] == "compile":
    return ("warm" if unit["side"] == "warm" else "xtreme_jax", "compile", "mbert_base")
  return (unit["side"], unit["section"], unit.get("model"))


def peak_for(name: str) -> float | None:
  for key, peak in PEAKS:
    if key.lower() in (name or "").lower():
      return peak
  return None


def derive(report: dict, args) -> None:
  """ms/step, examples/s, TFLOP/s, MFU, ratios, agreement: from the workers' raw timings."""
  models, _, decode, mining = shapes(args)
  peak = report["peak_tflops"]
  for section in ("train", "predict"):
    for row in report["sections"].get(section, {}).values():
      if "model" not in row:  # never reached
        continue
      spec = models[row["model"]]
      row["flops_per_step"] = model_flops(spec, row["batch"], row["seq"], section == "train")
      row["n_params_non_embedding"] = non_embedding_params(spec)
      for r in row["sides"].values():
        if "median_s" in r:
          r["ms"] = 1000 * r["median_s"]
          r["examples_per_s"] = row["batch"] / r["median_s"]
          r["tflops"] = row["flops_per_step"] / r["median_s"] / 1e12
          r["mfu"] = r["tflops"] / peak if peak else None
  for row in report["sections"].get("mining", {}).values():
    for r in row["sides"].values():
      if "median_s" in r:
        r["ms"] = 1000 * r["median_s"]
        r["tflops"] = 2.0 * mining["n"] ** 2 * mining["dim"] / r["median_s"] / 1e12
    paths = [os.path.join(report["run_dir"], f"top1_{s}.npy") for s in SIDES["mining"]]
    if all(os.path.exists(p) for p in paths):
      import numpy as np
      a, b = (np.load(p) for p in paths)
      row["top1_equal_fraction"] = float(np.mean(a == b)) if a.shape == b.shape else None
  for row in report["sections"].get("decode", {}).values():
    for r in row["sides"].values():
      if "median_s" in r:
        r["ms"] = 1000 * r["median_s"]
        r["tokens_per_s"] = decode["batch"] * decode["length"] / r["median_s"]
  for row in report["sections"].get("compile", {}).values():
    for r in row["sides"].values():
      if "compile_s" in r:
        r["startup_s"] = sum(r.get(k) or 0 for k in ("import_s", "init_state_s", "lower_s", "compile_s", "first_s"))
  for section in ("train", "predict", "mining", "decode"):
    for row in report["sections"].get(section, {}).values():
      ours = row["sides"].get("xtreme_jax", {}).get("median_s")
      row["speedup"] = {side: r["median_s"] / ours for side, r in row["sides"].items()
                        if side != "xtreme_jax" and ours and r.get("median_s")}


def _f(v, spec: str, width: int) -> str:
  if v is None or (isinstance(v, float) and not math.isfinite(v)):
    return f"{'-':>{width}}"
  return f"{format(v, spec):>{width}}"


def table(report: dict, args) -> str:
  """The one table printed last (the device tool returns the tail of the output)."""
  out = []
  dev = report["device"]
  peak = report["peak_tflops"]
  peak_text = "no peak" if peak is None else f"peak {peak:g} TFLOP/s"
  extra = (f", attention {args.attention}" if args.attention else "") + (
      f", dropout masks {args.dropout_masks}" if args.dropout_masks else "") + (
      f", label: {args.label}" if args.label else "")
  out.append(f"== device check{' (SMOKE: tiny shapes, CPU)' if args.smoke else ''}: {dev.get('name')}, "
             f"{peak_text} ({report['peak_source']}), {args.dtype}{extra}, wall {report['wall_s']:.0f} s ==")
  sections = report["sections"]
  for section, title in (("train", "train step"), ("predict", "predict (forward only)")):
    if section not in sections:
      continue
    out.append(f"\n{title:<29}" + "".join(f"{SIDE_NAMES[s]:>22}" for s in SIDES[section]) + f"{'ours/eager':>11}"
               f"{'ours/comp':>10}")
    out.append(f"{'':<29}" + f"{'ms':>8}{'ex/s':>8}{'MFU%':>6}" * 3)
    for name, row in sections[section].items():
      cells = ""
      for side in SIDES[section]:
        r = row["sides"].get(side, {})
        if "median_s" in r:
          cells += _f(r["ms"], ".1f", 8) + _f(r["examples_per_s"], ".0f", 8) + _f(
              None if r.get("mfu") is None else 100 * r["mfu"], ".1f", 6)
        else:
          cells += f"{'skipped' if 'skipped' in r else 'error' if 'error' in r else '-':>22}"
      sp = row.get("speedup", {})
      out.append(f"{name:<29}{cells}{_f(sp.get('hf_eager'), '.2f', 11)}{_f(sp.get('torch_compile'), '.2f', 10)}")
    out.append("first call s (compile included)")
    for name, row in sections[section].items():
      firsts = []
      for side in SIDES[section]:
        r = row["sides"].get(side, {})
        first = r.get("compile_s", 0) + r.get("first_s", 0) if "first_s" in r else None
        firsts.append(_f(first, ".1f", 22))
      attn = row["sides"].get("xtreme_jax", {}).get("attention")
      out.append(f"{'  ' + name:<29}{''.join(firsts)}  ours: {attn or '-'} attention")
  if "compile" in sections:
    for name, row in sections["compile"].items():
      out.append(f"\ncompile: our {name} train step    import    init   lower  compile  1st step  total  hit/miss")
      for side in SIDES["compile"]:
        r = row["sides"].get(side, {})
        if "compile_s" not in r:
          out.append(f"  {side:<34}{'skipped' if 'skipped' in r else 'error' if 'error' in r else '-':>8}")
          continue
        out.append(f"  {side + (' (empty cache, fresh process)' if side == 'cold' else ' (same cache, fresh)'):<34}"
                   + "".join(_f(r.get(k), ".1f", w) for k, w in (("import_s", 8), ("init_state_s", 8),
                                                                 ("lower_s", 8), ("compile_s", 9), ("first_s", 10),
                                                                 ("startup_s", 7)))
                   + f"  {r.get('cache_hits', '-')}/{r.get('cache_misses', '-')}")
  for section, unit, rate, rate_key, spec in (("mining", "ms", "TFLOP/s", "tflops", ".1f"),
                                              ("decode", "ms/call", "tokens/s", "tokens_per_s", ".0f")):
    if section not in sections:
      continue
    a, b = SIDES[section]
    for name, row in sections[section].items():
      out.append(f"\n{section}: {name}")
      for side in (a, b):
        r = row["sides"].get(side, {})
        if "median_s" not in r:
          out.append(f"  {SIDE_NAMES[side]:<16}{'skipped' if 'skipped' in r else 'error' if 'error' in r else '-'}")
          continue
        extra = (f"  {r.get('precision', '')}" if section == "mining"
                 else f"  full length: {'yes' if r.get('all_full_length') else 'NO'}")
        out.append(f"  {SIDE_NAMES[side]:<16}{_f(r['ms'], '.1f', 10)} {unit:<8}{_f(r[rate_key], spec, 9)} {rate:<9}"
                   f"first {r.get('compile_s', 0) + r['first_s']:.1f} s{extra}")
      sp = row.get("speedup", {}).get(b)
      agree = (f", top-1 equal {100 * row['top1_equal_fraction']:.2f}%"
               if row.get("top1_equal_fraction") is not None else "")
      out.append(f"  ours / {SIDE_NAMES[b]}: {'-' if sp is None else f'{sp:.2f}x'}{agree}")
  footer = [FLOP_FORMULA + f"; {peak_text}.",
            "ours/x = x's ms / our ms (>1: xtreme-jax faster); medians of timed steps after warm-up, synchronised. "
            f"torch.compile: {args.torch_compile}, backend {report['versions'].get('torch_compile_backend')}, "
            f"dynamic=False, AdamW fused; HF eager: {args.torch_attn}, AdamW default (foreach on CUDA); torch.autocast "
            f"{args.dtype}."]
  footer += [f"note: {note}" for note in dict.fromkeys(report["notes"])]
  footer += [f"note: torch.compile broke the graph {r['graph_breaks']} time(s) in {s}/{n}"
             for s, rows in sections.items() for n, row in rows.items() for r in row["sides"].values()
             if r.get("graph_breaks")]
  if report["skipped"]:
    footer.append(f"skipped ({len(report['skipped'])}): " + "; ".join(f"{u} ({why})"
                                                                       for u, why in report["skipped"].items()))
  footer += [f"ERROR {s}/{n}/{side}: {r['error'][:200]}" for s, rows in sections.items() for n, row in rows.items()
             for side, r in row["sides"].items() if "error" in r]
  out.append("")
  out += [textwrap.fill(line, 120, subsequent_indent="  ") for line in footer]
  out += profile_text(report)
  if args.json:
    out.append(f"wrote {args.json}")
  return "\n".join(out)


def versions() -> dict:
  names = ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "optax", "orbax-checkpoint", "torch",
           "transformers", "triton", "numpy")
  out = {n: version(n) for n in names}
  out["python"] = platform.python_version()
  try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20)
    out["nvidia_smi"] = smi.stdout.strip() or None
  except (OSError, subprocess.TimeoutExpired):
    out["nvidia_smi"] = None
  return {k: v for k, v in out.items() if v not in (None, "not installed")}


def _without_json(argv: list[str]) -> list[str]:
  out, skip = [], False
  for a in argv:
    if skip:
      skip = False
    elif a == "--json":
      skip = True
    elif not a.startswith("--json="):
      out.append(a)
  return out


def run(args, argv: list[str]) -> int:
  deadline = PROCESS_START + args.budget_s
  run_dir = tempfile.mkdtemp(prefix="device_check_")
  cache_dir = args.cache_dir or os.path.join(run_dir, "jax_cache")
  worker_argv = _without_json(argv) + ([] if args.cache_dir else ["--cache_dir", cache_dir])
  report = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "smoke": args.smoke,
            "budget_s": args.budget_s, "run_dir": run_dir, "device": {}, "versions": versions(), "workers": {},
            "peak_tflops": None, "peak_source": None, "flop_formula": FLOP_FORMULA, "sections": {}, "skipped": {},
            "notes": [], "load_average_start": loadavg(), "wall_s": 0.0, "label": args.label,
            "attention_implementation": args.attention or "auto (the config's default)",
            "dropout_masks": args.dropout_masks or "the config's default",
            "selection": {"rows": args.rows, "sides": args.sides}}
  if args.profile:
    os.makedirs(args.profile, exist_ok=True)
    report.update(profile_dir=args.profile, profile_rows=args.profile_rows, profiles={})
  models, _, decode, mining = shapes(args)
  report["shapes"] = {"models": models, "decode": decode, "mining": mining}
  workers: dict[str, Worker] = {}
  measured: dict = {}
  failed_start: dict = {}

  def save():
    report["wall_s"] = time.perf_counter() - PROCESS_START
    if args.json:
      os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
      _write_json(args.json, report)

  def set_device(kind: str, info: dict) -> None:
    dev = report["device"]
    dev[f"{kind}_platform"], dev[f"{kind}_device"] = info.get("platform"), info.get("device_kind")
    if info.get("platform") == "gpu" or "name" not in dev:
      dev["name"] = info.get("device_kind")
    if kind == "torch":
      report["versions"].update(cuda_torch=info.get("cuda"), cudnn_torch=info.get("cudnn"),
                                torch_compile_backend=info.get("compile_backend"))
    gpu = info.get("platform") == "gpu"
    if report["peak_source"] is not None and not (gpu and report["peak_source"].startswith("nominal")):
      return
    found = peak_for(info.get("device_kind")) if gpu else None
    if args.peak_tflops:
      report["peak_tflops"], report["peak_source"] = args.peak_tflops, "--peak_tflops"
    elif found:
      report["peak_tflops"], report["peak_source"] = found, "dense bf16, from the device name"
    elif not gpu:
      report["peak_tflops"], report["peak_source"] = 1.0, "nominal 1 TFLOP/s on CPU: MFU not meaningful"
    else:  # the numbers still come; MFU needs the peak
      report["peak_tflops"], report["peak_source"] = None, "unknown GPU: no MFU without --peak_tflops"
      report["notes"].append(f"unknown GPU {info.get('device_kind')!r}: pass --peak_tflops (its dense bf16 peak)")

  def worker(kind: str) -> tuple[Worker | None, dict]:
    """The running worker of `kind`, else a fresh one (a probe is always fresh) and its ready info."""
    w = workers.get(kind)
    if w is not None and w.alive() and kind != "probe":
      return w, {}
    if kind in failed_start:
      return None, {"error": f"the {kind} worker did not start: {failed_start[kind]}"}
    progress(f"starting the {kind} worker")
    w = workers[kind] = Worker(kind, worker_argv, os.path.join(run_dir, f"{kind}{len(report['workers'])}"))
    info = w.ready(deadline + GRACE_S)
    if "error" in info:
      failed_start[kind] = info["error"]
      return None, info
    report["workers"][kind] = info
    if kind in ("jax", "torch"):
      set_device(kind, info)
    return w, info

  def start(unit: dict):
    """Skips `unit` (None) or hands it to its worker: (worker, started-it info, result path or error)."""
    row = report["sections"].setdefault(unit["section"], {}).setdefault(unit["row"], {"sides": {}})
    row.update({k: unit[k] for k in ("model", "batch", "seq", "attn_dropout") if k in unit})
    if unit["kind"] == "mining":
      unit["top1_path"] = os.path.join(run_dir, f"top1_{unit['side']}.npy")
    kind = unit["worker"]
    running = kind in workers and workers[kind].alive() and kind != "probe"
    left = deadline - time.perf_counter() - RESERVE_S
    need = measured.get(estimate_key(unit), ESTIMATES.get(estimate_key(unit), 30.0))
    need += 0 if running else WORKER_START_ESTIMATE[kind]
    need += PROFILE_ESTIMATE_S if unit.get("profile") else 0
    if need > left and args.guard:
      why = f"budget: needs ~{need:.0f} s, {max(left, 0):.0f} s left"
      row["sides"][unit["side"]] = {"skipped": why}
      report["skipped"][unit["id"]] = why
      progress(f"skip {unit['id']} ({why})")
      return None
    progress(f"{unit['id']} (~{need:.0f} s of {left:.0f} s left)")
    w, info = worker(kind)
    return (w, info, w.send(unit) if w is not None else info)

  def finish(unit: dict, w: Worker | None, info: dict, result: dict) -> None:
    if unit["worker"] == "probe" and w is not None:
      w.close()
    profile = result.pop("profile", None)
    if unit.get("profile"):
      report["profiles"][unit["id"]] = profile or {"skipped": f"the unit failed: {result.get('error', '?')[:200]}"}
      try:
        _write_json(os.path.join(args.profile, "profile_summary.json"),
                    {k: report[k] for k in ("label", "attention_implementation", "device", "versions", "profiles")})
      except OSError as e:
        report["notes"].append(f"could not write profile_summary.json: {e}")
    if "error" not in result:
      measured[estimate_key(unit)] = result["wall_s"]
    else:
      progress(f"{unit['id']}: {result['error'][:300]}")
    if info:  # this unit started its worker: the process's import time belongs to a compile measurement
      result.update(import_s=info.get("import_s"), cache_dir=info.get("cache_dir"),
                    cache_was_empty=info.get("cache_was_empty"))
    report["sections"][unit["section"]][unit["row"]]["sides"][unit["side"]] = result
    if unit.get("cold_row"):
      cold = dict(result, first_unit_of_process=bool(info))
      report["sections"].setdefault("compile", {}).setdefault(unit["cold_row"], {"sides": {}})["sides"]["cold"] = cold
      if not info or not info.get("cache_was_empty", True):
        report["notes"].append("compile 'cold' was not the first program of a fresh process on an empty cache")
    save()

  # One unit at a time, in order. --smoke overlaps the workers (a queue each; the warm probe after the cold unit; a
  # second JAX worker for pass 2) to save test time (its timings mean nothing anyway) unless --_serial.
  overlap = args.smoke and not args._serial
  pending = plan(args)
  for unit in pending:
    if overlap and unit["worker"] == "jax" and unit["pass"] == 2:
      unit["worker"] = "jax2"
  for section, row in display_order(args, pending):
    report["sections"].setdefault(section, {})[row] = {"sides": {}}
  progress(f"{len(pending)} units, budget {args.budget_s:.0f} s, run dir {run_dir}")
  queue = lambda unit: unit["worker"]  # noqa: E731

  def waiting(unit: dict) -> bool:  # on a unit still to run or running
    return any(u["id"] == unit.get("after") for u in pending + [f[0] for f in in_flight.values()])

  in_flight: dict = {}  # queue -> (unit, worker, info, result path)
  try:
    while pending or in_flight:
      for unit in list(pending):
        if queue(unit) in in_flight or (in_flight and not overlap) or waiting(unit):
          if not overlap:
            break
          continue
        pending.remove(unit)
        started = start(unit)
        if started is None:
          continue
        w, info, out = started
        if isinstance(out, dict):  # the worker did not start
          finish(unit, w, info, dict(out))
        else:
          in_flight[queue(unit)] = (unit, w, info, out)
        if not overlap:
          break
      for q, (unit, w, info, out) in list(in_flight.items()):
        result = w.poll(out, deadline + GRACE_S)
        if result is not None:
          del in_flight[q]
          finish(unit, w, info, result)
      if in_flight:
        time.sleep(0.05)
  finally:
    for w in workers.values():
      w.close(wait=False)
    for w in workers.values():
      w.close()
  derive(report, args)
  report["load_average_end"] = loadavg()
  text = table(report, args)
  report["table"] = text
  save()
  shutil.rmtree(run_dir, ignore_errors=True)
  sys.stderr.flush()
  print(text, flush=True)
  failed = any("error" in r for rows in report["sections"].values() for row in rows.values()
               for r in row["sides"].values())
  return 1 if failed else 0


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--json", metavar="OUT", help="write every number here (rewritten after each unit)")
  p.add_argument("--smoke", action="store_true", help="tiny shapes on CPU: every section, both frameworks")
  p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
  p.add_argument("--passes", default="1,2", help="1: the headline row of each section; 2: the other rows")
  p.add_argument("--budget_s", type=float, help="seconds from start after which no unit starts (default 440; "
                 "smoke 900, and every unit runs)")
  p.add_argument("--peak_tflops", type=float, help="dense bf16 peak of the GPU (default: from its name)")
  p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                 help="our precision policy / torch.autocast (default bfloat16)")
  p.add_argument("--steps", type=int, default=10, help="timed steps per train / predict unit (default 10)")
  p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2; JAX compiled ahead)")
  p.add_argument("--torch_compile", choices=("regional", "full"), default="regional",
                 help="compile every encoder layer (default) or the whole model")
  p.add_argument("--torch_backend", help="torch.compile backend (default inductor on a GPU, aot_eager on CPU)")
  p.add_argument("--torch_attn", choices=("sdpa", "eager"), default="sdpa")
  p.add_argument("--xlmr_remat", action="store_true", help="our XLM-R large with remat (xlmr_large.gin's setting)")
  p.add_argument("--cache_dir", help="JAX persistent compilation cache (default: a fresh folder: a cold start)")
  p.add_argument("--rows", metavar="NAMES", help="comma-separated train / predict rows to run, named as in the "
                 "table (e.g. 'mbert_base 256x128 adrop 0.1'); default all (other sections unaffected)")
  p.add_argument("--sides", default=",".join(SIDES["train"]),
                 help=f"comma-separated train / predict sides to run (default {','.join(SIDES['train'])})")
  p.add_argument("--attention", metavar="IMPL", help="our TransformerConfig(attention_implementation=IMPL) "
                 f"({', '.join(ATTENTION_CHOICES or ('any',))}; default: the config's, auto)")
  p.add_argument("--dropout_masks", choices=("auto", "flax", "hash"),
                 help="our TransformerConfig(dropout_masks=...) for the hidden dropout (default: the config's)")
  p.add_argument("--label", metavar="TEXT", help="a label for this run, in the table's header and the JSON")
  p.add_argument("--profile", metavar="DIR", help=f"after the timed steps of the --profile_rows train units, "
                 f"{PROFILE_STEPS} steps under the profiler: kernel summaries (JSON, table), our HLO and trace in DIR")
  p.add_argument("--profile_rows", metavar="NAMES", help="comma-separated train rows to profile (default: the first "
                 "train row that runs)")
  p.add_argument("--_worker", choices=("jax", "torch"), help=argparse.SUPPRESS)
  p.add_argument("--_dir", help=argparse.SUPPRESS)
  p.add_argument("--_serial", action="store_true", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
  args.passes = [int(x) for x in args.passes.split(",") if x.strip()]
  unknown = sorted(set(args.sections) - set(SECTIONS))
  if unknown:
    p.error(f"unknown sections {unknown}; expected a subset of {SECTIONS}")
  args.guard = not args.smoke or args.budget_s is not None  # smoke runs every unit unless given a budget
  if args.budget_s is None:
    args.budget_s = 900.0 if args.smoke else 440.0
  if args.steps < 1 or args.warmup < 1:
    p.error("--steps and --warmup must be >= 1")
  select(p, args)
  return args


def select(p: argparse.ArgumentParser, args) -> None:
  """--rows, --sides, --attention, --profile(_rows) checked and parsed; an unknown name: one line, exit 2."""
  def names(text):
    return list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))

  def check(flag, given, valid):
    bad = [x for x in given if x not in valid]
    if bad:
      p.exit(2, f"{p.prog}: unknown {flag} {', '.join(map(repr, bad))}; valid: {', '.join(map(repr, valid))}\n")

  train = [row_name(m, b, s, d) for m, b, s, d, _ in shapes(args)[1]]
  rows = train + [row_name(m, b, s) for m, b, s, _ in predict_rows(args)]
  args.rows = None if args.rows is None else names(args.rows)
  if args.rows is not None:
    check("--rows", args.rows, rows)
  args.sides = names(args.sides)
  check("--sides", args.sides, SIDES["train"])
  if args.attention is not None and ATTENTION_CHOICES:
    check("--attention", [args.attention], ATTENTION_CHOICES)
  if args.profile_rows is not None:
    args.profile_rows = names(args.profile_rows)
    check("--profile_rows", args.profile_rows, train)
  else:
    args.profile_rows = [r for r in train if args.rows is None or r in args.rows][:1]
  if args.profile:
    args.profile = os.path.abspath(args.profile)


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  if args._worker:
    return worker_main(args)
  return run(args, argv)


if __name__ == "__main__":
  sys.exit(main())
