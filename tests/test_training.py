"""Trainer: sharding layouts, exact resume, checkpoint fallback, NaN stop, run-dir guard."""

import dataclasses
import math
import os
import sys

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from conftest import TINY, RandomMlmSource
from xtreme_jax import errors
from xtreme_jax.models.mlm import MlmModel
from xtreme_jax.training import checkpoints, partitioning
from xtreme_jax.training.checkpoints import ForeignRunDirectoryError, RunDirectory
from xtreme_jax.training.optim import OptimizerConfig, freeze_bottom, make_optimizer
from xtreme_jax.training.partitioning import PartitionConfig
from xtreme_jax.training.stopping import NonFiniteLossError, PlateauSchedule
from xtreme_jax.training.trainer import Trainer, TrainerConfig

TIER = "integration"  # conftest.py: this file's tier

LAYOUTS = ("data_parallel", "fsdp", "tensor_parallel")
ALL = ("data", "model")


def make_trainer(run_dir, layout="data_parallel", mesh=(2, 2), devices=None, steps=10, every=5,
                 config=TINY, accum=1, lr=1e-3, optimizer=None, **trainer_kw):
  return Trainer(MlmModel(config), optimizer or OptimizerConfig(learning_rate=lr, warmup_steps=2),
                 TrainerConfig(**{"train_steps": steps, "log_every": 1, "checkpoint_every": every,
                                  "accum_steps": accum, "progress_bar": False, **trainer_kw}),
                 PartitionConfig(layout, mesh), str(run_dir), devices=devices)


def flat(tree):
  return {jax.tree_util.keystr(p): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(jax.device_get(tree))}


def assert_trees_close(a, b, atol):
  fa, fb = flat(a), flat(b)
  assert fa.keys() == fb.keys()
  for k in fa:
    np.testing.assert_allclose(fa[k], fb[k], atol=atol, rtol=0, err_msg=k)


# -- rules table ---------------------------------------------------------------

@pytest.mark.parametrize("layout,expected", [
    ("data_parallel", {"query": P(None, None, None), "word": P(None, None), "intermediate": P(None, None)}),
    ("fsdp", {"query": P(ALL, None, None), "word": P(None, ALL), "intermediate": P(ALL, None)}),
    ("tensor_parallel", {"query": P(None, "model", None), "word": P("model", None), "intermediate": P(None, "model")}),
])
def test_rules_table_partition_specs(layout, expected):
  mesh = partitioning.make_mesh((2, 2))
  boxed = jax.eval_shape(MlmModel(TINY).init, jax.random.PRNGKey(0), RandomMlmSource().batch(0))
  specs = partitioning.param_specs(boxed, mesh, partitioning.RULES[layout])
  layer = specs["backbone"]["encoder"]["layers_0"]
  assert layer["self_attention"]["attention"]["query"]["kernel"] == expected["query"]
  assert specs["backbone"]["embeddings"]["word_embeddings"]["embedding"] == expected["word"]
  assert layer["feed_forward"]["intermediate"]["kernel"] == expected["intermediate"]
  assert partitioning.batch_sharding(mesh, partitioning.RULES[layout]).spec == (
      P("data") if layout == "tensor_parallel" else P(ALL))


def test_indivisible_dimension_is_replicated():
  mesh = partitioning.make_mesh((2, 2))
  config = dataclasses.replace(TINY, vocab_size=67)
  boxed = jax.eval_shape(MlmModel(config).init, jax.random.PRNGKey(0), RandomMlmSource().batch(0))
  specs = partitioning.param_specs(boxed, mesh, partitioning.RULES["tensor_parallel"])
  assert specs["backbone"]["embeddings"]["word_embeddings"]["embedding"] == P(None, None)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_device_bytes_shrink_by_sharded_factor(tmp_path, layout):
  trainer = make_trainer(tmp_path, layout)
  state = trainer.init_state(RandomMlmSource().batch(0))
  expected = 0
  for leaf in jax.tree_util.tree_leaves(state.params):
    factor = math.prod(leaf.shape) // math.prod(leaf.addressable_shards[0].data.shape)
    spec = leaf.sharding.spec
    mesh_factor = math.prod(trainer.mesh.shape[a] for axes in spec if axes
                            for a in (axes if isinstance(axes, tuple) else (axes,)))
    assert factor == mesh_factor
    expected += leaf.size * leaf.dtype.itemsize // factor
  got = partitioning.per_device_bytes(state.params)
  full = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(state.params))
  assert got == expected
  if layout == "data_parallel":
    assert got == full
  else:
    assert got < (0.6 if layout == "tensor_parallel" else 0.3) * full  # most parameters split 2 (TP) or 4 (FSDP) ways


