"""xFNP's n-stream decoder: what each predicting stream may see, and the loss weights per stream."""

import flax.linen as nn
import jax
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors
from xtreme_jax.models.xfnp import XfnpModel
from xtreme_jax.networks.seq2seq import Seq2SeqConfig, Seq2SeqNetwork

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


def _decoder_input(model, params, batch):
  """The (batch, (1 + n) T, embed) input of the decoder stack: [main, stream 1, ..., stream n]."""
  from xtreme_jax.networks.veco import VecoStack
  seen = []

  def grab(next_fun, args, kwargs, context):
    if isinstance(context.module, VecoStack) and context.method_name == "__call__":
      seen.append(args[0])
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(grab):
    model.network(True).apply({"params": params}, batch)
  return np.asarray(seen[0])


def _layer_norm(x, ln, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * ln["scale"] + ln["bias"]


def _by_hand(params):
  """Embedding LayerNorm of word + position + token type (+ stream vector) from the tiny model's tables."""
  emb = params["backbone"]["embeddings"]
  words, table = emb["word_embeddings"]["embedding"], emb["position_embeddings"]["embedding"]
  types = emb["token_type_embeddings"]["embedding"][0]
  return lambda word, position, extra=0.0: _layer_norm(  # noqa: E731
      (0.0 if word is None else words[word]) + table[position] + types + extra, emb["layer_norm"], TINY.layer_norm_eps)


def test_main_stream_embeds_each_previous_token_at_its_own_position(setup):
  """ProphetNet's pretraining: `decoder_inputs` (the token before each target) at its position in the input,
  target_positions - 1 (0 for a target at position 0: the BOS before the text)."""
  batch, params, _ = setup
  got, embed = _decoder_input(MODEL, params, batch), _by_hand(params)
  for b in range(2):
    for t in range(T):
      p = batch["target_positions"][b, t]
      np.testing.assert_allclose(got[b, t], embed(batch["decoder_inputs"][b, t], max(p - 1, 0)), atol=1e-5,
                                 err_msg=f"main stream, row {b}, slot {t}")


def test_predicting_streams_one_position_after_with_the_stream_vector_before_the_layer_norm(setup):
  """ProphetNet: stream k at the main stream's position + 1 (the target's own), LayerNorm(position + stream
  vector k), no word embedding."""
  batch, params, _ = setup
  got, embed = _decoder_input(MODEL, params, batch), _by_hand(params)
  for b in range(2):
    for t in range(T):
      p = batch["target_positions"][b, t]
      for k in range(MODEL.ngram):
        want = embed(None, p, params["stream_embeddings"][k])
        np.testing.assert_allclose(got[b, (k + 1) * T + t], want, atol=1e-5,
                                   err_msg=f"stream {k + 1}, row {b}, slot {t}")


def test_stream_inputs_match_huggingface_prophetnet():
  """The stream inputs of a tiny random HF ProphetNet decoder (after `embeddings_layer_norm`) from the same
  tables: HF's main stream at rows pad + 1 + i (its fine-tuning positions; ours at target_positions - 1 = i,
  RoBERTa-style rows), its predicting streams at + 1 (ours at target_positions = i + 1), neither taking a word
  embedding."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  n, length, hidden = 2, 4, TINY.hidden_size
  hf_config = transformers.ProphetNetConfig(
      vocab_size=TINY.vocab_size, hidden_size=hidden, encoder_ffn_dim=64, decoder_ffn_dim=64,
      num_encoder_layers=1, num_decoder_layers=1, num_encoder_attention_heads=4, num_decoder_attention_heads=4,
      max_position_embeddings=TINY.max_positions, ngram=n, pad_token_id=0, dropout=0.0, attention_dropout=0.0,
      activation_dropout=0.0)
  torch.manual_seed(0)
  hf = transformers.ProphetNetForConditionalGeneration(hf_config).eval()
  decoder = hf.prophetnet.decoder
  ids = np.array([[2, 7, 9, 11]], np.int32)
  with torch.no_grad():
    out = decoder(input_ids=torch.tensor(ids, dtype=torch.long), encoder_hidden_states=torch.zeros(1, 3, hidden),
                  output_hidden_states=True, use_cache=False, return_dict=True)
  want = np.concatenate([out.hidden_states[0].numpy(), out.hidden_states_ngram[0].numpy()], 1)

  config = TINY.replace(position_style="roberta", type_vocab_size=0, layer_norm_eps=1e-5, pad_token_id=0)
  model = XfnpModel(config, Seq2SeqConfig(decoder_layers=1), ngram=n, alphas=(1.0, 1.0))
  batch = {"input_ids": np.full((1, length + 1), 5, np.int32), "input_mask": np.ones((1, length + 1), np.int32),
           "targets": ids, "target_mask": np.ones_like(ids), "target_offsets": np.arange(length)[None],
           "target_positions": np.arange(1, length + 1, dtype=np.int32)[None], "decoder_inputs": ids}
  params = jax.tree_util.tree_map(np.asarray, nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(1), batch)))
  tensor = lambda m: m.weight.detach().numpy()  # noqa: E731
  emb = params["backbone"]["embeddings"]
  emb["word_embeddings"]["embedding"] = tensor(decoder.word_embeddings)
  emb["word_embeddings"]["embedding"][0] = 1.0  # a pad row HF does not have: the streams must not read it
  emb["position_embeddings"]["embedding"] = tensor(decoder.position_embeddings)
  emb["layer_norm"] = {"scale": tensor(decoder.embeddings_layer_norm),
                       "bias": decoder.embeddings_layer_norm.bias.detach().numpy()}
  # HF (and fairseq) give stream k (1-based) ngram_embeddings[k - 2]: stream 1 takes the last row
  params["stream_embeddings"] = tensor(decoder.ngram_embeddings)[(np.arange(n) - 1) % n]
  got = _decoder_input(model, params, batch)
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("scale", [False, True])
def test_predicting_stream_embedding_is_embed_targets_plus_the_vector(scale):
  """`embed_predicting_streams` with a zero vector is `embed_targets` (the generation path's embedding)."""
  net = Seq2SeqNetwork(TINY, Seq2SeqConfig(decoder_layers=1, scale_decoder_embeddings=scale))
  ids, mask = np.array([[3, 7, 0]], np.int32), np.array([[1, 1, 0]], np.int32)
  params = net.init(jax.random.PRNGKey(0), ids, mask, ids, mask)["params"]
  positions = np.array([[4, 5, 0]], np.int32)
  plain = net.apply({"params": params}, ids, mask, positions, method=Seq2SeqNetwork.embed_targets)
  zero = np.zeros((2, TINY.hidden_size), np.float32)
  both = net.apply({"params": params}, ids, mask, positions, zero, method=Seq2SeqNetwork.embed_predicting_streams)
  np.testing.assert_allclose(np.asarray(both), np.concatenate([plain, plain], 1), atol=1e-6)
