"""The base synthetic language: a seeded lexicon and a small probabilistic grammar with derivation trees.

A `BaseLanguage` draws a lexicon of pronounceable ASCII word forms (syllables; every form distinct) with
Universal POS tags, singular/plural forms for nouns, verbs, determiners and auxiliaries, Zipfian frequencies
within each part of speech, and topics: each content word (NOUN, VERB, ADJ, ADV) has a home topic and a small
weight in the others, and a sentence draws its topic first and its content words from that topic's weights.

Sentences come from a grammar with three clause types (transitive, intransitive, copular: AUX + ADJ) in three
moods (statement; question, marked by a sentence-initial PART or an agreeing AUX and ending in "?"; negated, a
PART before the verb), optional PP (ADP + NP) and ADV attached to the VP, an optional subordinate clause
(SBAR: SCONJ + clause) and NP coordination (NP CCONJ NP, plural), with the depth of embedding bounded. The verb
(or copula, or question AUX) agrees in number with its subject and a determiner with its noun.

Each `Sentence` keeps its derivation (`Node`s with a label, a head child index and children; `Leaf`s with the
word id, UPOS tag and number), its topic, mood and clause type. Its classification `label` is the topic
(`topic0` ... `topicK`): the topic is drawn first, uniformly, so the classes are balanced, and it shows in
most content words of the sentence rather than in one marker word (as the mood does), so a classifier has to
transfer word meanings across the vocabulary, as in topic classification of news (the mood stays available as
`Sentence.mood`, balanced too).

Everything is drawn from `numpy.random.default_rng` seeded with fixed-length integer tuples (never Python's
salted `hash`), so the same seeds give the same lexicon and sentences in any process; sentence i of a sample
has its own generator, so `sentences(n, seed)` is a prefix of `sentences(n + k, seed)`.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional, Sequence, Union

import numpy as np

from xtreme_jax import errors

UPOS_TAGS = ("NOUN", "VERB", "ADJ", "ADV", "DET", "PRON", "ADP", "AUX", "PART", "CCONJ", "SCONJ", "PUNCT")
CONTENT_TAGS = ("NOUN", "VERB", "ADJ", "ADV")
INFLECTED_TAGS = ("NOUN", "VERB", "DET", "AUX")  # words with (singular, plural) forms
NUMBERS = ("Sing", "Plur")
MOODS = ("statement", "question", "negated")
CLAUSES = ("transitive", "intransitive", "copular")
PUNCTUATION_FORMS = {"statement": ".", "question": "?"}

# (tag, kind, count) of the closed classes; a PRON's kind is its number, a VERB's its valency
FUNCTION_WORDS = (("DET", "", 4), ("PRON", "Sing", 3), ("PRON", "Plur", 3), ("ADP", "", 8), ("AUX", "copula", 1),
                  ("AUX", "do", 1), ("PART", "question", 1), ("PART", "negation", 1), ("CCONJ", "", 3),
                  ("SCONJ", "", 4), ("PUNCT", "statement", 1), ("PUNCT", "question", 1))
# (tag, kind, share of the content words); the nouns take the rest
CONTENT_SHARES = (("VERB", "transitive", 0.125), ("VERB", "intransitive", 0.125), ("ADJ", "", 0.2), ("ADV", "", 0.15))

# generation probabilities
P_COORDINATION, P_PRONOUN, P_DET, P_ADJ, P_PP, P_ADV, P_SBAR = 0.12, 0.2, 0.8, 0.35, 0.3, 0.25, 0.2

ONSETS = ("p", "t", "k", "b", "d", "g", "m", "n", "s", "l", "r", "f", "v", "h", "j", "w", "z")
VOWELS = ("a", "e", "i", "o", "u")
CODAS = ("", "", "", "", "n", "s", "r", "l", "k", "m")

# first element of every seed tuple: what the generator is for (seed tuples of one purpose have one length)
LEXICON_STREAM, SENTENCE_STREAM = 1, 2


def rng_for(*key: int) -> np.random.Generator:
  """A generator seeded with the tuple `key` of non-negative integers (a seed a user gives is checked)."""
  for k in key:
    errors.require(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0,
                   f"a seed must be a non-negative integer, got {k!r}")
  return np.random.default_rng([int(k) for k in key])


@dataclasses.dataclass(frozen=True)
class Word:
  """A lexicon entry: `forms` is (singular, plural) for an inflected tag, else one form; `kind` sub-classes
  the tag (a VERB's valency, a PRON's number, which AUX / PART / PUNCT); `weights` are per-topic Zipf weights."""

  id: int
  pos: Optional[str]
  forms: tuple[str, ...]
  kind: str = ""
  weights: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class Leaf:
  """A word of a derivation: lexicon id, UPOS tag and number (None where the word has none)."""

  word_id: int
  upos: str
  number: Optional[str] = None

  @property
  def label(self) -> str:
    return self.upos


@dataclasses.dataclass(frozen=True)
class Node:
  """A phrase: `label` (S, NP, VP, PP, SBAR), `children[head]` its head, `number` its agreement number."""

  label: str
  head: int
  children: tuple[Union[Node, Leaf], ...]
  number: Optional[str] = None

  def leaves(self) -> tuple[Leaf, ...]:
    """The words of the phrase in the base language's order."""
    out: list[Leaf] = []
    for child in self.children:
      out.extend((child,) if isinstance(child, Leaf) else child.leaves())
    return tuple(out)

  def head_leaf(self) -> Leaf:
    """The lexical head, following head children down."""
    child = self.children[self.head]
    return child if isinstance(child, Leaf) else child.head_leaf()


