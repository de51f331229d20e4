"""The biaffine parser (models/parser.py): scores against a NumPy computation, losses by hand, MST decoding,
the gold-POS setting, and that it fits a toy treebank."""

import flax.linen as nn
import jax
import numpy as np
import optax
import pytest
from conftest import TINY

from xtreme_jax import trees
from xtreme_jax.models import parser
from xtreme_jax.networks.encoder import TransformerEncoder

TIER = "integration"  # conftest.py: this file's tier

CONFIG = TINY.replace(dropout_rate=0.0, attention_dropout_rate=0.0)


def _batch():
  # two sentences: 3 words over 5 subwords, 2 words over 3 subwords; 4 word slots
  ids = np.asarray([[2, 11, 12, 13, 14, 15, 3, 0], [2, 21, 22, 23, 3, 0, 0, 0]], np.int32)
  mask = (ids != 0).astype(np.int32)
  return {"input_ids": ids, "input_mask": mask, "token_type_ids": np.zeros_like(ids),
          "word_starts": np.asarray([[1, 3, 4, 0], [1, 3, 0, 0]], np.int32),
          "word_mask": np.asarray([[1, 1, 1, 0], [1, 1, 0, 0]], np.int32),
          "heads": np.asarray([[2, 0, 2, 0], [0, 1, 0, 0]], np.int32),
          "rels": np.asarray([[1, 0, 2, 0], [0, 3, 0, 0]], np.int32),
          "upos": np.asarray([[4, 1, 2, 0], [1, 3, 0, 0]], np.int32)}


def _random_params(model, batch, seed=0):
  params = nn.unbox(model.init(jax.random.PRNGKey(seed), batch))
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed + 1), len(leaves))
  return jax.tree_util.tree_unflatten(tree, [leaf + 0.1 * jax.random.normal(k, leaf.shape)
                                             for leaf, k in zip(leaves, keys)])


def _leaky(x):
  return np.where(x > 0, x, 0.1 * x)


def test_scores_are_the_biaffine_of_first_subword_states_with_cls_as_root():
  model = parser.BiaffineParserModel(CONFIG, num_rels=4, arc_dim=6, rel_dim=5)
  batch = _batch()
  params = _random_params(model, batch)
  out = jax.jit(lambda p, b: model.network(True).apply({"params": p}, b))(params, batch)
  seq = np.asarray(jax.jit(lambda p, b: TransformerEncoder(CONFIG).apply(
      {"params": p}, b["input_ids"], b["input_mask"], b["token_type_ids"]).sequence)(params["backbone"], batch))
  p = jax.tree_util.tree_map(np.asarray, params)
  for b in range(2):
    states = np.concatenate([seq[b, :1], seq[b, batch["word_starts"][b]]])
    mlp = {k: _leaky(states @ p[k]["kernel"] + p[k]["bias"]) for k in ("arc_dep", "arc_head", "rel_dep", "rel_head")}
    arcs = mlp["arc_dep"] @ p["arc_bilinear"] @ mlp["arc_head"].T + (mlp["arc_head"] @ p["arc_head_bias"])[None]
    np.testing.assert_allclose(np.asarray(out["arcs"][b]), arcs, rtol=1e-4, atol=1e-4)
    d, h = 2, 3  # one (dependent, head) pair of relation scores
    rel = (np.einsum("i,rij,j->r", mlp["rel_dep"][d], p["rel_bilinear"], mlp["rel_head"][h])
           + mlp["rel_dep"][d] @ p["rel_dep_linear"] + mlp["rel_head"][h] @ p["rel_head_linear"] + p["rel_bias"])
    np.testing.assert_allclose(np.asarray(out["rels"][b, d, h]), rel, rtol=1e-4, atol=1e-4)
  predicted = jax.jit(model.predict_batch)(params, batch)
  np.testing.assert_array_equal(predicted["rel_ids"], np.asarray(out["rels"]).argmax(-1))


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_loss_is_head_and_relation_cross_entropy_over_the_sentences_words():
  model = parser.BiaffineParserModel(CONFIG, num_rels=4, arc_dim=6, rel_dim=5)
  batch = _batch()
  params = _random_params(model, batch)
  out = jax.tree_util.tree_map(np.asarray, model.network(True).apply({"params": params}, batch))
  loss, sums = model.loss_terms(out, batch)
  expected = 0.0
  for b in range(2):
    n = int(batch["word_mask"][b].sum())
    for w in range(n):
      arc_logp = _log_softmax(out["arcs"][b, w + 1, :n + 1])  # heads: the root and the sentence's n words
      head, rel = batch["heads"][b, w], batch["rels"][b, w]
      expected -= arc_logp[head] + _log_softmax(out["rels"][b, w + 1, head])[rel]
  assert float(loss) == pytest.approx(expected, rel=1e-5) and float(sums["weight"]) == 5


