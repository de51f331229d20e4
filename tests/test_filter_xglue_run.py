"""FILTER on XGLUE (`runs/xtreme.py`, benchmark "xglue"): a tiny teacher -> student run over tagging and pair
classification with the user's translations, in the official submission layout."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from conftest import TINY
from xtreme_jax.data import paths, xglue_readers
from xtreme_jax.registry import XGLUE
from xtreme_jax.runs import xtreme
from xtreme_jax.training.optim import OptimizerConfig

SAMPLE = paths.sample_xglue_dir()
CONFIG = dataclasses.replace(TINY, vocab_size=1024, num_layers=2, max_positions=48, dropout_rate=0.0,
                             attention_dropout_rate=0.0)
RECIPE = xtreme.TaskSettings(epochs=1.0, batch_size=8, seq_len=32, eval_every="epoch", selection="mean_dev",
                             optimizer=OptimizerConfig(learning_rate=1e-3))
TASKS = ("NER", "NC")  # span QA pairs: tests/test_filter_pairs.py; the QA model: tests/test_filter.py


def _translations(root) -> str:
  """The user's translations, German only: each English training file standing in for its German
  translation, and each NC dev / test file for its English translation (NC has no parallel English)."""
  for task in ("NER", "NC"):
    os.makedirs(root / task / "translate-train")
    shutil.copy(os.path.join(SAMPLE, XGLUE.task(task).file("train", "en")),
                root / task / "translate-train" / "en-de.tsv")
  os.makedirs(root / "NC" / "translate-test")
  for lg in XGLUE.task("NC").test_languages:
    for split in ("dev", "test"):
      shutil.copy(os.path.join(SAMPLE, XGLUE.task("NC").file(split, lg)),
                  root / "NC" / "translate-test" / f"{split}-{lg}-en.tsv")
  return str(root)


@pytest.mark.slow
def test_xglue_filter_student_writes_the_official_submission(tmp_path):
  settings = xtreme.FinetuneSettings(tasks={t: RECIPE for t in TASKS}, setting="filter_student", log_every=1)
  run_dir = tmp_path / "run"
  results = xtreme.xglue(str(run_dir), SAMPLE, CONFIG, paths.sample_vocab(), labels_dir=SAMPLE, tasks=TASKS,
                         settings=settings, translations_dir=_translations(tmp_path / "translations"))
  for task in TASKS:
    teacher = run_dir / "models" / f"{task}_filter_teacher"
    assert json.loads((teacher / "soft_labels.json").read_text())["task"] == task
    with np.load(teacher / "soft_labels.npz") as soft:
      rows = len(next(iter(soft.values())))
    english = len(xglue_readers.read(task, SAMPLE, "en", "train"))
    if task == "NC":  # English self-pairs + the German pairs (the same rows): one row each
      assert rows == 2 * english
    else:  # a sentence gives one row per window of its target side, the same on both
      assert rows % 2 == 0 and rows >= 2 * english
    for lg in XGLUE.task(task).test_languages:
      assert (run_dir / "submission-filter_student" / task / f"{lg}.prediction").is_file()
  nc = (run_dir / "submission-filter_student" / "NC" / "de.prediction").read_text().split()
  assert len(nc) == len(xglue_readers.read("NC", SAMPLE, "de", "test"))
  assert set(nc) <= set(XGLUE.task("NC").labels)
  assert set(results["tasks"]) >= set(TASKS)