# -- sharded step == single device -------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_sharded_train_step_matches_single_device(tmp_path, layout):
  batch = RandomMlmSource().batch(0)
  single = make_trainer(tmp_path / "one", "data_parallel", (1, 1), devices=jax.devices()[:1])
  s1 = single.init_state(batch)
  s1, m1 = single.train_step(s1, batch)
  multi = make_trainer(tmp_path / "many", layout, (2, 2))
  s8 = multi.init_state(batch)
  s8, m8 = multi.train_step(s8, batch)
  assert len(jax.tree_util.tree_leaves(s8.params)[0].sharding.device_set) == 4
  assert abs(float(m1["loss"]) - float(m8["loss"])) < 1e-5
  assert_trees_close(s1.params, s8.params, atol=1e-5)


def test_gradient_accumulation_equals_full_batch(tmp_path):
  config = dataclasses.replace(TINY, dropout_rate=0.0, attention_dropout_rate=0.0)
  batch = RandomMlmSource().batch(0)
  full = make_trainer(tmp_path / "a", config=config)
  micro = make_trainer(tmp_path / "b", config=config, accum=4)
  sa, ma = full.train_step(full.init_state(batch), batch)
  sb, mb = micro.train_step(micro.init_state(batch), batch)
  assert abs(float(ma["loss"]) - float(mb["loss"])) < 1e-5
  assert_trees_close(sa.params, sb.params, atol=1e-6)


def test_freezing_bottom_layers_keeps_them_fixed(tmp_path):
  batch = RandomMlmSource().batch(0)
  trainer = Trainer(MlmModel(TINY), OptimizerConfig(learning_rate=1e-2, warmup_steps=0, freeze=freeze_bottom(1)),
                    TrainerConfig(train_steps=3, progress_bar=False), PartitionConfig(), str(tmp_path))
  s0 = trainer.init_state(batch)
  before = flat(s0.params)
  s1, _ = trainer.train_step(s0, batch)
  after = flat(s1.params)
  frozen = [k for k in before if "'embeddings'" in k or "'layers_0'" in k]
  moved = [k for k in before if "'layers_1'" in k]
  assert frozen and moved
  assert all(np.array_equal(before[k], after[k]) for k in frozen)
  assert all(not np.array_equal(before[k], after[k]) for k in moved if k.endswith("['kernel']"))


def test_freeze_bottom_names_the_valid_depths():
  params = {"embeddings": {"w": np.ones(2)}, "encoder": {f"layers_{i}": {"w": np.ones(2)} for i in range(2)}}
  assert freeze_bottom(None) is None
  make_optimizer(OptimizerConfig(freeze=freeze_bottom(2)), 10, params)  # embeddings and both layers
  with pytest.raises(errors.ConfigError, match=r"bottom 3 layers, but the encoder has 2: FREEZE_BOTTOM must be 0..2"):
    make_optimizer(OptimizerConfig(freeze=freeze_bottom(3)), 10, params)
  with pytest.raises(errors.ConfigError, match="FREEZE_BOTTOM = -1"):
    freeze_bottom(-1)
  scanned = {"embeddings": {"w": np.ones(2)}, "encoder": {"layers": {"layer": {"w": np.ones((2, 2))}}}}
  with pytest.raises(errors.ConfigError, match="scanned layer stack"):
    make_optimizer(OptimizerConfig(freeze=freeze_bottom(1)), 10, scanned)


