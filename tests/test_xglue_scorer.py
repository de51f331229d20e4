"""The XGLUE scorer against values computed by hand from the official xglue_evaluate.py's definitions."""

import json
import math
import os
import shutil

import pytest
from pytest import approx

from xtreme_jax import cli, errors
from xtreme_jax.evaluation import report, scorer, xglue_scorer
from xtreme_jax.registry import XGLUE

TIER = "unit"  # conftest.py: this file's tier

SPLIT = "test"


def _write(path, content):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(content)


# Ground truth per task (the same for every language unless a test changes it) and perfect predictions.
NER_GOLD = "-DOCSTART- -X- O O\n\nEU B-ORG\nrejects O\nGerman B-MISC\ncall O\n\nPeter B-PER\nBlackburn I-PER\n"
NER_PRED = "B-ORG\nO\nB-MISC\nO\n\nB-PER\nI-PER\n"
POS_GOLD = "Dogs NOUN\nbark VERB\n\nCats NOUN\nsleep VERB\n"
POS_PRED = "NOUN\nVERB\n\nNOUN\nVERB\n"
ROWS = {  # task -> (ground-truth rows, predictions)
    "NC": ("t1\tb1\tsports\nt2\tb2\tnews\n", "sports\nnews\n"),
    "XNLI": ("p1\th1\tneutral\np2\th2\tentailment\n", "neutral\nentailment\n"),
    "PAWSX": ("id\tsentence1\tsentence2\tlabel\n1\ta\tb\t1\n\n2\tc\td\t0\n", "1\n0\n"),
    "QADSM": ("q\tt\td\tGood\nq\tt\td\tBad\n", "Good\nBad\n"),
    "QAM": ("q\tp\t1\nq\tp\t0\n", "1\n0\n"),
    "WPR": ("q1\tt\ts\t3\nq1\tt\ts\t2\n", "3\n2\n"),
}
MLQA_GOLD = {"data": [{"title": "t", "paragraphs": [{"context": "the big red house has the cat", "qas": [
    {"id": "a", "question": "?", "answers": [{"text": "the cat", "answer_start": 26}]},
    {"id": "b", "question": "?", "answers": [{"text": "big red house", "answer_start": 4}]}]}]}]}
MLQA_PRED = {"a": "the cat", "b": "big red house"}
GEN_SOURCE = "Leonardo malte die Mona Lisa.\nDas Konzert beginnt heute.\n"  # QG / NTG, every language
GEN_GOLD = "Wer malte die Mona Lisa?\nWann beginnt das Konzert heute?\n"


@pytest.fixture
def xglue(tmp_path):
  """(predictions dir, ground-truth dir): a perfect submission for every task and language."""
  preds, gold = tmp_path / "submission", tmp_path / "xglue_full_dataset"
  for spec in XGLUE.tasks:
    for lg in spec.test_languages:
      gold_path, pred_path = gold / spec.file(SPLIT, lg), xglue_scorer.prediction_path(str(preds), spec.name, lg)
      if spec.name == "NER":
        _write(gold_path, NER_GOLD), _write(pred_path, NER_PRED)
      elif spec.name == "POS":
        _write(gold_path, POS_GOLD), _write(pred_path, POS_PRED)
      elif spec.name == "MLQA":
        _write(gold_path, json.dumps(MLQA_GOLD)), _write(pred_path, json.dumps(MLQA_PRED))
      elif spec.kind == "generation":
        _write(gold_path, GEN_SOURCE), _write(pred_path, GEN_GOLD)
        _write(gold / xglue_scorer.gold_file(spec.name, SPLIT, lg), GEN_GOLD)
      else:
        _write(gold_path, ROWS[spec.name][0]), _write(pred_path, ROWS[spec.name][1])
  return preds, gold


def _score(xglue, **kw):
  return xglue_scorer.score_submission(str(xglue[0]), str(xglue[1]), SPLIT, **kw)


def test_a_perfect_submission_scores_one_everywhere(xglue):
  results = _score(xglue)
  assert list(results["tasks"]) == list(XGLUE.task_names) and not results["missing_tasks"]
  for task, scores in results["tasks"].items():
    assert list(scores) == [*XGLUE.task(task).test_languages, "avg"]
    assert scores == approx(dict.fromkeys(scores, 1.0), rel=1e-12), task  # BLEU 100 up to rounding
  assert results["avg_u"] == 1.0 and results["avg_g"] == approx(1.0) and results["average"] == approx(1.0)


