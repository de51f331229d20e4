"""The retrieval tasks of a benchmark run (`TaskSpec.retrieval`: XTREME's BUCC and Tatoeba, the lab's
retrieval): sentence embeddings of the pretrained encoder (no fine-tuning), each language's against the task's
pivot language's, mined (bitext mining: BUCC, threshold tuned on dev) or searched (similarity search), written
as the submission's prediction files."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import errors
from xtreme_jax.data.features.classification_source import encode_pair
from xtreme_jax.evaluation import metrics, retrieval
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder, batch_inputs
from xtreme_jax.runs import bookkeeping, language_ids
from xtreme_jax.runs.recipes import official_layer
from xtreme_jax.runs.train import describe, pretrained_loader

if TYPE_CHECKING:
  from xtreme_jax.runs.xtreme import XtremeRunner


class SentenceRetrieval:
  """The retrieval tasks of run `run` (the runner), with its `RetrievalSettings` (pooling, layer, max length)."""

  def __init__(self, run: XtremeRunner):
    self.run = run

  @functools.cached_property
  def encoder_params(self):
    """The pretrained encoder's parameters (INIT_CHECKPOINT), else a random one's (seeded)."""
    if self.run.init_checkpoint:
      loader = pretrained_loader(self.run.init_checkpoint, self.run.config)  # checks the shapes, converts the layout
      return loader({"backbone": jax.eval_shape(lambda: self._fresh_encoder())})["backbone"]
    logging.info("no INIT_CHECKPOINT: retrieval uses a randomly initialised encoder")
    return self._fresh_encoder()

  def _fresh_encoder(self):
    ids = jnp.zeros((1, 4), jnp.int32)
    init = lambda rng: nn.unbox(TransformerEncoder(self.run.config).init(  # noqa: E731  (jitted: faster than eager)
        rng, ids, ids + 1, method=TransformerEncoder.init_all))["params"]
    return jax.jit(init)(jax.random.PRNGKey(self.run.settings.seed))

  def maker(self, task: str) -> dict:
    """What makes `task`'s predictions (`Predictions.made_by`): the encoder and the retrieval settings."""
    s = self.run
    source = bookkeeping.stamp(s.init_checkpoint) if s.init_checkpoint else {"random_init_seed": s.settings.seed}
    encoder = {"config": describe(s.config), "vocabulary": s.vocabulary, "init_checkpoint": source}
    return {"encoder": encoder, "retrieval": {**describe(s.settings.retrieval(task)), "layer": self.layer(task)}}

  def layer(self, task: str) -> int:
    """The hidden layer `task` embeds with: its `RetrievalSettings.layer`, else `official_layer`."""
    layer = self.run.settings.retrieval(task).layer
    return official_layer(task, self.run.config.num_layers) if layer is None else layer

  def embed(self, sentences: Sequence[str], task: str, language: str) -> np.ndarray:
    """Sentence embeddings of `task`'s `RetrievalSettings` (pooling, layer, max length) of `language`'s
    `sentences` (their language ids for a model with named languages)."""
    rs = self.run.settings.retrieval(task)
    examples = language_ids.with_language_id([{"text": s} for s in sentences], language, self.run.config,
                                           f"{task} {language}")
    feats = [encode_pair(self.run.vocab, [ex["text"]], rs.seq_len) for ex in examples]
    language_ids.add_language_ids(feats, range(len(feats)), examples)
    return sentence_embeddings(self.run.config, self.encoder_params, feats, self.layer(task), rs.batch_size,
                               rs.pool)

  def run_task(self, task: str, languages: Sequence[str]) -> None:
    """Mines / searches `task` for `languages`; prediction files that are up to date are kept."""
    predictions = self.run.predictions
    records = predictions.records(self.run.submission)
    todo = [lg for lg in languages
            if not records.up_to_date(predictions.path(task, lg), predictions.made_by(task, lg, "test"))]
    if len(todo) < len(languages):
      bookkeeping.say(f"{task}: {len(languages) - len(todo)} of {len(languages)} predictions up to date, kept")
    if not todo:
      return
    bar = bookkeeping.progress(todo, f"retrieval {task}")
    for lg in bar:
      bar.set_postfix_str(lg, refresh=False)
      self.run_language(task, lg)

  def run_language(self, task: str, language: str) -> str:
    """Searches (similarity search: Tatoeba, the lab's retrieval) or mines (BUCC) `language`'s sentences
    against their translations in the task's pivot language; the prediction file's path."""
    spec = self.run.spec(task)
    errors.require(spec.retrieval, f"{task} is not a retrieval task (kind {spec.kind!r})")
    if spec.kind == "similarity_search":
      data = self.run.read(task, language, "test")
      src, tgt = self.embed(data["source"], task, language), self.embed(data["target"], task, spec.pivot)
      nearest = retrieval.tatoeba_predict(src, tgt)
      return self.run.predictions.write(task, language, "test", "".join(f"{int(i)}\n" for i in nearest))
    threshold = None
    if self.run.available(task, language, "dev"):
      dev = self.run.read(task, language, "dev")
      threshold = metrics.bucc_best_threshold(self._mine(dev, task, language), dev["gold"])
    test = self.run.read(task, language, "test")
    candidates = self._mine(test, task, language)
    pairs = metrics.apply_threshold(candidates, threshold) if threshold is not None else list(candidates)
    return self.run.predictions.write(task, language, "test", "".join(f"{s}\t{t}\n" for s, t in pairs))

  def _mine(self, data: dict, task: str, language: str) -> dict:
    """{(src_id, tgt_id): margin score} of the mined candidate pairs of `language` and the pivot language."""
    src_ids, src = zip(*data["source"])
    tgt_ids, tgt = zip(*data["target"])
    # duplicates="drop": sentences occurring twice are left out, as the official BUCC evaluation does.
    pivot = self.run.spec(task).pivot
    mined = retrieval.mine_bucc(self.embed(src, task, language), self.embed(tgt, task, pivot), src_ids, tgt_ids,
                                src, tgt, duplicates="drop")
    return {(s, t): score for s, t, score in mined}

  def summary(self, tasks: Iterable[str]) -> dict:
    """{task: {"layer", "pooling", "max_len"}} of the retrieval tasks among `tasks` (the keys the report reads)."""
    return {t: {"layer": self.layer(t), "pooling": self.run.settings.retrieval(t).pool,
                "max_len": self.run.settings.retrieval(t).seq_len} for t in tasks if self.run.spec(t).retrieval}


