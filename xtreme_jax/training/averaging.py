"""Checkpoint averaging: the mean parameters of a run's newest checkpoints (VECO's translation recipe).

`average_checkpoints(run_dir, last=10)` averages `state.params` of the newest
`last` checkpoints under `<run_dir>/checkpoints` and writes the mean as a
params-only checkpoint `<run_dir>/averaged/<newest step>/` (orbax items
`params` and `meta = {"step", "steps", "last", "kept_from_newest"}`).

- Floating-point leaves (float32, bfloat16, ...) are summed in float32 (at
  least), one checkpoint at a time (host memory: the sum and one checkpoint's
  parameters), divided by the count and stored in their own dtype. Other
  leaves (integers, booleans) cannot be averaged: they are kept from the
  newest checkpoint and listed in `meta["kept_from_newest"]`.
- The parameter trees (keys, shapes, dtypes) must be equal; the first
  differing key is named otherwise. Fewer than `last` checkpoints is refused
  unless `allow_fewer` (the CLI's `--allow-fewer`), which averages those there are.
- One average is kept per run. orbax writes it into a temporary folder and
  renames it when complete, so a crash never leaves a half-written average;
  older averages are deleted only after the new one is complete. Averaging
  the same steps again is a no-op; other steps with the same newest step
  (another `last`) replace the average: the old one is deleted first, so a
  crash in between leaves none (never a mixed one).
- It holds the run directory's lock (`RunDirectory.lock()`): refused while a
  run (or another averaging) uses the directory. Single process: parameters
  are read to the host, whatever mesh wrote them.

Readers: `restore_averaged` (the average, or None), `averaged_meta`, and
`restore_averaged_or_latest` (the average if it covers the newest
checkpoint, else the newest checkpoint's parameters), for decoding.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from tqdm.auto import tqdm

from xtreme_jax import errors, fs
from xtreme_jax.training import checkpoints
from xtreme_jax.training.checkpoints import RunDirectory

CHECKPOINTS = "checkpoints"
AVERAGED = "averaged"


@dataclasses.dataclass(frozen=True)
class Averaged:
  """What `average_checkpoints` did: `path` holds the mean of `steps` (newest `step`)."""

  path: str
  step: int
  steps: tuple[int, ...]
  kept_from_newest: tuple[str, ...]
  written: bool  # False: the same average was already there (nothing written)


# -- trees ------------------------------------------------------------------------

def _key(path: tuple) -> str:
  return "/".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)


def _leaves(tree: Any) -> dict[str, Any]:
  """{"a/b/kernel": leaf} in the tree's leaf order."""
  return {_key(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _signature(metadata: Any) -> dict[str, tuple]:
  """{key: (shape, dtype name)} of a parameter tree or its orbax metadata."""
  return {k: (tuple(getattr(m, "shape", ())), np.dtype(m.dtype).name) for k, m in _leaves(metadata).items()}


def _describe(entry: Optional[tuple]) -> str:
  return "absent" if entry is None else f"shape {entry[0]} {entry[1]}"


def _first_difference(a: dict, b: dict, compare=lambda x, y: x == y) -> Optional[str]:
  for k in sorted(set(a) | set(b)):
    if k not in a or k not in b or not compare(a[k], b[k]):
      return k
  return None


def _is_float(dtype: Any) -> bool:
  return bool(jnp.issubdtype(np.dtype(dtype), jnp.floating))


def _host_args(metadata: Any) -> tuple[Any, Any]:
  """(item, restore_args) restoring a tree as host numpy arrays in their stored dtypes."""
  item = jax.tree_util.tree_map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), metadata)
  return item, jax.tree_util.tree_map(lambda m: ocp.RestoreArgs(restore_type=np.ndarray), metadata)


def _target_args(abstract: Any) -> Any:
  """Restore args for `abstract` leaves: sharded jax arrays where they have a sharding, else numpy arrays."""
  def arg(x):
    sharding = getattr(x, "sharding", None)
    if sharding is not None:
      return ocp.ArrayRestoreArgs(sharding=sharding, global_shape=tuple(x.shape), dtype=x.dtype)
    return ocp.RestoreArgs(restore_type=np.ndarray, dtype=x.dtype)
  return jax.tree_util.tree_map(arg, abstract)


