"""Run directories and orbax checkpoints: claim, save every N steps, keep K, resume.

A run directory holds `run_config.json` (the fingerprint of what the run
trains: model, data, optimizer, steps, seed, and the history of its
resume-time overrides), `checkpoints/<step>/` (orbax, items `state` and
`meta`), `best/<step>/` (the parameters with the best evaluation, when the
trainer selects one), `metrics.jsonl`, `tensorboard/` and `summary.json`.

`RunDirectory` is a run's claim on its directory: `lock()` refuses a second
concurrent run (an `fcntl` lock on `<run_dir>/.lock` naming the holder's
pid), `check()` refuses a directory holding a run of another configuration
(naming the differing keys) or one written with another
`FINGERPRINT_VERSION` (one line naming both), and `commit()` writes
`run_config.json` once start-up succeeded, so a failed start never claims the
directory. The XTREME
run claims its own directory and then each `models/<name>/` fine-tuning run
separately.

A run directory may be a URL (`gs://bucket/runs/x`; `xtreme_jax.fs`): orbax
writes checkpoints there natively (tensorstore's GCS driver; a finished step is
marked by its `commit_success.txt` instead of a rename), the JSON files
are uploaded whole (atomic), and the lock is an advisory lock object
(`training/locks.py`: a second run is refused naming the holder's host, pid
and start time). orbax needs `google-cloud-storage` installed for gs://
(`check_remote_checkpoints`); TensorFlow's tf.io.gfile serves the other
files (`xtreme_jax.fs`).

Each checkpoint holds the train state (params, optimizer state, step, RNG),
`meta = {"step", "data_position"}` (the number of batches the input
pipeline has produced; the trainer adds its plateau schedule's state)
and, for a streamed input, every host's input state (`input`: stream
positions, so that resuming never re-reads the corpus).
Orbax writes into a temporary directory and renames it when complete, so a
write cut off mid-way never looks like a step. A
checkpoint that cannot be read while an older one can is set aside
(`checkpoints/corrupt-<step>-<utc time>`) and the run resumes from the older
one, in one warning line (`drop_closed_loop_callbacks` keeps tensorstore's
late callbacks from printing tracebacks around it).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.util
import json
import logging
import os
import sys
from typing import Any, Callable, Iterable, Optional

import jax
import orbax.checkpoint as ocp

from xtreme_jax import atomic, errors, fs
from xtreme_jax.nested import describe, differing_keys, flatten, merge, unflatten
from xtreme_jax.training import distributed, locks

# Replicated arrays are written by several replicas in parallel only when each
# slice is at least this big: smaller slices are not worth it, and every
# distinct slice costs a compilation (orbax's default slices everything).
MIN_REPLICA_SLICE_BYTES = 1 << 20


def _register_array_handler() -> None:
  absl_logger = logging.getLogger("absl")  # orbax warns that it overrides the default handler: expected here
  level = absl_logger.level
  absl_logger.setLevel(logging.ERROR)
  try:
    ocp.type_handlers.register_type_handler(
        jax.Array, ocp.type_handlers.ArrayHandler(min_slice_bytes_for_replica_parallel=MIN_REPLICA_SLICE_BYTES),
        override=True)
  finally:
    absl_logger.setLevel(level)


_register_array_handler()

RUN_CONFIG = "run_config.json"
OVERRIDES = "overrides"  # run_config.json's key for the resume-time override history
VERSION = "fingerprint_version"  # run_config.json's key for the FINGERPRINT_VERSION that wrote it
# What run fingerprints hold and how: raised whenever that changes (a field added, a path written another way),
# so that a run directory of another version is refused with one line instead of a list of differing keys.
# 1: before versioning (no key); 2: every config field, bundled paths package-relative; 3: FILTER temperatures,
# the feature-based BiLSTM size, WMT14 text folders, the encoder-decoder embedding switches; 4: a task's recipe
# holds its kind's parts (`TaskSettings.qa`, `.tagging`, `.ranking`, `.feature_based`); 5: the model's named
# languages and per-language position tables (`TransformerConfig.languages`, `.language_positions`), the pair
# source's `language_order`.
FINGERPRINT_VERSION = 5


def drop_closed_loop_callbacks() -> None:
  """From now on, drop the 'Event loop is closed' errors a failed orbax restore leaves behind.

  tensorstore completes the reads of a restore that failed after orbax has closed its event loop; each
  completion then raises RuntimeError('Event loop is closed') into `sys.unraisablehook`, tens of tracebacks
  around the one-line warning. Those alone are dropped; anything else reaches the hook installed before.
  """
  previous = sys.unraisablehook
  if getattr(previous, "drops_closed_loop", False):
    return

  def hook(unraisable):
    error = unraisable.exc_value
    if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
      previous(unraisable)

  hook.drops_closed_loop = True
  sys.unraisablehook = hook


class ForeignRunDirectoryError(errors.UserError, RuntimeError):
  """The run directory belongs to a run of another configuration."""


RunDirectoryInUseError = locks.InUseError  # another process is running in the run directory


def _jsonable(obj: Any) -> Any:
  return json.loads(json.dumps(obj, sort_keys=True, default=str))


# -- the claim -----------------------------------------------------------------------

def _lock_name() -> str:
  """Process 0 locks `.lock`; on several processes each takes its own file (the lock is per host)."""
  return ".lock" if jax.process_index() == 0 else f".lock.{jax.process_index()}"


# Where tpu_scripts/launch.sh and sweep.sh upload the workers' logs (from before the run claims its directory).
LAUNCH_LOGS = "tpu_logs"


def _is_own_file(name: str) -> bool:
  return name in (".lock", LAUNCH_LOGS) or name.startswith(".lock.")


def _holds_files(path: str) -> bool:
  """True if `path` is a file, or a folder with a file somewhere below it."""
  if not fs.isdir(path):
    return True
  return any(files for _, _, files in fs.walk(path))


class RunDirectory:
  """A run's claim on its directory: lock, check the fingerprint, commit after start-up.

      with RunDirectory(run_dir, fingerprint) as claim:   # lock(); release() at exit
        resumed = claim.check()       # ForeignRunDirectoryError if another config owns it
        ...                           # build, restore or initialise, compile
        claim.commit(step)            # writes run_config.json (the Trainer does this)

  `overrides` (a nested dict shaped like the fingerprint, e.g.
  `{"optimizer": {"learning_rate": 1e-5}}`) are the keys allowed to differ
  from the directory's configuration when resuming; `commit(step)` appends
  them to run_config.json's "overrides" history, and `effective_overrides()`
  (recorded ones, then these) says what the resumed run must use. `files`
  ({name: JSON value}) are written beside run_config.json at commit. `known`
  names entries that may already exist in a directory not yet claimed
  (besides lock files, the launch scripts' `tpu_logs/` and empty folders).

  Multi-host: every process checks; only process 0 writes (run_config.json,
  `files`, the removal of stale temporary files). The lock is per host: each
  process locks its own file, so on a shared file system a second job is
  refused on every host, and on local disks each host is guarded.
  """

  def __init__(self, run_dir: str, fingerprint: dict, overrides: Optional[dict] = None,
               files: Optional[dict] = None, known: Iterable[str] = ()):
    self.run_dir = run_dir
    self.fingerprint = _jsonable(fingerprint)
    self.overrides = _jsonable(overrides or {})
    self.files = dict(files or {})
    self.known = frozenset(known)
    self.resumed: Optional[bool] = None
    self.committed = False
    self._stored: Optional[dict] = None
    self._history: list = []
    self._lock_path = os.path.join(fs.realpath(run_dir), _lock_name())  # one key per directory
    self._created = False

  def __enter__(self) -> "RunDirectory":
    return self.lock()

  def __exit__(self, *exc) -> None:
    self.release()

  @property
  def path(self) -> str:
    return os.path.join(self.run_dir, RUN_CONFIG)

  def lock(self) -> "RunDirectory":
    """Take the directory's lock (non-blocking); removes stale temporary files of killed writers."""
    first = not locks.held(self._lock_path)
    if first:  # (a collective on several processes: every process claims the directory once)
      distributed.check_shared_directory(self.run_dir)
    self._created = self._created or not fs.isdir(self.run_dir)
    fs.makedirs(self.run_dir)
    locks.acquire(self._lock_path, self.run_dir)
    if first and jax.process_index() == 0:
      removed = atomic.remove_stale(self.run_dir)
      if removed:
        logging.warning("removed %d temporary file(s) an interrupted run left in %s: %s", len(removed),
                        self.run_dir, ", ".join(fs.relpath(p, self.run_dir) for p in removed[:5]))
    return self

  def release(self) -> None:
    """Drop the lock (also dropped when the process exits).

    A claim of a new directory that was not committed (a failed start)
    removes the empty folders it left, so the directory stays unclaimed.
    """
    locks.release(self._lock_path)
    new = self.resumed is False or self._created
    if new and not self.committed and not locks.held(self._lock_path) and fs.isdir(self.run_dir):
      for root, _, _ in sorted(fs.walk(self.run_dir), key=lambda w: -len(w[0])):
        if root != self.run_dir or self._created:
          try:
            fs.rmdir(root)  # only empty folders go, never files
          except OSError:
            pass

  def check(self) -> bool:
    """True if the directory holds this run (resume), False if it is new.

    Raises ForeignRunDirectoryError (one line, naming the differing keys)
    for another configuration, or for a non-empty directory without
    run_config.json; ConfigError for overrides without a run to resume.
    """
    if fs.exists(self.path):
      stored = json.loads(fs.read_text(self.path))
      version = stored.pop(VERSION, 1)
      if version != FINGERPRINT_VERSION:
        raise ForeignRunDirectoryError(
            f"{self.run_dir} was written by an xtreme-jax with run fingerprints of version {version}; this one writes "
            f"version {FINGERPRINT_VERSION} and cannot resume it. Use a new RUN_DIR, or finish that run with the "
            "xtreme-jax version that started it")
      self._history = stored.pop(OVERRIDES, [])
      allowed = set(flatten(self.overrides))
      diffs = {k: v for k, v in differing_keys(stored, self.fingerprint).items() if k not in allowed}
      if diffs:
        listed = describe(diffs)
        hint = (" (optimizer settings may change on resume with --gin.RESUME_OVERRIDES=\"{'learning_rate': ...}\")"
                if all(k.startswith("optimizer.") for k in diffs) else "")
        raise ForeignRunDirectoryError(f"{self.run_dir} holds a run of another configuration; differing keys: "
                                       f"{listed}{hint}. Use a new RUN_DIR, or delete this one")
      self._stored, self.resumed = stored, True
      return True
    if self.overrides:
      raise errors.ConfigError(f"resume overrides {flatten(self.overrides)} were given but {self.run_dir} holds no "
                               "run to resume; set these values in the configuration instead")
    foreign = sorted(n for n in fs.listdir(self.run_dir) if not _is_own_file(n) and n not in self.known
                     and _holds_files(os.path.join(self.run_dir, n)))
    if foreign:
      raise ForeignRunDirectoryError(f"{self.run_dir} is not empty ({', '.join(foreign[:5])}) and holds no "
                                     f"{RUN_CONFIG}; refusing to write into it. Use a new or empty RUN_DIR")
    self.resumed = False
    return False

  def recorded_overrides(self) -> dict:
    """The overrides run_config.json records, merged in order."""
    merged: dict = {}
    for entry in self._history:
      merged = merge(merged, {k: v for k, v in entry.items() if k != "step"})
    return merged

  def effective_overrides(self) -> dict:
    """Recorded overrides, then this run's: what a resumed run must apply to its configuration."""
    return merge(self.recorded_overrides(), self.overrides)

  def new_overrides(self) -> dict:
    """This run's overrides that change the recorded values (flattened keys)."""
    recorded = flatten(self.recorded_overrides())
    return {k: v for k, v in flatten(self.overrides).items() if recorded.get(k, "<absent>") != v}

  def commit(self, step: Optional[int] = None) -> None:
    """Write run_config.json (a new run, or new overrides recorded at `step`) and `files`, atomically."""
    if self.committed:
      return
    if self.resumed is None:
      raise RuntimeError("RunDirectory.commit() before check()")
    if jax.process_index() == 0:
      new = self.new_overrides()
      if not self.resumed or new:
        history = self._history + ([{"step": step, **unflatten(new)}] if new else [])
        record = {VERSION: FINGERPRINT_VERSION, **(self._stored if self.resumed else self.fingerprint)}
        if history:
          record[OVERRIDES] = history
        atomic.write_json(self.path, record)
        self._history = history
      for name, value in self.files.items():
        atomic.write_json(os.path.join(self.run_dir, name), value)
    self.committed = True


# -- checkpoints ---------------------------------------------------------------------

def _all_hosts(ok: bool) -> bool:
  """`ok` on every process (trivially true on one)."""
  if jax.process_count() == 1:
    return ok
  from jax.experimental import multihost_utils
  import numpy as np
  return bool(np.all(multihost_utils.process_allgather(np.asarray(ok))))


def check_remote_checkpoints(directory: str) -> None:
  """ConfigError if orbax cannot reach checkpoints under the URL `directory` from this environment.

  orbax lists the steps of a `gs://` directory with google-cloud-storage (to
  detect hierarchical-namespace buckets), which is not one of its requirements.
  """
  if not directory.startswith("gs://"):
    return
  try:
    found = importlib.util.find_spec("google.cloud.storage") is not None
  except ModuleNotFoundError:  # no google.cloud namespace at all
    found = False
  if not found:
    raise errors.ConfigError(f"checkpoints under {directory} need the google-cloud-storage package (orbax lists "
                             "gs:// checkpoint steps with it): pip install 'google-cloud-storage>=2.14'")


class HostStateHandler(ocp.CheckpointHandler):
  """An orbax item that every process writes and reads for itself: `host-<process index>.json`.

  The file is a SHA-256 line, then the JSON: a truncated or altered file
  fails to restore, so the checkpoint counts as unreadable. A process whose
  own file is missing (the run had fewer hosts) reads host 0's, whose content
  says which hosts wrote it.
  """

  def save(self, directory, args: "HostStateSave") -> None:
    payload = json.dumps(args.state, sort_keys=True)
    digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()
    (directory / f"host-{jax.process_index()}.json").write_text(f"{digest}\n{payload}")

  def restore(self, directory, args: Optional["HostStateRestore"] = None) -> Any:
    path = directory / f"host-{jax.process_index()}.json"
    if not path.exists():
      path = directory / "host-0.json"
    digest, _, payload = path.read_text().partition("\n")
    if hashlib.sha256(payload.encode("utf-8")).hexdigest() != digest:
      raise ValueError(f"{path}: checksum mismatch (a truncated or altered input state)")
    return json.loads(payload)


@ocp.args.register_with_handler(HostStateHandler, for_save=True)
@dataclasses.dataclass
class HostStateSave(ocp.args.CheckpointArgs):
  state: Any


@ocp.args.register_with_handler(HostStateHandler, for_restore=True)
@dataclasses.dataclass
class HostStateRestore(ocp.args.CheckpointArgs):
  pass


def close_manager(manager: ocp.CheckpointManager) -> None:
  """Waits for `manager`'s writes and its start-up clean-up of unfinished folders, then closes it. orbax's own
  `close` does not wait for that clean-up (a thread started by the constructor and awaited only before a save or
  a restore): a run stopped before either would leave it scanning a run directory that a failed start then
  removes, and its traceback, logged from that thread, raced the main thread's `ast` use on CPython 3.11."""
  manager.wait_until_finished()
  await_cleanup = getattr(manager, "_maybe_await_cleanup_tmp_directory", None)  # orbax 0.11-0.12's name
  if await_cleanup is not None:
    await_cleanup()
  manager.close()


def _manager(directory: str, keep: Optional[int], items: tuple) -> ocp.CheckpointManager:
  directory = fs.abspath(directory)
  check_remote_checkpoints(directory)
  return ocp.CheckpointManager(
      directory,
      options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, cleanup_tmp_directories=True),
      item_names=items)


