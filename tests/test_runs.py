"""Run modes through Gin: finetune from an imported checkpoint, then evaluate it."""

import json

import gin
import pytest

from xtreme_jax import cli, hf
from xtreme_jax.data import paths

TIER = "integration"  # conftest.py: this file's tier

LABELS = ("contradiction", "entailment", "neutral")
ROWS = [
    ("The river runs past the old mill.", "Water flows by the mill.", "entailment"),
    ("Children walk to school.", "The children are asleep at home.", "contradiction"),
    ("She planted tomatoes in the garden.", "She likes gardening.", "neutral"),
    ("Der Zug fährt um sieben ab.", "Der Zug fährt nie.", "contradiction"),
    ("Река течёт в долину.", "Вода течёт.", "entailment"),
    ("河水流过旧磨坊。", "磨坊很旧。", "neutral"),
    ('He said "yes" twice.', 'He said ""yes"".', "entailment"),
    ("يجري النهر بجانب الطاحونة.", "النهر جاف.", "contradiction"),
]


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


@pytest.fixture
def imported_tiny_xlmr(tmp_path):
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  torch.manual_seed(0)
  config = transformers.XLMRobertaConfig(
      vocab_size=1024, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
      max_position_embeddings=130, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)
  transformers.XLMRobertaForMaskedLM(config).save_pretrained(tmp_path / "hf")
  hf.import_hf(str(tmp_path / "hf"), str(tmp_path / "imported"))
  return str(tmp_path / "imported")


@pytest.mark.e2e
def test_finetune_then_evaluate_through_gin(tmp_path, imported_tiny_xlmr):
  data = tmp_path / "data"
  data.mkdir()
  for name in ("train.tsv", "dev.tsv"):
    with open(data / name, "w", encoding="utf-8", newline="") as f:
      f.writelines(f"{a}\t{b}\t{label}\r\n" for a, b, label in ROWS)
  common = [f"--gin.DATA_DIR='{data}'", "--gin.EVAL_FILE='dev.tsv'",
            f"--gin.VOCAB='{paths.sample_dir()}/sample_spm.model'", "--gin.SEQ_LEN=32", "--gin.BATCH_SIZE=8",
            f"--gin.RUN_DIR='{tmp_path / 'run'}'", f"--gin.INIT_CHECKPOINT='{imported_tiny_xlmr}'"]
  assert cli.main(["run", "--gin_file=experiments/finetune_classification.gin", "--gin.TRAIN_FILE='train.tsv'",
                   "--gin.TRAIN_STEPS=6", "--gin.LEARNING_RATE=1e-3", "--gin.HEAD='roberta'", *common]) == 0
  summary = json.loads((tmp_path / "run" / "summary.json").read_text())
  assert summary["checkpoints"] == [6] and len(summary["history"]) == 6
  gin.clear_config(clear_constants=True)
  assert cli.main(["run", "--gin_file=experiments/evaluate_classification.gin", "--gin.HEAD='roberta'", *common]) == 0
  evaluated = json.loads((tmp_path / "run" / "eval_results.json").read_text())
  assert evaluated["step"] == 6
  assert evaluated["accuracy"] == pytest.approx(summary["eval"][-1]["accuracy"])
  assert evaluated["loss"] == pytest.approx(summary["eval"][-1]["loss"], rel=1e-5)


def test_finetune_refuses_mismatched_checkpoint(tmp_path, imported_tiny_xlmr):
  from xtreme_jax.runs.train import pretrained_loader
  from xtreme_jax.networks.config import TransformerConfig
  with pytest.raises(ValueError, match="hidden_size=64 but the model preset has 32"):
    pretrained_loader(imported_tiny_xlmr, TransformerConfig(vocab_size=1024, hidden_size=32, num_layers=2,
                                                             num_heads=4, mlp_dim=256))