def test_each_task_as_the_official_scorer(xglue):
  preds, gold = xglue
  # NER en: the second sentence predicted one tag short (padded with O): 2 of 3 entities, P = R = F1 = 2/3.
  _write(xglue_scorer.prediction_path(str(preds), "NER", "en"), "B-ORG\nO\nB-MISC\nO\n\nB-PER\n")
  # POS de: [NOUN NOUN] for [NOUN VERB]: one NOUN chunk over both tokens, so the predicted chunks are
  # NOUN(0-1), NOUN(3), VERB(4), of which 2 are gold: chunk precision 2/3 (token accuracy would be 3/4).
  _write(xglue_scorer.prediction_path(str(preds), "POS", "de"), "NOUN\nNOUN\n\nNOUN\nVERB\n")
  _write(xglue_scorer.prediction_path(str(preds), "NC", "fr"), "sports\nsports\n")  # 1 of 2
  _write(xglue_scorer.prediction_path(str(preds), "PAWSX", "es"), "0\n0\n")  # 1 of 2 (header, blank line skipped)
  # WPR de: query q1 with tied predictions (gains 3 and 2 averaged over ranks 1-2) and an unrated row,
  # a query of one row (skipped) and an all-zero query (nDCG 0).
  _write(gold / XGLUE.task("WPR").file(SPLIT, "de"),
         "q1\tt\ts\t3\nq1\tt\ts\t2\nq1\tt\ts\t0\nq2\tt\ts\t4\nq3\tt\ts\t0\nq3\tt\ts\t0\n")
  _write(xglue_scorer.prediction_path(str(preds), "WPR", "de"), "1\n1\n0\n2\n1\n2\n")
  # MLQA en: "red house" for "big red house": P 1, R 2/3, F1 0.8; "a cat" for "the cat": articles dropped, 1.
  _write(xglue_scorer.prediction_path(str(preds), "MLQA", "en"), json.dumps({"a": "a cat", "b": "red house"}))
  tasks = _score(xglue)["tasks"]
  assert tasks["NER"]["en"] == approx(2 / 3) and tasks["NER"]["avg"] == approx((1 + 2 / 3 + 1 + 1) / 4)
  assert tasks["POS"]["de"] == approx(2 / 3)
  assert tasks["NC"]["fr"] == 0.5 and tasks["PAWSX"]["es"] == 0.5
  discount = 1 / math.log2(3)
  q1 = 2.5 * (1 + discount) / (3 + 2 * discount)
  assert tasks["WPR"]["de"] == approx((q1 + 0) / 2, abs=1e-15)
  assert tasks["MLQA"]["en"] == approx((1 + 0.8) / 2)
  assert tasks["WPR"]["avg"] == approx(((q1 / 2) + 6) / 7)


def test_avg_u_and_average(xglue):
  results = _score(xglue, tasks=["NC", "QAM"])
  assert list(results["tasks"]) == ["NC", "QAM"] and results["avg_u"] is None and results["average"] == 1.0
  assert results["avg_g"] is None
  _write(xglue_scorer.prediction_path(str(xglue[0]), "QAM", "de"), "0\n0\n")
  results = _score(xglue)
  assert results["tasks"]["QAM"]["avg"] == approx(5 / 6)
  assert results["avg_u"] == approx((8 + 5 / 6) / 9) and results["average"] == approx((10 + 5 / 6) / 11)


def test_an_understanding_only_submission_scores_as_before(xglue):
  for task in XGLUE.categories["generation"]:
    shutil.rmtree(xglue[0] / task)
  _write(xglue_scorer.prediction_path(str(xglue[0]), "QAM", "de"), "0\n0\n")
  results = _score(xglue)
  assert results["missing_tasks"] == ["QG", "NTG"] and list(results["tasks"]) == list(XGLUE.task_names[:9])
  assert results["avg_u"] == results["average"] == approx((8 + 5 / 6) / 9) and results["avg_g"] is None
  assert "AVG_G" not in xglue_scorer.format_table(results)


