"""One process of the multi-process test (tests/test_multiprocess.py): fine-tune the tiny MLM, print the result.

    python multiprocess_worker.py RUN_DIR STEPS CRASH_AT
    python multiprocess_worker.py feed LAYOUT DATA MODEL     # two devices a process: the global batch it fed
    python multiprocess_worker.py hosts RUN_DIR              # as if on two hosts: claim a local run directory

Two processes of one CPU device each, joined from the environment (JAX_COORDINATOR_ADDRESS,
JAX_NUM_PROCESSES, JAX_PROCESS_ID). Both stop at batch CRASH_AT (a preemption), then resume in a new Trainer
from the checkpoint they wrote together. Process 0 prints one JSON line: the resumed `train`'s result. The
test runs `train` itself for the single-process reference.
"""

import hashlib
import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import RandomMlmSource  # noqa: E402  (sets 4 devices: the worker sets 1, before JAX starts)
from test_training import CrashingSource, make_trainer  # noqa: E402


def train(run_dir: str, steps: int, crash_at: int, devices=None) -> dict:
  """Train the tiny MLM over `devices` (default: all), checkpoints every 2 steps; the losses and a digest."""
  trainer = make_trainer(run_dir, mesh=(-1, 1), steps=steps, every=2, devices=devices)
  try:
    state, summary = trainer.fit(CrashingSource(crash_at=crash_at) if crash_at >= 0 else RandomMlmSource())
  finally:
    trainer.close()
  params = jax.tree_util.tree_leaves(jax.device_get(state.params))
  digest = hashlib.sha256(b"".join(np.asarray(p).tobytes() for p in params)).hexdigest()
  return {"processes": jax.process_count(), "devices": len(trainer.mesh.devices.flat), "digest": digest,
          "resumed_from_step": summary["resumed_from_step"],
          "losses": [h["loss"] for h in summary["history"] if h["step"] > summary["resumed_from_step"]]}


def feed(layout: str, mesh_shape: tuple) -> dict:
  """This process's slot of the first batch, placed over the mesh: the rows every process sees (gathered)."""
  from jax.experimental import multihost_utils

  from xtreme_jax.training import partitioning
  sharding = partitioning.batch_sharding(partitioning.make_mesh(mesh_shape),
                                         partitioning.PartitionConfig(layout=layout).rules)
  slot = partitioning.feed_slot(sharding)
  placed = partitioning.host_batch_to_global(RandomMlmSource(batch_size=4).batch(0, *slot), sharding)
  rows = multihost_utils.process_allgather(placed["input_ids"], tiled=True)
  expected = RandomMlmSource(batch_size=4).batch(0, 0, 1)["input_ids"]
  return {"process": jax.process_index(), "slot": list(slot), "shape": list(placed["input_ids"].shape),
          "rows_are_the_batch": bool(np.array_equal(np.asarray(rows), expected))}


def claim_on_two_hosts(run_dir: str) -> dict:
  """Claim `run_dir` as if each process ran on a host of its own; the refusal's line."""
  from xtreme_jax import errors
  from xtreme_jax.training import distributed
  from xtreme_jax.training.checkpoints import RunDirectory
  distributed.host_name = lambda: f"host-{jax.process_index()}"
  try:
    RunDirectory(run_dir, {"model": "tiny"}).lock()
  except errors.ConfigError as e:
    return {"refused": str(e)}
  return {"refused": None}


if __name__ == "__main__":
  if sys.argv[1] == "hosts":
    jax.config.update("jax_num_cpu_devices", 1)
    from xtreme_jax.training.distributed import initialize_distributed
    initialize_distributed()
    print(json.dumps(claim_on_two_hosts(sys.argv[2])))
    sys.exit(0)
  if sys.argv[1] == "feed":
    jax.config.update("jax_num_cpu_devices", 2)
    from xtreme_jax.training.distributed import initialize_distributed
    initialize_distributed()
    print(json.dumps(feed(sys.argv[2], (int(sys.argv[3]), int(sys.argv[4])))))
    sys.exit(0)
  jax.config.update("jax_num_cpu_devices", 1)
  from xtreme_jax.training.distributed import initialize_distributed
  initialize_distributed()
  try:
    train(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
  except KeyboardInterrupt:  # both processes, at the same batch
    pass
  result = train(sys.argv[1], int(sys.argv[2]), -1)
  if jax.process_index() == 0:
    print(json.dumps(result))
