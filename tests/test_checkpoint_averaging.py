"""Checkpoint averaging: the hand mean of known checkpoints, the readers, one-line errors, the lock, the CLI."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from xtreme_jax import cli, errors
from xtreme_jax.training import averaging
from xtreme_jax.training.checkpoints import Checkpointer, RunDirectoryInUseError
from xtreme_jax.training.steps import TrainState

TIER = "unit"  # conftest.py: this file's tier

X = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([1.0, 0.5, -1.0], np.float32)
SCALE = {1: 1.0, 2: 2.0, 3: 4.0, 4: 8.0}  # step -> scale of its parameters


def params_at(step: int, kernel_shape=(2, 3), extra: bool = False) -> dict:
  """kernel = scale * X (float32), bias = scale * B (bfloat16), count = [step] (int32: not averaged)."""
  scale = SCALE.get(step, 16.0)
  kernel = np.resize(X, kernel_shape) * scale
  params = {"dense": {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(B * scale, jnp.bfloat16)},
            "count": jnp.asarray([step], jnp.int32)}
  if extra:
    params["dense"]["extra"] = jnp.zeros(2)
  return params


def save(run_dir, step: int, **kw) -> None:
  """A checkpoint through the Trainer's own save path (Checkpointer, a TrainState with optimizer moments)."""
  params = params_at(step, **kw)
  state = TrainState(step=jnp.asarray(step, jnp.int32), params=params,
                     opt_state={"mu": jax.tree_util.tree_map(jnp.ones_like, params)}, rng=jax.random.PRNGKey(step))
  checkpointer = Checkpointer(os.path.join(run_dir, "checkpoints"), every=1, keep=10)
  checkpointer.save(step, state, data_position=step, force=True)
  checkpointer.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory):
  run = tmp_path_factory.mktemp("template") / "run"
  for step in SCALE:
    save(str(run), step)
  return run


@pytest.fixture
def run(template, tmp_path):
  """A fresh copy of a run directory holding checkpoints 1, 2, 3, 4."""
  return str(shutil.copytree(template, tmp_path / "run"))


def expected(sum_of_scales: float, count: int) -> dict:
  """The mean as averaging computes it: float32 sum (exact here), divided by the count, in the leaf's dtype."""
  return {"kernel": (X * np.float32(sum_of_scales)) / np.float32(count),
          "bias": ((B * np.float32(sum_of_scales)) / np.float32(count)).astype(ml_dtypes.bfloat16)}


def assert_mean(params, sum_of_scales, count, newest):
  want = expected(sum_of_scales, count)
  assert params["dense"]["kernel"].dtype == np.float32 and params["dense"]["bias"].dtype == ml_dtypes.bfloat16
  np.testing.assert_array_equal(np.asarray(params["dense"]["kernel"]), want["kernel"])
  np.testing.assert_array_equal(np.asarray(params["dense"]["bias"]), want["bias"])
  np.testing.assert_array_equal(np.asarray(params["count"]), [newest])  # kept from the newest


def one_error_line(capsys, *argv, code: int = 2) -> str:
  assert cli.main(["average-checkpoints", *map(str, argv)]) == code
  captured = capsys.readouterr()
  lines = captured.err.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
  return lines[0]


# -- the mean -----------------------------------------------------------------------

def test_average_of_the_last_3_then_2_is_the_hand_mean(run):
  done = averaging.average_checkpoints(run, last=3)
  assert done == averaging.Averaged(os.path.join(run, "averaged", "4"), 4, (2, 3, 4), ("count",), written=True)
  assert averaging.averaged_meta(run) == {"step": 4, "steps": [2, 3, 4], "last": 3, "kept_from_newest": ["count"]}
  assert_mean(averaging.restore_averaged(run), 2 + 4 + 8, 3, newest=4)  # kernel 14/3 * X
  assert not os.path.exists(os.path.join(run, ".lock"))  # the lock was released

  again = averaging.average_checkpoints(run, last=3)  # the same steps: nothing written
  assert again.written is False and again.steps == (2, 3, 4)

  done = averaging.average_checkpoints(run, last=2)  # same newest step, other steps: replaced
  assert done.steps == (3, 4) and done.written
  assert_mean(averaging.restore_averaged(run), 4 + 8, 2, newest=4)  # kernel 6 * X
  assert averaging.averaged_meta(run)["steps"] == [3, 4]
  assert sorted(os.listdir(os.path.join(run, "averaged"))) == ["4"]
  assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == ["1", "2", "3", "4"]  # the sources stay