def test_generation_is_lowercased_bleu_over_every_line(xglue):
  preds, gold = xglue
  # QG de (13a tokens, lowercased): segment 1 exact (6 tokens); "Wann beginnt das Konzert?" against "Wann beginnt
  # das Konzert heute?": 5 of 6 tokens. Corpus: p1 11/11, p2 8/9, p3 6/7, p4 4/5, BP exp(1 - 12/11).
  _write(xglue_scorer.prediction_path(str(preds), "QG", "de"), "wer malte die MONA Lisa?\nWann beginnt das Konzert?\n")
  # QG fr: an empty last prediction is a line too: p1..p4 all 1 on segment 1, BP exp(1 - 12/6).
  _write(xglue_scorer.prediction_path(str(preds), "QG", "fr"), "Wer malte die Mona Lisa?\n\n")
  results = _score(xglue)
  de = math.exp(1 - 12 / 11) * (8 / 9 * 6 / 7 * 4 / 5) ** 0.25
  assert results["tasks"]["QG"]["de"] == approx(de) and results["tasks"]["QG"]["fr"] == approx(math.exp(-1))
  assert results["tasks"]["QG"]["avg"] == approx((4 + de + math.exp(-1)) / 6)
  assert results["avg_g"] == approx(((4 + de + math.exp(-1)) / 6 + 1) / 2)
  assert results["average"] == approx((9 + (4 + de + math.exp(-1)) / 6 + 1) / 11)
  table = xglue_scorer.format_table(results)
  assert f"QG     avg {100 * (4 + de + math.exp(-1)) / 6:5.1f}" in table and "AVG_G: " in table
  # One line per source line: a trailing blank line is a third prediction (the official scorer fails on it).
  _write(xglue_scorer.prediction_path(str(preds), "NTG", "ru"), GEN_GOLD + "\n")
  with pytest.raises(scorer.SubmissionError, match=r"NTG/ru\.prediction: 3 lines, but the ground truth "
                                                   r".*NTG/xglue\.ntg\.ru\.tgt\.test has 2"):
    _score(xglue, tasks=["NTG"])


def test_mismatches_are_refused_naming_both_counts(xglue):
  preds, gold = xglue
  path = xglue_scorer.prediction_path(str(preds), "WPR", "fr")
  _write(path, "3\n")  # the official scorer would silently truncate
  with pytest.raises(scorer.SubmissionError, match=r"WPR/fr\.prediction: 1 lines, but the ground truth .* has 2"):
    _score(xglue, tasks=["WPR"])
  _write(path, "3\n2\n")
  _write(xglue_scorer.prediction_path(str(preds), "NER", "nl"), NER_PRED + "\nB-PER\n")  # an extra sentence
  with pytest.raises(scorer.SubmissionError, match=r"3 sentences, but the ground truth .* has 2"):
    _score(xglue, tasks=["NER"])
  _write(xglue_scorer.prediction_path(str(preds), "NER", "nl"), "B-ORG\nO\nB-MISC\nO\nO\n\nB-PER\nI-PER\n")
  with pytest.raises(scorer.SubmissionError, match=r"sentence 1 has 5 tags, but the ground truth .* has 4 words"):
    _score(xglue, tasks=["NER"])
  _write(gold / XGLUE.task("WPR").file(SPLIT, "it"), "q\tt\ts\t3\nq\tt\ts\t7\n")
  with pytest.raises(scorer.SubmissionError, match=r"xglue\.wpr\.it\.test:2: label '7'; expected a rating in"):
    _score(xglue, tasks=["WPR"])
  with pytest.raises(errors.ConfigError, match=r"unknown XGLUE task\(s\) \['NERR'\]; valid: NER, POS, NC"):
    _score(xglue, tasks=["NERR"])
  os.remove(xglue_scorer.prediction_path(str(preds), "QAM", "fr"))
  with pytest.raises(errors.MissingInputError, match=r"QAM fr: no prediction file .*every language: de en fr"):
    _score(xglue, tasks=["QAM"])


