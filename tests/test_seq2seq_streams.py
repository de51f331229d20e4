"""SeqioSeq2SeqSource: xDAE / xFNP batches streamed from the generation seqio tasks, resumable, sharded by host."""

import json

import numpy as np
import pytest
import seqio

import xtreme_tasks.pretraining  # noqa: F401  (registers the tasks)
from xtreme_jax import errors
from xtreme_jax.data.pretraining.seq2seq_streams import SeqioSeq2SeqSource

TIER = "integration"  # conftest.py: this file's tier

XDAE = "pretrain_xdae_sample_text_de"
XFNP = "pretrain_xfnp_sample_text_de"
PAD, BOS = 1, 0  # the bundled sample vocabulary's (XLM-R layout)


def _direct(task, lengths, seed, count, shard=None):
  """The first `count` examples of the task read by seqio itself."""
  ds = seqio.get_mixture_or_task(task).get_dataset(lengths, split="train", shuffle=False, seed=seed,
                                                   shard_info=shard, num_epochs=None, try_in_mem_cache=False)
  return list(ds.take(count).as_numpy_iterator())


def _padded(ids, length, value):
  assert len(ids) <= length
  return np.concatenate([ids, np.full(length - len(ids), value, np.int32)])


def _rows(batches):
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_xdae_batches_are_the_task_examples_padded_with_masks():
  source = SeqioSeq2SeqSource(XDAE, source_len=12, target_len=16, batch_size=4, seed=7)
  got = _rows([source.batch(0), source.batch(1)])
  assert source.layout == "xdae" and source.vocab.bos_id == BOS
  assert {k: (v.shape, v.dtype) for k, v in got.items()} == {
      "input_ids": ((8, 12), np.int32), "input_mask": ((8, 12), np.int32), "targets": ((8, 16), np.int32),
      "target_mask": ((8, 16), np.int32), "decoder_start": ((8,), np.int32)}
  examples = _direct(XDAE, {"inputs": 12, "targets": 16}, 7, 8)
  for r, ex in enumerate(examples):
    assert ex["targets"][-1] == 2  # the task's sequences end with EOS
    np.testing.assert_array_equal(got["input_ids"][r], _padded(ex["inputs"], 12, PAD))
    np.testing.assert_array_equal(got["targets"][r], _padded(ex["targets"], 16, PAD))
    assert got["input_mask"][r].tolist() == [1] * len(ex["inputs"]) + [0] * (12 - len(ex["inputs"]))
    assert got["target_mask"][r].tolist() == [1] * len(ex["targets"]) + [0] * (16 - len(ex["targets"]))
  assert got["decoder_start"].tolist() == [BOS] * 8
  masks = got["input_mask"].sum(1)
  assert masks.max() == 12 and masks.min() < 12  # some sources cut at source_len, some padded
  shapes = source.shape_batch()
  assert {k: (v.shape, v.dtype) for k, v in shapes.items()} == {k: ((4, *v.shape[1:]), v.dtype)
                                                                for k, v in got.items()}


def test_xfnp_batches_are_the_task_examples_padded_with_masks():
  source = SeqioSeq2SeqSource(XFNP, source_len=24, target_len=3, batch_size=4, seed=3)
  got = source.batch(0)
  assert source.layout == "xfnp"
  assert sorted(got) == sorted(["input_ids", "input_mask", "targets", "target_mask", "target_positions",
                                "target_offsets", "decoder_inputs"])
  assert all(v.shape == (4, 24 if k.startswith("input") else 3) and v.dtype == np.int32 for k, v in got.items())
  lengths = dict.fromkeys(("targets", "target_positions", "target_offsets", "decoder_inputs"), 3)
  examples = _direct(XFNP, {"inputs": 24, **lengths}, 3, 4)
  for r, ex in enumerate(examples):
    np.testing.assert_array_equal(got["input_ids"][r], _padded(ex["inputs"], 24, PAD))
    for k, value in (("targets", PAD), ("decoder_inputs", PAD), ("target_positions", 0), ("target_offsets", 0)):
      np.testing.assert_array_equal(got[k][r], _padded(ex[k], 3, value))
    assert got["target_mask"][r].tolist() == [1] * len(ex["targets"]) + [0] * (3 - len(ex["targets"]))
  # 24-token sequences have one 3-token span: the task gives it whole
  assert got["target_offsets"][0].tolist() == [0, 1, 2] and got["target_mask"][0].sum() == 3
  assert (np.take_along_axis(got["input_ids"], got["target_positions"] - 1, 1)[:, 0] ==
          got["decoder_inputs"][:, 0]).all()  # the first target's decoder input precedes it in the text


