"""WMT14 translation end to end at CPU scale (experiments/wmt14_tiny.gin on a mocked TFDS builder)."""

import json

import gin
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.evaluation import bleu
from xtreme_jax.runs import translate

tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets")

SENTENCES = ["the shop sells bread", "the island is far", "a ferry goes there", "the market opens early"]


def _as_dataset(self, split, decoders=None, read_config=None, shuffle_files=False):
  """English sentences and their 'translations' (the same words reversed: learnable by a tiny model)."""
  del decoders, read_config, shuffle_files
  en = [SENTENCES[i % 4] + f" {i % 7}" for i in range(64 if str(split) == "train" else 8)]
  other = [" ".join(reversed(s.split())) for s in en]
  src, tgt = self.builder_config.language_pair[1], self.builder_config.language_pair[0]
  return tf.data.Dataset.from_tensor_slices({src: en, tgt: other})


@pytest.mark.slow
def test_tiny_wmt14_run_trains_averages_decodes_and_scores(tmp_path):
  gin.clear_config(clear_constants=True)
  try:
    with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=_as_dataset):
      assert cli.main(["run", "--gin_file=experiments/wmt14_tiny.gin", f"--gin.RUN_DIR='{tmp_path}'"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  scores = json.loads((tmp_path / "scores-test.json").read_text())
  hypotheses = (tmp_path / "translations-test.txt").read_text().split("\n")[:-1]
  assert len(hypotheses) == scores["sentences"] == 8
  references = [" ".join(reversed((SENTENCES[i % 4] + f" {i % 7}").split())) for i in range(8)]
  assert scores["sacrebleu"] == pytest.approx(bleu.sacrebleu_detok(hypotheses, references).score)
  assert scores["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
  assert scores["averaged_steps"] == [10, 15, 20]  # the last 3 of the checkpoints every 5 updates


def test_average_last_needs_the_checkpoints_kept(tmp_path):
  from xtreme_jax.models.seq2seq import Seq2SeqModel
  from conftest import TINY
  from xtreme_jax.training.trainer import TrainerConfig
  with pytest.raises(errors.ConfigError, match="average_last=10 but the trainer keeps 3 checkpoints"):
    translate.translate(str(tmp_path), Seq2SeqModel(TINY), None, trainer=TrainerConfig(keep_checkpoints=3))
