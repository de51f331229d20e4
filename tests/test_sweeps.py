"""`xtreme-jax sweep-summary`: the best run of a sweep per model, by its selected dev score."""

import json

from xtreme_jax import cli
from xtreme_jax.runs import sweeps


def _run(root, name, models):
  run = root / name
  for model, (criterion, value) in models.items():
    (run / "models" / model).mkdir(parents=True)
    best = None if value is None else {"step": 10, "metric": "dev_accuracy", "value": value}
    (run / "models" / model / "summary.json").write_text(json.dumps({"train_steps": 10, "best": best}))
  (run / "runs.json").write_text(json.dumps({m: {"task": m, "criterion": c} for m, (c, _) in models.items()}))


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
