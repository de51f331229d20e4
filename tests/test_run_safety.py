"""Runs never lose or mix work: locks, fingerprints, resume overrides, preemption, stale files,
metric writers, best-parameter selection, and settings refused before anything is claimed."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import gin
import jax
import numpy as np
import pytest

from conftest import TINY, RandomMlmSource
from test_training import CrashingSource, _fit, flat, make_trainer
from xtreme_jax import atomic, cli, errors
from xtreme_jax.data import paths
from xtreme_jax.runs import train
from xtreme_jax.runs.train import describe
from xtreme_jax.training import partitioning, writers
from xtreme_jax.training.checkpoints import (FINGERPRINT_VERSION, ForeignRunDirectoryError, RunDirectory,
                                             RunDirectoryInUseError)
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.partitioning import PartitionConfig
from xtreme_jax.training.progress import format_scores, window_means
from xtreme_jax.training.stopping import NonFiniteLossError, Preempted, stop_signals
from xtreme_jax.training.trainer import TrainerConfig

TIER = "integration"  # conftest.py: this file's tier

TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """Parameters of an uninterrupted 10-step run (lr 1e-3, warm-up 2): the reference for exact resumes."""
  state, _ = _fit(tmp_path_factory.mktemp("straight"), RandomMlmSource(), steps=10, every=5)
  return flat(state.params)


def assert_same(params, reference):
  got = flat(params)
  assert got.keys() == reference.keys()
  assert all(np.array_equal(got[k], reference[k]) for k in got)


def metric_lines(run_dir, key="train/loss"):
  with open(os.path.join(run_dir, "metrics.jsonl")) as f:
    return [r for r in map(json.loads, f) if key in r]


# -- the claim: lock, fingerprint, commit ------------------------------------------------

def test_second_process_is_refused_while_the_run_directory_is_locked(tmp_path):
  run = tmp_path / "run"
  holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
      import os, sys
      from xtreme_jax.training import locks
      os.makedirs({str(run)!r}, exist_ok=True)
      locks.acquire({str(run / '.lock')!r}, {str(run)!r})
      print("locked", flush=True)
      sys.stdin.read()
      """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(RunDirectoryInUseError, match=re.escape(f"{run} is in use by pid {holder.pid} ")):
      RunDirectory(str(run), {"a": 1}).lock()
  finally:
    holder.stdin.close()
    holder.wait(timeout=60)
  claim = RunDirectory(str(run), {"a": 1}).lock()  # the holder exited: the kernel dropped its lock
  assert (run / ".lock").read_text().strip() == str(os.getpid())
  claim.release()
  assert not (run / ".lock").exists()


def test_other_configuration_is_refused_naming_the_differing_keys(tmp_path):
  run = str(tmp_path / "run")
  fingerprint = {"optimizer": {"learning_rate": 1e-4, "b1": 0.9}, "train_steps": 800, "model": {"hidden": 32}}
  with RunDirectory(run, fingerprint) as claim:
    assert claim.check() is False
    assert not os.path.exists(claim.path)  # nothing is claimed before start-up succeeded
    claim.commit(0)
  other = {**fingerprint, "optimizer": {"learning_rate": 0.5, "b1": 0.9}, "train_steps": 120}
  with pytest.raises(ForeignRunDirectoryError) as refused, RunDirectory(run, other) as claim:
    claim.check()
  message = str(refused.value)
  assert "\n" not in message and isinstance(refused.value, errors.UserError)
  assert f"{run} holds a run of another configuration; differing keys: optimizer.learning_rate (0.0001 -> 0.5), " \
         "train_steps (800 -> 120)." in message
  with RunDirectory(run, fingerprint) as claim:
    assert claim.check() is True