def test_resuming_from_the_input_state_or_by_replay_gives_the_uninterrupted_batches(monkeypatch):
  kw = dict(source_len=10, target_len=8, batch_size=4, seed=1)
  straight = SeqioSeq2SeqSource(XDAE, **kw)
  for p in range(3):
    straight.batch(p)
  state = json.loads(json.dumps(straight.input_state(3)))  # what a checkpoint stores
  assert state["stream"]["cursor"] == 12 and state["stream"]["iterator"]
  expected = [straight.batch(3), straight.batch(4)]

  skips = []
  original = SeqioSeq2SeqSource._dataset
  monkeypatch.setattr(SeqioSeq2SeqSource, "_dataset",
                      lambda self, skip, *a: skips.append(skip) or original(self, skip, *a))
  restored = SeqioSeq2SeqSource(XDAE, **kw)
  restored.restore_input_state(state, 3)
  replayed = SeqioSeq2SeqSource(XDAE, **kw)
  for source in (restored, replayed):
    for p, batch in zip((3, 4), expected):
      got = source.batch(p)
      assert all(np.array_equal(got[k], batch[k]) for k in batch)
  assert skips == [0, 12]  # the restored iterator seeks; the replay skips the 12 examples read before
  # a state saved from a stream opened by skipping restores into the same (skipping) pipeline
  later = json.loads(json.dumps(replayed.input_state(5)))
  again = SeqioSeq2SeqSource(XDAE, **kw)
  again.restore_input_state(later, 5)
  got, batch = again.batch(5), straight.batch(5)
  assert all(np.array_equal(got[k], batch[k]) for k in batch) and skips[2:] == [12]

  with pytest.raises(errors.ConfigError, match="seed"):
    SeqioSeq2SeqSource(XDAE, **{**kw, "seed": 2}).restore_input_state(state, 3)
  with pytest.raises(errors.DataError, match="of batch 3"):
    SeqioSeq2SeqSource(XDAE, **kw).restore_input_state(state, 4)


def test_hosts_read_disjoint_shards():
  kw = dict(source_len=10, target_len=8, batch_size=4, seed=5)
  seen = []
  for host in (0, 1):
    source = SeqioSeq2SeqSource(XDAE, **kw)
    got = _rows([source.batch(p, host, 2) for p in range(3)])
    assert got["targets"].shape == (6, 8)
    examples = _direct(XDAE, {"inputs": 10, "targets": 8}, 5, 6, seqio.ShardInfo(host, 2))
    for r, ex in enumerate(examples):
      np.testing.assert_array_equal(got["targets"][r], _padded(ex["targets"], 8, PAD))
    seen.append({tuple(t) for t in got["targets"].tolist()})
  assert len(seen[0]) == len(seen[1]) == 6 and not seen[0] & seen[1]