@dataclasses.dataclass(frozen=True)
class Sentence:
  """One sentence: `tokens`, their gold UPOS `tags` (None for a natural corpus) and lexicon `word_ids`, the
  base language's `derivation` (None for a corpus), `order` (token i realizes the base sentence's token
  `order[i]`), and the derivation's properties: `topic`, `mood`, `clause` (the main clause's type)."""

  tokens: tuple[str, ...]
  tags: Optional[tuple[str, ...]]
  word_ids: tuple[int, ...]
  order: tuple[int, ...]
  derivation: Optional[Node] = None
  topic: Optional[int] = None
  mood: Optional[str] = None
  clause: Optional[str] = None

  @property
  def label(self) -> Optional[str]:
    """The classification label: the topic, `topic<k>` (module docstring: why the topic)."""
    return None if self.topic is None else topic_label(self.topic)


def topic_label(topic: int) -> str:
  return f"topic{topic}"


def inflect(forms: Sequence[str], number: Optional[str]) -> str:
  """The form of a word for `number`: the plural form of an inflected word if plural, else its first form."""
  return forms[1] if number == "Plur" and len(forms) > 1 else forms[0]


# -- word forms ---------------------------------------------------------------------------------------------


def _pick(rng: np.random.Generator, options: Sequence[str]) -> str:
  return options[int(rng.integers(len(options)))]


def _stem(rng: np.random.Generator, syllables: int) -> str:
  parts = []
  for i in range(syllables):
    onset = "" if i == 0 and rng.random() < 0.15 else _pick(rng, ONSETS)
    parts.append(onset + _pick(rng, VOWELS) + _pick(rng, CODAS))
  return "".join(parts)


def _syllable_count(rng: np.random.Generator, word: Word) -> int:
  if word.pos is None:  # a corpus word: about as long as its form
    return int(np.clip(round(len(word.forms[0]) / 2.5), 1, 5))
  if word.pos in CONTENT_TAGS:
    return 2 + int(rng.random() < 0.4)
  return 1


