"""The XGLUE run mode (`runs/xtreme.py`, benchmark "xglue"): one tiny end-to-end run over every task kind on the
bundled sample (official submission layout, scores equal to the scorer's), the pivot-language and multi-language
settings, and the start-up checks."""

import dataclasses
import json
import os
import shutil

import flax.linen as nn
import jax
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.evaluation import xglue_scorer
from xtreme_jax.models.classification import (ClassificationModel, MultiTaskClassificationModel,
                                               RatingRegressionModel)
from xtreme_jax.registry import XGLUE
from xtreme_jax.runs import task_kinds, xtreme
from xtreme_jax.training.optim import OptimizerConfig

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = paths.sample_xglue_dir()
CONFIG = dataclasses.replace(TINY, vocab_size=1024, num_layers=1, max_positions=48, dropout_rate=0.0,
                             attention_dropout_rate=0.0)
RECIPE = xtreme.TaskSettings(epochs=1.0, batch_size=8, seq_len=32, eval_every="epoch", selection="mean_dev",
                             optimizer=OptimizerConfig(learning_rate=1e-3))
QA_RECIPE = dataclasses.replace(RECIPE, seq_len=48, qa=task_kinds.QaSettings(doc_stride=16, max_query_len=16),
                                selection="final")
TASKS = XGLUE.categories["understanding"]  # all nine: tagging, span QA, ranking and pair classification


def _settings(**kw) -> xtreme.FinetuneSettings:
  recipes = {t: QA_RECIPE if XGLUE.task(t).kind == "span_qa" else RECIPE for t in TASKS}
  recipes["WPR"] = dataclasses.replace(RECIPE, ranking=task_kinds.RankingSettings("regression"))  # as runs/xglue.gin
  return xtreme.FinetuneSettings(tasks=recipes, log_every=1, **kw)


def _runner(run_dir, data_dir=SAMPLE, **kw) -> xtreme.XtremeRunner:
  return xtreme.XtremeRunner(str(run_dir), data_dir, CONFIG, paths.sample_vocab(), None, _settings(**kw), None,
                             benchmark="xglue")


@pytest.fixture(scope="module")
def sample_with_german_training(tmp_path_factory):
  """The sample plus German QADSM training data (the English rows standing in for a translation)."""
  root = tmp_path_factory.mktemp("xglue") / "data"
  shutil.copytree(SAMPLE, root)
  shutil.copy(root / "QADSM" / "xglue.qadsm.en.train", root / "QADSM" / "xglue.qadsm.de.train")
  return str(root)


@pytest.fixture(scope="module")
def xglue_run(tmp_path_factory):
  run_dir = tmp_path_factory.mktemp("xglue_run") / "run"
  results = xtreme.xglue(str(run_dir), SAMPLE, CONFIG, paths.sample_vocab(), labels_dir=SAMPLE, tasks=TASKS,
                         settings=_settings())
  return run_dir, results


@pytest.mark.e2e
def test_run_writes_the_official_submission_and_scores_it(xglue_run):
  run_dir, results = xglue_run
  for task in TASKS:
    spec = XGLUE.task(task)
    for lg in spec.test_languages:
      path = run_dir / "submission" / task / f"{lg}.prediction"
      examples = xglue_readers.read(task, SAMPLE, lg, "test")
      if spec.kind == "span_qa":
        assert set(json.loads(path.read_text())) == {ex["id"] for ex in examples}
      elif spec.kind == "tagging":  # one tag per word, a blank line between sentences
        sentences = path.read_text().strip("\n").split("\n\n")
        assert [len(s.split("\n")) for s in sentences] == [len(ex["tokens"]) for ex in examples]
        assert {t for s in sentences for t in s.split("\n")} <= set(spec.labels)
      else:  # one label per input row
        lines = path.read_text().splitlines()
        assert len(lines) == len(examples) and set(lines) <= set(spec.labels)
  # The run's scores are the official scorer's on its submission; the report names each model's selected step.
  assert results["tasks"] == xglue_scorer.score_submission(str(run_dir / "submission"), SAMPLE, "test",
                                                           list(TASKS))["tasks"]
  assert set(results["tasks"]) == set(TASKS)
  assert results["avg_u"] == pytest.approx(sum(r["avg"] for r in results["tasks"].values()) / 9)
  assert json.loads((run_dir / "scores.json").read_text())["tasks"] == results["tasks"]
  report = (run_dir / "report" / "report.md").read_text()
  assert "# XGLUE results (test)" in report and "## Fine-tuning" in report and "mean dev nDCG" in report
  assert (run_dir / "report" / "plots" / "WPR.png").exists()
  assert results["runs"]["WPR"]["criterion"] == "mean dev nDCG over 7 languages"
  wpr_model = json.loads((run_dir / "models" / "WPR" / "run_config.json").read_text())["model"]
  assert wpr_model["num_classes"] == 1  # the rounded-regression head
  assert results["runs"]["MLQA"]["criterion"] == "final"
  assert json.loads((run_dir / "run_config.json").read_text())["mode"] == "xglue"


