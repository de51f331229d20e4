"""Languages derived from a base language (or a natural corpus) by transformations, sentence-parallel to it.

A `Language(base, transformations)` yields, for the base's sentence i, its sentence i: the same derivation,
topic and mood, its tokens reordered and re-spelled, and the gold tags (and word ids, `order`) moved along
with the tokens. Two kinds of transformation compose in the order given:

- word forms (applied to the lexicon's form table): `VocabularyShift` (every word a new, unrelated form,
  disjoint from the base's), `PartialOverlap` (a share of the words keeps its form), `ScriptChange` (every
  character moved to another Unicode block through a fixed table: K et al.'s Fake-English, whose subword
  pieces mirror the base's);
- word order (applied to each sentence): `InvertOrder` (the sentence reversed, its final punctuation kept
  last), `HeadFinal` (every phrase puts its head last: SOV, postpositions, final subordinators) and
  `PermuteConstituents` (a fixed random order of the children of each rule). Reorderings of a derivation are
  permutations of each phrase's children, so they compose (`surface_orders` reads back each phrase's order);
  punctuation keeps its place among its siblings.

A reordered language should get its own word forms too, so order is measured apart from overlap:
`Language(base, (VocabularyShift(seed=1), InvertOrder()))`.

A natural corpus (`Corpus`, `corpus_sentences`: one sentence per line, whitespace tokens) is a base too:
its sentences have no tags or derivations, and word ids from its vocabulary (most frequent first, ties by
form). The form transformations and `InvertOrder` apply to it; `HeadFinal` and `PermuteConstituents` need
derivations and raise `errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import unicodedata
from collections import Counter
from typing import Callable, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.synthetic import grammar
from xtreme_jax.data.synthetic.grammar import BaseLanguage, Leaf, Node, Sentence, Word

Forms = tuple[tuple[str, ...], ...]  # word id -> its forms

SHIFT_STREAM, OVERLAP_STREAM, PERMUTE_STREAM = 3, 4, 5  # first elements of seed tuples (grammar.rng_for)

_PUNCTUATION = {".": "\u0964", "?": "\u061f", ",": "\u060c", ";": "\u061b", "!": "\u055c", ":": "\u05c3"}
_DIGITS = dict(zip("0123456789", (chr(0x0660 + i) for i in range(10))))  # Arabic-Indic digits
_CYRILLIC = "".join(chr(0x0430 + i) for i in range(26))  # а .. щ
_GREEK = "αβγδεζηθικλμνξοπρστυφχψωϝϙ"  # the 24 letters, digamma, koppa


def _script(lower: str) -> dict[str, str]:
  """a-z -> `lower`, A-Z -> its upper case, digits and common punctuation -> non-Latin ones (all unchanged by
  NFKC, so a SentencePiece model sees them as they are)."""
  letters = "abcdefghijklmnopqrstuvwxyz"
  table = dict(zip(letters, lower))
  table.update(zip(letters.upper(), lower.upper()))
  table.update(_DIGITS)
  table.update(_PUNCTUATION)
  return table


SCRIPTS = {"cyrillic": _script(_CYRILLIC), "greek": _script(_GREEK)}


@dataclasses.dataclass(frozen=True)
class Transformation:
  """A derivation of one language from another: `forms` maps the form table, `reorder` a sentence's tokens."""

  needs_derivations = False  # (a class attribute, not a field)

  @property
  def name(self) -> str:
    raise NotImplementedError

  def forms(self, forms: Forms, lexicon: Sequence[Word]) -> Forms:
    """The new form table (word id -> forms) from the current one; `lexicon` holds the base's words."""
    return forms

  def reorder(self, sentence: Sentence) -> Optional[tuple[int, ...]]:
    """The new token order as positions in `sentence` (new token i = old token result[i]); None: unchanged."""
    return None


def _all_forms(forms: Forms, lexicon: Sequence[Word]) -> set[str]:
  return {f for word_forms in forms for f in word_forms} | {f for word in lexicon for f in word.forms}


def _replaced(forms: Forms, lexicon: Sequence[Word], ids: Sequence[int], rng: np.random.Generator) -> Forms:
  """`forms` with the words `ids` given new forms, disjoint from every current and base form."""
  new = grammar.make_forms(rng, [lexicon[i] for i in ids], forbidden=_all_forms(forms, lexicon))
  return tuple(new.get(i, f) for i, f in enumerate(forms))


