"""Language-identification probe (Wu & Dredze 2019, Fig. 2): how much language identity each layer keeps.

`language_id_probe` (Gin `runs/language_id.gin`):

1. reads WiLI-2018 (`x_{train,test}.txt`: one paragraph per line, `y_*.txt`:
   its language label on the same line) under `data_dir`, keeping the
   paragraphs of `languages` (default `MBERT_WILI_LABELS`: the languages of
   mBERT's pretraining data as WiLI labels) and, with `per_language`, the
   first that many of each;
2. encodes the first two sentences of each paragraph (`data/readers/mldoc.sentences`,
   fed as a pair) with the fixed encoder and represents the text at every
   layer (the embeddings and each Transformer layer) as a bag of words: the
   mean of that layer's subword states over the text (`[CLS]` / `[SEP]`
   included, as retrieval's mean pooling);
3. holds out the last `dev_fraction` of each language's training paragraphs
   as the dev set (WiLI has none; our split) and trains a linear softmax
   classifier per layer on the rest as the paper trains its feature-based
   models (`ProbeSettings`: Adam, batch 32, learning rate 1e-3 halved after
   an epoch without a new best dev accuracy, stopping below 1e-5; the best
   dev epoch's parameters kept), then reports its test accuracy (and the
   selected probe's accuracy on its training paragraphs, which shows that it
   fit them): `<run_dir>/language_id.json`, `language_id.md` and the plot
   `language_id.png` (accuracy against layer).

Bad input: label and text files of different lengths name both files; a
language without paragraphs in either split, or with one training
paragraph (none for the dev set), is named.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from xtreme_jax import atomic, errors, fs
from xtreme_jax.data.features.classification_source import encode_pair
from xtreme_jax.data.readers.mldoc import sentences
from xtreme_jax.data.vocab.vocabularies import load_vocabulary
from xtreme_jax.evaluation import retrieval
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.runs.train import pretrained_loader
from xtreme_jax.training import validation as v
from xtreme_jax.training.stopping import PlateauSchedule, PlateauState

# mBERT's 104 pretraining languages (google-research/bert, multilingual.md: the 102 listed, and Thai and Mongolian,
# which the cased model adds) as WiLI-2018 labels (ISO 639-3 as WiLI spells them). Both Chinese are WiLI's `zho`.
MBERT_WILI_NAMES = {
    "Afrikaans": "afr", "Albanian": "sqi", "Arabic": "ara", "Aragonese": "arg", "Armenian": "hye", "Asturian": "ast",
    "Azerbaijani": "aze", "Bashkir": "bak", "Basque": "eus", "Bavarian": "bar", "Belarusian": "bel", "Bengali": "ben",
    "Bishnupriya Manipuri": "bpy", "Bosnian": "bos", "Breton": "bre", "Bulgarian": "bul", "Burmese": "mya",
    "Catalan": "cat", "Cebuano": "ceb", "Chechen": "che", "Chinese (Simplified)": "zho",
    "Chinese (Traditional)": "zho", "Chuvash": "chv", "Croatian": "hrv", "Czech": "ces", "Danish": "dan",
    "Dutch": "nld", "English": "eng", "Estonian": "est", "Finnish": "fin", "French": "fra", "Galician": "glg",
    "Georgian": "kat", "German": "deu", "Greek": "ell", "Gujarati": "guj", "Haitian": "hat", "Hebrew": "heb",
    "Hindi": "hin", "Hungarian": "hun", "Icelandic": "isl", "Ido": "ido", "Indonesian": "ind", "Irish": "gle",
    "Italian": "ita", "Japanese": "jpn", "Javanese": "jav", "Kannada": "kan", "Kazakh": "kaz", "Kirghiz": "kir",
    "Korean": "kor", "Latin": "lat", "Latvian": "lav", "Lithuanian": "lit", "Lombard": "lmo", "Low Saxon": "nds",
    "Luxembourgish": "ltz", "Macedonian": "mkd", "Malagasy": "mlg", "Malay": "msa", "Malayalam": "mal",
    "Marathi": "mar", "Minangkabau": "min", "Nepali": "nep", "Newar": "new", "Norwegian (Bokmal)": "nob",
    "Norwegian (Nynorsk)": "nno", "Occitan": "oci", "Persian (Farsi)": "fas", "Piedmontese": "pms", "Polish": "pol",
    "Portuguese": "por", "Punjabi": "pan", "Romanian": "ron", "Russian": "rus", "Scots": "sco", "Serbian": "srp",
    "Serbo-Croatian": "hbs", "Sicilian": "scn", "Slovak": "slk", "Slovenian": "slv", "South Azerbaijani": "azb",
    "Spanish": "spa", "Sundanese": "sun", "Swahili": "swa", "Swedish": "swe", "Tagalog": "tgl", "Tajik": "tgk",
    "Tamil": "tam", "Tatar": "tat", "Telugu": "tel", "Turkish": "tur", "Ukrainian": "ukr", "Urdu": "urd",
    "Uzbek": "uzb", "Vietnamese": "vie", "Volapük": "vol", "Waray-Waray": "war", "Welsh": "cym",
    "West Frisian": "fry", "Western Punjabi": "pnb", "Yoruba": "yor", "Thai": "tha", "Mongolian": "mon"}
# The four the paper leaves out as not in WiLI (its footnote 5: Hungarian, Norwegian Bokmal, Piedmontese, Western
# Punjabi; of them only pms lacks a WiLI-2018 label, but the paper's probe, and the authors' list, have none of them).
NOT_IN_WILI = ("hun", "nob", "pms", "pnb")
# The paper's 99 probe languages: 103 WiLI labels less those four (= the authors' LANDID_LABEL).
MBERT_WILI_LABELS = tuple(sorted(set(MBERT_WILI_NAMES.values()) - set(NOT_IN_WILI)))


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


@dataclasses.dataclass(frozen=True)
class ProbeSettings:
  """How each layer's probe trains: the paper's feature-based recipe (`runs/feature_based.gin`).

  Adam (0.9, 0.999) at `learning_rate` on batches of `batch_size` training
  paragraphs, reshuffled every epoch (`seed`); after each epoch the dev
  accuracy, the best epoch's parameters kept (the selection of the paper's
  English dev, on the probe's one dev set), the rate scaled by `plateau`
  (halved after an epoch without a new best, stopping once below 1e-5); at
  most `epochs` epochs (our cap). `dev_fraction`: the share of each
  language's training paragraphs held out as the dev set (at least one).
  """

  learning_rate: float = 1e-3
  batch_size: int = 32
  epochs: int = 30
  plateau: PlateauSchedule = PlateauSchedule()
  dev_fraction: float = 0.1
  seed: int = 0

  def __post_init__(self):
    v.require(self, "learning_rate", v.positive, "a number > 0")
    v.require(self, "batch_size", v.positive_int, "a positive integer")
    v.require(self, "epochs", v.positive_int, "a positive integer")
    v.require(self, "plateau", lambda p: isinstance(p, PlateauSchedule), "a PlateauSchedule")
    v.require(self, "dev_fraction", lambda x: v.is_number(x) and 0 < x < 1, "a number in (0, 1)")
    v.require(self, "seed", v.is_int, "an integer")


@dataclasses.dataclass(frozen=True)
class ProbeFit:
  """A trained probe: `params` {"kernel": (hidden, classes), "bias"} of the best dev epoch (`best_epoch`, its dev
  accuracy in %), the epochs run and the learning rate at the end."""

  params: Any
  dev_accuracy: float
  epochs: int
  best_epoch: int
  learning_rate: float


def split_dev(texts: Sequence[str], labels: Sequence[str],
              fraction: float) -> tuple[tuple[list[str], list[str]], tuple[list[str], list[str]]]:
  """((train texts, labels), (dev texts, labels)): the last `fraction` (at least one) of each language's
  paragraphs go to dev, in their order."""
  counts: dict[str, int] = {}
  for label in labels:
    counts[label] = counts.get(label, 0) + 1
  few = sorted(lg for lg, n in counts.items() if n < 2)
  if few:
    raise errors.DataError(f"WiLI-2018: {counts[few[0]]} training paragraph of {few[0]}; the probe needs at least "
                           "2 of each language (training and dev paragraphs)")
  keep = {lg: n - max(1, round(fraction * n)) for lg, n in counts.items()}
  seen: dict[str, int] = {}
  train: tuple[list[str], list[str]] = ([], [])
  dev: tuple[list[str], list[str]] = ([], [])
  for text, label in zip(texts, labels):
    seen[label] = seen.get(label, 0) + 1
    part = train if seen[label] <= keep[label] else dev
    part[0].append(text)
    part[1].append(label)
  return train, dev


_ADAM = optax.scale_by_adam()  # beta1 0.9, beta2 0.999, eps 1e-8; the learning rate is applied in `_epoch`


@jax.jit
def _epoch(params: Any, opt_state: Any, x: jax.Array, y: jax.Array, order: jax.Array,
           learning_rate: jax.Array) -> tuple[Any, Any]:
  """One pass over `order` (steps, batch) of example indices, -1 padding the last batch: mean cross-entropy of
  each batch's examples, one Adam step each."""

  def step(carry, idx):
    params, opt_state = carry
    weight = (idx >= 0).astype(jnp.float32)
    xb, yb = x[jnp.maximum(idx, 0)], y[jnp.maximum(idx, 0)]

    def loss(p):
      logp = jax.nn.log_softmax(xb @ p["kernel"] + p["bias"])
      return -jnp.sum(jnp.take_along_axis(logp, yb[:, None], axis=-1)[:, 0] * weight) / jnp.sum(weight)

    updates, opt_state = _ADAM.update(jax.grad(loss)(params), opt_state)
    return (jax.tree_util.tree_map(lambda p, u: p - learning_rate * u, params, updates), opt_state), None

  return jax.lax.scan(step, (params, opt_state), order)[0]


