"""Files on local disks and under URLs (`gs://bucket/...`) behind one small API.

A local path goes through `os`, `shutil` and `open` exactly as the code did
before this module existed. A URL (`scheme://...`) goes through
`etils.epath.Path`, the path library orbax itself uses, so run directories,
data folders and label folders may live in Google Cloud Storage. epath
supports `gs://`, `s3://`, `az://` and `hf://`; any other scheme is a
`ConfigError`. Nothing remote is imported for a local path.

Backend of a URL (epath's choice): when TensorFlow is installed (it is a
dependency of this package) and `EPATH_USE_TF` is not `0`/`false`,
`tf.io.gfile`, whose GCS support is built in (credentials: `gcloud auth
application-default login`, or a TPU / GCE VM's service account); otherwise
fsspec, which needs `pip install gcsfs` for `gs://`. TensorFlow is imported on
the first remote operation only. orbax checkpoints under `gs://` also need
`google-cloud-storage` (`training/checkpoints.py`).

Object stores have no folders, appends or atomic renames of folders:

* a folder is a name prefix; `makedirs` may create an empty placeholder
  object, `listdir` names sub-folders without their trailing `/`;
* an object upload is atomic by itself (the object appears when the upload
  completes), so `atomic` writes a URL directly, without a temporary object;
* `rename` of a folder copies then deletes every object below it (not
  atomic; used only to set aside an unreadable checkpoint).

`abspath`, `realpath`, `normpath`, `dirname`, `basename` and `relpath` leave a
URL's `scheme://` intact (`os.path.abspath("gs://b/x")` would give
`<cwd>/gs:/b/x`).
"""

from __future__ import annotations

import glob as glob_lib
import os
import posixpath
import re
import shutil
from typing import IO, Iterator

from xtreme_jax import errors

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
SCHEMES = ("gs", "s3", "az", "hf")  # what etils.epath serves


def is_remote(path: str | os.PathLike) -> bool:
  """True for a URL with a scheme (`gs://bucket/x`); False for a local path."""
  return bool(_URL.match(os.fspath(path)))


def _epath(path: str | os.PathLike):
  """The `etils.epath.Path` of a URL; ConfigError for a scheme epath cannot serve."""
  path = os.fspath(path)
  scheme = _URL.match(path).group(1)
  if scheme not in SCHEMES:
    raise errors.ConfigError(f"{path}: unsupported URL scheme {scheme}://; expected a local path or one of "
                             + ", ".join(f"{s}://" for s in SCHEMES))
  from etils import epath
  return epath.Path(path)


# -- path strings ----------------------------------------------------------------------

def _split(url: str) -> tuple[str, str]:
  """('gs://', 'bucket/a/b') of 'gs://bucket/a/b'."""
  prefix = _URL.match(url).group(0)
  return prefix, url[len(prefix):]


def normpath(path: str) -> str:
  """`os.path.normpath`; a URL keeps its `scheme://` and loses a trailing `/`."""
  if not is_remote(path):
    return os.path.normpath(path)
  prefix, rest = _split(os.fspath(path))
  rest = posixpath.normpath(rest) if rest else rest
  return prefix + (rest if rest != "." else "")


def abspath(path: str) -> str:
  """`os.path.abspath`; a URL is already absolute (normalised only)."""
  return normpath(path) if is_remote(path) else os.path.abspath(path)


def realpath(path: str) -> str:
  """`os.path.realpath` (symlinks resolved); a URL normalised (object stores have no links)."""
  return normpath(path) if is_remote(path) else os.path.realpath(path)


def dirname(path: str) -> str:
  """`os.path.dirname`; the parent of `gs://bucket/x` is `gs://bucket`."""
  if not is_remote(path):
    return os.path.dirname(path)
  prefix, rest = _split(normpath(path))
  return prefix + posixpath.dirname(rest)


def basename(path: str) -> str:
  return posixpath.basename(normpath(path)) if is_remote(path) else os.path.basename(path)