@pytest.mark.e2e
def test_rerun_keeps_predictions_and_dev_split_goes_to_its_own_folder(xglue_run):
  run_dir, _ = xglue_run
  before = {p: p.stat().st_mtime_ns for p in (run_dir / "submission").rglob("*.prediction")}
  summary = run_dir / "models" / "QADSM" / "summary.json"
  trained = summary.read_text()
  results = xtreme.xglue(str(run_dir), SAMPLE, CONFIG, paths.sample_vocab(), labels_dir=SAMPLE, tasks=("QADSM",),
                         settings=_settings(), split="dev")
  assert {p: p.stat().st_mtime_ns for p in (run_dir / "submission").rglob("*.prediction")} == before
  assert summary.read_text() == trained  # the finished model is reused, not retrained
  assert sorted(p.name for p in (run_dir / "submission-dev" / "QADSM").iterdir()) == [
      "de.prediction", "en.prediction", "fr.prediction"]
  assert results["split"] == "dev" and (run_dir / "scores-dev.json").exists()


@pytest.mark.e2e
def test_pivot_language_trains_on_that_languages_data(sample_with_german_training, tmp_path):
  results = xtreme.xglue(str(tmp_path), sample_with_german_training, CONFIG, paths.sample_vocab(),
                         labels_dir=sample_with_german_training, tasks=("QADSM",),
                         settings=_settings(setting="pivot_language", pivot_language="de"))
  config = json.loads((tmp_path / "models" / "QADSM_pivot_de" / "run_config.json").read_text())
  assert config["train"] == [["QADSM", "de", "train"]]
  assert (tmp_path / "submission-pivot_language-de" / "QADSM" / "fr.prediction").exists()
  assert set(results["tasks"]["QADSM"]) == {"de", "en", "fr", "avg"}


def test_multi_language_mixes_languages_by_rate(sample_with_german_training, tmp_path):
  runner = _runner(tmp_path, sample_with_german_training, setting="multi_language")
  name, sources, _ = runner.training_set("QADSM", "fr")
  assert name == "QADSM_multi_de_en" and sources == (("QADSM", "de", "train"), ("QADSM", "en", "train"))
  de, en = (runner.read(*src) for src in sources)
  assert runner.store.training_examples(sources, None) == de + en  # no rates: the concatenation
  weighted = _runner(tmp_path, sample_with_german_training, setting="multi_language",
                     language_rates={"en": 3.0, "de": 1.0})
  mixed = weighted.store.training_examples(sources, None)
  assert len(mixed) == 60 and mixed[:15] == de[:15] and mixed[15:45] == en and mixed[45:] == en[:15]
  assert weighted.store.model_spec("QADSM", name, sources, None)["language_rates"] == {"en": 3.0, "de": 1.0}


