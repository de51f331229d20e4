"""Vocabularies that reproduce the Hugging Face mBERT and XLM-R tokenizers.

Plain Python objects: importing this module imports neither TensorFlow nor
seqio. `seqio_vocabulary.as_seqio(vocab)` (or `vocab.encode_tf` /
`vocab.decode_tf`, which use it) gives the seqio `Vocabulary` view for tf.data.

`TokenizerVocabulary` runs a Hugging Face `tokenizers.Tokenizer` (the Rust
library behind transformers' fast tokenizers), e.g. a checkpoint's
`tokenizer.json`. `WordPieceVocabulary` builds mBERT's pipeline with that
library from a `vocab.txt` and the settings of `BertTokenizer`
(`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`, special tokens).
`load_vocabulary` reads those settings from the checkpoint's
`tokenizer_config.json` / `special_tokens_map.json`.

`XlmrSentencePieceVocabulary` is XLM-R's SentencePiece model with the fairseq id
shift. fairseq builds its dictionary as `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3
and then appends the SentencePiece pieces, so ordinary spm piece `i` (i >= 3)
becomes id `i + 1`. The spm model's own control pieces (unk=0, <s>=1, </s>=2)
map onto the fairseq specials (3, 0, 2), and `<mask>` is appended last, at
`spm_size + 1`; the vocabulary therefore has `spm_size + 2` ids. It runs
sentencepiece itself, as fairseq did when XLM-R was trained; transformers' fast
XLMRobertaTokenizer gives the same ids except on rare combining sequences (see
the class).

All vocabularies use no extra ids and, unlike Hugging Face, treat special-token
strings that occur in raw text (e.g. a literal "[MASK]") as ordinary text.
Decoding equals Hugging Face `tokenizer.decode(ids)` except that pad ids are
skipped; like seqio, `decode` stops after the first EOS and reads ids beyond
the vocabulary as UNK.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import sentencepiece
import tokenizers
from tokenizers import decoders, normalizers, pre_tokenizers, processors

from xtreme_jax import errors, fs

SPECIALS = ("pad", "unk", "cls", "sep", "mask")
BERT_SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
XLMR_SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>", "mask": "<mask>"}
# tokenizer_config.json keys of BertTokenizer and the BertNormalizer fields they set.
BERT_SETTINGS = {"do_lower_case": "lowercase", "strip_accents": "strip_accents",
                 "tokenize_chinese_chars": "handle_chinese_chars"}
SPECIAL_KEYS = tuple(f"{name}_token" for name in SPECIALS)
SETTING_KEYS = (*BERT_SETTINGS, *SPECIAL_KEYS)
# A layout item is (special id, type id) or ("A" | "B", type id) for a segment.
Layout = tuple[tuple[Any, int], ...]


# --------------------------------------------------------------------------- files


def _read_text(path: str) -> str:
  """The UTF-8 text of `path` (`xtreme_jax.fs`: a local path or a URL), a byte-order mark kept, as the Hugging
  Face tokenizers read their files."""
  data = fs.read_bytes(path)
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    raise errors.DataError(f"{errors.location(path, line, e.start)}: not UTF-8 text") from None


def _read_json(path: str) -> dict:
  try:
    data = json.loads(_read_text(path))
  except json.JSONDecodeError as e:
    raise errors.DataError(f"{errors.location(path, e.lineno)}: not valid JSON ({e.msg})") from None
  if not isinstance(data, dict):
    raise errors.DataError(f"{path}: expected a JSON object, got {type(data).__name__}")
  return data


def checkpoint_settings(directory: str) -> dict[str, Any]:
  """The tokenizer settings (`SETTING_KEYS`) a Hugging Face checkpoint directory
  records in `tokenizer_config.json` and `special_tokens_map.json` (which wins)."""
  settings: dict[str, Any] = {}
  for name in ("tokenizer_config.json", "special_tokens_map.json"):
    path = os.path.join(directory, name)
    if fs.exists(path):
      settings.update({k: v for k, v in _read_json(path).items() if k in SETTING_KEYS})
  for key, value in settings.items():
    if isinstance(value, dict):  # an AddedToken: {"content": "[CLS]", ...}
      settings[key] = value.get("content")
  return {k: v for k, v in settings.items() if v is not None or k == "strip_accents"}


# --------------------------------------------------------------------------- vocabularies


class Vocabulary:
  """Special ids, `build_inputs`, seqio-style `decode`, equality and the TF
  methods shared by the vocabularies.

  Subclasses set `_size`, `_layout` (single, pair), `_source`, the five special
  ids `_{pad,unk,cls,sep,mask}_id`, and implement `encode`, `_decode` and `_eq_key`.
  """

  _size: int
  _layout: tuple[Layout, Layout]
  _source: str
  _pad_id: int
  _unk_id: int
  _cls_id: int
  _sep_id: int
  _mask_id: int

  pad_id = property(lambda self: self._pad_id)
  unk_id = property(lambda self: self._unk_id)
  cls_id = property(lambda self: self._cls_id)
  sep_id = property(lambda self: self._sep_id)
  mask_id = property(lambda self: self._mask_id)
  bos_id = cls_id
  eos_id = sep_id
  vocab_size = property(lambda self: self._size)
  extra_ids = 0

  def encode(self, s: str) -> list[int]:
    raise NotImplementedError

  def _decode(self, ids: list[int]) -> str:
    raise NotImplementedError

  def decode(self, ids: Iterable[int]) -> str:
    """The text of `ids` up through the first EOS (seqio's convention); ids
    beyond the vocabulary read as UNK, pad ids are skipped."""
    ids = [int(i) for i in np.asarray(ids, np.int64).reshape(-1)]
    ids = [self.unk_id if i >= self.vocab_size else i for i in ids]
    if self.eos_id in ids:
      ids = ids[:ids.index(self.eos_id) + 1]
    return self._decode([i for i in ids if i != self.pad_id])

  def detokenize(self, ids: Iterable[int]) -> str:
    """Generated text: `ids` before the first EOS, without special tokens (the unknown token included, as Hugging
    Face's `decode(ids, skip_special_tokens=True)`), decoded by the vocabulary's own decoder."""
    ids = [int(i) for i in np.asarray(ids, np.int64).reshape(-1)]
    if self.eos_id in ids:
      ids = ids[:ids.index(self.eos_id)]
    special = {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id}
    return self._detokenize([i for i in ids if i not in special and 0 <= i < self.vocab_size])

  def _detokenize(self, ids: list[int]) -> str:
    return self._decode(ids)

  def build_inputs(
      self, ids_a: Sequence[int], ids_b: Optional[Sequence[int]] = None
  ) -> tuple[list[int], list[int]]:
    """(input_ids, token_type_ids) with special tokens, as Hugging Face adds them."""
    input_ids, token_type_ids = [], []
    for item, type_id in self._layout[ids_b is not None]:
      ids = ids_a if item == "A" else ids_b if item == "B" else [item]
      input_ids += ids
      token_type_ids += [type_id] * len(ids)
    return input_ids, token_type_ids

  def encode_tf(self, s):
    """seqio's `encode_tf` (imports TensorFlow; see `seqio_vocabulary`)."""
    from xtreme_jax.data.vocab.seqio_vocabulary import as_seqio
    return as_seqio(self).encode_tf(s)

  def decode_tf(self, ids):
    """seqio's `decode_tf` (imports TensorFlow; see `seqio_vocabulary`)."""
    from xtreme_jax.data.vocab.seqio_vocabulary import as_seqio
    return as_seqio(self).decode_tf(ids)

  def _eq_key(self) -> tuple:
    raise NotImplementedError

  def __eq__(self, other) -> bool:
    return type(self) is type(other) and self._eq_key() == other._eq_key()

  def __hash__(self) -> int:
    return hash((type(self).__name__, self._eq_key()))

  def __repr__(self) -> str:
    return f"{type(self).__name__}({self._source!r}, size={self.vocab_size})"


def _special_ids(vocab: Mapping[str, int], source: str, settings: Mapping[str, Any]) -> dict[str, int]:
  """{name: id} of the five special tokens: the `<name>_token` settings, else
  BERT's ([CLS]...) or, for a vocabulary without [CLS], XLM-R's (<s>...)."""
  defaults = BERT_SPECIALS if "[CLS]" in vocab else XLMR_SPECIALS
  ids = {}
  for name in SPECIALS:
    token = settings.get(f"{name}_token") or defaults[name]
    if token not in vocab:
      raise errors.DataError(f"{source}: the vocabulary has no {name} token {token!r}")
    ids[name] = vocab[token]
  return ids


def _check_keys(settings: Mapping[str, Any], cls: type, source: str) -> None:
  """A `ConfigError` naming `source` for settings the vocabulary class `cls` does not take (`cls.SETTINGS`)."""
  unknown = sorted(set(settings) - set(cls.SETTINGS))
  if unknown:
    valid = f"valid settings: {list(cls.SETTINGS)}" if cls.SETTINGS else "it takes none"
    raise errors.ConfigError(f"{source}: {cls.__name__} does not take the tokenizer setting(s) {unknown}; {valid}")


def _post_processor_layout(tokenizer: tokenizers.Tokenizer) -> tuple[Layout, Layout]:
  """(single, pair) layouts of what the tokenizer's post-processor adds."""
  def layout(*texts: str) -> Layout:
    enc = tokenizer.encode(*texts, add_special_tokens=True)
    out: list[tuple[Any, int]] = []
    for i, seq, type_id in zip(enc.ids, enc.sequence_ids, enc.type_ids):
      item = (i, type_id) if seq is None else ("AB"[seq], type_id)
      if seq is None or not out or out[-1] != item:
        out.append(item)
    return tuple(out)
  return layout("a"), layout("a", "a")


class TokenizerVocabulary(Vocabulary):
  """A Hugging Face `tokenizers.Tokenizer`, e.g. a checkpoint's `tokenizer.json`.

  Encoding and decoding are the tokenizer's own; `build_inputs` follows its
  post-processor. `settings` (`SETTING_KEYS`, e.g. from tokenizer_config.json)
  name the special tokens and, as in transformers' BertTokenizer, override the
  fields of a `BertNormalizer`. Any truncation or padding stored in the file is
  dropped. Special tokens are not split out of raw text; a model whose own
  vocabulary holds them as pieces (a converted sentencepiece Unigram model
  holds "<mask>") can still produce them.
  """

  SETTINGS = SETTING_KEYS

  def __init__(self, tokenizer_file: str, **settings):
    _check_keys(settings, TokenizerVocabulary, tokenizer_file)
    spec = _read_json(tokenizer_file)
    normalizer = spec.get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
      normalizer.update({field: settings[key] for key, field in BERT_SETTINGS.items() if key in settings})
    try:
      tokenizer = tokenizers.Tokenizer.from_str(json.dumps(spec))
    except Exception as e:  # the Rust library raises a bare Exception
      raise errors.DataError(f"{tokenizer_file}: not a Hugging Face tokenizers file ({e})") from None
    self._setup(tokenizer, tokenizer_file, settings)

  def _setup(self, tokenizer: tokenizers.Tokenizer, source: str, settings: Mapping[str, Any]) -> None:
    tokenizer.no_truncation()
    tokenizer.no_padding()
    tokenizer.encode_special_tokens = True  # a literal "[MASK]" in the text is text
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    for name, i in _special_ids(vocab, source, settings).items():
      setattr(self, f"_{name}_id", i)
    self._tokenizer, self._source = tokenizer, source
    self._size = max(vocab.values()) + 1
    self._layout = _post_processor_layout(tokenizer)
    self._json = tokenizer.to_str()

  def encode(self, s: str) -> list[int]:
    return self._tokenizer.encode(s, add_special_tokens=False).ids

  def _decode(self, ids: list[int]) -> str:
    return self._tokenizer.decode(ids, skip_special_tokens=False)

  def _eq_key(self) -> tuple:
    return (self._json, self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)

  def __getstate__(self):
    state = self.__dict__.copy()
    del state["_tokenizer"]
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._tokenizer = tokenizers.Tokenizer.from_str(self._json)
    self._tokenizer.encode_special_tokens = True


class WordPieceVocabulary(TokenizerVocabulary):
  """mBERT's WordPiece tokenizer from a `vocab.txt` (ids and decoding equal
  Hugging Face BertTokenizer with the same settings).

  The pipeline is transformers' BertTokenizer, built with `tokenizers`:
  BertNormalizer (clean text, isolate CJK characters, strip accents, lowercase),
  BertPreTokenizer, WordPiece (`max_input_chars_per_word`), the WordPiece
  decoder with its per-token clean-up, and `[CLS] a [SEP] b [SEP]` (type ids 0
  then 1). Unlike transformers (whose default is uncased), `do_lower_case`
  defaults to False: mBERT's released vocabulary is cased. `strip_accents=None`
  follows `do_lower_case`. `special_tokens` are `<name>_token` settings.
  """

  SETTINGS = (*SETTING_KEYS, "max_input_chars_per_word")

  def __init__(self, vocab_file: str, do_lower_case: bool = False, max_input_chars_per_word: int = 100,
               strip_accents: Optional[bool] = None, tokenize_chinese_chars: bool = True, **special_tokens):
    _check_keys(special_tokens, WordPieceVocabulary, vocab_file)
    text = _read_text(vocab_file).replace("\r\n", "\n").replace("\r", "\n")
    tokens = text.split("\n")
    if tokens[-1] == "":  # like `readlines()`: no token after the last newline
      tokens.pop()
    vocab = {tok: i for i, tok in enumerate(tokens)}  # a repeated token: the last line wins
    specials = _special_ids(vocab, vocab_file, special_tokens)
    cls, sep = tokens[specials["cls"]], tokens[specials["sep"]]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(
        vocab, unk_token=tokens[specials["unk"]], max_input_chars_per_word=max_input_chars_per_word))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=tokenize_chinese_chars, strip_accents=strip_accents,
        lowercase=do_lower_case)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, specials["cls"]), (sep, specials["sep"])])
    tokenizer.add_special_tokens([tokens[i] for i in specials.values()])
    self._setup(tokenizer, vocab_file, special_tokens)


