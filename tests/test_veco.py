"""VECO network and pretraining model: masks, sharing, detaching, NLU assembly, size, training, TLM positions."""

import dataclasses
import os
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data.pretraining.pretraining_corpora import PairFeatures
from xtreme_jax.models.veco import VecoModel
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.networks.layers import Embeddings, position_ids
from xtreme_jax.networks.veco import VecoNetwork, drop_cross_attention
from xtreme_jax.training.optim import OptimizerConfig

TIER = "integration"  # conftest.py: this file's tier

CFG = TransformerConfig(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, mlp_dim=64,
                        max_positions=24, type_vocab_size=2, dropout_rate=0.1, attention_dropout_rate=0.1)
NET = VecoNetwork(CFG)
# veco_pretrain_sample.gin's model (models/tiny.gin, no dropout as the Gin tests run it) and optimizer
# (runs/pretrain.gin; only its structure is compiled): the resume tests reuse the Gin test's compiled steps.
SAMPLE_CONFIG = TransformerConfig(vocab_size=1024, hidden_size=64, num_layers=2, num_heads=4, mlp_dim=256,
                                  max_positions=130, type_vocab_size=1, pad_token_id=1, position_style="roberta",
                                  layer_norm_eps=1e-5, dropout_rate=0.0, attention_dropout_rate=0.0)
SAMPLE_OPTIMIZER = OptimizerConfig(learning_rate=2e-3, warmup_ratio=0.05, weight_decay=0.01, eps=1e-6)


def _ids(seed, batch=2, length=8, pad_from=None):
  ids = np.random.default_rng(seed).integers(5, CFG.vocab_size, (batch, length)).astype(np.int32)
  mask = np.ones_like(ids)
  if pad_from is not None:
    ids[:, pad_from:] = 0
    mask[:, pad_from:] = 0
  return jnp.asarray(ids), jnp.asarray(mask)


@pytest.fixture(scope="module")
def params():
  ids, mask = _ids(0)
  return jax.jit(lambda: nn.unbox(NET.init(jax.random.PRNGKey(0), ids, mask, method=VecoNetwork.init_all)["params"]))()


def encode(p, ids, mask):
  return NET.apply({"params": p}, ids, mask, method=VecoNetwork.encode)


def decode(p, ids, mask, memory, memory_mask):
  return NET.apply({"params": p}, ids, mask, memory, memory_mask, method=VecoNetwork.decode)


def _paths(tree):
  return {jax.tree_util.keystr(k): v.shape for k, v in jax.tree_util.tree_leaves_with_path(tree)}


def test_param_tree_extends_transformer_encoder(params):
  ids, mask = _ids(0)
  enc = jax.eval_shape(lambda: nn.unbox(TransformerEncoder(CFG).init(
      jax.random.PRNGKey(0), ids, mask, method=TransformerEncoder.init_all)["params"]))
  veco, ref = _paths(params), _paths(enc)
  extra = {k: v for k, v in veco.items() if k not in ref}
  assert {k: veco[k] for k in ref} == ref  # every encoder path, same shapes
  assert extra and all("['cross_attention']" in k for k in extra)
  assert sorted(params["encoder"]) == [f"layers_{i}" for i in range(CFG.num_layers)]
  for i in range(CFG.num_layers):
    assert sorted(params["encoder"][f"layers_{i}"]) == ["cross_attention", "feed_forward", "self_attention"]
  assert _paths(drop_cross_attention(params)) == ref


def test_untied_output_layer_in_both_trees():
  ids, mask = _ids(0)
  cfg = CFG.replace(tie_word_embeddings=False)
  veco = jax.eval_shape(lambda: nn.unbox(VecoNetwork(cfg).init(
      jax.random.PRNGKey(0), ids, mask, method=VecoNetwork.init_all)["params"]))
  enc = jax.eval_shape(lambda: nn.unbox(TransformerEncoder(cfg).init(
      jax.random.PRNGKey(0), ids, mask, method=TransformerEncoder.init_all)["params"]))
  assert _paths(drop_cross_attention(veco)) == _paths(enc)
  assert enc["mlm_head"]["decoder"]["kernel"].shape == (cfg.hidden_size, cfg.vocab_size)


