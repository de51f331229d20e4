"""A benchmark run's bookkeeping: status lines and progress bars, digests and stamps of what made a file, and the
records of finished predictions that let a re-run keep them."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any, Optional, Sequence

import jax
from tqdm.auto import tqdm

from xtreme_jax import atomic, fs
from xtreme_jax.data import paths


def say(message: str) -> None:
  """One status line (process 0), printed without breaking an open progress bar."""
  if jax.process_index() == 0:
    tqdm.write(message)


def progress(items: Sequence, desc: str, unit: str = "lang", leave: bool = True, min_items: int = 0) -> tqdm:
  """A progress bar over `items` (process 0, at least `min_items` of them; sparse updates when stderr is not
  a terminal, as the Trainer's bar)."""
  return tqdm(items, desc=desc, unit=unit, leave=leave, disable=jax.process_index() != 0 or len(items) < min_items,
              dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 15)


def normalized(obj: Any) -> Any:
  """`obj` as its JSON reads back (tuples as lists, keys sorted, other objects as strings)."""
  return json.loads(json.dumps(obj, sort_keys=True, default=str))


def digest(obj: Any) -> str:
  """SHA-256 of `obj`'s JSON (keys sorted)."""
  return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(path: str) -> Optional[str]:
  """SHA-256 of a file's bytes; None when there is none."""
  if not fs.isfile(path):
    return None
  return hashlib.sha256(fs.read_bytes(path)).hexdigest()


def stamp(path: str) -> list:
  """[path, size, mtime_ns] of a file or folder, [path] if there is none (or it is not a local path)."""
  try:
    st = os.stat(path)
  except (OSError, ValueError):
    return [path]
  return [path, st.st_size, st.st_mtime_ns]


def read_json(path: str) -> Optional[Any]:
  """The JSON of a run file; None when there is none or it is unreadable (rewritten then)."""
  if not fs.isfile(path):
    return None
  try:
    return json.loads(fs.read_text(path))
  except ValueError:
    return None


class PredictionRecords:
  """`<submission folder>.records.json`: per prediction file, what made it and a digest of its content.

  `up_to_date(path, made_by)` holds when the file still has the recorded
  content and was made by the same `made_by` digest (see
  `Predictions.made_by`); None (a model not finished yet) never is.
  """

  def __init__(self, directory: str):
    self.directory = directory
    self.path = directory.rstrip(os.sep) + ".records.json"
    self.entries = read_json(self.path) or {}

  def up_to_date(self, path: str, made_by: Optional[str]) -> bool:
    entry = self.entries.get(fs.relpath(path, self.directory))
    return made_by is not None and entry == {"made_by": made_by, "content": file_digest(path)}

  def record(self, path: str, made_by: Optional[str]) -> None:
    name = fs.relpath(path, self.directory)
    if made_by is None:
      self.entries.pop(name, None)
    else:
      self.entries[name] = {"made_by": made_by, "content": file_digest(path)}
    if jax.process_index() == 0:
      atomic.write_json(self.path, self.entries)


def fingerprint_dir(data_dir: Optional[str]) -> Optional[str]:
  """A data folder as fingerprints record it: absolute, the bundled sample by its package-relative name."""
  return paths.portable(fs.abspath(data_dir)) if data_dir else None
