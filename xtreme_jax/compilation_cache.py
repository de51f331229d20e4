"""JAX's persistent compilation cache, on for every command unless turned off.

A program compiled once (a train step, an evaluation, a decoder) is read back
from disk by every later run of the same shapes, so a re-run or a resume
starts in seconds instead of recompiling. Where the cache lives, first match:

1. the Gin binding `main.execute.compilation_cache` (`xtreme-jax run` only);
2. the environment variable `XTREME_JAX_CACHE_DIR`;
3. JAX's own setting, when one was made (`JAX_COMPILATION_CACHE_DIR` or
   `jax.config.update("jax_compilation_cache_dir", ...)`): left as it is,
   with JAX's other cache settings;
4. `$XDG_CACHE_HOME/xtreme_jax/jax`, else `~/.cache/xtreme_jax/jax`.

A value of `off` turns the cache off. Programs that compile in less than
`MIN_COMPILE_SECS` are not written (they cost less to compile than to read),
and a local cache is kept under `MAX_BYTES` (least recently used entries go
first; a file lock makes concurrent processes safe). A `gs://` URL shares one
cache between the hosts of a pod (JAX reads it through etils.epath); JAX
writes entries from process 0 only, so hosts with local caches each compile
once. Deleting the folder clears the cache.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import jax

from xtreme_jax import errors

ENV = "XTREME_JAX_CACHE_DIR"
OFF = "off"
MIN_COMPILE_SECS = 0.5
MAX_BYTES = 4 << 30


def default_directory() -> str:
  """`$XDG_CACHE_HOME/xtreme_jax/jax`, else `~/.cache/xtreme_jax/jax`."""
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "xtreme_jax", "jax")


def resolve(setting: Optional[str] = None) -> Optional[str]:
  """The cache folder for `setting` (Gin), the environment and JAX's own setting; None: off or JAX's choice."""
  for value, source in ((setting, "main.execute.compilation_cache"), (os.environ.get(ENV), ENV)):
    if value is None or value == "":
      continue
    if not isinstance(value, str):
      raise errors.ConfigError(f"{source} = {value!r}; expected a folder, a gs:// URL or {OFF!r}")
    return None if value.strip().lower() == OFF else os.path.expanduser(value)
  if jax.config.jax_compilation_cache_dir:
    return None
  return default_directory()


def configure(setting: Optional[str] = None) -> Optional[str]:
  """Points JAX's persistent compilation cache at `resolve(setting)`; returns the folder in use (None: off).

  Call before anything is compiled: JAX opens the cache at the first compilation.
  """
  explicit = setting not in (None, "") or os.environ.get(ENV, "") != ""
  directory = resolve(setting)
  if directory is None:
    if explicit:  # `off`
      jax.config.update("jax_enable_compilation_cache", False)
      logging.info("persistent compilation cache off")
      return None
    return jax.config.jax_compilation_cache_dir  # JAX's own setting, or none
  local = "://" not in directory
  jax.config.update("jax_enable_compilation_cache", True)
  jax.config.update("jax_compilation_cache_dir", directory)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
  jax.config.update("jax_compilation_cache_max_size", MAX_BYTES if local else -1)  # no file lock on a bucket
  logging.info("persistent compilation cache: %s", directory)
  return directory
