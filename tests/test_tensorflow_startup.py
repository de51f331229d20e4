"""TensorFlow, imported by whichever module first: no C++ start-up lines, no GPU (in a fresh process)."""

import json
import os
import subprocess
import sys

TIER = "integration"  # conftest.py: this file's tier

IMPORT = """
import importlib.util, json, sys
from xtreme_jax import tensorflow_startup
tensorflow_startup.install(quiet=True)
assert "tensorflow" not in sys.modules  # installing imports nothing
assert importlib.util.find_spec("tensorflow") is not None  # a probe (as TFDS / etils make) loads nothing
assert "tensorflow" not in sys.modules
import tensorflow_datasets  # imports tensorflow
import tensorflow as tf
print("stderr works again", file=sys.stderr)
print(json.dumps({"gpus": len(tf.config.get_visible_devices("GPU")), "hooks": [type(f).__name__ for f in sys.meta_path
                                                                           if "tensorflow_startup" in type(f).__module__]}))
"""


def test_tensorflow_is_imported_without_its_start_up_lines_and_sees_no_gpu():
  env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}  # (TF_CPP_MIN_LOG_LEVEL cannot stop them)
  proc = subprocess.run([sys.executable, "-c", IMPORT], env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stderr == "stderr works again\n"
  assert json.loads(proc.stdout) == {"gpus": 0, "hooks": []}  # the hook is gone once it has run


def test_only_the_start_up_lines_are_dropped(capfd):
  """What else reaches fd 2 during the import (an error, another thread's line) is written out afterwards."""
  from xtreme_jax import tensorflow_startup
  with tensorflow_startup._start_up_lines_dropped():
    os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
                b"I0000 00:00:1795784536.824501   11762 port.cc:153] oneDNN custom operations are on.\n"
                b"E0000 00:00:1795784582.045321   12671 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n"
                b"F0000 00:00:1.0   1 op_kernel.cc:10] Check failed: a real problem\n"
                b"compiling train step ... 3.0 s\n")
  assert capfd.readouterr().err == "F0000 00:00:1.0   1 op_kernel.cc:10] Check failed: a real problem\n" \
                                   "compiling train step ... 3.0 s\n"
