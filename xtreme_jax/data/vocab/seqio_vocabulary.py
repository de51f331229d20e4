"""The seqio `Vocabulary` view of `vocabularies` (imports seqio and TensorFlow).

`vocabularies` stays free of TensorFlow so that runs without a tf.data pipeline
do not import it; seqio tasks and tf.data code wrap a vocabulary with
`as_seqio(vocab)`. XLM-R's sentencepiece model runs as TF ops (tf_text); a
`tokenizers` vocabulary runs its Rust tokenizer in `tf.py_function`, which
needs the Python interpreter (fine in `tf.data`, not in an exported graph).
"""

from __future__ import annotations

import numpy as np
import seqio
import tensorflow as tf
import tensorflow_text as tf_text

from xtreme_jax.data.vocab import vocabularies


def _encode_py(vocab, s: tf.Tensor) -> tf.Tensor:
  ids = tf.py_function(lambda x: np.asarray(vocab.encode(x.numpy().decode("utf-8")), np.int32), [s], tf.int32)
  ids.set_shape([None])
  return ids


def _decode_py(vocab, ids: tf.Tensor) -> tf.Tensor:
  def decode_rows(x):
    x = x.numpy()
    rows = x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])
    return np.array([vocab.decode(row).encode("utf-8") for row in rows], dtype=object).reshape(x.shape[:-1])

  text = tf.py_function(decode_rows, [ids], tf.string)
  text.set_shape(ids.shape[:-1])
  return text


def _encode_spm(vocab: vocabularies.XlmrSentencePieceVocabulary, s: tf.Tensor) -> tf.Tensor:
  spm_ids = tf_text.SentencepieceTokenizer(model=vocab.model_proto, out_type=tf.int32).tokenize(s)
  return tf.gather(tf.constant(vocab.spm_to_id), spm_ids)


def _decode_spm(vocab: vocabularies.XlmrSentencePieceVocabulary, ids: tf.Tensor) -> tf.Tensor:
  """The Metaspace decoder as TF ops: pads dropped, "▁" -> " " except in a row's first token."""
  shape = tf.shape(ids)
  rows = tf.reshape(ids, [-1, shape[-1]])
  rows = tf.ragged.boolean_mask(rows, tf.not_equal(rows, vocab.pad_id))
  tokens = tf.gather(tf.constant(vocab.tokens), rows.flat_values)
  position = (tf.range(tf.size(rows.flat_values, out_type=rows.row_splits.dtype))
              - tf.gather(rows.row_starts(), rows.value_rowids()))
  tokens = tf.where(position == 0, tf.strings.regex_replace(tokens, "▁", ""),
                    tf.strings.regex_replace(tokens, "▁", " "))
  text = tf.strings.reduce_join(rows.with_flat_values(tokens), axis=-1)
  return tf.reshape(text, shape[:-1])


class SeqioVocabulary(seqio.Vocabulary):
  """A `vocabularies.Vocabulary` as a seqio `Vocabulary` (no extra ids)."""

  def __init__(self, vocab: vocabularies.Vocabulary):
    super().__init__(extra_ids=0)
    self.vocab = vocab
    spm = isinstance(vocab, vocabularies.XlmrSentencePieceVocabulary)
    self._encode_fn, self._decode_fn = (_encode_spm, _decode_spm) if spm else (_encode_py, _decode_py)

  pad_id = property(lambda self: self.vocab.pad_id)
  unk_id = property(lambda self: self.vocab.unk_id)
  bos_id = property(lambda self: self.vocab.bos_id)
  eos_id = property(lambda self: self.vocab.eos_id)
  _base_vocab_size = property(lambda self: self.vocab.vocab_size)

  def _encode(self, s: str) -> list[int]:
    return self.vocab.encode(s)

  def _decode(self, ids) -> str:
    return self.vocab.decode(ids)

  def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
    return self._encode_fn(self.vocab, s)

  def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
    return self._decode_fn(self.vocab, tf.convert_to_tensor(ids))

  def __eq__(self, other) -> bool:
    return isinstance(other, SeqioVocabulary) and self.vocab == other.vocab

  def __hash__(self) -> int:
    return hash(self.vocab)

  def __repr__(self) -> str:
    return f"SeqioVocabulary({self.vocab!r})"


def as_seqio(vocab) -> seqio.Vocabulary:
  """`vocab` as a seqio `Vocabulary` (a seqio vocabulary is returned as is)."""
  return vocab if isinstance(vocab, seqio.Vocabulary) else SeqioVocabulary(vocab)
