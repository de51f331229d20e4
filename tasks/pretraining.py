"""seqio Tasks of raw pretraining text: monolingual documents and parallel sentence pairs.

Importing this module (`import xtreme_tasks.pretraining`) registers everything
below; importing or reloading it again re-registers the same names (each name
is removed from the seqio registry before it is added). The tasks yield raw,
untokenized text; `xtreme_jax.data.pretraining.pretraining_streams.SeqioPairSource`
tokenizes, segments, samples languages with n^alpha and builds the VECO / TLM
features (no Mixtures of them are registered: sampling is the pair source's
job). Unicoder's generation pretraining (xDAE, xFNP) has tokenized Tasks and
n^alpha Mixtures over the same monolingual corpora (section "Generation
pretraining" below).

Output features (scalar strings, `seqio.PassThroughVocabulary(size=0)`)
* monolingual tasks: `text`, one document whose sentences (or paragraphs) are
  separated by "\\n".
* parallel tasks: `source`, `target` (one aligned sentence pair).
Empty documents and pairs with an empty side are dropped by every task.

Registered names
* `pretrain_text_{lg}` for `TEXT_LANGUAGES` (the 40 XTREME languages, which
  include the bundled sample's 12): the file `{dir}/{lg}.txt`. By default
  every line is a document; with blank-line documents each block of lines
  separated by blank lines is a document and each line a sentence (the
  readers of `xtreme_jax.data.pretraining.pretraining_corpora`). `{dir}` and the mode are
  looked up when a dataset is *built*: `set_monolingual_dir(path,
  blank_line_documents=...)` wins, else `$XTREME_JAX_PRETRAIN_MONO_DIR`
  (and `$XTREME_JAX_PRETRAIN_BLANK_LINE_DOCUMENTS=1`). Split: `train`.
  `register_text_task(lg)` adds any other language.
* `pretrain_parallel_{src}_{tgt}` for `{lg}-en` and `en-{lg}`, lg in
  `TEXT_LANGUAGES`: `{dir}/{src}-{tgt}.{src}` + `.{tgt}` (aligned) or
  `{dir}/{src}-{tgt}.tsv` (`source<TAB>target`), found by
  `pretraining_corpora.available_parallel`; `{dir}` from
  `set_parallel_dir(path)`, else `$XTREME_JAX_PRETRAIN_PARALLEL_DIR`.
  Split: `train`. `register_parallel_task(src, tgt)` adds any other pair.
* `pretrain_sample_text_{lg}` / `pretrain_sample_parallel_{lg}_en`: the same
  over the sample bundled with the package (`xtreme_jax/sample_data/pretrain`,
  a document per line, and `.../parallel`); no directory to set.
* `pretrain_wiki40b_{lg}` for the 41 `wiki40b` configs (`WIKI40B_LANGUAGES`,
  `wiki40b/{lg}:1.3.0`, splits train / validation / test; "-" in a config
  name becomes "_" in the task name, e.g. `pretrain_wiki40b_zh_cn`). The
  article markup (`_START_ARTICLE_` title, `_START_SECTION_` heading,
  `_START_PARAGRAPH_` paragraph with `_NEWLINE_` line breaks) becomes one
  line per paragraph line; titles and section headings are dropped
  (`wiki40b_text`).
* `pretrain_mc4_{lg}` for the 107 mC4 languages (`MC4_LANGUAGES`,
  `c4/multilingual:3.1.0`; train = TFDS split `{lg}`, validation =
  `{lg}-validation`; `bg-Latn` -> `pretrain_mc4_bg_Latn`). mC4 pages keep
  their paragraph lines ("\\n"-separated).
* `pretrain_opus_{subset}_de_en` for the `opus` builder's configs
  (`OPUS_SUBSETS`: medical, law, koran, IT, subtitles; all de-en, version
  0.1.0; `IT` -> `pretrain_opus_it_de_en`): source = `de`, target = `en`.
TFDS data is read from the TFDS data directory (`$TFDS_DATA_DIR`), prepared
beforehand with `tfds build` (wiki40b and mC4 are Beam datasets).

Languages and sizes
-------------------
Each task's source carries `pretrain_language` (monolingual: the language
code, e.g. `zh-cn`) or `pretrain_language_pair` (`(src, tgt)`), which the
pair source uses when it is given a list of task names. The number of
documents (pairs) n used for n^alpha sampling is `num_input_examples(split)`:
the TFDS split metadata `num_examples` for TFDS tasks (counted before
dropping empty documents), a line / block count of the file for file tasks
(cached per file version). The pair source counts the examples of a task
whose source gives no size (e.g. TFDS data without split metadata) by reading
the stream once when it first needs the count.

Generation pretraining (Unicoder, XGLUE; `xtreme_jax.data.pretraining.denoising`)
----------------------------------------------------------------------
For every monolingual task above, `pretrain_{objective}_{rest}` where the
monolingual task is `pretrain_{rest}` (e.g. `pretrain_xdae_wiki40b_zh_cn`,
`pretrain_xfnp_sample_text_de`), objective `xdae` or `xfnp`: the same
source and cleaning, then each document ("\n" read as a space) is tokenized
and cut into consecutive sequences of at most L tokens, specials included
(`denoising.split_tokens`; L = the `sequence_length` given to `get_dataset`
for `targets` (xDAE) / `inputs` (xFNP), else 512), and each sequence noised:
* xDAE: `targets` = tokens + EOS (the ids the decoder predicts, EOS included,
  as `models/seq2seq.py` wants them), `inputs` = the noised copy (BART text
  infilling by default, EOS kept in place; `denoising.xdae_noise`); no BOS
  on either side, as Unicoder's code. Masks inserted by 0-length spans can
  make `inputs` longer than L: `get_dataset` trims it to its length.
* xFNP: the sequence is BOS + tokens + EOS (BOS / EOS kept in place) and
  `denoising.xfnp_span_mask` gives `inputs`, `targets`, `target_positions`,
  `target_offsets`, `decoder_inputs` (see that module).
All features are 1-D int32 (`add_eos=False`: the EOS is already there).
The vocabulary is `set_vocabulary(path_or_vocabulary)`, else
`$XTREME_JAX_PRETRAIN_VOCAB` (a path `vocabularies.load_vocabulary` reads),
looked up when a dataset is built; the `*_sample_text_*` tasks use the
bundled `sample_spm.model`.
Mixtures `pretrain_{objective}_{corpus}` (corpus: text, sample_text, wiki40b,
mc4) draw each example's language with probability n^alpha / sum (alpha =
0.3, Unicoder; n = the task's `num_input_examples("train")`), so batches are
multilingual; building one needs every member's data (`pretrain_xdae_text`
all 40 files): `register_generation_mixture(objective, corpus, languages)`
adds one over the languages you have. `register_generation_task` adds a task
with other settings (e.g. `noise=["shuffle", "drop"]`).
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from typing import Any, Optional, Sequence, Union

import seqio
import tensorflow as tf

from xtreme_jax import errors
from xtreme_jax.data.pretraining import denoising
from xtreme_jax.data import paths
from xtreme_jax.data.pretraining import pretraining_corpora as corpora

MONO_DIR_ENV = "XTREME_JAX_PRETRAIN_MONO_DIR"
PARALLEL_DIR_ENV = "XTREME_JAX_PRETRAIN_PARALLEL_DIR"
BLANK_LINE_ENV = "XTREME_JAX_PRETRAIN_BLANK_LINE_DOCUMENTS"

# The 40 XTREME languages (the bundled sample's 12 are among them).
TEXT_LANGUAGES = ("af", "ar", "bg", "bn", "de", "el", "en", "es", "et", "eu", "fa", "fi", "fr", "he", "hi", "hu",
                  "id", "it", "ja", "jv", "ka", "kk", "ko", "ml", "mr", "ms", "my", "nl", "pt", "ru", "sw", "ta",
                  "te", "th", "tl", "tr", "ur", "vi", "yo", "zh")
SAMPLE_LANGUAGES = ("ar", "de", "el", "en", "es", "fr", "hi", "ja", "ru", "sw", "th", "zh")

WIKI40B_VERSION = "1.3.0"
WIKI40B_LANGUAGES = ("en", "ar", "zh-cn", "zh-tw", "nl", "fr", "de", "it", "ja", "ko", "pl", "pt", "ru", "es", "th",
                     "tr", "bg", "ca", "cs", "da", "el", "et", "fa", "fi", "he", "hi", "hr", "hu", "id", "lt", "lv",
                     "ms", "no", "ro", "sk", "sl", "sr", "sv", "tl", "uk", "vi")
MC4_VERSION = "3.1.0"
MC4_LANGUAGES = ("af", "am", "ar", "az", "be", "bg", "bg-Latn", "bn", "ca", "ceb", "co", "cs", "cy", "da", "de", "el",
                 "el-Latn", "en", "eo", "es", "et", "eu", "fa", "fi", "fil", "fr", "fy", "ga", "gd", "gl", "gu", "ha",
                 "haw", "hi", "hi-Latn", "hmn", "ht", "hu", "hy", "id", "ig", "is", "it", "iw", "ja", "ja-Latn", "jv",
                 "ka", "kk", "km", "kn", "ko", "ku", "ky", "la", "lb", "lo", "lt", "lv", "mg", "mi", "mk", "ml", "mn",
                 "mr", "ms", "mt", "my", "ne", "nl", "no", "ny", "pa", "pl", "ps", "pt", "ro", "ru", "ru-Latn", "sd",
                 "si", "sk", "sl", "sm", "sn", "so", "sq", "sr", "st", "su", "sv", "sw", "ta", "te", "tg", "th", "tr",
                 "uk", "ur", "uz", "vi", "xh", "yi", "yo", "zh", "zh-Latn", "zu")
OPUS_VERSION = "0.1.0"
OPUS_SUBSETS = ("medical", "law", "koran", "IT", "subtitles")
OPUS_PAIR = ("de", "en")  # every config of the TFDS `opus` builder

# Kept across importlib.reload (re-registration must not forget the configured directories).
_monolingual_dir: Optional[str] = globals().get("_monolingual_dir")
_blank_line_documents: Optional[bool] = globals().get("_blank_line_documents")
_parallel_dir: Optional[str] = globals().get("_parallel_dir")
_vocabulary: Any = globals().get("_vocabulary")
_loaded_vocabularies: dict = globals().get("_loaded_vocabularies", {})

VOCAB_ENV = "XTREME_JAX_PRETRAIN_VOCAB"
GENERATION_OBJECTIVES = ("xdae", "xfnp")
GENERATION_CORPORA = {"text": TEXT_LANGUAGES, "sample_text": SAMPLE_LANGUAGES, "wiki40b": WIKI40B_LANGUAGES,
                      "mc4": MC4_LANGUAGES}
GENERATION_ALPHA = corpora.UNICODER_ALPHA


# ----------------------------------------------------------------------------- directories


def set_monolingual_dir(path: Optional[Union[str, os.PathLike]], blank_line_documents: Optional[bool] = None) -> None:
  """The directory of `{lg}.txt` files read by `pretrain_text_*` (None clears it) and its document mode."""
  global _monolingual_dir, _blank_line_documents
  _monolingual_dir = None if path is None else os.fspath(path)
  _blank_line_documents = blank_line_documents


def set_parallel_dir(path: Optional[Union[str, os.PathLike]]) -> None:
  """The directory of parallel files read by `pretrain_parallel_*` (None clears it)."""
  global _parallel_dir
  _parallel_dir = None if path is None else os.fspath(path)


def _lookup_dir(value: Optional[str], env: str, setter: str) -> str:
  path, origin = value, f"{setter}()"
  if not path:
    path, origin = os.environ.get(env), f"${env}"
  if not path:
    raise ValueError(f"the pretraining data directory is not set: call xtreme_tasks.pretraining.{setter}(path) "
                     f"or set the environment variable {env}")
  if not os.path.isdir(path):
    raise FileNotFoundError(f"the pretraining data directory {path!r} (from {origin}) does not exist or is not a "
                            "directory")
  return path


def get_monolingual_dir() -> str:
  return _lookup_dir(_monolingual_dir, MONO_DIR_ENV, "set_monolingual_dir")


def get_parallel_dir() -> str:
  return _lookup_dir(_parallel_dir, PARALLEL_DIR_ENV, "set_parallel_dir")


def blank_line_documents() -> bool:
  """The document mode of `pretrain_text_*`: from `set_monolingual_dir`, else `$XTREME_JAX_PRETRAIN_BLANK_LINE_DOCUMENTS`."""
  if _blank_line_documents is not None:
    return _blank_line_documents
  return os.environ.get(BLANK_LINE_ENV, "").strip().lower() in ("1", "true", "yes")


# ----------------------------------------------------------------------------- file sources

_PASSTHROUGH = seqio.PassThroughVocabulary(size=0)
TEXT_FEATURES = {"text": seqio.Feature(_PASSTHROUGH, add_eos=False, dtype=tf.string, rank=0)}
PAIR_FEATURES = {k: seqio.Feature(_PASSTHROUGH, add_eos=False, dtype=tf.string, rank=0) for k in ("source", "target")}


def _file_key(*files: str) -> tuple:
  out = []
  for f in files:
    st = os.stat(f)
    out.append((f, st.st_mtime_ns, st.st_size, st.st_ino))
  return tuple(out)


# File sources read with TF-native ops only. A `tf.data.Dataset.from_generator` over a Python
# generator can deadlock when its (prefetched) iterator is freed while the generator waits for the
# GIL, which happens when a stream is dropped or at interpreter exit.
# Whitespace as Python's str.strip (Unicode White_Space), so TF and the Python counters agree.
_SPACE = r"[\s\x{0b}\x{1c}-\x{1f}\x{85}\p{Z}]"


def _strip(line: tf.Tensor) -> tf.Tensor:
  return tf.strings.regex_replace(line, f"^{_SPACE}+|{_SPACE}+$", "")


def _has_text(text: tf.Tensor) -> tf.Tensor:
  return tf.greater(tf.strings.length(text), 0)


def _blank_line_blocks(lines: tf.data.Dataset) -> tf.data.Dataset:
  """Stripped lines -> documents (non-empty lines joined by "\n") separated by blank lines."""
  lines = lines.concatenate(tf.data.Dataset.from_tensors(tf.constant("")))  # flushes the last block

  def step(block, line):
    blank = tf.logical_not(_has_text(line))
    grown = tf.where(_has_text(block), tf.strings.join([block, line], "\n"), line)
    return tf.where(blank, "", grown), tf.where(blank, block, "")

  return lines.scan(tf.constant(""), step).filter(_has_text)


class TextFileSource(seqio.FunctionDataSource):
  """The documents of `{directory}/{language}.txt`, streamed (never held in memory), as `text`.

  `directory` / `blank_line_documents` None: looked up at build time
  (`get_monolingual_dir()`, `blank_line_documents()`).
  """

  def __init__(self, language: str, directory: Optional[str] = None, blank_line_documents: Optional[bool] = None):
    self.pretrain_language, self.directory, self.blank_line_documents = language, directory, blank_line_documents
    self._counts: dict[tuple, int] = {}
    super().__init__(dataset_fn=self._dataset_fn, splits=("train",))

  def __repr__(self):
    return (f"TextFileSource(language={self.pretrain_language!r}, directory={self.directory!r}, "
            f"blank_line_documents={self.blank_line_documents})")

  def path(self) -> tuple[str, bool]:
    directory = self.directory or get_monolingual_dir()
    blocks = blank_line_documents() if self.blank_line_documents is None else self.blank_line_documents
    path = os.path.join(directory, f"{self.pretrain_language}.txt")
    if not os.path.isfile(path):
      raise FileNotFoundError(f"no monolingual file {path} for language {self.pretrain_language!r}; languages in "
                              f"{directory}: {corpora.available_monolingual(directory)}")
    return path, blocks

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None) -> tf.data.Dataset:
    del shuffle_files, seed  # one file, read in order (seqio passes `seed` when get_dataset is given one)
    path, blocks = self.path()
    lines = tf.data.TextLineDataset(path).map(_strip)
    docs = _blank_line_blocks(lines) if blocks else lines.filter(_has_text)
    return docs.map(lambda text: {"text": text})

  def num_input_examples(self, split: str) -> int:
    """Documents in the file (lines, or blank-line blocks); cached per file version."""
    path, blocks = self.path()
    key = (_file_key(path), blocks)
    if key not in self._counts:
      self._counts[key] = sum(1 for _ in corpora.iter_documents(path, blocks))
    return self._counts[key]


class ParallelFileSource(seqio.FunctionDataSource):
  """The pairs of `{directory}/{src}-{tgt}.{src|tgt}` or `.tsv`, streamed, as `source` / `target`."""

  def __init__(self, source: str, target: str, directory: Optional[str] = None):
    self.pretrain_language_pair, self.directory = (source, target), directory
    self._counts: dict[tuple, int] = {}
    super().__init__(dataset_fn=self._dataset_fn, splits=("train",))

  def __repr__(self):
    return f"ParallelFileSource(pair={self.pretrain_language_pair!r}, directory={self.directory!r})"

  def files(self) -> tuple[str, ...]:
    directory = self.directory or get_parallel_dir()
    key = "-".join(self.pretrain_language_pair)
    available = corpora.available_parallel(directory)
    if key not in available:
      raise FileNotFoundError(f"no parallel file(s) for language pair {key!r} in {directory} ({key}.{{src,tgt}} "
                              f"or {key}.tsv); language pairs there: {sorted(available)}")
    return available[key]

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None) -> tf.data.Dataset:
    del shuffle_files, seed
    files = self.files()
    self.num_input_examples(split)  # validates the files once (line counts, TSV fields), in Python; cached
    if len(files) == 2:
      pairs = tf.data.Dataset.zip(tuple(tf.data.TextLineDataset(f).map(_strip) for f in files))
    else:
      lines = tf.data.TextLineDataset(files[0]).filter(lambda line: _has_text(_strip(line)))
      pairs = lines.map(lambda line: tuple(_strip(tf.strings.split(line, "\t")[i]) for i in (0, 1)))
    pairs = pairs.filter(lambda s, t: tf.logical_and(_has_text(s), _has_text(t)))
    return pairs.map(lambda s, t: {"source": s, "target": t})

  def num_input_examples(self, split: str) -> int:
    """Pairs with text on both sides; cached per file version."""
    files = self.files()
    key = _file_key(*files)
    if key not in self._counts:
      self._counts[key] = sum(1 for _ in corpora.iter_parallel(files))
    return self._counts[key]


# ----------------------------------------------------------------------------- TFDS preprocessing

_WIKI40B_HEADER = r"(^|\n)_START_(ARTICLE|SECTION)_\n[^\n]*"


def wiki40b_text(text: str) -> str:
  """Plain text of a wiki40b article: one line per paragraph line, no title or section headings."""
  text = re.sub(_WIKI40B_HEADER, "\n", text)
  text = text.replace("_START_PARAGRAPH_\n", "\n").replace("_NEWLINE_", "\n")
  return "\n".join(line.strip() for line in text.split("\n") if line.strip())


def _tf_lines(text: tf.Tensor) -> tf.Tensor:
  """Non-empty stripped lines of a scalar string, joined by "\\n" (in-graph)."""
  lines = tf.strings.strip(tf.strings.split(text, "\n"))
  return tf.strings.reduce_join(tf.boolean_mask(lines, tf.strings.length(lines) > 0), separator="\n")


def _nonempty(*keys: str):
  return lambda ex: tf.reduce_all([tf.strings.length(ex[k]) > 0 for k in keys])


def wiki40b_preprocessor(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """wiki40b examples -> {"text"} (`wiki40b_text`, in-graph); empty articles dropped."""
  def convert(ex):
    text = tf.strings.regex_replace(ex["text"], _WIKI40B_HEADER, "\n")
    text = tf.strings.regex_replace(text, "_START_PARAGRAPH_\n", "\n")
    text = tf.strings.regex_replace(text, "_NEWLINE_", "\n")
    return {"text": _tf_lines(text)}
  return dataset.map(convert, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).filter(_nonempty("text"))


def text_lines_preprocessor(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """{"text", ...} -> {"text"} with blank lines and surrounding spaces removed; empty documents dropped."""
  return dataset.map(lambda ex: {"text": _tf_lines(ex["text"])}, num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=True).filter(_nonempty("text"))


def translation_preprocessor(dataset: tf.data.Dataset, source: str, target: str) -> tf.data.Dataset:
  """TFDS Translation examples {src: .., tgt: ..} -> {"source", "target"} (stripped); empty sides dropped."""
  return dataset.map(lambda ex: {"source": tf.strings.strip(ex[source]), "target": tf.strings.strip(ex[target])},
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).filter(_nonempty("source", "target"))


def _opus_preprocessor(dataset: tf.data.Dataset) -> tf.data.Dataset:
  return translation_preprocessor(dataset, *OPUS_PAIR)


# ----------------------------------------------------------------------------- registration


def _name(part: str) -> str:
  return part.replace("-", "_")


def _add(name: str, source: seqio.DataSource, features: dict, preprocessors: Sequence = ()) -> seqio.Task:
  seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(name, source=source, output_features=features, preprocessors=list(preprocessors),
                                metric_fns=[])


def register_text_task(language: str, directory: Optional[str] = None, blank_line_documents: Optional[bool] = None,
                       name: Optional[str] = None) -> seqio.Task:
  """`pretrain_text_{language}` (or `name`) over `{directory}/{language}.txt` (None: looked up at build time)."""
  return _add(name or f"pretrain_text_{_name(language)}",
              TextFileSource(language, directory, blank_line_documents), TEXT_FEATURES)


def register_parallel_task(source: str, target: str, directory: Optional[str] = None,
                           name: Optional[str] = None) -> seqio.Task:
  """`pretrain_parallel_{source}_{target}` (or `name`) over that pair's file(s) in `directory`."""
  return _add(name or f"pretrain_parallel_{_name(source)}_{_name(target)}",
              ParallelFileSource(source, target, directory), PAIR_FEATURES)