class XlmrSentencePieceVocabulary(Vocabulary):
  """XLM-R's SentencePiece model with fairseq ids (equal to HF XLMRobertaTokenizer).

  `pad_id`=1, `unk_id`=3, `cls_id`=`bos_id`=0, `sep_id`=`eos_id`=2 and
  `mask_id`=spm size + 1; see the module docstring for the id shift. Pairs are
  `<s> a </s></s> b </s>`, all type ids 0. Text is normalised by sentencepiece
  itself (as in fairseq), which differs from the `tokenizers` normaliser of
  transformers 5 on rare combining sequences, e.g. "\u0930\u093c" (composed to
  U+0931 here, kept decomposed there) or a combining mark after a no-break
  space (kept here, dropped there).
  """

  SETTINGS = ()

  def __init__(self, model_file: str):
    self._source = model_file
    self._model = fs.read_bytes(model_file)
    self._sp = self._processor()
    if (self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id()) != (0, 1, 2):
      raise errors.DataError(f"{model_file}: not laid out like XLM-R's sentencepiece model "
                             "(expected unk=0, <s>=1, </s>=2)")
    n = self._sp.get_piece_size()
    self._tokens = (["<s>", "<pad>", "</s>", "<unk>"]
                    + [self._sp.id_to_piece(i) for i in range(3, n)] + ["<mask>"])
    self._spm_to_id = np.concatenate([[3, 0, 2], np.arange(4, n + 1)]).astype(np.int32)
    self._cls_id, self._pad_id, self._sep_id, self._unk_id = 0, 1, 2, 3
    self._mask_id = n + 1
    self._size = n + 2
    self._layout = (((0, 0), ("A", 0), (2, 0)), ((0, 0), ("A", 0), (2, 0), (2, 0), ("B", 0), (2, 0)))

  def _processor(self) -> sentencepiece.SentencePieceProcessor:
    try:
      return sentencepiece.SentencePieceProcessor(model_proto=self._model)
    except RuntimeError as e:
      raise errors.DataError(f"{self._source}: not a sentencepiece model ({e})") from None

  model_proto = property(lambda self: self._model, doc="The serialized sentencepiece model.")
  spm_to_id = property(lambda self: self._spm_to_id, doc="Our id of each sentencepiece id.")
  tokens = property(lambda self: self._tokens, doc="The token of each id.")

  def encode(self, s: str) -> list[int]:
    return self._spm_to_id[self._sp.encode(s)].tolist()

  def _decode(self, ids: list[int]) -> str:
    """The `tokenizers` Metaspace decoder: "▁" -> " ", dropped in the first token."""
    return "".join(self._tokens[i].replace("▁", " " if n else "") for n, i in enumerate(ids))

  def _detokenize(self, ids: list[int]) -> str:
    """sentencepiece's own decoding (byte-fallback pieces become their bytes); our id i > 3 is its i - 1."""
    return self._sp.decode([i - 1 for i in ids])

  def _eq_key(self) -> tuple:
    return (self._model,)

  def __getstate__(self):
    state = self.__dict__.copy()
    del state["_sp"]
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._sp = self._processor()