def test_allow_fewer_averages_every_checkpoint(run):
  done = averaging.average_checkpoints(run, last=10, allow_fewer=True)
  assert done.steps == (1, 2, 3, 4)
  assert_mean(averaging.restore_averaged(run), 1 + 2 + 4 + 8, 4, newest=4)


# -- readers ------------------------------------------------------------------------

def test_readers_place_the_average_and_fall_back_to_the_newest_checkpoint(run, caplog):
  mesh = jax.make_mesh((len(jax.devices()),), ("data",))
  abstract = {"dense": {"kernel": jax.ShapeDtypeStruct((2, 3), jnp.float32, sharding=NamedSharding(mesh, P())),
                        "bias": jax.ShapeDtypeStruct((3,), jnp.float32, sharding=NamedSharding(mesh, P()))},
              "count": jax.ShapeDtypeStruct((1,), jnp.int32, sharding=NamedSharding(mesh, P()))}
  assert averaging.restore_averaged(run, abstract) is None and averaging.averaged_meta(run) is None

  params, source = averaging.restore_averaged_or_latest(run, abstract)  # no average yet: checkpoint 4
  assert source == {"source": "checkpoint", "step": 4}
  np.testing.assert_array_equal(np.asarray(params["dense"]["kernel"]), X * 8)
  assert params["dense"]["kernel"].sharding == abstract["dense"]["kernel"].sharding

  averaging.average_checkpoints(run, last=2)
  params, source = averaging.restore_averaged_or_latest(run, abstract)
  assert source == {"source": "averaged", "step": 4, "steps": [3, 4]}
  assert isinstance(params["dense"]["bias"], jax.Array) and params["dense"]["bias"].dtype == jnp.float32
  np.testing.assert_array_equal(np.asarray(params["dense"]["kernel"]), X * 6)
  np.testing.assert_array_equal(np.asarray(params["dense"]["bias"]), B * 6)  # bf16 6 * B, exact in float32
  host = averaging.restore_averaged(run, {"dense": {"kernel": np.zeros((2, 3), np.float32),
                                                    "bias": np.zeros(3, np.float32)}, "count": np.zeros(1, np.int32)})
  assert isinstance(host["dense"]["kernel"], np.ndarray)
  np.testing.assert_array_equal(host["dense"]["kernel"], X * 6)

  wrong = {**abstract, "dense": {**abstract["dense"], "kernel": jax.ShapeDtypeStruct((3, 3), jnp.float32)}}
  with pytest.raises(errors.DataError, match=re.escape(
      "does not fit the model's parameters; first differing key dense/kernel: shape (2, 3) float32 stored, "
      "shape (3, 3) float32 expected")):
    averaging.restore_averaged(run, wrong)

  save(run, 5)  # the run trained on: the average no longer covers the newest checkpoint
  params, source = averaging.restore_averaged_or_latest(run)
  assert source == {"source": "checkpoint", "step": 5}
  np.testing.assert_array_equal(params["dense"]["kernel"], X * 16)
  assert "is older than checkpoint 5" in caplog.text


def test_an_interrupted_average_is_no_average_and_is_cleaned_up(run):
  stale = os.path.join(run, "averaged", "4.orbax-checkpoint-tmp-1234567")
  os.makedirs(os.path.join(stale, "params"))  # orbax's folder of a write killed mid-way
  assert averaging.averaged_meta(run) is None and averaging.restore_averaged(run) is None
  averaging.average_checkpoints(run, last=2)
  assert sorted(os.listdir(os.path.join(run, "averaged"))) == ["4"]