class _LanguageTfdsSource(seqio.TfdsDataSource):
  """A TfdsDataSource that knows its language (pair)."""

  def __init__(self, tfds_name: str, splits, language=None, language_pair=None):
    super().__init__(tfds_name, splits=splits)
    if language is not None:
      self.pretrain_language = language
    if language_pair is not None:
      self.pretrain_language_pair = tuple(language_pair)


def register_wiki40b_task(language: str) -> seqio.Task:
  if language not in WIKI40B_LANGUAGES:
    raise ValueError(f"wiki40b has no language {language!r}; valid: {' '.join(WIKI40B_LANGUAGES)}")
  source = _LanguageTfdsSource(f"wiki40b/{language}:{WIKI40B_VERSION}", ("train", "validation", "test"),
                               language=language)
  return _add(f"pretrain_wiki40b_{_name(language)}", source, TEXT_FEATURES, [wiki40b_preprocessor])


def register_mc4_task(language: str) -> seqio.Task:
  if language not in MC4_LANGUAGES:
    raise ValueError(f"mC4 has no language {language!r}; valid: {' '.join(MC4_LANGUAGES)}")
  source = _LanguageTfdsSource(f"c4/multilingual:{MC4_VERSION}",
                               {"train": language, "validation": f"{language}-validation"}, language=language)
  return _add(f"pretrain_mc4_{_name(language)}", source, TEXT_FEATURES, [text_lines_preprocessor])