def test_words_whose_head_was_truncated_away_leave_the_loss_but_stay_possible_heads():
  """A truncated training sentence (data/features/parsing_features.py) marks a word whose head was cut off with head -1:
  no head or relation loss for it, its state still a head for the other words."""
  model = parser.BiaffineParserModel(CONFIG, num_rels=4, arc_dim=6, rel_dim=5)
  batch = _batch()
  cut = {**batch, "heads": batch["heads"].copy()}
  cut["heads"][0, 2] = -1  # sentence 0, word 3
  params = _random_params(model, batch)
  out = jax.tree_util.tree_map(np.asarray, model.network(True).apply({"params": params}, batch))
  loss, sums = model.loss_terms(out, batch)
  cut_loss, cut_sums = model.loss_terms(out, cut)
  arc_logp = _log_softmax(out["arcs"][0, 3, :4])
  word3 = arc_logp[2] + _log_softmax(out["rels"][0, 3, 2])[2]
  assert float(cut_loss) == pytest.approx(float(loss) + word3, rel=1e-5)
  assert float(cut_sums["weight"]) == 4 and float(sums["weight"]) == 5


def test_decode_takes_the_single_root_tree_and_each_words_relation_at_its_head():
  arcs = np.full((5, 5), -3.0)  # [dependent, head]; 4 words
  arcs[1, 0], arcs[2, 0], arcs[3, 2], arcs[4, 3] = 5.0, 4.9, 2.0, 2.0  # two words want the root
  arcs[2, 1] = 4.0
  rels = np.zeros((5, 5, 3))
  rels[1, 0, 2] = rels[2, 1, 1] = rels[3, 2, 0] = rels[4, 3, 1] = 1.0
  heads, labels = parser.decode(arcs, rels.argmax(-1), 4)
  assert heads == [0, 1, 2, 3] and labels == [2, 1, 0, 1]
  assert list(trees.mst_heads(arcs.T)[1:]) == heads


def test_gold_pos_is_embedded_and_changes_the_scores():
  model = parser.BiaffineParserModel(CONFIG, num_rels=4, num_upos=17, arc_dim=6, rel_dim=5)
  batch = _batch()
  params = _random_params(model, batch)
  assert params["upos_embedding"]["embedding"].shape == (18, 50)  # 17 tags and the root's
  other = {**batch, "upos": (batch["upos"] + 5) % 17}
  assert not np.allclose(model.predict_batch(params, batch)["arcs"], model.predict_batch(params, other)["arcs"])


def test_the_parser_fits_a_toy_treebank():
  model = parser.BiaffineParserModel(CONFIG, num_rels=4, arc_dim=16, rel_dim=8)
  batch = _batch()
  params = nn.unbox(model.init(jax.random.PRNGKey(0), batch))
  opt = optax.adam(3e-3)
  state = opt.init(params)

  @jax.jit
  def step(params, state):
    (loss, sums), grads = jax.value_and_grad(
        lambda p: model.loss_fn(p, batch, None, deterministic=True), has_aux=True)(params)
    updates, state = opt.update(grads, state)
    return optax.apply_updates(params, updates), state, sums

  for _ in range(60):
    params, state, sums = step(params, state)
  assert float(sums["uas"]) == float(sums["las"]) == float(sums["weight"]) == 5
