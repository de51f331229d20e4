"""XLM-style language embeddings: off by default, used by every VECO path when on, foldable for NLU."""

import functools
import os
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xtreme_jax.models.veco import VecoModel
from xtreme_jax.models.veco_assembly import fold_language_embedding, nlu_encoder
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.networks.veco import VecoNetwork

TIER = "integration"  # conftest.py: this file's tier

BASE = TransformerConfig(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, mlp_dim=64,
                         max_positions=24, type_vocab_size=2, dropout_rate=0.0, attention_dropout_rate=0.0)
CFG = BASE.replace(num_languages=3)
B, S, T, M = 2, 8, 12, 3


def _batch(seed=0):
  rng = np.random.default_rng(seed)
  batch = {}
  for s in ("x", "y"):
    batch[f"{s}_input_ids"] = rng.integers(5, 64, (B, S)).astype(np.int32)
    batch[f"{s}_input_mask"] = np.ones((B, S), np.int32)
    batch[f"{s}_token_type_ids"] = np.zeros((B, S), np.int32)
    batch[f"{s}_masked_positions"] = np.tile(np.arange(1, M + 1, dtype=np.int32), (B, 1))
    batch[f"{s}_masked_ids"] = rng.integers(5, 64, (B, M)).astype(np.int32)
    batch[f"{s}_masked_weights"] = np.ones((B, M), np.float32)
  batch["x_language_id"] = np.array([0, 1], np.int32)
  batch["y_language_id"] = np.array([1, 0], np.int32)
  batch["tlm_input_ids"] = rng.integers(5, 64, (B, T)).astype(np.int32)
  batch["tlm_input_mask"] = np.ones((B, T), np.int32)
  batch["tlm_token_type_ids"] = np.zeros((B, T), np.int32)
  batch["tlm_positions"] = np.tile(np.r_[np.arange(6), np.arange(6)].astype(np.int32), (B, 1))
  batch["tlm_language_ids"] = np.tile(np.r_[np.zeros(6), np.ones(6)].astype(np.int32), (B, 1))
  batch["tlm_masked_positions"] = np.tile(np.array([1, 7, 8], np.int32), (B, 1))
  batch["tlm_masked_ids"] = rng.integers(5, 64, (B, M)).astype(np.int32)
  batch["tlm_masked_weights"] = np.ones((B, M), np.float32)
  return batch


@functools.lru_cache(maxsize=None)  # initialised once per config: the tests only read the parameters
def _init(config):
  model = VecoModel(config)
  net = model.network(deterministic=True)
  params = jax.jit(lambda: nn.unbox(net.init(jax.random.PRNGKey(0), _batch())["params"]))()
  return model, net, params


def test_off_by_default_and_created_when_on():
  assert BASE.num_languages == 0
  net = VecoModel(BASE).network(deterministic=True)
  plain = jax.eval_shape(lambda: nn.unbox(net.init(jax.random.PRNGKey(0), _batch())["params"]))
  assert "language_embeddings" not in plain["backbone"]["embeddings"]
  _, _, params = _init(CFG)
  assert params["backbone"]["embeddings"]["language_embeddings"]["embedding"].shape == (3, 32)
  with pytest.raises(ValueError, match="num_languages=-1"):
    BASE.replace(num_languages=-1)


def test_every_objective_reads_its_language_ids():
  _, net, params = _init(CFG)
  batch = _batch()
  out = net.apply({"params": params}, batch)
  swapped = dict(batch, x_language_id=np.array([2, 2], np.int32))
  out_x = net.apply({"params": params}, swapped)
  # x's language changes IS(x) and CS(y->x) (x is decoded), and CS(x->y) through the memory.
  for k in ("is_x", "cs_yx", "cs_xy"):
    assert not np.allclose(out[k], out_x[k])
  np.testing.assert_array_equal(out["is_y"], out_x["is_y"])
  np.testing.assert_array_equal(out["tlm"], out_x["tlm"])
  tlm_swapped = dict(batch, tlm_language_ids=np.full((B, T), 2, np.int32))
  out_t = net.apply({"params": params}, tlm_swapped)
  assert not np.allclose(out["tlm"], out_t["tlm"])
  for k in ("is_x", "is_y", "cs_xy", "cs_yx"):
    np.testing.assert_array_equal(out[k], out_t[k])


