"""One process of the multi-process test (tests/test_multiprocess.py): fine-tune the tiny MLM, print the result.

    python multiprocess_worker.py RUN_DIR STEPS CRASH_AT DEVICES

The launch comes from the environment (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID: two
processes of DEVICES CPU devices each) or is a single process over DEVICES devices. Batch CRASH_AT raises
(a preemption) unless it is -1. Process 0 prints one JSON line: the losses and a digest of the parameters.
"""

import hashlib
import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import RandomMlmSource  # noqa: E402  (sets 8 devices: overridden below, before JAX starts)
from test_training import CrashingSource, make_trainer  # noqa: E402
from xtreme_jax.training.distributed import initialize_distributed  # noqa: E402

jax.config.update("jax_num_cpu_devices", int(sys.argv[4]))
initialize_distributed()


def main(run_dir: str, steps: int, crash_at: int) -> None:
  trainer = make_trainer(run_dir, mesh=(-1, 1), steps=steps, every=2)
  try:
    state, summary = trainer.fit(CrashingSource(crash_at=crash_at) if crash_at >= 0 else RandomMlmSource())
  finally:
    trainer.close()
  params = jax.tree_util.tree_leaves(jax.device_get(state.params))
  digest = hashlib.sha256(b"".join(np.asarray(p).tobytes() for p in params)).hexdigest()
  if jax.process_index() == 0:
    print(json.dumps({"processes": jax.process_count(), "devices": jax.device_count(), "digest": digest,
                      "resumed_from_step": summary["resumed_from_step"],
                      "losses": [h["loss"] for h in summary["history"]]}))


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