def _check_target(abstract: Any, metadata: Any, where: str) -> None:
  """DataError naming the first key whose presence or shape differs between `abstract` and the stored tree."""
  want, have = _signature(abstract), _signature(metadata)
  key = _first_difference(want, have, lambda x, y: x[0] == y[0])
  if key is not None:
    raise errors.DataError(f"{where} does not fit the model's parameters; first differing key {key}: "
                           f"{_describe(have.get(key))} stored, {_describe(want.get(key))} expected")


# -- managers ---------------------------------------------------------------------

def _checkpoint_manager(run_dir: str) -> ocp.CheckpointManager:
  """The run's checkpoints, read only (items `state`, `meta`, `input`)."""
  directory = fs.abspath(os.path.join(run_dir, CHECKPOINTS))
  checkpoints.check_remote_checkpoints(directory)
  return ocp.CheckpointManager(
      directory, options=ocp.CheckpointManagerOptions(create=False),
      item_handlers={"state": ocp.PyTreeCheckpointHandler(), "meta": ocp.JsonCheckpointHandler(),
                     "input": checkpoints.HostStateHandler()})


def _averaged_manager(run_dir: str, create: bool = False) -> ocp.CheckpointManager:
  directory = fs.abspath(os.path.join(run_dir, AVERAGED))
  checkpoints.check_remote_checkpoints(directory)
  return ocp.CheckpointManager(
      directory, options=ocp.CheckpointManagerOptions(create=create, cleanup_tmp_directories=create),
      item_handlers={"params": ocp.PyTreeCheckpointHandler(), "meta": ocp.JsonCheckpointHandler()})


def _checkpoint_steps(run_dir: str) -> list[int]:
  if not fs.isdir(os.path.join(run_dir, CHECKPOINTS)):
    return []
  manager = _checkpoint_manager(run_dir)
  try:
    return sorted(manager.all_steps())
  finally:
    manager.close()


def _unreadable(where: str, e: Exception) -> errors.DataError:
  first = str(e).splitlines()[0][:200] if str(e) else ""
  return errors.DataError(f"{where} cannot be read ({type(e).__name__}: {first})")


def _params_metadata(manager: ocp.CheckpointManager, step: int) -> Any:
  where = f"checkpoint {step} in {manager.directory}"
  try:
    state = manager.item_metadata(step)["state"]
  except Exception as e:  # noqa: BLE001 - any unreadable checkpoint is one line
    raise _unreadable(where, e) from e
  tree = getattr(state, "tree", state)
  if not isinstance(tree, dict) or "params" not in tree:
    raise errors.DataError(f"{where} holds no state.params; expected a checkpoint written by the Trainer")
  return tree["params"]


def _restore_checkpoint_params(manager: ocp.CheckpointManager, step: int, item: Any, restore_args: Any) -> Any:
  try:
    restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
        item={"params": item}, restore_args={"params": restore_args}, partial_restore=True)))
  except Exception as e:  # noqa: BLE001
    raise _unreadable(f"checkpoint {step} in {manager.directory}", e) from e
  return restored.state["params"]


# -- averaging --------------------------------------------------------------------

def _choose_steps(run_dir: str, available: list[int], last: int, allow_fewer: bool) -> list[int]:
  where = os.path.join(run_dir, CHECKPOINTS)
  if not available:
    raise errors.MissingInputError(f"{where} holds no checkpoint; nothing to average")
  if len(available) < last and not allow_fewer:
    listed = ", ".join(map(str, available))
    raise errors.ConfigError(
        f"averaging the last {last} checkpoints needs {last}, but {where} holds {len(available)} (steps {listed}); "
        f"pass --allow-fewer (allow_fewer=True) to average these {len(available)}, or keep more checkpoints "
        "(TrainerConfig.keep_checkpoints)")
  return available[-last:]


def _existing(manager: ocp.CheckpointManager, step: int) -> Optional[dict]:
  if step not in manager.all_steps():
    return None
  return dict(manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta)


