"""What every benchmark's data object offers: the one interface the runner, the scorers and the seqio tasks
read benchmark data through (`XtremeData`, `XglueData`, `MbertData`, `LabData`)."""

from __future__ import annotations

import abc
from typing import ClassVar, Optional

from xtreme_jax.registry.spec import BenchmarkSpec


class BenchmarkData(abc.ABC):
  """Reads (task, language, split) of one benchmark's data. The subclasses are frozen dataclasses with the
  fields `source`, `data_dir` and `translations_dir`."""

  benchmark: ClassVar[BenchmarkSpec]  # the registry's tasks, languages and files
  translations_dir: Optional[str]

  @abc.abstractmethod
  def read(self, task: str, language: str, split: str):
    """The records of (task, language, split)."""

  @abc.abstractmethod
  def location(self, task: str, language: str, split: str) -> str:
    """The file (task, language, split) is read from, the one its predictions follow."""

  @abc.abstractmethod
  def available(self, task: str, language: str, split: str) -> bool:
    """Whether (task, language, split) can be read."""

  def locations(self, task: str, language: str, split: str) -> list[str]:
    """Every file reading (task, language, split) opens (here `location`'s one)."""
    return [self.location(task, language, split)]

  @property
  def translations_root(self) -> Optional[str]:
    """Where translations are read from (FILTER's pairs, translate-train): here the user's `translations_dir`."""
    return self.translations_dir