def test_no_weight_decay_on_biases_and_layer_norm():
  params = {"dense": {"kernel": np.ones((2, 2)), "bias": np.ones(2)}, "layer_norm": {"scale": np.ones(2)}}
  tx, _ = make_optimizer(OptimizerConfig(learning_rate=1.0, warmup_steps=0, weight_decay=0.5, max_grad_norm=None), 10, params)
  zeros = jax.tree_util.tree_map(np.zeros_like, params)
  updates, _ = tx.update(zeros, tx.init(params), params)
  assert np.allclose(updates["dense"]["kernel"], -0.5) and np.allclose(updates["dense"]["bias"], 0)
  assert np.allclose(updates["layer_norm"]["scale"], 0)


def test_schedule_is_linear_warmup_then_linear_decay():
  _, schedule = make_optimizer(OptimizerConfig(learning_rate=1.0, warmup_steps=4), 12, {"w": np.ones(1)})
  assert [float(schedule(s)) for s in (0, 2, 4, 8, 12)] == pytest.approx([0, 0.5, 1.0, 0.5, 0.0])


# -- resume ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class CrashingSource(RandomMlmSource):
  """Raises when asked for batch `crash_at` (a simulated preemption)."""

  crash_at: int = -1

  def batch(self, position, host_index=0, host_count=1):
    if position == self.crash_at:
      raise KeyboardInterrupt(f"simulated preemption at position {position}")
    return super().batch(position, host_index, host_count)


def _fit(run_dir, source, evaluator=None, **kw):
  trainer = make_trainer(run_dir, **kw)
  try:
    return trainer.fit(source, evaluator=evaluator)
  finally:
    trainer.close()


def test_constant_schedule_keeps_the_rate_after_warmup():
  config = OptimizerConfig(learning_rate=1.0, warmup_steps=4, schedule="constant")
  _, schedule = make_optimizer(config, 12, {"w": np.ones(1)})
  assert [float(schedule(s)) for s in (0, 2, 4, 8, 12)] == pytest.approx([0, 0.5, 1.0, 1.0, 1.0])
  with pytest.raises(errors.ConfigError, match=r"OptimizerConfig.schedule = 'cosine'.*one of \('linear', 'constant'\)"):
    OptimizerConfig(schedule="cosine")


def _scripted(scores):
  """An evaluator returning `scores` one after the other."""
  it = iter(scores)
  return lambda params: {"score": next(it)}


# Dev scores at steps 1..: new bests at 1 and 2, then none: the rate (1e-3) halves at 3, 4 and 5, where
# 1.25e-4 falls below the floor and the run stops (of 10 steps).
PLATEAU_SCORES = [1.0, 2.0, 2.0, 1.0, 0.5]
PLATEAU = dict(steps=10, every=3, eval_every=1, select_metric="score",
               optimizer=OptimizerConfig(learning_rate=1e-3, warmup_steps=0, schedule="constant"),
               plateau=PlateauSchedule(factor=0.5, patience=1, min_learning_rate=2e-4))


def test_plateau_schedule_halves_the_rate_and_stops_below_the_floor(tmp_path):
  state, summary = _fit(tmp_path, RandomMlmSource(), evaluator=_scripted(PLATEAU_SCORES), **PLATEAU)
  rates = [h["learning_rate"] for h in summary["history"]]
  assert rates == pytest.approx([1e-3, 1e-3, 1e-3, 5e-4, 2.5e-4])  # a halving applies from the next step
  assert int(state.step) == 5 and summary["stopped_at"] == 5 and summary["checkpoints"] == [3, 5]
  assert summary["plateau"] == {"scale": 0.125, "waited": 0, "stopped": True}
  assert [e["step"] for e in summary["eval"]] == [1, 2, 3, 4, 5]  # no extra evaluation after stopping
  assert summary["best"]["step"] == 2
  # Re-entered, the stopped run stays stopped: no step, the stored summary.
  again, stored = _fit(tmp_path, RandomMlmSource(), evaluator=_scripted([]), **PLATEAU)
  assert int(again.step) == 5 and stored["stopped_at"] == 5


