"""One data object for the run mode and the seqio tasks: official layout or TFDS, chosen by one argument."""

import json
import os

import gin
import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets")

from test_xtreme_tfds import NUM_EXAMPLES, _aligned_as_dataset  # noqa: E402  (the consistent mock)

from xtreme_jax import cli, errors  # noqa: E402
from xtreme_jax.data import paths  # noqa: E402
from xtreme_jax.data.readers import xtreme_data, xtreme_readers, xtreme_tfds
from xtreme_jax.data.translation import xtreme_translations
from xtreme_jax.data.readers.xtreme_data import XtremeData  # noqa: E402
from xtreme_jax.runs import run_checks  # noqa: E402

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = paths.sample_xtreme_dir()
SAMPLE_TR = os.path.join(SAMPLE, "translations")


@pytest.fixture
def mocked(monkeypatch):
  # Mocked builders are never "prepared" on disk; availability is what the run mode asks first.
  monkeypatch.setattr(xtreme_data, "_tfds_prepared", lambda name, data_dir: True)
  with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=_aligned_as_dataset):
    yield


def test_official_source_is_the_readers():
  data = XtremeData("official", SAMPLE)
  assert data.read("xnli", "de", "test") == xtreme_readers.read("xnli", SAMPLE, "de", "test")
  assert data.location("panx", "de", "dev") == xtreme_readers.file_path("panx", SAMPLE, "de", "dev")
  assert data.available("xnli", "de", "test") and not data.available("xnli", "sw", "test")
  # Every file a prediction reads (its records' inputs): BUCC's three parts, Tatoeba's two, else the one.
  assert data.locations("bucc2018", "de", "test") == [
      os.path.join(SAMPLE, f"bucc2018/de-en.test.{part}") for part in ("de", "en", "gold")]
  assert data.locations("tatoeba", "de", "test") == [os.path.join(SAMPLE, f"tatoeba/de-en.{lg}") for lg in ("de", "en")]
  assert data.locations("panx", "de", "dev") == [data.location("panx", "de", "dev")]
  assert data.translations_root == SAMPLE_TR  # default <data_dir>/translations
  assert data.read("xnli", "de", "translate_train") == xtreme_translations.read("xnli", SAMPLE_TR, "de",
                                                                                "translate_train")
  with pytest.raises(ValueError, match="expected one of"):
    XtremeData("hdfs", SAMPLE)
  with pytest.raises(ValueError, match="needs data_dir"):
    XtremeData("official", None)


def test_tfds_source_reads_builders_and_falls_back_to_files_for_what_tfds_lacks(mocked):
  data = XtremeData("tfds", None)
  assert data.location("panx", "de", "test") == "tfds:wikiann/de:test"
  assert data.locations("tatoeba", "de", "test") == [data.location("tatoeba", "de", "test")]  # one builder
  rows = data.read("xnli", "de", "test")
  assert len(rows) == NUM_EXAMPLES and set(rows[0]) == {"id", "text_a", "text_b", "label"}
  assert data.location("xnli", "de", "translate_train").startswith("tfds:xtreme_xnli")
  # MLQA translate-test is not in TFDS: without a translations dir that is a clear error ...
  with pytest.raises(ValueError, match="TFDS has no translate_test data for mlqa; set translations_dir"):
    data.read("mlqa", "de", "translate_test")
  assert not data.available("mlqa", "de", "translate_test")
  # ... and with one, the files are read, their question ids checked against the TFDS test split (the mock's
  # random ids are not the sample's).
  with_files = XtremeData("tfds", None, SAMPLE_TR)
  translation = os.path.join(SAMPLE_TR, "MLQA/translate-test/mlqa.translate.test.de-en.json")
  with pytest.raises(errors.DataError, match=rf"^mlqa translate_test de: {translation} has 8 questions but the "
                                             r"original test file tfds:mlqa/de:test has 10; .* holds question ids "):
    with_files.read("mlqa", "de", "translate_test")
  assert not data.available("bucc2018", "de", "test")  # TFDS holds only BUCC's gold pairs


def test_tfds_qa_translate_test_files_are_read_when_the_ids_match(monkeypatch):
  tfds_read = lambda task, data_dir, language, split: xtreme_readers.read(task, SAMPLE, language, split)
  monkeypatch.setattr(xtreme_tfds, "read", tfds_read)  # the TFDS test split: the official questions, any order
  assert XtremeData("tfds", None, SAMPLE_TR).read("mlqa", "de", "translate_test") == xtreme_translations.read(
      "mlqa", SAMPLE_TR, "de", "translate_test")


@pytest.mark.parametrize("task", ["xnli", "pawsx"])
def test_tfds_classification_translate_test_is_refused(task):
  """Translate-test rows follow the official test files line by line; the TFDS test split is shuffled."""
  message = (rf"^{task} translate_test cannot run on TFDS: its translate-test rows are aligned line by line with the "
             r"official test files, but the TFDS test split holds the examples in another \(shuffled\) order, .*; "
             r"use DATA_SOURCE='official' for this setting$")
  with pytest.raises(errors.ConfigError, match=message):
    XtremeData("tfds", None, SAMPLE_TR).read(task, "de", "translate_test")
  official = XtremeData("official", SAMPLE)  # line-aligned with the official test file: read
  assert len(official.read(task, "de", "translate_test")) == len(official.read(task, "de", "test"))