def test_gradient_reaches_only_the_languages_used():
  model, net, params = _init(CFG)
  batch = _batch()

  def loss(p):
    return model.loss_terms(net.apply({"params": p}, batch), batch)[0]

  grads = jax.jit(jax.grad(loss))(params)["backbone"]["embeddings"]["language_embeddings"]["embedding"]
  norms = np.linalg.norm(np.asarray(grads), axis=-1)
  assert norms[0] > 0 and norms[1] > 0
  assert norms[2] == 0.0  # language 2 appears nowhere in the batch


def test_missing_language_ids_is_a_clear_error():
  net = VecoNetwork(CFG)
  ids = jnp.ones((1, 4), jnp.int32)
  with pytest.raises(ValueError, match="language_ids"):
    net.init(jax.random.PRNGKey(0), ids, jnp.ones_like(ids), method=VecoNetwork.encode)


POSITIONS = BASE.replace(num_languages=3, language_positions=True)  # a position table per language


@pytest.mark.parametrize("config", [CFG, POSITIONS], ids=["language_vectors", "language_positions"])
def test_folded_encoder_is_exact_for_that_language(config):
  _, _, params = _init(config)
  backbone = params["backbone"]
  ids = jnp.asarray(np.random.default_rng(3).integers(5, 64, (2, 7)), jnp.int32)
  mask = jnp.asarray([[1] * 7, [1] * 5 + [0] * 2], jnp.int32)
  outputs = []
  for lang in range(3):
    ref = VecoNetwork(config).apply({"params": backbone}, ids, mask, None, None, jnp.full_like(ids, lang),
                                    method=VecoNetwork.encode)
    plain = TransformerEncoder(BASE).apply({"params": nlu_encoder(backbone, config, lang)}, ids, mask).sequence
    np.testing.assert_allclose(np.asarray(plain), np.asarray(ref), atol=2e-6)
    outputs.append(np.asarray(ref))
  assert not np.allclose(outputs[0], outputs[1])  # each language reads its own embeddings
  folded = fold_language_embedding(backbone, 1, config)
  table = backbone["embeddings"]["position_embeddings"]["embedding"]
  if config.language_positions:  # rows 24..47 of the (3 x 24)-row table: language 1's positions
    assert table.shape == (3 * BASE.max_positions, 32) and "language_embeddings" not in backbone["embeddings"]
    want = table[BASE.max_positions:2 * BASE.max_positions]
  else:
    want = table + backbone["embeddings"]["language_embeddings"]["embedding"][1]
    assert "language_embeddings" in backbone["embeddings"]  # the input is not modified
  np.testing.assert_allclose(folded["embeddings"]["position_embeddings"]["embedding"], want, rtol=0, atol=0)
  assert "language_embeddings" not in folded["embeddings"]


def test_kept_languages_read_each_token_s_own_table():
  """An encoder kept with its languages (`keep_languages`) embeds a mixed batch row by row as each language's
  folded encoder does."""
  _, _, params = _init(POSITIONS)
  encoder = nlu_encoder(params["backbone"], POSITIONS, keep_languages=True)
  ids = jnp.asarray(np.random.default_rng(4).integers(5, 64, (3, 6)), jnp.int32)
  mask = jnp.ones_like(ids)
  langs = jnp.asarray([2, 0, 1], jnp.int32)
  from xtreme_jax.networks.encoder import batch_inputs
  mixed = TransformerEncoder(POSITIONS).apply(
      {"params": encoder}, **batch_inputs({"input_ids": ids, "input_mask": mask, "language_ids": langs})).sequence
  for row, lang in enumerate([2, 0, 1]):
    alone = TransformerEncoder(BASE).apply({"params": nlu_encoder(params["backbone"], POSITIONS, lang)},
                                           ids[row:row + 1], mask[row:row + 1]).sequence
    np.testing.assert_allclose(np.asarray(mixed[row:row + 1]), np.asarray(alone), atol=2e-6)


def test_nlu_encoder_language_id_errors():
  _, _, with_langs = _init(CFG)
  _, _, plain = _init(BASE)
  with pytest.raises(ValueError, match="pass language_id"):
    nlu_encoder(with_langs["backbone"], CFG)
  with pytest.raises(ValueError, match="no language embeddings"):
    nlu_encoder(plain["backbone"], BASE, 0)
  with pytest.raises(ValueError, match="has 3 languages"):
    nlu_encoder(with_langs["backbone"], CFG, 3)


def test_config_checks_the_language_names():
  assert CFG.replace(num_languages=2, languages=["de", "en"]).languages == ("de", "en")  # lists from Gin / JSON
  with pytest.raises(ValueError, match=r"languages=\['de'\] names 1 language ids but num_languages=3"):
    CFG.replace(languages=("de",))
  with pytest.raises(ValueError, match="language_positions=True needs num_languages > 0"):
    BASE.replace(language_positions=True)


