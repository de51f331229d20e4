"""Test-wide setup: 4 simulated CPU devices, no network, small shared fixtures."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TFDS_DATA_DIR", "/nonexistent-tfds-data-dir")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Tiny shapes: XLA's optimisation passes cost more compile time than they save
# (about 30% less compile time; the numbers tested do not depend on them).
# Subprocesses started by tests inherit it.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# XLA:CPU's older elemental emitters compile tiny fusions in about 40% less CPU time than the fusion emitters
# (measured on tests/test_networks.py, test_decoding.py and test_seq2seq.py: 66 -> 41 s of CPU).
os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                "--xla_cpu_use_fusion_emitters=false"]))

# Compiled bytecode is kept (in the gitignored __pycache__ folders) even where the environment says
# PYTHONDONTWRITEBYTECODE: every worker and every subprocess a test starts would otherwise compile the package and
# the test modules from source again (collection: about 16 -> 11 s of CPU per process).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# The workers and subprocesses run without column positions in tracebacks: on CPython 3.11 formatting one parses
# source with `ast`, and a background thread's traceback (orbax logs one when a run directory it writes into is
# removed) racing the main thread's own `ast` use (gin's parser) raised "AST constructor recursion depth mismatch"
# (CPython gh-106905).
os.environ.setdefault("PYTHONNODEBUGRANGES", "1")

import jax  # noqa: E402

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

# Four devices cover every mesh the tests use ((2, 2): data x model) for less CPU than eight (six compile-heavy
# test files: 288 -> 210 s of CPU).
jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_platforms", "cpu")
# Many tests build a Trainer for the same tiny model: a per-session persistent
# compilation cache turns every repeated compile into a cache hit. The session's first process (pytest-xdist's
# controller, or the one process of `-n 0`) makes it and removes it at exit; the workers it starts inherit it,
# so a program compiled by one worker is a hit in the other.
_CACHE_DIR = os.environ.get("XTREME_JAX_TEST_XLA_CACHE")
if not _CACHE_DIR or not os.path.isdir(_CACHE_DIR):
  _CACHE_DIR = tempfile.mkdtemp(prefix="xtreme_jax_test_xla_cache_")
  os.environ["XTREME_JAX_TEST_XLA_CACHE"] = _CACHE_DIR
  atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)  # per session: nothing left in /tmp
jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
# The CLI keeps a cache JAX was given (xtreme_jax.compilation_cache); subprocesses share this one.
os.environ.pop("XTREME_JAX_CACHE_DIR", None)
os.environ.update(JAX_COMPILATION_CACHE_DIR=_CACHE_DIR, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                  JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

import dataclasses  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from xtreme_jax.data.features.sources import IndexedSource  # noqa: E402
from xtreme_jax.networks.config import TransformerConfig  # noqa: E402

TINY = TransformerConfig(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, mlp_dim=64,
                         max_positions=24, type_vocab_size=2, dropout_rate=0.1, attention_dropout_rate=0.1)


@dataclasses.dataclass(frozen=True, eq=False)
class RandomMlmSource(IndexedSource):
  """Synthetic MLM examples: random ids 5..63, random length, 3 masked slots."""

  batch_size: int = 8
  seed: int = 0
  seq_len: int = 16
  size: int = 40
  weight_keys = ("masked_weights",)

  @property
  def num_examples(self) -> int:
    return self.size

  def example(self, index, rng):
    r = np.random.default_rng((123, index))
    n = int(r.integers(6, self.seq_len + 1))
    ids = np.zeros(self.seq_len, np.int32)
    ids[:n] = r.integers(5, 64, n)
    pos = np.sort(rng.choice(n, 3, replace=False)).astype(np.int32)
    masked = ids.copy()
    masked[pos] = 4
    return {"input_ids": masked, "input_mask": (ids > 0).astype(np.int32),
            "token_type_ids": np.zeros_like(ids), "masked_positions": pos, "masked_ids": ids[pos],
            "masked_weights": np.ones(3, np.float32)}


@pytest.fixture
def tiny_config():
  return TINY


@pytest.fixture
def mlm_source():
  return RandomMlmSource()


# -- tiers -------------------------------------------------------------------
# Every test is in one tier, selected with `-m`: `unit` (no compiled model, seconds), `integration` (models,
# trainers, pipelines, subprocesses) or `e2e` (a whole experiment run). A file declares its tier as
# `TIER = "unit" | "integration"`; a test marked `@pytest.mark.e2e` is e2e whatever its file says. A test marked
# `@pytest.mark.samples` (tests/test_sample_runs.py: every bundled sample run in full, about 14 minutes) is in no
# tier and left out of every run whose `-m` does not name it (`-m "not e2e"` too): `-m samples` runs it.
TIERS = ("unit", "integration", "e2e")


# Files in the order of their cost (seconds of tests on one worker, `tests/file_costs.json`; a file not listed
# counts as 1 s), costliest first: xdist hands whole files to the workers in this order (`--dist loadfile
# --no-loadscope-reorder`), so the last files to start are short ones and the workers finish together (its own
# order, by number of tests, started the few-test whole runs last). Refresh the table from a run with
# `--durations=0` when files change much; a stale table only changes the order.
with open(os.path.join(os.path.dirname(__file__), "file_costs.json")) as _f:
  FILE_COSTS = json.load(_f)


def pytest_collection_modifyitems(config, items):
  if "samples" not in (config.getoption("markexpr") or ""):
    left_out = [item for item in items if item.get_closest_marker("samples") is not None]
    if left_out:
      config.hook.pytest_deselected(items=left_out)
      items[:] = [item for item in items if item.get_closest_marker("samples") is None]
  items.sort(key=lambda item: -FILE_COSTS.get(os.path.basename(str(item.fspath)), 1))  # stable: file order kept
  for item in items:
    if item.get_closest_marker("e2e") is not None or item.get_closest_marker("samples") is not None:
      continue
    tier = getattr(item.module, "TIER", None)
    if tier not in TIERS[:2]:
      raise pytest.UsageError(f"{item.fspath}: TIER = {tier!r}; declare TIER = 'unit' or 'integration' "
                              "(tests/conftest.py)")
    item.add_marker(tier)
