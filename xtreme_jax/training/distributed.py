"""Joining the processes of a multi-process run (`jax.distributed.initialize`), before anything else runs.

The documented launch sets three environment variables on every process:

    JAX_COORDINATOR_ADDRESS=host:port   (process 0's host; a free port)
    JAX_NUM_PROCESSES=N
    JAX_PROCESS_ID=i                    (0 .. N-1, one per process)

Without them, clusters that JAX detects itself join as JAX sets them up: a
SLURM job of several tasks, a multi-host Cloud TPU slice (TPU_WORKER_HOSTNAMES
with several hosts), or JAX_COORDINATOR_ADDRESS alone where such a cluster
gives the count and the id. One process with none of these is a plain run.
"""

from __future__ import annotations

import os
import re

import jax

from xtreme_jax import errors

VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def _launch(env) -> dict | None:
  """`jax.distributed.initialize` arguments from the three variables; None when none is set.

  ConfigError (one line) for a partial or malformed set.
  """
  given = {k: env[k].strip() for k in VARIABLES if env.get(k, "").strip()}
  if not given or set(given) == {"JAX_COORDINATOR_ADDRESS"}:
    return None
  missing = [k for k in VARIABLES if k not in given]
  if missing:
    raise errors.ConfigError(f"{', '.join(sorted(given))} set without {', '.join(missing)}: a multi-process launch "
                             f"sets all of {', '.join(VARIABLES)} on every process")
  address = given["JAX_COORDINATOR_ADDRESS"]
  if not re.fullmatch(r"\S+:\d+", address):
    raise errors.ConfigError(f"JAX_COORDINATOR_ADDRESS={address!r}; expected host:port of process 0, "
                             "e.g. 10.0.0.2:8476")
  numbers = {}
  for key in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
    if not re.fullmatch(r"\d+", given[key]):
      raise errors.ConfigError(f"{key}={given[key]!r}; expected a whole number")
    numbers[key] = int(given[key])
  count, index = numbers["JAX_NUM_PROCESSES"], numbers["JAX_PROCESS_ID"]
  if count < 1 or not 0 <= index < count:
    raise errors.ConfigError(f"JAX_PROCESS_ID={index} with JAX_NUM_PROCESSES={count}; expected an id in "
                             f"0..{count - 1}")
  return {"coordinator_address": address, "num_processes": count, "process_id": index}


def _auto_detected(env) -> bool:
  """A cluster JAX finds by itself: several SLURM tasks, several TPU hosts, or a coordinator address given."""
  try:
    slurm_tasks = int(env.get("SLURM_NTASKS", "1"))
  except ValueError:
    slurm_tasks = 1
  return bool(env.get("JAX_COORDINATOR_ADDRESS", "").strip()) or slurm_tasks > 1 or (
      "," in env.get("TPU_WORKER_HOSTNAMES", ""))


def initialize_distributed(env=None) -> None:
  """`jax.distributed.initialize` when this is one process of several (module docstring); else nothing."""
  env = os.environ if env is None else env
  if jax.distributed.is_initialized():
    return
  launch = _launch(env)
  if launch is not None:
    jax.distributed.initialize(**launch)
  elif _auto_detected(env):
    try:
      jax.distributed.initialize()
    except ValueError as e:
      raise errors.ConfigError(f"jax.distributed could not find this process's place ({e}); on a cluster JAX "
                               f"does not detect, set {', '.join(VARIABLES)} on every process") from e