def test_override_history_is_recorded_and_applied_again(tmp_path):
  run = str(tmp_path / "run")
  fingerprint = {"optimizer": {"learning_rate": 1e-4}, "train_steps": 10}
  lower = {"optimizer": {"learning_rate": 1e-5}}
  with pytest.raises(errors.ConfigError, match="holds no run to resume"), RunDirectory(run, fingerprint, lower) as c:
    c.check()
  assert not os.path.exists(run)  # the failed claim left nothing behind
  with RunDirectory(run, fingerprint) as claim:
    claim.check()
    claim.commit(0)
  with RunDirectory(run, fingerprint, lower) as claim:
    assert claim.check() and claim.new_overrides() == {"optimizer.learning_rate": 1e-5}
    claim.commit(5)
  with RunDirectory(run, fingerprint) as claim:  # the original command again: the recorded override still applies
    assert claim.check() and claim.effective_overrides() == lower and not claim.new_overrides()
    claim.commit(7)
  with open(os.path.join(run, "run_config.json")) as f:
    stored = json.load(f)
  assert stored["optimizer"] == {"learning_rate": 1e-4}
  assert stored["overrides"] == [{"step": 5, "optimizer": {"learning_rate": 1e-5}}]
  with pytest.raises(errors.ConfigError, match=r"\['freeze'\] cannot change when resuming"):
    OptimizerConfig().with_overrides({"freeze": "embeddings/"})


def test_stale_temporary_files_are_removed_when_a_run_directory_is_claimed_again(tmp_path):
  run = tmp_path / "run"
  # Never claimed: lock files, stale temporary files, empty folders and the TPU scripts' uploaded worker logs
  # (tpu_scripts/launch.sh writes them from the start) do not make it foreign.
  (run / "checkpoints" / "3.orbax-checkpoint-tmp-99").mkdir(parents=True)
  (run / "tpu_logs" / "20250102-030405" / "worker0").mkdir(parents=True)
  (run / "tpu_logs" / "20250102-030405" / "worker0" / "run.log").write_text("starting\n")
  (run / ".lock").write_text("12345\n")
  (run / ".summary.json.abcd1234.tmp").write_text("{")
  with RunDirectory(str(run), {"a": 1}) as claim:
    assert claim.check() is False
    claim.commit()
  atomic.write_json(str(run / "summary.json"), {"ok": True})
  (run / ".summary.json.k2j4h5g6.tmp").write_text("{\"half")
  (run / "models" / "xnli" / "checkpoints" / "12.orbax-checkpoint-tmp-1234" / "state").mkdir(parents=True)
  (run / "models" / "xnli" / ".eval.json.zz99yy88.tmp").write_text("")
  (run / "models" / ".encoder.ab_12cd3.tmp" / "params").mkdir(parents=True)  # a killed export-encoder's folder
  (run / "models" / ".encoder.ab_12cd3.tmp" / "params" / "half").write_text("x")
  (run / ".notes").write_text("kept")
  with RunDirectory(str(run), {"a": 1}) as claim:
    assert claim.check() is True
  left = sorted(os.path.relpath(os.path.join(r, n), run) for r, ds, fs in os.walk(run) for n in ds + fs)
  assert left == [".notes", "checkpoints", "models", "models/xnli", "models/xnli/checkpoints", "run_config.json",
                  "summary.json", "tpu_logs", "tpu_logs/20250102-030405", "tpu_logs/20250102-030405/worker0",
                  "tpu_logs/20250102-030405/worker0/run.log"]


@pytest.mark.parametrize("binding,message", [
    ("--gin.TRAIN_STEPS=0", "TrainerConfig.train_steps = 0: expected a positive integer"),
    ("--gin.TRAIN_STEPS=-5", "TrainerConfig.train_steps = -5: expected a positive integer"),
    ("--gin.TRAIN_STEPS='abc'", "TrainerConfig.train_steps = 'abc': expected a positive integer"),
    ("--gin.trainer.TrainerConfig.checkpoint_every=0", "TrainerConfig.checkpoint_every = 0: expected a positive"),
    ("--gin.mlm_source.MlmTextSource.batch_size=6",
     "MlmTextSource.batch_size = 6 is not divisible by the 4 devices of the mesh's data axes"),
])
def test_bad_settings_exit_2_with_one_line_and_claim_nothing(tmp_path, capsys, binding, message):
  run = tmp_path / "run"
  gin.clear_config(clear_constants=True)
  try:
    rc = cli.main(["run", "--gin_file=experiments/pretrain_sample.gin", f"--gin.RUN_DIR='{run}'", binding])
  finally:
    gin.clear_config(clear_constants=True)
  err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
  assert rc == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
  assert not run.exists()  # not claimed: no run_config.json, not even an empty folder


