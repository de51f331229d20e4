"""The mBERT paper's tasks through the runner (`xtreme.mbert`, runs/mbert.gin) on the bundled sample."""

import json

import gin
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data import paths
from xtreme_jax.data.mbert_data import MbertData
from xtreme_jax.registry.mbert import NER_TAGS


@pytest.mark.slow
def test_ner_and_parsing_zero_shot_from_english_are_predicted_scored_and_reported(tmp_path):
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/mbert_paper_quickstart.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.TASKS=('ner', 'parsing')", "--gin.EPOCHS=4.0", "--gin.FREEZE_BOTTOM=0"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  data = MbertData(data_dir=paths.sample_mbert_dir())
  scores = json.loads((tmp_path / "scores.json").read_text())["tasks"]["ner"]
  assert set(scores["languages"]) == {"en", "de", "es", "nl", "zh"}  # every language with a test file
  for lg in scores["languages"]:
    blocks = (tmp_path / "submission" / "ner" / f"test-{lg}.tsv").read_text().strip("\n").split("\n\n")
    gold = data.read("ner", lg, "test")
    assert [len(b.split("\n")) for b in blocks] == [len(s["tokens"]) for s in gold]
    assert set("\n".join(blocks).split()) <= set(NER_TAGS)
  config = json.loads((tmp_path / "run_config.json").read_text())
  assert "embeddings" in json.dumps(config)  # FREEZE_BOTTOM=0: the embeddings are frozen, recorded in the recipe
  overlap = (tmp_path / "report" / "overlap.md").read_text()  # Figure 3: one row per scored target language
  assert "| ner | de |" in overlap and "| parsing | es |" in overlap and "Pearson r" in overlap
  assert (tmp_path / "report" / "overlap_p_type.png").is_file()
  report = (tmp_path / "report" / "report.md").read_text()
  assert "## ner" in report and "## parsing" in report
  parsing = json.loads((tmp_path / "scores.json").read_text())["tasks"]["parsing"]
  assert set(parsing["languages"]) == {"en", "de", "es"} and 0 <= parsing["score"] <= 100
  for lg in parsing["languages"]:  # HEAD<TAB>RELATION per word, one block per sentence, each a tree
    blocks = (tmp_path / "submission" / "parsing" / f"test-{lg}.tsv").read_text().strip("\n").split("\n\n")
    gold = data.read("parsing", lg, "test")
    heads = [[int(line.split("\t")[0]) for line in b.split("\n")] for b in blocks]
    assert [len(h) for h in heads] == [len(s["tokens"]) for s in gold]
    assert all(h.count(0) == 1 for h in heads)


@pytest.mark.slow
def test_feature_based_parsing_trains_a_bilstm_parser_under_the_plateau_schedule(tmp_path):
  """experiments/mbert_paper_feature_based_quickstart.gin on parsing (the other tasks' feature-based models:
  tests/test_feature_based.py): an evaluation per epoch, the rate halved after each without a new best."""
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/mbert_paper_feature_based_quickstart.gin",
                     f"--gin.RUN_DIR='{tmp_path}'", "--gin.TASKS=('parsing',)", "--gin.EPOCHS=6.0"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  parsing = json.loads((tmp_path / "scores-feature_based.json").read_text())["tasks"]["parsing"]
  assert set(parsing["languages"]) == {"en", "de", "es"} and 0 <= parsing["score"] <= 100
  summary = json.loads((tmp_path / "models" / "parsing_feature_based" / "summary.json").read_text())
  evals = [(e["step"], e["dev_las"]) for e in summary["eval"]]
  assert [step for step, _ in evals] == [1, 2, 3]  # 4 sentences, batches of 8: an epoch is one step
  rate, best, expected = 1e-3, -1.0, {}
  for step, las in evals:  # the schedule by hand: halve after an evaluation that is not a new best
    expected[step] = rate
    rate, best = (rate, las) if las > best else (rate / 2, best)
  assert {h["step"]: h["learning_rate"] for h in summary["history"]} == pytest.approx(expected)
  assert summary["plateau"]["scale"] == pytest.approx(rate / 1e-3) and not summary["plateau"]["stopped"]


def test_feature_based_setting_trains_its_own_models_with_the_feature_based_kind(tmp_path):
  """The runner's wiring of the setting (the model itself: tests/test_feature_based.py)."""
  from conftest import TINY
  from xtreme_jax.runs import task_kinds, xtreme
  runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_mbert_dir(), TINY, paths.sample_vocab(), None,
                               xtreme.FinetuneSettings(setting="feature_based"), None, benchmark="mbert")
  for task, pooled in (("mldoc", True), ("pos", False)):
    kind = runner.kind(task)
    assert isinstance(kind, task_kinds.FeatureBased)
    assert kind.model(runner.spec(task), TINY).pooled == pooled
    assert runner.training_set(task, "de") == (f"{task}_feature_based", ((task, "en", "train"),), None)
  for task, upos in (("parsing", None), ("parsing_gold_pos", 17)):  # the parser on the BiLSTM's states
    model = runner.kind(task).model(runner.spec(task), TINY)
    assert (type(model).__name__, model.lstm_hidden, model.num_upos) == ("BiaffineParserModel", 256, upos)
  with pytest.raises(errors.ConfigError, match=r"takes pair-classification, tagging and parsing tasks, not SpanQa"):
    task_kinds.FeatureBased(task_kinds.SpanQa())


def test_gold_pos_parsing_is_the_parser_with_the_gold_tags():
  import jax
  import numpy as np
  from conftest import TINY
  from xtreme_jax.data.vocabularies import load_vocabulary
  from xtreme_jax.registry.mbert import MBERT
  from xtreme_jax.registry.xtreme import UPOS_TAGS
  from xtreme_jax.runs import task_kinds, xtreme
  spec = MBERT.task("parsing_gold_pos")
  kind = task_kinds.of(spec)
  data = MbertData(data_dir=paths.sample_mbert_dir())
  records = data.read("parsing_gold_pos", "en", "train")
  features, owners = kind.features(spec, records, load_vocabulary(paths.sample_vocab()),
                                   xtreme.TaskSettings(seq_len=24), training=True)
  assert owners == [0, 1, 2, 3] and "upos" in kind.model_keys and kind.predict_keys[-1] == "word_mask"
  assert list(features[0]["upos"][:4]) == [UPOS_TAGS.index(t) for t in records[0]["upos"]]
  batch = {k: np.stack([f[k] for f in features]) for k in kind.model_keys}
  params = kind.model(spec, TINY).init(jax.random.PRNGKey(0), batch)
  assert "upos_embedding" in params and "upos_embedding" not in task_kinds.of(MBERT.task("parsing")).model(
      MBERT.task("parsing"), TINY).init(jax.random.PRNGKey(0), batch)
