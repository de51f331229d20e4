"""The trainer keeps the device busy: restore without init, prefetched input, metrics fetched in batches."""

import collections
import dataclasses
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import RandomMlmSource
from test_training import CrashingSource, _fit, flat, make_trainer
from xtreme_jax.models.mlm import MlmModel
from xtreme_jax.training import prefetch, programs as programs_module
from xtreme_jax.training.trainer import Trainer

TIER = "integration"  # conftest.py: this file's tier


def _same(a, b) -> bool:
  fa, fb = flat(a), flat(b)
  return fa.keys() == fb.keys() and all(np.array_equal(fa[k], fb[k]) for k in fa)


# -- restore without init ------------------------------------------------------------------------------------

@pytest.fixture
def init_calls(monkeypatch):
  """Counts the calls of the initialising programs (`init_params`, `start_state`) of every Trainer."""
  calls = collections.Counter()
  original = programs_module.compiled

  def counted(name, fn):
    def call(*args, **kwargs):
      calls[name] += 1
      return fn(*args, **kwargs)
    return call

  def programs(*args):
    p = original(*args)
    return dataclasses.replace(p, init_params=counted("init_params", p.init_params),
                               start_state=counted("start_state", p.start_state))

  monkeypatch.setattr(programs_module, "compiled", programs)
  return calls


def test_a_resume_never_runs_the_init_programs(tmp_path, init_calls):
  straight, _ = _fit(tmp_path / "straight", RandomMlmSource(), steps=10, every=5)
  assert init_calls == {"init_params": 1, "start_state": 1}
  init_calls.clear()
  with pytest.raises(KeyboardInterrupt):
    _fit(tmp_path / "resumed", CrashingSource(crash_at=7), steps=10, every=5)
  assert init_calls == {"init_params": 1, "start_state": 1}
  init_calls.clear()
  resumed, summary = _fit(tmp_path / "resumed", RandomMlmSource(), steps=10, every=5)
  assert summary["resumed_from_step"] == 5 and not init_calls  # restored into the eval_shape'd layout
  assert _same(straight.params, resumed.params)


def test_a_pretrained_start_builds_the_optimizer_state_once(tmp_path, init_calls):
  trainer = make_trainer(tmp_path)
  batch = RandomMlmSource().batch(0)
  fresh = trainer.init_state(batch)
  loaded = jax.tree_util.tree_map(lambda x: np.full(x.shape, 0.5, x.dtype), jax.device_get(fresh.params))
  state = trainer.init_state(batch, lambda params: loaded)
  assert init_calls == {"init_params": 2, "start_state": 2}  # one of each per start, none for the optimizer alone
  assert _same(state.params, loaded)
  assert _same(state.opt_state, fresh.opt_state)  # Adam's moments start at zero, whatever the parameters
  trainer.close()


# -- prefetch and deferred metrics --------------------------------------------------------------------------

def test_prefetching_changes_no_number(tmp_path):
  inline, a = _fit(tmp_path / "inline", RandomMlmSource(), steps=8, every=4, prefetch=0)
  ahead, b = _fit(tmp_path / "ahead", RandomMlmSource(), steps=8, every=4, prefetch=3)
  assert _same(inline.params, ahead.params)
  assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]
  source = RandomMlmSource(size=20)
  outputs = {}
  for depth in (0, 2):
    trainer = make_trainer(tmp_path / f"eval{depth}", prefetch=depth)
    trainer.prepare(source.batch(0))
    outputs[depth] = (trainer.evaluate(inline.params, source.eval_batches()),
                      list(trainer.predict(inline.params, source.eval_batches())))
    trainer.close()
  assert outputs[0][0] == outputs[2][0]
  assert all(np.array_equal(x, y) for x, y in zip(outputs[0][1], outputs[2][1]))


def test_step_metrics_are_fetched_every_log_every_steps(tmp_path, monkeypatch):
  fetched = []
  flush = Trainer._flush

  def counted(self, progress):
    if progress.pending:
      fetched.append([step for step, _ in progress.pending])
    flush(self, progress)

  monkeypatch.setattr(Trainer, "_flush", counted)
  _, summary = _fit(tmp_path, RandomMlmSource(), steps=10, every=10, log_every=5)
  assert fetched == [[2, 3, 4, 5], [6, 7, 8, 9, 10]]  # step 1 is checked at once (it compiles)
  assert [h["step"] for h in summary["history"]] == list(range(1, 11))


