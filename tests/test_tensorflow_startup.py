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