@pytest.mark.parametrize("cls,kw,message", [
    (TrainerConfig, {"log_every": 0}, "TrainerConfig.log_every = 0: expected a positive integer"),
    (TrainerConfig, {"eval_every": -1}, "TrainerConfig.eval_every = -1: expected None or a positive integer"),
    (TrainerConfig, {"train_steps": True}, "TrainerConfig.train_steps = True: expected a positive integer"),
    (TrainerConfig, {"tensorboard": "yes"}, "TrainerConfig.tensorboard = 'yes': expected True, False or 'auto'"),
    (OptimizerConfig, {"learning_rate": 0.0}, "OptimizerConfig.learning_rate = 0.0: expected a number > 0"),
    (OptimizerConfig, {"warmup_ratio": 1.5}, "OptimizerConfig.warmup_ratio = 1.5: expected a number in [0, 1]"),
    (OptimizerConfig, {"first_stage_steps": 3}, "first_stage_trains (a parameter regex) is not set"),
    (PartitionConfig, {"mesh_shape": (0, 1)}, "PartitionConfig.mesh_shape = (0, 1): expected two sizes"),
])
def test_invalid_settings_are_config_errors(cls, kw, message):
  with pytest.raises(errors.ConfigError, match=re.escape(message)):
    cls(**kw)


def test_selection_without_an_evaluation_is_refused_before_compiling(tmp_path):
  trainer = make_trainer(tmp_path, select_metric="accuracy")
  with pytest.raises(errors.ConfigError, match="select_metric = 'accuracy' needs an evaluation"):
    trainer.fit(RandomMlmSource())
  trainer.close()


# -- NaN stop, then resume with a lower learning rate ----------------------------------------

def test_nan_stop_then_resume_with_a_lower_learning_rate(tmp_path, straight):
  run = str(tmp_path / "run")

  def pretrain(lr=1e38, steps=10, every=1, overrides=None):
    return train.pretrain(run, TINY, RandomMlmSource(), optimizer=OptimizerConfig(learning_rate=lr, warmup_steps=2),
                          trainer=TrainerConfig(train_steps=steps, log_every=1, checkpoint_every=every,
                                                progress_bar=False),
                          partition=PartitionConfig("data_parallel", (2, 2)), resume_overrides=overrides)

  # Step 1 has learning rate 0 (warm-up) and is checkpointed; step 2's update norm overflows.
  with pytest.raises(NonFiniteLossError) as stopped:
    pretrain()
  message = str(stopped.value)
  assert "non-finite update_norm=inf at step 2" in message and "last good checkpoint is step 1" in message
  assert "re-run the same command with --gin.RESUME_OVERRIDES=\"{'learning_rate': 1e+37}\"" in message
  assert "\n" not in message and stopped.value.exit_code == 1
  # A change outside the optimizer is still refused, overrides or not.
  with pytest.raises(ForeignRunDirectoryError, match=r"differing keys: train_steps \(10 -> 12\)\. Use"):
    pretrain(steps=12, overrides={"learning_rate": 1e-3})
  summary = pretrain(every=5, overrides={"learning_rate": 1e-3})
  assert summary["resumed_from_step"] == 1 and summary["checkpoints"] == [1, 5, 10]
  logged = {r["step"]: r["train/learning_rate"] for r in metric_lines(run)}
  assert sorted(logged) == list(range(1, 11))  # the stopped run's records after step 1 were dropped
  # Warm-up to 1e-3 over 2 steps, then linear decay to 0 at step 10 (the logged rate is the step's own).
  assert logged[1] == 0.0 and logged[2] == pytest.approx(5e-4) and logged[6] == pytest.approx(6.25e-4)
  with open(os.path.join(run, "run_config.json")) as f:
    stored = json.load(f)
  assert stored["optimizer"]["learning_rate"] == 1e38
  assert stored["overrides"] == [{"step": 1, "optimizer": {"learning_rate": 1e-3}}]
  # The restored optimizer state was kept: step 1 ran at learning rate 0 in both runs, so the
  # resumed run ends exactly where an uninterrupted lr-1e-3 run does.
  state, _ = _fit(run, RandomMlmSource(), steps=10, every=5)  # the finished run, re-entered
  assert_same(state.params, straight)


