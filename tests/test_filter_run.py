"""FILTER in the benchmark runner: teacher -> soft labels -> student on the bundled XTREME sample, tiny preset."""

import json

import gin
import numpy as np
import pytest

from xtreme_jax import cli
from xtreme_jax.data import paths
from xtreme_jax.data.readers.xtreme_data import XtremeData

TIER = "integration"  # conftest.py: this file's tier

SHORT = ["--gin.TASKS=('xnli',)", "--gin.EPOCHS=2.0", "--gin.EVAL_EVERY=1000",
         "--gin.xtreme.FinetuneSettings.train_accuracy_examples=8"]


def _run(tmp_path, *extra):
  gin.clear_config(clear_constants=True)
  try:
    return cli.main(["run", "--gin_file=experiments/xtreme_filter_quickstart.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     *SHORT, *extra])
  finally:
    gin.clear_config(clear_constants=True)


@pytest.mark.e2e
def test_teacher_then_student_end_to_end_and_a_student_without_soft_labels_is_refused(tmp_path, capsys):
  run = tmp_path / "run"
  assert _run(run) == 0
  teacher, student = run / "models" / "xnli_filter_teacher", run / "models" / "xnli_filter_student"
  meta = json.loads((teacher / "soft_labels.json").read_text())
  with np.load(teacher / "soft_labels.npz") as data:
    logits = data["teacher_logits"]
  # rows: the English-English pairs and the sample's 4 English-German and 2 English-Russian translated pairs
  english = len(XtremeData("official", paths.sample_xtreme_dir()).read("xnli", "en", "train"))
  assert meta["task"] == "xnli" and meta["keys"] == ["teacher_logits"] and logits.shape == (english + 6, 3)
  assert np.all(np.isfinite(logits)) and np.std(logits) > 0
  student_config = json.loads((student / "run_config.json").read_text())
  assert student_config["teachers"] == meta["teachers"] and meta["teachers"][0]
  assert student_config["model"]["kl_weight"] == 0.5 and student_config["model"]["local_layers"] == 1
  predictions = (run / "submission-filter_student" / "xnli" / "test-de.tsv").read_text().split()
  assert len(predictions) == 9 and set(predictions) <= {"contradiction", "entailment", "neutral"}
  scores = json.loads((run / "scores-filter_student.json").read_text())
  assert set(scores["tasks"]["xnli"]["languages"]) >= {"de", "en", "ru"}

  # the teacher's own predictions: the trained teacher is reused (no second training)
  mtime = (teacher / "summary.json").stat().st_mtime
  assert _run(run, "--gin.SETTING='filter_teacher'") == 0
  assert (teacher / "summary.json").stat().st_mtime == mtime
  assert len((run / "submission-filter_teacher" / "xnli" / "test-de.tsv").read_text().split()) == 9

  # the two-step route: a student whose teacher has not written soft labels is refused, naming the file
  capsys.readouterr()
  other = tmp_path / "other"
  assert _run(other, "--gin.filter_kinds.FilterSettings.train_teacher=False") == 2
  err = capsys.readouterr().err
  assert f"{other}/models/xnli_filter_teacher/soft_labels.npz, which do not exist; train the teacher first" in err
  assert not (other / "models" / "xnli_filter_student" / "checkpoints").exists()
