"""Language-identification probe (Wu & Dredze 2019, Fig. 2): how much language identity each layer keeps.

`language_id_probe` (Gin `runs/language_id.gin`):

1. reads WiLI-2018 (`x_{train,test}.txt`: one paragraph per line, `y_*.txt`:
   its language label on the same line) under `data_dir`, keeping the
   paragraphs of `languages` (default `MBERT_WILI_LABELS`: the languages of
   mBERT's pretraining data as WiLI labels) and, with `per_language`, the
   first that many of each;
2. encodes the first two sentences of each paragraph (`data/mldoc.sentences`,
   fed as a pair) with the fixed encoder and represents the text at every
   layer (the embeddings and each Transformer layer) as a bag of words: the
   mean of that layer's subword states over the text (`[CLS]` / `[SEP]`
   included, as retrieval's mean pooling);
3. trains a linear softmax classifier per layer on the training paragraphs
   (scikit-learn's multinomial `LogisticRegression`, L2, lbfgs) and reports
   its test accuracy: `<run_dir>/language_id.json`, `language_id.md` and the
   plot `language_id.png` (accuracy against layer).

Bad input: label and text files of different lengths name both files; a
language without paragraphs in either split is named.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import atomic, errors, fs
from xtreme_jax.data.classification_source import encode_pair
from xtreme_jax.data.mldoc import sentences
from xtreme_jax.data.vocabularies import load_vocabulary
from xtreme_jax.evaluation import retrieval
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.runs.train import pretrained_loader

# mBERT's 104 pretraining languages (google-research/bert, multilingual.md) as WiLI-2018 labels (ISO 639-3, as
# WiLI names them; our mapping). Chinese (simplified and traditional) is `zho`; Thai and Mongolian are not in
# mBERT's cased list.
MBERT_WILI_LABELS = (
    "afr", "sqi", "ara", "arg", "hye", "ast", "aze", "bak", "eus", "bar", "bel", "ben", "bpy", "bos", "bre", "bul",
    "mya", "cat", "ceb", "che", "zho", "chv", "hrv", "ces", "dan", "nld", "eng", "est", "fin", "fra", "glg", "kat",
    "deu", "ell", "guj", "hat", "heb", "hin", "hun", "isl", "ido", "ind", "gle", "ita", "jpn", "jav", "kan", "kaz",
    "kir", "kor", "lat", "lav", "lit", "lmo", "nds", "ltz", "mkd", "mlg", "msa", "mal", "mar", "min", "nep", "new",
    "nob", "nno", "oci", "fas", "pms", "pol", "por", "pan", "ron", "rus", "sco", "srp", "hbs", "scn", "slk", "slv",
    "azb", "spa", "sun", "swa", "swe", "tgl", "tgk", "tam", "tat", "tel", "tur", "ukr", "urd", "uzb", "vie", "vol",
    "war", "cym", "fry", "pnb", "yor")


def read_wili(data_dir: str, split: str, languages: Optional[Sequence[str]] = None,
              per_language: Optional[int] = None) -> tuple[list[str], list[str]]:
  """(paragraphs, labels) of WiLI's `split` ('train' | 'test'), only `languages`, at most `per_language` each."""
  x, y = os.path.join(data_dir, f"x_{split}.txt"), os.path.join(data_dir, f"y_{split}.txt")
  for path in (x, y):
    if not fs.isfile(path):
      raise errors.MissingInputError(f"WiLI-2018: expected file {path} does not exist; pass the unpacked "
                                     "wili-2018 folder (x_train.txt, y_train.txt, x_test.txt, y_test.txt)")
  texts, labels = fs.read_text(x).splitlines(), fs.read_text(y).splitlines()
  if len(texts) != len(labels):
    raise errors.DataError(f"WiLI-2018: {x} has {len(texts)} lines but {y} has {len(labels)}; line i of one is the "
                           "label of line i of the other")
  wanted, counts, out = (None if languages is None else set(languages)), {}, ([], [])
  for text, label in zip(texts, labels):
    label = label.strip()
    if (wanted is None or label in wanted) and counts.get(label, 0) < (per_language or len(texts)):
      counts[label] = counts.get(label, 0) + 1
      out[0].append(text)
      out[1].append(label)
  return out


@functools.partial(jax.jit, static_argnames=("config",))
def _layer_means(params: Any, batch: dict, *, config: TransformerConfig) -> jax.Array:
  out = TransformerEncoder(config).apply({"params": params}, batch["input_ids"], batch["input_mask"],
                                         batch["token_type_ids"], return_all=True)
  states = jnp.concatenate([out.embeddings[None], out.all_layers])
  return jax.vmap(lambda s: retrieval.pool_states(s, batch["input_mask"], "mean"))(states)


