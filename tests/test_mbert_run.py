"""The mBERT paper's tasks through the runner (`xtreme.mbert`, runs/mbert.gin) on the bundled sample."""

import json

import gin
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers.mbert_data import MbertData
from xtreme_jax.registry.mbert import MLDOC_LABELS, NER_TAGS
from xtreme_jax.registry.xtreme import UPOS_TAGS

TIER = "integration"  # conftest.py: this file's tier


@pytest.mark.e2e
def test_every_task_zero_shot_from_english_is_predicted_scored_and_reported(tmp_path):
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/mbert_paper_quickstart.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.TASKS=('mldoc', 'ner', 'pos', 'parsing')", "--gin.EPOCHS=4.0",
                     "--gin.FREEZE_BOTTOM=0"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  data = MbertData(data_dir=paths.sample_mbert_dir())
  for task in ("mldoc", "ner", "pos"):  # the sample run learns: the loss halves, predictions vary
    summary = json.loads((tmp_path / "models" / task / "summary.json").read_text())
    assert summary["final_loss"] < summary["first_loss"] / 2, task
    assert len(set((tmp_path / "submission" / task / "test-en.tsv").read_text().split())) >= 2, task
  all_scores = json.loads((tmp_path / "scores.json").read_text())["tasks"]
  for task, labels in (("mldoc", MLDOC_LABELS), ("pos", UPOS_TAGS)):  # a label per document / per word
    for lg in all_scores[task]["languages"]:
      lines = (tmp_path / "submission" / task / f"test-{lg}.tsv").read_text().split()
      gold = data.read(task, lg, "test")
      assert len(lines) == (len(gold) if task == "mldoc" else sum(len(s["tokens"]) for s in gold))
      assert set(lines) <= set(labels)
  assert set(all_scores["mldoc"]["languages"]) == {"de", "en", "fr", "zh"}  # the sample's test files
  assert set(all_scores["pos"]["languages"]) == {"de", "en", "es"}
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
    relations = {line.split("\t")[1] for b in blocks for line in b.split("\n")}
    assert len(relations) >= 2, (lg, relations)  # predictions vary: not one relation for every word


class _Stop(Exception):
  pass


def test_feature_based_models_train_under_the_recipes_plateau_schedule(tmp_path, monkeypatch):
  """The recipe's schedule reaches the trainer of every feature-based model (the schedule itself:
  tests/test_training.py; the feature-based parser: tests/test_feature_based.py). Stopped at `fit`."""
  from conftest import TINY
  from xtreme_jax import main
  from xtreme_jax.runs import xtreme
  from xtreme_jax.training.partitioning import PartitionConfig
  from xtreme_jax.training.trainer import PlateauSchedule, Trainer
  gin.clear_config(clear_constants=True)
  try:
    main.parse_gin(["experiments/mbert_paper_feature_based_quickstart.gin"], [f"RUN_DIR='{tmp_path}'"])
    quickstart = gin.get_configurable(xtreme.FinetuneSettings)().recipe("ner")
    assert quickstart.plateau is None and quickstart.feature_based.lstm_hidden == 256  # the sample's dev sets; CPU
    gin.clear_config(clear_constants=True)
    main.parse_gin(["runs/mbert_feature_based.gin", "models/tiny.gin"],  # the recipe on the sample
                   [f"RUN_DIR='{tmp_path}'", f"DATA_DIR='{paths.sample_mbert_dir()}'",
                    f"VOCAB='{paths.sample_vocab()}'", f"LABELS_DIR='{paths.sample_mbert_dir()}'"])
    settings = gin.get_configurable(xtreme.FinetuneSettings)()
  finally:
    gin.clear_config(clear_constants=True)
  seen = []

  def fit(trainer, *args, **kwargs):
    seen.append((trainer.config, trainer.optimizer, trainer.model))
    raise _Stop

  monkeypatch.setattr(Trainer, "fit", fit)
  runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_mbert_dir(), TINY, paths.sample_vocab(), None, settings,
                               PartitionConfig(), benchmark="mbert")
  for task in ("mldoc", "parsing"):
    with pytest.raises(_Stop):
      runner.store.finetuned(task, "de")
  assert len(seen) == 2
  for config, optimizer, _ in seen:
    assert config.plateau == PlateauSchedule(0.5, 1, 1e-5) and config.select_metric
    assert config.eval_every == 1  # an epoch: the sample's 4 English examples fill less than a batch of 32
    assert (optimizer.learning_rate, optimizer.schedule, optimizer.freeze) == (1e-3, "constant", "(^|/)backbone/")
    assert optimizer.max_grad_norm is None  # no clipping: the paper's and the authors' recipe (runs/mbert.gin)
  assert (seen[0][2].hidden, seen[1][2].lstm_hidden) == (768, 768)  # the paper's BiLSTM (Gin)


