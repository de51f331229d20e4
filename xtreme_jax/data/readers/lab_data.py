"""Where the transfer lab's examples come from: the folder `data/synthetic/lab_dataset.write_lab_data` wrote.

`LabData(data_dir=...)` offers `read`, `location`, `available` and `benchmark` like the other benchmarks'
data objects; its benchmark is `registry.lab.LAB` with the folder's languages (its `lab.json`). Records: POS
`{"id", "tokens", "tags"}`, topic `{"id", "text_a", "text_b": None, "label"}`, retrieval `{"source": the
language's test sentences, "target": the base's}` (Tatoeba's: target i translates source i).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Optional

from xtreme_jax import errors, fs, text
from xtreme_jax.data.readers.benchmark_data import BenchmarkData
from xtreme_jax.data.synthetic import lab_dataset
from xtreme_jax.registry.lab import BASE, lab_benchmark
from xtreme_jax.registry.spec import BenchmarkSpec


def _lines(path: str) -> list[str]:
  return text.read_utf8(path, "the lab's generated data").split("\n")


def _tagged(path: str, labels: tuple, base: str) -> list[dict]:
  del base
  records = []
  for i, block in enumerate(text.blocks(_lines(path))):
    rows = [line.split("\t") for line in block]
    bad = next((r for r in rows if len(r) != 2 or r[1] not in labels), None)
    errors.require(bad is None, f"{path}: sentence {i + 1}: expected `token<TAB>tag` lines with tags in {labels}, "
                   f"got {bad!r}")
    records.append({"id": str(i), "tokens": [r[0] for r in rows], "tags": [r[1] for r in rows]})
  return records


def _labelled(path: str, labels: tuple, base: str) -> list[dict]:
  del base
  records = []
  for i, line in enumerate(line for line in _lines(path) if line):
    sentence, _, label = line.rpartition("\t")
    errors.require(label in labels, f"{path}: line {i + 1}: label {label!r}; expected one of {labels}")
    records.append({"id": str(i), "text_a": sentence, "text_b": None, "label": label})
  return records


def _parallel(path: str, labels: tuple, base: str) -> dict:
  del labels
  lines = lambda p: [line for line in _lines(p) if line]  # noqa: E731
  source, target = lines(path), lines(base)
  errors.require(len(source) == len(target), f"{path}: {len(source)} sentences; {base} has {len(target)} (line i "
                 "translates line i)")
  return {"source": source, "target": target}


_READERS = {"pos": _tagged, "topic": _labelled, "retrieval": _parallel}  # (path, labels, the base's file) -> records


@dataclasses.dataclass(frozen=True)
class LabData(BenchmarkData):
  """Reads (task, language, split) of the lab folder `data_dir` (module docstring)."""

  source: str = "official"
  data_dir: Optional[str] = None
  translations_dir: Optional[str] = None

  def __post_init__(self):
    if not self.data_dir or lab_dataset.written(self.data_dir) is None:
      raise errors.MissingInputError(f"the lab's data folder {self.data_dir} has no {lab_dataset.MANIFEST}; the lab "
                                     "run mode writes it (runs/lab.py)")

  @functools.cached_property
  def languages(self) -> tuple[str, ...]:
    """The folder's languages, the base first (its `lab.json`, read once)."""
    return tuple(lab_dataset.written(self.data_dir)["languages"])

  @functools.cached_property
  def benchmark(self) -> BenchmarkSpec:
    return lab_benchmark(self.languages)

  def location(self, task: str, language: str, split: str) -> str:
    return os.path.join(self.data_dir, self.benchmark.task(task).file(split, language))

  def available(self, task: str, language: str, split: str) -> bool:
    return language in self.benchmark.task(task).languages.get(split, ()) and \
        fs.isfile(self.location(task, language, split))

  def read(self, task: str, language: str, split: str):
    spec = self.benchmark.task(task)
    errors.require(language in spec.languages.get(split, ()), f"lab {task} has no {split} data for {language!r}; "
                   f"languages: {' '.join(spec.languages.get(split, ()))}")
    path = self.location(task, language, split)
    if not fs.isfile(path):
      raise errors.MissingInputError(f"lab {task} {split} {language}: expected file {path} does not exist")
    return _READERS[task](path, spec.labels, self.location(task, BASE, split))
