"""The language-ID probe (runs/language_id.py): WiLI reading, per-layer probes, the sample run end to end."""

import json

import gin
import numpy as np
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data import paths
from xtreme_jax.runs import language_id

TIER = "integration"  # conftest.py: this file's tier


def test_wili_is_read_line_by_line_and_filtered(tmp_path):
  texts, labels = language_id.read_wili(paths.sample_wili_dir(), "train", ("deu", "fra"), per_language=2)
  assert labels == ["deu", "fra", "deu", "fra"] and texts[0].startswith("Der Fluss")
  (tmp_path / "x_test.txt").write_text("a\nb\n", encoding="utf-8")
  (tmp_path / "y_test.txt").write_text("eng\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"x_test.txt has 2 lines but .*y_test.txt has 1"):
    language_id.read_wili(str(tmp_path), "test")


def test_probe_accuracy_per_layer():
  rng = np.random.default_rng(0)
  labels = ["a", "b"] * 10
  centers = {"a": np.zeros(4), "b": np.full(4, 3.0)}
  separable = np.stack([centers[y] + 0.1 * rng.normal(size=4) for y in labels])
  noise = rng.normal(size=(20, 4))
  features = np.stack([noise, separable])  # layer 0: no signal, layer 1: separable
  acc = language_id.probe_accuracies(features, labels, features, labels)
  assert acc[1] == 100.0 and len(acc) == 2


@pytest.mark.e2e
def test_sample_probe_run_writes_table_plot_and_json(tmp_path):
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/language_id_sample.gin", f"--gin.RUN_DIR='{tmp_path}'"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  result = json.loads((tmp_path / "language_id.json").read_text())
  assert len(result["accuracy"]) == 3  # the tiny preset: embeddings + 2 layers
  assert all(0 <= a <= 100 for a in result["accuracy"])
  assert result["languages"] == ["deu", "eng", "fra"] and (result["train"], result["test"]) == (18, 6)
  assert "| 2 |" in (tmp_path / "language_id.md").read_text()
  assert (tmp_path / "language_id.png").read_bytes()[:4] == b"\x89PNG"