def test_encode_equals_transformer_encoder_exactly(params):
  ids, mask = _ids(1, pad_from=6)
  out = TransformerEncoder(CFG).apply({"params": drop_cross_attention(params)}, ids, mask)
  np.testing.assert_array_equal(np.asarray(encode(params, ids, mask)), np.asarray(out.sequence))
  veco_out = NET.apply({"params": params}, ids, mask)
  np.testing.assert_array_equal(np.asarray(veco_out.pooled), np.asarray(out.pooled))


def test_encode_is_bidirectional_and_ignores_padding(params):
  ids, mask = _ids(2, pad_from=6)
  h = encode(params, ids, mask)
  later = ids.at[:, 4].set(7)          # a real token after position 1
  assert not np.allclose(h[:, 1], encode(params, later, mask)[:, 1])
  pad = ids.at[:, 7].set(9)            # a padded token
  np.testing.assert_allclose(h[:, :6], encode(params, pad, mask)[:, :6], atol=1e-6)


def test_decode_is_causal_and_attends_to_all_of_memory(params):
  x, x_mask = _ids(3, length=6, pad_from=5)
  y, y_mask = _ids(4, length=8)
  mem = encode(params, x, x_mask)
  d = decode(params, y, y_mask, mem, x_mask)
  t = 3
  y2 = y.at[:, t + 1:].set(11)
  d2 = decode(params, y2, y_mask, mem, x_mask)
  np.testing.assert_allclose(d[:, :t + 1], d2[:, :t + 1], atol=1e-6)
  assert not np.allclose(d[:, t + 1:], d2[:, t + 1:])
  # Every non-pad token of x reaches every decoder position (here the last one, x position 4).
  x2 = x.at[:, 4].set(13)
  d3 = decode(params, y, y_mask, encode(params, x2, x_mask), x_mask)
  assert np.all(np.abs(np.asarray(d3 - d)).max(-1) > 1e-6)
  # x's padding is invisible to the decoder.
  mem_pad = mem.at[:, 5].set(100.0)
  np.testing.assert_allclose(d, decode(params, y, y_mask, mem_pad, x_mask), atol=1e-6)


def test_one_copy_of_shared_parameters(params):
  ids, mask = _ids(5)
  mem = encode(params, ids, mask)
  e0, d0 = encode(params, ids, mask), decode(params, ids, mask, mem, mask)

  def perturb(sub):
    p = jax.tree_util.tree_map(lambda x: x, params)
    p["encoder"]["layers_0"][sub] = jax.tree_util.tree_map(lambda x: x + 0.05, p["encoder"]["layers_0"][sub])
    return p

  for sub in ("self_attention", "feed_forward"):
    p = perturb(sub)
    assert not np.allclose(e0, encode(p, ids, mask))
    assert not np.allclose(d0, decode(p, ids, mask, mem, mask))
  p = perturb("cross_attention")
  np.testing.assert_array_equal(e0, encode(p, ids, mask))
  assert not np.allclose(d0, decode(p, ids, mask, mem, mask))
  assert not any("decoder" in k for k in _paths(params))