def test_score_command(xglue, capsys):
  preds, gold = xglue
  out = preds.parent / "scores.json"
  assert cli.main(["score", "--benchmark", "xglue", "--predictions", str(preds), "--labels", str(gold),
                   "--tasks", "XNLI,WPR", "--out", str(out), "--report", str(preds.parent / "rep")]) == 0
  printed = capsys.readouterr().out
  assert "XNLI   avg 100.0" in printed and f"wrote {out}" in printed
  assert f"report: {preds.parent / 'rep' / 'report.md'}" in printed and (preds.parent / "rep" / "plots" / "WPR.png").exists()
  written = json.loads(out.read_text())
  assert written["tasks"]["WPR"]["avg"] == 1.0 and written["split"] == "test"
  _write(xglue_scorer.prediction_path(str(preds), "XNLI", "ar"), "neutral\n")
  assert cli.main(["score", "--benchmark", "xglue", "--predictions", str(preds), "--labels", str(gold)]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "XNLI/ar.prediction: 1 lines" in err and err.count("\n") == 1


def test_report_tables_and_plots(xglue, tmp_path):
  preds, gold = xglue
  _write(xglue_scorer.prediction_path(str(preds), "QAM", "de"), "0\n0\n")  # QAM de 50, avg 5/6
  results = _score(xglue)
  paths = report.write_xglue_report(results, str(tmp_path / "report"))
  assert sorted(paths) == sorted(["results.json", "report.md"] + [f"plots/{t}.png" for t in XGLUE.task_names])
  md = (tmp_path / "report" / "report.md").read_text()
  assert md.startswith("# XGLUE results (test)\n\n| Task | Metric | Languages | Score |")
  assert "| QAM | Acc. | 3 | 83.3 |" in md and "| POS | Precision (chunks) | 18 | 100.0 |" in md
  assert f"- AVG_U (nine understanding tasks): {100 * (8 + 5 / 6) / 9:.1f}" in md
  assert "## QAM\n\n| Metric | en | de | fr | avg |\n|---|---:|---:|---:|---:|\n| Acc. | 100.0 | 50.0 | 100.0 | 83.3 |" in md
  assert "![WPR: nDCG per language](plots/WPR.png)" in md
  assert json.loads((tmp_path / "report" / "results.json").read_text()) == json.loads(json.dumps(results))


def test_gold_outside_the_task_labels_is_refused(xglue, capsys):
  preds, gold = xglue
  _write(gold / XGLUE.task("NC").file(SPLIT, "de"), "t1\tb1\tsports\nt2\tb2\tmaybe\n")
  with pytest.raises(scorer.SubmissionError, match=r"NC/xglue\.nc\.de\.test:2: gold label 'maybe'; expected one of "
                                                   r"the NC labels: autos, entertainment, .*, video \(a file without "
                                                   r"labels\? XGLUE's released test files have none\)$"):
    _score(xglue, tasks=["NC"])
  assert cli.main(["score", "--benchmark", "xglue", "--predictions", str(preds), "--labels", str(gold)]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "gold label 'maybe'" in err and err.count("\n") == 1
  # PAWSX: lines counted in the file (the header and blank lines the scorer skips included).
  _write(gold / XGLUE.task("PAWSX").file(SPLIT, "fr"), "id\tsentence1\tsentence2\tlabel\n1\ta\tb\t1\n\n2\tc\td\t2\n")
  with pytest.raises(scorer.SubmissionError, match=r"PAWSX/fr/test_2k\.tsv:4: gold label '2'; expected one of the "
                                                   r"PAWSX labels: 0, 1"):
    _score(xglue, tasks=["PAWSX"])
  _write(gold / XGLUE.task("QADSM").file(SPLIT, "fr"), "q\tt\td\n")  # released test files: no label column
  with pytest.raises(scorer.SubmissionError, match=r"QADSM/xglue\.qadsm\.fr\.test:1: gold label 'd'; .*a file "
                                                   r"without labels"):
    _score(xglue, tasks=["QADSM"])
  _write(gold / XGLUE.task("NER").file(SPLIT, "es"), NER_GOLD.replace("German B-MISC", "German B-FOO"))
  with pytest.raises(scorer.SubmissionError, match=r"NER/es\.test:5: gold tag 'B-FOO'; expected one of the NER tags: "
                                                   r"B-LOC, B-MISC"):
    _score(xglue, tasks=["NER"])
  _write(gold / XGLUE.task("POS").file(SPLIT, "it"), "Dogs NOUN\nbark VERBX\n")
  with pytest.raises(scorer.SubmissionError, match=r"POS/it\.test:2: gold tag 'VERBX'; expected one of the POS tags"):
    _score(xglue, tasks=["POS"])


def test_wpr_predictions_are_numbers_without_a_warning(xglue, caplog):
  _write(xglue_scorer.prediction_path(str(xglue[0]), "WPR", "de"), "0.9\n-1.5\n")  # the official scorer's floats
  with caplog.at_level("WARNING"):
    assert _score(xglue, tasks=["WPR"])["tasks"]["WPR"]["de"] == 1.0
  assert not caplog.records