def test_nan_advice_is_what_a_re_run_accepts(tmp_path, straight):
  run = str(tmp_path / "run")

  def pretrain(lr, warmup=2, overrides=None):
    return train.pretrain(run, TINY, RandomMlmSource(),
                          optimizer=OptimizerConfig(learning_rate=lr, warmup_steps=warmup),
                          trainer=TrainerConfig(train_steps=10, log_every=1, checkpoint_every=5, progress_bar=False),
                          partition=PartitionConfig("data_parallel", (2, 2)), resume_overrides=overrides)

  # A NaN at the first step: start-up failed, nothing was claimed, so the configured rate is what to change.
  with pytest.raises(NonFiniteLossError, match=r"at step 1; stopped\. No checkpoint was written in .*; lower the "
                                               r"learning rate in the configuration \(e\.g\. learning_rate=1e\+37\)"):
    pretrain(1e38, warmup=0)
  assert not os.path.exists(run)
  # A NaN at step 3: the directory was committed after step 1 but holds no checkpoint (every 5 steps). Another
  # configured rate is refused there, so the advice is RESUME_OVERRIDES, which starts the run again from step 0.
  with pytest.raises(NonFiniteLossError) as stopped:
    pretrain(1e12)
  message = str(stopped.value)
  assert f"at step 3; stopped. No checkpoint was written yet in {run}. To start the run again from step 0 " in message
  assert "re-run the same command with --gin.RESUME_OVERRIDES=\"{'learning_rate': 100000000000.0}\"" in message
  with pytest.raises(ForeignRunDirectoryError, match=r"differing keys: optimizer\.learning_rate"):
    pretrain(1e-3)
  summary = pretrain(1e12, overrides={"learning_rate": 1e-3})
  assert summary["resumed_from_step"] == 0 and summary["checkpoints"] == [5, 10]
  assert [r["step"] for r in metric_lines(run)] == list(range(1, 11))  # the stopped run's records were dropped
  with open(os.path.join(run, "run_config.json")) as f:
    assert json.load(f)["overrides"] == [{"step": 0, "optimizer": {"learning_rate": 1e-3}}]
  state, _ = _fit(run, RandomMlmSource(), steps=10, every=5)  # the finished run, re-entered
  assert_same(state.params, straight)  # as if the run had been configured with 1e-3 from the start


# -- preemption ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class SignallingSource(RandomMlmSource):
  """Sends this process `signum` while producing batch `at` (a preemption notice mid-run)."""

  at: int = 6
  signum: int = signal.SIGTERM

  def batch(self, position, host_index=0, host_count=1):
    if position == self.at:
      os.kill(os.getpid(), self.signum)
    return super().batch(position, host_index, host_count)


def test_sigterm_saves_the_current_step_and_the_rerun_ends_identical(tmp_path, straight):
  before = signal.getsignal(signal.SIGTERM)
  with pytest.raises(Preempted) as stopped:
    _fit(tmp_path, SignallingSource(at=6), steps=10, every=5)
  # The batches are built ahead of the steps (TrainerConfig.prefetch): the step that sees the signal is the
  # one running when the feed built batch 6, at most 7.
  stop = int(re.search(r"SIGTERM at step (\d+) after saving", str(stopped.value))[1])
  assert stopped.value.exit_code == 128 + signal.SIGTERM and 1 <= stop <= 7
  assert signal.getsignal(signal.SIGTERM) is before
  assert sorted(os.listdir(tmp_path / "checkpoints"), key=int) == [str(s) for s in sorted({5, stop}) if s <= stop]
  state, summary = _fit(tmp_path, RandomMlmSource(), steps=10, every=5)
  assert summary["resumed_from_step"] == stop
  assert_same(state.params, straight)
  assert [r["step"] for r in metric_lines(tmp_path)] == list(range(1, 11))


@dataclasses.dataclass(frozen=True, eq=False)
class StatefulSignallingSource(SignallingSource):
  """A source that keeps an input state (the position it is asked from, and its slot of the batch)."""

  def input_state(self, position, host_index=0, host_count=1):
    return {"position": position, "slot": [host_index, host_count]}

  def restore_input_state(self, state, position, host_index=0, host_count=1):
    assert state["position"] == position