def register_opus_task(subset: str) -> seqio.Task:
  if subset not in OPUS_SUBSETS:
    raise ValueError(f"the TFDS opus builder has no config {subset!r}; valid: {' '.join(OPUS_SUBSETS)}")
  source = _LanguageTfdsSource(f"opus/{subset}:{OPUS_VERSION}", ("train",), language_pair=OPUS_PAIR)
  return _add(f"pretrain_opus_{subset.lower()}_{'_'.join(OPUS_PAIR)}", source, PAIR_FEATURES, [_opus_preprocessor])


# ----------------------------------------------------------------------------- generation pretraining


def set_vocabulary(vocabulary: Any) -> None:
  """The vocabulary of the generation tasks: a path, a `vocabularies` vocabulary or a seqio one (None clears it)."""
  global _vocabulary
  _vocabulary = os.fspath(vocabulary) if isinstance(vocabulary, os.PathLike) else vocabulary


def _load(path: str):
  if path not in _loaded_vocabularies:
    from xtreme_jax.data.vocab.vocabularies import load_vocabulary  # pylint: disable=g-import-not-at-top
    _loaded_vocabularies[path] = load_vocabulary(path)
  return _loaded_vocabularies[path]


def get_vocabulary(path: Optional[str] = None):
  """The vocabulary at `path`, else from `set_vocabulary()`, else `$XTREME_JAX_PRETRAIN_VOCAB` (loaded once)."""
  value = path or _vocabulary or os.environ.get(VOCAB_ENV)
  if value is None or value == "":
    raise errors.ConfigError("the generation pretraining vocabulary is not set: call xtreme_tasks.pretraining."
                             f"set_vocabulary(path) or set the environment variable {VOCAB_ENV}")
  return _load(value) if isinstance(value, str) else value


