"""Mesh construction and the one table from logical axis names to mesh axes.

Networks name only logical axes (`batch, length, embed, heads, kv, mlp,
vocab, positions, token_types, languages, layers`). `RULES[layout]` maps them onto the
`('data', 'model')` mesh:

- `data_parallel`: the batch is split over every device, parameters replicated.
- `fsdp`: the batch is split over every device and so is every parameter's
  `embed` dimension (XLA gathers weights where they are used).
- `tensor_parallel`: the batch is split over `data`; attention heads, the FFN
  hidden dimension and the vocabulary over `model` (Megatron style).

A parameter dimension that the mapped mesh axes do not divide evenly is
replicated instead (with a log line), because XLA requires even shards.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from xtreme_jax import errors

MESH_AXES = ("data", "model")
_ALL = ("data", "model")

_REPLICATED = (("length", None), ("embed", None), ("heads", None), ("kv", None), ("mlp", None),
               ("vocab", None), ("positions", None), ("token_types", None), ("languages", None), ("layers", None),
               ("classes", None))


def _rules(*overrides) -> tuple:
  names = {k for k, _ in overrides}
  return tuple(overrides) + tuple(r for r in _REPLICATED if r[0] not in names)


RULES: dict[str, tuple] = {
    "data_parallel": _rules(("batch", _ALL)),
    "fsdp": _rules(("batch", _ALL), ("embed", _ALL)),
    "tensor_parallel": _rules(("batch", "data"), ("heads", "model"), ("mlp", "model"), ("vocab", "model")),
}


@dataclasses.dataclass(frozen=True)
class PartitionConfig:
  """How to lay out a run: mesh shape over ('data', 'model') and a layout.

  `mesh_shape=(-1, 1)` puts every device on the data axis; -1 is filled in
  from the device count.
  """

  layout: str = "data_parallel"
  mesh_shape: tuple = (-1, 1)

  def __post_init__(self):
    if self.layout not in RULES:
      raise errors.ConfigError(f"PartitionConfig.layout = {self.layout!r}: expected one of {sorted(RULES)}")
    shape = self.mesh_shape
    if (not isinstance(shape, (tuple, list)) or len(shape) != 2
        or not all(isinstance(s, int) and not isinstance(s, bool) and (s > 0 or s == -1) for s in shape)):
      raise errors.ConfigError(f"PartitionConfig.mesh_shape = {shape!r}: expected two sizes (or -1) for the mesh "
                               f"axes {MESH_AXES}, e.g. (-1, 1)")

  @property
  def rules(self) -> tuple:
    return RULES[self.layout]


def make_mesh(mesh_shape: Sequence[int] = (-1, 1), devices: Sequence[Any] | None = None) -> Mesh:
  """A ('data', 'model') mesh over `devices` (default: all devices)."""
  devices = list(jax.devices() if devices is None else devices)
  shape = list(mesh_shape)
  if shape.count(-1) > 1:
    raise errors.ConfigError(f"mesh_shape {tuple(mesh_shape)}: at most one -1 allowed")
  if -1 in shape:
    known = math.prod(s for s in shape if s != -1)
    shape[shape.index(-1)] = len(devices) // known
  if math.prod(shape) != len(devices) or 0 in shape:
    raise errors.ConfigError(f"mesh_shape {tuple(mesh_shape)} needs {math.prod(shape) or 'more'} devices; "
                             f"{len(devices)} available (MESH_SHAPE)")
  return Mesh(np.asarray(devices).reshape(shape), MESH_AXES)


def logical_to_spec(logical_axes: Sequence[str | None], rules: tuple) -> PartitionSpec:
  """PartitionSpec for one array's logical axes under `rules`."""
  return nn.logical_to_mesh_axes(tuple(logical_axes), rules)