def layer_features(config: TransformerConfig, params: Any, vocab, texts: Sequence[str], seq_len: int,
                   batch_size: int) -> np.ndarray:
  """(layers + 1, texts, hidden): each text's first two sentences, mean-pooled at every layer (module docstring)."""
  keys = ("input_ids", "input_mask", "token_type_ids")
  features = [encode_pair(vocab, sentences(t) or [t], seq_len) for t in texts]
  chunks = []
  for start in range(0, len(features), batch_size):
    part = features[start:start + batch_size]
    part = part + [part[-1]] * (batch_size - len(part))
    chunks.append(np.asarray(_layer_means(params, {k: np.stack([f[k] for f in part]) for k in keys},
                                          config=config)))
  return np.concatenate(chunks, axis=1)[:, :len(features)]


def probe_accuracies(train: np.ndarray, train_labels: Sequence[str], test: np.ndarray,
                     test_labels: Sequence[str], max_iter: int = 1000) -> list[float]:
  """Test accuracy (%) of a multinomial logistic regression trained per layer on `train` (layers, n, hidden)."""
  from sklearn.linear_model import LogisticRegression  # heavy: imported on use
  out = []
  for layer in range(train.shape[0]):
    classifier = LogisticRegression(max_iter=max_iter).fit(train[layer], list(train_labels))
    out.append(100.0 * float(np.mean(classifier.predict(test[layer]) == np.asarray(test_labels))))
  return out


def _plot(accuracies: Sequence[float], path: str) -> None:
  from xtreme_jax.evaluation.report import new_figure, save_png  # pylint: disable=g-import-not-at-top
  figure = new_figure(5, 3.5)
  axes = figure.add_subplot()
  axes.plot(range(len(accuracies)), accuracies, marker="o")
  axes.set_xlabel("layer (0: embeddings)")
  axes.set_ylabel("language-ID accuracy (%)")
  figure.tight_layout()
  save_png(figure, path)


def language_id_probe(run_dir: str, model_config: TransformerConfig, vocabulary: str, data_dir: str,
                      init_checkpoint: Optional[str] = None, languages: Optional[Sequence[str]] = MBERT_WILI_LABELS,
                      per_language: Optional[int] = None, seq_len: int = 128, batch_size: int = 64,
                      seed: int = 0) -> dict:
  """The probe end to end (module docstring); returns {"accuracy": [per layer], "languages", "train", "test"}."""
  train_texts, train_labels = read_wili(data_dir, "train", languages, per_language)
  test_texts, test_labels = read_wili(data_dir, "test", languages, per_language)
  missing = sorted(set(languages or ()) - set(train_labels) | set(languages or ()) - set(test_labels))
  if missing:
    raise errors.DataError(f"WiLI-2018 under {data_dir} has no train or test paragraphs of {' '.join(missing)}; "
                           "drop them from `languages`")
  vocab = load_vocabulary(vocabulary)
  if init_checkpoint:
    shapes = jax.eval_shape(lambda: _fresh(model_config, seed))
    params = pretrained_loader(init_checkpoint, model_config)({"backbone": shapes})["backbone"]
  else:
    params = _fresh(model_config, seed)
  train = layer_features(model_config, params, vocab, train_texts, seq_len, batch_size)
  test = layer_features(model_config, params, vocab, test_texts, seq_len, batch_size)
  result = {"accuracy": probe_accuracies(train, train_labels, test, test_labels),
            "languages": sorted(set(train_labels)), "train": len(train_texts), "test": len(test_texts),
            "pooling": "mean of the layer's subword states", "init_checkpoint": init_checkpoint}
  fs.makedirs(run_dir)
  atomic.write_json(os.path.join(run_dir, "language_id.json"), result)
  rows = "".join(f"| {i} | {a:.1f} |\n" for i, a in enumerate(result["accuracy"]))
  atomic.write_text(os.path.join(run_dir, "language_id.md"),
                    f"Language-ID probe: {len(result['languages'])} WiLI-2018 languages, {result['train']} train / "
                    f"{result['test']} test paragraphs\n\n| layer | accuracy |\n|---:|---:|\n{rows}")
  _plot(result["accuracy"], os.path.join(run_dir, "language_id.png"))
  print(f"language-ID accuracy per layer: {' '.join(f'{a:.1f}' for a in result['accuracy'])}")
  return result


def _fresh(config: TransformerConfig, seed: int) -> Any:
  ids = jnp.zeros((1, 4), jnp.int32)
  return nn.unbox(TransformerEncoder(config).init(jax.random.PRNGKey(seed), ids, ids + 1,
                                                  method=TransformerEncoder.init_all))["params"]
