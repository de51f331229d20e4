"""The transfer lab's data: languages named by short recipes, generated once into a folder the lab reads.

A language recipe is a `+`-separated list of transformations of the base language, applied in order:

| recipe | transformation |
|---|---|
| `shift(s)` | every word gets a new, unrelated form (seed s): no word form shared with the base |
| `overlap(p)` or `overlap(p,s)` | a share p of the word types keep their base form, the rest new forms |
| `script(cyrillic)` / `script(greek)` | every letter moved into another script (K et al.'s Fake-English) |
| `invert` | the sentence reversed (final punctuation kept last) |
| `head_final` | every phrase's head last (SOV, postpositions) |
| `permute(s)` | a fixed random order of each rule's constituents (seed s) |

e.g. `{"base": "", "shift": "shift(1)", "shift_inv": "shift(2)+invert", "overlap50": "overlap(0.5)"}`; a
reordered language gets its own forms (`shift(2)+invert`) so that order is tested apart from overlap.
`write_lab_data` writes every language's task files (`registry/lab.py`), its pretraining text
(`pretrain/{lg}.txt`, one sentence per line, a blank line after every `DOCUMENT_SENTENCES`; sample seed
`SAMPLE_SEEDS["pretrain"]` plus the language's position) and `lab.json`
(the recipe, sizes and seeds: what the folder holds). Splits are different samples of the one grammar (sample
seeds `SAMPLE_SEEDS`); every language's sentence i of a split is the translation of the base's sentence i.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Mapping, Optional

from xtreme_jax import atomic, errors, fs
from xtreme_jax.data.synthetic.grammar import BaseLanguage
from xtreme_jax.data.synthetic.transforms import (HeadFinal, InvertOrder, Language, PartialOverlap,
                                                  PermuteConstituents, ScriptChange, Transformation,
                                                  VocabularyShift)
from xtreme_jax.registry.lab import BASE

SAMPLE_SEEDS = {"train": 1, "dev": 2, "test": 3, "pretrain": 4}
DOCUMENT_SENTENCES = 8
MANIFEST = "lab.json"
DEFAULT_LANGUAGES = {BASE: "", "shift": "shift(1)", "shift_inv": "shift(2)+invert", "overlap50": "overlap(0.5,3)"}

_STEP = re.compile(r"^([a-z_]+)(?:\(([^()]*)\))?$")


def _number(text: str, kind: type, step: str):
  try:
    return kind(text)
  except ValueError:
    raise errors.ConfigError(f"language recipe step {step!r}: {text!r} is not a {kind.__name__}") from None


def _transformation(step: str) -> Transformation:
  match = _STEP.match(step.strip())
  name, args = (match.group(1), [a.strip() for a in match.group(2).split(",")] if match.group(2) else []) \
      if match else (None, [])
  makers = {
      "shift": lambda: VocabularyShift(seed=_number(args[0], int, step) if args else 0),
      "overlap": lambda: PartialOverlap(share=_number(args[0], float, step),
                                        seed=_number(args[1], int, step) if len(args) > 1 else 0),
      "script": lambda: ScriptChange(script=args[0] if args else "cyrillic"),
      "invert": InvertOrder, "head_final": HeadFinal,
      "permute": lambda: PermuteConstituents(seed=_number(args[0], int, step) if args else 0)}
  if name not in makers or (name == "overlap" and not args):
    raise errors.ConfigError(f"language recipe step {step!r}; expected one of shift(seed), overlap(share[,seed]), "
                             "script(cyrillic|greek), invert, head_final, permute(seed)")
  return makers[name]()


def parse_recipe(recipe: str) -> tuple[Transformation, ...]:
  """The transformations of a recipe string (module docstring); '' is the base language itself."""
  errors.require(isinstance(recipe, str), f"language recipe {recipe!r}; expected a string such as 'shift(1)+invert'")
  return tuple(_transformation(step) for step in recipe.split("+") if step.strip())


@dataclasses.dataclass(frozen=True)
class LabLanguages:
  """The lab's languages (name -> recipe; the base language `BASE` first, with recipe '') and sizes: sentences
  per language of the pretraining text and of each task split. Each language's pretraining text is its own
  sample of the grammar (comparable corpora), or with `parallel_pretraining` the translation of the base's (as
  Dufter & Schütze's parallel Fake-English)."""

  languages: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_LANGUAGES))
  base_seed: int = 0
  vocabulary_size: int = 300
  pretrain_sentences: int = 20000
  train_sentences: int = 1000
  dev_sentences: int = 200
  test_sentences: int = 500
  parallel_pretraining: bool = False

  def __post_init__(self):
    errors.require(isinstance(self.languages, Mapping) and BASE in self.languages,
                   f"LAB languages {self.languages!r}; expected a dict {{name: recipe}} holding {BASE!r}")
    errors.require(self.languages[BASE] == "", f"the base language's recipe must be '' (got {self.languages[BASE]!r})")
    for name in self.languages:
      errors.require(isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]*", name) is not None,
                     f"LAB language name {name!r}; expected lower-case letters, digits and _ (a file name)")
      try:  # a bad recipe is refused here, before anything is written
        parse_recipe(self.languages[name])
      except errors.ConfigError as e:
        raise errors.ConfigError(f"LAB languages[{name!r}]: {e}") from None
    for size in ("pretrain_sentences", "train_sentences", "dev_sentences", "test_sentences"):
      errors.require(getattr(self, size) > 0, f"LabLanguages.{size}={getattr(self, size)}; expected > 0")

  @property
  def names(self) -> tuple[str, ...]:
    """The languages, the base first."""
    return (BASE,) + tuple(n for n in self.languages if n != BASE)

  def built(self) -> dict[str, Language]:
    base = BaseLanguage(seed=self.base_seed, vocabulary_size=self.vocabulary_size)
    return {name: Language(base, parse_recipe(self.languages[name])) for name in self.names}

  def describe(self) -> dict:
    return {**dataclasses.asdict(self), "languages": {n: self.languages[n] for n in self.names}}