class Checkpointer:
  """orbax CheckpointManager with restore-with-fallback; unreadable newer steps are set aside.

  Items: `state` (the train state), `meta` ({"step", "data_position"}) and,
  for inputs that keep state (`SeqioPairSource`), `input`: each host's input
  state (`HostStateHandler`), written in the same step directory, so the
  three are committed together.
  """

  def __init__(self, directory: str, every: int, keep: int):
    self.every = every
    self.directory = fs.abspath(directory)
    self.manager = _manager(directory, keep, ("state", "meta", "input"))

  def save(self, step: int, state: Any, data_position: int, force: bool = False,
           input_state: Optional[Callable[[], Any]] = None, extra: Optional[dict] = None) -> bool:
    """Saves at multiples of `every` (or `force`); `input_state()` is called only when a checkpoint is written;
    `extra` (JSON-able) joins the meta item."""
    if not force and step % self.every:
      return False
    if step in self.manager.all_steps():
      return False
    items = {"state": ocp.args.StandardSave(state),
             "meta": ocp.args.JsonSave({**(extra or {}), "step": int(step), "data_position": int(data_position)})}
    if input_state is not None:
      items["input"] = HostStateSave(input_state())
    return self.manager.save(step, args=ocp.args.Composite(**items), force=True)

  def restore_latest(self, abstract_state: Any) -> Optional[tuple[Any, dict]]:
    """(state, meta) of the newest readable checkpoint, or None if none is.

    `meta["input"]` is this host's input state, or None for a checkpoint
    without one. Newer steps that could not be read (train or input state)
    are set aside (renamed out of orbax's step names, with a warning) so that
    the run writes them again; if no step is readable, nothing is renamed.
    """
    unreadable = []
    drop_closed_loop_callbacks()  # before any attempt: a failed read's callbacks may come before its exception
    for step in sorted(self.manager.all_steps(), reverse=True):
      items = {"state": ocp.args.StandardRestore(abstract_state), "meta": ocp.args.JsonRestore()}
      has_input = fs.exists(os.path.join(self.directory, str(step), "input"))
      if has_input:
        items["input"] = HostStateRestore()
      try:
        restored = self.manager.restore(step, args=ocp.args.Composite(**items))
        ok = True
      except Exception as e:  # noqa: BLE001 - any unreadable checkpoint is skipped
        logging.warning("checkpoint at step %d is unreadable (%s: %s); trying an earlier one",
                        step, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
        ok = False
      if not _all_hosts(ok):
        unreadable.append(step)
        continue
      self._set_aside(unreadable, resumed_from=step)
      return restored.state, {**restored.meta, "input": restored.input if has_input else None}
    return None

  def _set_aside(self, steps: list[int], resumed_from: int) -> None:
    if not steps:
      return
    if jax.process_index() == 0:
      stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
      for step in steps:
        old = os.path.join(self.directory, str(step))
        new = os.path.join(self.directory, f"corrupt-{step}-{stamp}")
        fs.rename(old, new)
        logging.warning("set aside the unreadable checkpoint %s as %s; resuming from step %d (the steps after it "
                        "are trained again)", old, new, resumed_from)
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils
      multihost_utils.sync_global_devices(f"set aside {steps}")
    self.manager.reload()

  def restore_params(self, step: int) -> Any:
    """Only the parameters of checkpoint `step` (host arrays), whatever optimizer wrote it."""
    restored = self.manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    return restored.state["params"]

  def latest_step(self) -> Optional[int]:
    return self.manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def close(self) -> None:
    close_manager(self.manager)


class BestParams:
  """The parameters with the highest value of one evaluation metric so far, in `<run_dir>/best/<step>/`.

  Items `params` (orbax) and `meta = {"step", "metric", "value"}`. A new
  best is written completely before the previous one is deleted.
  """

  def __init__(self, directory: str, metric: str):
    self.directory, self.metric = directory, metric
    self._manager: Optional[ocp.CheckpointManager] = None
    self.meta: Optional[dict] = None
    if fs.isdir(directory):
      metas = [self._read_meta(s) for s in self.manager.all_steps()]
      self.meta = max(metas, key=lambda m: m["value"]) if metas else None

  @property
  def manager(self) -> ocp.CheckpointManager:
    if self._manager is None:  # created on first use: a run without evaluations leaves no best/
      self._manager = _manager(self.directory, None, ("params", "meta"))
    return self._manager

  def _read_meta(self, step: int) -> dict:
    return dict(self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta)

  def offer(self, step: int, params: Any, value: float) -> bool:
    """Keep `params` if `value` beats the best so far; True if it did."""
    if self.meta is not None and not value > self.meta["value"]:
      return False
    meta = {"step": int(step), "metric": self.metric, "value": float(value)}
    if step in self.manager.all_steps():
      self.manager.delete(step)
    self.manager.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                                    meta=ocp.args.JsonSave(meta)), force=True)
    self.manager.wait_until_finished()
    for old in self.manager.all_steps():
      if old != step:
        self.manager.delete(old)
    self.meta = meta
    return True

  def restore(self, abstract_params: Any) -> Optional[Any]:
    """The best parameters restored into `abstract_params` (shapes and shardings), or None."""
    if self.meta is None:
      return None
    restored = self.manager.restore(self.meta["step"], args=ocp.args.Composite(
        params=ocp.args.StandardRestore(abstract_params)))
    return restored.params

  def close(self) -> None:
    if self._manager is not None:
      close_manager(self._manager)
