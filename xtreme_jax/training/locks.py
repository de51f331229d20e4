"""Non-blocking, process-re-entrant locks on run directories (no JAX import: cheap to use anywhere).

Local paths: an `fcntl` lock on the file, which holds the holder's pid so
that a refusal can name it. The kernel drops the lock when the holder exits,
however it exits; `release` also removes the file (while still holding it,
so a process that opened the old file notices and retries on a new one).

URLs (`gs://...`): object stores have no `flock`, so the lock is an object
holding `host <name> pid <n> since <UTC time> seen <UTC time>`, a lease the
holder renews: a thread rewrites `seen` every `HEARTBEAT_S` (60 s) while the
lock is held.

* a run that finds the object refuses to start, naming the holder, when it was
  last seen and the object to delete (`gsutil rm <object>`) if that run is no
  longer running, unless the holder is gone: its lease has not been renewed
  for `LEASE_S` (5 min: a preempted or killed VM, a recreated VM resuming the
  run under a new host name) or it was on this host and its pid is not
  running. A lock so left behind is taken over, with a warning;
* after writing its object, a run reads it back and refuses if another run
  wrote the object meanwhile; two runs starting within the same moment can
  still both pass (GCS conditional writes are not reachable through
  tf.io.gfile / fsspec);
* a holder whose object another run has taken over (a process stalled past
  the lease) or someone deleted has lost the lock: it stops renewing, logs an
  error and records it; `lost(path)` says why and `check_held()` raises
  InUseError for it, which the trainer does at its next step boundary (it
  stops without saving, exit 75), so two live runs never share a directory
  for longer than a step;
* `release` deletes the object (not a lost one: it is another run's now), and
  so does process exit (`atexit`).
"""

from __future__ import annotations

import atexit
import datetime
import fcntl
import logging
import os
import socket
import threading
import uuid

from xtreme_jax import errors, fs


class InUseError(errors.UserError, RuntimeError):
  """Another process holds the lock: exit code 75 (sysexits' EX_TEMPFAIL: try again later), so that a restart
  loop (tpu_scripts/launch.sh --restart) tells a lease not yet expired from bad input (2)."""

  exit_code = 75
  holder = "another run"


_HELD: dict[str, list] = {}  # path -> [fd (None for a URL), count]: locking again in the same process nests
HEARTBEAT_S = 60.0  # a held lock object's `seen` is rewritten this often
LEASE_S = 300.0  # a lock object not rewritten for this long is left behind: taken over
_RENEWING: dict[str, threading.Event] = {}  # path -> set to stop renewing that lock object
_LOST: dict[str, str] = {}  # path -> why this process no longer holds that lock object (an InUseError's message)


def held(path: str) -> bool:
  return path in _HELD


def lost(path: str) -> str | None:
  """Why this process lost the lock object `path` it holds (taken over or deleted); None while it is its own."""
  return _LOST.get(path) if path in _HELD else None


def check_held() -> None:
  """Raise InUseError (exit 75, one line) if a lock object this process holds was lost to another run."""
  for path in list(_HELD):
    why = lost(path)
    if why is not None:
      raise InUseError(why)


def _in_use(what: str, holder: str, path: str, hint: str) -> InUseError:
  error = InUseError(f"{what} is in use by {holder} (lock file {path}); wait for that run to end or use "
                     f"another RUN_DIR{hint}")
  error.holder = holder  # "pid N", "host H pid N since T ...": for callers that word their own message
  return error


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
    stop = _RENEWING.pop(path, None)
    if stop is not None:
      stop.set()
    if _LOST.pop(path, None) is None:  # a lost lock object is another run's: left alone
      fs.remove(path, missing_ok=True)
    if entry[0] is not None:
      os.close(entry[0])


# -- lock objects (URLs) ---------------------------------------------------------------

def _read(path: str) -> str | None:
  try:
    return fs.read_text(path).strip()
  except FileNotFoundError:
    return None


def _now() -> datetime.datetime:
  return datetime.datetime.now(datetime.timezone.utc)


def _stamp(t: datetime.datetime) -> str:
  return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields(record: str) -> dict:
  """A lock record's `key value` pairs (host, pid, since, seen, token)."""
  words = record.split()
  return dict(zip(words[0::2], words[1::2]))