def test_a_source_error_reaches_the_loop_unchanged(tmp_path):
  @dataclasses.dataclass(frozen=True, eq=False)
  class Broken(RandomMlmSource):
    def batch(self, position, host_index=0, host_count=1):
      if position == 3:
        raise ValueError("batch 3 is broken")
      return super().batch(position, host_index, host_count)

  with pytest.raises(ValueError, match="batch 3 is broken"):
    _fit(tmp_path, Broken(), steps=6, every=3)
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["3"]
  assert not [t for t in threading.enumerate() if t.name == "xtreme-jax-prefetch"]


def test_prefetcher_runs_ahead_by_its_depth_only():
  made = []

  def items():
    for i in range(10):
      made.append(i)
      yield i

  with prefetch.Prefetcher(items(), depth=2) as feed:
    assert next(feed) == 0
    time.sleep(0.2)
    assert made == [0, 1, 2, 3]  # the one handed over, two queued, one waiting to be queued
    assert list(feed) == list(range(1, 10))
  assert list(prefetch.pipelined(lambda x: x * 2, range(5), lag=2, fetch=lambda y: y)) == [0, 2, 4, 6, 8]


# -- overlap ------------------------------------------------------------------------------------------------

SOURCE_S = 0.2


@dataclasses.dataclass(frozen=True, eq=False)
class SlowSource(RandomMlmSource):
  """Takes SOURCE_S to build a batch (`slow=False`: at once)."""

  slow: bool = True

  def batch(self, position, host_index=0, host_count=1):
    if self.slow:
      time.sleep(SOURCE_S)
    return super().batch(position, host_index, host_count)


@dataclasses.dataclass(frozen=True)
class BusyModel(MlmModel):
  """An MLM whose step also multiplies matrices for a while (a device busy for about SOURCE_S on 2 cores)."""

  def loss_fn(self, params, batch, rng, deterministic=False):
    loss, sums = super().loss_fn(params, batch, rng, deterministic)
    x = jnp.full((256, 256), 1e-3, jnp.float32) * batch["input_mask"][0, 0]  # data: not folded at compile time
    busy = jax.lax.fori_loop(0, 40, lambda i, y: jnp.tanh(y @ x), x)
    return loss, {**sums, "loss": sums["loss"] + 0.0 * jax.lax.stop_gradient(busy[0, 0])}  # a metric: not dead


  def predict_batch(self, params, batch):
    x = jnp.full((256, 256), 1e-3, jnp.float32) * batch["input_mask"][0, 0]
    busy = jax.lax.fori_loop(0, 40, lambda i, y: jnp.tanh(y @ x), x)
    return super().predict_batch(params, batch) + 0.0 * busy[0, 0]


def _seconds_per_step(tmp_path, name, slow):
  trainer = make_trainer(tmp_path / name, steps=7, every=100, log_every=6)
  trainer.model = BusyModel(trainer.model.config)
  try:
    _, summary = trainer.fit(SlowSource(slow=slow))
  finally:
    trainer.close()
  return 8 / summary["history"][5]["examples_per_s"]  # steps 2..6 (1 compiles); RandomMlmSource.batch_size = 8


def test_a_slow_source_overlaps_the_step(tmp_path):
  step = _seconds_per_step(tmp_path, "fast-source", slow=False)
  both = _seconds_per_step(tmp_path, "slow-source", slow=True)
  # max(source, step) when both are steady, not their sum: at least half of the shorter one is hidden.
  assert both <= SOURCE_S + step - 0.5 * min(SOURCE_S, step), (step, both)


def test_prediction_fetches_while_the_next_batch_runs(tmp_path):
  trainer = make_trainer(tmp_path, steps=1)
  trainer.model = BusyModel(trainer.model.config)
  source = RandomMlmSource(size=56)  # 7 batches
  params = trainer.init_state(source.batch(0)).params
  list(trainer.predict(params, source.eval_batches()))  # compiles

  def seconds_per_batch(batches):
    t = time.perf_counter()
    assert len(list(trainer.predict(params, batches))) == 7
    return (time.perf_counter() - t) / 7

  def slow_batches():
    for batch in source.eval_batches():
      time.sleep(SOURCE_S)
      yield batch

  step = seconds_per_batch(source.eval_batches())
  both = seconds_per_batch(slow_batches())
  trainer.close()
  assert both <= SOURCE_S + step - 0.5 * min(SOURCE_S, step), (step, both)
