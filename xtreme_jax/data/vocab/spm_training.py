"""Train an XLM-R-layout sentencepiece model (unk=0, <s>=1, </s>=2, no pad).

Used to build the small vocabulary of the bundled sample; the same call
makes a vocabulary for any tiny-model experiment:

    python -m xtreme_jax.data.vocab.spm_training OUT_PREFIX VOCAB_SIZE FILE...
"""

from __future__ import annotations

import io
import sys
from typing import Iterable

import sentencepiece as spm


def train_xlmr_style(lines: Iterable[str], out_prefix: str, vocab_size: int, model_type: str = "unigram") -> str:
  """Train on `lines`; returns the path of the written `.model` file."""
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(list(lines)), model_prefix=out_prefix, vocab_size=vocab_size,
      model_type=model_type, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
      hard_vocab_limit=False, num_threads=1, minloglevel=2, input_sentence_size=0,
      shuffle_input_sentence=False, seed_sentencepiece_size=100000)
  return out_prefix + ".model"


if __name__ == "__main__":
  prefix, size, *files = sys.argv[1:]
  text = [line for f in files for line in io.open(f, encoding="utf-8").read().splitlines() if line.strip()]
  print(train_xlmr_style(text, prefix, int(size)))
