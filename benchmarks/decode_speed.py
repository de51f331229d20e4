#!/usr/bin/env python
"""Decoding throughput: KV cache vs no cache, beam vs greedy, xtreme-jax vs Hugging Face `generate`.

One encoder-decoder shape, random init (nothing downloaded), one random
source batch (`--batch` x `--source_length` tokens, random lengths padded at
the end, the first row full) decoded to exactly `--length` output tokens:

- xtreme-jax, KV cache: `Seq2SeqModel.generate` (greedy for beam 1, else
  fairseq-style beam search), jitted with static `DecodeSettings`; its step
  function is `Seq2SeqModel.decoder`'s cached incremental step (one position
  per call; self-attention keys / values in a `max_length` buffer of which a
  step reads only the smallest of 8 buckets that holds the positions so far,
  beam search reordering a per-row history index rather than the keys /
  values; the memory's cross-attention keys / values computed once).
- xtreme-jax, no cache: the *same* `generate` (same search, same jit), with
  `Seq2SeqModel.decoder` swapped for a baseline written here: its "cache" is
  the (rows, max_length) buffer of the tokens so far, and every step writes
  the newest token into it and re-runs the whole teacher-forced decoder
  (`Seq2SeqNetwork.decode_logits`, `decode=False`, causal) over all
  max_length positions (the jitted shape is static), cross-attention to the
  encoder states included, then takes the logits at position t. Beam search
  reorders that buffer's rows (`decoding.gather_beams`).
- Hugging Face: `BartForConditionalGeneration` of the same shape (layers,
  hidden, heads, FFN, vocabulary, positions), `generate` with
  `use_cache=True` / `False`, greedy and beam; PyTorch eager, on CPU or
  on the GPU when there is one (`--torch_device`). The shapes match; the
  architectures differ in details: both are post-LN with learned absolute
  positions, GELU FFNs and tied output embeddings, but BART has its own
  position table and embedding LayerNorm per side (ours: one `Embeddings`
  shared by encoder and decoder), a `final_logits_bias`, and grows its KV
  cache by concatenation (attention over t keys at step t; ours over the
  bucket of the max_length buffer that holds them, at most max_length / 8
  more) and reorders it for beam search by copying it (ours: an index). Without
  a cache, HF re-runs the decoder over the t + 1 tokens so far (a growing
  prefix), our baseline over the whole max_length buffer.

Fixed output length. Every search runs all `--length` steps on both sides:
our step functions (cached and not) are wrapped to give EOS a logit of -inf
before the last position, and the search forces EOS at the last one, so
every hypothesis is exactly `--length` tokens, EOS included; HF gets
`min_new_tokens = max_new_tokens = --length` (and `forced_eos_token_id`, so
its last token is EOS too).

Definitions (median seconds of one whole decode call, encoder included):

    tokens/s      = batch * length / s      output tokens of the best hypothesis per source sentence
                                            (greedy and beam alike)
    hyp-tokens/s  = batch * beam * length / s   tokens of all hypotheses the search carries (greedy: beam 1)
    ms/step       = 1000 * s / length       one decoding step for the whole batch
    cache speedup = tokens/s with the KV cache / tokens/s without

Compilation is timed separately: for xtreme-jax, `compile s` is
`jit(...).lower(...).compile()`, `first call s` is that plus the first run
(what a plain first jitted call costs); then `--repeats` timed calls give the
median / min / max. HF's first call (no compilation, but first-use
allocations) is reported the same way. Each side runs in its own subprocess
by default (`--in_process` runs both here).

Examples:

    python benchmarks/decode_speed.py --preset tiny                             # smoke run, ~50 s on a 2-core CPU
    python benchmarks/decode_speed.py --batch 4 --source_length 32 --uncached none   # base shape, cached only, ~2 min
    python benchmarks/decode_speed.py --batch 1 --uncached greedy --repeats 2   # base shape, CPU, ~3.5 min
    python benchmarks/decode_speed.py --batch 32 --dtype bfloat16 --json /tmp/decode.json   # base shape, GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import statistics
import sys
import time

from machine import cpu_count, loadavg, peak_rss_gib, progress, run_sides, print_sections, version

PRESETS = {
    # A VECO / BART-base-like encoder-decoder: 768 hidden, 12 heads, FFN 3072, 6 + 6 layers, a 32k vocabulary
    # (VECO's is 250k; 32k keeps CPU memory and the vocabulary projection modest).
    "base": dict(vocab_size=32000, hidden_size=768, num_heads=12, mlp_dim=3072, encoder_layers=6, decoder_layers=6,
                 max_positions=512),
    "tiny": dict(vocab_size=1024, hidden_size=64, num_heads=4, mlp_dim=256, encoder_layers=2, decoder_layers=2,
                 max_positions=512),
}
# Defaults of --batch / --source_length / --repeats per preset (tiny: a smoke run of about a minute on a 2-core CPU).
PRESET_DEFAULTS = {"base": dict(batch=8, source_length=64, repeats=3),
                   "tiny": dict(batch=4, source_length=32, repeats=2)}
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
LAYER_NORM_EPS = 1e-5  # BART's
SEARCHES = ("greedy", "beam")
CACHES = ("cached", "uncached")


def shape_of(args) -> dict:
  shape = dict(PRESETS[args.preset])
  for key in ("encoder_layers", "decoder_layers"):
    if getattr(args, key) is not None:
      shape[key] = getattr(args, key)
  return shape


def runs_of(args) -> list[tuple[str, str]]:
  """(search, cache) pairs to run, in order."""
  uncached = {"all": SEARCHES, "greedy": ("greedy",), "none": ()}[args.uncached]
  return [(s, c) for s in SEARCHES for c in CACHES if c == "cached" or s in uncached]


def beams_of(search: str, args) -> int:
  return 1 if search == "greedy" else args.beam


# -- the shared batch ----------------------------------------------------------


def make_batch(batch_size: int, source_length: int, vocab_size: int, seed: int) -> dict:
  """Random source ids (>= 3, clear of pad / BOS / EOS) with random lengths, padded at the end (numpy int32)."""
  import numpy as np
  rng = np.random.default_rng(seed)
  lengths = rng.integers(max(1, source_length // 2), source_length + 1, size=batch_size)
  lengths[0] = source_length
  mask = np.arange(source_length)[None, :] < lengths[:, None]
  ids = np.where(mask, rng.integers(EOS_ID + 1, vocab_size, size=(batch_size, source_length)), PAD_ID)
  return {"input_ids": ids.astype(np.int32), "input_mask": mask.astype(np.int32),
          "decoder_start": np.full((batch_size,), BOS_ID, np.int32)}


def batch_fingerprint(batch: dict) -> str:
  h = hashlib.sha256()
  for k in sorted(batch):
    h.update(batch[k].tobytes())
  return h.hexdigest()[:16]


def timing(compile_s: float | None, first_s: float, times: list[float]) -> dict:
  return {"compile_s": compile_s, "first_call_s": first_s, "median_s": statistics.median(times),
          "mean_s": statistics.fmean(times), "min_s": min(times), "max_s": max(times), "times_s": times}


# -- xtreme-jax side -----------------------------------------------------------


def run_jax(args, shape: dict) -> dict:
  import flax.linen as nn
  import jax
  import jax.numpy as jnp
  import numpy as np

  from xtreme_jax.models import decoding
  from xtreme_jax.models.seq2seq import DecodeSettings, Seq2SeqLmNetwork, Seq2SeqModel
  from xtreme_jax.networks.config import TransformerConfig
  from xtreme_jax.networks.seq2seq import Seq2SeqConfig

  L = args.length

  def fixed_length(step):
    """`step` with EOS forbidden before the last position (where the searches force it): exactly L tokens."""
    def wrapped(tokens, cache, t):
      logits, cache = step(tokens, cache, t)
      vocab = jnp.arange(logits.shape[-1])
      return jnp.where((vocab == EOS_ID) & (t < L - 1), -jnp.inf, logits), cache
    return wrapped

  @dataclasses.dataclass(frozen=True)
  class BenchModel(Seq2SeqModel):
    """`Seq2SeqModel` whose `generate` runs a fixed-length step: cached (the library's) or the uncached baseline."""

    uncached: bool = False

    def decoder(self, params, batch, copies, max_length):
      if not self.uncached:
        step, cache = super().decoder(params, batch, copies, max_length)
        return fixed_length(step), cache
      net = self.network(True)  # decode=False: the teacher-forced decoder
      memory = net.apply({"params": params}, batch["input_ids"], batch["input_mask"],
                         method=Seq2SeqLmNetwork.encode)
      memory, memory_mask = (jnp.repeat(a, copies, axis=0) for a in (memory, batch["input_mask"]))
      rows = memory.shape[0]
      ones = jnp.ones((rows, max_length), jnp.int32)

      def step(tokens, prefix, t):
        prefix = jax.lax.dynamic_update_slice(prefix, tokens[:, None].astype(jnp.int32), (0, t))
        logits = net.apply({"params": params}, prefix, ones, memory, memory_mask,
                           method=Seq2SeqLmNetwork.decode_logits)  # causal: position t sees 0..t only
        return jax.lax.dynamic_index_in_dim(logits, t, axis=1, keepdims=False), prefix

      return fixed_length(step), jnp.full((rows, max_length), PAD_ID, jnp.int32)

    def reorder_cache(self, cache, rows):
      return decoding.gather_beams(cache, rows) if self.uncached else super().reorder_cache(cache, rows)

  dev = jax.devices()[0]
  info = {"platform": dev.platform, "device_kind": dev.device_kind, "device_count": jax.device_count()}
  config = TransformerConfig(vocab_size=shape["vocab_size"], hidden_size=shape["hidden_size"],
                             num_layers=shape["encoder_layers"], num_heads=shape["num_heads"],
                             mlp_dim=shape["mlp_dim"], max_positions=shape["max_positions"], type_vocab_size=1,
                             pad_token_id=PAD_ID, layer_norm_eps=LAYER_NORM_EPS, dtype=args.dtype)
  s2s = Seq2SeqConfig(decoder_layers=shape["decoder_layers"])
  models = {c: BenchModel(config, s2s, eos_id=EOS_ID, uncached=c == "uncached") for c in CACHES}

  t0 = time.perf_counter()
  init_batch = models["cached"].dummy_batch(1, 8, 8)
  params = nn.unbox(jax.jit(models["cached"].init)(jax.random.PRNGKey(args.seed), init_batch))
  params = jax.block_until_ready(params)
  init_s = time.perf_counter() - t0
  n_params = sum(int(x.size) for x in jax.tree_util.tree_leaves(params))

  raw = make_batch(args.batch, args.source_length, shape["vocab_size"], args.seed)
  batch = {k: jnp.asarray(v) for k, v in raw.items()}
  results, outputs = {}, {}
  for search, cache in runs_of(args):
    name = f"{search}/{cache}"
    beams = beams_of(search, args)
    settings = DecodeSettings(beam_size=beams, max_length=L)
    fn = jax.jit(lambda p, b, m=models[cache], s=settings: m.generate(p, b, s))
    progress(f"xtreme-jax {name}: compiling")
    t = time.perf_counter()
    compiled = fn.lower(params, batch).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    out = jax.block_until_ready(compiled(params, batch))
    first_s = compile_s + time.perf_counter() - t
    progress(f"xtreme-jax {name}: compile {compile_s:.2f} s, first call {first_s:.2f} s")
    times = []
    for i in range(args.repeats):
      t = time.perf_counter()
      out = jax.block_until_ready(compiled(params, batch))
      times.append(time.perf_counter() - t)
      progress(f"xtreme-jax {name}: call {i + 1}/{args.repeats}: {times[-1]:.3f} s")
    lengths = np.asarray(out.lengths)
    outputs[name] = np.asarray(out.sequences)[:, 0]
    results[name] = {**timing(compile_s, first_s, times), "beams": beams,
                     "all_outputs_full_length": bool(np.all(lengths == L)),
                     "output_lengths_min_max": [int(lengths.min()), int(lengths.max())]}
  agreement = {}
  for search in SEARCHES:
    a, b = outputs.get(f"{search}/cached"), outputs.get(f"{search}/uncached")
    if a is not None and b is not None:
      agreement[search] = {"sequences_equal": int(np.sum(np.all(a == b, axis=1))), "of": int(a.shape[0]),
                           "tokens_equal_fraction": float(np.mean(a == b))}
  mem = dev.memory_stats() or {}
  return {**info, "results": results, "cached_vs_uncached": agreement, "n_params": n_params, "init_s": init_s,
          "compute_dtype": f"{args.dtype} (params float32)", "batch_fingerprint": batch_fingerprint(raw),
          "peak_rss_gib": peak_rss_gib(), "device_peak_bytes": mem.get("peak_bytes_in_use")}


# -- Hugging Face side ---------------------------------------------------------


def run_torch(args, shape: dict) -> dict:
  import torch
  import transformers
  from transformers import BartConfig, BartForConditionalGeneration, GenerationConfig

  transformers.logging.set_verbosity_error()
  torch.set_num_threads(cpu_count())
  torch.manual_seed(args.seed)
  if args.torch_device == "auto":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
  else:
    device = torch.device(args.torch_device)
  info = {"platform": "gpu" if device.type == "cuda" else device.type,
          "device_kind": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
          "torch_threads": torch.get_num_threads()}
  L = args.length
  config = BartConfig(vocab_size=shape["vocab_size"], d_model=shape["hidden_size"],
                      encoder_layers=shape["encoder_layers"], decoder_layers=shape["decoder_layers"],
                      encoder_attention_heads=shape["num_heads"], decoder_attention_heads=shape["num_heads"],
                      encoder_ffn_dim=shape["mlp_dim"], decoder_ffn_dim=shape["mlp_dim"],
                      max_position_embeddings=shape["max_positions"], activation_function="gelu",
                      dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, scale_embedding=False,
                      pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, decoder_start_token_id=BOS_ID,
                      forced_eos_token_id=EOS_ID, tie_word_embeddings=True, attn_implementation=args.torch_attn)
  model = BartForConditionalGeneration(config).to(device).eval()
  info["attn_implementation"] = model.config._attn_implementation
  n_params = sum(p.numel() for p in model.parameters())

  raw = make_batch(args.batch, args.source_length, shape["vocab_size"], args.seed)
  ids = torch.from_numpy(raw["input_ids"]).long().to(device)
  mask = torch.from_numpy(raw["input_mask"]).long().to(device)
  autocast = args.dtype == "bfloat16"

  def sync():
    if device.type == "cuda":
      torch.cuda.synchronize(device)

  results = {}
  for search, cache in runs_of(args):
    name = f"{search}/{cache}"
    beams = beams_of(search, args)
    gen = GenerationConfig(max_new_tokens=L, min_new_tokens=L, num_beams=beams, do_sample=False,
                           use_cache=cache == "cached", length_penalty=1.0, early_stopping=False,
                           no_repeat_ngram_size=0, num_return_sequences=1, decoder_start_token_id=BOS_ID,
                           bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
                           forced_eos_token_id=EOS_ID)

    def call():
      sync()
      t = time.perf_counter()
      with torch.inference_mode(), torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen)
      sync()
      return time.perf_counter() - t, out

    progress(f"HF {name}: first call")
    first_s, out = call()
    times = []
    for i in range(args.repeats):
      dt, out = call()
      times.append(dt)
      progress(f"HF {name}: call {i + 1}/{args.repeats}: {dt:.3f} s")
    new = out[:, 1:]  # after the decoder start token
    eos_at = [(row == EOS_ID).nonzero() for row in new.cpu()]
    full = new.shape[1] == L and all(len(e) == 1 and int(e[0]) == L - 1 for e in eos_at)
    results[name] = {**timing(None, first_s, times), "beams": beams, "all_outputs_full_length": bool(full),
                     "output_shape": list(out.shape)}
  return {**info, "results": results, "n_params": n_params,
          "compute_dtype": "bfloat16 (torch.autocast)" if autocast else "float32",
          "batch_fingerprint": batch_fingerprint(raw), "peak_rss_gib": peak_rss_gib(),
          "device_peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None}


# -- driver --------------------------------------------------------------------


SIDES = {"jax": run_jax, "torch": run_torch}
SIDE_NAMES = {"jax": "xtreme-jax", "torch": "HF BART"}




def derive(side: dict, args) -> None:
  if "error" in side:
    return
  for r in side["results"].values():
    s = r["median_s"]
    r["tokens_per_s"] = args.batch * args.length / s
    r["hyp_tokens_per_s"] = args.batch * r["beams"] * args.length / s
    r["ms_per_step"] = 1000 * s / args.length


def _fmt(v, spec: str) -> str:
  if v is None or (isinstance(v, float) and not math.isfinite(v)):
    return "-"
  return format(v, spec)


def _ratio(a, b):
  return a / b if a is not None and b else None


def _get(side: dict, name: str, key: str):
  return side.get("results", {}).get(name, {}).get(key) if side and "error" not in side else None


def print_report(machine: dict, setup: dict, results: dict, args) -> None:
  print_sections(machine=machine, setup=setup)
  for side, r in results.items():
    if "error" in r:
      print(f"\n!! {SIDE_NAMES[side]} side failed: {r['error']}")

  beam = f"beam {args.beam}"
  label = {"greedy": "greedy", "beam": beam}
  cols = [("compile s", "compile_s", ".2f"), ("first call s", "first_call_s", ".2f"), ("median s", "median_s", ".3f"),
          ("min s", "min_s", ".3f"), ("max s", "max_s", ".3f"), ("ms/step", "ms_per_step", ".2f"),
          ("tokens/s", "tokens_per_s", ".1f"), ("hyp-tokens/s", "hyp_tokens_per_s", ".1f")]
  width = 30
  print(f"\n== every run: batch {args.batch} x source {args.source_length} -> {args.length} tokens, {args.dtype}, "
        f"median of {args.repeats} timed call(s) after the first ==")
  header = f"{'':<{width}}" + "".join(f"{c:>13}" for c, _, _ in cols)
  print(header)
  print("-" * len(header))
  for side, r in results.items():
    if "error" in r:
      continue
    for name, row in r["results"].items():
      search, cache = name.split("/")
      title = f"{SIDE_NAMES[side]} {label[search]}, {'KV cache' if cache == 'cached' else 'no cache'}"
      print(f"{title:<{width}}" + "".join(f"{_fmt(row.get(key), spec):>13}" for _, key, spec in cols))

  jx, pt = results.get("jax", {}), results.get("torch")
  sides = [("xtreme-jax", jx)] + ([("HF BART", pt)] if pt is not None else [])
  rows = []  # (label, function of a side -> value, format)
  for search in SEARCHES:
    rows.append((f"{label[search]}, KV cache  tok/s", lambda s, n=f"{search}/cached": _get(s, n, "tokens_per_s"),
                 ".1f"))
    rows.append((f"{label[search]}, no cache  tok/s", lambda s, n=f"{search}/uncached": _get(s, n, "tokens_per_s"),
                 ".1f"))
    rows.append(("  cache speedup (x)", lambda s, q=search: _ratio(_get(s, f"{q}/cached", "tokens_per_s"),
                                                                      _get(s, f"{q}/uncached", "tokens_per_s")),
                 ".2f"))
  rows.append((f"{beam} / greedy tok/s (cache)", lambda s: _ratio(_get(s, "beam/cached", "tokens_per_s"),
                                                                  _get(s, "greedy/cached", "tokens_per_s")), ".3f"))
  rows.append((f"{beam} hyp-tok/s (cache)", lambda s: _get(s, "beam/cached", "hyp_tokens_per_s"), ".1f"))
  print(f"\n== side by side: tokens/s = batch * length / median s (best hypothesis; hyp-tok/s counts all "
        f"{args.beam} beams) ==")
  header = f"{'':<{width}}" + "".join(f"{n:>14}" for n, _ in sides) + (f"{'jax/HF':>10}" if pt is not None else "")
  print(header)
  print("-" * len(header))
  for title, fn, spec in rows:
    vals = [fn(s) for _, s in sides]
    if all(v is None for v in vals):  # a run that was skipped (--uncached) on every side
      continue
    line = f"{title:<{width}}" + "".join(f"{_fmt(v, spec):>14}" for v in vals)
    if pt is not None:
      line += f"{_fmt(_ratio(vals[0], vals[1]), '.3f'):>10}"
    print(line)

  print(f"\nEvery search ran all {args.length} steps: EOS gets a logit of -inf before the last position and is "
        "forced at it (xtreme-jax)" + (f"; HF: min_new_tokens = max_new_tokens = {args.length}, forced_eos_token_id."
                                      if pt is not None else "."))
  for name, s in sides:
    if "error" in s:
      continue
    full = all(r["all_outputs_full_length"] for r in s["results"].values())
    print(f"  {name}: every output exactly {args.length} tokens, EOS last: {'yes' if full else 'NO'}")
  for search, a in (jx.get("cached_vs_uncached") or {}).items():
    print(f"  xtreme-jax {label[search]}: cached and uncached outputs equal in {a['sequences_equal']}/{a['of']} "
          f"sequences ({100 * a['tokens_equal_fraction']:.1f}% of tokens; random weights give near-ties, so "
          "float differences may flip a token)")
  for search in SEARCHES:
    sp = _ratio(_get(jx, f"{search}/cached", "tokens_per_s"), _get(jx, f"{search}/uncached", "tokens_per_s"))
    if sp is not None:
      print(f"xtreme-jax KV cache speedup, {label[search]}, length {args.length}: {sp:.1f}x")


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--preset", choices=sorted(PRESETS), default="base",
                 help="base: 768 hidden, 12 heads, FFN 3072, 6 + 6 layers, vocab 32000 (default); tiny: smoke run")
  p.add_argument("--encoder_layers", type=int, help="override the preset's encoder layers (e.g. 12)")
  p.add_argument("--decoder_layers", type=int, help="override the preset's decoder layers")
  p.add_argument("--batch", type=int, help="source sentences per call (default: base 8, tiny 4)")
  p.add_argument("--source_length", type=int, help="source tokens, padded (default: base 64, tiny 32)")
  p.add_argument("--length", type=int, default=128, help="output tokens per hypothesis, EOS included (default 128)")
  p.add_argument("--beam", type=int, default=5, help="beam size of the beam search runs (default 5)")
  p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                 help="compute dtype (xtreme-jax params stay float32; PyTorch uses torch.autocast)")
  p.add_argument("--repeats", type=int, help="timed calls per run after the first (default: base 3, tiny 2)")
  p.add_argument("--uncached", choices=("all", "greedy", "none"), default="all",
                 help="which searches also run without the cache, on both sides (default all; 'greedy' skips "
                      "the slowest run, beam without cache)")
  p.add_argument("--skip_torch", action="store_true", help="run only the xtreme-jax side")
  p.add_argument("--torch_attn", choices=("sdpa", "eager"), default="sdpa",
                 help="transformers attn_implementation (default sdpa)")
  p.add_argument("--torch_device", choices=("auto", "cpu", "cuda"), default="auto")
  p.add_argument("--in_process", action="store_true",
                 help="run both sides in this process instead of one subprocess each")
  p.add_argument("--json", metavar="OUT", help="write all numbers to this JSON file")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--_worker", choices=sorted(SIDES), help=argparse.SUPPRESS)
  p.add_argument("--_result", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  for key, value in PRESET_DEFAULTS[args.preset].items():
    if getattr(args, key) is None:
      setattr(args, key, value)
  if args.repeats < 1 or args.batch < 1 or args.beam < 2:
    p.error("--repeats and --batch must be >= 1, --beam >= 2")
  if args.length < 2 or args.source_length < 1:
    p.error("--length must be >= 2 and --source_length >= 1")
  shape = shape_of(args)
  if max(args.length, args.source_length) > shape["max_positions"]:
    p.error(f"--length / --source_length exceed the preset's {shape['max_positions']} positions")
  if min(shape["encoder_layers"], shape["decoder_layers"]) < 1:
    p.error("--encoder_layers and --decoder_layers must be >= 1")
  return args


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  shape = shape_of(args)

  t_start = time.perf_counter()
  load_before = loadavg()
  results = run_sides(__file__, args, argv, SIDES, shape, SIDE_NAMES)
  if results is None:  # a worker subprocess: its side's results are written
    return 0
  for r in results.values():
    derive(r, args)
  fingerprints = {r["batch_fingerprint"] for r in results.values() if "error" not in r}
  if len(fingerprints) > 1:
    print(f"!! the two sides saw different batches: {fingerprints}")

  import numpy as np
  batch = make_batch(args.batch, args.source_length, shape["vocab_size"], args.seed)
  jx, pt = results["jax"], results.get("torch", {})
  machine = {
      "python": platform.python_version(),
      "os": platform.platform(),
      "cpu count (usable / total)": f"{cpu_count()} / {os.cpu_count()}",
      "jax platform / device kind": (f"{jx.get('platform')} / {jx.get('device_kind')} x{jx.get('device_count')}"
                                     if "error" not in jx else "-"),
      "torch device": (f"{pt.get('platform')} / {pt.get('device_kind')}" if pt and "error" not in pt else "-"),
      "torch threads / attention": (f"{pt.get('torch_threads')} / {pt.get('attn_implementation')}"
                                    if pt and "error" not in pt else "-"),
      "versions": (f"jax {version('jax')} (jaxlib {version('jaxlib')}), flax {version('flax')}, "
                   f"torch {version('torch')}, transformers {version('transformers')}, numpy {np.__version__}"),
      "isolation": "in one process" if args.in_process else "one subprocess per side",
      "load average 1/5/15 min": f"before {load_before}, after {loadavg()} (other work on the machine skews timings)",
  }
  setup = {
      "preset": f"{args.preset} {shape}",
      "source batch": (f"{args.batch} x {args.source_length}, {int(batch['input_mask'].sum())} non-pad tokens, "
                       f"seed {args.seed}; decoder start = BOS"),
      "output": f"exactly {args.length} tokens per hypothesis (EOS last); greedy and beam {args.beam} (fairseq "
                "length penalty alpha 1, n_best 1)",
      "compute dtype": " | ".join(f"{SIDE_NAMES[k]}: {r['compute_dtype']}" for k, r in results.items()
                                  if "error" not in r),
      "params": " | ".join(f"{SIDE_NAMES[k]}: {r['n_params']:,}" for k, r in results.items() if "error" not in r),
      "uncached runs": {"all": "greedy and beam", "greedy": "greedy only", "none": "none"}[args.uncached],
      "timed": "one whole decode call (encoder + search), host inputs already on the device",
      "peak RSS GiB": " | ".join(f"{SIDE_NAMES[k]}: {r['peak_rss_gib']:.2f}" for k, r in results.items()
                                 if "error" not in r)
                      + (" (cumulative, one process)" if args.in_process else ""),
  }
  print_report(machine, setup, results, args)
  print(f"\n(total wall time {time.perf_counter() - t_start:.0f} s)")

  if args.json:
    out = {"machine": machine, "setup": setup, "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
           "shape": shape, "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      json.dump(out, f, indent=2)
    print(f"wrote {args.json}")
  return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
  sys.exit(main())