def test_a_stop_between_planned_checkpoints_saves_the_input_state_of_its_step(tmp_path):
  """The source keeps an input state and the stop falls between planned checkpoints: the state saved with the
  stop's checkpoint is the source's own at that step (taken once the feed has stopped), for this process's slot."""
  with pytest.raises(Preempted) as stopped:
    _fit(tmp_path, StatefulSignallingSource(at=6), steps=10, every=5)
  stop = int(re.search(r"SIGTERM at step (\d+) after saving", str(stopped.value))[1])
  saved = [p for p in (tmp_path / "checkpoints" / str(stop)).rglob("host-0.json")]
  assert len(saved) == 1
  assert json.loads(saved[0].read_text().partition("\n")[2]) == {"position": stop, "slot": [0, 1]}


def test_sigint_is_recorded_then_the_old_handler_returns():
  before = signal.getsignal(signal.SIGINT)
  with stop_signals() as received:
    os.kill(os.getpid(), signal.SIGINT)
    assert received == [signal.SIGINT]
  assert signal.getsignal(signal.SIGINT) is before

  def preempted(argv):
    raise Preempted("stopped by SIGINT at step 3", signal.SIGINT)
  assert errors.run_cli(preempted, []) == 130


@dataclasses.dataclass(frozen=True, eq=False)
class TakingOverSource(RandomMlmSource):
  """While producing batch `at`, another run takes over the lock object `lock` (until this run's renewal saw it)."""

  at: int = 2
  lock: str = ""

  def batch(self, position, host_index=0, host_count=1):
    if position == self.at:
      import time
      from xtreme_jax.training import locks
      deadline = time.time() + 10
      while locks.lost(self.lock) is None and time.time() < deadline:
        atomic.write_text(self.lock, "host new-vm pid 9 since T seen T token n\n")
        time.sleep(0.05)
    return super().batch(position, host_index, host_count)


def test_a_run_whose_lock_another_run_took_over_stops_at_the_next_step_without_saving(tmp_path, monkeypatch):
  """Two live runs never share a directory: once the run's renewal finds its lock object (gs://; here a folder
  stands in for the bucket) taken over, `fit` stops at the next step boundary with the one-line "in use" error
  (exit 75), saves nothing, and release leaves the lock of the run that took it over."""
  import types
  from xtreme_jax import fs
  from xtreme_jax.training import locks
  bucket = types.SimpleNamespace(is_remote=lambda path: True, read_text=fs.read_text, remove=fs.remove,
                                 write_bytes=atomic.write_bytes)  # whole objects, as GCS writes them
  monkeypatch.setattr(locks, "fs", bucket)
  monkeypatch.setattr(locks, "HEARTBEAT_S", 0.05)
  lock = str(tmp_path / ".lock")
  locks.acquire(lock, "gs://b/runs/taken")
  try:
    with pytest.raises(RunDirectoryInUseError) as stopped:
      _fit(tmp_path / "run", TakingOverSource(at=2, lock=lock), steps=10, every=5)
  finally:
    locks.release(lock)
  assert stopped.value.exit_code == 75 and str(stopped.value).startswith(
      f"gs://b/runs/taken is in use by host new-vm pid 9 since T (lock file {lock}): another run took over this "
      "run's lock, so this run stops without saving")
  assert not list((tmp_path / "run" / "checkpoints").glob("[0-9]*"))  # nothing saved after the takeover
  assert fs.read_text(lock).startswith("host new-vm ")  # its lock stays

  def in_use(argv):
    raise stopped.value
  assert errors.run_cli(in_use, []) == 75


# -- metric writers ---------------------------------------------------------------------------

def test_in_memory_run_imports_no_tensorflow_and_writes_metrics_jsonl(tmp_path, straight):
  code = textwrap.dedent(f"""
      import sys
      sys.path.insert(0, {TESTS!r})
      import jax
      from conftest import RandomMlmSource
      jax.config.update("jax_compilation_cache_dir", {jax.config.jax_compilation_cache_dir!r})
      from test_training import _fit
      _fit({str(tmp_path)!r}, RandomMlmSource(), steps=10, every=5)
      print(sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorboard")))
      """)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=TESTS)
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stdout.strip().splitlines()[-1] == "[]"
  assert [r["step"] for r in metric_lines(tmp_path)] == list(range(1, 11))
  assert not (tmp_path / "tensorboard").exists()