def _write_split(folder: str, split: str, name: str, sentences: list) -> None:
  pos = "".join("".join(f"{t}\t{g}\n" for t, g in zip(s.tokens, s.tags)) + "\n" for s in sentences)
  atomic.write_text(os.path.join(folder, "pos", f"{split}-{name}.tsv"), pos)
  topic = "".join(f"{' '.join(s.tokens)}\t{s.label}\n" for s in sentences)
  atomic.write_text(os.path.join(folder, "topic", f"{split}-{name}.tsv"), topic)
  if split == "test":
    atomic.write_text(os.path.join(folder, "retrieval", f"test-{name}.txt"),
                      "".join(" ".join(s.tokens) + "\n" for s in sentences))


def _pretraining_text(sentences: list) -> str:
  lines = []
  for i, s in enumerate(sentences):
    lines.append(" ".join(s.tokens) + "\n")
    if (i + 1) % DOCUMENT_SENTENCES == 0:
      lines.append("\n")
  return "".join(lines)


def manifest(lab: LabLanguages) -> dict:
  """What `lab.json` holds: the format, the recipes, sizes and seeds."""
  return {"format": 1, **lab.describe()}


def written(folder: str) -> Optional[dict]:
  """The manifest of the lab data in `folder` (None: none written, or not completely)."""
  path = os.path.join(folder, MANIFEST)
  return json.loads(fs.read_text(path)) if fs.isfile(path) else None


def write_lab_data(folder: str, lab: LabLanguages) -> dict:
  """Generates every language's files into `folder` (module docstring); a folder already holding this lab's
  data (its `lab.json`) is kept as it is. Returns the manifest."""
  wanted = manifest(lab)
  if written(folder) == wanted:
    return wanted
  languages = lab.built()
  sizes = {"train": lab.train_sentences, "dev": lab.dev_sentences, "test": lab.test_sentences}
  for split, n in sizes.items():
    base = languages[BASE].base.sentences(n, SAMPLE_SEEDS[split])
    for name, language in languages.items():
      _write_split(folder, split, name, [language.derive(s) for s in base])
  for i, (name, language) in enumerate(languages.items()):
    seed = SAMPLE_SEEDS["pretrain"] + (0 if lab.parallel_pretraining else i)
    pretrain = language.base.sentences(lab.pretrain_sentences, seed)
    atomic.write_text(os.path.join(folder, "pretrain", f"{name}.txt"),
                      _pretraining_text([language.derive(s) for s in pretrain]))
  atomic.write_json(os.path.join(folder, MANIFEST), wanted)  # last: a folder with its manifest is complete
  return wanted
