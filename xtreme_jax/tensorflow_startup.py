"""TensorFlow imported quietly and kept off the accelerators: the library reads data with it, never computes with it.

`install()` adds a one-shot import hook and imports nothing itself, so a run that needs no TensorFlow still loads
none. When `tensorflow` is first imported (by seqio, TFDS or the pretraining streams), the hook
- sends its C++ start-up lines (oneDNN, the CUDA stub, `cuInit`) to /dev/null when `quiet`: they are printed before
  absl's logging starts, so `TF_CPP_MIN_LOG_LEVEL` cannot stop them;
- shows TensorFlow no GPU, which it would otherwise claim memory on beside the JAX run.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys

NAME = "tensorflow"


@contextlib.contextmanager
def _stderr_to_devnull():
  """File descriptor 2 (where C++ writes) goes to /dev/null inside the block."""
  sys.stderr.flush()
  saved = os.dup(2)
  try:
    with open(os.devnull, "wb") as devnull:
      os.dup2(devnull.fileno(), 2)
    yield
  finally:
    os.dup2(saved, 2)
    os.close(saved)


def _hide_gpus(tf) -> None:
  try:
    tf.config.set_visible_devices([], "GPU")
  except (AttributeError, RuntimeError):  # a partial TensorFlow, or its devices already in use
    pass


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
    with _stderr_to_devnull() if self._quiet else contextlib.nullcontext():
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