def test_tensorboard_events_when_asked(tmp_path, monkeypatch):
  pytest.importorskip("tensorboard")
  writer = writers.make_writers(str(tmp_path), True)
  writer.write_scalars(3, {"train/loss": 1.5})
  writer.close()
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
  from tensorboard.util import tensor_util
  events = EventAccumulator(str(tmp_path / "tensorboard"))
  events.Reload()
  (event,) = events.Tensors("train/loss")
  assert event.step == 3 and float(tensor_util.make_ndarray(event.tensor_proto)) == 1.5
  assert metric_lines(tmp_path) == [{"step": 3, "train/loss": 1.5}]
  monkeypatch.setattr(writers.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(errors.ConfigError, match=re.escape("pip install 'xtreme-jax[tensorboard]'")):
    writers.check_setting(True)


def test_resumed_metrics_drop_the_records_after_the_resume_step(tmp_path):
  path = tmp_path / "metrics.jsonl"
  path.write_text("".join(json.dumps({"step": s, "train/loss": s}) + "\n" for s in range(1, 6)) + '{"step": 6, "tr')
  writer = writers.JsonlWriter(str(path), resume_step=3)
  writer.write_scalars(4, {"train/loss": 40})
  writer.close()
  assert [(r["step"], r["train/loss"]) for r in metric_lines(tmp_path)] == [(1, 1), (2, 2), (3, 3), (4, 40)]
  assert os.listdir(tmp_path) == ["metrics.jsonl"]


# -- checkpoint selection and progress lines ---------------------------------------------------

def test_best_parameters_are_kept_compared_after_resume_and_restored(tmp_path, capsys):
  scores = {2: 0.1, 4: 0.5, 6: 0.45, 8: 0.6, 10: 0.2}
  seen = {}

  def evaluator(steps):
    steps = iter(steps)

    def evaluate(params):
      step = next(steps)
      seen[step] = jax.device_get(params)
      return {"score": scores[step]}
    return evaluate

  kw = dict(steps=10, every=5, eval_every=2, select_metric="score", progress_bar=True)
  with pytest.raises(KeyboardInterrupt):
    _fit(tmp_path, CrashingSource(crash_at=7), evaluator=evaluator([2, 4, 6]), **kw)
  assert os.listdir(tmp_path / "best") == ["4"]
  trainer = make_trainer(tmp_path, **kw)
  try:
    _, summary = trainer.fit(RandomMlmSource(), evaluator=evaluator([6, 8, 10]))
    assert summary["resumed_from_step"] == 5
    # the whole run's evaluations: 2 and 4 (before the checkpoint it resumed from) read back from metrics.jsonl
    assert [(e["step"], e["score"]) for e in summary["eval"]] == [(2, 0.1), (4, 0.5), (6, 0.45), (8, 0.6), (10, 0.2)]
    assert summary["history"][0]["step"] == 1 and summary["first_loss"] == summary["history"][0]["loss"]
    assert summary["best"] == {"step": 8, "metric": "score", "value": 0.6}
    assert os.listdir(tmp_path / "best") == ["8"]
    best = trainer.restore_best_params()
    assert_same(best, flat(seen[8]))
    shardings = partitioning.to_shardings(trainer.param_specs, trainer.mesh)
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(lambda x, s: x.sharding == s, best, shardings))
  finally:
    trainer.close()
  err = capsys.readouterr().err
  assert len(re.findall(r"compiling train step \.\.\. \d+\.\d s", err)) == 2  # once per fit, apart from the bar
  assert "eval @ 4 (" in err and "score=0.5000 (new best score)" in err
  assert "eval @ 6 (" in err and "score=0.4500 (best score 0.5000 @ 4)" in err


def test_a_run_directory_of_another_fingerprint_version_is_refused_in_one_line(tmp_path):
  run = tmp_path / "run"
  with RunDirectory(str(run), {"a": 1}) as claim:
    assert claim.check() is False
    claim.commit()
  assert json.loads((run / "run_config.json").read_text()) == {"fingerprint_version": FINGERPRINT_VERSION, "a": 1}
  with RunDirectory(str(run), {"a": 1}) as claim:
    assert claim.check() is True
  atomic.write_json(str(run / "run_config.json"), {"a": 1})  # written before fingerprints had a version: 1
  with RunDirectory(str(run), {"a": 1}) as claim, pytest.raises(ForeignRunDirectoryError) as refused:
    claim.check()
  assert str(refused.value) == (
      f"{run} was written by an xtreme-jax with run fingerprints of version 1; this one writes version "
      f"{FINGERPRINT_VERSION} and cannot resume it. Use a new RUN_DIR, or finish that run with the xtreme-jax "
      "version that started it")


