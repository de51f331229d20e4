"""benchmarks/device_check.py, the prepared GPU check, kept from rotting: its `--smoke` run on CPU (tiny shapes,
every section, both frameworks, torch.compile included, the first train row profiled) in a subprocess where seqio,
TensorFlow, gin and clu cannot be imported, as on the GPU machine; its selection flags and trace parsing; and its
model shapes against the gin presets."""

import gzip
import json
import math
import os
import re
import subprocess
import sys

TIER = "integration"  # conftest.py: this file's tier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "device_check.py")

# Loaded first through PYTHONPATH in every process of the run (the workers too): the packages the GPU machine
# lacks behave as not installed (import fails, importlib.util.find_spec gives None, no distribution metadata).
BLOCKER = '''
import importlib.abc, importlib.metadata, importlib.util, re, sys

BLOCKED = {"seqio", "tensorflow", "tensorflow_datasets", "tensorflow_text", "gin", "clu"}
DISTRIBUTIONS = re.compile(r"(seqio|tensorflow|gin[-_]config|clu)([-_].*)?$", re.I)


def _blocked(name):
  return name.partition(".")[0] in BLOCKED


class _Blocker(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if _blocked(name):
      raise ModuleNotFoundError(f"No module named {name!r} (not on the GPU machine)", name=name)
    return None


sys.meta_path.insert(0, _Blocker())
_find_spec, _distribution = importlib.util.find_spec, importlib.metadata.distribution


def find_spec(name, package=None):
  return None if _blocked(importlib.util.resolve_name(name, package)) else _find_spec(name, package)


def distribution(name):
  if DISTRIBUTIONS.match(name):
    raise importlib.metadata.PackageNotFoundError(name)
  return _distribution(name)


importlib.util.find_spec, importlib.metadata.distribution = find_spec, distribution
'''

# What each side must report, by section (finite and positive).
NUMBERS = {"train": ("ms", "examples_per_s", "mfu"), "predict": ("ms", "examples_per_s", "mfu"),
           "compile": ("compile_s", "startup_s"), "mining": ("ms", "tflops"), "decode": ("ms", "tokens_per_s")}
SIDES = {"train": ("xtreme_jax", "hf_eager", "torch_compile"), "predict": ("xtreme_jax", "hf_eager", "torch_compile"),
         "compile": ("cold", "warm"), "mining": ("xtreme_jax", "torch"), "decode": ("xtreme_jax", "hf_generate")}


def _import_device_check():
  sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
  try:
    import device_check
  finally:
    sys.path.pop(0)
  return device_check