def _batch(seed, batch=2, lx=8, ly=6, n_pred=2):
  r = np.random.default_rng(seed)
  out = {}
  for s, length in (("x", lx), ("y", ly)):
    ids = r.integers(5, CFG.vocab_size, (batch, length)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[0, length - 1:] = 0
    ids[mask == 0] = 0
    pos = np.stack([np.sort(r.choice(length - 1, n_pred, replace=False)) for _ in range(batch)]).astype(np.int32)
    out[f"{s}_masked_ids"] = np.take_along_axis(ids, pos, 1)
    np.put_along_axis(ids, pos, 4, 1)
    out.update({f"{s}_input_ids": ids, f"{s}_input_mask": mask, f"{s}_token_type_ids": np.zeros_like(ids),
                f"{s}_masked_positions": pos, f"{s}_masked_weights": np.ones((batch, n_pred), np.float32)})
  return out


def test_cs_mlm_does_not_reach_the_encoder_pass():
  """d(CS loss)/d(encoder states) is exactly zero; d(IS loss)/d(encoder states) is not."""
  model = VecoModel(CFG)
  batch = _batch(6)
  p = jax.jit(lambda: nn.unbox(model.init(jax.random.PRNGKey(1), batch)))()
  assert "cross_attention" in p["backbone"]["encoder"]["layers_1"] and "pooler" in p["backbone"]

  def sums(eps):
    # Adds `eps[segment]` to every output of VecoNetwork.encode (x and y differ in length).
    def add_eps(next_fun, args, kwargs, context):
      out = next_fun(*args, **kwargs)
      if context.method_name == "encode":
        out = out + eps["x" if out.shape[1] == batch["x_input_ids"].shape[1] else "y"]
      return out
    with nn.intercept_methods(add_eps):
      return model.loss_fn(p, batch, None, deterministic=True)[1]

  eps = {s: jnp.zeros(batch[f"{s}_input_ids"].shape + (CFG.hidden_size,)) for s in ("x", "y")}
  grads = jax.jit(jax.jacrev(lambda e: {k: sums(e)[k] for k in ("is_loss", "cs_loss")}))(eps)
  for s in ("x", "y"):
    assert np.all(np.asarray(grads["cs_loss"][s]) == 0.0)
    assert np.abs(np.asarray(grads["is_loss"][s])).max() > 1e-4
  # The intercepted losses are the model's own.
  ref = model.loss_fn(p, batch, None, deterministic=True)[1]
  np.testing.assert_allclose(sums(eps)["cs_loss"], ref["cs_loss"], rtol=1e-6)


def test_veco_large_parameter_count():
  cfg = TransformerConfig(vocab_size=250002, hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096,
                          max_positions=514, type_vocab_size=1, pad_token_id=1, position_style="roberta",
                          layer_norm_eps=1e-5)
  ids = jnp.zeros((1, 4), jnp.int32)
  shapes = jax.eval_shape(lambda: VecoNetwork(cfg).init(jax.random.PRNGKey(0), ids, ids,
                                                         method=VecoNetwork.init_all))
  n = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(nn.unbox(shapes)))
  assert n == 662_002_834  # XLM-R large (561,192,082, pooler + MLM head) + 24 cross-attentions
  assert abs(n - 662e6) / 662e6 < 0.01


def test_loss_sums_are_the_objectives():
  """The loss is the sum of the IS- and CS-MLM losses, weighted by the masked tokens of both segments (that
  every objective's loss falls in training: the Gin run below)."""
  model = VecoModel(CFG)
  batch = _batch(6)  # the shapes and initialisation of the test above: its compiled init serves this one
  params = jax.jit(lambda: nn.unbox(model.init(jax.random.PRNGKey(1), batch)))()
  _, sums = jax.jit(lambda p: model.loss_fn(p, batch, None, True))(params)
  sums = {k: float(v) for k, v in sums.items()}
  assert set(sums) == {"loss", "is_loss", "cs_loss", "is_accuracy", "cs_accuracy", "weight"}
  assert sums["weight"] == 8.0  # 2 rows x 2 masked tokens, in x and in y
  assert sums["loss"] == pytest.approx(sums["is_loss"] + sums["cs_loss"], rel=1e-6)
  assert 0 < sums["is_loss"] and 0 < sums["cs_loss"]


