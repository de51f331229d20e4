"""Atomic file writes: a temporary file in the same directory, then `os.replace`.

Readers never see half a file, and an interrupted write leaves the old file.
A process killed mid-write leaves its `.<name>.<random>.tmp` file behind;
`remove_stale` deletes such files (and orbax's temporary checkpoint folders)
when a run directory is claimed again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Any, Callable

_TMP_SUFFIX = ".tmp"
_STALE_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")  # mkstemp's names below
_STALE_DIR = re.compile(r"\.orbax-checkpoint-tmp")  # orbax writes a step or item into one, then renames it


def write_with(path: str, write: Callable[[str], None]) -> None:
  """`write(tmp_path)` to a temporary file next to `path`, then rename it over `path`."""
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


def write_text(path: str, text: str) -> None:
  def write(tmp: str) -> None:
    with open(tmp, "w", encoding="utf-8", newline="") as f:
      f.write(text)
  write_with(path, write)


def write_json(path: str, obj: Any) -> None:
  """Indented UTF-8 JSON with a final newline."""
  write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def remove_stale(directory: str) -> list[str]:
  """Delete the temporary files and folders interrupted writes left under `directory`; returns their paths.

  Only call this while no other process writes there (e.g. holding the run directory's lock).
  """
  removed = []
  for root, dirs, files in os.walk(directory):
    for name in [d for d in dirs if _STALE_DIR.search(d)]:
      shutil.rmtree(os.path.join(root, name), ignore_errors=True)
      dirs.remove(name)
      removed.append(os.path.join(root, name))
    for name in files:
      if _STALE_FILE.match(name):
        os.remove(os.path.join(root, name))
        removed.append(os.path.join(root, name))
  return sorted(removed)
