"""seqio tasks generated from the registry (`tasks/xglue.py`, `tasks/xtreme.py`): what they yield is what the runner
reads (every XGLUE task, XTREME's fine-tuned tasks), their metric is the official scorer's, their mixtures follow the
settings."""

import pytest
import seqio

import xtreme_tasks.xglue as xg
from conftest import TINY
from test_seqio_tasks import _examples  # the Task's rows as Python values
from xtreme_jax.data import paths
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.evaluation import xglue_scorer
from xtreme_jax.registry import XGLUE
from xtreme_jax.runs import xtreme

TIER = "unit"  # conftest.py: this file's tier

SAMPLE = paths.sample_xglue_dir()


@pytest.fixture
def sample(monkeypatch):
  monkeypatch.delenv(xg.DATA_DIR_ENV, raising=False)
  xg.set_data_dir(SAMPLE)
  yield SAMPLE
  xg.set_data_dir(None)


def _as_rows(spec, records):
  """The runner's records in the seqio row schema (unlabelled: "" / []; QA answers flattened)."""
  if spec.kind == "span_qa":
    return [{"id": r["id"], "orig_id": r["orig_id"], "title": r["title"], "context": r["context"],
             "question": r["question"], "answers/text": r["answers"]["text"],
             "answers/answer_start": r["answers"]["answer_start"]} for r in records]
  if spec.kind == "tagging":
    return [{"id": r["id"], "tokens": r["tokens"], "tags": r["tags"] or []} for r in records]
  if spec.kind == "generation":
    return [{"id": r["id"], "inputs": r["source"], "targets": r["target"] or ""} for r in records]
  keys = ("id", "text_a", "text_b", "label") + (("group",) if spec.kind == "ranking" else ())
  return [{k: ("" if r[k] is None else r[k]) for k in keys} for r in records]


@pytest.mark.parametrize("task", XGLUE.task_names)
def test_generated_tasks_yield_what_the_runner_reads(sample, tmp_path, task):
  runner = xtreme.XtremeRunner(str(tmp_path), SAMPLE, TINY, paths.sample_vocab(), None, xtreme.FinetuneSettings(),
                               None, benchmark="xglue")
  spec = XGLUE.task(task)
  for split, lg in (("train", "en"), ("dev", spec.test_languages[0]), ("test", spec.test_languages[-1])):
    assert _examples(xg.task_name(task, lg), split) == _as_rows(spec, runner.read(task, lg, split)), (split, lg)


def test_metric_is_the_official_score(sample, tmp_path):
  runner = xtreme.XtremeRunner(str(tmp_path), SAMPLE, TINY, paths.sample_vocab(), None, xtreme.FinetuneSettings(),
                               None, benchmark="xglue")
  dev = {t: runner.read(t, "de", "dev") for t in ("NER", "NC", "WPR")}
  predicted = {"NER": [["O"] * (len(ex["tokens"]) - 1) for ex in dev["NER"]],  # short: padded with O
               "NC": [ex["label"] for ex in dev["NC"][:-1]] + ["autos"],
               "WPR": ["2"] * len(dev["WPR"])}  # all ties
  for task, preds in predicted.items():
    path = tmp_path / task / "de.prediction"
    path.parent.mkdir()
    lines = ["".join(f"{t}\n" for t in tags) for tags in preds] if task == "NER" else [f"{p}\n" for p in preds]
    path.write_text(("\n" if task == "NER" else "").join(lines), encoding="utf-8")
    official = xglue_scorer.score_file(task, "de", str(path), f"{SAMPLE}/{XGLUE.task(task).file('dev', 'de')}")
    assert official < 1.0
    (metric,) = seqio.get_mixture_or_task(xg.task_name(task, "de")).metric_fns
    assert metric(dev[task], preds) == {XGLUE.task(task).score: pytest.approx(official)}, task


