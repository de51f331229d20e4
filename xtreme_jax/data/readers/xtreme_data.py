"""Where XTREME examples come from: the official `download/` layout or the TFDS builders.

`XtremeData(source, data_dir, translations_dir)` is the one object the run mode
(`runs/xtreme.py`) and the seqio tasks (`tasks/xtreme.py`) read benchmark data
through, so the choice is a single Gin / function argument:

* `source="official"`: `data_dir` is the official `download/` folder, read
  by `xtreme_readers`; translations (translate_train / translate_dev /
  translate_test / pseudo_test) come from `translations_dir` (default
  `<data_dir>/translations`, a copy of gs://xtreme_translations) through
  `xtreme_translations`.
* `source="tfds"`: `data_dir` is the TFDS data dir (None: the TFDS default),
  read by `xtreme_tfds` (never downloads). Translations TFDS ships
  (`xtreme_tfds.TRANSLATIONS`) come from TFDS; the others (XNLI / PAWS-X /
  MLQA translate-test, pseudo test sets) from `translations_dir`, which then
  has no default. bucc2018 is refused: TFDS holds only its gold pairs (see
  `xtreme_tfds`). XNLI / PAWS-X translate_test is refused too
  (`check_translate_test`): its rows are aligned line by line with the official
  test files, which the TFDS test splits hold in another (shuffled) order.
  QA translate_test question ids are checked against the TFDS test split, as
  the official route checks them against the test file.

Records have the schemas of `xtreme_readers.read` either way.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, Optional

from xtreme_jax import errors, fs
from xtreme_jax.data.readers import xtreme_readers as readers, xtreme_tfds
from xtreme_jax.data.readers.benchmark_data import BenchmarkData
from xtreme_jax.data.translation import xtreme_translations as translations
from xtreme_jax.registry import XTREME, BenchmarkSpec

SOURCES = ("official", "tfds")
KINDS = translations.KINDS
# Tasks whose translate-test rows are matched to the test set by position (QA: by question id).
LINE_ALIGNED_TRANSLATE_TEST = ("xnli", "pawsx")


@dataclasses.dataclass(frozen=True)
class XtremeData(BenchmarkData):
  """Reads (task, language, split) from the chosen source; `split` may be a translation kind (`KINDS`)."""

  source: str = "official"
  data_dir: Optional[str] = None
  translations_dir: Optional[str] = None
  benchmark: ClassVar[BenchmarkSpec] = XTREME

  def __post_init__(self):
    if self.source not in SOURCES:
      raise errors.ConfigError(f"data source {self.source!r}; expected one of {SOURCES}")
    if self.source == "official" and not self.data_dir:
      raise errors.ConfigError("the official XTREME layout needs data_dir (the `download/` folder)")

  @property
  def translations_root(self) -> Optional[str]:
    if self.translations_dir:
      return self.translations_dir
    return translations.default_dir(self.data_dir) if self.source == "official" else None

  def _from_tfds(self, task: str, split: str) -> bool:
    if self.source != "tfds":
      return False
    return split not in KINDS or (task, split) in xtreme_tfds.TRANSLATIONS

  def _translations_root(self, task: str, kind: str) -> str:
    root = self.translations_root
    if root is None:
      raise errors.ConfigError(f"TFDS has no {kind} data for {task}; set translations_dir to a copy of "
                       f"{translations.BUCKET} to read it from files")
    return root

  def check_translate_test(self, task: str) -> None:
    """A `ConfigError` when `task`'s translate-test data cannot be matched to this source's test set."""
    if self.source == "tfds" and task in LINE_ALIGNED_TRANSLATE_TEST:
      raise errors.ConfigError(
          f"{task} translate_test cannot run on TFDS: its translate-test rows are aligned line by line with the "
          f"official test files, but the TFDS test split holds the examples in another (shuffled) order, so "
          f"predictions would be matched to the wrong examples; use DATA_SOURCE='official' for this setting")

  def read(self, task: str, language: str, split: str):
    """The records of (task, language, split), as `xtreme_readers.read` / `xtreme_translations.read` give them.

    translate_test is checked against the test set it translates (`check_translate_test`; line count, or
    question ids).
    """
    if split == "translate_test":
      self.check_translate_test(task)
    if self._from_tfds(task, split):
      if split in KINDS:
        return xtreme_tfds.read_translation(task, self.data_dir, language, split)
      return xtreme_tfds.read(task, self.data_dir, language, split)
    if split not in KINDS:
      return readers.read(task, self.data_dir, language, split)
    official = split == "translate_test" and self.source == "official"
    records = translations.read(task, self._translations_root(task, split), language, split,
                                data_dir=self.data_dir if official else None)
    if split == "translate_test" and not official:  # QA from files on TFDS: ids against the TFDS test split
      records = translations.check_translate_test_ids(task, language, records, self.location(task, language, split),
                                                      self.read(task, language, "test"),
                                                      self.location(task, language, "test"))
    return records

  def location(self, task: str, language: str, split: str) -> str:
    """Where (task, language, split) is read from: a file path, or `tfds:<builder/config>:<split>`."""
    if self._from_tfds(task, split):
      src = (xtreme_tfds.translation_source(task, language, split) if split in KINDS
             else xtreme_tfds.source(task, language, split))
      return f"tfds:{src.name}:{src.split}"
    if split in KINDS:
      return translations.translation_path(task, self._translations_root(task, split), language, split)
    part = {"bucc2018": "gold" if split == "dev" else "source", "tatoeba": "source"}.get(task)
    return readers.file_path(task, self.data_dir, language, split, part)

  def locations(self, task: str, language: str, split: str) -> list[str]:
    """Every file reading (task, language, split) opens: BUCC's and Tatoeba's parts; else `location`'s one."""
    if self.benchmark.task(task).retrieval and split not in KINDS and not self._from_tfds(task, split):
      return [readers.file_path(task, self.data_dir, language, split, part) for part in readers.PATHS[task]]
    return [self.location(task, language, split)]

  def available(self, task: str, language: str, split: str) -> bool:
    """Whether (task, language, split) can be read (bucc2018 dev: its gold file, which threshold tuning needs)."""
    if self._from_tfds(task, split):
      if task == "bucc2018":
        return False
      try:
        name = self.location(task, language, split).split(":")[1]
      except ValueError:
        return False
      return _tfds_prepared(name, self.data_dir)
    if split in KINDS and self.translations_root is None:
      return False
    return fs.exists(self.location(task, language, split))


@functools.lru_cache(maxsize=None)
def _tfds_prepared(name: str, data_dir: Optional[str]) -> bool:
  import tensorflow_datasets as tfds  # heavy: imported on use only
  try:
    with xtreme_tfds.quiet_tfds():  # TFDS warns for every dataset that is not prepared
      return tfds.builder(name, data_dir=data_dir, try_gcs=False).is_prepared()
  except Exception:  # pylint: disable=broad-except  # unknown config / missing metadata: not available
    return False
