"""TensorFlow imported quietly and kept off the accelerators: the library reads data with it, never computes with it.

`install()` adds a one-shot import hook and imports nothing itself, so a run that needs no TensorFlow still loads
none. When `tensorflow` is first imported (by seqio, TFDS or the pretraining streams), the hook
- drops its C++ start-up lines (oneDNN, the CUDA stub, `cuInit`) when `quiet`: they are printed before absl's
  logging starts, so `TF_CPP_MIN_LOG_LEVEL` cannot stop them; any other line (an error, another thread's
  output) still reaches stderr;
- shows TensorFlow no GPU, which it would otherwise claim memory on beside the JAX run.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys
import tempfile

NAME = "tensorflow"


# TensorFlow's start-up lines (absl's pre-init notice, oneDNN, the CUDA stub and cuInit on a machine without
# a GPU); anything else written to stderr meanwhile is passed on.
START_UP_LINES = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
                            r"STDERR|[IWE]\d{4} [\d:. ]+\d+ (port\.cc|cudart_stub\.cc|cuda_platform\.cc|"
                            r"cuda_executor\.cc|cuda_diagnostics\.cc|cpu_feature_guard\.cc)[:\]]|"
                            r"To enable the following instructions: .* rebuild TensorFlow with the appropriate")


@contextlib.contextmanager
def _start_up_lines_dropped():
  """File descriptor 2 (where C++ writes) goes to a temporary file inside the block; afterwards every line of
  it but TensorFlow's start-up lines is written to stderr (also when the import fails). Another thread's
  stderr output meanwhile is delayed, not lost. Without a usable fd 2 (stderr closed), nothing is redirected."""
  try:
    if sys.stderr is not None:
      sys.stderr.flush()
    saved = os.dup(2)
  except (OSError, ValueError):  # fd 2 or sys.stderr closed
    yield
    return
  try:
    with tempfile.TemporaryFile() as caught:
      os.dup2(caught.fileno(), 2)
      try:
        yield
      finally:
        os.dup2(saved, 2)
        caught.seek(0)
        kept = [line for line in caught.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not START_UP_LINES.match(line)]
        if kept:
          os.write(2, "".join(kept).encode("utf-8"))
  finally:
    os.close(saved)


def _hide_gpus(tf) -> None:
  try:
    tf.config.set_visible_devices([], "GPU")
  except Exception as e:  # noqa: BLE001 - a partial TensorFlow, devices in use: TF may then see a GPU, no more
    logging.debug("could not hide the GPUs from TensorFlow: %s", e)


class _Loader(importlib.abc.Loader):
  """TensorFlow's own loader, run quietly (when asked) and followed by hiding the GPUs."""

  def __init__(self, loader, quiet: bool):
    self._loader, self._quiet = loader, quiet

  def __getattr__(self, name):  # resource readers, get_code, ...
    return getattr(self._loader, name)

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module) -> None:
    _uninstall()
    with _start_up_lines_dropped() if self._quiet else contextlib.nullcontext():
      self._loader.exec_module(module)
      _hide_gpus(module)


class _Finder(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` on sys.path with its loader wrapped (until it is loaded: `find_spec` probes load nothing)."""

  def __init__(self, quiet: bool):
    self.quiet = quiet

  def find_spec(self, name, path, target=None):
    if name != NAME:
      return None
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is not None and spec.loader is not None:
      spec.loader = _Loader(spec.loader, self.quiet)
    return spec


def _uninstall() -> None:
  sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]


def install(quiet: bool = True) -> None:
  """Hook the first import of TensorFlow (a no-op once it is imported); `quiet=False` keeps its start-up lines."""
  _uninstall()
  if NAME not in sys.modules:
    sys.meta_path.insert(0, _Finder(quiet))