@functools.partial(jax.jit, static_argnames=("config", "layer", "pool"))
def _pooled(params: Any, batch: dict, *, config: TransformerConfig, layer: int, pool: str) -> jax.Array:
  out = TransformerEncoder(config).apply({"params": params}, **batch_inputs(batch), return_all=True)
  states = out.embeddings if layer == 0 else out.all_layers[layer - 1]
  return retrieval.pool_states(states, batch["input_mask"], pool)


def sentence_embeddings(config: TransformerConfig, params: Any, features: list[dict], layer: int,
                        batch_size: int, pool: str = "mean") -> np.ndarray:
  """`pool` (`retrieval.pool_states`: 'cls' | 'mean') of the hidden states after `layer` (0 = embedding output)."""
  errors.require(0 <= layer <= config.num_layers, f"retrieval layer {layer}; expected 0..{config.num_layers}")
  keys = language_ids.fed_keys(("input_ids", "input_mask", "token_type_ids"), features)
  starts = range(0, len(features), batch_size)
  chunks = []
  for start in bookkeeping.progress(starts, "embed", unit="batch", leave=False, min_items=50):
    part = features[start:start + batch_size]
    part = part + [part[-1]] * (batch_size - len(part))
    batch = {k: np.stack([f[k] for f in part]) for k in keys}
    chunks.append(np.asarray(_pooled(params, batch, config=config, layer=layer, pool=pool)))
  return np.concatenate(chunks)[: len(features)]
