"""The transfer lab end to end in miniature: generated folder, reader, registry, scorer, report, claims."""

import json
import os

import gin
import numpy as np
import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data.readers.lab_data import LabData
from xtreme_jax.data.synthetic.lab_dataset import LabLanguages, parse_recipe, write_lab_data
from xtreme_jax.data.synthetic.transforms import InvertOrder, PartialOverlap, VocabularyShift
from xtreme_jax.evaluation import lab_report, mbert_scorer
from xtreme_jax.registry import LAB
from test_gcs_paths import gcs  # noqa: F401  (fixture: gs:// served from a tmp folder)

TIER = "integration"  # conftest.py: this file's tier

SMALL = LabLanguages(pretrain_sentences=40, train_sentences=24, dev_sentences=8, test_sentences=16)


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory):
  folder = tmp_path_factory.mktemp("lab") / "data"
  write_lab_data(str(folder), SMALL)
  return folder


def test_recipes_parse_and_bad_ones_are_one_line():
  assert parse_recipe("") == ()
  assert parse_recipe("shift(2)+invert") == (VocabularyShift(seed=2), InvertOrder())
  assert parse_recipe(" overlap(0.25, 3) ") == (PartialOverlap(share=0.25, seed=3),)
  for bad, needle in (("shfit(1)", "expected one of shift(seed)"), ("overlap", "expected one of"),
                      ("shift(x)", "'x' is not a int")):
    with pytest.raises(errors.ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
      parse_recipe(bad)
  with pytest.raises(errors.ConfigError, match="holding 'base'"):
    LabLanguages(languages={"shift": "shift(1)"})
  with pytest.raises(errors.ConfigError, match=r"LAB languages\['x'\]: language recipe step 'shfit\(1\)'"):
    LabLanguages(languages={"base": "", "x": "shfit(1)"})


def test_files_are_parallel_and_tags_follow_the_grammar(lab_dir):
  data = LabData(data_dir=str(lab_dir))
  assert data.languages == ("base", "shift", "shift_inv", "overlap50")
  assert data.benchmark.task("pos").languages["train"] == data.languages
  base, shift, inverted = (data.read("pos", lg, "test") for lg in ("base", "shift", "shift_inv"))
  assert len(base) == len(shift) == len(inverted) == 16
  for b, s, i in zip(base, shift, inverted):
    assert b["tags"] == s["tags"] and not set(b["tokens"]) & set(s["tokens"])  # same order, no shared form
    assert i["tags"][:-1] == b["tags"][-2::-1] and i["tags"][-1] == "PUNCT"  # reversed, final punctuation kept
  topics = data.read("topic", "shift", "train")
  assert [r["label"] for r in topics] == [r["label"] for r in data.read("topic", "base", "train")]
  assert {r["label"] for r in topics} <= set(LAB.task("topic").labels)
  pairs = data.read("retrieval", "overlap50", "test")
  assert pairs["target"] == [" ".join(r["tokens"]) for r in base] and len(pairs["source"]) == 16
  assert data.benchmark.task("retrieval").languages == {"test": ("shift", "shift_inv", "overlap50")}
  # A second write of the same lab keeps the folder; the pretraining texts are each language's own sample.
  before = (lab_dir / "pos" / "test-shift.tsv").stat().st_mtime_ns
  write_lab_data(str(lab_dir), SMALL)
  assert (lab_dir / "pos" / "test-shift.tsv").stat().st_mtime_ns == before
  texts = [(lab_dir / "pretrain" / "base.txt").read_text().split("\n\n")[0],
           (lab_dir / "pretrain" / "overlap50.txt").read_text().split("\n\n")[0]]
  assert len(texts[0].splitlines()) == 8 and texts[0] != texts[1]


def test_scorer_scores_the_lab_by_kind(lab_dir, tmp_path):
  data = LabData(data_dir=str(lab_dir))
  gold = data.read("pos", "shift", "test")
  (tmp_path / "pos").mkdir()
  (tmp_path / "topic").mkdir()
  wrong = {0: "NOUN"}  # the first word of every sentence predicted NOUN
  (tmp_path / "pos" / "test-shift.tsv").write_text("".join(
      "".join(f"{wrong.get(j, t)}\n" for j, t in enumerate(r["tags"])) + "\n" for r in gold))
  topics = data.read("topic", "shift", "test")
  (tmp_path / "topic" / "test-shift.tsv").write_text("".join(f"{r['label']}\n" for r in topics[:-1]) + "topic0\n")
  (tmp_path / "retrieval").mkdir()  # sentence i found at i, but for 0 and 1, swapped: 14 of 16
  (tmp_path / "retrieval" / "test-shift.tsv").write_text("1\n0\n" + "".join(f"{i}\n" for i in range(2, 16)))
  result = mbert_scorer.score_submission(str(tmp_path), data, ("pos", "topic", "retrieval"),
                                         languages=("shift",))["tasks"]
  assert result["retrieval"]["languages"]["shift"]["accuracy"] == pytest.approx(100 * 14 / 16)
  (tmp_path / "retrieval" / "test-shift.tsv").write_text("".join(f"{i}\n" for i in range(15)) + "x\n")
  with pytest.raises(errors.DataError, match=r"test-shift.tsv:16: expected a 0-based integer index, got 'x'"):
    mbert_scorer.score_submission(str(tmp_path), data, ("retrieval",), languages=("shift",))
  words = sum(len(r["tags"]) for r in gold)
  right = words - sum(r["tags"][0] != "NOUN" for r in gold)
  assert result["pos"]["languages"]["shift"]["accuracy"] == pytest.approx(100 * right / words)
  assert result["topic"]["languages"]["shift"]["accuracy"] == pytest.approx(
      100 * (15 + (topics[-1]["label"] == "topic0")) / 16)


def _results(zero_shot, retrieval, translate=None):
  conditions = {"pretrained": {"pretrained_on": ["base"], "retrieval": retrieval["pretrained"],
                               "zero_shot": {str(i): {"pos": s} for i, s in enumerate(zero_shot["pretrained"])}},
                "no_pretraining": {"pretrained_on": None, "retrieval": retrieval["no_pretraining"],
                                   "zero_shot": {str(i): {"pos": s} for i, s in enumerate(zero_shot["none"])}}}
  if translate:
    conditions["pretrained"]["translate_train"] = {"0": {"pos": translate}}
  return {"languages": SMALL.describe(), "experiment": {"pretrain_steps": 1, "seeds": [0, 1]},
          "conditions": conditions, "chance": {"pos": 20.0}}


def test_claims_by_hand(tmp_path):
  pretrained = [{"base": 96, "shift": 90, "shift_inv": 40, "overlap50": 93},
                {"base": 98, "shift": 92, "shift_inv": 44, "overlap50": 95}]
  none = [{"base": 90, "shift": 25, "shift_inv": 22, "overlap50": 50}] * 2
  retrieval = {"pretrained": {"shift": 40.0, "shift_inv": 10.0, "overlap50": 60.0},
               "no_pretraining": {"shift": 1.0, "shift_inv": 1.0, "overlap50": 20.0}}
  results = _results({"pretrained": pretrained, "none": none}, retrieval, translate={lg: 97 for lg in pretrained[0]})
  verdicts = {c[:3]: (v, n) for c, v, n in lab_report.claims(results, "pos")}
  # (a) shift 91 - 20 >= (97 - 20) / 2; (b) 91 - 42 > 2 * max std (2.83); (c) shares 1, 0, 0.5 -> 97, 91, 94
  assert verdicts["(a)"] == ("reproduced", "shift 91.0 +- 1.4; base 97.0, chance 20.0")
  assert verdicts["(b)"][0] == "reproduced" and "shift_inv 42.0 +- 2.8" in verdicts["(b)"][1]
  assert verdicts["(c)"][0] == "reproduced" and verdicts["(c)"][1].startswith("Pearson r over same-order languages "
                                                                              "(the base: share 1) 1.00")
  xs, ys = [40, 10, 60, 1, 1, 20], [91, 42, 94, 25, 22, 50]
  assert verdicts["(d)"] == ("reproduced", f"Pearson r = {np.corrcoef(xs, ys)[0, 1]:.2f} over 6 (condition, "
                                           "language) points")
  flat = [dict(p, shift=30, shift_inv=30) for p in pretrained]
  verdicts = {c[:3]: v for c, v, _ in lab_report.claims(_results({"pretrained": flat, "none": none}, retrieval), "pos")}
  assert verdicts["(a)"] == "not reproduced" and verdicts["(b)"] == "not testable"  # no transfer to compare
  half = [dict(p, shift=s, shift_inv=i) for p, s, i in zip(pretrained, (58, 62), (57, 59))]  # (a) 60 - 20 >= 38.5;
  # (b) 60 against 58 is within twice the spread (std 2.8)
  verdicts = {c[:3]: v for c, v, _ in lab_report.claims(_results({"pretrained": half, "none": none}, retrieval), "pos")}
  assert verdicts["(a)"] == "reproduced" and verdicts["(b)"] == "not reproduced"
  paths = lab_report.write(str(tmp_path), results)
  report = (tmp_path / "report.md").read_text()
  assert "| pretrained translate-train | 97.0 +- 0.0 |" in report and "| pretrained gap | 0.0 | 6.0 |" in report
  plotted = {p.format(task="pos") for p in lab_report.PLOTS.values()}
  assert all((tmp_path / p).is_file() for p in plotted) and plotted <= set(paths)
  assert "![pos retrieval](plots/pos_retrieval.png)" in report
  assert json.loads((tmp_path / "results.json").read_text()) == results


def test_retrieval_scatter_tells_the_conditions_apart():
  points = [(10.0, 80.0, "shift", "pretrained"), (2.0, 30.0, "shift_inv", "pretrained"),
            (1.0, 20.0, "shift", "no_pretraining")]
  ax = lab_report.scatter_figure(points, "x", "y", "t").axes[0]
  assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pretrained", "no_pretraining"]
  assert [t.get_text() for t in ax.texts] == ["shift", "shift_inv", "shift"]
  assert min(t.get_fontsize() for t in ax.texts) >= 8
  colours = [tuple(t.get_color()) for t in ax.texts]
  assert colours[0] == colours[1] != colours[2]
  assert lab_report.scatter_figure(points[:2], "x", "y", "t").axes[0].get_legend() is None  # one group: no legend


def test_labels_of_close_points_are_stacked_apart():
  # Boxes (left, right, bottom) in points; from the top: 0 stays, 4 overlaps nothing, 1 clashes with 0 and
  # moves a step below it (91; above it, 109, is farther). 3 clashes with 1: above it (100; 0 is not over
  # 3) is nearer than below (82). 2 clashes with 1: below (82) is nearer than above (100 clashes with 0: 109).
  boxes = [(0, 30, 100), (10, 50, 98), (5, 20, 91), (40, 60, 92), (200, 230, 99)]
  assert lab_report.label_offsets(boxes, step=9) == [0, -7, -9, 8, 0]
  # With the axes' bottom at 85, 2 goes above instead (109); with no room inside, the nearer place.
  assert lab_report.label_offsets(boxes, step=9, floor=85) == [0, -7, 18, 8, 0]
  assert lab_report.label_offsets(boxes, step=9, floor=85, ceiling=110) == [0, -7, -9, 8, 0]
  # (126.171 + 9) - 126.171 < 9 in floating point: the search above must not take it for a clash forever
  # (and above, by that rounding, is the nearer place).
  assert lab_report.label_offsets([(0, 10, 126.171)] * 2, step=9) == pytest.approx([0, 9])
  # lab_full's topic plot: shift 23.2, shift_permuted 22.8, shift_head_final 19.0 at share 0.
  fig = lab_report.scatter_figure([(0.0, 23.2, "shift", "same order"), (0.0, 22.8, "shift_permuted", "reordered"),
                                   (0.0, 19.0, "shift_head_final", "reordered"), (1.0, 88.2, "base", "same order")],
                                  "x", "y", "t")
  renderer = fig.canvas.get_renderer()
  labels = [t for t in fig.axes[0].texts if t.get_text()]  # not the lines of moved labels
  assert len(labels) == 4 and len(fig.axes[0].texts) > 4
  extents = [t.get_window_extent(renderer) for t in labels]
  assert not any(a.overlaps(b) for i, a in enumerate(extents) for b in extents[i + 1:])


@pytest.mark.e2e
def test_miniature_lab_runs_the_whole_stack(tmp_path):
  """Pretraining, fine-tuning on the base language and zero-shot everywhere, retrieval, the report: the base
  language's own POS score far above chance. With separate position embeddings, so every stage feeds each
  example its language's id (the shared tables are the plain encoder every other run uses)."""
  gin.clear_config(clear_constants=True)
  try:
    assert cli.main(["run", "--gin_file=experiments/lab_quickstart.gin", f"--gin.RUN_DIR='{tmp_path}'",
                     "--gin.PRETRAIN_SENTENCES=400", "--gin.PRETRAIN_STEPS=40", "--gin.SEEDS=(0,)",
                     "--gin.CONTROLS=()", "--gin.EPOCHS=10.0", "--gin.lab.LabExperiment.tasks=('pos',)",
                     "--gin.lab.LabExperiment.translate_train=False",
                     "--gin.POSITIONS='separate'",
                     "--gin.lab_dataset.LabLanguages.train_sentences=80",
                     "--gin.lab_dataset.LabLanguages.test_sentences=40",
                     "--gin.config.TransformerConfig.num_layers=1"]) == 0  # one layer: a third less compiling
  finally:
    gin.clear_config(clear_constants=True)
  results = json.loads((tmp_path / "lab" / "results.json").read_text())
  scores = results["conditions"]["pretrained"]["zero_shot"]["0"]["pos"]
  assert set(scores) == {"base", "shift", "shift_inv", "overlap50"}
  assert scores["base"] > results["chance"]["pos"] + 40, (scores, results["chance"])  # 77.5 against 18.6 here
  assert set(results["conditions"]["pretrained"]["retrieval"]) == {"shift", "shift_inv", "overlap50"}
  report = (tmp_path / "lab" / "report.md").read_text()
  assert "(a) zero-shot" in report and (tmp_path / "lab" / "plots" / "pos_retrieval.png").is_file()
  config = json.loads((tmp_path / "pretrain" / "pretrained" / "encoder" / "config.json").read_text())
  assert config["languages"] == ["base", "shift", "shift_inv", "overlap50"] and config["language_positions"]
  # `xtreme-jax score --benchmark lab` scores a fine-tuned model's submission as the run did.
  out = tmp_path / "rescored.json"
  assert cli.main(["score", "--benchmark", "lab", "--predictions", str(tmp_path / "pretrained" / "seed0" / "submission"),
                   "--labels", str(tmp_path / "data"), "--out", str(out)]) == 0
  rescored = json.loads(out.read_text())
  assert {lg: m["accuracy"] for lg, m in rescored["tasks"]["pos"]["languages"].items()} == scores
  assert rescored["missing_tasks"] == ["topic", "retrieval"]  # not fine-tuned here; retrieval: no model


def test_a_run_directory_holding_another_lab_is_refused_before_anything_runs(tmp_path):
  from conftest import TINY
  from xtreme_jax.runs import lab
  write_lab_data(str(tmp_path / "data"), SMALL)
  other = LabLanguages(languages={"base": "", "fake": "shift(7)"}, pretrain_sentences=40, train_sentences=24,
                       dev_sentences=8, test_sentences=16)
  with pytest.raises(errors.ConfigError, match=f"{tmp_path} holds a lab with other languages or sizes"):
    lab.lab(str(tmp_path), TINY, other)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing else written
  with pytest.raises(errors.MissingInputError, match="has no lab.json"):
    LabData(data_dir=str(tmp_path / "nowhere"))


THREE = LabLanguages(languages={"base": "", "shift": "shift(1)", "shift_inv": "shift(2)+invert"},
                     pretrain_sentences=40, train_sentences=24, dev_sentences=8, test_sentences=16)


def _stub_stages(monkeypatch, started=None, vocabulary=False):
  """Stubs the lab's stages (the vocabulary unless `vocabulary`, pretraining, retrieval, fine-tuning runs:
  `started(run_dir)` is called at each); returns the list of (partial, conditions, languages of pretrained's
  POS) of each report."""
  from xtreme_jax.runs import lab
  seen = []
  real_write = lab_report.write

  def write(out_dir, results):
    seen.append((results.get("partial"), sorted(results["conditions"]),
                 sorted(results["conditions"].get("pretrained", {}).get("zero_shot", {}).get("0", {}).get("pos", {}))))
    return real_write(out_dir, results)

  def run(run_dir, *args, languages, **kwargs):
    if started:
      started(run_dir)
    return {"tasks": {task: {"languages": {lg: {"accuracy": 50.0 + len(lg)} for lg in lgs}}
                      for task, lgs in languages.items()}}

  if not vocabulary:
    monkeypatch.setattr(lab, "_vocabulary", lambda *args: "spm.model")
  monkeypatch.setattr(lab, "_pretrain", lambda run_dir, *args: run_dir)
  monkeypatch.setattr(lab, "_retrieval", lambda *args: {"shift": 10.0})
  monkeypatch.setattr(lab.xtreme, "lab", run)
  monkeypatch.setattr(lab_report, "write", write)
  return seen


def test_the_report_so_far_is_written_after_each_encoder_but_the_last(tmp_path, monkeypatch):
  """The lab's order of stages with each stage stubbed: per-language pretraining, then the controls; after each
  encoder but the last, `lab/` holds the report of what is done, marked partial."""
  from conftest import TINY
  from xtreme_jax.runs import lab
  seen = _stub_stages(monkeypatch)
  experiment = lab.LabExperiment(pretraining="per_language", seeds=(0,), tasks=("pos",), controls=("no_pretraining",))
  results = lab.lab(str(tmp_path), TINY, THREE, experiment)
  assert seen == [
      ("1 of 3 encoders done (pretrained shift)", ["pretrained"], ["base", "shift"]),
      ("2 of 3 encoders done (pretrained shift, pretrained shift_inv)", ["pretrained"], ["base", "shift", "shift_inv"]),
      (None, ["no_pretraining", "pretrained"], ["base", "shift", "shift_inv"])]
  assert "partial" not in results and "Partial" not in (tmp_path / "lab" / "report.md").read_text()
  results["partial"] = seen[0][0]
  assert "**Partial**: 1 of 3 encoders done (pretrained shift); the lab writes" in lab_report.render(results)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "lab"]  # no lock file left behind
  del seen[:]  # a rerun of the finished lab replaces its whole report only, never with a partial one
  lab.lab(str(tmp_path), TINY, THREE, experiment)
  assert seen == [(None, ["no_pretraining", "pretrained"], ["base", "shift", "shift_inv"])]


