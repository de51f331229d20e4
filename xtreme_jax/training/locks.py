"""Non-blocking, process-re-entrant `fcntl` locks on files (no JAX import: cheap to use anywhere).

The lock file holds the holder's pid, so a refusal can name it. The kernel
drops the lock when the holder exits, however it exits; `release` also
removes the file (while still holding it, so a process that opened the old
file notices and retries on a new one).
"""

from __future__ import annotations

import fcntl
import os

from xtreme_jax import errors


class InUseError(errors.UserError, RuntimeError):
  """Another process holds the lock."""


_HELD: dict[str, list] = {}  # path -> [fd, count]: locking again in the same process nests


def held(path: str) -> bool:
  return path in _HELD


def acquire(path: str, what: str) -> None:
  """Lock `path` or raise InUseError ("<what> is in use by pid N ...")."""
  if path in _HELD:
    _HELD[path][1] += 1
    return
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 32, 0).decode("utf-8", "replace").strip() or "?"
      os.close(fd)
      raise InUseError(f"{what} is in use by pid {holder} (lock file {path}); wait for that run to end or use "
                       "another RUN_DIR") from None
    try:
      same = os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if same:
      break
    os.close(fd)  # the holder removed the file while we opened it: lock the new one
  os.ftruncate(fd, 0)
  os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
  _HELD[path] = [fd, 1]


def release(path: str) -> None:
  """Undo one `acquire`; the last one unlocks and removes the file."""
  entry = _HELD.get(path)
  if entry is None:
    return
  entry[1] -= 1
  if entry[1] == 0:
    del _HELD[path]
    try:
      os.remove(path)
    except FileNotFoundError:
      pass
    os.close(entry[0])
