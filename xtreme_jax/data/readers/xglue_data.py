"""Where XGLUE examples come from: the official `xglue_full_dataset` layout (`xglue_readers`).

`XglueData(data_dir)` offers the run mode (`runs/xtreme.py`) and the seqio
tasks (`tasks/xglue.py`) the data objects' interface (`benchmark_data.BenchmarkData`): `read`,
`available`, `location`, `benchmark`. XGLUE has no TFDS builders and no
translation kinds (`translations_dir`: the user's translations, which only
FILTER's pairs read, `filter_pairs`); a language's training data other than
English (the pivot-language and multi-language settings) is read from the
layout's path for that language (`registry/xglue.py`). The location of a generation task's
split (QG, NTG) is its source (`.src.`) file, the one its predictions follow
line by line; `target_location` is the file of its references.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, Optional

from xtreme_jax import errors, fs
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.data.readers.benchmark_data import BenchmarkData
from xtreme_jax.registry import XGLUE, BenchmarkSpec


@dataclasses.dataclass(frozen=True)
class XglueData(BenchmarkData):
  """Reads (task, language, split) of the official XGLUE layout under `data_dir`."""

  source: str = "official"
  data_dir: Optional[str] = None
  translations_dir: Optional[str] = None  # XGLUE ships none: the user's, for FILTER's pairs (`filter_pairs`)
  benchmark: ClassVar[BenchmarkSpec] = XGLUE

  def __post_init__(self):
    if self.source != "official":
      raise errors.ConfigError(f"XGLUE data source {self.source!r}: XGLUE has no TFDS builders; use 'official' "
                               "(DATA_DIR: the unpacked xglue_full_dataset folder)")
    if not self.data_dir:
      raise errors.ConfigError("XGLUE needs data_dir: the unpacked xglue_full_dataset folder")

  def read(self, task: str, language: str, split: str):
    return xglue_readers.read(task, self.data_dir, language, split)

  def location(self, task: str, language: str, split: str) -> str:
    return os.path.join(self.data_dir, XGLUE.task(task).file(split, language))

  def target_location(self, task: str, language: str, split: str) -> str:
    """The references (`.tgt.` file) of a generation task's split."""
    spec = XGLUE.task(task)
    if not spec.sides:
      raise errors.ConfigError(f"XGLUE {task} is not a generation task (no source / target files)")
    return os.path.join(self.data_dir, spec.file(split, language, spec.sides[-1]))

  def available(self, task: str, language: str, split: str) -> bool:
    spec = XGLUE.task(task)
    return language in spec.languages.get(split, ()) and fs.isfile(self.location(task, language, split))

  def check_translate_test(self, task: str) -> None:
    raise errors.ConfigError(f"XGLUE {task} has no translate-test data")