def test_the_lab_s_own_files_may_live_under_gs_urls(gcs, tmp_path, monkeypatch):  # noqa: F811
  """The data, vocabulary, locks and report of a gs:// RUN_DIR (the stages' run directories are the trainer's
  and the runner's, tested on gs:// there), and the pretraining corpus read from it."""
  from conftest import TINY
  from xtreme_jax import fs
  from xtreme_jax.data.pretraining import pretraining_corpora
  from xtreme_jax.data.vocab.vocabularies import load_vocabulary
  from xtreme_jax.runs import lab
  seen = _stub_stages(monkeypatch, vocabulary=True)
  run = "gs://bucket/lab"
  lab.lab(run, TINY.replace(vocab_size=1200), THREE, lab.LabExperiment(seeds=(0,), tasks=("pos",), controls=()))
  assert [s[0] for s in seen] == [None] and fs.isfile(f"{run}/lab/report.md")
  assert 100 < load_vocabulary(f"{run}/vocab/spm.model").vocab_size <= 1200
  assert LabData(data_dir=f"{run}/data").languages == ("base", "shift", "shift_inv")
  docs = pretraining_corpora.read_monolingual(f"{run}/data/pretrain", ["shift"], blank_line_documents=True)
  assert sum(len(d) for d in docs["shift"]) == THREE.pretrain_sentences
  assert sorted(fs.listdir(run)) == ["data", "lab", "vocab"]  # no lock object left (the stages are stubs)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["gcs"]  # nothing written to the working directory


