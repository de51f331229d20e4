"""The language-ID probe (runs/language_id.py): WiLI reading, per-layer probes, the sample run end to end."""

import json

import gin
import numpy as np
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data import paths
from xtreme_jax.runs import language_id
from xtreme_jax.training.trainer import PlateauSchedule

import sample_runs

TIER = "integration"  # conftest.py: this file's tier


def test_wili_is_read_line_by_line_and_filtered(tmp_path):
  texts, labels = language_id.read_wili(paths.sample_wili_dir(), "train", ("deu", "fra"), per_language=2)
  assert labels == ["deu", "fra", "deu", "fra"] and texts[0].startswith("Der Fluss")
  (tmp_path / "x_test.txt").write_text("a\nb\n", encoding="utf-8")
  (tmp_path / "y_test.txt").write_text("eng\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"x_test.txt has 2 lines but .*y_test.txt has 1"):
    language_id.read_wili(str(tmp_path), "test")


def test_wili_languages_are_mberts_104_less_those_footnote_5_names():
  """The paper's 99: mBERT's 104 as WiLI labels (both Chinese are `zho`), less hun nob pms pnb (its footnote 5);
  the authors' list (shijie-wu/crosslingual-nlp, src/constant.py LANDID_LABEL) has the same 99."""
  assert len(language_id.MBERT_WILI_NAMES) == 104
  labels = language_id.MBERT_WILI_LABELS
  assert len(labels) == len(set(labels)) == 99 and labels == tuple(sorted(labels))
  assert not {"hun", "nob", "pms", "pnb"} & set(labels) and {"mon", "tha", "zho"} <= set(labels)
  assert set(labels) == set(language_id.MBERT_WILI_NAMES.values()) - set(language_id.NOT_IN_WILI)


def test_dev_paragraphs_are_the_last_of_each_language():
  texts, labels = ["a1", "b1", "a2", "a3", "b2"], ["a", "b", "a", "a", "b"]
  (train, train_labels), (dev, dev_labels) = language_id.split_dev(texts, labels, 0.34)
  assert (train, train_labels) == (["a1", "b1", "a2"], ["a", "b", "a"])
  assert (dev, dev_labels) == (["a3", "b2"], ["a", "b"])
  with pytest.raises(errors.DataError, match=r"1 training paragraph of c; the probe needs at least 2"):
    language_id.split_dev(["x"], ["c"], 0.1)


def _clusters(rng, labels, spread=0.1):
  centers = {"a": np.full(4, -3.0), "b": np.full(4, 3.0), "c": np.asarray([3.0, 0, -3, 0])}
  return np.stack([centers[y] + spread * rng.normal(size=4) for y in labels]).astype(np.float32)


def test_probe_per_layer_is_trained_with_adam_and_selected_on_dev():
  assert language_id.ProbeSettings() == language_id.ProbeSettings(1e-3, 32, 30, PlateauSchedule(0.5, 1, 1e-5))
  rng = np.random.default_rng(0)
  labels = ["a", "b", "c"] * 20
  features = np.stack([rng.normal(size=(60, 4)).astype(np.float32), _clusters(rng, labels)])  # layer 1: separable
  out = language_id.probe_accuracies(features, labels, features[:, :30], labels[:30], features, labels,
                                     language_id.ProbeSettings(learning_rate=0.1, batch_size=8))
  assert out["test"][1] == 100.0 and out["dev"][1] == 100.0 and len(out["test"]) == 2 and out["epochs"][1] >= 1


def test_probe_halves_the_rate_without_a_new_best_dev_score_and_keeps_the_best():
  """Dev labels that contradict the training labels: the first epoch stays the best, the rate halves after each
  later one (patience 1), and training stops once it is below 1e-5: 1e-3 / 2^7, after 1 + 7 epochs."""
  rng = np.random.default_rng(1)
  labels = ["a", "b"] * 16
  x = _clusters(rng, labels)
  flipped = ["b" if y == "a" else "a" for y in labels]
  fit = language_id.fit_probe(x, labels, x, flipped, ("a", "b"), language_id.ProbeSettings(epochs=30))
  assert (fit.epochs, fit.best_epoch) == (8, 1) and fit.learning_rate == pytest.approx(1e-3 / 2 ** 7)
  assert fit.dev_accuracy == language_id.accuracy(fit.params, x, flipped, ("a", "b"))


@pytest.mark.e2e
def test_sample_probe_run_learns_and_writes_table_plot_and_json(tmp_path):
  """The sample as bundled: each layer's probe fits its training paragraphs (`sample_runs.check_language_id`)."""
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/language_id_sample.gin", f"--gin.RUN_DIR='{tmp_path}'"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  result = json.loads((tmp_path / "language_id.json").read_text())
  assert len(result["accuracy"]) == 3  # the tiny preset: embeddings + 2 layers
  assert all(0 <= a <= 100 for a in result["accuracy"])
  assert result["languages"] == ["deu", "eng", "fra"] and (result["train"], result["dev"], result["test"]) == (15, 3, 6)
  assert len(result["dev_accuracy"]) == 3 and result["probe"]["batch_size"] == 4
  sample_runs.check_language_id(tmp_path)
  assert "| 2 |" in (tmp_path / "language_id.md").read_text()
  assert (tmp_path / "language_id.png").read_bytes()[:4] == b"\x89PNG"
