"""Feature-based transfer (models/feature_based.py): the layer mix, a fixed encoder, BiLSTM heads on tiny shapes."""

import flax.linen as nn
import jax
import numpy as np
import pytest
from conftest import TINY

from xtreme_jax.models import feature_based as fb
from xtreme_jax.models.parser import BiaffineParserModel

TIER = "integration"  # conftest.py: this file's tier

CONFIG = TINY.replace(dropout_rate=0.0, attention_dropout_rate=0.0)


def _batch():
  ids = np.asarray([[2, 11, 12, 13, 3, 0], [2, 21, 3, 0, 0, 0]], np.int32)
  mask = (ids != 0).astype(np.int32)
  return {"input_ids": ids, "input_mask": mask, "token_type_ids": np.zeros_like(ids),
          "labels": np.asarray([1, 0], np.int32), "example_weights": np.ones(2, np.float32)}


def test_scalar_mix_is_gamma_times_the_softmax_weighted_sum():
  layers = np.random.default_rng(0).normal(size=(4, 2, 3, 5)).astype(np.float32)
  params = {"params": {"weights": np.asarray([0.1, -1.0, 2.0, 0.0], np.float32), "gamma": np.float32(1.5)}}
  w = np.exp(params["params"]["weights"]) / np.exp(params["params"]["weights"]).sum()
  np.testing.assert_allclose(fb.ScalarMix().apply(params, layers), 1.5 * np.einsum("l,l...->...", w, layers),
                             rtol=1e-5)


def test_encoder_is_fixed_and_padding_does_not_reach_the_pooled_prediction():
  model = fb.FeatureBasedModel(CONFIG, num_outputs=3, pooled=True, hidden=8)
  batch = _batch()
  params = nn.unbox(model.init(jax.random.PRNGKey(0), batch))
  assert params["scalar_mix"]["weights"].shape == (CONFIG.num_layers + 1,)  # embeddings + every layer
  grads = jax.jit(jax.grad(lambda p: model.loss_fn(p, batch, None, deterministic=True)[0]))(params)
  assert all(float(np.abs(g).max()) == 0 for g in jax.tree_util.tree_leaves(grads["backbone"]))
  assert float(np.abs(grads["scalar_mix"]["weights"]).max()) > 0
  other = {**batch, "input_ids": np.where(batch["input_mask"] == 1, batch["input_ids"], 40)}  # other padding ids
  predict = jax.jit(model.predict_batch)
  np.testing.assert_allclose(predict(params, batch), predict(params, other), rtol=1e-5)


def test_the_bilstm_has_the_papers_768_units_per_direction_by_default():
  model = fb.FeatureBasedModel(CONFIG, num_outputs=3)
  assert model.hidden == fb.PAPER_LSTM_HIDDEN == 768
  shapes = nn.unbox(jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), _batch())))
  assert shapes["classifier"]["kernel"].shape == (2 * 768, 3)  # max-pooled forward and backward states


def test_tagging_predicts_every_position():
  model = fb.FeatureBasedModel(CONFIG, num_outputs=4, pooled=False, hidden=8)
  batch = {**_batch(), "labels": np.asarray([[-100, 1, 2, 3, -100, -100], [-100, 2, -100, -100, -100, -100]]),
           "label_weights": np.asarray([[0, 1, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0]], np.float32)}
  params = nn.unbox(model.init(jax.random.PRNGKey(0), batch))
  logits = model.predict_batch(params, batch)
  assert logits.shape == (2, 6, 4)
  loss, sums = model.loss_terms(logits, batch)
  logp = jax.nn.log_softmax(logits)
  expected = -sum(float(logp[b, t, batch["labels"][b, t]]) for b, t in zip(*np.nonzero(batch["label_weights"])))
  assert float(loss) == pytest.approx(expected, rel=1e-5) and float(sums["weight"]) == 4


def test_feature_based_parser_scores_the_bilstm_states_of_the_fixed_encoder():
  """The paper's feature-based parsing: the biaffine scorers read first-subword BiLSTM states (the mix of the
  fixed encoder's layers, `mixed_lstm_states` as in the test above)."""
  model = BiaffineParserModel(CONFIG, num_rels=4, arc_dim=8, rel_dim=4, lstm_hidden=6)
  batch = {**_batch(), "word_starts": np.asarray([[1, 2, 3], [1, 0, 0]], np.int32),
           "word_mask": np.asarray([[1, 1, 1], [1, 0, 0]], np.int32),
           "heads": np.asarray([[2, 0, 2], [0, 0, 0]], np.int32), "rels": np.asarray([[1, 0, 2], [3, 0, 0]], np.int32)}
  params = nn.unbox(model.init(jax.random.PRNGKey(0), batch))
  assert params["arc_dep"]["kernel"].shape == (12, 8)  # 2 x 6 BiLSTM units, not the encoder's width
  assert set(params) == {"backbone", "scalar_mix", "bilstm_0_forward", "bilstm_0_backward", "bilstm_1_forward",
                         "bilstm_1_backward", "arc_dep", "arc_head", "rel_dep", "rel_head", "arc_bilinear",
                         "arc_head_bias", "rel_bilinear", "rel_dep_linear", "rel_head_linear", "rel_bias"}
  out = model.predict_batch(params, batch)  # the fixed encoder under stop_gradient: the test above
  assert out["arcs"].shape == (2, 4, 4) and out["rel_ids"].shape == (2, 4, 4)