def load_vocabulary(path: str, **kwargs) -> Vocabulary:
  """The vocabulary stored at `path`.

  A (Hugging Face checkpoint) directory: its `sentencepiece.bpe.model` (XLM-R),
  else its `tokenizer.json`, else its `vocab.txt` (WordPiece); the settings in
  its `tokenizer_config.json` / `special_tokens_map.json` apply. A file: a
  `*.model` sentencepiece model, a `*.json` tokenizers file or a `*.txt`
  WordPiece vocabulary (with the settings of the config files next to it; a
  bare vocab.txt is cased). `kwargs` (e.g. `do_lower_case=True`) override the
  settings and go to the vocabulary's constructor; a setting that vocabulary
  does not take (`SETTINGS`; a sentencepiece model takes none) is a `ConfigError`.
  """
  if not fs.exists(path):
    raise errors.MissingInputError(f"vocabulary not found: {path}")
  if fs.isdir(path):
    for name in ("sentencepiece.bpe.model", "tokenizer.json", "vocab.txt"):
      if fs.exists(os.path.join(path, name)):
        return load_vocabulary(os.path.join(path, name), **kwargs)
  elif path.endswith(".model"):
    _check_keys(kwargs, XlmrSentencePieceVocabulary, path)
    return XlmrSentencePieceVocabulary(path)
  elif path.endswith((".json", ".txt")):
    cls = TokenizerVocabulary if path.endswith(".json") else WordPieceVocabulary
    return cls(path, **{**checkpoint_settings(fs.dirname(path)), **kwargs})
  raise errors.DataError(
      f"cannot load a vocabulary from {path}: expected a WordPiece 'vocab.txt', a SentencePiece "
      "'*.model' file, a 'tokenizer.json', or a directory containing 'sentencepiece.bpe.model', "
      "'tokenizer.json' or 'vocab.txt'")