def test_smoke_runs_every_section_without_seqio_tensorflow_gin_clu(tmp_path):
  site = tmp_path / "site"
  site.mkdir()
  (site / "sitecustomize.py").write_text(BLOCKER)
  out, prof_dir = tmp_path / "device_check.json", tmp_path / "profile"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), ROOT]), PYTHONUNBUFFERED="1")
  proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--json", str(out), "--profile", str(prof_dir),
                         "--label", "smoke test", "--attention", "auto"], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  lines = proc.stdout.strip().splitlines()
  assert lines[-1] == f"wrote {out}", lines[-5:]  # the table comes last
  header = next(line for line in lines if line.startswith("== device check (SMOKE"))
  assert "attention auto, label: smoke test" in header, header
  assert any(line.startswith("train flops/step = 6*N*batch*seq") for line in lines)

  report = json.loads(out.read_text())
  assert report["smoke"] and not report["skipped"]
  assert report["label"] == "smoke test" and report["attention_implementation"] == "auto"
  # --profile: the first train row, every side, after its timed steps.
  row = "mbert_base 4x16 adrop 0.1"
  assert report["profile_rows"] == [row]
  assert set(report["profiles"]) == {f"train/{row}/{side}" for side in SIDES["train"]}, report["profiles"].keys()
  for side in SIDES["train"]:
    prof = report["profiles"][f"train/{row}/{side}"]
    assert "top" in prof, (side, prof)
    assert prof["n_kernels"] > 0 and prof["total_us_per_step"] > 0 and prof["busy_us_per_step"] > 0, (side, prof)
    assert 0 < len(prof["top"]) <= 25 and all(k["us_per_step"] >= 0 and k["count"] > 0 for k in prof["top"])
    assert abs(sum(k["share"] for k in prof["top"]) - 1) < 1e-6 or len(prof["top"]) == 25
    assert any(line.startswith(f"profile train/{row}/{side}: ") for line in lines), side
    assert "profile" not in report["sections"]["train"][row]["sides"][side]
  assert "host XLA ops" in report["profiles"][f"train/{row}/xtreme_jax"]["source"]
  summary = json.loads((prof_dir / "profile_summary.json").read_text())
  assert summary["profiles"] == report["profiles"] and summary["label"] == "smoke test"
  with gzip.open(prof_dir / "mbert_base_4x16_adrop_0.1_xtreme_jax_hlo.txt.gz", "rt") as f:
    assert "HloModule" in f.read()
  with gzip.open(prof_dir / "mbert_base_4x16_adrop_0.1_xtreme_jax_trace.json.gz", "rt") as f:
    assert json.load(f)["traceEvents"]
  assert set(report["sections"]) == set(SIDES)
  assert {"jax", "jaxlib", "torch", "transformers", "python"} <= set(report["versions"])
  for section, rows in report["sections"].items():
    assert rows, section
    for name, row in rows.items():
      for side in SIDES[section]:
        r = row["sides"][side]
        assert "error" not in r and "skipped" not in r, (section, name, side, r.get("error"), r.get("traceback"))
        for key in NUMBERS[section]:
          assert isinstance(r[key], (int, float)) and math.isfinite(r[key]) and r[key] > 0, (section, name, side, key)
      if section == "train":
        for side in SIDES[section]:
          assert all(math.isfinite(x) for x in row["sides"][side]["losses"])
        assert row["sides"]["torch_compile"]["optimizer"] == "AdamW fused"
      if section in ("train", "predict", "mining", "decode"):
        assert set(row["speedup"]) == set(SIDES[section][1:]), row["speedup"]
  compile_row = next(iter(report["sections"]["compile"].values()))["sides"]
  assert compile_row["cold"]["cache_was_empty"] and compile_row["cold"]["first_unit_of_process"]
  assert compile_row["warm"]["cache_hits"] > 0 and compile_row["warm"]["cache_misses"] == 0
  mining = next(iter(report["sections"]["mining"].values()))
  assert mining["top1_equal_fraction"] >= 0.99
  decode = next(iter(report["sections"]["decode"].values()))
  assert all(decode["sides"][side]["all_full_length"] for side in SIDES["decode"])


def test_unknown_row_is_one_line_and_exit_2():
  """Checked before anything starts: no worker, no traceback, the valid names listed."""
  proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--rows", "mbert_base 4x16 adrop 0.1,nope"], cwd=ROOT,
                        env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2, proc.stdout + proc.stderr
  assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
  assert "'nope'" in proc.stderr and "'mbert_base 4x16 adrop 0.1'" in proc.stderr and "'xlmr_large 2x32'" in proc.stderr
  assert "Traceback" not in proc.stderr


def test_selection_plans_only_the_named_rows_and_sides():
  dc = _import_device_check()
  args = dc.parse_args(["--smoke", "--rows", "xlmr_large 2x32 adrop 0", "--sides", "xtreme_jax,hf_eager",
                        "--profile", "/tmp/unused", "--attention", "xla"])
  assert args.attention == "xla" and args.profile_rows == ["xlmr_large 2x32 adrop 0"]
  units = {u["id"]: u for u in dc.plan(args)}
  train = sorted(i for i in units if i.startswith(("train/", "predict/")))
  assert train == ["train/xlmr_large 2x32 adrop 0/hf_eager", "train/xlmr_large 2x32 adrop 0/xtreme_jax"], train
  assert all(units[i].get("profile") for i in train)
  # The first train row is not run: the cold compile gets a unit of its own (the JAX worker's first).
  first_jax = next(u for u in dc.plan(args) if u["worker"] == "jax")
  assert first_jax["id"] == "compile/mbert_base 4x16/cold", first_jax["id"]
  assert {u["section"] for u in units.values()} == {"train", "compile", "mining", "decode"}
  # Without the new flags: every row and side, nothing profiled, the first train row the cold compile.
  default = dc.plan(dc.parse_args(["--smoke"]))
  assert len(default) == 17 and not any(u.get("profile") for u in default)
  assert default[0]["id"] == "train/mbert_base 4x16 adrop 0.1/xtreme_jax" and default[0]["cold_row"]


