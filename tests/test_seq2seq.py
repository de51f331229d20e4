"""The encoder-decoder: KV cache against the full pass, beam search against exhaustive search, losses, assembly."""

import itertools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors, main
from xtreme_jax.models import decoding
from xtreme_jax.models.base import load_backbone
from xtreme_jax.models.seq2seq import DecodeSettings, Seq2SeqModel, label_smoothed_nll, shift_right
from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, seq2seq_backbone
from xtreme_jax.networks import layers
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.networks.seq2seq import Seq2SeqConfig, Seq2SeqNetwork
from xtreme_jax.networks.veco import VecoNetwork

TIER = "integration"  # conftest.py: this file's tier

EOS, BOS = 2, 1
SOURCE = np.array([[5, 3, 4, 4, 3], [4, 5, 3, 0, 0]], np.int32)  # ids < 6: the small vocabulary
SOURCE_MASK = (SOURCE > 0).astype(np.int32)


def _sharpened_params(model, target_length, seed=0):
  """Random parameters scaled up, so that next-token distributions are peaked and scores far from ties."""
  params = _init(model, model.dummy_batch(2, SOURCE.shape[1], target_length), seed)
  return jax.tree_util.tree_map(lambda x: x * 8 if x.ndim >= 2 else x, params)


def _init(model, batch, seed=0):
  return nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(seed), batch))


def _forward(model, params, batch):
  return jax.jit(model.network(True).apply)({"params": params}, batch)


def _batch(targets, starts=(BOS, BOS)):
  targets = np.asarray(targets, np.int32)
  return {"input_ids": SOURCE, "input_mask": SOURCE_MASK, "targets": targets,
          "target_mask": (targets > 0).astype(np.int32), "decoder_start": np.array(starts, np.int32)}


def _sequence_log_probs(model, params, row, sequences):
  """Summed log-probabilities of `sequences` (lists ending in EOS) for source `row`, by one full forward pass.

  Pad is never generated, as in the searches.
  """
  length = max(map(len, sequences))
  targets = np.array([list(seq) + [0] * (length - len(seq)) for seq in sequences], np.int32)
  n = len(sequences)
  batch = {"input_ids": np.repeat(SOURCE[row:row + 1], n, 0), "input_mask": np.repeat(SOURCE_MASK[row:row + 1], n, 0),
           "targets": targets, "target_mask": (targets > 0).astype(np.int32), "decoder_start": np.full(n, BOS)}
  logp = jax.nn.log_softmax(_forward(model, params, batch), -1)
  logp = np.asarray(logp.at[..., model.config.pad_token_id].set(-jnp.inf))
  return [float(sum(logp[i, t, tok] for t, tok in enumerate(seq))) for i, seq in enumerate(sequences)]


@pytest.fixture(scope="module")
def small():
  """A 6-token vocabulary (pad 0, BOS 1, EOS 2, and 3 4 5), 2 + 2 layers."""
  model = Seq2SeqModel(TINY.replace(vocab_size=6), Seq2SeqConfig(decoder_layers=2), eos_id=EOS)
  return model, _sharpened_params(model, 3)


@pytest.mark.parametrize("fairseq_embeddings", [False, True])
def test_cached_steps_equal_the_full_forward_pass(fairseq_embeddings):
  """Also with VECO's embeddings (both sides scaled, the decoder's own position table and LayerNorm)."""
  switches = dict(scale_encoder_embeddings=True, scale_decoder_embeddings=True, separate_decoder_embeddings=True)
  model = Seq2SeqModel(TINY, Seq2SeqConfig(decoder_layers=2, **(switches if fairseq_embeddings else {})), eos_id=EOS)
  targets = np.array([[11, 12, 13, 14, 15, EOS], [21, 22, EOS, 0, 0, 0]], np.int32)
  params = _sharpened_params(model, targets.shape[1])
  batch = _batch(targets, starts=(BOS, 7))
  full = _forward(model, params, batch)
  inputs = shift_right(targets, np.ones_like(targets), batch["decoder_start"], 0)

  @jax.jit
  def cached(params, batch):  # the whole incremental decode under jit, with a static maximum length
    step, cache = model.decoder(params, batch, copies=1, max_length=targets.shape[1])
    body = lambda cache, x: step(x[1], cache, x[0])[::-1]  # noqa: E731
    return jax.lax.scan(body, cache, (jnp.arange(targets.shape[1]), inputs.T))[1].transpose(1, 0, 2)

  real = batch["target_mask"] == 1  # the full pass reads pad after a target's end
  np.testing.assert_allclose(np.asarray(cached(params, batch))[real], np.asarray(full)[real], rtol=1e-5, atol=1e-5)


