"""VECO parameter surgery: NLU encoder, NLG encoder-decoder, export of a pretraining run, warm start, output layer."""

import jax
import flax.linen as nn
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import cli, errors
from xtreme_jax.models.base import load_backbone
from xtreme_jax.models.mlm import MlmModel
from xtreme_jax.models.veco import VecoModel
from xtreme_jax.models.seq2seq import Seq2SeqModel
from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, nlg_encoder_decoder, nlu_encoder, seq2seq_backbone
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.networks.seq2seq import Seq2SeqConfig
from xtreme_jax.networks.veco import VecoNetwork

TIER = "integration"  # conftest.py: this file's tier

CONFIG = TINY.replace(num_layers=3)
IDS = np.array([[2, 5, 6, 7, 3, 0], [2, 8, 3, 0, 0, 0]], np.int32)
MASK = (IDS > 0).astype(np.int32)


@pytest.fixture(scope="module")
def veco_params():
  return nn.unbox(VecoNetwork(CONFIG).init(jax.random.PRNGKey(0), IDS, MASK, method=VecoNetwork.init_all))["params"]


def test_nlu_encoder_reproduces_the_is_path(veco_params):
  enc = nlu_encoder(veco_params, CONFIG)
  expected = jax.eval_shape(lambda: nn.unbox(TransformerEncoder(CONFIG).init(
      jax.random.PRNGKey(0), IDS, MASK, method=TransformerEncoder.init_all))["params"])
  assert jax.tree_util.tree_structure(enc) == jax.tree_util.tree_structure(expected)
  ours = TransformerEncoder(CONFIG).apply({"params": enc}, IDS, MASK).sequence
  is_path = VecoNetwork(CONFIG).apply({"params": veco_params}, IDS, MASK, method=VecoNetwork.encode)
  np.testing.assert_array_equal(np.asarray(ours), np.asarray(is_path))


@pytest.mark.parametrize("take,chosen", [("last", [1, 2]), ("first", [0, 1])])
def test_nlg_assembly_copies_the_chosen_layers(veco_params, take, chosen):
  out = nlg_encoder_decoder(veco_params, CONFIG, Seq2SeqAssembly(2, take, scale_embeddings=True))
  assert sorted(out["decoder"]) == ["layers_0", "layers_1"]
  assert sorted(out["encoder"]) == ["layers_0", "layers_1", "layers_2"]
  assert all("cross_attention" not in layer for layer in out["encoder"].values())
  for j, i in enumerate(chosen):
    dec = out["decoder"][f"layers_{j}"]
    assert sorted(dec) == ["cross_attention", "feed_forward", "self_attention"]
    src = veco_params["encoder"][f"layers_{i}"]["feed_forward"]["intermediate"]["kernel"]
    np.testing.assert_array_equal(dec["feed_forward"]["intermediate"]["kernel"], src)
    dec["feed_forward"]["intermediate"]["kernel"][0, 0] += 1.0  # an independent copy
    assert not np.array_equal(dec["feed_forward"]["intermediate"]["kernel"], src)
  assert out["embeddings"] is veco_params["embeddings"]  # tied: one copy
  assert out["assembly"] == {"decoder_layers": 2, "take": take, "scale_embeddings": True,
                             "fresh_cross_attention": False}
  with pytest.raises(ValueError, match="decoder_layers=4; expected 1..3"):
    nlg_encoder_decoder(veco_params, CONFIG, Seq2SeqAssembly(4))


def test_seq2seq_backbone_copies_the_encoder_tables_for_the_decoder(veco_params):
  """`decoder_embeddings` (separate_decoder_embeddings) start as independent copies of the encoder's position table
  and LayerNorm, so the separate model computes what the shared one does; a model without them drops them."""
  backbone = seq2seq_backbone(veco_params, CONFIG, Seq2SeqAssembly(2))
  own, emb = backbone["decoder_embeddings"], veco_params["embeddings"]
  assert sorted(own) == ["layer_norm", "position_embeddings"]
  np.testing.assert_array_equal(own["position_embeddings"]["embedding"], emb["position_embeddings"]["embedding"])
  for name in ("scale", "bias"):
    np.testing.assert_array_equal(own["layer_norm"][name], emb["layer_norm"][name])
  own["position_embeddings"]["embedding"][0, 0] += 1.0  # an independent copy
  assert not np.array_equal(own["position_embeddings"]["embedding"], emb["position_embeddings"]["embedding"])

  backbone = seq2seq_backbone(veco_params, CONFIG, Seq2SeqAssembly(2))
  batch = {"input_ids": IDS, "input_mask": MASK, "targets": IDS[:, 1:], "target_mask": MASK[:, 1:],
           "decoder_start": np.array([2, 2], np.int32)}
  logits = []
  for separate in (False, True):
    model = Seq2SeqModel(CONFIG, Seq2SeqConfig(decoder_layers=2, separate_decoder_embeddings=separate))
    params = load_backbone(nn.unbox(model.init(jax.random.PRNGKey(1), batch)), backbone, CONFIG)
    assert ("decoder_embeddings" in params["backbone"]) == separate
    logits.append(np.asarray(model.network(True).apply({"params": params}, batch)))
  np.testing.assert_allclose(logits[1], logits[0], atol=1e-5)

  positions = {"embedding": np.zeros((CONFIG.max_positions, CONFIG.hidden_size), np.float32)}
  trained = {**backbone, "decoder_embeddings": {"position_embeddings": positions,
                                                "layer_norm": backbone["decoder_embeddings"]["layer_norm"]}}
  kept = seq2seq_backbone(trained, CONFIG, Seq2SeqAssembly(2))  # an encoder-decoder checkpoint keeps its own
  assert kept["decoder_embeddings"] is trained["decoder_embeddings"]
  plain = {k: v for k, v in backbone.items() if k != "decoder_embeddings"}  # ... and one without gets copies
  np.testing.assert_array_equal(seq2seq_backbone(plain, CONFIG, Seq2SeqAssembly(2))["decoder_embeddings"]
                                ["position_embeddings"]["embedding"], emb["position_embeddings"]["embedding"])


