"""WMT14 translation end to end at CPU scale (experiments/wmt14_tiny.gin on stand-in records), and its model
translating a benchmark file for FILTER (runs/translate_task.gin)."""

import json

import gin
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data.filter import filter_pairs
from xtreme_jax.data import paths
from xtreme_jax.data.readers.xtreme_data import XtremeData
from xtreme_jax.evaluation import bleu
from xtreme_jax.runs import translate

TIER = "integration"  # conftest.py: this file's tier

def _run(run_dir, *flags):
  gin.clear_config(clear_constants=True)
  try:
    return cli.main(["run", "--gin_file=experiments/wmt14_tiny.gin", f"--gin.RUN_DIR='{run_dir}'", *flags])
  finally:
    gin.clear_config(clear_constants=True)


@pytest.mark.e2e
def test_tiny_wmt14_run_trains_averages_decodes_and_scores(tmp_path):
  """On the bundled En-De sample (no TFDS), shortened (the run as bundled: `-m samples`): the loss halves, the
  averaged model translates each source its own way (a collapsed encoder gave every source one sentence), BLEU
  is scored."""
  assert _run(tmp_path, "--gin.TRAIN_STEPS=300", "--gin.CHECKPOINT_EVERY=50") == 0
  scores = json.loads((tmp_path / "scores-test.json").read_text())
  hypotheses = (tmp_path / "translations-test.txt").read_text().split("\n")[:-1]
  assert len(hypotheses) == scores["sentences"] == 8 and len(set(hypotheses)) >= 2  # not one sentence for all
  sample = paths.sample_parallel_dir()
  references = open(f"{sample}/de-en.de", encoding="utf-8").read().splitlines()[:8]
  assert scores["sacrebleu"] == pytest.approx(bleu.sacrebleu_detok(hypotheses, references).score)
  assert scores["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
  assert scores["averaged_steps"] == [200, 250, 300]  # the last 3 of the checkpoints every 50 updates
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["final_loss"] < summary["first_loss"] / 2

  # the run's model writes a translation FILTER's pairs read (runs/translate_task.gin)
  translations = tmp_path / "translations"
  task_flags = ["--gin_file=runs/translate_task.gin", "--gin.TASK='udpos'", "--gin.LANGUAGE='de'",
                f"--gin.DATA_DIR='{paths.sample_xtreme_dir()}'", f"--gin.TRANSLATIONS_DIR='{translations}'"]
  assert _run(tmp_path, *task_flags) == 0
  data = XtremeData("official", paths.sample_xtreme_dir(), str(translations))
  pairs = filter_pairs.training_pairs("udpos", data, ["de"])
  assert (translations / "UDPOS/translate-train/en-de.tsv").is_file()
  assert len(pairs) == len(data.read("udpos", "en", "train")) and all(p["target"]["tags"] is None for p in pairs)
  assert _run(tmp_path, *task_flags, "--gin.SPLIT='test'") == 2  # an en->de model cannot translate de->en


def test_average_last_needs_the_checkpoints_kept(tmp_path):
  from xtreme_jax.models.seq2seq import Seq2SeqModel
  from conftest import TINY
  from xtreme_jax.training.trainer import TrainerConfig
  with pytest.raises(errors.ConfigError, match="average_last=10 but the trainer keeps 3 checkpoints"):
    translate.translate(str(tmp_path), Seq2SeqModel(TINY), None, trainer=TrainerConfig(keep_checkpoints=3))


def test_decoding_a_checkpoint_without_a_decoder_says_so():
  encoder_only = {"backbone": {"embeddings": {}, "encoder": {}, "pooler": {}}}
  with pytest.raises(errors.ConfigError, match=r"^runs/mlm: the checkpoint has no decoder \(params/backbone/decoder\)"):
    translate.check_decoder(encoder_only, "runs/mlm")
  translate.check_decoder({"backbone": {"decoder": {}}}, "runs/wmt")  # an encoder-decoder passes
