"""Atomic file writes: a temporary file in the same directory, then `os.replace`.

Readers never see half a file, and an interrupted write leaves the old file.
A process killed mid-write leaves its `.<name>.<random>.tmp` file behind;
`remove_stale` deletes such files (and orbax's temporary checkpoint folders)
when a run directory is claimed again, and `remove_stale_siblings` those of
one path (e.g. the temporary folder of a directory written whole, `hf`)
before it is written again.

A URL (`gs://...`, see `xtreme_jax.fs`) is written directly: an object upload
is atomic by itself (the object appears, or is replaced, only when the upload
completes), so no temporary object is made and none can be left behind.
`write_with` renders into a local temporary file first, then uploads it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Any, Callable

from xtreme_jax import fs

_TMP_SUFFIX = ".tmp"
_RANDOM = r"[A-Za-z0-9_]{8}"  # tempfile's random part
_STALE_FILE = re.compile(rf"^\..+\.{_RANDOM}\.tmp$")  # mkstemp's names below, and mkdtemp's (`hf`)
_STALE_DIR = re.compile(r"\.orbax-checkpoint-tmp")  # orbax writes a step or item into one, then renames it


def _local_write_with(path: str, write: Callable[[str], None]) -> None:
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=_TMP_SUFFIX)
  os.close(fd)
  try:
    write(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file ordinary permissions
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_with(path: str, write: Callable[[str], None]) -> None:
  """`write(tmp_path)` to a temporary file next to `path`, then rename it over `path`.

  For a URL the temporary file is local (system temporary folder) and is then
  uploaded to `path`.
  """
  if not fs.is_remote(path):
    _local_write_with(path, write)
    return
  with tempfile.TemporaryDirectory(prefix="xtreme_jax_upload_") as tmp_dir:
    tmp = os.path.join(tmp_dir, fs.basename(path) or "upload")
    write(tmp)
    with open(tmp, "rb") as f:
      write_bytes(path, f.read())


def write_bytes(path: str, data: bytes) -> None:
  if fs.is_remote(path):
    fs.write_bytes(path, data)  # one upload: atomic
    return

  def write(tmp: str) -> None:
    with open(tmp, "wb") as f:
      f.write(data)
  _local_write_with(path, write)


def write_text(path: str, text: str) -> None:
  """UTF-8, line ends written as given."""
  write_bytes(path, text.encode("utf-8"))


def write_json(path: str, obj: Any) -> None:
  """Indented UTF-8 JSON with a final newline."""
  write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def remove_stale(directory: str) -> list[str]:
  """Delete the temporary files and folders interrupted writes left under `directory`; returns their paths.

  `.<name>.<random>.tmp` files and folders (`write_with`; a directory written
  whole, `remove_stale_siblings`) and orbax's temporary checkpoint folders.

  Only call this while no other process writes there (e.g. holding the run
  directory's lock). A URL holds none: uploads leave no temporary object, and
  orbax's checkpoint managers (`cleanup_tmp_directories=True`) remove their
  own unfinished steps; listing every object of a run would cost more than it
  finds, so nothing is listed and [] returned.
  """
  if fs.is_remote(directory):
    return []
  removed = []
  for root, dirs, files in os.walk(directory):
    for name in [d for d in dirs if _STALE_DIR.search(d) or _STALE_FILE.match(d)]:
      shutil.rmtree(os.path.join(root, name), ignore_errors=True)
      dirs.remove(name)
      removed.append(os.path.join(root, name))
    for name in files:
      if _STALE_FILE.match(name):
        os.remove(os.path.join(root, name))
        removed.append(os.path.join(root, name))
  return sorted(removed)


def remove_stale_siblings(path: str) -> list[str]:
  """Delete the `.<name>.<random>.tmp` files and folders beside `path` (name = its base name); returns them.

  They can only be what writes of `path` killed mid-way (SIGKILL, power
  loss) left: this module's temporary files and `tempfile.mkdtemp` folders
  named by the same rule. Call it before writing `path`, while no other
  process writes it. A URL has none ([]).
  """
  parent, name = os.path.split(os.path.abspath(path))
  if fs.is_remote(path) or not os.path.isdir(parent):
    return []
  stale = re.compile(rf"^\.{re.escape(name)}\.{_RANDOM}\.tmp$")
  removed = [os.path.join(parent, entry) for entry in sorted(os.listdir(parent)) if stale.match(entry)]
  for entry in removed:
    if os.path.isdir(entry) and not os.path.islink(entry):
      shutil.rmtree(entry, ignore_errors=True)
    else:
      os.remove(entry)
  return removed
