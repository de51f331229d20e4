"""VECO / XLM pretraining input: monolingual segment pairs and parallel sentence pairs.

Plain Python + numpy (the vocabulary is only loaded, lazily, from a path).

Corpora
  * Monolingual text, one file per language: `{lg}.txt`. By default every
    line is a document; with `blank_line_documents=True` documents are
    separated by blank lines and each line is a sentence. A document is
    tokenized sentence by sentence and packed greedily into segments of at
    most `segment_len` tokens (a sentence longer than that is cut into
    `segment_len` chunks). Adjacent segments form the pairs
    (s0, s1), (s2, s3), ...; an odd last segment is paired with the one
    before it, and a document that gives a single segment of >= 2 tokens is
    cut in half so that one-line documents still give one pair.
  * Parallel text, per language pair `src-tgt`: either two aligned files
    `{src}-{tgt}.{src}` / `{src}-{tgt}.{tgt}` (line i of one is the
    translation of line i of the other) or one file `{src}-{tgt}.tsv` with
    `source<TAB>target` lines. Pairs with an empty side are skipped; each
    side is truncated to `segment_len` tokens.
  * Files are UTF-8 (a leading byte-order mark is dropped), read lazily line
    by line (`text.utf8_lines`: `\n` ends a line); a byte that is not UTF-8 is a
    `DataError` naming the file, line and byte.

Sampling (METHODS.md, VECO): batch `p` is monolingual when p is even and
bilingual when p is odd (if only one kind of corpus is given every batch is
of that kind). Each row draws its language (pair) with probability
proportional to n^alpha (n = number of pairs of that language (pair)) and
then a pair uniformly (with replacement). Monolingual pairs are flipped,
(x, y) -> (y, x), with probability `flip_prob`. BERT 80/10/10 masking
(`masking.mask_batch`) picks `mono_mask_prob` (15%) of the maskable tokens of
monolingual input and `bi_mask_prob` (25%) of bilingual input; special tokens
and padding are never picked. All of it is drawn from one generator per
batch, rng(seed, p), for the whole global batch, so batch `p` is a pure
function of (seed, p) and every host builds only its rows (those rows of the
single-host batch).

Features of a row (fixed shapes; S = segment_len + 2, T = 2 * segment_len + 4,
M = max_predictions_for(S, max mask prob), MT = the same for T):
  x_input_ids, x_input_mask, x_token_type_ids            (S,)  int32
  x_masked_positions, x_masked_ids                        (M,)  int32
  x_masked_weights                                        (M,)  float32
  y_*                                                     the same for y
  x_language_id, y_language_id                            ()    int32, index into `languages`
  is_bilingual                                            ()    int32
  tlm_input_ids, tlm_input_mask, tlm_token_type_ids       (T,)  int32
  tlm_positions, tlm_language_ids                          (T,)  int32
  tlm_masked_positions, tlm_masked_ids                    (MT,) int32
  tlm_masked_weights                                      (MT,) float32
x and y are `[CLS] tokens [SEP]`. The TLM input is the vocabulary's pair
layout (`build_inputs(x, y)`: `[CLS] x [SEP] y [SEP]` for WordPiece,
`<s> x </s></s> y </s>` for XLM-R) masked independently of x and y at the
bilingual rate; its positions count tokens from each segment's start, so
they restart at 0 where the second sentence's part begins (XLM style);
padding has position 0. They are model-agnostic: the embeddings map them
to position-table rows as each segment alone gets them (BERT 0.., RoBERTa /
XLM-R `pad_token_id + 1`.., see `networks.layers.position_ids`).
`tlm_language_ids` is x's language id on the first sentence's part (its
special tokens included) and y's on the second part (XLM language
embeddings), 0 on padding. TLM is a bilingual objective: in monolingual rows
the TLM features are filled but `tlm_masked_weights` is all zero.

The features are built by `PairFeatures.pair_batch` (`pair_features`: one
row), shared with the streaming source
`xtreme_jax.data.pretraining.pretraining_streams.SeqioPairSource` (seqio tasks, TFDS
corpora; memory bounded; a generator per row), which gives the same feature
dict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from xtreme_jax import errors, fs, text
from xtreme_jax.data.features import masking
from xtreme_jax.data import paths
from xtreme_jax.data.features.sources import IndexedSource

VECO_ALPHA = 0.5
UNICODER_ALPHA = 0.3
MBERT_ALPHA = 0.7


# ---------------------------------------------------------------------------
# Language sampling


def language_sampling_probs(counts: dict[str, int], alpha: float) -> dict[str, float]:
  """p_l = n_l^alpha / sum_k n_k^alpha, over `counts` (language -> number of examples)."""
  if not counts:
    raise errors.ConfigError("no languages to sample from (counts is empty)")
  if not np.isfinite(alpha) or alpha < 0:
    raise errors.ConfigError(f"alpha={alpha!r}; expected a finite number >= 0")
  for lang, n in counts.items():
    if n <= 0:
      raise errors.DataError(f"language {lang!r} has {n} examples; every sampled language needs at least one")
  langs = sorted(counts)
  weights = np.asarray([float(counts[l]) for l in langs]) ** alpha
  probs = weights / weights.sum()
  return dict(zip(langs, probs.tolist()))


# ---------------------------------------------------------------------------
# Readers


def _listdir(directory: str, what: str) -> list[str]:
  if not fs.isdir(directory):
    raise errors.MissingInputError(f"{directory} is not a directory; expected the {what} corpus folder")
  return fs.listdir(directory)


def available_monolingual(directory: str) -> list[str]:
  """Languages with a `{lg}.txt` file in `directory`."""
  return sorted(name[:-4] for name in _listdir(directory, "monolingual")
                if name.endswith(".txt") and fs.isfile(os.path.join(directory, name)))


def iter_documents(path: str, blank_line_documents: bool = False) -> Iterator[list[str]]:
  """The documents of one monolingual file, read line by line: each a list of stripped sentences.

  Blank-line documents are the blocks of `text.iter_blocks`, produced lazily.
  """
  lines = (line.strip() for line in text.utf8_lines(path, "monolingual text"))
  if blank_line_documents:
    yield from text.iter_blocks(lines)
  else:
    yield from ([line] for line in lines if line)


def read_monolingual(directory: str, languages: Iterable[str] | None = None, *,
                     blank_line_documents: bool = False) -> dict[str, list[list[str]]]:
  """language -> documents, each a list of sentences (see the module docstring)."""
  available = available_monolingual(directory)
  languages = available if languages is None else list(languages)
  if not languages:
    raise errors.DataError(f"no monolingual files ({{lg}}.txt) in {directory}")
  unknown = [l for l in languages if l not in available]
  if unknown:
    raise errors.ConfigError(f"unknown monolingual language(s) {unknown} in {directory}; "
                             f"valid languages: {available}")
  out = {}
  for lang in languages:
    path = os.path.join(directory, f"{lang}.txt")
    docs = list(iter_documents(path, blank_line_documents))
    if not docs:
      raise errors.DataError(f"monolingual file {path} (language {lang!r}) holds no text")
    out[lang] = docs
  return out


_ALIGNED = re.compile(r"^([^-.]+)-([^-.]+)\.([^-.]+)$")
_TSV = re.compile(r"^([^-.]+)-([^-.]+)\.tsv$")


def _pair_key(pair) -> str:
  if isinstance(pair, str):
    if pair.count("-") != 1:
      raise errors.ConfigError(f"language pair {pair!r}; expected 'src-tgt'")
    return pair
  src, tgt = pair
  return f"{src}-{tgt}"


def available_parallel(directory: str) -> dict[str, tuple[str, ...]]:
  """'src-tgt' -> its file(s) in `directory`: (src file, tgt file) or (tsv file,)."""
  names = set(_listdir(directory, "parallel"))
  found: dict[str, tuple[str, ...]] = {}
  for name in sorted(names):
    m = _TSV.match(name)
    if m:
      key = f"{m[1]}-{m[2]}"
      if f"{key}.{m[1]}" in names or f"{key}.{m[2]}" in names:
        raise errors.DataError(f"language pair {key!r} has both a .tsv file and aligned files in {directory}")
      found[key] = (os.path.join(directory, name),)
      continue
    m = _ALIGNED.match(name)
    if m and m[3] in (m[1], m[2]) and m[1] != m[2]:
      key = f"{m[1]}-{m[2]}"
      src, tgt = f"{key}.{m[1]}", f"{key}.{m[2]}"
      if src not in names or tgt not in names:
        missing = tgt if src in names else src
        raise errors.MissingInputError(f"language pair {key!r}: {os.path.join(directory, missing)} is missing "
                                       f"(found {os.path.join(directory, name)})")
      found[key] = (os.path.join(directory, src), os.path.join(directory, tgt))
  return found


def read_parallel(directory: str, language_pairs: Iterable | None = None
                  ) -> dict[str, list[tuple[str, str]]]:
  """'src-tgt' -> aligned (source, target) sentences, pairs with an empty side dropped."""
  available = available_parallel(directory)
  keys = sorted(available) if language_pairs is None else [_pair_key(p) for p in language_pairs]
  if not keys:
    raise errors.DataError(f"no parallel files ({{src}}-{{tgt}}.{{src}}/.{{tgt}} or .tsv) in {directory}")
  unknown = [k for k in keys if k not in available]
  if unknown:
    raise errors.ConfigError(f"unknown language pair(s) {unknown} in {directory}; "
                             f"valid language pairs: {sorted(available)}")
  out = {}
  for key in keys:
    pairs = list(iter_parallel(available[key]))
    if not pairs:
      raise errors.DataError(f"parallel file(s) {', '.join(available[key])} (language pair {key!r}) hold no "
                             "sentence pairs")
    out[key] = pairs
  return out


def _count_rest(it) -> int:
  return sum(1 for _ in it)


def _aligned(files: Sequence[str], src: Iterator[str], tgt: Iterator[str]) -> Iterator[tuple[str, str]]:
  n = 0
  while True:
    s, t = next(src, None), next(tgt, None)
    if s is None or t is None:
      if s is not None or t is not None:
        n_src = n + (_count_rest(src) + 1 if s is not None else 0)
        n_tgt = n + (_count_rest(tgt) + 1 if t is not None else 0)
        raise errors.DataError(f"{files[0]} has {n_src} lines but {files[1]} has {n_tgt} lines; aligned "
                               "files must have equal line counts")
      return
    n += 1
    s, t = s.strip(), t.strip()
    if s and t:
      yield s, t


def iter_parallel(files: Sequence[str]) -> Iterator[tuple[str, str]]:
  """(source, target) sentences of one language pair's file(s) (`available_parallel`), read line by line.

  Sides are stripped and pairs with an empty side dropped. Aligned files of
  different lengths raise a `DataError` naming both files and their line counts
  (when the shorter one ends); a TSV line without exactly two fields raises.
  """
  if len(files) == 2:
    src, tgt = (text.utf8_lines(path, f"one sentence per line, aligned with {other}")
                for path, other in zip(files, files[::-1]))
    with contextlib.closing(src), contextlib.closing(tgt):
      yield from _aligned(files, src, tgt)
  else:
    for number, line in enumerate(text.utf8_lines(files[0], "source<TAB>target lines"), 1):
      line = line.rstrip("\r\n")
      if not line.strip():
        continue
      fields = line.split("\t")
      if len(fields) != 2:
        raise errors.DataError(f"{errors.location(files[0], number)}: {len(fields)} tab-separated fields; "
                               "expected 2 (source<TAB>target)")
      s, t = fields[0].strip(), fields[1].strip()
      if s and t:
        yield s, t


def segment_document(sentences: Sequence[Sequence[int]], segment_len: int) -> list[list[int]]:
  """Pack tokenized sentences greedily into segments of at most `segment_len` tokens."""
  segments, current = [], []
  for ids in sentences:
    ids = list(ids)
    if not ids:
      continue
    if len(ids) > segment_len:
      if current:
        segments.append(current)
        current = []
      chunks = [ids[i:i + segment_len] for i in range(0, len(ids), segment_len)]
      segments += chunks[:-1]
      current = chunks[-1]
    elif len(current) + len(ids) > segment_len:
      segments.append(current)
      current = ids
    else:
      current = current + ids
  if current:
    segments.append(current)
  return segments


def adjacent_pairs(segments: list[list[int]]) -> list[tuple[list[int], list[int]]]:
  """(s0, s1), (s2, s3), ...; an odd last segment pairs with its predecessor; one segment is halved."""
  if len(segments) == 1:
    seg = segments[0]
    if len(seg) < 2:
      return []
    half = len(seg) // 2
    return [(seg[:half], seg[half:])]
  pairs = [(segments[i], segments[i + 1]) for i in range(0, len(segments) - 1, 2)]
  if len(segments) % 2:
    pairs.append((segments[-2], segments[-1]))
  return pairs


def monolingual_segment_pairs(documents: list[list[str]], encode: Callable[[str], list[int]],
                              segment_len: int) -> list[tuple[list[int], list[int]]]:
  """Adjacent segment pairs (x, y) of token ids over all `documents`."""
  out = []
  for doc in documents:
    out += adjacent_pairs(segment_document([encode(s) for s in doc], segment_len))
  return out


# ---------------------------------------------------------------------------
# Shared features


def load_vocab(vocabulary: Any, data_dir: str | None):
  """`vocabulary` itself, or the vocabulary stored at that path (relative to `data_dir`)."""
  if isinstance(vocabulary, str):
    from xtreme_jax.data.vocab.vocabularies import load_vocabulary  # pylint: disable=g-import-not-at-top
    return load_vocabulary(paths.resolve(data_dir, vocabulary))
  return vocabulary


def alternating_kind(position: int, has_monolingual: bool, has_bilingual: bool) -> bool:
  """Whether batch `position` is bilingual: odd batches when both kinds of corpora exist."""
  if not has_bilingual:
    return False
  if not has_monolingual:
    return True
  return position % 2 == 1


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class PairFeatures:
  """Fixed-shape features of (x, y) pairs (module docstring), shared by the pair sources (`VecoPairSource`,
  `pretraining_streams.SeqioPairSource`), with the VECO settings both take, declared here once: segments of
  `segment_len` subwords, `batch_size` rows, languages sampled with exponent `alpha`, masking probabilities,
  the monolingual pairs' side flip, the seed. A user also has the fields `vocabulary` and `data_dir`.
  """

  weight_keys = ("x_masked_weights", "y_masked_weights", "tlm_masked_weights")

  segment_len: int = 64
  batch_size: int = 32
  alpha: float = VECO_ALPHA
  mono_mask_prob: float = 0.15
  bi_mask_prob: float = 0.25
  flip_prob: float = 0.5
  seed: int = 0

  def _check_pair_args(self) -> None:
    if self.segment_len < 2:
      raise errors.ConfigError(f"segment_len={self.segment_len}; expected >= 2")
    for name in ("mono_mask_prob", "bi_mask_prob", "flip_prob"):
      if not 0 <= getattr(self, name) <= 1:
        raise errors.ConfigError(f"{name}={getattr(self, name)}; expected a probability in [0, 1]")

  @functools.cached_property
  def vocab(self):
    return load_vocab(self.vocabulary, self.data_dir)

  @functools.cached_property
  def masker(self) -> masking.VocabMasker:
    return masking.VocabMasker(self.vocab)

  @property
  def seq_len(self) -> int:
    return self.segment_len + 2

  @property
  def tlm_len(self) -> int:
    return 2 * self.segment_len + 4

  @property
  def max_predictions(self) -> int:
    return masking.max_predictions_for(self.seq_len, max(self.mono_mask_prob, self.bi_mask_prob))

  @property
  def tlm_max_predictions(self) -> int:
    return masking.max_predictions_for(self.tlm_len, max(self.mono_mask_prob, self.bi_mask_prob))

  def _pad(self, rows: Sequence[Sequence[int]], length: int, value: int) -> np.ndarray:
    lengths = np.asarray([len(ids) for ids in rows])
    out = np.full((len(rows), length), value, np.int32)
    out[np.arange(length) < lengths[:, None]] = np.fromiter(itertools.chain.from_iterable(rows), np.int32,
                                                            int(lengths.sum()))
    return out

  def pair_batch(self, xs: Sequence[Sequence[int]], ys: Sequence[Sequence[int]], x_language_ids, y_language_ids,
                 bilingual, rng: np.random.Generator, rows: range | None = None,
                 batch_size: int | None = None) -> dict:
    """The features of the pairs (xs[i], ys[i]): x then y masked, then the TLM input.

    `bilingual` is a bool or one per pair. The masks come from `rng`, drawn for
    rows `rows` of a batch of `batch_size` (`masking.mask_batch`).
    """
    v = self.vocab
    bilingual = np.broadcast_to(np.asarray(bilingual, bool), (len(xs),))
    x_language_ids, y_language_ids = (np.asarray(l, np.int32) for l in (x_language_ids, y_language_ids))
    prob = np.where(bilingual, self.bi_mask_prob, self.mono_mask_prob)
    out = {}
    for name, seqs in (("x", xs), ("y", ys)):
      m = self.masker(self._pad([[v.cls_id, *ids, v.sep_id] for ids in seqs], self.seq_len, v.pad_id), rng, prob,
                      self.max_predictions, rows, batch_size)
      out[f"{name}_input_ids"] = m["input_ids"]
      out[f"{name}_input_mask"] = (np.arange(self.seq_len) < np.asarray([len(ids) + 2 for ids in seqs])[:, None]
                                   ).astype(np.int32)
      out[f"{name}_token_type_ids"] = np.zeros((len(xs), self.seq_len), np.int32)
      for k in ("masked_positions", "masked_ids", "masked_weights"):
        out[f"{name}_{k}"] = m[k]
    out["x_language_id"] = x_language_ids
    out["y_language_id"] = y_language_ids
    out["is_bilingual"] = bilingual.astype(np.int32)
    # TLM: the vocabulary's pair layout; positions (from each segment's start) restart at the second part.
    ids, types = zip(*(v.build_inputs(list(x), list(y)) for x, y in zip(xs, ys)))
    first = np.asarray([len(x) + 2 for x in xs])[:, None]
    end = np.asarray([len(i) for i in ids])[:, None]
    col = np.arange(self.tlm_len)
    in_x, in_y = col < first, (col >= first) & (col < end)
    m = self.masker(self._pad(ids, self.tlm_len, v.pad_id), rng, self.bi_mask_prob, self.tlm_max_predictions,
                    rows, batch_size)
    out["tlm_input_ids"] = m["input_ids"]
    out["tlm_input_mask"] = (col < end).astype(np.int32)
    out["tlm_token_type_ids"] = self._pad(types, self.tlm_len, 0)
    out["tlm_positions"] = np.where(in_x, col, np.where(in_y, col - first, 0)).astype(np.int32)
    out["tlm_language_ids"] = np.where(in_x, x_language_ids[:, None], np.where(in_y, y_language_ids[:, None], 0)
                                       ).astype(np.int32)
    out["tlm_masked_positions"] = m["masked_positions"]
    out["tlm_masked_ids"] = m["masked_ids"]
    out["tlm_masked_weights"] = m["masked_weights"] * bilingual[:, None]
    return out

  def pair_features(self, x: Sequence[int], y: Sequence[int], x_language_id: int, y_language_id: int,
                    bilingual: bool, rng: np.random.Generator) -> dict:
    """The feature dict of one row (`pair_batch` of one pair, randomness from `rng`)."""
    return {k: v[0] for k, v in self.pair_batch([x], [y], [x_language_id], [y_language_id], bilingual, rng).items()}

  def tokens_per_batch(self, batch: dict) -> int:
    return int(np.sum(batch["x_input_mask"]) + np.sum(batch["y_input_mask"]))


# ---------------------------------------------------------------------------
# The source


@dataclasses.dataclass(frozen=True, eq=False)
class VecoPairSource(PairFeatures, IndexedSource):
  """Batches of (x, y) pairs for VECO (IS-MLM, CS-MLM) and XLM TLM; see the module docstring.

  `vocabulary` is a path (relative to `data_dir` unless absolute) or a
  vocabulary object with `encode`, `build_inputs`, `vocab_size` and the
  special ids. `monolingual_dir` / `parallel_dir` (relative to `data_dir`
  unless absolute) may be None, but not both. `languages` / `language_pairs`
  select files (None: every file found). `language_order`: the order of the
  language ids (None: the languages found, sorted); it may name languages the
  data lacks (a model's `TransformerConfig.languages`).
  """

  vocabulary: Any
  monolingual_dir: str | None = None
  parallel_dir: str | None = None
  languages: tuple | None = None
  language_pairs: tuple | None = None
  data_dir: str | None = None
  blank_line_documents: bool = False
  language_order: tuple | None = None

  def __post_init__(self):
    for name in ("languages", "language_pairs", "language_order"):
      value = getattr(self, name)
      if isinstance(value, str):
        object.__setattr__(self, name, (value,))
      elif value is not None:
        object.__setattr__(self, name, tuple(value))
    if self.monolingual_dir is None and self.parallel_dir is None:
      raise errors.ConfigError("VecoPairSource needs a monolingual_dir, a parallel_dir or both")
    self._check_pair_args()

  # -- data ------------------------------------------------------------------

  @functools.cached_property
  def monolingual(self) -> dict[str, list[tuple[list[int], list[int]]]]:
    """language -> segment pairs (token ids, no special tokens)."""
    if self.monolingual_dir is None:
      return {}
    directory = paths.resolve(self.data_dir, self.monolingual_dir)
    docs = read_monolingual(directory, self.languages, blank_line_documents=self.blank_line_documents)
    out = {}
    for lang, documents in docs.items():
      pairs = monolingual_segment_pairs(documents, self.vocab.encode, self.segment_len)
      if not pairs:
        raise errors.DataError(f"monolingual file {os.path.join(directory, lang + '.txt')} (language {lang!r}) "
                               "gives no segment pair (documents too short)")
      out[lang] = pairs
    return out

  @functools.cached_property
  def bilingual(self) -> dict[str, list[tuple[list[int], list[int]]]]:
    """'src-tgt' -> sentence pairs (token ids truncated to segment_len)."""
    if self.parallel_dir is None:
      return {}
    directory = paths.resolve(self.data_dir, self.parallel_dir)
    encode, n = self.vocab.encode, self.segment_len
    out = {}
    for key, pairs in read_parallel(directory, self.language_pairs).items():
      encoded = [(encode(s)[:n], encode(t)[:n]) for s, t in pairs]
      encoded = [(s, t) for s, t in encoded if s and t]
      if not encoded:
        raise errors.DataError(f"language pair {key!r} in {directory} has no pair with tokens on both sides")
      out[key] = encoded
    return out

  @functools.cached_property
  def languages_index(self) -> tuple:
    """Every language seen (monolingual and both sides of pairs), sorted, or `language_order`;
    `*_language_id` index it."""
    langs = set(self.monolingual)
    for key in self.bilingual:
      langs.update(key.split("-"))
    if self.language_order is None:
      return tuple(sorted(langs))
    unnamed = sorted(langs - set(self.language_order))
    errors.require(not unnamed, f"language_order={list(self.language_order)} does not name the data's "
                   f"language(s) {unnamed}")
    return self.language_order

  @functools.cached_property
  def mono_probs(self) -> dict[str, float]:
    return language_sampling_probs({k: len(v) for k, v in self.monolingual.items()}, self.alpha) \
        if self.monolingual else {}

  @functools.cached_property
  def bi_probs(self) -> dict[str, float]:
    return language_sampling_probs({k: len(v) for k, v in self.bilingual.items()}, self.alpha) \
        if self.bilingual else {}

  @functools.cached_property
  def _cdfs(self) -> dict[bool, tuple[list[str], np.ndarray]]:
    out = {}
    for bilingual, probs in ((False, self.mono_probs), (True, self.bi_probs)):
      if probs:
        keys = sorted(probs)
        cdf = np.cumsum([probs[k] for k in keys])
        cdf[-1] = 1.0
        out[bilingual] = (keys, cdf)
    return out

  # -- addressing ------------------------------------------------------------

  def is_bilingual_batch(self, position: int) -> bool:
    """Odd batches are bilingual, even ones monolingual (when both corpora are given)."""
    return alternating_kind(position, bool(self.monolingual), bool(self.bilingual))

  @property
  def num_examples(self) -> int:
    """Monolingual pairs (languages sorted) followed by bilingual pairs; `examples` indexes these."""
    return sum(map(len, self.monolingual.values())) + sum(map(len, self.bilingual.values()))

  def _flat(self, index: int) -> tuple[bool, str, int]:
    for bilingual, table in ((False, self.monolingual), (True, self.bilingual)):
      for key in sorted(table):
        if index < len(table[key]):
          return bilingual, key, index
        index -= len(table[key])
    raise IndexError(index)

  def _draw(self, rng: np.random.Generator, bilingual: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(language (pair) number in sorted order, pair index, flipped) of every row of a global batch."""
    keys, cdf = self._cdfs[bilingual]
    table = self.bilingual if bilingual else self.monolingual
    key = np.minimum(np.searchsorted(cdf, rng.random(self.batch_size), side="right"), len(keys) - 1)
    index = rng.integers(0, np.asarray([len(table[k]) for k in keys])[key])
    flipped = (rng.random(self.batch_size) < self.flip_prob) & (not bilingual)
    return key, index, flipped

  def _batch_draws(self, position: int) -> tuple[tuple, np.random.Generator]:
    """The plan of batch `position` (`_draw`) and its generator, to mask with after the plan."""
    rng = np.random.default_rng((self.seed, position))
    return self._draw(rng, self.is_bilingual_batch(position)), rng

  @functools.lru_cache(maxsize=4)
  def _plan(self, position: int) -> tuple:
    return self._batch_draws(position)[0]

  def plan(self, position: int, row: int) -> dict:
    """What row `row` of batch `position` holds: kind, language (pair), pair index, flipped."""
    bilingual = self.is_bilingual_batch(position)
    key, index, flipped = self._plan(position)
    return {"bilingual": bilingual, "language": self._cdfs[bilingual][0][key[row]], "index": int(index[row]),
            "flipped": bool(flipped[row])}

  # -- features --------------------------------------------------------------

  @functools.cached_property
  def _language_ids(self) -> dict[str, int]:
    return {l: i for i, l in enumerate(self.languages_index)}

  def _pair(self, bilingual: bool, key: str, index: int, flipped: bool) -> tuple:
    """(x, y, x language id, y language id) of one row."""
    if bilingual:
      x, y = self.bilingual[key][index]
      x_lang, y_lang = key.split("-")
    else:
      x, y = self.monolingual[key][index]
      if flipped:
        x, y = y, x
      x_lang = y_lang = key
    return x, y, self._language_ids[x_lang], self._language_ids[y_lang]

  def examples(self, indices: list[int], rows: range, seed: tuple, row_seeds: list[tuple]) -> dict:
    """Pairs by `num_examples` index (eval batches): monolingual ones flipped with `flip_prob`."""
    rng = np.random.default_rng(seed)
    flips = rng.random(self.batch_size)[rows.start:rows.stop] < self.flip_prob
    flat = [self._flat(i) for i in indices]
    pairs = [self._pair(bilingual, key, i, flip) for (bilingual, key, i), flip in zip(flat, flips)]
    return self.pair_batch(*zip(*pairs), [bilingual for bilingual, _, _ in flat], rng, rows, self.batch_size)

  def batch(self, position: int, host_index: int = 0, host_count: int = 1) -> dict:
    """This host's rows of global batch `position` (a pure function of (seed, position))."""
    rows = self._rows(host_index, host_count)
    bilingual = self.is_bilingual_batch(position)
    (key, index, flipped), rng = self._batch_draws(position)
    keys = self._cdfs[bilingual][0]
    pairs = [self._pair(bilingual, keys[key[r]], int(index[r]), flipped[r]) for r in rows]
    return self.pair_batch(*zip(*pairs), bilingual, rng, rows, self.batch_size)
