"""benchmarks/device_check.py, the prepared GPU check, kept from rotting: its `--smoke` run on CPU (tiny shapes,
every section, both frameworks, torch.compile included) in a subprocess where seqio, TensorFlow, gin and clu
cannot be imported, as on the GPU machine; and its model shapes against the gin presets."""

import json
import math
import os
import re
import subprocess
import sys

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


def test_smoke_runs_every_section_without_seqio_tensorflow_gin_clu(tmp_path):
  site = tmp_path / "site"
  site.mkdir()
  (site / "sitecustomize.py").write_text(BLOCKER)
  out = tmp_path / "device_check.json"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), ROOT]), PYTHONUNBUFFERED="1")
  proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--json", str(out)], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  lines = proc.stdout.strip().splitlines()
  assert lines[-1] == f"wrote {out}", lines[-5:]  # the table comes last
  assert any(line.startswith("== device check (SMOKE") for line in lines)
  assert any(line.startswith("train flops/step = 6*N*batch*seq") for line in lines)

  report = json.loads(out.read_text())
  assert report["smoke"] and not report["skipped"]
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
  sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
  try:
    import device_check
  finally:
    sys.path.pop(0)
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