def _check_trees(manager: ocp.CheckpointManager, steps: list[int]) -> Any:
  """The newest step's params metadata, after checking that every step's tree equals it."""
  newest = _params_metadata(manager, steps[-1])
  reference = _signature(newest)
  for step in reversed(steps[:-1]):
    other = _signature(_params_metadata(manager, step))
    key = _first_difference(reference, other)
    if key is not None:
      raise errors.DataError(
          f"checkpoints {steps[-1]} and {step} in {manager.directory} have different parameter trees; first "
          f"differing key {key}: {_describe(reference.get(key))} at step {steps[-1]}, {_describe(other.get(key))} "
          f"at step {step}")
  return newest


def _mean(manager: ocp.CheckpointManager, steps: list[int], metadata: Any, progress: bool) -> tuple[Any, list]:
  """(mean params, keys kept from the newest): restores one checkpoint at a time, newest first."""
  item, restore_args = _host_args(metadata)
  treedef = jax.tree_util.tree_structure(item)
  dtypes = {k: np.dtype(m.dtype) for k, m in _leaves(metadata).items()}
  floats = [k for k, dtype in dtypes.items() if _is_float(dtype)]
  total: dict[str, np.ndarray] = {}
  for step in tqdm(list(reversed(steps)), desc="averaging", unit="checkpoint", disable=not progress):
    params = _leaves(_restore_checkpoint_params(manager, step, item, restore_args))
    if not total:
      total = {k: (np.array(v, np.promote_types(v.dtype, np.float32)) if k in floats else v)
               for k, v in params.items()}
      continue
    for k in floats:
      total[k] += params[k].astype(total[k].dtype, copy=False)
    del params
  for k in floats:
    total[k] /= len(steps)
    total[k] = total[k].astype(dtypes[k], copy=False)
  kept = [k for k in dtypes if k not in floats]
  return jax.tree_util.tree_unflatten(treedef, [total[k] for k in dtypes]), kept


def average_checkpoints(run_dir: str, last: int = 10, allow_fewer: bool = False, progress: bool = False) -> Averaged:
  """Average the parameters of the newest `last` checkpoints of `run_dir` into `<run_dir>/averaged/<newest step>/`.

  Raises (one line each) MissingInputError without checkpoints, ConfigError
  for fewer than `last` (unless `allow_fewer`) or `last` < 1, DataError for
  differing parameter trees or an unreadable checkpoint, and
  RunDirectoryInUseError while another process holds the run directory.
  """
  if isinstance(last, bool) or not isinstance(last, int) or last < 1:
    raise errors.ConfigError(f"last = {last!r}: expected a positive number of checkpoints to average")
  if not fs.isdir(run_dir):
    raise errors.MissingInputError(f"{run_dir} does not exist; expected a run directory holding checkpoints/")
  with RunDirectory(run_dir, {}):
    steps = _choose_steps(run_dir, _checkpoint_steps(run_dir), last, allow_fewer)
    newest = steps[-1]
    path = os.path.join(run_dir, AVERAGED, str(newest))
    found = _averaged_meta_at(run_dir, newest)
    if found is not None and found.get("steps") == steps:
      return Averaged(path, newest, tuple(steps), tuple(found.get("kept_from_newest", ())), written=False)
    source = _checkpoint_manager(run_dir)
    try:
      params, kept = _mean(source, steps, _check_trees(source, steps), progress)
    finally:
      source.close()
    if kept:
      logging.warning("not averaged (not floating point), kept from step %d: %s", newest, ", ".join(kept))
    meta = {"step": newest, "steps": steps, "last": last, "kept_from_newest": kept}
    out = _averaged_manager(run_dir, create=True)
    try:
      if found is not None:
        out.delete(newest)  # another set of steps with the same newest step: replaced
      out.save(newest, args=ocp.args.Composite(params=ocp.args.PyTreeSave(params), meta=ocp.args.JsonSave(meta)),
               force=True)
      out.wait_until_finished()
      for old in out.all_steps():
        if old != newest:
          out.delete(old)
    finally:
      out.close()
  return Averaged(path, newest, tuple(steps), tuple(kept), written=True)


# -- readers ----------------------------------------------------------------------

def _averaged_step(run_dir: str) -> Optional[int]:
  if not fs.isdir(os.path.join(run_dir, AVERAGED)):
    return None
  manager = _averaged_manager(run_dir)
  try:
    return manager.latest_step()
  finally:
    manager.close()


