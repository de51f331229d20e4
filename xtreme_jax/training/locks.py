"""Non-blocking, process-re-entrant locks on run directories (no JAX import: cheap to use anywhere).

Local paths: an `fcntl` lock on the file, which holds the holder's pid so
that a refusal can name it. The kernel drops the lock when the holder exits,
however it exits; `release` also removes the file (while still holding it,
so a process that opened the old file notices and retries on a new one).

URLs (`gs://...`): object stores have no `flock`, so the lock is an object
holding `host <name> pid <n> since <UTC time>`, and it is advisory:

* a run that finds the object refuses to start, naming the holder and the
  object to delete (`gsutil rm <object>`) if that run is no longer running;
  the one exception is a holder on this host whose pid is not running (a
  killed run started again on the same machine): its lock is taken over,
  with a warning;
* after writing its object, a run reads it back and refuses if another run
  wrote the object meanwhile; two runs starting within the same moment can
  still both pass (GCS conditional writes are not reachable through
  tf.io.gfile / fsspec);
* `release` deletes the object, and so does process exit (`atexit`); a run
  killed with SIGKILL, or a preempted VM, leaves it behind.
"""

from __future__ import annotations

import atexit
import datetime
import fcntl
import logging
import os
import socket
import uuid

from xtreme_jax import errors, fs


class InUseError(errors.UserError, RuntimeError):
  """Another process holds the lock."""


_HELD: dict[str, list] = {}  # path -> [fd (None for a URL), count]: locking again in the same process nests


def held(path: str) -> bool:
  return path in _HELD


def _in_use(what: str, holder: str, path: str, hint: str) -> InUseError:
  return InUseError(f"{what} is in use by {holder} (lock file {path}); wait for that run to end or use "
                    f"another RUN_DIR{hint}")


def acquire(path: str, what: str) -> None:
  """Lock `path` or raise InUseError ("<what> is in use by pid N ..."; for a URL "by host H pid N since T")."""
  if path in _HELD:
    _HELD[path][1] += 1
    return
  if fs.is_remote(path):
    _acquire_remote(path, what)
    _HELD[path] = [None, 1]
    return
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 32, 0).decode("utf-8", "replace").strip() or "?"
      os.close(fd)
      raise _in_use(what, f"pid {holder}", path, "") from None
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
    fs.remove(path, missing_ok=True)
    if entry[0] is not None:
      os.close(entry[0])


# -- lock objects (URLs) ---------------------------------------------------------------

def _read(path: str) -> str | None:
  try:
    return fs.read_text(path).strip()
  except FileNotFoundError:
    return None


def _holder(record: str) -> str:
  """'host H pid P since T' of a lock record (its token dropped)."""
  return record.split(" token ")[0] or "?"


def _dead_here(record: str) -> bool:
  """True if the record names this host and a pid that is not running here."""
  fields = record.split()
  if len(fields) < 4 or fields[0] != "host" or fields[1] != socket.gethostname() or fields[2] != "pid":
    return False
  try:
    os.kill(int(fields[3]), 0)
  except ProcessLookupError:
    return True
  except (ValueError, PermissionError):
    return False
  return False


def _acquire_remote(path: str, what: str) -> None:
  hint = (f"; if it is no longer running, delete the lock: gsutil rm {path}" if path.startswith("gs://")
          else f"; if it is no longer running, delete the lock object {path}")
  found = _read(path)
  if found is not None:
    if not _dead_here(found):
      raise _in_use(what, _holder(found), path, hint)
    logging.warning("taking over the lock %s of a run that is no longer running (%s)", path, _holder(found))
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
  record = f"host {socket.gethostname()} pid {os.getpid()} since {stamp} token {uuid.uuid4().hex}"
  fs.write_bytes(path, (record + "\n").encode("utf-8"))
  now = _read(path)
  if now != record:  # another run wrote its lock in the meantime
    raise _in_use(what, _holder(now) if now else "another run", path, hint)


@atexit.register
def _release_remote_at_exit() -> None:
  for path, entry in list(_HELD.items()):
    if entry[0] is None:
      try:
        fs.remove(path, missing_ok=True)
      except Exception:  # noqa: BLE001 - best effort at exit
        pass