class LazyVocabulary(seqio.Vocabulary):
  """The seqio view of `get_vocabulary(path)`, resolved when first used (tasks register before it is set)."""

  def __init__(self, path: Optional[str] = None):
    super().__init__(extra_ids=0)
    self.path = path

  @property
  def resolved(self) -> seqio.Vocabulary:
    from xtreme_jax.data.vocab.seqio_vocabulary import as_seqio  # pylint: disable=g-import-not-at-top
    return as_seqio(get_vocabulary(self.path))

  @property
  def vocab(self):
    """The wrapped vocabulary (its `mask_id`, `cls_id`, ...)."""
    return getattr(self.resolved, "vocab", self.resolved)

  bos_id = property(lambda self: self.resolved.bos_id)
  eos_id = property(lambda self: self.resolved.eos_id)
  pad_id = property(lambda self: self.resolved.pad_id)
  unk_id = property(lambda self: self.resolved.unk_id)
  mask_id = property(lambda self: getattr(self.vocab, "mask_id", None))
  _base_vocab_size = property(lambda self: self.resolved.vocab_size)

  def _encode(self, s):
    return self.resolved.encode(s)

  def _decode(self, ids):
    return self.resolved.decode(ids)

  def _encode_tf(self, s):
    return self.resolved.encode_tf(s)

  def _decode_tf(self, ids):
    return self.resolved.decode_tf(ids)

  def __eq__(self, other) -> bool:
    return isinstance(other, LazyVocabulary) and self.path == other.path

  def __hash__(self) -> int:
    return hash((LazyVocabulary, self.path))

  def __repr__(self) -> str:
    return f"LazyVocabulary({self.path!r})" if self.path else "LazyVocabulary(<set_vocabulary / $" + VOCAB_ENV + ">)"