def relpath(path: str, start: str) -> str:
  """`os.path.relpath`; a URL not under `start` is returned whole."""
  if not is_remote(path):
    return os.path.relpath(path, start)
  path, start = normpath(path), normpath(start)
  if path == start:
    return "."
  return path[len(start) + 1:] if path.startswith(start + "/") else path


# -- queries ---------------------------------------------------------------------------

def exists(path: str) -> bool:
  return _epath(path).exists() if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
  return _epath(path).is_dir() if is_remote(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
  if not is_remote(path):
    return os.path.isfile(path)
  p = _epath(path)
  return p.exists() and not p.is_dir()


def listdir(path: str) -> list[str]:
  """Names in the folder `path` (sub-folders of a URL without their trailing `/`)."""
  if not is_remote(path):
    return os.listdir(path)
  return [p.name for p in _epath(path).iterdir()]


def glob(pattern: str) -> list[str]:
  """Sorted paths matching `pattern` (`glob.glob`); in a URL only the last component may hold wildcards."""
  if not is_remote(pattern):
    return sorted(glob_lib.glob(pattern))
  folder, name = dirname(pattern), basename(pattern)
  if re.search(r"[*?[]", folder):
    raise errors.ConfigError(f"{pattern}: wildcards in a URL are allowed in its last component only")
  return sorted(normpath(os.fspath(p)) for p in _epath(folder).glob(name))


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
  """`os.walk(top)` (top-down; `dirs` may be pruned in place); roots of a URL are URLs."""
  if not is_remote(top):
    yield from os.walk(top)
    return
  top = normpath(top)
  for root, dirs, files in _epath(top).walk():
    dirs[:] = [d.rstrip("/") for d in dirs]  # in place: the walk descends into what is left
    yield normpath(os.fspath(root)), dirs, files


# -- changes ---------------------------------------------------------------------------

def makedirs(path: str) -> None:
  """`os.makedirs(path, exist_ok=True)`."""
  if is_remote(path):
    _epath(path).mkdir(parents=True, exist_ok=True)
  else:
    os.makedirs(path, exist_ok=True)


def remove(path: str, missing_ok: bool = False) -> None:
  """Delete one file (object)."""
  try:
    if is_remote(path):
      _epath(path).unlink()
    else:
      os.remove(path)
  except FileNotFoundError:
    if not missing_ok:
      raise


def rmdir(path: str) -> None:
  """Delete an empty folder; OSError if it holds anything."""
  if is_remote(path):
    p = _epath(path)
    if any(True for _ in p.iterdir()):
      raise OSError(f"{path} is not empty")
    p.rmtree(missing_ok=True)
  else:
    os.rmdir(path)


def rmtree(path: str) -> None:
  """Delete a folder and everything below it (no error if it does not exist)."""
  if is_remote(path):
    _epath(path).rmtree(missing_ok=True)
  else:
    shutil.rmtree(path, ignore_errors=True)


def rename(src: str, dst: str) -> None:
  """Rename a file or folder (`dst` must not exist). On object stores a folder is copied then deleted."""
  if is_remote(src):
    _epath(src).rename(dst)
  else:
    os.rename(src, dst)


# -- contents --------------------------------------------------------------------------

def open_file(path: str, mode: str = "r") -> IO:
  """`open(path, mode)` (text modes in UTF-8); a URL supports modes r, w (and a where the backend can)."""
  if is_remote(path):
    return _epath(path).open(mode)
  return open(path, mode, encoding=None if "b" in mode else "utf-8")


def read_bytes(path: str) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def read_text(path: str) -> str:
  """The UTF-8 text of `path` (line ends untouched)."""
  return read_bytes(path).decode("utf-8")


def write_bytes(path: str, data: bytes) -> None:
  """Write `data` to `path` directly (not atomic for local paths: use `atomic.write_bytes`)."""
  with open_file(path, "wb") as f:
    f.write(data)