@dataclasses.dataclass(frozen=True)
class VocabularyShift(Transformation):
  """Every word a new form (singular and plural), none of them a form of the base or of the language so far
  (disjoint token strings, unrelated to the base's letter by letter, unlike `ScriptChange`). Punctuation too:
  its new forms are syllables like any word's."""

  seed: int = 0

  def __post_init__(self):
    grammar.rng_for(self.seed)  # checks the seed

  @property
  def name(self) -> str:
    return f"shift{self.seed}"

  def forms(self, forms: Forms, lexicon: Sequence[Word]) -> Forms:
    return _replaced(forms, lexicon, range(len(forms)), grammar.rng_for(SHIFT_STREAM, self.seed))


@dataclasses.dataclass(frozen=True)
class PartialOverlap(Transformation):
  """round(share x vocabulary) words, drawn from `seed`, keep the forms they have; the others get new forms
  as under `VocabularyShift` (share 0: a full shift; share 1: unchanged)."""

  share: float = 0.5
  seed: int = 0

  def __post_init__(self):
    errors.require(0.0 <= self.share <= 1.0, f"PartialOverlap share={self.share}: must be in [0, 1]")
    grammar.rng_for(self.seed)  # checks the seed

  @property
  def name(self) -> str:
    return f"overlap{self.share:g}"

  def kept(self, n_words: int) -> frozenset[int]:
    """The ids of the words that keep their forms."""
    rng = grammar.rng_for(OVERLAP_STREAM, self.seed, 0)
    return frozenset(int(i) for i in rng.permutation(n_words)[:round(self.share * n_words)])

  def forms(self, forms: Forms, lexicon: Sequence[Word]) -> Forms:
    kept = self.kept(len(forms))
    changed = [i for i in range(len(forms)) if i not in kept]
    return _replaced(forms, lexicon, changed, grammar.rng_for(OVERLAP_STREAM, self.seed, 1))


@dataclasses.dataclass(frozen=True)
class ScriptChange(Transformation):
  """Every character through the fixed table `SCRIPTS[script]`: a-z to 26 letters of the script, A-Z to their
  upper case, digits and . , ? ! ; : to non-Latin ones; other characters (in a corpus) stay as they are."""

  script: str = "cyrillic"

  def __post_init__(self):
    errors.require(self.script in SCRIPTS, f"ScriptChange script={self.script!r}: expected one of {sorted(SCRIPTS)}")

  @property
  def name(self) -> str:
    return f"script-{self.script}"

  def convert(self, form: str) -> str:
    table = SCRIPTS[self.script]
    return "".join(table.get(c, c) for c in form)

  def forms(self, forms: Forms, lexicon: Sequence[Word]) -> Forms:
    return tuple(tuple(self.convert(f) for f in word_forms) for word_forms in forms)


def _is_punctuation(token: str) -> bool:
  return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


@dataclasses.dataclass(frozen=True)
class InvertOrder(Transformation):
  """The sentence reversed, except that a final punctuation token (tag PUNCT; in a corpus, a token of
  punctuation characters) stays last: the language still ends its sentences with punctuation, and a question
  still ends in its question mark."""

  @property
  def name(self) -> str:
    return "invert"

  def reorder(self, sentence: Sentence) -> tuple[int, ...]:
    n = len(sentence.tokens)
    last = sentence.tags[-1] == "PUNCT" if sentence.tags else n > 0 and _is_punctuation(sentence.tokens[-1])
    keep = 1 if last else 0
    return tuple(range(n - keep - 1, -1, -1)) + tuple(range(n - keep, n))


# -- reordering derivations ---------------------------------------------------------------------------------

Arrange = Callable[[Node, list[int]], list[int]]  # (phrase, its movable children in current order) -> new order


def _is_punctuation_leaf(child: Union[Node, Leaf]) -> bool:
  return isinstance(child, Leaf) and child.upos == "PUNCT"


def _with_punctuation_fixed(node: Node, current: list[int], arrange: Arrange) -> list[int]:
  """`arrange` applied to the children other than punctuation, which keeps its slots."""
  fixed = {slot for slot, k in enumerate(current) if _is_punctuation_leaf(node.children[k])}
  moved = iter(arrange(node, [k for k in current if not _is_punctuation_leaf(node.children[k])]))
  return [current[slot] if slot in fixed else next(moved) for slot in range(len(current))]