def test_tfds_translate_test_ids_are_checked_as_on_the_official_route(mocked, monkeypatch):
  data = XtremeData("tfds", None)
  assert len(data.read("xquad", "de", "translate_test")) == NUM_EXAMPLES
  tfds_read = xtreme_tfds.read
  renamed = lambda *args: [dict(r, id="renamed") if i == 0 else r for i, r in enumerate(tfds_read(*args))]
  monkeypatch.setattr(xtreme_tfds, "read", renamed)  # the TFDS test split: one question has another id
  with pytest.raises(errors.DataError, match=r"^xquad translate_test de: tfds:xquad/de:translate-test holds question "
                                             r"ids the original test file tfds:xquad/de:test does not have, e\.g\. "):
    data.read("xquad", "de", "translate_test")


def test_tfds_not_prepared_is_unavailable(tmp_path):
  data = XtremeData("tfds", str(tmp_path))
  assert not data.available("panx", "de", "test")
  with pytest.raises(FileNotFoundError, match="no test set for any language in the tfds data"):
    run_checks.test_languages("panx", data, None)


def test_seqio_tasks_follow_the_data_source(mocked):
  import xtreme_tasks.xtreme as xt
  xt.set_data_source("tfds")
  try:
    examples = list(xt.get_task("xnli", "de").get_dataset(None, split="test", shuffle=False).as_numpy_iterator())
    assert len(examples) == NUM_EXAMPLES
    assert {e["label"].decode() for e in examples} <= set(xtreme_readers.XNLI_LABELS)
    with pytest.raises(ValueError, match="expected one of"):
      xt.set_data_source("gcs")
  finally:
    xt.set_data_source(None)
  assert xt.get_data_source() == "official"


@pytest.mark.e2e
def test_run_mode_on_tfds(tmp_path, mocked):
  gin.clear_config(clear_constants=True)
  run_dir = tmp_path / "run"
  try:
    assert cli.main(["run", "--gin_file=experiments/xtreme_quickstart.gin", f"--gin.RUN_DIR='{run_dir}'",
                     "--gin.DATA_SOURCE='tfds'", "--gin.DATA_DIR=None", "--gin.LABELS_DIR=None",
                     "--gin.EPOCHS=1.0", "--gin.BATCH_SIZE=8", "--gin.SELECTION='english_dev'",
                     "--gin.TASKS=('xnli', 'panx')",
                     "--gin.LANGUAGES={'xnli': ['de'], 'panx': ['fr']}"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  config = json.loads((run_dir / "models" / "xnli" / "run_config.json").read_text())
  assert config["data_source"] == "tfds" and config["steps"] == round(NUM_EXAMPLES / 8)
  lines = (run_dir / "submission" / "xnli" / "test-de.tsv").read_text().splitlines()
  assert len(lines) == NUM_EXAMPLES and set(lines) <= set(xtreme_readers.XNLI_LABELS)
  sentences = (run_dir / "submission" / "panx" / "test-fr.tsv").read_text().strip("\n").split("\n\n")
  # The consistent mock gives every sentence 10 tokens: one predicted tag per token.
  assert [len(s.split("\n")) for s in sentences] == [10] * NUM_EXAMPLES
  assert np.all([t in xtreme_readers.PANX_TAGS for s in sentences for t in s.split("\n")])
  # The submission is in TFDS order: its manifest says so, so the scorer refuses official-order labels.
  assert json.loads((run_dir / "submission" / "manifest.json").read_text()) == {"data_source": "tfds"}
  # translate_train on TFDS: the translation comes from the `xtreme_xnli` builder (no translations dir).
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/xtreme_quickstart.gin", f"--gin.RUN_DIR='{run_dir}'",
                     "--gin.DATA_SOURCE='tfds'", "--gin.DATA_DIR=None", "--gin.LABELS_DIR=None",
                     "--gin.EPOCHS=1.0", "--gin.BATCH_SIZE=8", "--gin.SELECTION='english_dev'", "--gin.TASKS=('xnli',)",
                     "--gin.LANGUAGES={'xnli': ['de']}", "--gin.SETTING='translate_train'"]) == 0
  finally:
    gin.clear_config(clear_constants=True)
  config = json.loads((run_dir / "models" / "xnli_translate_train_de" / "run_config.json").read_text())
  assert config["train"] == [["xnli", "en", "train"], ["xnli", "de", "translate_train"]]
  assert config["translations"] == [XtremeData("tfds", None).location("xnli", "de", "translate_train")]
  assert config["translations"][0].startswith("tfds:xtreme_xnli")
  with pytest.raises(ValueError, match="bucc2018 cannot run on TFDS"):
    run_checks.test_languages("bucc2018", XtremeData("tfds", None), None)