@pytest.mark.e2e
def test_mlm_tlm_run_with_language_embeddings_and_export(tmp_path, capsys):
  import json

  import gin

  from xtreme_jax import cli, hf
  from xtreme_jax.data import paths

  langs = sorted(f[:-4] for f in os.listdir(os.path.join(paths.sample_dir(), "pretrain")) if f.endswith(".txt"))
  common = ["run", "--gin_file=experiments/mlm_tlm_pretrain_sample.gin", "--gin.TRAIN_STEPS=4",
            "--gin.trainer.TrainerConfig.checkpoint_every=4"]
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(common + [f"--gin.RUN_DIR='{tmp_path / 'small'}'",
                              "--gin.config.TransformerConfig.num_languages=2"]) == 2  # a user error
    assert re.match(r"error: the data has \d+ languages .* but num_languages=2", capsys.readouterr().err)
    gin.clear_config(clear_constants=True)
    assert cli.main(common + [f"--gin.RUN_DIR='{tmp_path / 'run'}'",
                              f"--gin.config.TransformerConfig.num_languages={len(langs)}"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  index = json.loads((tmp_path / "run" / "languages.json").read_text())
  assert sorted(index) == langs and sorted(index.values()) == list(range(len(langs)))
  history = json.loads((tmp_path / "run" / "summary.json").read_text())["history"]
  assert all(np.isfinite(r["loss"]) for r in history) and any(r["tlm_loss"] > 0 for r in history)
  assert cli.main(["export-encoder", str(tmp_path / "run"), str(tmp_path / "enc")]) == 2
  assert "pass language_id" in capsys.readouterr().err and not (tmp_path / "enc").exists()
  assert cli.main(["export-encoder", str(tmp_path / "run"), str(tmp_path / "enc"), str(index["de"])]) == 0
  config, params = hf.load_imported(str(tmp_path / "enc"))
  assert config.num_languages == 0 and "language_embeddings" not in params["embeddings"]
  assert cli.main(["export-encoder", str(tmp_path / "run"), str(tmp_path / "all"), "all"]) == 0
  config, params = hf.load_imported(str(tmp_path / "all"))  # every language kept, named in id order
  assert config.languages == tuple(langs)
  assert params["embeddings"]["language_embeddings"]["embedding"].shape[0] == len(langs)


def test_train_and_eval_language_ids_must_agree():
  from types import SimpleNamespace

  from xtreme_jax.runs.train import _check_languages
  train, same = SimpleNamespace(languages_index=("ar", "de", "en")), SimpleNamespace(languages_index=("ar", "de", "en"))
  assert _check_languages(CFG, train, same) == ("ar", "de", "en")
  with pytest.raises(ValueError, match=r"evaluation data's language ids \['de', 'en'\] differ"):
    _check_languages(CFG, train, SimpleNamespace(languages_index=("de", "en")))
  assert _check_languages(BASE, train, SimpleNamespace(languages_index=("de", "en"))) is None  # off: unchecked
  named = CFG.replace(languages=("en", "de", "ar"))  # the model's names fix the ids' order
  with pytest.raises(ValueError, match=r"language ids \['ar', 'de', 'en'\] differ from TransformerConfig.languages"):
    _check_languages(named, train)


def test_nlg_assembly_refuses_language_embeddings():
  from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, nlg_encoder_decoder
  _, _, params = _init(CFG)
  with pytest.raises(ValueError, match="NLG assembly does not support checkpoints with language embeddings"):
    nlg_encoder_decoder(params["backbone"], CFG, Seq2SeqAssembly(decoder_layers=1))


def test_examples_carry_their_language_s_id_to_the_model():
  from xtreme_jax.runs import language_ids
  named = CFG.replace(languages=("de", "en", "fr"))
  examples = [{"id": "a"}, {"id": "b"}]
  assert language_ids.with_language_id(examples, "fr", BASE, "xnli fr test") is examples  # no named languages
  tagged = language_ids.with_language_id(examples, "fr", named, "xnli fr test")
  assert tagged == [{"id": "a", "language_id": 2}, {"id": "b", "language_id": 2}] and "language_id" not in examples[0]
  with pytest.raises(ValueError, match=r"xnli sw test: language 'sw' has no language id in the model "
                                       r"\(TransformerConfig.languages: \['de', 'en', 'fr'\]\)"):
    language_ids.with_language_id(examples, "sw", named, "xnli sw test")
  windows = [{"input_ids": np.zeros(4)} for _ in range(3)]  # windows 0, 1 of example 0; window 2 of example 1
  language_ids.add_language_ids(windows, [0, 0, 1], [{"language_id": 2}, {"language_id": 0}])
  assert [int(w["language_ids"]) for w in windows] == [2, 2, 0]
  assert language_ids.fed_keys(("input_ids", "labels"), windows) == ("language_ids", "input_ids", "labels")
  assert language_ids.fed_keys(("input_ids", "labels"), [{"input_ids": 0}]) == ("input_ids", "labels")


def test_a_benchmark_run_refuses_unnamed_language_embeddings(tmp_path, capsys):
  import gin

  from xtreme_jax import cli
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/xtreme_quickstart.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.config.TransformerConfig.num_languages=2"]) == 2
  finally:
    gin.clear_config(clear_constants=True)
  assert capsys.readouterr().err.startswith("error: the model has language embeddings (num_languages=2) but "
                                            "TransformerConfig.languages does not name them")
  assert not (tmp_path / "run_config.json").exists()


def test_the_runner_gives_every_fine_tuned_read_its_language_s_id(tmp_path):
  """SQuAD (XQuAD's and MLQA's training data, an extra task) too; a translated test set is in English."""
  from types import SimpleNamespace

  from xtreme_jax.data import paths
  from xtreme_jax.runs import xtreme
  from xtreme_jax.training.partitioning import PartitionConfig
  named = BASE.replace(vocab_size=1024, num_languages=3, languages=("de", "en", "fr"))
  runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_xtreme_dir(), named, paths.sample_vocab(), None,
                               xtreme.FinetuneSettings(), PartitionConfig())
  assert {ex["language_id"] for ex in runner.read("squad", "en", "train")} == {1}
  runner.data = SimpleNamespace(read=lambda task, lg, split: [{"id": "0"}])
  assert runner.read("xnli", "de", "translate_test") == [{"id": "0", "language_id": 1}]
  assert runner.read("xnli", "fr", "test") == [{"id": "0", "language_id": 2}]
  assert runner.read("tatoeba", "de", "test") == [{"id": "0"}]  # retrieval: each side gets its id when embedded


def test_retrieval_embeds_each_side_in_its_own_language(monkeypatch):
  from types import SimpleNamespace

  from xtreme_jax.registry import XTREME
  from xtreme_jax.runs import sentence_retrieval
  tatoeba = {"source": ["ein", "zwei"], "target": ["one", "two"]}
  bucc = {"source": [("de-1", "ein"), ("de-2", "zwei")], "target": [("en-1", "one"), ("en-2", "two")]}
  run = SimpleNamespace(spec=XTREME.task, available=lambda *a: False,
                        read=lambda task, lg, split: tatoeba if task == "tatoeba" else bucc,
                        predictions=SimpleNamespace(write=lambda *a: "written"))
  retrieval = sentence_retrieval.SentenceRetrieval(run)
  seen = []
  retrieval.embed = lambda sentences, task, language: seen.append((task, language)) or np.eye(len(sentences))
  monkeypatch.setattr(sentence_retrieval.retrieval, "mine_bucc", lambda *a, **k: [])
  retrieval.run_language("tatoeba", "de")
  retrieval.run_language("bucc2018", "de")
  assert seen == [("tatoeba", "de"), ("tatoeba", "en"), ("bucc2018", "de"), ("bucc2018", "en")]


def test_a_checkpoint_s_languages_must_be_the_model_s(tmp_path):
  from xtreme_jax.runs.language_id import language_id_probe
  from xtreme_jax.runs.train import pretrained_loader
  (tmp_path / "config.json").write_text(CFG.replace(languages=("de", "en", "fr")).to_json())  # read alone
  with pytest.raises(ValueError, match=r"num_languages=3 but the model preset has 0"):
    pretrained_loader(str(tmp_path), BASE)  # its language embeddings were dropped without a word
  with pytest.raises(ValueError, match=r"languages=\('de', 'en', 'fr'\) but the model preset has \('en', 'de', 'fr'\)"):
    pretrained_loader(str(tmp_path), CFG.replace(languages=("en", "de", "fr")))  # every id another language's
  assert pretrained_loader(str(tmp_path), CFG.replace(languages=("de", "en", "fr"))) is not None
  with pytest.raises(ValueError, match="the language-ID probe reads a plain encoder"):
    language_id_probe(str(tmp_path / "probe"), CFG, "unused", str(tmp_path / "nowhere"))