def _rearranged(node: Union[Node, Leaf], start: int, rank: dict[int, int], arrange: Arrange,
                orders: list) -> tuple[list[int], int]:
  """(the base positions of the subtree's words in their new order, the next start); each phrase's children
  are taken in their current order (by where their words are now, `rank`) and rearranged; `orders` collects
  (phrase, current order of its children)."""
  if isinstance(node, Leaf):
    return [start], start + 1
  parts = []
  for child in node.children:
    part, start = _rearranged(child, start, rank, arrange, orders)
    parts.append(part)
  current = sorted(range(len(parts)), key=lambda k: min(rank[p] for p in parts[k]))
  orders.append((node, tuple(current)))
  return [p for k in _with_punctuation_fixed(node, current, arrange) for p in parts[k]], start


def _require_derivation(sentence: Sentence, user: str) -> Node:
  if sentence.derivation is None:
    raise errors.ConfigError(_no_derivation_message(user))
  return sentence.derivation


def _no_derivation_message(user: str) -> str:
  return (f"{user} reorders phrases by their derivation, which a natural corpus does not have; on a corpus use "
          "VocabularyShift, PartialOverlap, ScriptChange or InvertOrder")


def _reorder_phrases(sentence: Sentence, transformation: Transformation, arrange: Arrange) -> tuple[int, ...]:
  derivation = _require_derivation(sentence, type(transformation).__name__)
  rank = {base: i for i, base in enumerate(sentence.order)}
  new_order, _ = _rearranged(derivation, 0, rank, arrange, [])
  return tuple(rank[p] for p in new_order)


def surface_orders(sentence: Sentence) -> tuple[tuple[Node, tuple[int, ...]], ...]:
  """For every phrase of the derivation (children before parents), its children's indices in the order the
  sentence's tokens put them."""
  derivation = _require_derivation(sentence, "surface_orders")
  orders: list = []
  _rearranged(derivation, 0, {base: i for i, base in enumerate(sentence.order)}, lambda node, c: c, orders)
  return tuple(orders)


@dataclasses.dataclass(frozen=True)
class HeadFinal(Transformation):
  """Every phrase puts its head child last, the others keeping their order: SOV, postpositions, clause-final
  subordinators, a coordination's conjunction last (the conjunction heads it)."""

  needs_derivations = True

  @property
  def name(self) -> str:
    return "head-final"

  def reorder(self, sentence: Sentence) -> tuple[int, ...]:
    def arrange(node: Node, movable: list[int]) -> list[int]:
      return [k for k in movable if k != node.head] + [k for k in movable if k == node.head]
    return _reorder_phrases(sentence, self, arrange)


@functools.lru_cache(maxsize=4096)
def _rule_permutation(seed: int, rule: str, size: int) -> tuple[int, ...]:
  digest = hashlib.sha256(rule.encode("utf-8")).digest()
  words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4)]
  return tuple(int(i) for i in grammar.rng_for(PERMUTE_STREAM, seed, size, *words).permutation(size))


@dataclasses.dataclass(frozen=True)
class PermuteConstituents(Transformation):
  """The children of every phrase in a fixed random order per rule (the phrase's label and the labels of its
  children other than punctuation, in their current order), drawn from `seed` and the rule, so the same rule
  always permutes alike (a permutation may be the identity; punctuation keeps its place)."""

  seed: int = 0
  needs_derivations = True

  def __post_init__(self):
    grammar.rng_for(self.seed)  # checks the seed

  @property
  def name(self) -> str:
    return f"permute{self.seed}"

  def permutation(self, label: str, child_labels: Sequence[str]) -> tuple[int, ...]:
    """The permutation of the rule `label -> child_labels` (new child i = old child result[i])."""
    return _rule_permutation(self.seed, f"{label} -> {' '.join(child_labels)}", len(child_labels))

  def reorder(self, sentence: Sentence) -> tuple[int, ...]:
    def arrange(node: Node, movable: list[int]) -> list[int]:
      permutation = self.permutation(node.label, [node.children[k].label for k in movable])
      return [movable[j] for j in permutation]
    return _reorder_phrases(sentence, self, arrange)