def test_plateau_state_survives_a_resume(tmp_path):
  straight, _ = _fit(tmp_path / "straight", RandomMlmSource(), evaluator=_scripted(PLATEAU_SCORES), **PLATEAU)
  with pytest.raises(KeyboardInterrupt):  # checkpoint at 3 (one halving), crash fetching step 5's batch
    _fit(tmp_path / "resumed", CrashingSource(crash_at=4), evaluator=_scripted(PLATEAU_SCORES), **PLATEAU)
  resumed, summary = _fit(tmp_path / "resumed", RandomMlmSource(), evaluator=_scripted(PLATEAU_SCORES[3:]),
                          **PLATEAU)
  assert summary["resumed_from_step"] == 3 and summary["stopped_at"] == 5
  assert [h["learning_rate"] for h in summary["history"] if h["step"] > 3] == pytest.approx([5e-4, 2.5e-4])
  fa, fb = flat(straight.params), flat(resumed.params)
  assert all(np.array_equal(fa[k], fb[k]) for k in fa)


def test_plateau_schedule_needs_a_selected_metric():
  with pytest.raises(errors.ConfigError, match="plateau needs select_metric"):
    TrainerConfig(plateau=PlateauSchedule())
  with pytest.raises(errors.ConfigError, match=r"PlateauSchedule.factor = 2: expected a number in \(0, 1\)"):
    PlateauSchedule(factor=2)


def test_interrupted_run_resumes_to_identical_parameters(tmp_path):
  straight, summary = _fit(tmp_path / "straight", RandomMlmSource(), steps=10, every=5)
  assert summary["checkpoints"] == [5, 10]
  with pytest.raises(KeyboardInterrupt):
    _fit(tmp_path / "resumed", CrashingSource(crash_at=7), steps=10, every=5)
  resumed, summary = _fit(tmp_path / "resumed", RandomMlmSource(), steps=10, every=5)
  assert summary["resumed_from_step"] == 5
  fa, fb = flat(straight.params), flat(resumed.params)
  assert all(np.array_equal(fa[k], fb[k]) for k in fa)
  assert int(resumed.step) == 10