def test_warm_start_from_an_encoder_keeps_cross_attention_fresh(veco_params):
  model = VecoModel(CONFIG)
  batch = model.dummy_batch(2, 6)
  fresh = nn.unbox(model.init(jax.random.PRNGKey(1), batch))
  encoder_checkpoint = jax.tree_util.tree_map(np.asarray, nlu_encoder(veco_params, CONFIG))
  loaded = load_backbone(fresh, encoder_checkpoint, CONFIG)["backbone"]
  layer = loaded["encoder"]["layers_1"]
  np.testing.assert_array_equal(layer["self_attention"]["attention"]["query"]["kernel"],
                                veco_params["encoder"]["layers_1"]["self_attention"]["attention"]["query"]["kernel"])
  np.testing.assert_array_equal(np.asarray(layer["cross_attention"]["attention"]["query"]["kernel"]),
                                np.asarray(fresh["backbone"]["encoder"]["layers_1"]["cross_attention"]["attention"]
                                           ["query"]["kernel"]))


def test_load_backbone_matches_the_output_layer(veco_params):
  """A tied checkpoint into an untied MLM model: decoder = word embeddings^T (same logits); the reverse is refused."""
  encoder = jax.tree_util.tree_map(np.asarray, nlu_encoder(veco_params, CONFIG))
  untied = CONFIG.replace(tie_word_embeddings=False)
  model = MlmModel(untied)
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), model.dummy_batch(1, 6)))
  loaded = load_backbone(shapes, encoder, untied)["backbone"]
  words = encoder["embeddings"]["word_embeddings"]["embedding"]
  np.testing.assert_array_equal(loaded["mlm_head"]["decoder"]["kernel"], words.T)
  batch = {**model.dummy_batch(2, 6), "input_ids": IDS, "input_mask": MASK,
           "masked_positions": np.array([[1, 2, 0, 0], [1, 0, 0, 0]], np.int32)}
  tied = MlmModel(CONFIG).predict_batch({"backbone": encoder}, batch)
  np.testing.assert_allclose(model.predict_batch({"backbone": loaded}, batch), tied, atol=1e-5)

  untied_checkpoint = {**encoder, "mlm_head": loaded["mlm_head"]}
  tied_shapes = jax.eval_shape(lambda: MlmModel(CONFIG).init(jax.random.PRNGKey(0), model.dummy_batch(1, 6)))
  with pytest.raises(errors.ConfigError, match="untied MLM output layer .* set TransformerConfig.tie_word_embeddings"):
    load_backbone(tied_shapes, untied_checkpoint, CONFIG)
  headless = {"backbone": {k: v for k, v in shapes["backbone"].items() if k != "mlm_head"}}
  classifier = load_backbone(headless, untied_checkpoint, CONFIG)
  assert "mlm_head" not in classifier["backbone"]  # a model without an MLM head drops it either way


def test_export_encoder_errors_are_one_line(tmp_path, capsys):
  run = tmp_path / "run"
  run.mkdir()
  assert cli.main(["export-encoder", str(run), str(tmp_path / "out")]) == 2
  err = capsys.readouterr().err
  assert err == f"error: {run / 'run_config.json'} does not exist; expected the run_config.json of a " \
                "pretraining run\n"
  (run / "run_config.json").write_text('{"model": {"config": {"vocab_size": 64, "hidden_sise": 32}}}')
  assert cli.main(["export-encoder", str(run), str(tmp_path / "out")]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"error: {run / 'run_config.json'}: unknown TransformerConfig keys ['hidden_sise']")
  assert not (tmp_path / "out").exists()