def test_generation_metric_is_the_official_bleu(sample, tmp_path):
  """QG / NTG Tasks: `inputs` / `targets` text, the metric the file scorer's lowercased BLEU / 100 of the Task's own
  rows (or reader records, or reference strings) and the predicted texts."""
  rows = _examples("xglue_ntg_fr", "test")
  assert rows[0] == {"id": "NTG-fr-test-0", "inputs": "L'hôpital a ouvert une nouvelle aile pour les enfants, avec "
                     "quarante lits et un jardin.", "targets": "L'hôpital ouvre une nouvelle aile pour les enfants"}
  predicted = ["l'HÔPITAL ouvre une aile pour les enfants"] + [r["targets"] for r in rows[1:]]
  path = tmp_path / "NTG" / "fr.prediction"
  path.parent.mkdir()
  path.write_text("".join(f"{p}\n" for p in predicted), encoding="utf-8")
  gold = f"{SAMPLE}/{xglue_scorer.gold_file('NTG', 'test', 'fr')}"
  official = xglue_scorer.score_file("NTG", "fr", str(path), gold)
  assert 0 < official < 1
  (metric,) = seqio.get_mixture_or_task("xglue_ntg_fr").metric_fns
  references = [r["targets"] for r in rows]
  records = xglue_readers.read("NTG", SAMPLE, "fr", "test")
  for targets in (rows, references, records):
    assert metric(targets, predicted) == {"bleu": pytest.approx(official, rel=1e-12)}
  assert len(_examples("xglue_qg_zero_shot", "train", num_epochs=1)) == 16  # English training pairs
  assert {t.name for t in seqio.get_mixture_or_task("xglue_qg_zero_shot").tasks} == {
      "xglue_qg_en", *(f"xglue_qg_{lg}_eval" for lg in ("de", "es", "fr", "it", "pt"))}


def test_mixtures_follow_the_settings(sample):
  zero_shot = seqio.get_mixture_or_task("xglue_qadsm_zero_shot")
  assert {t.name for t in zero_shot.tasks} == {"xglue_qadsm_en", "xglue_qadsm_de_eval", "xglue_qadsm_fr_eval"}
  assert len(_examples("xglue_qadsm_zero_shot", "train", num_epochs=1)) == 30  # English training data only
  pivot = seqio.get_mixture_or_task("xglue_qadsm_pivot_de")
  assert {t.name for t in pivot.tasks} == {"xglue_qadsm_de", "xglue_qadsm_en_eval", "xglue_qadsm_fr_eval"}
  multi = seqio.get_mixture_or_task("xglue_qadsm_multi_language")
  assert {t.name for t in multi.tasks} == {"xglue_qadsm_de", "xglue_qadsm_en", "xglue_qadsm_fr"}
  with pytest.raises(Exception, match="QADSM/xglue.qadsm.de.train"):  # German training data is user-supplied
    _examples("xglue_qadsm_pivot_de", "train", num_epochs=1)


def test_every_task_and_language_is_registered():
  for spec in XGLUE.tasks:
    for lg in spec.test_languages:
      assert xg.task_name(spec.name, lg) in seqio.TaskRegistry.names()
      assert xg.task_name(spec.name, lg, "eval") in seqio.TaskRegistry.names()
  with pytest.raises(ValueError, match="valid: de en fr"):
    xg.task_name("QADSM", "es")


def test_multi_task_mixture_merges_the_table_9_training_sets(sample):
  mix = seqio.get_mixture_or_task("xglue_multi_task")
  assert {t.name for t in mix.tasks} == {f"xglue_{t}_en_multitask" for t in ("xnli", "pawsx", "nc", "qam", "qadsm")}
  rows = _examples("xglue_nc_en_multitask", "train")
  assert len(rows) == 30 and {r["task"] for r in rows} == {"NC"} and rows[0]["text_a"] and rows[0]["label"]
  assert rows[0]["tokens"] == [] and rows[0]["answers/text"] == []  # fields of other kinds stay empty


@pytest.mark.parametrize("task", ["xnli", "panx", "mlqa"])  # one per kind (test_seqio_tasks covers each task)
def test_xtreme_tasks_yield_what_the_runner_reads(tmp_path, task):
  """The same agreement for XTREME's fine-tuned tasks on the bundled XTREME sample."""
  import xtreme_tasks.xtreme as xt
  from xtreme_jax.registry import XTREME
  xt.set_data_dir(paths.sample_xtreme_dir())
  try:
    runner = xtreme.XtremeRunner(str(tmp_path), paths.sample_xtreme_dir(), TINY, paths.sample_vocab(), None,
                                 xtreme.FinetuneSettings(), None)
    spec = XTREME.task(task)
    train_task, train_lg, _ = spec.train
    cases = [(train_task, train_lg, "train")] + [(task, lg, "test") for lg in runner.data.benchmark.task(
        task).test_languages if runner.available(task, lg, "test")][:2]
    for name, lg, split in cases:
      assert _examples(xt.task_name(name, lg), split) == _as_rows(XTREME.task(name),
                                                                    runner.read(name, lg, split)), (name, lg, split)
  finally:
    xt.set_data_dir(None)