def test_beam_search_with_a_wide_beam_is_exhaustive_search(small):
  model, params = small
  length, tokens = 3, (1, 3, 4, 5)  # V = 5 tokens may be generated (all but pad), L = 3
  beam = 5 ** (length - 1)
  result = jax.jit(lambda p, b: model.generate(p, b, DecodeSettings(beam_size=beam, max_length=length, n_best=10)))(
      params, _batch([[3, EOS, 0], [3, EOS, 0]]))
  for row in range(2):
    outputs = [list(p) + [EOS] for n in range(length) for p in itertools.product(tokens, repeat=n)]
    scores = [s / len(seq) for s, seq in zip(_sequence_log_probs(model, params, row, outputs), outputs)]
    best = sorted(zip(scores, outputs), reverse=True)[:10]
    got = [list(s[:n]) for s, n in zip(np.asarray(result.sequences[row]), np.asarray(result.lengths[row]))]
    assert got == [seq for _, seq in best]
    np.testing.assert_allclose(np.asarray(result.scores[row]), [s for s, _ in best], rtol=1e-5)


def test_greedy_search_is_beam_search_with_one_beam():
  model = Seq2SeqModel(TINY, Seq2SeqConfig(decoder_layers=1), eos_id=EOS)
  params = _sharpened_params(model, 8, seed=3)
  batch = _batch(np.zeros((2, 8)), starts=(BOS, 9))

  @jax.jit
  def both(params, batch):
    step, cache = model.decoder(params, batch, copies=1, max_length=8)
    start = batch["decoder_start"]
    return (decoding.greedy_search(step, cache, start, max_length=8, eos_id=EOS),
            decoding.beam_search(step, cache, start, beam_size=1, max_length=8, eos_id=EOS, alpha=1.0))

  greedy, beam = both(params, batch)
  np.testing.assert_array_equal(np.asarray(greedy.sequences), np.asarray(beam.sequences))
  np.testing.assert_allclose(np.asarray(greedy.scores) / np.asarray(greedy.lengths), np.asarray(beam.scores),
                             rtol=1e-5)
  by_hand = _sequence_log_probs(model, params, 0, [list(np.asarray(greedy.sequences[0, 0, :greedy.lengths[0, 0]]))])
  np.testing.assert_allclose(np.asarray(greedy.scores[0, 0]), by_hand[0], rtol=1e-5)


def _markov_step(table):
  """A step function whose next-token log-probabilities depend on the last token only."""
  table = jnp.log(jnp.asarray(table, jnp.float32))
  return lambda tokens, cache, t: (table[tokens], cache + 1)


def test_finished_hypotheses_are_never_extended():
  # tokens: pad 0, BOS 1, EOS 2, a 3, b 4. After BOS: EOS is likeliest; after a / b, EOS is unlikely.
  table = [[1, 1, 1, 1, 1], [0.01, 0.01, 0.5, 0.28, 0.2], [0.2, 0.2, 0.2, 0.2, 0.2],
           [0.01, 0.01, 0.08, 0.5, 0.4], [0.01, 0.01, 0.1, 0.3, 0.58]]
  logp = np.log(np.asarray(table, np.float64) / np.sum(table, 1, keepdims=True))
  result = decoding.beam_search(_markov_step(np.exp(logp)), jnp.zeros(2), jnp.array([BOS]), beam_size=2,
                                max_length=5, eos_id=EOS, alpha=0.0, n_best=2)
  for seq, score, n in zip(np.asarray(result.sequences[0]), np.asarray(result.scores[0]),
                           np.asarray(result.lengths[0])):
    assert seq[n - 1] == EOS and EOS not in seq[:n - 1] and not seq[n:].any()
    path = [BOS, *seq[:n]]
    assert score == pytest.approx(sum(logp[a, b] for a, b in zip(path, path[1:])), rel=1e-5)
  # [EOS] finishes at the first step (top-2 candidate); the other hypothesis runs on until the forced EOS.
  assert list(np.asarray(result.sequences[0, 0])) == [EOS, 0, 0, 0, 0]
  assert result.lengths[0, 1] > 1