def test_a_stage_another_process_holds_stops_the_lab(tmp_path, monkeypatch):
  """Only an encoder's own lock is left to its holder: a stage's run directory in use elsewhere (a run started
  by hand, say) stops the lab with that stage's InUseError (exit 75)."""
  from conftest import TINY
  from xtreme_jax.runs import lab
  from xtreme_jax.training import locks

  def busy(run_dir):
    raise locks.InUseError(f"{run_dir} is in use by pid 1")

  _stub_stages(monkeypatch, busy)
  experiment = lab.LabExperiment(seeds=(0,), tasks=("pos",), controls=())
  with pytest.raises(locks.InUseError, match=r"pretrained[/\\]seed0 is in use by pid 1"):
    lab.lab(str(tmp_path), TINY, THREE, experiment)


@pytest.mark.parametrize("pretraining,held,runs,partial", [
    ("per_language", "pretrained shift", ["pretrained/shift_inv/seed0", "no_pretraining/seed0", "pretrained/shift/seed0"],
     ["1 of 3 encoders done (pretrained shift_inv)", "2 of 3 encoders done (pretrained shift_inv, no_pretraining)"]),
    # A control done first: no report until a pretrained encoder is (the report is built around it).
    ("joint", "pretrained", ["no_pretraining/seed0", "pretrained/seed0"], []),
])
def test_an_encoder_another_process_runs_is_skipped_then_waited_for(tmp_path, monkeypatch, capsys, pretraining,
                                                                    held, runs, partial):
  """Two processes on one lab: the encoder another holds is left to it; this one runs the rest, then waits for
  that encoder (the other process ends during the first wait) and writes the whole report."""
  import subprocess
  import sys
  import types
  from conftest import TINY
  from xtreme_jax.runs import lab
  lock = tmp_path / f".lab-{held.replace(' ', '_')}.lock"
  holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys\n"
                             "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
                             "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'%d\\n' % os.getpid())\n"
                             "print('held', flush=True); sys.stdin.read()", str(lock)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "held\n"
    started, waits = [], []

    def sleep(seconds):
      waits.append(seconds)
      holder.stdin.close()
      holder.wait()

    seen = _stub_stages(monkeypatch, lambda run_dir: started.append(os.path.relpath(run_dir, tmp_path)))
    monkeypatch.setattr(lab, "time", types.SimpleNamespace(sleep=sleep))
    experiment = lab.LabExperiment(pretraining=pretraining, seeds=(0,), tasks=("pos",),
                                   controls=("no_pretraining",), translate_train=False)
    lab.lab(str(tmp_path), TINY, THREE, experiment)
  finally:
    holder.kill()
    holder.wait()
  assert started == [os.path.normpath(r) for r in runs]
  assert waits == [lab.POLL_S]
  assert [s[0] for s in seen] == partial + [None]
  assert seen[-1][1:] == (["no_pretraining", "pretrained"], ["base", "shift", "shift_inv"])
  assert not list(tmp_path.glob(".lab*.lock"))
  out = capsys.readouterr().out
  assert f"lab: pid {holder.pid} runs the encoder {held}; taking the next one" in out
  assert f"lab: waiting for pid {holder.pid}, which runs the lab's encoder {held}" in out