def _fit_to_shape(spec: PartitionSpec, shape: Sequence[int], mesh: Mesh, name: str) -> PartitionSpec:
  fitted = []
  for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
    if axes is None:
      fitted.append(None)
      continue
    size = math.prod(mesh.shape[a] for a in (axes if isinstance(axes, tuple) else (axes,)))
    if dim % size:
      logging.info("%s: dimension %d not divisible by %s (%d devices); replicated", name, dim, axes, size)
      fitted.append(None)
    else:
      fitted.append(axes)
  return PartitionSpec(*fitted)


def param_specs(boxed_params: Any, mesh: Mesh, rules: tuple) -> Any:
  """PartitionSpecs for a tree of `nn.LogicallyPartitioned` (abstract) params."""
  logical = nn.get_partition_spec(boxed_params)
  shapes = nn.unbox(boxed_params)

  def one(path, lspec, leaf):
    name = jax.tree_util.keystr(path)
    return _fit_to_shape(logical_to_spec(tuple(lspec), rules), leaf.shape, mesh, name)

  return jax.tree_util.tree_map_with_path(
      one, logical, shapes, is_leaf=lambda x: isinstance(x, PartitionSpec))


def to_shardings(specs: Any, mesh: Mesh) -> Any:
  return jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), specs,
                                is_leaf=lambda x: isinstance(x, PartitionSpec))


def batch_sharding(mesh: Mesh, rules: tuple) -> NamedSharding:
  """Sharding of an input array whose first dimension is the batch."""
  return NamedSharding(mesh, logical_to_spec(("batch",), rules))


def per_device_bytes(tree: Any) -> int:
  """Bytes of `tree` resident on the first device."""
  dev = jax.devices()[0]
  total = 0
  for leaf in jax.tree_util.tree_leaves(tree):
    for shard in leaf.addressable_shards:
      if shard.device == dev:
        total += shard.data.size * shard.data.dtype.itemsize
  return total


def data_parallelism(sharding: NamedSharding) -> tuple[tuple, int]:
  """(mesh axes, device count) that a batch's first dimension is split over."""
  axes = sharding.spec[0] if len(sharding.spec) else None
  axes = () if axes is None else (axes if isinstance(axes, tuple) else (axes,))
  return axes, math.prod(sharding.mesh.shape[a] for a in axes)


def feed_slots(sharding: NamedSharding, process_of: Callable[[Any], int] = lambda device: device.process_index
               ) -> dict[int, tuple[int, int]]:
  """Which rows of a global batch each process feeds, as (slot, slots): process p passes rows
  [slot * B / slots, (slot + 1) * B / slots) of every global batch of B rows (`source.batch(step, slot, slots)`).

  Read from the batch sharding: a process feeds exactly the rows its own devices hold. On a data-parallel or
  FSDP mesh that is its share (slot = its rank among the processes, slots = the process count); where the model
  axis spans processes, processes that hold the same rows get the same slot (mesh (1, 4) over two hosts: (0, 1)
  on both, each passing the whole batch). A layout in which a process would hold rows that are not one slot
  (rows from two separate parts of the batch) is refused. `process_of` names a device's process.
  """
  _, shards = data_parallelism(sharding)
  rows: dict[int, set] = {}
  for device, index in sharding.devices_indices_map((shards,)).items():
    part = index[0] if index else slice(None)
    start, stop, _ = part.indices(shards)
    rows.setdefault(process_of(device), set()).update(range(start, stop))
  slots = {}
  for process, held in sorted(rows.items()):
    first, count = min(held), len(held)
    if held != set(range(first, first + count)) or shards % count or first % count:
      raise errors.ConfigError(
          f"process {process} would hold batch rows {sorted(held)} of {shards} parts: not one contiguous slot; "
          f"order the mesh's devices by host or put the model axis within a host (MESH_SHAPE)")
    slots[process] = (first // count, shards // count)
  return slots


def feed_slot(sharding: NamedSharding) -> tuple[int, int]:
  """This process's (slot, slots) of `feed_slots`."""
  return feed_slots(sharding)[jax.process_index()]


def host_batch_to_global(batch: dict, sharding: NamedSharding) -> dict:
  """Assemble this host's slice of the global batch into global jax Arrays."""
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in batch.items()}