@pytest.mark.parametrize("cut", ["every file", "array data"])
def test_truncated_checkpoint_is_set_aside_and_written_again(tmp_path, caplog, monkeypatch, cut):
  straight, _ = _fit(tmp_path / "straight", RandomMlmSource(), steps=10, every=5)
  run = tmp_path / "run"
  with pytest.raises(KeyboardInterrupt):
    _fit(run, CrashingSource(crash_at=9), steps=10, every=4)  # checkpoints at 4 and 8
  ckpts = run / "checkpoints"
  # Cut step 8 off mid-write: truncate every file of its state (or only its arrays' data), and leave a
  # temporary directory like the one an interrupted orbax save leaves.
  for root, _, files in os.walk(ckpts / "8" / "state"):
    for name in files if cut == "every file" or os.path.basename(root) == "d" else ():
      with open(os.path.join(root, name), "r+b") as f:
        f.truncate(max(0, os.path.getsize(os.path.join(root, name)) // 3))
  (ckpts / "12.orbax-checkpoint-tmp-1234").mkdir()
  trainer = make_trainer(run, steps=10, every=4)
  unraisable = []  # what would be printed as tracebacks: a failed read leaves none
  monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
  state, position = trainer.restore_or_init(RandomMlmSource().batch(0))
  assert [str(u.exc_value) for u in unraisable] == []
  assert (int(state.step), position) == (4, 4)
  # Step 8 is renamed out of orbax's step names (reported), so listings show valid steps only.
  aside = [n for n in os.listdir(ckpts) if n.startswith("corrupt-8-")]
  assert len(aside) == 1 and "8" not in os.listdir(ckpts) and trainer.checkpointer.all_steps() == [4]
  assert any(str(ckpts / "8") in r.message and aside[0] in r.message for r in caplog.records)
  trainer.checkpointer.close()
  # The resumed run writes step 8 again, and a further resume restores it.
  with pytest.raises(KeyboardInterrupt):
    _fit(run, CrashingSource(crash_at=9), steps=10, every=4)
  trainer = make_trainer(run, steps=10, every=4)
  state, position = trainer.restore_or_init(RandomMlmSource().batch(0))
  assert (int(state.step), position) == (8, 8)
  trainer.checkpointer.close()
  resumed, summary = _fit(run, RandomMlmSource(), steps=10, every=4)
  assert summary["checkpoints"] == [4, 8, 10]
  fa, fb = flat(straight.params), flat(resumed.params)
  assert all(np.array_equal(fa[k], fb[k]) for k in fa)


@dataclasses.dataclass(frozen=True, eq=False)
class PoisonedSource(RandomMlmSource):
  """Batch `poison_at` carries infinite weights, so its loss is not finite."""

  poison_at: int = 7

  def batch(self, position, host_index=0, host_count=1):
    b = super().batch(position, host_index, host_count)
    if position == self.poison_at:
      b["masked_weights"] = np.full_like(b["masked_weights"], np.inf)
    return b


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
  with pytest.raises(NonFiniteLossError, match=r"non-finite loss=nan.* at step 8.*last good checkpoint is step 5"):
    _fit(tmp_path, PoisonedSource(poison_at=7), steps=10, every=5)
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["5"]
  # Before any checkpoint there is nothing to resume: the advice is to lower the configured rate.
  with pytest.raises(NonFiniteLossError, match=r"at step 1; stopped\. No checkpoint was written .* lower the "
                                               r"learning rate in the configuration"):
    _fit(tmp_path / "early", PoisonedSource(poison_at=0), steps=10, every=5)


# -- run directory -------------------------------------------------------------

def test_foreign_run_directory_is_refused(tmp_path):
  def claim(run_dir, fingerprint):
    """Lock, check, commit (as a run does once started); True if `run_dir` already held this run."""
    with RunDirectory(run_dir, fingerprint) as run:
      resumed = run.check()
      run.commit(0)
    return resumed

  run = str(tmp_path / "run")
  assert claim(run, {"model": {"hidden": 32}, "lr": 1e-3}) is False
  assert claim(run, {"model": {"hidden": 32}, "lr": 1e-3}) is True
  with pytest.raises(ForeignRunDirectoryError, match=r"differing keys: model.hidden \(32 -> 64\)\. Use a new RUN_DIR"):
    claim(run, {"model": {"hidden": 64}, "lr": 1e-3})
  (tmp_path / "other").mkdir()
  (tmp_path / "other" / "notes.txt").write_text("someone's data")
  with pytest.raises(ForeignRunDirectoryError, match="not empty"):
    claim(str(tmp_path / "other"), {"lr": 1})
  assert os.listdir(tmp_path / "other") == ["notes.txt"]  # untouched: no run_config.json, no lock left
  assert (tmp_path / "other" / "notes.txt").read_text() == "someone's data"
  # No helper claims a directory before start-up succeeded (the removed claim_run_directory committed at once).
  assert not hasattr(checkpoints, "claim_run_directory")


def test_scanned_layers_train_like_unrolled(tmp_path):
  config = dataclasses.replace(TINY, dropout_rate=0.0, attention_dropout_rate=0.0)
  batch = RandomMlmSource().batch(0)
  unrolled = make_trainer(tmp_path / "a", config=config)
  scanned = make_trainer(tmp_path / "b", config=dataclasses.replace(config, scan_layers=True, remat=True))
  _, ma = unrolled.train_step(unrolled.init_state(batch), batch)
  _, mb = scanned.train_step(scanned.init_state(batch), batch)
  # Different parameter layouts draw different initial values; both must train.
  assert math.isfinite(float(ma["loss"])) and math.isfinite(float(mb["loss"]))


def test_first_stage_trains_only_the_matching_parameters():
  params = {"cross_attention": {"kernel": np.ones((2, 2))}, "self_attention": {"kernel": np.ones((2, 2))}}
  config = OptimizerConfig(learning_rate=0.1, warmup_steps=0, weight_decay=0.0, max_grad_norm=None,
                           first_stage_steps=2, first_stage_trains="cross_attention/")
  tx, _ = make_optimizer(config, 10, params)
  state = tx.init(params)
  grads = jax.tree_util.tree_map(np.ones_like, params)
  moved = []
  for _ in range(3):
    updates, state = tx.update(grads, state, params)
    moved.append((bool(np.any(updates["cross_attention"]["kernel"])), bool(np.any(updates["self_attention"]["kernel"]))))
  assert moved == [(True, False), (True, False), (True, True)]
  # The late group's Adam starts fresh when it joins: a bias-corrected first step of size lr.
  np.testing.assert_allclose(updates["self_attention"]["kernel"], -0.1, rtol=1e-4)
  with pytest.raises(ValueError, match="matches no parameter"):
    make_optimizer(dataclasses.replace(config, first_stage_trains="nothing"), 10, params)


def test_activation_constraints_reach_the_compiled_step(tmp_path):
  # The networks' logical activation constraints apply only under `jax.set_mesh` (the legacy `with mesh:`
  # context leaves flax's constraints as no-ops). Tensor parallel: queries (batch, length, heads, kv) are
  # split over data and model.
  trainer = make_trainer(tmp_path, "tensor_parallel")
  state = trainer.init_state(RandomMlmSource().batch(0))
  with trainer.sharding_context():
    text = trainer._train_step.lower(state, trainer.to_global(RandomMlmSource().batch(0)),
                                       trainer.hyperparameters).as_text()
  constraints = [line for line in text.splitlines() if "sharding_constraint" in line]
  assert any('[{"data"}, {}, {"model"}, {}]' in line for line in constraints), constraints[:5]
  assert any('[{"data"}, {}, {}]' in line for line in constraints)  # (batch, length, embed)


def test_closing_a_checkpointer_waits_for_orbax_start_up_clean_up(tmp_path, monkeypatch):
  """orbax starts a thread that cleans up unfinished folders when a manager is made, and its own close() does not
  wait for it: a run stopped before its first save must not leave that thread scanning a folder removed next."""
  import asyncio
  import threading

  from orbax.checkpoint import checkpoint_manager

  original = checkpoint_manager.temporary_paths.cleanup_temporary_paths
  done = threading.Event()

  async def slow(*args, **kwargs):
    await asyncio.sleep(0.5)
    await original(*args, **kwargs)
    done.set()

  monkeypatch.setattr(checkpoint_manager.temporary_paths, "cleanup_temporary_paths", slow)
  checkpoints.Checkpointer(str(tmp_path / "checkpoints"), every=1, keep=1).close()
  assert done.is_set()


def test_only_the_one_shot_programs_compile_unoptimised(monkeypatch):
  """A fresh run's init and initial optimizer state are compiled with `programs.ONE_SHOT` (their compile time is
  the user's wait); the steps that run many times keep XLA's optimisations. The options are ones XLA accepts."""
  from xtreme_jax.training import programs
  options = {}
  real_jit = jax.jit

  def recording_jit(fun, **kw):
    name = getattr(fun, "__name__", None) or fun.func.__name__  # the steps are functools.partials
    options[name] = kw.get("compiler_options")
    return real_jit(fun, **kw)

  monkeypatch.setattr(programs.jax, "jit", recording_jit)
  mesh = partitioning.make_mesh((-1, 1))
  programs.compiled.__wrapped__(MlmModel(TINY), OptimizerConfig(), 1, mesh, PartitionConfig().rules,
                                programs.batch_shapes(RandomMlmSource().batch(0)))
  assert options == {"init_params": programs.ONE_SHOT, "start_state": programs.ONE_SHOT, "train_step": None,
                     "eval_step": None, "predict_step": None}
  assert int(real_jit(lambda x: x + 1, compiler_options=programs.ONE_SHOT)(1)) == 2