def make_forms(rng: np.random.Generator, words: Sequence[Word], forbidden=()) -> dict[int, tuple[str, ...]]:
  """New forms for `words` (by id): a syllable stem, plus a plural suffix drawn per inflected tag; every form
  differs from the others and from `forbidden`. An inflected tag gets (singular, plural), any other word
  (a corpus word too) one form."""
  suffixes = {tag: _pick(rng, VOWELS) + _pick(rng, CODAS[4:]) for tag in INFLECTED_TAGS}
  used = set(forbidden)
  out = {}
  for word in words:
    syllables = _syllable_count(rng, word)
    for attempt in range(1000):
      stem = _stem(rng, syllables + attempt // 50)  # longer once the short forms run out
      if word.pos in INFLECTED_TAGS:
        forms = (stem, stem + suffixes[word.pos])
      else:
        forms = (stem,)
      if used.isdisjoint(forms):
        break
    used.update(forms)
    out[word.id] = forms
  return out


# -- lexicon --------------------------------------------------------------------------------------------------


def _groups(vocabulary_size: int, n_topics: int) -> list[tuple[str, str, int]]:
  """(tag, kind, count) of every word class; the content classes split what the closed classes leave."""
  closed = sum(count for _, _, count in FUNCTION_WORDS)
  minimum = closed + 10 * n_topics
  errors.require(vocabulary_size >= minimum,
                 f"vocabulary_size={vocabulary_size}: with {n_topics} topics it must be at least {minimum}")
  content = vocabulary_size - closed
  groups = [(tag, kind, int(share * content)) for tag, kind, share in CONTENT_SHARES]
  nouns = content - sum(count for _, _, count in groups)
  return [("NOUN", "", nouns)] + groups + list(FUNCTION_WORDS)


def _weights(rng: np.random.Generator, tag: str, count: int, n_topics: int, off_topic: float) -> np.ndarray:
  """[count, n_topics] weights: Zipf over a random ranking; a content word's home topic (round-robin over the
  ranks, so every topic gets words of every frequency) weighs 1, the others off_topic x uniform(0, 2)."""
  ranks = rng.permutation(count)
  zipf = 1.0 / (ranks + 1.0)
  if tag not in CONTENT_TAGS:
    return np.repeat(zipf[:, None], n_topics, axis=1)
  affinity = off_topic * rng.uniform(0.0, 2.0, size=(count, n_topics))
  affinity[np.arange(count), ranks % n_topics] = 1.0
  return zipf[:, None] * affinity


def build_lexicon(seed: int, vocabulary_size: int, n_topics: int, off_topic: float) -> tuple[Word, ...]:
  """The lexicon: words grouped by tag (ids in the order of `_groups`), forms and weights drawn from `seed`."""
  rng = rng_for(LEXICON_STREAM, seed)
  specs = [(tag, kind) for tag, kind, count in _groups(vocabulary_size, n_topics) for _ in range(count)]
  bare = [Word(i, tag, (), kind) for i, (tag, kind) in enumerate(specs)]
  forms = make_forms(rng, [w for w in bare if w.pos != "PUNCT"], forbidden=PUNCTUATION_FORMS.values())
  forms.update({w.id: (PUNCTUATION_FORMS[w.kind],) for w in bare if w.pos == "PUNCT"})
  weights = np.zeros((len(specs), n_topics))
  start = 0
  for tag, _, count in _groups(vocabulary_size, n_topics):
    weights[start:start + count] = _weights(rng, tag, count, n_topics, off_topic)
    start += count
  return tuple(dataclasses.replace(w, forms=forms[w.id], weights=tuple(float(x) for x in weights[w.id]))
               for w in bare)


def _sampling_tables(lexicon: Sequence[Word], n_topics: int) -> dict:
  """(tag, kind) -> (word ids, [n_topics, count] cumulative probabilities)."""
  ids: dict[tuple[str, str], list[int]] = {}
  for word in lexicon:
    ids.setdefault((word.pos, word.kind), []).append(word.id)
  tables = {}
  for key, members in ids.items():
    weights = np.array([lexicon[i].weights for i in members]).T
    tables[key] = (np.array(members), np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1))
  return tables


# -- sentences ------------------------------------------------------------------------------------------------


class _Sampler:
  """Draws one sentence's derivation: words from `tables` under `topic`, phrases by the grammar."""

  def __init__(self, rng: np.random.Generator, tables: dict, topic: int, max_depth: int):
    self.rng, self.tables, self.topic, self.max_depth = rng, tables, topic, max_depth

  def leaf(self, tag: str, kind: str = "", number: Optional[str] = None) -> Leaf:
    ids, cumulative = self.tables[(tag, kind)]
    k = min(int(np.searchsorted(cumulative[self.topic], self.rng.random(), side="right")), len(ids) - 1)
    return Leaf(int(ids[k]), tag, number)

  def chance(self, p: float) -> bool:
    return bool(self.rng.random() < p)

  def noun_phrase(self, coordinate: bool) -> Node:
    """NP -> NP CCONJ NP (plural; the conjunction heads it) | PRON | (DET) (ADJ) NOUN."""
    if coordinate and self.chance(P_COORDINATION):
      return Node("NP", 1, (self.noun_phrase(False), self.leaf("CCONJ"), self.noun_phrase(False)), "Plur")
    number = _pick(self.rng, NUMBERS)
    if self.chance(P_PRONOUN):
      return Node("NP", 0, (self.leaf("PRON", number, number),), number)
    children = []
    if self.chance(P_DET):
      children.append(self.leaf("DET", "", number))
    if self.chance(P_ADJ):
      children.append(self.leaf("ADJ"))
    children.append(self.leaf("NOUN", "", number))
    return Node("NP", len(children) - 1, tuple(children), number)

  def verb_phrase(self, depth: int, clause: str, number: str, negated: bool) -> Node:
    """VP -> (PART:neg) VERB (NP) | (PART:neg) AUX:copula ADJ, then (PP) (ADV) (SBAR); headed by VERB / AUX."""
    children = [self.leaf("PART", "negation")] if negated else []
    head = len(children)
    if clause == "copular":
      children += [self.leaf("AUX", "copula", number), self.leaf("ADJ")]
    else:
      children.append(self.leaf("VERB", clause, number))
      if clause == "transitive":
        children.append(self.noun_phrase(depth < self.max_depth))
    if self.chance(P_PP):
      children.append(Node("PP", 0, (self.leaf("ADP"), self.noun_phrase(False))))
    if self.chance(P_ADV):
      children.append(self.leaf("ADV"))
    if depth < self.max_depth and self.chance(P_SBAR):
      embedded = self.clause(depth + 1, _pick(self.rng, CLAUSES), _pick(self.rng, ("statement", "negated")))
      children.append(Node("SBAR", 0, (self.leaf("SCONJ"), embedded)))
    return Node("VP", head, tuple(children), number)

  def clause(self, depth: int, clause: str, mood: str) -> Node:
    """S -> (PART:question | AUX:do) NP VP, headed by the VP; the verb (and AUX) agree with the subject NP."""
    subject = self.noun_phrase(depth < self.max_depth)
    children: tuple = (subject, self.verb_phrase(depth, clause, subject.number, mood == "negated"))
    if mood == "question":
      marker = self.leaf("PART", "question") if self.chance(0.5) else self.leaf("AUX", "do", subject.number)
      children = (marker,) + children
    return Node("S", len(children) - 1, children, subject.number)

  def sentence(self, clause: str, mood: str) -> Node:
    """The main clause with its final PUNCT ("?" for a question, "." otherwise) as its last child."""
    main = self.clause(0, clause, mood)
    punctuation = self.leaf("PUNCT", "question" if mood == "question" else "statement")
    return Node("S", main.head, main.children + (punctuation,), main.number)