def test_per_language_pretraining_pairs_each_derived_language_with_the_base():
  from xtreme_jax.runs.lab import LabExperiment, Unit, merge, units
  names = ("base", "shift", "shift_inv")
  joint, paired = LabExperiment(), LabExperiment(pretraining="per_language")
  assert units("pretrained", names, joint) == [Unit(names, names)]
  assert units("pretrained", names, paired) == [Unit(("base", "shift"), ("base", "shift"), "shift"),
                                                Unit(("base", "shift_inv"), ("base", "shift_inv"), "shift_inv")]
  assert units("base_only", names, paired) == [Unit(("base",), names)]
  assert units("no_pretraining", names, paired) == [Unit(None, names)]
  # Each derived language's score from its own pair; the base's the mean of the pairs' base models.
  assert merge([{"pos": {"base": 90.0, "shift": 70.0}}, {"pos": {"base": 96.0, "shift_inv": 30.0}}]) == {
      "pos": {"base": 93.0, "shift": 70.0, "shift_inv": 30.0}}
  with pytest.raises(errors.ConfigError, match="pretraining"):
    LabExperiment(pretraining="pairs")


def test_separate_positions_give_each_unit_s_languages_a_table():
  from conftest import TINY
  from xtreme_jax.runs.lab import LabExperiment, Unit
  unit = Unit(("base", "shift"), ("base", "shift"), "shift")
  assert LabExperiment().model(TINY, unit) is TINY
  separate = LabExperiment(positions="separate").model(TINY, unit)
  assert (separate.num_languages, separate.languages, separate.language_positions) == (2, ("base", "shift"), True)
  with pytest.raises(errors.ConfigError, match="positions"):
    LabExperiment(positions="per_language")
