"""Joining the processes of a multi-process run (`jax.distributed.initialize`), before anything else runs.

The documented launch sets three environment variables on every process:

    JAX_COORDINATOR_ADDRESS=host:port   (process 0's host; a free port)
    JAX_NUM_PROCESSES=N
    JAX_PROCESS_ID=i                    (0 .. N-1, one per process)

Without them, clusters that JAX detects itself join as JAX sets them up: a
SLURM job of several tasks, a multi-host Cloud TPU slice (a TPU VM whose
metadata lists several workers, as `create.sh` makes them, or
TPU_WORKER_HOSTNAMES with several hosts on GKE), or JAX_COORDINATOR_ADDRESS
alone where such a cluster gives the count and the id. One process with none
of these (a single-host TPU VM too) is a plain run.

Processes on several hosts share their run directory, so it must be one every
host reaches (gs://): `check_shared_directory` refuses a local path then.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import socket
import urllib.request
from typing import Callable, Optional

import jax
import numpy as np

from xtreme_jax import errors, fs

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


METADATA_URL = "http://{host}/computeMetadata/v1/instance/attributes/{key}"


def gce_metadata(key: str) -> Optional[str]:
  """An attribute of this VM from the GCE metadata server (as JAX's TPU cluster detection reads it); None off
  GCE or where the attribute is missing."""
  url = METADATA_URL.format(host=os.environ.get("GCE_METADATA_IP", "metadata.google.internal"), key=key)
  try:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Metadata-Flavor": "Google"}),
                                timeout=5) as response:
      return response.read().decode().strip()
  except (OSError, ValueError):
    return None


def tpu_chips() -> int:
  """TPU chips attached to this VM (the device files the TPU runtime opens)."""
  return len(glob.glob("/dev/accel*")) or len([p for p in glob.glob("/dev/vfio/*") if p[-1].isdigit()])


def tpu_vm_hosts(env, metadata: Callable[[str], Optional[str]] = gce_metadata,
                 chips: Callable[[], int] = tpu_chips) -> int:
  """Hosts of the Cloud TPU slice this VM is one of: the workers its metadata lists (0 off a TPU VM)."""
  if env.get("TPU_SKIP_MDS_QUERY") or not chips():
    return 0
  endpoints = metadata("worker-network-endpoints")
  return len([w for w in endpoints.split(",") if w.strip()]) if endpoints else 1


def _auto_detected(env, tpu_hosts: Callable[[dict], int] = tpu_vm_hosts) -> bool:
  """A cluster JAX finds by itself: several SLURM tasks, several TPU hosts (a TPU VM's metadata or GKE's
  TPU_WORKER_HOSTNAMES), or a coordinator address given."""
  try:
    slurm_tasks = int(env.get("SLURM_NTASKS", "1"))
  except ValueError:
    slurm_tasks = 1
  return bool(env.get("JAX_COORDINATOR_ADDRESS", "").strip()) or slurm_tasks > 1 or (
      "," in env.get("TPU_WORKER_HOSTNAMES", "")) or tpu_hosts(env) > 1


def initialize_distributed(env=None, tpu_hosts: Callable[[dict], int] = tpu_vm_hosts) -> None:
  """`jax.distributed.initialize` when this is one process of several (module docstring); else nothing."""
  env = os.environ if env is None else env
  if jax.distributed.is_initialized():
    return
  launch = _launch(env)
  if launch is not None:
    jax.distributed.initialize(**launch)
  elif _auto_detected(env, tpu_hosts):
    try:
      jax.distributed.initialize()
    except ValueError as e:
      raise errors.ConfigError(f"jax.distributed could not find this process's place ({e}); on a cluster JAX "
                               f"does not detect, set {', '.join(VARIABLES)} on every process") from e


def host_name() -> str:
  return socket.gethostname()


def host_count() -> int:
  """Distinct hosts among the run's processes (every process must call it: a collective)."""
  if jax.process_count() == 1:
    return 1
  from jax.experimental import multihost_utils
  digest = np.frombuffer(hashlib.sha256(host_name().encode()).digest()[:4], np.int32)
  return len(set(np.asarray(multihost_utils.process_allgather(digest)).ravel().tolist()))


def check_shared_directory(path: str) -> None:
  """Refuse a local `path` for a run whose processes are on several hosts (one line): each host would write
  its own copy and none would see the others' checkpoints. Every process calls it."""
  if jax.process_count() == 1 or fs.is_remote(path):
    return
  hosts = host_count()
  if hosts > 1:
    raise errors.ConfigError(f"{path} is a local directory, but this run's {jax.process_count()} processes are on "
                             f"{hosts} hosts: give a directory every host reaches, e.g. RUN_DIR=gs://BUCKET/run")
