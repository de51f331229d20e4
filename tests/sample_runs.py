"""What "a sample run learns" means, checked on a run directory (tests/test_sample_runs.py).

A bundled sample run (the README's sample-run table) runs as a user runs it: `xtreme-jax run --gin_file=FILE`
with only RUN_DIR changed, in a process of its own with the environment a user has (one CPU device, XLA's
optimisations on; the test session's compilation cache). Then, on what it wrote:

* every training loss at least halves (`halves`): per fine-tuned model (`runs.json`'s history), per
  pretraining objective (`summary.json`'s `loss` and each `<objective>_loss`);
* every classifier fits at least 90% of its training examples (XGLUE's WPR is a regression over its ratings:
  its loss halves, its rounded ratings are not checked);
* predictions are not constant: the training language's test predictions (en; the lab: base) of every task hold
  two values or more (parsing: two relations or more; each tree has one root and other heads whatever it learnt).
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np

from xtreme_jax.registry import BENCHMARKS

CLASSIFICATION_KINDS = ("pair_classification",)
PARSING_KINDS = ("parsing", "parsing_gold_pos")
_TEST_ONLY_ENV = ("JAX_DISABLE_MOST_OPTIMIZATIONS", "XLA_FLAGS")  # tests/conftest.py's, not a user's


def run_sample(gin_file: str, run_dir: pathlib.Path) -> None:
  """`xtreme-jax run --gin_file=experiments/<gin_file>` into `run_dir`, as a user starts it."""
  env = {k: v for k, v in os.environ.items() if k not in _TEST_ONLY_ENV}
  proc = subprocess.run([sys.executable, "-c", "from xtreme_jax.cli import main; raise SystemExit(main())", "run",
                         f"--gin_file=experiments/{gin_file}", f"--gin.RUN_DIR='{run_dir}'"],
                        env=env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def halves(losses) -> bool:
  """The mean of the last tenth of `losses` (at least one) is at most half the mean of its first steps (a tenth,
  at least one and at most five)."""
  k = max(1, len(losses) // 10)
  return float(np.mean(losses[-k:])) <= float(np.mean(losses[:min(5, k)])) / 2


def _losses_text(losses) -> str:
  return f"{len(losses)} steps, {losses[0]:.3f} -> {losses[-1]:.3f}"


def check_fine_tuned(run_dir: pathlib.Path, benchmark: str, language: str) -> None:
  """Each model of `runs.json` halves its loss (classification: >= 90% training accuracy), and each task's test
  predictions in `language` (the file of that language in the run's one submission folder, `submission` or
  `submission-<setting>`; not a pseudo-test folder) are not all one value."""
  spec = BENCHMARKS[benchmark]
  runs = json.loads((run_dir / "runs.json").read_text())
  assert runs
  for name, run in runs.items():
    losses = [loss for _, loss in run["history"]]
    assert halves(losses), (name, _losses_text(losses))
    if spec.task(run["task"]).kind in CLASSIFICATION_KINDS:
      assert run["train_accuracy"] >= 90, (name, run["train_accuracy"])
  submissions = [d for d in run_dir.glob("submission*") if d.is_dir() and not d.name.endswith("-pseudo")]
  assert len(submissions) == 1, submissions
  checked = [d for d in submissions[0].iterdir() if d.is_dir() and not spec.task(d.name).retrieval]
  assert checked
  for folder in checked:
    files = [f for f in folder.iterdir()
             if re.fullmatch(rf"(test-)?{language}\.(tsv|json|prediction)", f.name)]
    assert len(files) == 1, (folder, files)
    values = predictions(files[0])
    if spec.task(folder.name).kind in PARSING_KINDS:  # `head<TAB>relation` per word
      values = [line.split("\t")[1] for line in values]
    assert len(set(values)) >= 2, files[0]


def predictions(path: pathlib.Path) -> list:
  """A prediction file's predictions: a JSON object's values (QA answers), else its non-empty lines."""
  text = path.read_text(encoding="utf-8")
  if text.startswith("{"):
    return list(json.loads(text).values())
  return [line for line in text.split("\n") if line.strip()]


def check_pretrained(run_dir: pathlib.Path) -> None:
  """`summary.json`: the loss and each objective's loss halve over the steps that train it (a TLM loss is 0 on a
  monolingual step); a held-out loss, where evaluated, ends below the untrained model's."""
  summary = json.loads((run_dir / "summary.json").read_text())
  rows = summary["history"]
  keys = {k for row in rows for k in row if k == "loss" or (k.endswith("_loss") and not k.startswith("mean_"))}
  assert rows and "loss" in keys, sorted(keys)
  for key in sorted(keys):
    losses = [row[key] for row in rows if row.get(key, 0) > 0]
    assert losses and halves(losses), (key, _losses_text(losses) if losses else "never trained")
  if summary.get("eval"):
    assert summary["eval"][-1]["loss"] < summary["eval"][0]["loss"], summary["eval"]