def test_start_up_checks_name_what_is_valid(tmp_path):
  runner = _runner(tmp_path)
  with pytest.raises(errors.ConfigError, match=r"unknown XGLUE task\(s\) \['xnli'\]; valid: \['NER', 'POS'"):
    xtreme.check_run(runner, ("xnli",), None, None)
  with pytest.raises(errors.ConfigError, match="SETTING='translate_train' is not a XGLUE setting"):
    xtreme.check_run(_runner(tmp_path, setting="translate_train"), ("NC",), None, None)
  with pytest.raises(errors.ConfigError, match=r"training language\(s\) \['ja'\] are languages of none of the "
                                               r"tasks \['NC'\]"):
    xtreme.check_run(_runner(tmp_path, setting="pivot_language", pivot_language="ja"), ("NC",), None, None)
  with pytest.raises(errors.MissingInputError,
                     match=r"NC train data for de not found: expected .*NC/xglue.nc.de.train"):
    xtreme.check_run(_runner(tmp_path, setting="pivot_language", pivot_language="de"), ("NC",), None, None)
  with pytest.raises(errors.ConfigError, match=r"all its languages.*'NC': \['en', 'es', 'fr', 'ru'\]"):
    xtreme.check_run(runner, ("NC",), {"NC": ["de"]}, SAMPLE)
  assert xtreme.check_run(runner, ("NC",), {"NC": ["de"]}, None) == {"NC": ["de"]}
  with pytest.raises(errors.ConfigError, match=r"FinetuneSettings.tasks names \['xnli'\], not XGLUE models"):
    xtreme.check_run(xtreme.XtremeRunner(str(tmp_path), SAMPLE, CONFIG, paths.sample_vocab(), None,
                                         xtreme.FinetuneSettings(tasks={"xnli": RECIPE}), None, benchmark="xglue"),
                     ("NC",), None, None)
  with pytest.raises(errors.ConfigError, match="has 1002 ids but the model's vocab_size is 1000"):
    xtreme.check_run(xtreme.XtremeRunner(str(tmp_path), SAMPLE, dataclasses.replace(CONFIG, vocab_size=1000),
                                         paths.sample_vocab(), None, _settings(), None, benchmark="xglue"),
                     ("NC",), None, None)
  with pytest.raises(errors.ConfigError, match=r"two or more pair-classification tasks; got \['NC', 'NER'\] \(not "
                                               r"pair classification: NER\)"):
    xtreme.check_run(_runner(tmp_path, setting="multi_task", multi_tasks=("NC", "NER")), ("NC",), None, None)
  with pytest.raises(errors.ConfigError, match=r"multi_tasks: unknown XGLUE task\(s\) \['nc'\]"):
    xtreme.check_run(_runner(tmp_path, setting="multi_task", multi_tasks=("nc", "QAM")), ("QAM",), None, None)
  with pytest.raises(errors.ConfigError, match="XGLUE has no TFDS builders"):
    xtreme.XtremeRunner(str(tmp_path), SAMPLE, CONFIG, paths.sample_vocab(), None, _settings(), None,
                        data_source="tfds", benchmark="xglue")


@pytest.mark.e2e
def test_multi_task_trains_one_model_with_a_head_per_task(tmp_path):
  results = xtreme.xglue(str(tmp_path), SAMPLE, CONFIG, paths.sample_vocab(), labels_dir=SAMPLE,
                         tasks=("NC", "QADSM"), settings=_settings(setting="multi_task", multi_tasks=("NC", "QADSM")))
  assert sorted(os.listdir(tmp_path / "models")) == ["multi_task_NC_QADSM"]
  model = tmp_path / "models" / "multi_task_NC_QADSM"
  config = json.loads((model / "run_config.json").read_text())
  assert config["train"] == [["NC", "en", "train"], ["QADSM", "en", "train"]]
  assert config["model"]["num_classes"] == [10, 2]
  for task in ("NC", "QADSM"):  # each task's predictions are its own labels
    for lg in XGLUE.task(task).test_languages:
      lines = (tmp_path / "submission-multi_task" / task / f"{lg}.prediction").read_text().splitlines()
      assert lines and set(lines) <= set(XGLUE.task(task).labels)
  run = results["runs"]["multi_task_NC_QADSM"]
  assert run["criterion"] == "mean over 2 tasks of their mean dev accuracy (8 dev sets)"
  assert run["task"] == "NC"  # the recipe it trains with: the first task's
  metrics = [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]
  dev = next(m for m in metrics if "eval/dev_accuracy" in m)
  nc = [dev[f"eval/dev_accuracy/NC/{lg}"] for lg in XGLUE.task("NC").test_languages]
  qadsm = [dev[f"eval/dev_accuracy/QADSM/{lg}"] for lg in XGLUE.task("QADSM").test_languages]
  assert dev["eval/dev_accuracy"] == pytest.approx((sum(nc) / 5 + sum(qadsm) / 3) / 2)