def test_configuration_errors_name_the_problem():
  with pytest.raises(errors.ConfigError, match=r"unknown seqio task or mixture 'pretrain_xdae_sample_txt'; "
                                               r"did you mean pretrain_xdae_sample_text"):
    SeqioSeq2SeqSource("pretrain_xdae_sample_txt").layout
  with pytest.raises(errors.ConfigError, match="has no feature.s. target_positions, target_offsets, decoder_inputs"):
    SeqioSeq2SeqSource(XDAE, objective="xfnp").layout
  with pytest.raises(errors.ConfigError, match="objective = 'mlm'"):
    SeqioSeq2SeqSource(XDAE, objective="mlm")
  with pytest.raises(errors.ConfigError, match="has its own vocabulary"):
    SeqioSeq2SeqSource(XDAE, vocabulary="/some/spm.model").vocab
  sub = SeqioSeq2SeqSource("pretrain_xdae_sample_text", languages=("de", "sw"))
  assert [t.name for t in sub.members] == ["pretrain_xdae_sample_text_de", "pretrain_xdae_sample_text_sw"]
  with pytest.raises(errors.ConfigError, match="not a generation mixture"):
    SeqioSeq2SeqSource(XDAE, languages=("de",)).seqio_task


@pytest.mark.e2e
@pytest.mark.parametrize("objective", ["xdae", "xfnp"])
def test_sample_experiment_trains_and_exports_the_fine_tuning_checkpoint(objective, tmp_path):
  """experiments/{xdae,xfnp}_pretrain_sample.gin train; `export-seq2seq` writes the encoder-decoder that generation
  fine-tuning loads (`seq2seq_backbone` takes it as it is; xFNP's stream embeddings are left out)."""
  import gin
  import jax
  import orbax.checkpoint as ocp

  from xtreme_jax import cli, hf
  from xtreme_jax.models.base import load_backbone
  from xtreme_jax.models.seq2seq import Seq2SeqModel
  from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, seq2seq_backbone
  from xtreme_jax.networks.seq2seq import Seq2SeqConfig
  run = tmp_path / "run"
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", f"--gin_file=experiments/{objective}_pretrain_sample.gin", f"--gin.RUN_DIR='{run}'",
                     "--gin.TRAIN_STEPS=2", "--gin.trainer.TrainerConfig.log_every=1",
                     "--gin.trainer.TrainerConfig.progress_bar=False",
                     # one language's task and a 1 + 1 layer model: compiles in a few seconds
                     f"--gin.TASK='pretrain_{objective}_sample_text_de'",
                     "--gin.config.TransformerConfig.num_layers=1", "--gin.DECODER_LAYERS=1"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  summary = json.loads((run / "summary.json").read_text())
  assert len(summary["history"]) == 2 and all(np.isfinite(h["loss"]) and h["loss"] > 0 for h in summary["history"])
  assert summary["checkpoints"] == [2] and (run / "checkpoints" / "2").is_dir()

  assert cli.main(["export-seq2seq", str(run), str(tmp_path / "export")]) == 0
  config, exported = hf.load_imported(str(tmp_path / "export"))
  with ocp.StandardCheckpointer() as ckptr:
    params = ckptr.restore(run / "checkpoints" / "2" / "state")["params"]
  assert ("stream_embeddings" in params) == (objective == "xfnp")  # xFNP's, not exported
  trained = params["backbone"]
  assert jax.tree_util.tree_structure(exported) == jax.tree_util.tree_structure(trained)
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(exported),
                                                   jax.tree_util.tree_leaves(trained)))
  # generation fine-tuning's initialisation (`pretrained_loader` with the generation kind's transform)
  model = Seq2SeqModel(config, Seq2SeqConfig(decoder_layers=1))
  batch = {"input_ids": np.full((1, 4), 5, np.int32), "input_mask": np.ones((1, 4), np.int32),
           "targets": np.full((1, 3), 6, np.int32), "target_mask": np.ones((1, 3), np.int32),
           "decoder_start": np.zeros((1,), np.int32)}
  loaded = load_backbone(model.init(jax.random.PRNGKey(1), batch),
                         seq2seq_backbone(exported, config, Seq2SeqAssembly(1, fresh_cross_attention=True)), config)
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(loaded["backbone"]),
                                                   jax.tree_util.tree_leaves(trained)))
  with pytest.raises(errors.ConfigError, match="has 1 decoder layers but the model 2; set Seq2SeqConfig"):
    seq2seq_backbone(exported, config, Seq2SeqAssembly(2))