def check_translations(run_dir: pathlib.Path) -> None:
  """WMT14's sample: the loss halves and the averaged model translates the test sources not all alike."""
  check_pretrained(run_dir)
  assert len(set(predictions(run_dir / "translations-test.txt"))) >= 2


def check_language_id(run_dir: pathlib.Path) -> None:
  """Each layer's probe fits its (balanced) training paragraphs, so its predictions are not one language. Its
  test accuracy is not checked: a random encoder's mean-pooled states tell the sample's 6 test paragraphs apart by
  logit margins of 1e-4 to 1e-2 (50% here, chance 33%), too close to call on every CPU."""
  result = json.loads((run_dir / "language_id.json").read_text())
  assert len(result["train_accuracy"]) == len(result["accuracy"]) >= 1
  assert min(result["train_accuracy"]) >= 90, result["train_accuracy"]


def check_lab(run_dir: pathlib.Path) -> None:
  """Every pretraining and every fine-tuned model of the lab learns (the fine-tuned ones predict the base's test
  set not all alike), and the base language's own scores are far above chance."""
  pretrained = sorted((run_dir / "pretrain").glob("*/run/summary.json"))
  assert pretrained
  for summary in pretrained:
    check_pretrained(summary.parent)
  fine_tuned = sorted(run_dir.glob("**/seed*/runs.json"))
  assert fine_tuned
  for runs in fine_tuned:
    check_fine_tuned(runs.parent, "lab", "base")
  results = json.loads((run_dir / "lab" / "results.json").read_text())
  for task, chance in results["chance"].items():
    base = [scores[task]["base"] for scores in results["conditions"]["pretrained"]["zero_shot"].values()]
    assert base and min(base) >= chance + 40, (task, base, chance)


def _fine_tuned(benchmark: str, language: str = "en"):
  return lambda run_dir: check_fine_tuned(run_dir, benchmark, language)


# The README's sample runs (tests/test_gin_configs.py checks that its table lists these), each with its checks.
SAMPLES = {
    "xtreme_quickstart.gin": _fine_tuned("xtreme"),
    "xglue_quickstart.gin": _fine_tuned("xglue"),
    "xtreme_filter_quickstart.gin": _fine_tuned("xtreme"),
    "mbert_paper_quickstart.gin": _fine_tuned("mbert"),
    "mbert_paper_feature_based_quickstart.gin": _fine_tuned("mbert"),
    "language_id_sample.gin": check_language_id,
    "lab_quickstart.gin": check_lab,
    "pretrain_sample.gin": check_pretrained,
    "veco_pretrain_sample.gin": check_pretrained,
    "mlm_tlm_pretrain_sample.gin": check_pretrained,
    "mlm_pretrain_sample.gin": check_pretrained,
    "veco_pretrain_seqio_sample.gin": check_pretrained,
    "xdae_pretrain_sample.gin": check_pretrained,
    "xfnp_pretrain_sample.gin": check_pretrained,
    "wmt14_tiny.gin": check_translations,
}