def test_fingerprints_name_the_bundled_sample_by_its_package_relative_name():
  assert paths.portable(paths.sample_xtreme_dir()) == "<xtreme_jax>/sample_data/xtreme"
  assert paths.portable(paths.SAMPLE_DIR + "/xglue/") == "<xtreme_jax>/sample_data/xglue"
  assert paths.portable(paths.SAMPLE_DIR + "_other/x") == paths.SAMPLE_DIR + "_other/x"  # a sibling: not bundled
  for kept in ("/data/xtreme", "gs://b/sample_data", "sample_spm.model", None):
    assert paths.portable(kept) == kept
  # Every field, defaults included (fingerprint versions replace leaving out fields added later).
  from xtreme_jax.runs import xtreme
  assert describe(OptimizerConfig())["schedule"] == "linear" and describe(xtreme.TaskSettings())["plateau"] is None


def test_an_evaluation_line_folds_the_languages_into_the_lowest_and_highest():
  record = {"step": 40, "loss": 0.5, "dev_accuracy": 0.45, "dev_accuracy/de": 0.4, "dev_accuracy/en": 0.6,
            "dev_accuracy/sw": 0.35}
  assert format_scores(record) == ("loss=0.5000, dev_accuracy=0.4500 (lowest sw 0.3500, highest en 0.6000 of 3)")
  assert format_scores({"step": 1, "f1": 0.25, "em/x": 0.1}) == "f1=0.2500, em/x=0.1000"  # no parent: as it is


@dataclasses.dataclass(frozen=True, eq=False)
class _MetricsOnDisk(RandomMlmSource):
  """Records, when asked for batch `at`, the steps metrics.jsonl holds on disk at that moment."""

  run_dir: str = ""
  at: int = -1
  seen: list = dataclasses.field(default_factory=list)

  def batch(self, position, host_index=0, host_count=1):
    if position == self.at:
      with open(os.path.join(self.run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        self.seen.extend(json.loads(line)["step"] for line in f)
    return super().batch(position, host_index, host_count)


def test_metrics_reach_the_disk_before_each_checkpoint(tmp_path):
  """A kill -9 right after a checkpoint commits loses no metrics line of the steps it holds (the resumed run
  cuts the file back to the checkpoint and never writes them again)."""
  source = _MetricsOnDisk(run_dir=str(tmp_path), at=7)
  _fit(tmp_path, source, steps=8, every=5, prefetch=0)
  assert source.seen[:5] == [1, 2, 3, 4, 5]


def test_logged_losses_are_window_means_each_objective_over_the_steps_that_trained_it():
  """VECO's batches alternate monolingual (no TLM: tlm_weight 0) and bilingual: the logged values do not."""
  mono = {"step": 1, "loss": 6.0, "weight": 10.0, "is_loss": 3.0, "tlm_loss": 0.0, "tlm_weight": 0.0}
  bi = {"step": 2, "loss": 9.0, "weight": 30.0, "is_loss": 4.0, "tlm_loss": 5.0, "tlm_weight": 20.0}
  assert window_means([mono, bi]) == pytest.approx(
      {"mean_loss": (6 * 10 + 9 * 30) / 40, "mean_is_loss": (3 * 10 + 4 * 30) / 40, "mean_tlm_loss": 5.0})
  assert window_means([mono]) == pytest.approx({"mean_loss": 6.0, "mean_is_loss": 3.0})  # no TLM trained: none


def test_the_initial_evaluation_is_a_baseline_written_once_the_run_is_committed(tmp_path):
  """eval_at_start: step 0 is evaluated and recorded, never kept as the best (the untrained model), and reaches
  metrics.jsonl only after the first step committed the directory."""
  scores = iter([0.9, 0.2, 0.4])  # the untrained parameters score highest
  _, summary = _fit(tmp_path, RandomMlmSource(), steps=4, every=4, eval_every=2, select_metric="score",
                    eval_at_start=True, evaluator=lambda params: {"score": next(scores)})
  assert [(e["step"], e["score"]) for e in summary["eval"]] == [(0, 0.9), (2, 0.2), (4, 0.4)]
  assert summary["best"] == {"step": 4, "metric": "score", "value": 0.4}
  steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert steps[:2] == [0, 1]