def test_label_smoothed_nll_by_hand():
  logits = jnp.log(jnp.array([[[0.25, 0.5, 0.25], [0.25, 0.5, 0.25]]]))
  loss, nll = label_smoothed_nll(logits, jnp.array([[1, 0]]), jnp.array([[1, 0]]), epsilon=0.2)
  # (1 - 0.2 - 0.1) * ln 2 + 0.1 * (ln 4 + ln 2 + ln 4) = 1.2 ln 2; the padded token counts 0.
  np.testing.assert_allclose(np.asarray(loss), [[1.2 * math.log(2), 0.0]], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(nll), [[math.log(2), 0.0]], rtol=1e-6)
  with pytest.raises(errors.ConfigError, match="label_smoothing=1.0"):
    Seq2SeqModel(TINY, label_smoothing=1.0)


def test_shift_right_starts_with_the_tag_and_keeps_padding():
  out = shift_right(jnp.array([[5, 6, EOS, 0]]), jnp.array([[1, 1, 1, 0]]), jnp.array([9]), 0)
  np.testing.assert_array_equal(np.asarray(out), [[9, 5, 6, 0]])


def test_untied_output_projection_with_the_embeddings_equals_the_tied_output():
  targets = np.array([[11, 12, EOS], [13, EOS, 0]], np.int32)
  tied = Seq2SeqModel(TINY, Seq2SeqConfig(decoder_layers=1))
  untied = Seq2SeqModel(TINY, Seq2SeqConfig(decoder_layers=1, tie_output=False))
  params = _init(tied, _batch(targets))
  words = params["backbone"]["embeddings"]["word_embeddings"]["embedding"]
  untied_params = {"backbone": {**params["backbone"], "output_projection": {"kernel": words.T}}}
  assert jax.tree_util.tree_structure(untied_params) == jax.tree_util.tree_structure(
      jax.eval_shape(lambda: nn.unbox(untied.init(jax.random.PRNGKey(0), _batch(targets)))))
  np.testing.assert_allclose(np.asarray(_forward(untied, untied_params, _batch(targets))),
                             np.asarray(_forward(tied, params, _batch(targets))), atol=1e-5)