def _averaged_meta_at(run_dir: str, step: Optional[int]) -> Optional[dict]:
  if step is None or not fs.isdir(os.path.join(run_dir, AVERAGED)):
    return None
  manager = _averaged_manager(run_dir)
  try:
    return _existing(manager, step)
  finally:
    manager.close()


def averaged_meta(run_dir: str) -> Optional[dict]:
  """The average's meta ({"step", "steps", "last", "kept_from_newest"}), or None if `run_dir` has none."""
  return _averaged_meta_at(run_dir, _averaged_step(run_dir))


def restore_averaged(run_dir: str, abstract_params: Any = None) -> Optional[Any]:
  """The averaged parameters, or None if `run_dir` has none.

  `abstract_params` (e.g. `jax.ShapeDtypeStruct`s with shardings) gives the
  tree, dtypes and placement; leaves without a sharding come back as numpy
  arrays. None: host numpy arrays in the stored dtypes.
  """
  step = _averaged_step(run_dir)
  if step is None:
    return None
  manager = _averaged_manager(run_dir)
  where = f"the averaged parameters {os.path.join(run_dir, AVERAGED, str(step))}"
  try:
    try:
      metadata = manager.item_metadata(step)["params"]
    except Exception as e:  # noqa: BLE001
      raise _unreadable(where, e) from e
    metadata = getattr(metadata, "tree", metadata)
    if abstract_params is None:
      item, restore_args = _host_args(metadata)
    else:
      _check_target(abstract_params, metadata, where)
      item, restore_args = abstract_params, _target_args(abstract_params)
    restored = manager.restore(step, args=ocp.args.Composite(
        params=ocp.args.PyTreeRestore(item=item, restore_args=restore_args)))
    return restored.params
  finally:
    manager.close()


def restore_latest_params(run_dir: str, abstract_params: Any = None) -> tuple[Any, int]:
  """(params, step) of the newest checkpoint (as `restore_averaged` places them); MissingInputError if none."""
  steps = _checkpoint_steps(run_dir)
  if not steps:
    raise errors.MissingInputError(f"{os.path.join(run_dir, CHECKPOINTS)} holds no checkpoint")
  manager = _checkpoint_manager(run_dir)
  try:
    metadata = _params_metadata(manager, steps[-1])
    if abstract_params is None:
      item, restore_args = _host_args(metadata)
    else:
      _check_target(abstract_params, metadata, f"checkpoint {steps[-1]} in {manager.directory}")
      item, restore_args = abstract_params, _target_args(abstract_params)
    return _restore_checkpoint_params(manager, steps[-1], item, restore_args), steps[-1]
  finally:
    manager.close()


def restore_averaged_or_latest(run_dir: str, abstract_params: Any = None) -> tuple[Any, dict]:
  """(params, source) for decoding: the average if it covers the newest checkpoint, else that checkpoint.

  `source` is {"source": "averaged", "step", "steps"} or {"source":
  "checkpoint", "step"}. An average older than the newest checkpoint (the run
  trained on after it) is not used, with a warning. MissingInputError if
  `run_dir` holds neither.
  """
  meta = averaged_meta(run_dir)
  steps = _checkpoint_steps(run_dir)
  if meta is not None and (not steps or meta["step"] >= steps[-1]):
    logging.info("using the average of checkpoints %s of %s", meta["steps"], run_dir)
    return restore_averaged(run_dir, abstract_params), {"source": "averaged", "step": meta["step"],
                                                        "steps": list(meta["steps"])}
  if meta is not None:
    logging.warning("the average in %s (steps %s) is older than checkpoint %d; using that checkpoint's parameters "
                    "(run `xtreme-jax average-checkpoints %s` again to average the newest)", os.path.join(
                        run_dir, AVERAGED), meta["steps"], steps[-1], run_dir)
  elif steps:
    logging.info("no averaged parameters in %s; using checkpoint %d", run_dir, steps[-1])
  if not steps:
    raise errors.MissingInputError(f"{run_dir} holds no checkpoint and no averaged parameters")
  params, step = restore_latest_params(run_dir, abstract_params)
  return params, {"source": "checkpoint", "step": step}
