"""The XTREME quickstart end to end on the bundled sample (the README's main job)."""

import json

import gin
import pytest

from xtreme_jax import cli
from xtreme_jax.data import paths, xtreme_readers
from xtreme_jax.runs import xtreme


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


def test_test_languages_found_on_disk_and_validated():
  assert xtreme.test_languages("xnli", paths.sample_xtreme_dir(), None) == ["ar", "de", "en", "hi", "ru", "zh"]
  with pytest.raises(ValueError, match=r"xnli: unknown language\(s\) \['xx'\]; valid: \['ar'"):
    xtreme.test_languages("xnli", paths.sample_xtreme_dir(), ["xx"])
  with pytest.raises(FileNotFoundError, match="no test set for any language"):
    xtreme.test_languages("xnli", "/nonexistent", None)


@pytest.mark.slow
def test_quickstart_runs_the_whole_benchmark(tmp_path, capsys):
  run_dir = tmp_path / "run"
  assert cli.main(["run", "--gin_file=experiments/xtreme_quickstart.gin", f"--gin.RUN_DIR='{run_dir}'",
                   "--gin.EPOCHS=1.0"]) == 0
  scores = json.loads((run_dir / "scores.json").read_text())
  assert set(scores["tasks"]) == set(xtreme.TASKS) and not scores["missing_tasks"]
  for task in xtreme.TASKS:
    langs = xtreme.test_languages(task, paths.sample_xtreme_dir(), None)
    assert sorted(scores["tasks"][task]["languages"]) == sorted(langs)
    for lg in langs:
      suffix = "json" if task in ("xquad", "mlqa", "tydiqa") else "tsv"
      assert (run_dir / "submission" / task / f"test-{lg}.{suffix}").exists()
  # Tagging predictions have one tag per token of every test sentence.
  sentences = xtreme_readers.read("panx", paths.sample_xtreme_dir(), "de", "test")
  predicted = (run_dir / "submission" / "panx" / "test-de.tsv").read_text().strip("\n").split("\n\n")
  assert [len(s.split("\n")) for s in predicted] == [len(s["tokens"]) for s in sentences]
  report = run_dir / "report"
  assert (report / "report.md").exists() and (report / "plots" / "xnli.png").exists()
  out = capsys.readouterr().out
  assert "xnli" in out and "tatoeba" in out and "report:" in out
  # The finished run is resumable: a second invocation reuses the fine-tuned models.
  gin.clear_config(clear_constants=True)
  assert cli.main(["run", "--gin_file=experiments/xtreme_quickstart.gin", f"--gin.RUN_DIR='{run_dir}'",
                   "--gin.EPOCHS=1.0", "--gin.TASKS=('xnli',)"]) == 0


@pytest.mark.parametrize("setting,task,lang,expected", [
    ("zero_shot", "panx", "de", ("panx", (("panx", "en", "train"),), None)),
    ("in_language", "panx", "de", ("panx_de", (("panx", "de", "train"),), None)),
    ("in_language_fewshot", "udpos", "ru", ("udpos_ru_fewshot1000", (("udpos", "ru", "train"),), 1000)),
    ("in_language", "xnli", "de", ("xnli", (("xnli", "en", "train"),), None)),  # no in-language data: zero-shot
    ("in_language", "mlqa", "de", ("squad", (("squad", "en", "train"),), None)),
])
def test_training_sets_per_setting(tmp_path, setting, task, lang, expected):
  runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_xtreme_dir(), None, paths.sample_vocab(), None,
                               xtreme.FinetuneSettings(setting=setting), None)
  assert runner.training_set(task, lang) == expected


def test_in_language_multi_uses_every_train_file_on_disk(tmp_path):
  runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_xtreme_dir(), None, paths.sample_vocab(), None,
                               xtreme.FinetuneSettings(setting="in_language_multi"), None)
  name, sources, limit = runner.training_set("panx", "zh")
  assert name == "panx_all" and limit is None
  assert sorted(lg for _, lg, _ in sources) == ["ar", "de", "en", "hi", "ru", "zh"]
  with pytest.raises(ValueError, match="setting='bogus'; expected one of"):
    xtreme.FinetuneSettings(setting="bogus")