def test_veco_nlg_assembly_decodes_as_the_virtual_decoder():
  """Every VECO layer copied into the decoder: teacher forcing equals VECO's CS path over the IS path's states."""
  config = TINY.replace(num_layers=2)
  veco = VecoNetwork(config)
  veco_params = nn.unbox(veco.init(jax.random.PRNGKey(0), SOURCE, SOURCE_MASK, method=VecoNetwork.init_all))["params"]
  model = Seq2SeqModel(config, Seq2SeqConfig(decoder_layers=2))
  targets = np.array([[11, 12, 13, EOS], [14, EOS, 0, 0]], np.int32)
  batch = _batch(targets)
  fresh = _init(model, batch, 1)
  params = load_backbone(fresh, seq2seq_backbone(veco_params, config, Seq2SeqAssembly(2, "first")), config)
  ours = _forward(model, params, batch)
  inputs = shift_right(targets, batch["target_mask"], batch["decoder_start"], 0)

  def virtual_decoder(net):
    memory = net.encode(SOURCE, SOURCE_MASK)
    return net.embeddings.attend(net.decode(inputs, batch["target_mask"], memory, SOURCE_MASK))

  expected = veco.apply({"params": veco_params}, method=virtual_decoder)
  np.testing.assert_allclose(np.asarray(ours), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_xlmr_baseline_assembly_copies_self_attention_and_starts_cross_attention_fresh():
  config = TINY.replace(num_layers=3)
  encoder = nn.unbox(TransformerEncoder(config).init(jax.random.PRNGKey(0), SOURCE, SOURCE_MASK,
                                                     method=TransformerEncoder.init_all))["params"]
  with pytest.raises(errors.DataError, match="fresh_cross_attention = True"):
    seq2seq_backbone(encoder, config, Seq2SeqAssembly(2))
  model = Seq2SeqModel(config, Seq2SeqConfig(decoder_layers=2))
  fresh = _init(model, model.dummy_batch(2, 5, 3), 1)
  loaded = load_backbone(fresh, seq2seq_backbone(encoder, config, Seq2SeqAssembly(2, fresh_cross_attention=True)),
                         config)["backbone"]
  for j, i in enumerate([1, 2]):  # the last two encoder layers
    got, source = loaded["decoder"][f"layers_{j}"], encoder["encoder"][f"layers_{i}"]
    np.testing.assert_array_equal(got["self_attention"]["attention"]["query"]["kernel"],
                                  source["self_attention"]["attention"]["query"]["kernel"])
    np.testing.assert_array_equal(
        np.asarray(got["cross_attention"]["attention"]["key"]["kernel"]),
        np.asarray(fresh["backbone"]["decoder"][f"layers_{j}"]["cross_attention"]["attention"]["key"]["kernel"]))


def test_packed_pairs_get_the_logits_and_loss_they_get_alone():
  from xtreme_jax.data.features.packing import pack_pairs
  model = Seq2SeqModel(TINY, Seq2SeqConfig(decoder_layers=2), eos_id=EOS)
  pairs = [([5, 6, 7, 3], [11, 12, EOS]), ([8, 9, 3], [13, EOS]), ([10, 4, 4, 4, 3], [14, 15, 16, EOS])]
  rows = pack_pairs(pairs, source_len=8, target_len=6, pad_id=0)
  assert len(rows) == 2  # pairs 1 + 2 fill row 1 (7 + 5 tokens); pair 3 does not fit beside them
  np.testing.assert_array_equal(rows[0]["input_segments"], [1, 1, 1, 1, 2, 2, 2, 0])
  np.testing.assert_array_equal(rows[0]["target_positions"], [0, 1, 2, 0, 1, 0])
  packed = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
  packed["decoder_start"] = np.array([BOS, BOS], np.int32)
  alone = {"input_ids": np.zeros((3, 8), np.int32), "targets": np.zeros((3, 6), np.int32)}
  for i, (source, target) in enumerate(pairs):
    alone["input_ids"][i, :len(source)], alone["targets"][i, :len(target)] = source, target
  alone.update(input_mask=(alone["input_ids"] > 0).astype(np.int32), target_mask=(alone["targets"] > 0).astype(np.int32),
               decoder_start=np.full(3, BOS, np.int32))
  params = _init(model, alone)
  got, want = (np.asarray(_forward(model, params, b)) for b in (packed, alone))
  np.testing.assert_allclose(got[0, :3], want[0, :3], atol=1e-5)   # pair 1: row 1, target slots 0-2
  np.testing.assert_allclose(got[0, 3:5], want[1, :2], atol=1e-5)  # pair 2: row 1, target slots 3-4
  np.testing.assert_allclose(got[1, :4], want[2, :4], atol=1e-5)   # pair 3: row 2
  loss = lambda b, logits: float(model.loss_terms(logits, b)[0])  # noqa: E731
  assert loss(packed, got) == pytest.approx(loss(alone, want), rel=1e-5)


IDS = np.array([[3, 7, 9, 4], [5, 8, 0, 0]], np.int32)
IDS_MASK = (IDS > 0).astype(np.int32)


def _network_params(seq2seq, seed=0):
  """Parameters of a TINY `Seq2SeqNetwork`, every LayerNorm's scale and bias random (not 1 and 0)."""
  net = Seq2SeqNetwork(TINY, seq2seq)
  params = nn.unbox(net.init(jax.random.PRNGKey(seed), IDS, IDS_MASK, IDS, IDS_MASK))["params"]
  leaves, tree = jax.tree_util.tree_flatten_with_path(params)
  keys = jax.random.split(jax.random.PRNGKey(seed + 1), len(leaves))
  leaves = [jax.random.normal(k, x.shape) if "layer_norm" in jax.tree_util.keystr(p) else x
            for k, (p, x) in zip(keys, leaves)]
  return net, jax.tree_util.tree_unflatten(tree, leaves)


def _layer_norm(x, ln):
  x = np.asarray(x, np.float64)
  mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + TINY.layer_norm_eps) * np.asarray(ln["scale"]) + np.asarray(ln["bias"])


def _source_embedding(net, params):
  """The encoder side's embedding output (the `Embeddings` call of `encode`)."""
  _, state = net.apply({"params": params}, IDS, IDS_MASK, method=Seq2SeqNetwork.encode,
                       capture_intermediates=lambda module, _: isinstance(module, layers.Embeddings))
  return np.asarray(state["intermediates"]["embeddings"]["__call__"][0])


@pytest.mark.parametrize("scale", [False, True])
def test_encoder_embedding_is_layer_norm_of_scaled_words_plus_positions(scale):
  """`scale_encoder_embeddings`: LayerNorm(word * sqrt(d) + position + token type 0), fairseq's `embed_scale`."""
  net, params = _network_params(Seq2SeqConfig(decoder_layers=1, scale_encoder_embeddings=scale))
  emb = params["embeddings"]
  words = np.asarray(emb["word_embeddings"]["embedding"])[IDS] * (math.sqrt(TINY.hidden_size) if scale else 1.0)
  x = (words + np.asarray(emb["position_embeddings"]["embedding"])[:IDS.shape[1]]
       + np.asarray(emb["token_type_embeddings"]["embedding"])[0])
  np.testing.assert_allclose(_source_embedding(net, params), _layer_norm(x, emb["layer_norm"]), atol=1e-5)