@dataclasses.dataclass(frozen=True)
class BaseLanguage:
  """The base language (module docstring). `sentences(n, seed)`: n sentences of the sample `seed`; different
  sample seeds (train / dev / test) give different samples of the same language."""

  seed: int = 0
  vocabulary_size: int = 300
  n_topics: int = 4
  max_depth: int = 2
  off_topic: float = 0.1
  lexicon: tuple[Word, ...] = dataclasses.field(init=False, repr=False, compare=False)
  _tables: dict = dataclasses.field(init=False, repr=False, compare=False)

  def __post_init__(self):
    errors.require(self.n_topics >= 3, f"n_topics={self.n_topics}: the topic label needs at least 3 classes")
    errors.require(self.max_depth >= 0, f"max_depth={self.max_depth}: must be >= 0")
    errors.require(0 < self.off_topic <= 1, f"off_topic={self.off_topic}: must be in (0, 1]")
    rng_for(self.seed)  # checks the seed
    lexicon = build_lexicon(self.seed, self.vocabulary_size, self.n_topics, self.off_topic)
    object.__setattr__(self, "lexicon", lexicon)
    object.__setattr__(self, "_tables", _sampling_tables(lexicon, self.n_topics))

  @property
  def labels(self) -> tuple[str, ...]:
    """The classification labels, in topic order."""
    return tuple(topic_label(t) for t in range(self.n_topics))

  def sentence(self, index: int, seed: int = 0) -> Sentence:
    """Sentence `index` of the sample `seed`: topic, mood and main clause type drawn uniformly, then the rest."""
    rng = rng_for(SENTENCE_STREAM, self.seed, seed, index)
    topic, mood, clause = int(rng.integers(self.n_topics)), _pick(rng, MOODS), _pick(rng, CLAUSES)
    derivation = _Sampler(rng, self._tables, topic, self.max_depth).sentence(clause, mood)
    return self.realize(derivation, topic, mood, clause)

  def iter_sentences(self, seed: int = 0) -> Iterator[Sentence]:
    """The sample `seed`, without end."""
    index = 0
    while True:
      yield self.sentence(index, seed)
      index += 1

  def sentences(self, n: Optional[int], seed: int = 0) -> list[Sentence]:
    """The first `n` sentences of the sample `seed`."""
    errors.require(isinstance(n, int) and n >= 0, f"n={n!r}: a synthetic language has no end; give a count")
    return [self.sentence(i, seed) for i in range(n)]

  def realize(self, derivation: Node, topic: Optional[int] = None, mood: Optional[str] = None,
              clause: Optional[str] = None) -> Sentence:
    """The `Sentence` of a derivation (one drawn here, or one built by hand from this lexicon's word ids)."""
    leaves = derivation.leaves()
    return Sentence(tokens=tuple(inflect(self.lexicon[leaf.word_id].forms, leaf.number) for leaf in leaves),
                    tags=tuple(leaf.upos for leaf in leaves), word_ids=tuple(leaf.word_id for leaf in leaves),
                    order=tuple(range(len(leaves))), derivation=derivation, topic=topic, mood=mood, clause=clause)