def test_gpu_trace_sums_only_the_stream_kernels():
  """A GPU trace's kernels sit on the device process's stream tracks; XProf's derived lines and the host's XLA op
  events (their launches) must not be summed. Nested events count once (the innermost)."""
  dc = _import_device_check()
  meta = lambda pid, name, tid=None: {"ph": "M", "pid": pid, "name": "thread_name" if tid is not None  # noqa: E731
                                      else "process_name", **({"tid": tid} if tid is not None else {}),
                                      "args": {"name": name}}
  x = lambda pid, tid, name, ts, dur, **args: {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts,  # noqa: E731
                                               "dur": dur, "args": args}
  trace = {"traceEvents": [
      meta(1, "/host:CPU"), meta(1, "python", 0), meta(2, "/device:GPU:0"), meta(2, "Stream #13(Compute)", 13),
      meta(2, "Stream #14(MemcpyD2D)", 14), meta(2, "XLA Ops", 99), meta(2, "XLA Modules", 98),
      x(1, 0, "loop_add_fusion", 0, 50, hlo_op="loop_add_fusion"),
      x(2, 13, "loop_add_fusion", 0, 10, hlo_op="loop_add_fusion"),
      x(2, 13, "nvjet_gemm", 10, 30, hlo_op="custom-call.1"), x(2, 13, "loop_add_fusion", 40, 10),
      x(2, 14, "MemcpyD2D", 45, 10), x(2, 99, "loop_add_fusion", 0, 10), x(2, 98, "jit_train_step", 0, 60)]}
  records, source = dc.trace_records(trace)
  assert "/device:GPU:0" in source
  assert sorted((r[2], r[4]) for r in records) == [("MemcpyD2D", 10.0), ("loop_add_fusion", 10.0),
                                                    ("loop_add_fusion", 10.0), ("nvjet_gemm", 30.0)]
  assert dc.busy_us([(r[3], r[3] + r[4]) for r in records]) == 55.0
  # CPU: no device process, the host events carrying an hlo_op; a while loop's thunk around its body's drops out.
  host = {"traceEvents": [meta(1, "/host:CPU"), x(1, 0, "while.1", 0, 100, hlo_op="while.1"),
                          x(1, 0, "fusion.2", 10, 40, hlo_op="fusion.2"), x(1, 0, "end: fusion.2", 50, 1),
                          x(1, 0, "PjitFunction", 0, 200)]}
  records, source = dc.trace_records(host)
  assert [r[2] for r in records] == ["fusion.2"] and "host" in source


def _gin_fields(path: str) -> dict:
  """`key = value` lines of the TransformerConfig block of a model preset."""
  fields = {}
  with open(path) as f:
    for line in f:
      m = re.match(r"\s+(\w+) = (.+)$", line)
      if m:
        fields[m.group(1)] = m.group(2).strip()
  return fields


def test_model_shapes_match_the_gin_presets():
  """device_check.py cannot read gin (not on the GPU machine), so it spells the presets' shapes out."""
  import dataclasses

  from xtreme_jax.networks.config import TransformerConfig

  defaults = {f.name: str(f.default) for f in dataclasses.fields(TransformerConfig)}
  device_check = _import_device_check()
  for name, spec in device_check.MODELS.items():
    gin = _gin_fields(os.path.join(ROOT, "gin_configs", "models", f"{name}.gin"))
    for key, value in spec.items():
      expected = gin.get(key, defaults[key]).strip("'\"")
      if isinstance(value, bool):
        assert str(value) == expected, (name, key)
      elif isinstance(value, (int, float)):
        assert value == type(value)(float(expected)), (name, key, value, expected)
      else:
        assert value == expected, (name, key)