def _perturbed(params, side, *names):
  """`params` with `side`'s (embeddings / decoder_embeddings) sub-trees `names` replaced by random values."""
  part = dict(params[side])
  for i, name in enumerate(names):
    part[name] = jax.tree_util.tree_map(lambda x: jax.random.normal(jax.random.PRNGKey(100 + i), x.shape), part[name])
  return {**params, side: part}


def test_separate_decoder_embeddings_have_their_own_positions_and_layer_norm():
  """`separate_decoder_embeddings`: the decoder embeds with its own position table and LayerNorm, the word table
  shared; either side's own tables leave the other side's embedding unchanged."""
  net, params = _network_params(Seq2SeqConfig(decoder_layers=1, scale_decoder_embeddings=True,
                                              separate_decoder_embeddings=True))
  assert sorted(params["decoder_embeddings"]) == ["layer_norm", "position_embeddings"]
  assert params["decoder_embeddings"]["position_embeddings"]["embedding"].shape == (TINY.max_positions,
                                                                                    TINY.hidden_size)
  positions = np.array([[0, 1, 2, 3], [0, 1, 0, 0]], np.int32)
  targets = lambda p: np.asarray(net.apply({"params": p}, IDS, IDS_MASK, positions,  # noqa: E731
                                           method=Seq2SeqNetwork.embed_targets))
  source = lambda p: _source_embedding(net, p)  # noqa: E731
  emb, own = params["embeddings"], params["decoder_embeddings"]
  x = (np.asarray(emb["word_embeddings"]["embedding"])[IDS] * math.sqrt(TINY.hidden_size)
       + np.asarray(own["position_embeddings"]["embedding"])[positions]
       + np.asarray(emb["token_type_embeddings"]["embedding"])[0])
  np.testing.assert_allclose(targets(params), _layer_norm(x, own["layer_norm"]), atol=1e-5)

  encoder_side = _perturbed(params, "embeddings", "position_embeddings", "layer_norm")
  np.testing.assert_array_equal(targets(encoder_side), targets(params))
  assert not np.allclose(source(encoder_side), source(params))
  decoder_side = _perturbed(params, "decoder_embeddings", "position_embeddings", "layer_norm")
  np.testing.assert_array_equal(source(decoder_side), source(params))
  assert not np.allclose(targets(decoder_side), targets(params))
  words = _perturbed(params, "embeddings", "word_embeddings")  # shared: both sides change
  assert not np.allclose(source(words), source(params)) and not np.allclose(targets(words), targets(params))

  zero = np.zeros((1, TINY.hidden_size), np.float32)  # xFNP's predicting streams embed on the decoder's tables too
  streams = net.apply({"params": params}, IDS, IDS_MASK, positions, zero,
                      method=Seq2SeqNetwork.embed_predicting_streams)
  np.testing.assert_allclose(np.asarray(streams), targets(params), atol=1e-6)


def test_default_embeddings_keep_one_table_set_and_no_scaling():
  """Existing presets and checkpoints: one `Embeddings` for both sides, no `decoder_embeddings`."""
  net, params = _network_params(Seq2SeqConfig(decoder_layers=1))
  assert sorted(params) == ["decoder", "embeddings", "encoder"]


@pytest.mark.parametrize("experiment,bindings", [("experiments/wmt14_en_de_veco_large.gin", []),
                                                 ("experiments/xglue_veco_large_generation.gin",
                                                  ["DATA_DIR='d'", "RUN_DIR='r'"])])
def test_veco_large_nlg_preset_sets_veco_embeddings(experiment, bindings):
  """models/veco_large_nlg.gin: both sides scaled by sqrt(1024), the decoder's own positions and LayerNorm."""
  import gin
  gin.clear_config(clear_constants=True)
  try:
    main.parse_gin([experiment], bindings)
    seq2seq = gin.get_configurable(Seq2SeqConfig)()
  finally:
    gin.clear_config(clear_constants=True)
  assert seq2seq == Seq2SeqConfig(decoder_layers=6, scale_encoder_embeddings=True, scale_decoder_embeddings=True,
                                  separate_decoder_embeddings=True)