# -- natural corpora ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Corpus:
  """A natural corpus as a base: `lines` of whitespace tokens (an empty line an empty sentence, so sentence i
  is line i), and a lexicon of its word types (most frequent first, ties by form; no tags)."""

  lines: tuple[tuple[str, ...], ...]
  lexicon: tuple[Word, ...] = dataclasses.field(init=False, repr=False, compare=False)
  _ids: dict = dataclasses.field(init=False, repr=False, compare=False)

  def __post_init__(self):
    counts = Counter(token for line in self.lines for token in line)
    types = sorted(counts, key=lambda form: (-counts[form], form))
    object.__setattr__(self, "lexicon", tuple(Word(i, None, (form,)) for i, form in enumerate(types)))
    object.__setattr__(self, "_ids", {form: i for i, form in enumerate(types)})

  @classmethod
  def from_lines(cls, lines: Iterable[str]) -> Corpus:
    return cls(tuple(tuple(line.split()) for line in lines))

  def sentences(self, n: Optional[int] = None, seed: Optional[int] = None) -> list[Sentence]:
    """The first `n` lines (all with None) as sentences; a corpus has no samples, so no `seed`."""
    errors.require(seed is None, f"seed={seed!r}: a corpus's sentences are its lines; split it by lines")
    lines = self.lines if n is None else self.lines[:n]
    return [Sentence(tokens=line, tags=None, word_ids=tuple(self._ids[t] for t in line),
                     order=tuple(range(len(line)))) for line in lines]


def corpus_sentences(lines: Iterable[str]) -> list[Sentence]:
  """The sentences of a corpus given as lines (one sentence a line, whitespace tokens)."""
  return Corpus.from_lines(lines).sentences()


# -- derived languages ---------------------------------------------------------------------------------------


def _permuted(sentence: Sentence, permutation: Sequence[int]) -> Sentence:
  def take(values):
    return None if values is None else tuple(values[i] for i in permutation)
  return dataclasses.replace(sentence, tokens=take(sentence.tokens), tags=take(sentence.tags),
                             word_ids=take(sentence.word_ids), order=take(sentence.order))


@dataclasses.dataclass(frozen=True)
class Language:
  """`base` (a `BaseLanguage` or a `Corpus`) under `transformations`, applied in order; `forms` is the
  resulting form table (word id -> forms)."""

  base: Union[BaseLanguage, Corpus]
  transformations: tuple[Transformation, ...] = ()
  forms: Forms = dataclasses.field(init=False, repr=False, compare=False)

  def __post_init__(self):
    errors.require(isinstance(self.base, (BaseLanguage, Corpus)),
                   f"Language base: expected a BaseLanguage or a Corpus, got {type(self.base).__name__}")
    transformations = tuple(self.transformations)
    for t in transformations:
      errors.require(isinstance(t, Transformation), f"Language: {t!r} is not a Transformation")
      if isinstance(self.base, Corpus) and t.needs_derivations:
        raise errors.ConfigError(_no_derivation_message(type(t).__name__))
    forms: Forms = tuple(word.forms for word in self.base.lexicon)
    for t in transformations:
      forms = t.forms(forms, self.base.lexicon)
    object.__setattr__(self, "transformations", transformations)
    object.__setattr__(self, "forms", forms)

  @property
  def name(self) -> str:
    return "+".join(t.name for t in self.transformations) or "base"

  def derive(self, sentence: Sentence) -> Sentence:
    """This language's parallel of the base's `sentence`."""
    for t in self.transformations:
      permutation = t.reorder(sentence)
      if permutation is not None:
        sentence = _permuted(sentence, permutation)
    leaves = sentence.derivation.leaves() if sentence.derivation is not None else None
    numbers = [leaves[i].number for i in sentence.order] if leaves else [None] * len(sentence.order)
    tokens = tuple(grammar.inflect(self.forms[w], number) for w, number in zip(sentence.word_ids, numbers))
    return dataclasses.replace(sentence, tokens=tokens)

  def sentences(self, n: Optional[int] = None, seed: Optional[int] = None) -> list[Sentence]:
    """The parallels of `base.sentences(n, seed)` (a corpus: of its first n lines, no seed)."""
    base = self.base.sentences(n) if seed is None else self.base.sentences(n, seed)
    return [self.derive(s) for s in base]

  def iter_sentences(self, seed: int = 0) -> Iterator[Sentence]:
    """The parallels of a synthetic base's unending sample `seed`."""
    errors.require(isinstance(self.base, BaseLanguage), "iter_sentences: a corpus has no unending sample")
    return (self.derive(s) for s in self.base.iter_sentences(seed))
