"""Entry point: Gin validation before any work, and the README's main job end to end."""

import json

import gin
import pytest

from xtreme_jax import cli, errors, main

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = "experiments/pretrain_sample.gin"


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


@pytest.mark.parametrize("binding,message", [
    ("--gin.train.pretrain.trian_data=None", "doesn't have a parameter named 'trian_data'"),
    ("--gin.config.TransformerConfig.hiden_size=8", "doesn't have a parameter named 'hiden_size'"),
    ("--gin.TRAIN_STEP=5", "no macro 'TRAIN_STEP'"),
    ("--gin.nonexistent.fn.x=1", "No configurable matching"),
])
def test_unknown_gin_binding_fails_before_any_work(tmp_path, binding, message):
  """`main.main` (the library entry) raises a ConfigError; `cli.main` reports it as one line (tests/test_cli.py)."""
  run_dir = tmp_path / "run"
  with pytest.raises(errors.ConfigError, match=message):
    main.main([f"--gin_file={SAMPLE}", f"--gin.RUN_DIR='{run_dir}'", binding])
  assert not run_dir.exists()  # nothing was read, compiled or written


def test_missing_gin_file_names_the_search_path():
  with pytest.raises(errors.MissingInputError, match="no_such.gin"):
    main.main(["--gin_file=no_such.gin"])


def test_cli_usage(capsys):
  assert cli.main([]) == 2
  assert "import-hf" in capsys.readouterr().out
  assert cli.main(["bogus"]) == 2


@pytest.mark.e2e
def test_sample_pretraining_main_job(tmp_path, capsys):
  run_dir = tmp_path / "run"
  args = [f"--gin_file={SAMPLE}", f"--gin.RUN_DIR='{run_dir}'", "--gin.TRAIN_STEPS=120",
          "--gin.trainer.TrainerConfig.checkpoint_every=60", "--gin.trainer.TrainerConfig.eval_every=60",
          "--gin.trainer.TrainerConfig.log_every=20",
          # No dropout: on the CPU its random bits take a third of each step.
          "--gin.config.TransformerConfig.dropout_rate=0.0", "--gin.config.TransformerConfig.attention_dropout_rate=0.0"]
  assert cli.main(["run", *args]) == 0
  summary = json.loads((run_dir / "summary.json").read_text())
  losses = [h["loss"] for h in summary["history"]]
  assert len(losses) == 120 and summary["checkpoints"] == [60, 120]
  assert sum(losses[-20:]) / 20 < sum(losses[:20]) / 20 - 0.5  # the loss falls
  assert [e["step"] for e in summary["eval"]] == [0, 60, 120]  # step 0: the untrained model's held-out loss
  assert summary["eval"][-1]["loss"] < summary["eval"][0]["loss"] - 0.3  # the held-out loss falls too
  assert (run_dir / "config.gin").exists() and (run_dir / "run_config.json").exists()
  # Metrics go to metrics.jsonl; TensorBoard events only when asked for (this run imports no TensorFlow).
  assert (run_dir / "metrics.jsonl").read_text().count('"step": ') >= 120 // 20
  out = capsys.readouterr().out
  assert "checkpoints [60, 120]" in out
  # Re-running the finished run resumes at the end; a different config is refused.
  gin.clear_config(clear_constants=True)
  assert cli.main(["run", *args]) == 0
  gin.clear_config(clear_constants=True)
  capsys.readouterr()
  assert cli.main(["run", *args, "--gin.LEARNING_RATE=0.5"]) == 2  # a user error: one line
  (line,) = capsys.readouterr().err.splitlines()
  assert line.startswith("error: ") and "learning_rate" in line
  gin.clear_config(clear_constants=True)
  from xtreme_jax.training.checkpoints import ForeignRunDirectoryError
  with pytest.raises(ForeignRunDirectoryError, match="learning_rate"):  # --debug: the exception itself
    cli.main(["run", *args, "--gin.LEARNING_RATE=0.5", "--debug"])