def _holder(record: str) -> str:
  """'host H pid P since T' of a lock record."""
  f = _fields(record)
  return " ".join(f"{k} {f[k]}" for k in ("host", "pid", "since") if k in f) or "?"


def _age_s(record: str) -> float | None:
  """Seconds since the holder last wrote its record (`seen`, else `since`); None if it names no time."""
  stamp = _fields(record).get("seen") or _fields(record).get("since")
  try:
    then = datetime.datetime.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
  except ValueError:
    return None
  return (_now() - then).total_seconds()


def _dead_here(record: str) -> bool:
  """True if the record names this host and a pid that is not running here."""
  f = _fields(record)
  if f.get("host") != socket.gethostname() or "pid" not in f:
    return False
  try:
    os.kill(int(f["pid"]), 0)
  except ProcessLookupError:
    return True
  except (ValueError, PermissionError):
    return False
  return False


def _left_behind(record: str) -> str | None:
  """Why the record's holder is gone (its lease ran out, or its pid is not running here); None if it may run."""
  age = _age_s(record)
  if age is not None and age > LEASE_S:
    return f"its lease was last renewed {age:.0f} s ago (more than {LEASE_S:.0f} s)"
  if _dead_here(record):
    return "its process is no longer running on this host"
  return None


def _record(since: str, token: str) -> str:
  return f"host {socket.gethostname()} pid {os.getpid()} since {since} seen {_stamp(_now())} token {token}"


def _acquire_remote(path: str, what: str) -> None:
  hint = (f"; if it is no longer running, delete the lock: gsutil rm {path}" if path.startswith("gs://")
          else f"; if it is no longer running, delete the lock object {path}")
  found = _read(path)
  if found is not None:
    gone = _left_behind(found)
    if gone is None:
      age = _age_s(found)
      seen = f", last seen {max(age, 0):.0f} s ago" if age is not None else ""
      raise _in_use(what, _holder(found) + seen, path,
                    f"{hint} (it is taken over once not renewed for {LEASE_S:.0f} s)" if seen else hint)
    logging.warning("taking over the lock %s of a run that is no longer running (%s): %s", path, _holder(found),
                    gone)
  since, token = _stamp(_now()), uuid.uuid4().hex
  record = _record(since, token)
  fs.write_bytes(path, (record + "\n").encode("utf-8"))
  now = _read(path)
  if now != record:  # another run wrote its lock in the meantime
    raise _in_use(what, _holder(now) if now else "another run", path, hint)
  _LOST.pop(path, None)
  stop = _RENEWING[path] = threading.Event()
  threading.Thread(target=_renew, args=(path, what, since, token, stop), name=f"lock {path}", daemon=True).start()


def _renew(path: str, what: str, since: str, token: str, stop: threading.Event) -> None:
  """Rewrite the lock object's `seen` every HEARTBEAT_S until `stop`; if another run has taken it over (or it
  was deleted), record the loss (`lost`) and stop."""
  while not stop.wait(HEARTBEAT_S):
    try:
      current = _read(path)
      if current is None or _fields(current).get("token") != token:
        if not stop.is_set():
          logging.error("the lock %s is no longer this run's (%s): another run took it over", path,
                        _holder(current) if current else "deleted")
          _LOST[path] = (f"{what} is in use by {_holder(current)} (lock file {path}): another run took over this "
                         "run's lock, so this run stops without saving; wait for that run to end or use another "
                         "RUN_DIR" if current else
                         f"{what} is no longer locked by this run: its lock file {path} was deleted, so this run "
                         "stops without saving (another run may start there); run it again to take the lock again")
        return
      fs.write_bytes(path, (_record(since, token) + "\n").encode("utf-8"))
    except Exception as e:  # noqa: BLE001 - a failed renewal is retried at the next beat
      logging.warning("could not renew the lock %s: %s", path, e)


@atexit.register
def _release_remote_at_exit() -> None:
  for path, entry in list(_HELD.items()):
    if entry[0] is None and path not in _LOST:
      try:
        fs.remove(path, missing_ok=True)
      except Exception:  # noqa: BLE001 - best effort at exit
        pass