@pytest.mark.parametrize("head,position_style", [("pooler", "absolute"), ("roberta", "roberta")])
def test_each_head_of_the_multi_task_model_is_a_single_task_classifier(head, position_style):
  """Row i's logits are those of a single-task classifier with the shared encoder and head i; the columns beyond
  that task's classes are -1e9, so the loss and the argmax see its classes only."""
  config = dataclasses.replace(CONFIG, position_style=position_style, pad_token_id=1 if head == "roberta" else 0)
  multi = MultiTaskClassificationModel(config, num_classes=(3, 2), head=head)
  batch = multi.dummy_batch(4, 8)
  batch["input_ids"] = np.random.default_rng(0).integers(5, 100, (4, 8)).astype(np.int32)
  batch["task_ids"] = np.array([0, 1, 1, 0], np.int32)
  params = jax.tree_util.tree_map(np.asarray, nn.unbox(multi.init(jax.random.PRNGKey(0), batch)))
  logits = np.asarray(multi.predict_batch(params, batch))
  for task, n in enumerate((3, 2)):
    single = ClassificationModel(config, n, head)
    own = {"backbone": params["backbone"], **{name[len(f"task_{task}_"):]: value for name, value in params.items()
                                             if name.startswith(f"task_{task}_")}}
    rows = batch["task_ids"] == task
    expected = np.asarray(single.predict_batch(own, batch))[rows]
    np.testing.assert_allclose(logits[rows, :n], expected, rtol=1e-5, atol=1e-5)
    assert (logits[rows, n:] == -1e9).all()


def test_a_task_without_the_pivot_language_stays_zero_shot(tmp_path):
  runner = _runner(tmp_path, setting="pivot_language", pivot_language="nl")  # NER has nl, QADSM does not
  assert runner.training_set("NER", "de") == ("NER_pivot_nl", (("NER", "nl", "train"),), None)
  assert runner.training_set("QADSM", "de") == ("QADSM", (("QADSM", "en", "train"),), None)
  multi = _runner(tmp_path, setting="multi_language", train_languages=("en", "nl"))
  assert multi.training_set("QADSM", "de")[1] == (("QADSM", "en", "train"),)  # nl is not a QADSM language


def test_scoring_unlabelled_ground_truth_is_refused_before_training(tmp_path):
  root = tmp_path / "xglue"
  shutil.copytree(SAMPLE, root)
  path = root / "QADSM" / "xglue.qadsm.de.test"
  path.write_text("".join(line.rsplit("\t", 1)[0] + "\n" for line in path.read_text(encoding="utf-8").splitlines()),
                  encoding="utf-8")  # as the release: test rows without their label column
  runner = _runner(tmp_path / "run", str(root))
  with pytest.raises(errors.ConfigError, match=r"xglue.qadsm.de.test has no labels \(the XGLUE release hides its test "
                                               r"labels\); score SPLIT='dev'"):
    xtreme.check_run(runner, ("QADSM",), None, str(root))
  assert xtreme.check_run(runner, ("QADSM",), None, None) == {"QADSM": ["de", "en", "fr"]}


def test_rating_regression_is_squared_error_and_decodes_to_rounded_clipped_ratings():
  model = RatingRegressionModel(CONFIG)
  outputs = jax.numpy.array([[0.4], [2.6], [5.2]])
  batch = {"labels": np.array([1, 3, 4]), "example_weights": np.array([1.0, 1.0, 0.0], np.float32)}
  loss, terms = model.loss_terms(outputs, batch)
  assert float(loss) == pytest.approx(0.6 ** 2 + 0.4 ** 2)  # the third row has weight 0
  assert float(terms["accuracy"]) == 1.0 and float(terms["weight"]) == 2.0  # 2.6 rounds to 3
  kind = task_kinds.RankingRegression()
  decoded = kind.decode(XGLUE.task("WPR"), None, lambda keys: np.array([[-0.7], [1.49], [2.5], [9.0]]),
                       task_kinds.Featurised([], [], []))
  assert decoded == ["0", "1", "2", "4"]  # rint rounds half to even; clipped to the 0-4 scale