@pytest.mark.e2e
def test_veco_pretraining_through_gin_logs_and_lowers_every_objective(tmp_path):
  import json

  import gin

  from xtreme_jax import cli
  gin.clear_config(clear_constants=True)
  try:
    # No dropout: on the CPU its random bits take a third of each step.
    assert cli.main(["run", "--gin_file=experiments/veco_pretrain_sample.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.TRAIN_STEPS=56", "--gin.trainer.TrainerConfig.checkpoint_every=28",
                     "--gin.config.TransformerConfig.dropout_rate=0.0",
                     "--gin.config.TransformerConfig.attention_dropout_rate=0.0"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  history = json.loads((tmp_path / "summary.json").read_text())["history"]
  mono, bi = history[0::2], history[1::2]  # batches alternate monolingual / bilingual
  for rows, keys in ((mono, ("is_loss", "cs_loss")), (bi, ("is_loss", "cs_loss", "tlm_loss"))):
    for key in keys:
      first, last = [sum(r[key] for r in part) / len(part) for part in (rows[:8], rows[-8:])]
      assert last < first - 0.3, (key, first, last)
  assert all(r["tlm_loss"] == 0 for r in mono) and all(r["tlm_loss"] > 0 for r in bi)
  # The NLU encoder of the run, exported in the import-hf format, loads like an imported XLM-R.
  from xtreme_jax import hf
  assert cli.main(["export-encoder", str(tmp_path), str(tmp_path / "encoder")]) == 0
  assert sorted(os.listdir(tmp_path / "encoder")) == ["config.json", "params"]  # written all at once
  assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
  config, params = hf.load_imported(str(tmp_path / "encoder"))
  assert config.num_layers == 2 and "cross_attention" not in params["encoder"]["layers_0"]
  assert sorted(params) == ["embeddings", "encoder", "mlm_head", "pooler"]
  # The whole stack (export-veco) keeps the cross-attention: NLG fine-tuning's decoder copies it.
  from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, seq2seq_backbone
  assert cli.main(["export-veco", str(tmp_path), str(tmp_path / "veco")]) == 0
  config, stack = hf.load_imported(str(tmp_path / "veco"))
  backbone = seq2seq_backbone(stack, config, Seq2SeqAssembly(decoder_layers=1))
  np.testing.assert_array_equal(backbone["decoder"]["layers_0"]["cross_attention"]["attention"]["query"]["kernel"],
                                stack["encoder"]["layers_1"]["cross_attention"]["attention"]["query"]["kernel"])
  np.testing.assert_array_equal(stack["encoder"]["layers_1"]["self_attention"]["attention"]["query"]["kernel"],
                                params["encoder"]["layers_1"]["self_attention"]["attention"]["query"]["kernel"])


@pytest.mark.e2e
def test_veco_pretraining_from_seqio_tasks_through_gin(tmp_path):
  """The streamed source (`SeqioPairSource`, tests/test_pretraining_streams.py) through the same run mode."""
  import json

  import gin

  from xtreme_jax import cli
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/veco_pretrain_seqio_sample.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.TRAIN_STEPS=4", "--gin.trainer.TrainerConfig.log_every=1",
                     "--gin.config.TransformerConfig.dropout_rate=0.0",
                     "--gin.config.TransformerConfig.attention_dropout_rate=0.0",
                     # The model, objectives and batch shapes of veco_pretrain_sample.gin (the test above, which
                     # must run just before: its compiled steps serve this run).
                     "--gin.trainer.TrainerConfig.progress_bar=False"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  history = json.loads((tmp_path / "summary.json").read_text())["history"]
  assert len(history) == 4 and all(np.isfinite(h["loss"]) and h["loss"] > 0 for h in history)
  assert history[0]["cs_loss"] > 0 and history[0]["tlm_loss"] == 0 and history[1]["tlm_loss"] > 0  # monolingual, then bilingual


@pytest.mark.e2e
def test_veco_pretraining_resumes_to_identical_parameters(tmp_path):
  import dataclasses

  from xtreme_jax.data import paths
  from xtreme_jax.data.pretraining.pretraining_corpora import VecoPairSource
  from xtreme_jax.training.partitioning import PartitionConfig
  from xtreme_jax.training.trainer import Trainer, TrainerConfig

  @dataclasses.dataclass(frozen=True, eq=False)
  class Crashing(VecoPairSource):
    crash_at: int = -1

    def batch(self, position, host_index=0, host_count=1):
      if position == self.crash_at:
        raise KeyboardInterrupt("simulated preemption")
      return super().batch(position, host_index, host_count)

  # The model, batch shapes and optimizer of veco_pretrain_sample.gin as the Gin test above runs it (just
  # before this one): its compiled steps serve these runs.
  kw = dict(vocabulary="sample_spm.model", data_dir=paths.sample_dir(), monolingual_dir="pretrain",
            parallel_dir="parallel", segment_len=24, batch_size=16, alpha=0.5)
  config = SAMPLE_CONFIG

  def fit(run_dir, source):
    trainer = Trainer(VecoModel(config), SAMPLE_OPTIMIZER,
                      TrainerConfig(train_steps=6, checkpoint_every=3, progress_bar=False), PartitionConfig(),
                      str(run_dir))
    try:
      return trainer.fit(source)[0]
    finally:
      trainer.checkpointer.close()

  straight = fit(tmp_path / "a", Crashing(**kw))
  with pytest.raises(KeyboardInterrupt):
    fit(tmp_path / "b", Crashing(crash_at=4, **kw))
  resumed = fit(tmp_path / "b", Crashing(**kw))
  for a, b in zip(jax.tree_util.tree_leaves(straight.params), jax.tree_util.tree_leaves(resumed.params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.e2e
def test_trainer_resumes_a_streamed_run_to_identical_parameters(tmp_path, monkeypatch, caplog):
  """The streamed source (tests/test_pretraining_streams.py) resumed by the Trainer from its checkpointed input
  state; placed after the resume test above, whose compiled steps it reuses."""
  from test_pretraining_streams import _skips

  from xtreme_jax.data import paths
  from xtreme_jax.data.pretraining import pretraining_streams as ps
  import dataclasses
  import json
  import logging
  import shutil

  import jax

  from xtreme_jax.models.veco import VecoModel
  from xtreme_jax.training.partitioning import PartitionConfig
  from xtreme_jax.training.trainer import Trainer, TrainerConfig

  @dataclasses.dataclass(frozen=True, eq=False)
  class Crashing(ps.SeqioPairSource):
    crash_at: int = -1

    def batch(self, position, host_index=0, host_count=1):
      if position == self.crash_at:
        raise KeyboardInterrupt("simulated preemption")
      return super().batch(position, host_index, host_count)

  kw = dict(vocabulary=paths.sample_vocab(), segment_len=24, batch_size=16,
            monolingual_tasks={lg: f"pretrain_sample_text_{lg}" for lg in ("de", "en", "zh")},
            parallel_tasks={f"{lg}-en": f"pretrain_sample_parallel_{lg}_en" for lg in ("de", "zh")})
  # The model and batch shapes of the resume tests above: their compiled steps serve this one.
  config = SAMPLE_CONFIG

  def fit(run_dir, source, every=2):
    trainer = Trainer(VecoModel(config), SAMPLE_OPTIMIZER,
                      TrainerConfig(train_steps=4, checkpoint_every=every, progress_bar=False), PartitionConfig(),
                      str(run_dir))
    try:
      return trainer.fit(source)[0]
    finally:
      trainer.checkpointer.close()
      source.close()

  def same(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a.params), jax.tree_util.tree_leaves(b.params)):
      np.testing.assert_array_equal(np.asarray(x), np.asarray(y))

  straight = fit(tmp_path / "a", Crashing(**kw))
  with pytest.raises(KeyboardInterrupt):
    fit(tmp_path / "b", Crashing(crash_at=3, **kw))
  saved = tmp_path / "b" / "checkpoints" / "2" / "input" / "host-0.json"
  assert json.loads(saved.read_text().split("\n", 1)[1])["position"] == 2
  skips = _skips(monkeypatch)
  same(fit(tmp_path / "b", Crashing(**kw)), straight)  # a fresh source, restored from the checkpoint's input state
  assert skips and not any(skips)
  # A corrupt input state makes its checkpoint unreadable: the run resumes from the one before; that one has
  # no input state (as an older version's checkpoint): it resumes by replaying the draws, and says so.
  with pytest.raises(KeyboardInterrupt):
    fit(tmp_path / "c", Crashing(crash_at=3, **kw), every=1)
  newest = tmp_path / "c" / "checkpoints" / "3" / "input" / "host-0.json"
  newest.write_text(newest.read_text()[:-20])
  shutil.rmtree(tmp_path / "c" / "checkpoints" / "2" / "input")
  skips.clear()
  with caplog.at_level(logging.WARNING):
    same(fit(tmp_path / "c", Crashing(**kw), every=1), straight)
  messages = [r.getMessage() for r in caplog.records]
  assert any("checkpoint at step 3 is unreadable" in m and "checksum mismatch" in m for m in messages)
  assert [m for m in messages if "no input state" in m] == [
      "the checkpoint holds no input state (written by an older version): the input resumes at batch 2 by "
      "replaying the draws and re-reading every stream up to its position"]
  assert any(skips) and any(p.name.startswith("corrupt-3-") for p in (tmp_path / "c" / "checkpoints").iterdir())


class _Vocab:
  """Specials only; `layout` 'xlmr': <s> x </s></s> y </s> (pad 1), 'wordpiece': [CLS] x [SEP] y [SEP] (pad 0)."""

  vocab_size, unk_id, mask_id = 64, 3, 4

  def __init__(self, layout):
    self.layout = layout
    self.cls_id, self.pad_id, self.sep_id = (0, 1, 2) if layout == "xlmr" else (2, 0, 5)

  def build_inputs(self, a, b):
    ids = [self.cls_id, *a, self.sep_id] + ([self.sep_id] if self.layout == "xlmr" else []) + [*b, self.sep_id]
    return ids, [0] * len(ids)


@dataclasses.dataclass(frozen=True, eq=False)
class _Pairs(PairFeatures):  # the VECO settings are PairFeatures' keyword-only fields
  vocabulary: Any
  data_dir: Any = None


@pytest.mark.parametrize("layout,style,pad,start", [("xlmr", "roberta", 1, 2), ("wordpiece", "absolute", 0, 0)])
def test_tlm_segments_get_the_positions_of_each_segment_alone(layout, style, pad, start):
  """Both parts of the TLM pair start at row 2 (RoBERTa) / 0 (BERT), as each segment's own IS/CS-MLM input."""
  cfg = CFG.replace(position_style=style, pad_token_id=pad)
  x, y = [7, 8, 9], [10, 11]
  f = _Pairs(_Vocab(layout), segment_len=6).pair_features(x, y, 0, 1, True, np.random.default_rng(0))
  tlm_mask = f["tlm_input_mask"][None]
  rows = np.asarray(position_ids(cfg, jnp.asarray(f["tlm_positions"][None]), tlm_mask))[0]
  first, n = len(x) + 2, int(tlm_mask.sum())
  assert rows[0] == rows[first] == start
  assert (rows[n:] == pad).all()
  # Through the embeddings, with word / type embeddings zeroed: each TLM token gets what the same token of
  # its segment gets on its own with the default positions.
  params = {"word_embeddings": {"embedding": np.zeros((64, 32), np.float32)},
            "position_embeddings": {"embedding": np.random.default_rng(1).normal(size=(24, 32)).astype(np.float32)},
            "token_type_embeddings": {"embedding": np.zeros((2, 32), np.float32)},
            "layer_norm": {"scale": np.ones(32, np.float32), "bias": np.zeros(32, np.float32)}}
  embed = jax.jit(lambda ids, mask, pos=None: Embeddings(cfg).apply({"params": params}, ids, mask, positions=pos))
  tlm = embed(f["tlm_input_ids"][None], tlm_mask, f["tlm_positions"][None])[0]
  for s, part in (("x", slice(0, first)), ("y", slice(first, n))):
    alone = embed(f[f"{s}_input_ids"][None], f[f"{s}_input_mask"][None])[0]
    np.testing.assert_array_equal(tlm[part], alone[:part.stop - part.start])


def test_tlm_pair_longer_than_the_position_table_fits_when_each_segment_does():
  """TLM positions restart at the second sentence: only each segment (x, y) must fit the table, not the pair."""
  model = VecoModel(CFG)  # max_positions=24, BERT positions: 24 tokens

  def trace(segment_len):
    pairs = _Pairs(_Vocab("wordpiece"), segment_len=segment_len)
    words = list(range(10, 10 + segment_len))
    f = pairs.pair_features(words, words[::-1], 0, 1, True, np.random.default_rng(0))
    return jax.eval_shape(model.init, jax.random.PRNGKey(0), {k: v[None] for k, v in f.items()})

  trace(22)  # x and y: 24 tokens each; the TLM pair: 47 tokens, rows 0..23 for each part
  msg = ("VECO segment length (x_input_ids) 25 exceeds the position table: max_positions=24 allows 24 tokens; "
         "lower segment_len (a segment is segment_len + 2 tokens)")
  with pytest.raises(errors.ConfigError) as refused:
    trace(23)
  assert str(refused.value) == msg
