"""xFNP's n-stream decoder: what each predicting stream may see, and the loss weights per stream."""

import flax.linen as nn
import jax
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors
from xtreme_jax.models.xfnp import XfnpModel
from xtreme_jax.networks.seq2seq import Seq2SeqConfig

TIER = "integration"  # conftest.py: this file's tier

MODEL = XfnpModel(TINY, Seq2SeqConfig(decoder_layers=2), ngram=2, alphas=(1.0, 0.5))
T = 5


@pytest.fixture(scope="module")
def setup():
  batch = {"input_ids": np.array([[5, 4, 4, 4, 9, 2], [5, 4, 4, 8, 2, 0]], np.int32),
           "input_mask": np.array([[1] * 6, [1] * 5 + [0]], np.int32),
           "targets": np.array([[11, 12, 13, 14, 15], [21, 22, 0, 0, 0]], np.int32),
           "target_mask": np.array([[1] * 5, [1, 1, 0, 0, 0]], np.int32),
           "target_positions": np.array([[1, 2, 3, 4, 5], [1, 2, 0, 0, 0]], np.int32),
           "target_offsets": np.array([[0, 1, 2, 0, 1], [0, 1, 0, 0, 0]], np.int32),
           "decoder_inputs": np.array([[5, 11, 12, 13, 14], [5, 21, 0, 0, 0]], np.int32)}
  params = nn.unbox(jax.jit(MODEL.init)(jax.random.PRNGKey(0), batch))
  forward = jax.jit(lambda p, b: MODEL.network(True).apply({"params": p}, b))
  return batch, params, forward


def test_stream_k_sees_the_main_stream_up_to_t_minus_k_plus_1(setup):
  batch, params, forward = setup
  base = np.asarray(forward(params, batch))[0]  # (n, T, vocab)
  for j in range(1, T):  # change one main-stream input: decoder_inputs[j] (the token before target j)
    changed = dict(batch, decoder_inputs=batch["decoder_inputs"].copy())
    changed["decoder_inputs"][0, j] = 30
    out = np.asarray(forward(params, changed))[0]
    for k in (1, 2):
      for t in range(T):
        sees = j <= max(t - k + 1, 0)
        assert np.allclose(out[k - 1, t], base[k - 1, t], atol=1e-6) != sees, (j, k, t)


def test_loss_weights_each_stream_by_its_offsets(setup):
  batch, params, forward = setup
  logits = forward(params, batch)
  total, sums = MODEL.loss_terms(logits, batch)
  logp = np.asarray(jax.nn.log_softmax(logits, -1))
  nll = -np.take_along_axis(logp, np.broadcast_to(batch["targets"][:, None, :, None], logp.shape[:3] + (1,)), -1)[..., 0]
  w1 = batch["target_mask"].astype(np.float32)
  w2 = w1 * (batch["target_offsets"] >= 1)  # stream 2 skips each span's first token
  np.testing.assert_allclose(float(sums["weight"]), 7.0)
  np.testing.assert_allclose(float(sums["stream2_weight"]), 4.0)
  np.testing.assert_allclose(float(sums["stream2_loss"]), np.sum(nll[:, 1] * w2), rtol=1e-5)
  np.testing.assert_allclose(float(total), np.sum(nll[:, 0] * w1) + 0.5 * np.sum(nll[:, 1] * w2), rtol=1e-5)
  with pytest.raises(errors.ConfigError, match="one per stream"):
    XfnpModel(TINY, ngram=2, alphas=(1.0,))