# -- refusals -----------------------------------------------------------------------

def test_too_few_and_no_checkpoints_are_one_line_errors(run, tmp_path, capsys):
  with pytest.raises(errors.ConfigError) as refused:
    averaging.average_checkpoints(run, last=10)
  assert str(refused.value) == (
      f"averaging the last 10 checkpoints needs 10, but {run}/checkpoints holds 4 (steps 1, 2, 3, 4); pass "
      "--allow-fewer (allow_fewer=True) to average these 4, or keep more checkpoints (TrainerConfig.keep_checkpoints)")
  assert not os.path.exists(os.path.join(run, "averaged"))
  assert one_error_line(capsys, run) == f"error: {refused.value}"  # --last defaults to 10

  empty = tmp_path / "empty"
  (empty / "checkpoints").mkdir(parents=True)
  assert one_error_line(capsys, empty, "--last", 2) == \
      f"error: {empty}/checkpoints holds no checkpoint; nothing to average"
  with pytest.raises(errors.MissingInputError, match="holds no checkpoint; nothing to average"):
    averaging.average_checkpoints(str(tmp_path / "empty"), last=2)
  assert one_error_line(capsys, tmp_path / "missing") == \
      f"error: {tmp_path / 'missing'} does not exist; expected a run directory holding checkpoints/"
  assert one_error_line(capsys, run, "--last", 0) == \
      "error: last = 0: expected a positive number of checkpoints to average"
  assert one_error_line(capsys, run, "--last", "x").startswith(
      "error: xtreme-jax average-checkpoints: argument --last: invalid int value: 'x'")
  with pytest.raises(errors.MissingInputError, match="holds no checkpoint and no averaged parameters"):
    averaging.restore_averaged_or_latest(str(empty))


@pytest.mark.parametrize("kw,difference", [
    ({"kernel_shape": (3, 3)}, "dense/kernel: shape (3, 3) float32 at step 5, shape (2, 3) float32 at step 4"),
    ({"extra": True}, "dense/extra: shape (2,) float32 at step 5, absent at step 4"),
])
def test_differing_parameter_trees_name_the_first_differing_key(run, kw, difference):
  save(run, 5, **kw)
  with pytest.raises(errors.DataError) as refused:
    averaging.average_checkpoints(run, last=2)
  assert str(refused.value) == (f"checkpoints 5 and 4 in {run}/checkpoints have different parameter trees; first "
                                f"differing key {difference}")
  assert not os.path.exists(os.path.join(run, "averaged"))


def test_a_second_process_holding_the_run_directory_is_refused(run, capsys):
  holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
      import sys
      from xtreme_jax.training import locks
      locks.acquire({os.path.join(run, '.lock')!r}, {run!r})
      print("locked", flush=True)
      sys.stdin.read()
      """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(RunDirectoryInUseError, match=re.escape(f"{run} is in use by pid {holder.pid} ")):
      averaging.average_checkpoints(run, last=2)
    assert one_error_line(capsys, run, "--last", 2, code=75).startswith(f"error: {run} is in use by pid {holder.pid} ")
    assert not os.path.exists(os.path.join(run, "averaged"))
  finally:
    holder.stdin.close()
    holder.wait(timeout=60)


# -- CLI ----------------------------------------------------------------------------

def test_cli_prints_the_steps_and_where_the_average_went(run, capsys):
  assert cli.main(["average-checkpoints", run, "--last", "2"]) == 0
  assert capsys.readouterr().out == f"averaged steps 3, 4 -> {run}/averaged/4\n"
  assert cli.main(["average-checkpoints", run, "--last", "2"]) == 0
  assert capsys.readouterr().out == f"{run}/averaged/4 already holds the average of steps 3, 4; nothing written\n"
  assert_mean(averaging.restore_averaged(run), 4 + 8, 2, newest=4)
  assert "average-checkpoints RUN_DIR [--last N] [--allow-fewer]" in cli.USAGE
