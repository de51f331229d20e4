"""Where data lives: the bundled sample and Gin configs, and paths relative to a data directory.

Bundled files are package data found through `importlib.resources`, so they
are found the same way in a source checkout, an editable install and a wheel.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
import os
import pathlib

from xtreme_jax import fs

_EXTRACTED = contextlib.ExitStack()  # bundled folders extracted from a zipped install, removed at exit
atexit.register(_EXTRACTED.close)


def package_dir(package: str, *parts: str) -> str:
  """A real folder path for `parts` inside an importable `package` (extracted once if zipped)."""
  resource = importlib.resources.files(package).joinpath(*parts)
  if isinstance(resource, pathlib.Path):
    return str(resource)
  return str(_EXTRACTED.enter_context(importlib.resources.as_file(resource)))


SAMPLE_DIR = package_dir("xtreme_jax", "sample_data")


def resources_dir(*parts: str) -> str:
  """A folder of the data the package ships besides the sample (`xtreme_jax/resources/`: Punkt models,
  published scores)."""
  return package_dir("xtreme_jax", "resources", *parts)


def gin_dir() -> str:
  """The bundled Gin configs (`runs/`, `models/`, `experiments/`): the search path of `--gin_file`."""
  return package_dir("xtreme_jax.gin_configs")


def sample_dir() -> str:
  """The small multilingual sample bundled with the package."""
  return SAMPLE_DIR


BUNDLED = "<xtreme_jax>"  # how run fingerprints name the package's own files (`portable`)


def portable(path: str) -> str:
  """`path` as run fingerprints record it: a path inside the bundled sample as `<xtreme_jax>/sample_data/...`,
  the same in every install (reinstalling the package keeps its run directories valid); anything else as is."""
  if not isinstance(path, str) or fs.is_remote(path) or not os.path.isabs(path):
    return path
  path, root = os.path.normpath(path), os.path.normpath(SAMPLE_DIR)
  if path == root or path.startswith(root + os.sep):
    return "/".join((BUNDLED, "sample_data", *pathlib.PurePath(os.path.relpath(path, root)).parts))
  return path


def local(path: str) -> str:
  """`portable`'s inverse: a `<xtreme_jax>/sample_data/...` path as this install's file; anything else as is."""
  prefix = "/".join((BUNDLED, "sample_data"))
  if not isinstance(path, str) or not (path == prefix or path.startswith(prefix + "/")):
    return path
  return os.path.join(SAMPLE_DIR, *(part for part in path[len(prefix):].split("/") if part))


def resolve(data_dir: str | None, path: str) -> str:
  """`path` under `data_dir` unless it is absolute or a URL (`gs://...`), or no data_dir is set."""
  return os.path.join(data_dir, path) if data_dir and not fs.is_remote(path) else path


def sample_vocab() -> str:
  """The sentencepiece model (XLM-R layout) trained on the sample text."""
  return os.path.join(SAMPLE_DIR, "sample_spm.model")


def sample_parallel_dir() -> str:
  """Line-aligned translations `{lg}-en.{lg}` / `{lg}-en.en` (TLM / VECO pretraining, the tiny WMT14 run)."""
  return os.path.join(SAMPLE_DIR, "parallel")


def sample_xtreme_dir() -> str:
  """The XTREME sample in the official `download/` layout."""
  return os.path.join(SAMPLE_DIR, "xtreme")


def sample_xtreme_labels_dir() -> str:
  """Gold labels of the XTREME sample's test sets, in the leaderboard layout."""
  return os.path.join(SAMPLE_DIR, "xtreme_labels")


def sample_mbert_dir() -> str:
  """The mBERT paper's tasks (MLDoc, CoNLL NER, UD POS / parsing) in their own layouts (`registry/mbert.py`)."""
  return os.path.join(SAMPLE_DIR, "mbert")


def sample_wili_dir() -> str:
  """A WiLI-2018-format sample (3 languages) for the language-ID probe."""
  return os.path.join(SAMPLE_DIR, "wili")


def sample_xglue_dir() -> str:
  """The XGLUE sample in the official `xglue_full_dataset` layout (dev and test files carry labels)."""
  return os.path.join(SAMPLE_DIR, "xglue")