CONFIGURED_VOCABULARY = LazyVocabulary()
SAMPLE_VOCABULARY = LazyVocabulary(paths.sample_vocab())


def generation_features(objective: str, vocabulary: seqio.Vocabulary) -> dict:
  """The output features of an `objective` task (1-D int32, EOS already in the data)."""
  _check_objective(objective)
  keys = ("inputs", "targets") if objective == "xdae" else denoising.XFNP_FEATURES
  positions = ("target_positions", "target_offsets")
  return {k: seqio.Feature(_PASSTHROUGH if k in positions else vocabulary, add_eos=False, dtype=tf.int32)
          for k in keys}


def _check_objective(objective: str) -> None:
  if objective not in GENERATION_OBJECTIVES:
    raise errors.ConfigError(f"unknown generation objective {objective!r}; valid: {', '.join(GENERATION_OBJECTIVES)}")


def _document_to_targets(dataset: tf.data.Dataset) -> tf.data.Dataset:
  return dataset.map(lambda ex: {"targets": tf.strings.regex_replace(ex["text"], "\n", " ")},
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def register_generation_task(objective: str, base: str, name: Optional[str] = None,
                             vocabulary: Optional[seqio.Vocabulary] = None, **settings) -> seqio.Task:
  """`pretrain_{objective}_{rest}` (or `name`) over the monolingual task `base` = `pretrain_{rest}`.

  `vocabulary`: a seqio vocabulary (default: the configured one, a
  `LazyVocabulary`); `settings` go to `denoising.xdae_noise` (e.g.
  `noise`, `infilling_ratio`) or `denoising.xfnp_span_mask` (e.g.
  `span_length`) and are checked now.
  """
  _check_objective(objective)
  preprocessor = denoising.xfnp_span_mask if objective == "xfnp" else denoising.xdae_noise
  valid = [k for k in inspect.signature(preprocessor).parameters if k not in ("dataset", "output_features")]
  unknown = sorted(set(settings) - set(valid))
  if unknown:
    raise errors.ConfigError(f"unknown {objective} setting(s) {unknown}; valid: {', '.join(valid)}")
  check = denoising.check_xfnp_args if objective == "xfnp" else denoising.check_xdae_args
  check(**{k: v for k, v in settings.items() if k in inspect.signature(check).parameters})
  task = seqio.get_mixture_or_task(base)
  if "text" not in task.output_features:
    raise errors.ConfigError(f"seqio task {base!r} is not a monolingual text task (no `text` feature)")
  if name is None and base.startswith("pretrain_"):
    name = f"pretrain_{objective}_{base[len('pretrain_'):]}"
  if not name:
    raise errors.ConfigError(f"give a name for the {objective} task over {base!r}")
  bos = objective == "xfnp"
  split = functools.partial(denoising.split_tokens, length_feature="inputs" if bos else "targets", add_bos=bos,
                            add_eos=True)
  noise = functools.partial(preprocessor, **settings)
  preprocessors = [*task.preprocessors, _document_to_targets,
                   functools.partial(seqio.preprocessors.tokenize, copy_pretokenized=False), split, noise]
  return _add(name, task.source, generation_features(objective, vocabulary or CONFIGURED_VOCABULARY), preprocessors)


def sampling_rate(task: seqio.Task, alpha: float = GENERATION_ALPHA) -> float:
  """n^alpha, n = `task.num_input_examples("train")` (a Mixture rate)."""
  n = task.num_input_examples("train")
  if not n or n <= 0:
    raise errors.DataError(f"seqio task {task.name!r} gives no number of training examples (needed for n^alpha "
                           "sampling); register a Mixture with explicit rates")
  return float(n) ** alpha


def register_generation_mixture(objective: str, corpus: str, languages: Optional[Sequence[str]] = None,
                                alpha: float = GENERATION_ALPHA, name: Optional[str] = None) -> seqio.Mixture:
  """`pretrain_{objective}_{corpus}` (or `name`): the tasks `pretrain_{objective}_{corpus}_{lg}` mixed by n^alpha."""
  _check_objective(objective)
  if corpus not in GENERATION_CORPORA:
    raise errors.ConfigError(f"unknown corpus {corpus!r}; valid: {', '.join(GENERATION_CORPORA)}")
  if not isinstance(alpha, (int, float)) or not alpha >= 0:
    raise errors.ConfigError(f"alpha={alpha!r}; expected a number >= 0")
  languages = GENERATION_CORPORA[corpus] if languages is None else tuple(languages)
  unknown = [lg for lg in languages if f"pretrain_{objective}_{corpus}_{_name(lg)}" not in seqio.TaskRegistry.names()]
  if not languages or unknown:
    raise errors.ConfigError(f"no {objective} task of corpus {corpus!r} for language(s) {unknown or languages}; "
                             f"valid: {' '.join(GENERATION_CORPORA[corpus])}")
  name = name or f"pretrain_{objective}_{corpus}"
  rate = functools.partial(sampling_rate, alpha=float(alpha))
  seqio.MixtureRegistry.remove(name)
  return seqio.MixtureRegistry.add(name, [(f"pretrain_{objective}_{corpus}_{_name(lg)}", rate) for lg in languages])


def register_generation_tasks() -> None:
  """The xDAE / xFNP tasks and mixtures of every monolingual corpus (module docstring)."""
  for corpus, languages in GENERATION_CORPORA.items():
    vocabulary = SAMPLE_VOCABULARY if corpus == "sample_text" else CONFIGURED_VOCABULARY
    for objective in GENERATION_OBJECTIVES:
      for lg in languages:
        register_generation_task(objective, f"pretrain_{corpus}_{_name(lg)}", vocabulary=vocabulary)
      register_generation_mixture(objective, corpus)


def register_all() -> None:
  """Registers every task listed in the module docstring (idempotent)."""
  sample = paths.sample_dir()
  for lg in TEXT_LANGUAGES:
    register_text_task(lg)
    if lg != "en":
      register_parallel_task(lg, "en")
      register_parallel_task("en", lg)
  for lg in SAMPLE_LANGUAGES:
    register_text_task(lg, os.path.join(sample, "pretrain"), False, name=f"pretrain_sample_text_{lg}")
    if lg != "en":
      register_parallel_task(lg, "en", os.path.join(sample, "parallel"), name=f"pretrain_sample_parallel_{lg}_en")
  for lg in WIKI40B_LANGUAGES:
    register_wiki40b_task(lg)
  for lg in MC4_LANGUAGES:
    register_mc4_task(lg)
  for subset in OPUS_SUBSETS:
    register_opus_task(subset)
  register_generation_tasks()


register_all()