@pytest.mark.parametrize("gin_file,hidden", [("experiments/mbert_paper_mbert.gin", None),
                                             ("experiments/mbert_paper_feature_based.gin", 768),
                                             ("experiments/mbert_paper_xnli.gin", None),
                                             ("experiments/mbert_paper_xnli_feature_based.gin", 768)])
def test_the_paper_recipes_do_not_clip_gradients_and_use_its_bilstm_size(tmp_path, gin_file, hidden):
  """Neither the paper nor the authors' code clips gradients (crosslingual-nlp: --gradient_clip_val 0); the
  feature-based BiLSTM has the paper's d_h = 768 units per direction."""
  from xtreme_jax import main
  from xtreme_jax.runs import xtreme
  gin.clear_config(clear_constants=True)
  try:
    main.parse_gin([gin_file], [f"RUN_DIR='{tmp_path}'", "DATA_DIR='d'", "LABELS_DIR='d'"])
    settings = gin.get_configurable(xtreme.FinetuneSettings)()
  finally:
    gin.clear_config(clear_constants=True)
  recipes = [settings.recipe(t) for t in ("xnli",)] if "xnli" in gin_file else [
      settings.recipe(t) for t in ("mldoc", "ner", "pos", "parsing")]
  for recipe in recipes:
    assert recipe.optimizer.max_grad_norm is None
    if hidden is not None:
      assert recipe.feature_based.lstm_hidden == hidden


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
    assert kind.model(runner.spec(task), TINY).hidden == 768  # the paper's d_h, FeatureBasedSettings.lstm_hidden
  for task, upos in (("parsing", None), ("parsing_gold_pos", 17)):  # the parser on the BiLSTM's states
    model = runner.kind(task).model(runner.spec(task), TINY)
    assert (type(model).__name__, model.lstm_hidden, model.num_upos) == ("BiaffineParserModel", 768, upos)
  bilstm = task_kinds.FeatureBasedSettings(lstm_hidden=16)
  small = xtreme.FinetuneSettings(setting="feature_based", tasks={"mldoc": xtreme.TaskSettings(feature_based=bilstm)})
  runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_mbert_dir(), TINY, paths.sample_vocab(), None, small,
                               None, benchmark="mbert")
  assert runner.kind("mldoc").model(runner.spec("mldoc"), TINY).hidden == 16
  with pytest.raises(errors.ConfigError, match=r"takes pair-classification, tagging and parsing tasks, not SpanQa"):
    task_kinds.FeatureBased(task_kinds.SpanQa())


def test_parsing_cuts_long_training_sentences_where_evaluation_leaves_them_out():
  """The authors' code truncates a training sentence to the words that fit its window; evaluation windows
  (dev, test) are not cut."""
  from xtreme_jax.data.vocab.vocabularies import load_vocabulary
  from xtreme_jax.registry.mbert import MBERT
  from xtreme_jax.runs import task_kinds, xtreme
  spec, vocab = MBERT.task("parsing"), load_vocabulary(paths.sample_vocab())
  records = MbertData(data_dir=paths.sample_mbert_dir()).read("parsing", "en", "train")
  long_ = max(records, key=lambda r: len(r["tokens"]))
  settings = xtreme.TaskSettings(seq_len=len(long_["tokens"]))  # shorter than its subwords with [CLS] / [SEP]
  features, owners = task_kinds.of(spec).features(spec, records, vocab, settings, training=True)
  assert owners == list(range(len(records)))
  cut = features[records.index(long_)]
  assert 0 < cut["word_mask"].sum() < len(long_["tokens"]) and cut["input_mask"].sum() <= settings.seq_len


def test_gold_pos_parsing_is_the_parser_with_the_gold_tags():
  import jax
  import numpy as np
  from conftest import TINY
  from xtreme_jax.data.vocab.vocabularies import load_vocabulary
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


def test_freezing_more_layers_than_the_model_has_stops_before_any_training(tmp_path, capsys):
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/mbert_paper_quickstart.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.TASKS=('mldoc', 'pos')", "--gin.FREEZE_BOTTOM=5"]) == 2
  finally:
    gin.clear_config(clear_constants=True)
  assert capsys.readouterr().err.splitlines() == [
      "error: freezing the bottom 5 layers, but the encoder has 2: FREEZE_BOTTOM must be 0..2 (0: the embeddings only)"]
  assert not (tmp_path / "run_config.json").exists() and not (tmp_path / "models").exists()
