"""The leaderboard scorer on hand-computed submissions (offline, plain Python)."""

import json
import logging
import os

import pytest

from xtreme_jax import cli, errors
from xtreme_jax.evaluation import metrics as m
from xtreme_jax.evaluation import scorer

TIER = "unit"  # conftest.py: this file's tier

approx = pytest.approx


def _write(root, task, name, text):
  os.makedirs(os.path.join(root, task), exist_ok=True)
  with open(os.path.join(root, task, name), "w", encoding="utf-8") as f:
    f.write(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))


def _tags(sentences):
  return "\n\n".join("\n".join(s) for s in sentences) + "\n"


def _squad(qas):
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [
      {"id": qid, "question": "q", "answers": [{"text": a, "answer_start": 0} for a in answers]}
      for qid, answers in qas]}]}]}


@pytest.fixture
def submission(tmp_path):
  preds, labels = str(tmp_path / "preds"), str(tmp_path / "labels")
  for lg in m.TASK_LANGUAGES["xnli"]:  # complete: en 50, the 14 others 100
    _write(labels, "xnli", f"test-{lg}.tsv", "entailment\r\nneutral\r\n")
    _write(preds, "xnli", f"test-{lg}.tsv", "entailment\nentailment\n" if lg == "en" else "entailment\nneutral\n\n")
  for lg in m.TASK_LANGUAGES["pawsx"]:  # complete: en 75, the 6 others 100
    _write(labels, "pawsx", f"test-{lg}.tsv", "1\n0\n1\n1\n")
    _write(preds, "pawsx", f"test-{lg}.tsv", "1\n0\n1\n0\n" if lg == "en" else "1\n0\n1\n1")
  _write(labels, "panx", "test-en.tsv", _tags([["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "O"]]))
  _write(preds, "panx", "test-en.tsv", _tags([["B-PER", "I-PER", "O", "I-LOC", "I-LOC"], ["I-PER", "I-ORG"]]))
  _write(labels, "panx", "test-de.tsv", _tags([["O"]]))  # no prediction file for de
  _write(labels, "udpos", "test-en.tsv", _tags([["DET", "NOUN", "NOUN", "VERB", "SCONJ", "SCONJ", "SYM"]]))
  _write(preds, "udpos", "test-en.tsv", _tags([["DET", "NOUN", "ADJ", "VERB", "SCONJ", "SCONJ", "SYM"]]))
  _write(labels, "mlqa", "test-zh.json", _squad([("z1", ["北京大学"]), ("z2", ["上海"])]))
  _write(preds, "mlqa", "test-zh.json", {"z1": "北京"})
  _write(labels, "bucc2018", "test-de.tsv", "de-1\ten-1\nde-2\ten-2\nde-3\ten-3\nde-4\ten-4\n")
  _write(preds, "bucc2018", "test-de.tsv", "de-1\ten-1\nde-2\ten-2\nde-5\ten-5\n")
  _write(labels, "tatoeba", "test-de.tsv", "1\n2\n0\n4\n")
  _write(preds, "tatoeba", "test-de.tsv", "1\n2\n3\n4\n")
  _write(preds, "tatoeba", "test-fr.tsv", "0\n")  # no label file for fr
  return preds, labels


def test_score_submission(submission):
  preds, labels = submission
  results = scorer.score_submission(preds, labels)
  tasks = results["tasks"]
  assert tasks["xnli"]["complete"] and tasks["xnli"]["score"] == approx((50 + 14 * 100) / 15)
  assert tasks["pawsx"]["score"] == approx((75 + 6 * 100) / 7)
  assert results["categories"] == approx({"classification": ((50 + 1400) / 15 + (75 + 600) / 7) / 2})
  assert results["overall"] is None
  assert sorted(results["missing_tasks"]) == ["tydiqa", "xquad"]
  panx = tasks["panx"]
  assert not panx["complete"] and panx["score"] == approx(400 / 7)
  assert panx["missing"]["de"].startswith("no prediction file") and "ar" in panx["missing"]
  assert tasks["udpos"]["languages"]["en"] == approx(
      {"f1": 1000 / 13, "precision": 500 / 7, "recall": 500 / 6, "accuracy": 600 / 7, "invalid": 0})
  assert tasks["mlqa"]["languages"]["zh"] == approx(
      {"exact_match": 0.0, "f1": 100 / 3, "total": 2, "missing": 1, "invalid": 0})
  assert tasks["mlqa"]["score"] == approx(50 / 3)
  assert tasks["mlqa"]["average"] == approx({"exact_match": 0.0, "f1": 100 / 3})  # counts are not averaged
  assert tasks["bucc2018"]["languages"]["de"]["f1"] == approx(400 / 7)
  assert tasks["tatoeba"]["languages"]["de"] == {"accuracy": 75.0, "invalid": 0}
  assert tasks["tatoeba"]["missing"]["fr"].startswith("no label file")


def test_main_prints_table_and_writes_json(submission, capsys):
  preds, labels = submission
  out = os.path.join(os.path.dirname(preds), "out", "scores.json")
  assert cli.main(["score", "--predictions", preds, "--labels", labels, "--out", out]) == 0
  table = capsys.readouterr().out
  assert "udpos-acc" in table and "classification: 96.5" in table and f"wrote {out}" in table
  panx_row = next(line for line in table.splitlines() if line.startswith("panx "))
  assert "miss" in panx_row  # panx de: a language of the task without a prediction file, explained
  assert "miss: a language of the task without a prediction file; -: not a language of the task" in table
  with open(out, encoding="utf-8") as f:
    written = json.load(f)
  assert written["tasks"]["tatoeba"]["score"] == 75.0
  assert os.listdir(os.path.dirname(out)) == ["scores.json"]  # no temporary file left behind
  report = os.path.join(os.path.dirname(preds), "report")  # --report: the benchmark's report of these scores
  assert cli.main(["score", "--predictions", preds, "--labels", labels, "--out", out, "--report", report]) == 0
  assert f"report: {report}/report.md" in capsys.readouterr().out
  with open(os.path.join(report, "results.json"), encoding="utf-8") as f:
    assert json.load(f)["tasks"]["tatoeba"]["score"] == 75.0


def test_wrong_counts_are_refused(submission, capsys):
  preds, labels = submission
  assert issubclass(scorer.SubmissionError, errors.UserError) and issubclass(scorer.SubmissionError, ValueError)
  _write(preds, "pawsx", "test-de.tsv", "1\n0\n1\n")
  with pytest.raises(scorer.SubmissionError, match=r"pawsx/test-de\.tsv: 3 lines, but the labels .* have 4"):
    scorer.score_submission(preds, labels)
  assert cli.main(["score", "--predictions", preds, "--labels", labels]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "3 lines" in err and err.count("\n") == 1  # one line, no traceback
  _write(preds, "pawsx", "test-de.tsv", "1\n0\n1\n1\n")
  _write(preds, "udpos", "test-en.tsv", _tags([["DET", "NOUN"]]))
  # A sentence length mismatch names the likely cause: another order, split or source.
  with pytest.raises(scorer.SubmissionError, match="2 tags in sentence 1, but .* have 7: .*another order or from "
                                                   "another split or data source.*TFDS builders shuffle"):
    scorer.score_submission(preds, labels)
  _write(preds, "udpos", "test-en.tsv", _tags([["DET"], ["NOUN"]]))
  with pytest.raises(scorer.SubmissionError, match="2 sentences, but .* have 1"):
    scorer.score_submission(preds, labels)


def test_default_out_is_beside_the_submission(submission, capsys, tmp_path):
  preds, labels = submission
  assert cli.main(["score", "--predictions", preds + os.sep, "--labels", labels]) == 0
  out = str(tmp_path / "scores-preds.json")
  assert f"wrote {out}" in capsys.readouterr().out
  assert os.path.isfile(out) and not os.path.exists(os.path.join(preds, "scores.json"))
  assert scorer.default_out("runs/x/submission") == os.path.abspath("runs/x/scores-submission.json")


def test_only_the_given_tasks_are_scored(submission):
  preds, labels = submission
  results = scorer.score_submission(preds, labels, tasks=["tatoeba", "xnli", "xquad"])
  assert list(results["tasks"]) == ["xnli", "tatoeba"] and results["missing_tasks"] == ["xquad"]
  assert results["categories"] == {}  # pawsx is in the folders but not asked for
  with pytest.raises(errors.ConfigError, match=r"unknown task\(s\) \['nope'\]"):
    scorer.score_submission(preds, labels, tasks=["nope"])


def test_missing_folders_are_user_errors(submission, capsys, tmp_path):
  preds, labels = submission
  nowhere = str(tmp_path / "no-labels")
  with pytest.raises(errors.MissingInputError, match="labels folder .*no-labels does not exist"):
    scorer.score_submission(preds, nowhere)
  with pytest.raises(errors.MissingInputError, match="submission folder .*no-labels does not exist"):
    scorer.score_submission(nowhere, labels)
  assert cli.main(["score", "--predictions", preds, "--labels", nowhere]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: labels folder") and nowhere in err and err.count("\n") == 1
  os.makedirs(tmp_path / "empty")
  assert cli.main(["score", "--predictions", preds, "--labels", str(tmp_path / "empty")]) == 2
  assert "nothing to score" in capsys.readouterr().err
  assert not os.path.exists(tmp_path / "scores-preds.json")


def test_a_bad_command_line_is_one_line(submission, capsys):
  preds, labels = submission
  assert cli.main(["score", "--bogus"]) == 2
  err = capsys.readouterr().err.splitlines()
  assert err == ["error: xtreme-jax score: the following arguments are required: --predictions, --labels "
                 "(see xtreme-jax score --help)"]
  assert cli.main(["score", "--predictions", preds, "--labels", labels, "--bogus"]) == 2
  assert capsys.readouterr().err.splitlines() == [
      "error: xtreme-jax score: unrecognized arguments: --bogus (see xtreme-jax score --help)"]
  for benchmark in ("xtreme", "mbert"):  # --split is XGLUE's: the others' labels are test labels
    assert cli.main(["score", "--benchmark", benchmark, "--predictions", preds, "--labels", labels,
                     "--split", "dev"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --split dev: --benchmark {benchmark} scores its test split only (its labels are test labels)"]


def test_valid_values_are_the_readers_label_and_tag_sets():
  from xtreme_jax.data.readers import xtreme_readers as readers
  assert scorer.VALID == {"xnli": set(readers.XNLI_LABELS), "pawsx": set(readers.PAWSX_LABELS),
                          "panx": set(readers.PANX_TAGS), "udpos": set(readers.UPOS_TAGS)}


def test_invalid_predictions_scored_as_official_with_one_warning_per_file(submission, caplog):
  preds, labels = submission
  _write(preds, "xnli", "test-en.tsv", "maybe\nneutral\n")  # 1 of 2 right, 1 invalid
  _write(labels, "panx", "test-en.tsv", _tags([["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG"]]))
  _write(preds, "panx", "test-en.tsv", _tags([["PER", "X-PER", "O", "B-"], ["b-org", "I-ORG"]]))
  # udpos: NOUNX (prefix N, type NOUNX) splits the gold NOUN run: as ADJ in the fixture, F1 1000/13.
  _write(preds, "udpos", "test-en.tsv", _tags([["DET", "NOUN", "NOUNX", "VERB", "SCONJ", "SCONJ", "SYM"]]))
  _write(preds, "mlqa", "test-zh.json", {"z1": "北京", "z2": " "})  # an empty answer scores 0
  _write(preds, "tatoeba", "test-de.tsv", "1\n2\nx\n04\n")  # not indices: wrong, as string comparison
  with caplog.at_level(logging.WARNING):
    results = scorer.score_submission(preds, labels)
  tasks = results["tasks"]
  assert tasks["xnli"]["languages"]["en"] == {"accuracy": 50.0, "invalid": 1}
  # seqeval 0.0.x (see test_metrics): pred PER(0,1) ""(3,3) org(5,5) ORG(6,6); 1 of 4 right, 3 gold.
  assert tasks["panx"]["languages"]["en"] == approx(
      {"precision": 25.0, "recall": 100 / 3, "f1": 200 / 7, "invalid": 4})
  assert tasks["udpos"]["languages"]["en"] == approx(
      {"f1": 1000 / 13, "precision": 500 / 7, "recall": 500 / 6, "accuracy": 600 / 7, "invalid": 1})
  assert tasks["mlqa"]["languages"]["zh"] == approx(
      {"exact_match": 0.0, "f1": 100 / 3, "total": 2, "missing": 0, "invalid": 1})
  assert tasks["tatoeba"]["languages"]["de"] == {"accuracy": 50.0, "invalid": 2}
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert len(warnings) == 5  # one per file with invalid predictions
  assert any(w.endswith("xnli/test-en.tsv: 1 of 2 labels are invalid (e.g. 'maybe'); "
                        "scored as wrong, as the official evaluate.py does") for w in warnings)
  assert any("panx/test-en.tsv: 4 of 6 tags are invalid (e.g. 'PER', 'X-PER', 'B-'); chunked as the official "
             "scorer's seqeval 0.0.x does" in w for w in warnings)
  assert any("mlqa/test-zh.json: 1 of 2 answers are empty" in w for w in warnings)
  assert any("tatoeba/test-de.tsv: 2 of 4 indices are invalid (e.g. 'x', '04')" in w for w in warnings)
  assert "invalid predictions (scored as the official scorer does): xnli en 1, udpos en 1, panx en 4, " \
         "mlqa zh 1, tatoeba de 2" in scorer.format_table(results)


def test_tfds_order_predictions_against_official_labels_are_refused(submission, capsys, tmp_path):
  preds, labels = submission
  path = scorer.write_manifest(preds, "tfds")
  assert path == os.path.join(preds, "manifest.json") and scorer.data_source(preds) == "tfds"
  assert json.load(open(path)) == {"data_source": "tfds"} and scorer.data_source(labels) == "official"
  assert sorted(f for f in os.listdir(preds) if not os.path.isdir(os.path.join(preds, f))) == ["manifest.json"]
  message = (r"cannot score xnli, pawsx, udpos, panx, tatoeba of .*preds: predictions were written in TFDS order "
             r"\(the TFDS builders shuffle examples\) but the labels .*labels are in the official order, and these "
             r"tasks match lines by position: score against labels made from the same source, or run with "
             r"DATA_SOURCE='official'")
  with pytest.raises(scorer.SubmissionError, match=message):
    scorer.score_submission(preds, labels)
  assert cli.main(["score", "--predictions", preds, "--labels", labels]) == 2
  assert capsys.readouterr().err.count("\n") == 1
  # Tasks keyed by ids are still scored; so is everything against labels made from TFDS too.
  results = scorer.score_submission(preds, labels, tasks=["mlqa", "bucc2018"])
  assert results["tasks"]["bucc2018"]["languages"]["de"]["f1"] == approx(400 / 7)
  scorer.write_manifest(labels, "tfds")
  assert scorer.score_submission(preds, labels)["tasks"]["tatoeba"]["score"] == 75.0
  with pytest.raises(errors.ConfigError, match="data_source='TFDS'; expected one of"):
    scorer.write_manifest(preds, "TFDS")
  _write(labels, ".", "manifest.json", {"data_source": "hf"})
  with pytest.raises(scorer.SubmissionError, match=r'manifest\.json: expected {"data_source": "official" \| "tfds"}'):
    scorer.score_submission(preds, labels)


def test_qa_ids_that_do_not_match_the_labels_are_refused(submission):
  preds, labels = submission
  _write(preds, "mlqa", "test-zh.json", {"mlqa-zh-test-0": "北京", "mlqa-zh-test-1": "上海"})
  with pytest.raises(scorer.SubmissionError, match=r"mlqa/test-zh\.json: only 0 of the 2 question ids of the labels "
                                                   r".* have a prediction: the ids do not match the labels"):
    scorer.score_submission(preds, labels, tasks=["mlqa"])
  # Half of the ids answered is enough (the other half scores 0 and counts as missing).
  _write(preds, "mlqa", "test-zh.json", {"z2": "上海", "other": "x"})
  assert scorer.score_submission(preds, labels, tasks=["mlqa"])["tasks"]["mlqa"]["languages"]["zh"] == approx(
      {"exact_match": 50.0, "f1": 50.0, "total": 2, "missing": 1, "invalid": 0})


def test_unreadable_files_name_the_file(submission):
  preds, labels = submission
  _write(preds, "mlqa", "test-zh.json", '{"z1": "北京",\n')
  with pytest.raises(scorer.SubmissionError, match=r"mlqa/test-zh\.json:2: not valid JSON"):
    scorer.score_submission(preds, labels, tasks=["mlqa"])
  with open(os.path.join(preds, "pawsx", "test-de.tsv"), "wb") as f:
    f.write(b"1\n\xff\n")
  with pytest.raises(errors.DataError, match=r"^\S*/preds/pawsx/test-de\.tsv:2 \(byte 2\): not UTF-8"):
    scorer.score_submission(preds, labels, tasks=["pawsx"])
  # Other unscoreable files name the prediction and the label file.
  _write(preds, "pawsx", "test-de.tsv", "")
  _write(labels, "pawsx", "test-de.tsv", "")
  with pytest.raises(scorer.SubmissionError, match=r"pawsx/test-de\.tsv against the labels .*: no gold items"):
    scorer.score_submission(preds, labels, tasks=["pawsx"])


def test_gold_outside_the_task_labels_is_refused(submission, capsys):
  preds, labels = submission
  _write(labels, "xnli", "test-de.tsv", "entailment\nmaybe\n")
  with pytest.raises(scorer.SubmissionError, match=r"/labels/xnli/test-de\.tsv:2: gold label 'maybe'; expected one "
                                                   r"of the xnli labels: contradiction, entailment, neutral$"):
    scorer.score_submission(preds, labels, tasks=["xnli"])
  assert cli.main(["score", "--predictions", preds, "--labels", labels]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "gold label 'maybe'" in err and err.count("\n") == 1
  _write(labels, "xnli", "test-de.tsv", "entailment\n\nneutral\n")  # a blank line is no label either
  _write(preds, "xnli", "test-de.tsv", "entailment\nneutral\nneutral\n")
  with pytest.raises(scorer.SubmissionError, match=r"xnli/test-de\.tsv:2: gold label ''"):
    scorer.score_submission(preds, labels, tasks=["xnli"])
  _write(labels, "pawsx", "test-de.tsv", "1\n0\n1\nyes\n")
  with pytest.raises(scorer.SubmissionError, match=r"pawsx/test-de\.tsv:4: gold label 'yes'; expected one of the "
                                                   r"pawsx labels: 0, 1$"):
    scorer.score_submission(preds, labels, tasks=["pawsx"])
  # Tags: line numbers count the blank lines between sentences.
  _write(labels, "panx", "test-en.tsv", _tags([["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-FOO", "O"]]))
  with pytest.raises(scorer.SubmissionError, match=r"panx/test-en\.tsv:7: gold tag 'B-FOO'; expected one of the "
                                                   r"panx tags: B-LOC, B-ORG, B-PER, I-LOC, I-ORG, I-PER, O$"):
    scorer.score_submission(preds, labels, tasks=["panx"])
  _write(labels, "udpos", "test-en.tsv", _tags([["DET", "NOUN", "NOUNX", "VERB", "SCONJ", "SCONJ", "SYM"]]))
  with pytest.raises(scorer.SubmissionError, match=r"udpos/test-en\.tsv:3: gold tag 'NOUNX'; expected one of the "
                                                   r"udpos tags: ADJ, ADP"):
    scorer.score_submission(preds, labels, tasks=["udpos"])


def test_a_submission_without_one_scorable_file_is_refused(submission, capsys, tmp_path):
  preds, labels = submission
  empty = tmp_path / "empty"
  (empty / "xnli").mkdir(parents=True)  # a task folder without files: every language would be missing
  out = tmp_path / "scores-empty.json"
  assert cli.main(["score", "--predictions", str(empty), "--labels", labels]) == 2
  err = capsys.readouterr().err
  assert err == (f"error: nothing to score: no prediction file of xnli has its gold (predictions {empty}, labels "
                 f"{labels}; expected <dir>/<task>/test-<lg>.tsv|json)\n")
  _write(str(empty), "tatoeba", "test-fr.tsv", "0\n")  # tatoeba fr has no label file
  assert cli.main(["score", "--predictions", str(empty), "--labels", labels, "--tasks", "tatoeba"]) == 2
  assert "nothing to score: no prediction file of tatoeba has its gold" in capsys.readouterr().err
  assert cli.main(["score", "--predictions", str(tmp_path / "nowhere"), "--labels", labels]) == 2
  assert capsys.readouterr().err == (f"error: submission folder {tmp_path / 'nowhere'} does not exist (or is not "
                                     "a folder)\n")
  assert not out.exists()
  # Some languages missing in a folder that has others: scored, the rest reported as missing.
  _write(str(empty), "tatoeba", "test-de.tsv", "1\n2\n3\n4\n")
  assert cli.main(["score", "--predictions", str(empty), "--labels", labels, "--tasks", "tatoeba,xnli"]) == 0
  assert json.loads(out.read_text())["tasks"]["tatoeba"]["missing"]["fr"] == "no label file"
