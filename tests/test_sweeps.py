"""`xtreme-jax sweep-summary`: the best run of a sweep per model, by its selected dev score."""

import json

import pytest

from xtreme_jax import cli, errors
from xtreme_jax.runs import sweeps

TIER = "unit"  # conftest.py: this file's tier


def _run(root, name, models, scores=None):
  run = root / name
  for model, (criterion, value) in models.items():
    (run / "models" / model).mkdir(parents=True)
    best = None if value is None else {"step": 10, "metric": "dev_accuracy", "value": value}
    (run / "models" / model / "summary.json").write_text(json.dumps({"train_steps": 10, "best": best}))
  (run / "runs.json").write_text(json.dumps({m: {"task": m, "criterion": c} for m, (c, _) in models.items()}))
  if scores is not None:
    (run / "scores.json").write_text(json.dumps(scores))


def test_best_run_per_model_by_selected_dev_score(tmp_path, capsys):
  _run(tmp_path, "LEARNING_RATE=3e-06", {"xnli": ("mean dev accuracy over 15 languages", 70.0),
                                          "squad": ("final", None)})
  _run(tmp_path, "LEARNING_RATE=5e-06", {"xnli": ("mean dev accuracy over 15 languages", 72.5),
                                          "squad": ("final", None)})
  _run(tmp_path, "LEARNING_RATE=1e-05", {"xnli": ("mean dev accuracy over 15 languages", 71.0)})
  (tmp_path / "not-a-run").mkdir()
  assert cli.main(["sweep-summary", str(tmp_path)]) == 0
  summary = json.loads((tmp_path / "sweep.json").read_text())
  assert summary["runs"] == ["LEARNING_RATE=1e-05", "LEARNING_RATE=3e-06", "LEARNING_RATE=5e-06"]
  assert summary["models"]["xnli"]["best"] == "LEARNING_RATE=5e-06"
  assert summary["models"]["xnli"]["scores"]["LEARNING_RATE=3e-06"] == 70.0
  assert summary["models"]["squad"]["best"] is None  # selected on the final step: nothing to compare
  out = capsys.readouterr().out
  assert "| xnli | mean dev accuracy over 15 languages | 71.00 | 70.00 | **72.50** | LEARNING_RATE=5e-06 |" in out
  assert (tmp_path / "sweep.md").read_text() == sweeps.markdown(summary)


def test_a_folder_without_runs_is_one_clear_error(tmp_path, capsys):
  assert cli.main(["sweep-summary", str(tmp_path)]) == 2
  assert "holds no run directory with a runs.json" in capsys.readouterr().err


def _xtreme_scores(xnli_de, udpos_de):
  return {"tasks": {"xnli": {"languages": {"de": {"accuracy": xnli_de}, "en": {"accuracy": 80.0}}},
                    "udpos": {"languages": {"de": {"f1": udpos_de}}}}}


def test_differences_from_a_baseline_run_are_tabulated_and_plotted(tmp_path):
  criterion = "english dev accuracy"
  _run(tmp_path, "FREEZE_BOTTOM=None", {"xnli": (criterion, 80.0)}, _xtreme_scores(70.0, 85.0))
  _run(tmp_path, "FREEZE_BOTTOM=3", {"xnli": (criterion, 81.0)}, _xtreme_scores(71.5, 84.0))
  _run(tmp_path, "FREEZE_BOTTOM=9", {"xnli": (criterion, 75.0)}, _xtreme_scores(66.0, 80.0))
  assert cli.main(["sweep-summary", str(tmp_path), "--baseline", "FREEZE_BOTTOM=None"]) == 0
  diffs = json.loads((tmp_path / "sweep.json").read_text())["differences"]
  assert diffs["xnli"]["de"] == {"FREEZE_BOTTOM=3": 1.5, "FREEZE_BOTTOM=9": -4.0}
  assert diffs["udpos"]["de"] == {"FREEZE_BOTTOM=3": -1.0, "FREEZE_BOTTOM=9": -5.0}
  assert diffs["xnli"]["en"]["FREEZE_BOTTOM=9"] == 0.0
  assert "| udpos | de | -1.00 | -5.00 |" in (tmp_path / "sweep.md").read_text()
  assert (tmp_path / "sweep_differences.png").read_bytes()[:4] == b"\x89PNG"
  # XGLUE's scores (floats per language) read alike
  assert sweeps.scores_by_language(str(_xglue(tmp_path))) == {"NER": {"de": 0.7, "en": 0.9}}
  assert cli.main(["sweep-summary", str(tmp_path), "--baseline", "nope"]) == 2


def test_a_feature_based_run_is_read_from_its_settings_scores(tmp_path):
  run = _xglue(tmp_path)
  (run / "scores.json").rename(run / "scores-feature_based.json")
  (run / "scores-feature_based-pseudo.json").write_text("{}")  # not test scores: never read
  assert sweeps.scores_by_language(str(run)) == {"NER": {"de": 0.7, "en": 0.9}}
  (run / "scores-translate_train.json").write_text("{}")
  with pytest.raises(errors.ConfigError, match="several settings .*scores-feature_based.json, "
                     "scores-translate_train.json"):
    sweeps.scores_by_language(str(run))


def _xglue(tmp_path):
  run = tmp_path / "xglue_run"
  run.mkdir()
  (run / "scores.json").write_text(json.dumps({"tasks": {"NER": {"de": 0.7, "en": 0.9, "avg": 0.8}}}))
  return run
