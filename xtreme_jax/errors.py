"""Errors a user can cause and fix, and how the command line reports them.

Every error a user can cause (a bad data file, a bad Gin binding, a missing
folder, an incompatible checkpoint) is a `UserError` whose message is one line
naming the file, line, key or language and what was expected. The CLI prints
`error: <message>` and exits with `exit_code` (2; 75 for a run directory in
use, 128 + N for a stop by signal N) without a traceback;
`--debug` or `XTREME_JAX_DEBUG=1` shows it. An OS error the user can fix (a
full disk, a read-only or forbidden folder, a file where a folder should be;
`OS_ERROR_HINTS`) is reported the same way, naming the path. Anything else is
a bug and keeps its traceback.

The subclasses also derive from the built-in exception a caller would expect
(`ValueError`, `FileNotFoundError`), so `except ValueError` keeps working.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Callable, Optional, Sequence


class UserError(Exception):
  """An error the user can fix; reported as one line, exit code 2."""

  exit_code = 2


class ConfigError(UserError, ValueError):
  """A configuration value (Gin binding, flag, config field) is invalid."""


class DataError(UserError, ValueError):
  """A data file is malformed: the message names the file (and line) and what was expected."""


class MissingInputError(UserError, FileNotFoundError):
  """A file or folder the run needs does not exist."""


class ArgumentParser(argparse.ArgumentParser):
  """argparse, with a bad command line reported as one `ConfigError` line (not usage + error)."""

  def error(self, message: str):
    raise ConfigError(f"{self.prog}: {message} (see {self.prog} --help)")


def require(ok: bool, message: str) -> None:
  """Raises `ConfigError(message)` unless `ok`: a check of something the user sets."""
  if not ok:
    raise ConfigError(message)


def location(path: str, line: Optional[int] = None, byte: Optional[int] = None) -> str:
  """`path`, `path:line` or `path:line (byte N)`, for messages."""
  out = str(path)
  if line is not None:
    out += f":{line}"
  if byte is not None:
    out += f" (byte {byte})"
  return out


def one_line(message: str) -> str:
  """The message with its lines joined by '; ' (a CLI error is one line).

  Gin re-raises an error from inside a configurable with "In call to
  configurable 'NAME' (<function ...>)" appended (the class is kept); that
  context is dropped here.
  """
  parts = (part.strip() for part in str(message).splitlines())
  return "; ".join(part for part in parts if part and not part.startswith("In call to configurable "))


def debug_requested(argv: Sequence[str]) -> bool:
  return "--debug" in argv or os.environ.get("XTREME_JAX_DEBUG", "") not in ("", "0", "false", "False")


def run_cli(command: Callable[[list[str]], int], argv: Sequence[str]) -> int:
  """`command(argv)` with user errors reported as one line on stderr (exit code 2).

  `--debug` (removed from argv here) or XTREME_JAX_DEBUG=1 re-raises instead,
  so the traceback is shown.
  """
  debug = debug_requested(argv)
  argv = [a for a in argv if a != "--debug"]
  try:
    return command(argv)
  except UserError as e:
    if debug:
      raise
    print(f"error: {one_line(str(e))}", file=sys.stderr)
    return e.exit_code
  except Exception as e:  # noqa: BLE001 - an OS error the user can fix is one line; anything else is a bug
    cause = user_os_error(e)
    if debug or cause is None:
      raise
    print(f"error: {one_line(os_error_message(cause))}", file=sys.stderr)
    return UserError.exit_code


# errno -> what the user can do about it
OS_ERROR_HINTS = {
    errno.ENOSPC: "the disk is full: free some space or write elsewhere",
    errno.EDQUOT: "the disk quota is used up: free some space or write elsewhere",
    errno.EROFS: "the file system is read-only: write elsewhere",
    errno.EACCES: "permission denied: write elsewhere or change the permissions",
    errno.EPERM: "operation not permitted: write elsewhere or change the permissions",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "expected a file, found a folder",
    errno.ENAMETOOLONG: "the name is too long",
}


# Errors that are bugs whatever they were raised while handling (a fallback that itself failed).
BUG_TYPES = (TypeError, AttributeError, KeyError, IndexError, NameError, AssertionError, UnboundLocalError)


def user_os_error(error: BaseException) -> Optional[OSError]:
  """The OS error the user can fix (full disk, read-only or forbidden folder, a file where a folder should be)
  that `error` is or was raised from (libraries such as orbax wrap it: `raise ... from`, or raised while
  handling it, unless `from None` hid it; Gin re-raises a subclass `from None` with a longer message);
  None if there is none, or if an error on the way is a bug type (`BUG_TYPES`)."""
  seen = set()
  while error is not None and id(error) not in seen and not isinstance(error, BUG_TYPES):
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in OS_ERROR_HINTS:
      return error
    context = error.__context__
    if error.__suppress_context__ and not isinstance(error, type(context)):  # (gin re-raises a subclass)
      context = None
    error = error.__cause__ if error.__cause__ is not None else context
  return None


def os_error_message(error: OSError) -> str:
  """`<path>: <what the OS said> (<what to do>)`."""
  path = error.filename if error.filename is not None else "(path not known)"
  return f"{path}: {error.strerror or error} ({OS_ERROR_HINTS[error.errno]})"
