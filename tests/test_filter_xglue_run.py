"""FILTER on XGLUE (`runs/xtreme.py`, benchmark "xglue"): a tiny teacher -> student run of tagging (NER) with
the user's translation of its training data, in the official submission layout."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from conftest import TINY
from xtreme_jax.data import paths
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.registry import XGLUE
from xtreme_jax.runs import xtreme
from xtreme_jax.training.optim import OptimizerConfig

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = paths.sample_xglue_dir()
CONFIG = dataclasses.replace(TINY, vocab_size=1024, num_layers=2, max_positions=48, dropout_rate=0.0,
                             attention_dropout_rate=0.0)
RECIPE = xtreme.TaskSettings(epochs=1.0, batch_size=8, seq_len=32, eval_every="epoch", selection="mean_dev",
                             optimizer=OptimizerConfig(learning_rate=1e-3))
TASKS = ("NER",)  # pair classification end to end: tests/test_filter_run.py; XGLUE pairs: tests/test_filter_pairs.py


def _translations(root) -> str:
  """The user's translations, German only: the English NER training file standing in for its translation."""
  os.makedirs(root / "NER" / "translate-train")
  shutil.copy(os.path.join(SAMPLE, XGLUE.task("NER").file("train", "en")),
              root / "NER" / "translate-train" / "en-de.tsv")
  return str(root)


@pytest.mark.e2e
def test_xglue_filter_student_writes_the_official_submission(tmp_path):
  settings = xtreme.FinetuneSettings(tasks={t: RECIPE for t in TASKS}, setting="filter_student", log_every=1)
  run_dir = tmp_path / "run"
  results = xtreme.xglue(str(run_dir), SAMPLE, CONFIG, paths.sample_vocab(), labels_dir=SAMPLE, tasks=TASKS,
                         settings=settings, translations_dir=_translations(tmp_path / "translations"))
  teacher = run_dir / "models" / "NER_filter_teacher"
  assert json.loads((teacher / "soft_labels.json").read_text())["task"] == "NER"
  with np.load(teacher / "soft_labels.npz") as soft:
    rows = len(soft["teacher_logits"])
  # English self-pairs + the German pairs (the same sentences): one row per window of each target side
  assert rows % 2 == 0 and rows >= 2 * len(xglue_readers.read("NER", SAMPLE, "en", "train"))
  for lg in XGLUE.task("NER").test_languages:  # every language predicted in the official layout and scored
    assert (run_dir / "submission-filter_student" / "NER" / f"{lg}.prediction").is_file()
    assert 0 <= results["tasks"]["NER"][lg] <= 1
