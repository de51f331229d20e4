"""Two local processes joined through a local coordinator, launched the documented way (JAX_COORDINATOR_ADDRESS,
JAX_NUM_PROCESSES, JAX_PROCESS_ID), train as one process over the same devices, checkpoint together and resume
bit-identically."""

import json
import os
import socket
import subprocess
import sys

import pytest

from xtreme_jax import errors
from xtreme_jax.training import distributed

TIER = "integration"  # conftest.py: this file's tier

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multiprocess_worker.py")
TIMEOUT = 300


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _clean_env() -> dict:
  return {k: v for k, v in os.environ.items() if k not in distributed.VARIABLES and not k.startswith("SLURM_")
          and k != "TPU_WORKER_HOSTNAMES"}


def _single(run_dir, steps=6) -> dict:
  """This process over two of its CPU devices: the reference."""
  import jax
  from multiprocess_worker import train
  return train(str(run_dir), steps, -1, devices=jax.devices()[:2])


def _launch(*args) -> list[tuple[int, str]]:
  """The worker with `args` as two processes joined the documented way: (exit code, last output line) of each."""
  address = f"127.0.0.1:{_free_port()}"
  procs = [subprocess.Popen([sys.executable, WORKER, *map(str, args)],
                            env={**_clean_env(), "JAX_COORDINATOR_ADDRESS": address, "JAX_NUM_PROCESSES": "2",
                                 "JAX_PROCESS_ID": str(i)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
  outputs = [p.communicate(timeout=TIMEOUT) for p in procs]
  lines = [out.strip().splitlines() for out, _ in outputs]
  return [(p.returncode, line[-1] if line else err[-3000:]) for p, line, (_, err) in zip(procs, lines, outputs)]


def _pair(run_dir, steps=6, crash_at=5) -> tuple[list[int], str]:
  """Two processes of one CPU device each, stopped at batch `crash_at` and resumed: (exit codes, process 0's
  last output line)."""
  results = _launch(run_dir, steps, crash_at)
  return [code for code, _ in results], results[0][1]


def _losses(run_dir) -> list:
  """Every step's training loss in metrics.jsonl, which process 0 writes."""
  with open(os.path.join(run_dir, "metrics.jsonl")) as f:
    return [r["train/loss"] for r in map(json.loads, f) if "train/loss" in r]


@pytest.mark.e2e
def test_two_processes_train_resume_and_end_like_one(tmp_path):
  single = _single(tmp_path / "single")
  # Both processes stop at batch 5 (after the checkpoint of step 4, written together), then resume from it.
  codes, line = _pair(tmp_path / "pair", crash_at=5)
  assert codes == [0, 0], line
  pair = json.loads(line)
  assert sorted(os.listdir(tmp_path / "pair" / "checkpoints"), key=int) == ["2", "4", "6"]
  assert (pair["processes"], pair["devices"], single["processes"], single["devices"]) == (2, 2, 1, 2)
  assert pair["resumed_from_step"] == 4 and pair["losses"] == single["losses"][4:]
  assert _losses(tmp_path / "pair") == single["losses"] and pair["digest"] == single["digest"]


def test_each_process_feeds_the_rows_its_devices_hold_in_every_layout():
  """Two processes of two devices each (simulated by device id): data-parallel and FSDP split the batch; a model
  axis across the processes has both feed the whole batch; a layout that needs two separate parts is refused."""
  import jax
  import numpy as np
  from jax.sharding import Mesh, NamedSharding, PartitionSpec

  from xtreme_jax.training import partitioning
  devices = jax.devices()[:4]
  process_of = lambda device: devices.index(device) // 2  # noqa: E731  (devices 0, 1: process 0; 2, 3: process 1)

  def slots(layout, shape, order=(0, 1, 2, 3)):
    mesh = Mesh(np.asarray([devices[i] for i in order]).reshape(shape), partitioning.MESH_AXES)
    rules = partitioning.PartitionConfig(layout=layout).rules
    return partitioning.feed_slots(partitioning.batch_sharding(mesh, rules), process_of)

  assert slots("data_parallel", (4, 1)) == slots("fsdp", (4, 1)) == {0: (0, 2), 1: (1, 2)}
  assert slots("data_parallel", (1, 4)) == {0: (0, 2), 1: (1, 2)}  # its batch spans both mesh axes
  assert slots("tensor_parallel", (1, 4)) == {0: (0, 1), 1: (0, 1)}  # the model axis spans the hosts
  assert slots("tensor_parallel", (2, 2)) == {0: (0, 2), 1: (1, 2)}  # the model axis within each host
  assert slots("tensor_parallel", (2, 2), order=(0, 2, 1, 3)) == {0: (0, 1), 1: (0, 1)}  # across the hosts
  with pytest.raises(errors.ConfigError, match=r"process 0 would hold batch rows \[0, 2\] of 4 parts"):
    slots("data_parallel", (4, 1), order=(0, 2, 1, 3))
  one = NamedSharding(partitioning.make_mesh((-1, 1)), PartitionSpec("data"))
  assert partitioning.feed_slot(one) == (0, 1)  # one process feeds every row


@pytest.mark.e2e
def test_a_model_axis_across_two_processes_sees_every_row_once():
  """Two real processes of two devices each, mesh (1, 4): each feeds the whole batch, which is the global batch
  on both (before, each fed half: a global batch of 2 rows that differed between the processes)."""
  for layout, mesh, slot in (("tensor_parallel", (1, 4), [0, 1]), ("data_parallel", (4, 1), None)):
    results = _launch("feed", layout, *mesh)
    assert [code for code, _ in results] == [0, 0], results
    fed = [json.loads(line) for _, line in results]
    for process, out in enumerate(fed):
      assert out["shape"] == [4, 16] and out["rows_are_the_batch"], (layout, out)
      assert out["slot"] == (slot or [process, 2])


@pytest.mark.parametrize("env,message", [
    ({"JAX_NUM_PROCESSES": "2"}, r"JAX_NUM_PROCESSES set without JAX_COORDINATOR_ADDRESS, JAX_PROCESS_ID"),
    ({"JAX_COORDINATOR_ADDRESS": "10.0.0.2:8476", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"},
     r"JAX_PROCESS_ID=2 with JAX_NUM_PROCESSES=2; expected an id in 0..1"),
    ({"JAX_COORDINATOR_ADDRESS": "10.0.0.2", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"},
     r"JAX_COORDINATOR_ADDRESS='10.0.0.2'; expected host:port"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"},
     r"JAX_NUM_PROCESSES='two'; expected a whole number"),
])
def test_a_partial_or_bad_launch_is_one_line(env, message):
  with pytest.raises(errors.ConfigError, match=message):
    distributed.initialize_distributed(env)


def test_the_three_variables_become_the_initialize_arguments():
  env = {"JAX_COORDINATOR_ADDRESS": "10.0.0.2:8476", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
  assert distributed._launch(env) == {"coordinator_address": "10.0.0.2:8476", "num_processes": 4, "process_id": 3}
  assert distributed._launch({}) is None and not distributed._auto_detected({})
  assert distributed._launch({"JAX_COORDINATOR_ADDRESS": "h:1"}) is None  # JAX finds count and id itself
  assert distributed._auto_detected({"SLURM_NTASKS": "2"}) and distributed._auto_detected(
      {"TPU_WORKER_HOSTNAMES": "a,b"}) and not distributed._auto_detected({"TPU_WORKER_HOSTNAMES": "a"})


def test_a_multi_host_tpu_vm_joins_and_a_single_host_one_stays_alone(monkeypatch):
  """A Cloud TPU VM (its chips, its metadata) joins jax.distributed by JAX's own detection when its slice has
  several hosts; a single-host VM, or a machine without TPU chips (whose metadata is never asked), does not."""
  asked = []

  def metadata(workers):
    return lambda key: asked.append(key) or workers

  assert distributed.tpu_vm_hosts({}, metadata("w0,w1,w2,w3"), chips=lambda: 4) == 4
  assert distributed.tpu_vm_hosts({}, metadata("10.0.0.2"), chips=lambda: 4) == 1
  assert distributed.tpu_vm_hosts({}, metadata(None), chips=lambda: 8) == 1  # no worker list: one host
  assert distributed.tpu_vm_hosts({"TPU_SKIP_MDS_QUERY": "1"}, metadata("a,b"), chips=lambda: 4) == 0
  asked.clear()
  assert distributed.tpu_vm_hosts({}, metadata("a,b"), chips=lambda: 0) == 0 and not asked
  calls = []
  monkeypatch.setattr(distributed.jax.distributed, "is_initialized", lambda: False)
  monkeypatch.setattr(distributed.jax.distributed, "initialize", lambda **kw: calls.append(kw))
  distributed.initialize_distributed({}, tpu_hosts=lambda env: 2)
  assert calls == [{}]  # JAX reads the coordinator, the count and the id from the metadata itself
  distributed.initialize_distributed({}, tpu_hosts=lambda env: 1)
  distributed.initialize_distributed({}, tpu_hosts=lambda env: 0)
  assert calls == [{}]


@pytest.mark.e2e
def test_processes_on_two_hosts_refuse_a_local_run_directory(tmp_path):
  """Two processes that name different hosts (a stand-in for two VMs) are refused a local run directory with
  one line; on one host (the training test above) the same directory is fine."""
  results = _launch("hosts", tmp_path / "run")
  assert [code for code, _ in results] == [0, 0], results
  for _, line in results:
    assert json.loads(line) == {"refused": f"{tmp_path / 'run'} is a local directory, but this run's 2 processes "
                                           "are on 2 hosts: give a directory every host reaches, e.g. "
                                           "RUN_DIR=gs://BUCKET/run"}
  assert not (tmp_path / "run").exists()


def test_several_processes_leave_sigterm_to_the_preemption_sync_even_when_one_slot_feeds_every_row(
    tmp_path, monkeypatch):
  """A model axis across the hosts (mesh (1, 4)) gives every process the one feed slot (0, 1); with two
  processes (simulated) `fit` still installs no per-process signal handlers, which could stop the processes at
  different steps: orbax's preemption sync point stops them together. One process installs them."""
  import jax
  from conftest import RandomMlmSource
  from test_training import make_trainer
  from xtreme_jax.training import trainer as trainer_module
  installed = []

  class Decided(Exception):
    pass

  def record(install=True):
    installed.append(install)
    raise Decided

  trainer = make_trainer(tmp_path, layout="tensor_parallel", mesh=(1, 4))
  try:
    assert trainer.feed_slot == (0, 1)
    monkeypatch.setattr(trainer_module, "stop_signals", record)
    for processes in (2, 1):
      monkeypatch.setattr(jax, "process_count", lambda: processes)
      with pytest.raises(Decided):
        trainer.fit(RandomMlmSource())
  finally:
    monkeypatch.undo()
    trainer.close()
  assert installed == [False, True]