@jax.jit
def _predict(params: Any, x: jax.Array) -> jax.Array:
  return jnp.argmax(x @ params["kernel"] + params["bias"], axis=-1)


def _ids(labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
  index = {c: i for i, c in enumerate(classes)}
  return np.asarray([index.get(label, -1) for label in labels], np.int32)  # -1: a class the probe does not have


def accuracy(params: Any, x: np.ndarray, labels: Sequence[str], classes: Sequence[str]) -> float:
  """% of `x` (n, hidden) whose predicted class (of `classes`) is its label."""
  predicted = np.asarray(_predict(params, jnp.asarray(x, jnp.float32)))
  return 100.0 * float(np.mean(predicted == _ids(labels, classes)))


def fit_probe(x: np.ndarray, labels: Sequence[str], dev_x: np.ndarray, dev_labels: Sequence[str],
              classes: Sequence[str], settings: ProbeSettings = ProbeSettings()) -> ProbeFit:
  """A linear softmax classifier over `classes` on `x` (n, hidden), trained and selected as `settings` say."""
  n, plateau = len(labels), settings.plateau
  x, y = jnp.asarray(x, jnp.float32), jnp.asarray(_ids(labels, classes))
  steps = -(-n // settings.batch_size)
  params = {"kernel": jnp.zeros((x.shape[1], len(classes)), jnp.float32),
            "bias": jnp.zeros((len(classes),), jnp.float32)}
  opt_state, rng = _ADAM.init(params), np.random.default_rng(settings.seed)
  best, best_params, best_epoch, epoch, state = -1.0, params, 0, 0, PlateauState()
  while epoch < settings.epochs and not state.stopped:
    epoch += 1
    order = np.full(steps * settings.batch_size, -1, np.int32)
    order[:n] = rng.permutation(n)
    params, opt_state = _epoch(params, opt_state, x, y, order.reshape(steps, settings.batch_size),
                               jnp.float32(settings.learning_rate * state.scale))
    score = accuracy(params, dev_x, dev_labels, classes)
    improved = score > best
    if improved:
      best, best_params, best_epoch = score, params, epoch
    state.after_evaluation(plateau, improved, settings.learning_rate)
  return ProbeFit(best_params, best, epoch, best_epoch, settings.learning_rate * state.scale)


def probe_accuracies(train: np.ndarray, train_labels: Sequence[str], dev: np.ndarray, dev_labels: Sequence[str],
                     test: np.ndarray, test_labels: Sequence[str],
                     settings: ProbeSettings = ProbeSettings()) -> dict[str, list]:
  """{"test", "dev", "train": accuracy (%) per layer, "epochs": run per layer} of a probe trained per layer of
  `train` (layers, n, hidden) over the training labels (`fit_probe`)."""
  classes = sorted(set(train_labels))
  out: dict[str, list] = {"test": [], "dev": [], "train": [], "epochs": []}
  for layer in range(train.shape[0]):
    fit = fit_probe(train[layer], train_labels, dev[layer], dev_labels, classes, settings)
    out["test"].append(accuracy(fit.params, test[layer], test_labels, classes))
    out["train"].append(accuracy(fit.params, train[layer], train_labels, classes))
    out["dev"].append(fit.dev_accuracy)
    out["epochs"].append(fit.epochs)
  return out


def _plot(accuracies: Sequence[float], path: str) -> None:
  from xtreme_jax.evaluation.plots import new_figure, save_png  # pylint: disable=g-import-not-at-top
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
                      seed: int = 0, probe: ProbeSettings = ProbeSettings()) -> dict:
  """The probe end to end (module docstring); returns {"accuracy": [test, per layer], "dev_accuracy",
  "train_accuracy", "epochs", "languages", "train", "dev", "test", ...}. `batch_size`: of the encoder's feature pass; the probe's is
  `probe.batch_size`."""
  errors.require(not model_config.num_languages, f"the language-ID probe reads a plain encoder, but the model has "
                 f"language embeddings (num_languages={model_config.num_languages}), which would tell it the "
                 "language; fold one language in (xtreme-jax export-encoder RUN_DIR OUT LANGUAGE_ID)")
  train_texts, train_labels = read_wili(data_dir, "train", languages, per_language)
  test_texts, test_labels = read_wili(data_dir, "test", languages, per_language)
  missing = sorted(set(languages or ()) - set(train_labels) | set(languages or ()) - set(test_labels))
  if missing:
    raise errors.DataError(f"WiLI-2018 under {data_dir} has no train or test paragraphs of {' '.join(missing)}; "
                           "drop them from `languages`")
  (train_texts, train_labels), (dev_texts, dev_labels) = split_dev(train_texts, train_labels, probe.dev_fraction)
  vocab = load_vocabulary(vocabulary)
  if init_checkpoint:
    shapes = jax.eval_shape(lambda: _fresh(model_config, seed))
    params = pretrained_loader(init_checkpoint, model_config)({"backbone": shapes})["backbone"]
  else:
    params = _fresh(model_config, seed)
  train, dev, test = (layer_features(model_config, params, vocab, texts, seq_len, batch_size)
                      for texts in (train_texts, dev_texts, test_texts))
  scores = probe_accuracies(train, train_labels, dev, dev_labels, test, test_labels, probe)
  result = {"accuracy": scores["test"], "dev_accuracy": scores["dev"], "train_accuracy": scores["train"],
            "epochs": scores["epochs"], "languages": sorted(set(train_labels)), "train": len(train_texts),
            "dev": len(dev_texts), "test": len(test_texts), "pooling": "mean of the layer's subword states",
            "probe": dataclasses.asdict(probe), "init_checkpoint": init_checkpoint}
  fs.makedirs(run_dir)
  atomic.write_json(os.path.join(run_dir, "language_id.json"), result)
  rows = "".join(f"| {i} | {t:.1f} | {d:.1f} | {a:.1f} |\n" for i, (t, d, a) in
                 enumerate(zip(result["train_accuracy"], result["dev_accuracy"], result["accuracy"])))
  atomic.write_text(os.path.join(run_dir, "language_id.md"),
                    f"Language-ID probe: {len(result['languages'])} WiLI-2018 languages, {result['train']} train / "
                    f"{result['dev']} dev / {result['test']} test paragraphs\n\n| layer | training accuracy | "
                    f"dev accuracy | accuracy |\n|---:|---:|---:|---:|\n{rows}")
  _plot(result["accuracy"], os.path.join(run_dir, "language_id.png"))
  print(f"language-ID accuracy per layer: {' '.join(f'{a:.1f}' for a in result['accuracy'])} (training "
        f"paragraphs: {' '.join(f'{a:.1f}' for a in result['train_accuracy'])})")
  return result


def _fresh(config: TransformerConfig, seed: int) -> Any:
  ids = jnp.zeros((1, 4), jnp.int32)
  return nn.unbox(TransformerEncoder(config).init(jax.random.PRNGKey(seed), ids, ids + 1,
                                                  method=TransformerEncoder.init_all))["params"]
