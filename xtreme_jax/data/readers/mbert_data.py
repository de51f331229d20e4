"""Where the mBERT paper's examples come from: its datasets' own files under one folder (`registry/mbert.py`).

`MbertData(data_dir)` offers `read`, `location`, `available` like the other
benchmarks' data objects. Records: MLDoc `{"id", "text_a", "text_b",
"label"}` (`data/readers/mldoc.py`), NER `{"id", "tokens", "tags"}` in BIO
(`data/readers/conll_ner.py`), POS `{"id", "tokens", "tags"}` with the UPOS tags of
UD v1.4 (`data/readers/conllu.py`), parsing the CoNLL-U records (`tokens`, `upos`,
`heads`, `deprels`) of every UD v2.2 treebank of the language on disk, one
after the other (`registry/mbert.PARSING_TREEBANKS`, the paper's
concatenation; `concatenate_treebanks=False`: the first listed alone).
`location` names the first of them on disk (else the first listed).
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, Optional

from xtreme_jax import errors, fs
from xtreme_jax.data.readers import conll_ner, conllu, mldoc
from xtreme_jax.data.readers.benchmark_data import BenchmarkData
from xtreme_jax.registry.mbert import MBERT, parsing_files
from xtreme_jax.registry.spec import BenchmarkSpec

SOURCES = {"mldoc": "the MLDoc scripts (github.com/facebookresearch/MLDoc) run on the Reuters corpora RCV1 / RCV2",
           "ner": "CoNLL-2002 / CoNLL-2003 (eng, deu need the Reuters corpus) and Levow (2006) for Chinese",
           "pos": "Universal Dependencies v1.4 (hdl.handle.net/11234/1-1827)",
           "parsing": "Universal Dependencies v2.2 (hdl.handle.net/11234/1-2837)"}
SOURCES["parsing_gold_pos"] = SOURCES["parsing"]


def _pos(path: str) -> list[dict]:
  return [{"id": s["id"], "tokens": s["tokens"], "tags": s["upos"]} for s in conllu.read(path, check_trees=False)]


_READERS = {"mldoc": mldoc.read, "ner": conll_ner.read, "pos": _pos, "parsing": conllu.read,
            "parsing_gold_pos": conllu.read}


@dataclasses.dataclass(frozen=True)
class MbertData(BenchmarkData):
  """Reads (task, language, split) of the mBERT paper's tasks under `data_dir` (module docstring)."""

  source: str = "official"
  data_dir: Optional[str] = None
  translations_dir: Optional[str] = None
  concatenate_treebanks: bool = True
  benchmark: ClassVar[BenchmarkSpec] = MBERT

  def __post_init__(self):
    if not self.data_dir:
      raise errors.ConfigError("the mBERT paper's tasks need data_dir: the folder holding mldoc/, conll2002/, "
                               "conll2003/, chinese_ner/, ud-treebanks-v1.4/, ud-treebanks-v2.2/")

  def _check(self, task: str, language: str, split: str) -> None:
    spec = MBERT.task(task)
    if language not in spec.languages.get(split, ()):
      raise errors.ConfigError(f"{task} has no {split} data for {language!r}; languages with {split}: "
                               f"{' '.join(spec.languages.get(split, ()))}")

  def locations(self, task: str, language: str, split: str) -> list[str]:
    """Every file (task, language, split) reads, those not on disk included: a parsing language's treebanks."""
    self._check(task, language, split)
    if MBERT.task(task).kind.startswith("parsing"):
      files = parsing_files(language, split)
      return [os.path.join(self.data_dir, f) for f in (files if self.concatenate_treebanks else files[:1])]
    return [os.path.join(self.data_dir, MBERT.task(task).file(split, language))]

  def location(self, task: str, language: str, split: str) -> str:
    paths = self.locations(task, language, split)
    return next((p for p in paths if fs.isfile(p)), paths[0])

  def available(self, task: str, language: str, split: str) -> bool:
    return (language in MBERT.task(task).languages.get(split, ())
            and any(fs.isfile(p) for p in self.locations(task, language, split)))

  def read(self, task: str, language: str, split: str) -> list[dict]:
    paths = [p for p in self.locations(task, language, split) if fs.isfile(p)]
    if not paths:
      raise errors.MissingInputError(f"{task} {split} {language}: expected file {self.location(task, language, split)} "
                                     f"does not exist; it comes from {SOURCES[task]} (layout: xtreme_jax/registry/"
                                     "mbert.py)")
    return [record for path in paths for record in _READERS[task](path)]
