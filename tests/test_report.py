"""Markdown tables, transfer gaps, plots and the report folder (offline, no jax in the module)."""

import json
import os
import subprocess
import sys

import pytest

from xtreme_jax import atomic
from xtreme_jax.evaluation import metrics, plots
from xtreme_jax.evaluation import report

TIER = "unit"  # conftest.py: this file's tier

approx = pytest.approx
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# pawsx: 3 of 7 languages; mlqa: 3 of 7 (QA metrics with counts, as the scorer
# returns them); bucc2018 (no English test set) complete; tatoeba with an
# unknown language "xx".
PAWSX = {"en": {"accuracy": 91.2}, "de": {"accuracy": 85.4}, "fr": {"accuracy": 86.0}}
MLQA = {"en": {"exact_match": 60.0, "f1": 75.0, "total": 10, "missing": 0},
        "de": {"exact_match": 40.0, "f1": 55.5, "total": 10, "missing": 1},
        "zh": {"exact_match": 30.2, "f1": 50.4, "total": 10, "missing": 0}}
BUCC = {"de": {"f1": 80.0, "precision": 82.0, "recall": 78.0}, "fr": {"f1": 70.0, "precision": 71.0, "recall": 69.0},
        "ru": {"f1": 60.0, "precision": 61.0, "recall": 59.0}, "zh": {"f1": 50.0, "precision": 51.0, "recall": 49.0}}
TATOEBA = {"de": {"accuracy": 90.0}, "xx": {"accuracy": 40.0}, "ja": {"accuracy": 55.0}}


@pytest.fixture
def results():
  return report.results_from_metrics({"pawsx": PAWSX, "mlqa": MLQA, "bucc2018": BUCC, "tatoeba": TATOEBA})


def test_classification_table_exact():
  # Only the languages scored are columns; the others are one line under the table.
  assert report.markdown_task_table("pawsx", PAWSX) == (
      "| Metric | en | de | fr | avg |\n"
      "|---|---:|---:|---:|---:|\n"
      "| Acc. | 91.2 | 85.4 | 86.0 | 87.5 |")  # (91.2 + 85.4 + 86.0) / 3 = 87.53
  assert report.not_scored_line({"zh": "no label file", "ko": "no prediction file", "es": "no prediction file"},
                                "pawsx") == "Not scored: es, ko (no prediction file); zh (no label file)."
  assert report.not_scored_line({}) == ""


def test_qa_table_exact():
  assert report.markdown_task_table("mlqa", MLQA) == (
      "| Metric | en | de | zh | avg |\n"
      "|---|---:|---:|---:|---:|\n"
      # avg F1 = (75 + 55.5 + 50.4) / 3 = 60.3; avg EM = (60 + 40 + 30.2) / 3 = 43.4.
      "| F1 / EM | 75.0 / 60.0 | 55.5 / 40.0 | 50.4 / 30.2 | 60.3 / 43.4 |")


def test_tables_of_other_tasks():
  # udpos: the leaderboard F1 and the token accuracy; bucc2018: F1, P, R; no English column.
  udpos = report.markdown_task_table("udpos", {"en": {"f1": 50.0, "accuracy": 90.0, "precision": 1.0, "recall": 2.0}})
  assert udpos.splitlines()[0] == "| Metric | en | avg |"
  assert [line.split(" | ")[0] for line in udpos.splitlines()[2:]] == ["| F1 (leaderboard)", "| Token acc."]
  bucc = report.markdown_task_table("bucc2018", BUCC).splitlines()
  assert bucc[0] == "| Metric | de | fr | ru | zh | avg |"
  assert bucc[2:] == ["| F1 | 80.0 | 70.0 | 60.0 | 50.0 | 65.0 |", "| P | 82.0 | 71.0 | 61.0 | 51.0 | 66.2 |",
                      "| R | 78.0 | 69.0 | 59.0 | 49.0 | 63.8 |"]
  # Languages outside the benchmark come after it; bare floats are the task's score.
  tatoeba = report.markdown_task_table("tatoeba", {"xx": 40.0, "af": 60.0}).splitlines()
  assert tatoeba[0] == "| Metric | af | xx | avg |" and tatoeba[2] == "| Acc. | 60.0 | 40.0 | 50.0 |"
  # A QA language given as a bare (EM + F1) / 2 adds the score row.
  qa = report.markdown_task_table("xquad", {"en": {"exact_match": 70.0, "f1": 80.0}, "de": 60.0}).splitlines()
  assert qa[2] == "| F1 / EM | 80.0 / 70.0 | - | 80.0 / 70.0 |"
  assert qa[3] == "| (EM + F1) / 2 | 75.0 | 60.0 | 67.5 |"
  with pytest.raises(ValueError, match="unknown task"):
    report.markdown_task_table("nope", {})


def test_transfer_gap_by_hand(results):
  gaps = report.transfer_gaps(results)
  assert list(gaps) == ["pawsx", "mlqa", "bucc2018", "tatoeba"]  # benchmark order
  # pawsx: 91.2 - (85.4 + 86.0) / 2 = 91.2 - 85.7 = 5.5
  assert gaps["pawsx"] == approx({"en": 91.2, "non_en_mean": 85.7, "gap": 5.5, "n_non_en": 2})
  # mlqa on EM (XTREME's Table 3): en 60, de 40, zh 30.2; mean 35.1; gap 24.9.
  assert gaps["mlqa"] == approx({"en": 60.0, "non_en_mean": 35.1, "gap": 24.9, "n_non_en": 2})
  # No English test set: no gap.
  assert gaps["bucc2018"]["en"] is None and gaps["bucc2018"]["gap"] is None
  assert gaps["bucc2018"]["non_en_mean"] == approx(65.0)
  assert report.transfer_gap_table(results) == (
      "| Task | Metric | en | Non-en mean | Gap |\n"
      "|---|---|---:|---:|---:|\n"
      "| pawsx | Acc. | 91.2 | 85.7 | 5.5 |\n"
      "| mlqa | EM | 60.0 | 35.1 | 24.9 |\n"
      "| bucc2018 | F1 | - | 65.0 | - |\n"
      "| tatoeba | Acc. | - | 61.7 | - |")


def test_results_from_metrics_matches_scorer_layout(results):
  assert results["missing_tasks"] == ["xnli", "udpos", "panx", "xquad", "tydiqa"]
  pawsx, mlqa, bucc = (results["tasks"][t] for t in ("pawsx", "mlqa", "bucc2018"))
  assert not pawsx["complete"] and sorted(pawsx["missing"]) == ["es", "ja", "ko", "zh"]
  assert pawsx["score"] == approx(262.6 / 3)
  assert mlqa["score"] == approx((43.4 + 60.3) / 2)  # (mean EM + mean F1) / 2
  assert mlqa["average"] == approx({"exact_match": 43.4, "f1": 60.3})  # counts are not averaged
  assert bucc["complete"] and bucc["score"] == approx(65.0)
  assert results["categories"] == {} and results["overall"] is None  # retrieval lacks a complete tatoeba


def test_summary_table_exact():
  results = {
      "tasks": {
          "xnli": {"languages": {lg: {"accuracy": 80.0} for lg in metrics.TASK_LANGUAGES["xnli"]},
                   "missing": {}, "average": {"accuracy": 80.0}, "score": 80.0, "complete": True},
          "pawsx": {"languages": {lg: {"accuracy": 90.0} for lg in metrics.TASK_LANGUAGES["pawsx"]},
                    "missing": {}, "average": {"accuracy": 90.0}, "score": 90.0, "complete": True},
          "panx": {"languages": {"en": {"f1": 70.04}}, "missing": {lg: "no prediction file" for lg in
                                                                  metrics.TASK_LANGUAGES["panx"] if lg != "en"},
                   "average": {"f1": 70.04}, "score": 70.04, "complete": False},
      },
      "missing_tasks": ["udpos", "xquad", "mlqa", "tydiqa", "bucc2018", "tatoeba"],
      "categories": {"classification": 85.0}, "overall": None,
  }
  assert report.summary_table(results) == (
      "| Task | Metric | Languages | Score |\n"
      "|---|---|---:|---:|\n"
      "| xnli | Acc. | 15/15 | 80.0 |\n"
      "| pawsx | Acc. | 7/7 | 90.0 |\n"
      "| panx | F1 | 1/40 | 70.0* |\n"
      "| *Classification* |  |  | 85.0 |\n\n"
      "\\* incomplete: mean over the languages present only; not used in categories or overall.\n\n"
      "Not scored: udpos, xquad, mlqa, tydiqa, bucc2018, tatoeba.")
  results["overall"] = 66.66
  assert "| **Overall** |  |  | **66.7** |" in report.summary_table(results)


def _is_png(path):
  with open(path, "rb") as f:
    return f.read(8) == PNG_MAGIC


def test_write_report(results, tmp_path, capsys):
  out = tmp_path / "report"
  paths = report.write_report(results, str(out))
  assert capsys.readouterr() == ("", "")
  assert sorted(paths) == ["plots/bucc2018.png", "plots/mlqa.png", "plots/pawsx.png", "plots/tatoeba.png",
                           "report.md", "results.json"]
  for name, path in paths.items():
    assert path == os.path.join(str(out), name) and os.path.isfile(path)
  with open(paths["results.json"], encoding="utf-8") as f:
    assert json.load(f) == json.loads(json.dumps(results))
  for name in paths:
    if name.endswith(".png"):
      assert _is_png(paths[name]) and os.path.getsize(paths[name]) > 5000
  text = open(paths["report.md"], encoding="utf-8").read()
  assert text == report.render_markdown(results)
  # The score table comes first, right after the title.
  assert text.startswith("# XTREME results\n\n" + report.summary_table(results) + "\n\n## Cross-lingual transfer gap")
  assert report.transfer_gap_table(results) in text
  assert report.markdown_task_table("mlqa", MLQA) in text
  assert "![mlqa: (EM + F1) / 2 per language](plots/mlqa.png)" in text
  # Missing languages: one line per task, not columns.
  assert "\n\nNot scored: es, ja, ko, zh (not evaluated).\n\n![pawsx" in text
  assert "| - |" not in text.split("## Cross-lingual transfer gap")[1].split("## pawsx")[1]
  # Atomic writes leave no temporary file behind; files are world-readable.
  assert sorted(os.listdir(out)) == ["plots", "report.md", "results.json"]
  assert sorted(os.listdir(out / "plots")) == ["bucc2018.png", "mlqa.png", "pawsx.png", "tatoeba.png"]
  assert os.stat(paths["report.md"]).st_mode & 0o777 == 0o644
  # Overwriting an existing report works.
  assert report.write_report(results, str(out)) == paths


def test_plots_of_tasks_no_longer_in_the_results_are_removed(tmp_path):
  plots = tmp_path / "plots"
  plots.mkdir()
  for name in ("panx.png", "loss.png", "pawsx.png", "mine.txt"):  # an earlier, larger report (and a file of ours)
    (plots / name).write_bytes(b"old")
  paths = report.write_report(report.results_from_metrics({"pawsx": PAWSX}), str(tmp_path))
  assert sorted(p for p in paths if p.startswith("plots/")) == ["plots/pawsx.png"]
  assert sorted(os.listdir(plots)) == ["mine.txt", "pawsx.png"] and _is_png(paths["plots/pawsx.png"])


def test_plot_unknown_languages_and_families(tmp_path):
  assert set().union(*metrics.TASK_LANGUAGES.values()) <= set(plots.LANGUAGE_FAMILY)
  assert set(plots.LANGUAGE_FAMILY.values()) < set(plots.FAMILY_ORDER)
  assert plots.language_family("xx") == "Other" and plots.language_family("ur") == "IE: Indo-Aryan"
  path = str(tmp_path / "deep" / "plot.png")
  assert report.plot_task("tatoeba", {"xx": 40.0, "yy": {"accuracy": 35.0}, "de": 90.0}, path) == path
  assert _is_png(path) and os.path.getsize(path) > 5000
  # English only (no non-English mean line), QA metrics dicts.
  path = str(tmp_path / "qa.png")
  report.plot_task("xquad", {"en": {"exact_match": 70.0, "f1": 80.0}}, path)
  assert _is_png(path)
  with pytest.raises(ValueError, match="no language"):
    report.plot_task("xnli", {}, str(tmp_path / "empty.png"))
  assert not os.path.exists(tmp_path / "empty.png")


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
  path = tmp_path / "f.txt"
  path.write_text("old")

  def fail(tmp):
    with open(tmp, "w") as f:
      f.write("partial")
    raise RuntimeError("boom")

  with pytest.raises(RuntimeError):
    atomic.write_with(str(path), fail)
  assert path.read_text() == "old" and os.listdir(tmp_path) == ["f.txt"]


def test_module_imports_no_jax_tf_or_matplotlib():
  code = ("import sys, xtreme_jax.evaluation.report; "
          "print(sorted(m for m in ('jax', 'tensorflow', 'matplotlib') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
  assert out.strip() == "[]"


def test_plot_legend_lists_every_family_and_zero_scores_are_visible():
  fig = report.task_figure("tydiqa", {"en": {"exact_match": 50.0, "f1": 60.0}, "fi": {"exact_match": 0.0, "f1": 0.0},
                                      "ar": 0.0, "ko": 40.0})
  ax = fig.axes[0]
  assert [t.get_text() for t in ax.get_legend().get_texts()] == [
      "IE: Germanic", "Afro-Asiatic", "Koreanic", "Uralic", "English (source)", "non-en mean 13.3"]
  assert [t.get_text() for t in ax.get_xticklabels()] == ["en", "ar", "ko", "fi"]  # grouped by family
  heights = [bar.get_height() for bar in ax.patches]
  assert heights == [55.0, 0.0, 40.0, 0.0]  # a zero is drawn as zero, not as a stub as tall as a 1.0
  assert [t.get_text() for t in ax.texts] == ["0.0", "0.0", "55.0"]  # zeros labelled; English annotated
  marks = [line for line in ax.get_lines() if list(line.get_ydata()) == [0, 0]]  # each zero marked on the axis
  assert [sorted(line.get_xdata()) for line in marks] == [[0.6, 1.4], [2.6, 3.4]]
  # Every family of a 40-language task is in the legend.
  scores = {lg: 50.0 for lg in metrics.TASK_LANGUAGES["panx"]}
  labels = [t.get_text() for t in report.task_figure("panx", scores).axes[0].get_legend().get_texts()]
  families = {plots.language_family(lg) for lg in scores}
  assert labels[:len(families)] == [f for f in plots.FAMILY_ORDER if f in families]
  assert labels[len(families):] == ["English (source)", "non-en mean 50.0"]


RUNS = {"xnli": {"task": "xnli", "criterion": "en dev accuracy", "selected_step": 200, "train_steps": 300,
                 "history": [[100, 1.1], [200, 0.7], [300, 0.5]], "train_accuracy": 81.25},
        "squad": {"task": "xquad", "criterion": None, "selected_step": None, "train_steps": 50,
                  "history": [[25, 3.0], [50, 2.5]], "train_accuracy": None}}
RETRIEVAL = {"tatoeba": {"layer": 8, "pooling": "mean", "max_len": 128},
             "bucc2018": {"layer": 8, "pooling": "cls", "max_len": 512}}


def test_report_names_selected_steps_losses_and_retrieval_settings(tmp_path):
  assert report.finetuning_table(RUNS) == (
      "| Model | Task | Steps | Selected step | Train acc. | Loss (last 10%) |\n"
      "|---|---|---:|---|---:|---:|\n"
      "| xnli | xnli | 300 | 200 (en dev accuracy) | 81.2 | 0.500 |\n"
      "| squad | xquad | 50 | final | - | 2.500 |")
  assert report.retrieval_lines(RETRIEVAL) == (
      "- bucc2018: layer 8, cls pooling, max length 512.\n- tatoeba: layer 8, mean pooling, max length 128.")
  # Extra keys ride along with the bare {task: {lg: metrics}} form too.
  results = {"pawsx": {**PAWSX, "de": {"accuracy": 85.4, "invalid": 3}}, "runs": RUNS, "retrieval": RETRIEVAL}
  paths = report.write_report(results, str(tmp_path))
  assert sorted(paths) == ["plots/loss.png", "plots/pawsx.png", "report.md", "results.json"]
  assert _is_png(paths["plots/loss.png"]) and os.path.getsize(paths["plots/loss.png"]) > 5000
  text = open(paths["report.md"], encoding="utf-8").read()
  loss_link = "![fine-tuning loss per model](plots/loss.png)"
  assert "## Fine-tuning\n\n" + report.finetuning_table(RUNS) + "\n\n" + loss_link in text
  assert "## Retrieval\n\nSentence embeddings:\n\n" + report.retrieval_lines(RETRIEVAL) in text
  assert "Invalid predictions (scored as the official scorer does): de 3." in text
  assert json.load(open(paths["results.json"]))["runs"]["xnli"]["selected_step"] == 200
  # Without runs / retrieval: no such sections, no loss plot.
  plain = report.render_markdown({"pawsx": PAWSX})
  assert "## Fine-tuning" not in plain and "## Retrieval" not in plain and "Invalid" not in plain


def test_xglue_report_shows_generation_tasks_as_bleu_columns():
  """QG / NTG rows and per-language tables in BLEU points (the scorer's 0-1 x100), AVG_G beside AVG_U."""
  qg = {"de": 0.05, "en": 0.15, "es": 0.1, "fr": 0.04, "it": 0.16, "pt": 0.08, "avg": 0.58 / 6}
  results = {"tasks": {"QG": qg}, "missing_tasks": [], "avg_u": None, "avg_g": 0.0712, "average": 0.58 / 6,
             "split": "dev"}
  md = report.render_xglue_markdown(results)
  assert md.startswith("# XGLUE results (dev)\n\n| Task | Metric | Languages | Score |")
  assert "| QG | BLEU | 6 | 9.7 |" in md and "- AVG_G (two generation tasks): 7.1" in md and "AVG_U" not in md
  assert ("## QG\n\n| Metric | en | de | es | fr | it | pt | avg |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
          "| BLEU | 15.0 | 5.0 | 10.0 | 4.0 | 16.0 | 8.0 | 9.7 |") in md
  assert "![QG: BLEU per language](plots/QG.png)" in md


def test_settings_table_puts_each_settings_scores_side_by_side():
  from xtreme_jax.evaluation import report as rep
  xtreme_like = {"translate_train": rep.results_from_metrics({"xnli": {"en": 80.0, "de": 70.0}}),
                 "filter_student": rep.results_from_metrics({"xnli": {"en": 82.0}})}
  table = rep.settings_table(xtreme_like)
  assert "| Language | translate_train | filter_student |" in table
  assert "| en | 80.0 | 82.0 |" in table and "| de | 70.0 | - |" in table
  assert "| **mean** | 75.0 | 82.0 |" in table
  xglue_like = {"zero_shot": {"tasks": {"XNLI": {"en": 0.8, "de": 0.6, "avg": 0.7}}},
                "filter_teacher": {"tasks": {"XNLI": {"en": 0.9, "de": 0.7, "avg": 0.8}}}}
  assert rep.language_scores(xglue_like["filter_teacher"]) == {"XNLI": {"en": 90.0, "de": 70.0}}
  assert "| **mean** | 70.0 | 80.0 |" in rep.settings_table(xglue_like)


def test_a_zero_bar_is_as_high_as_zero_and_a_one_bar_as_one():
  ax = report.task_figure("xnli", {"de": 0.0, "fr": 1.0, "es": 50.0}).axes[0]
  heights = dict(zip([t.get_text() for t in ax.get_xticklabels()], [bar.get_height() for bar in ax.patches]))
  assert heights == {"de": 0.0, "fr": 1.0, "es": 50.0}


def test_more_than_ten_series_each_get_their_own_colour_and_line_style():
  names = [f"task{i}" for i in range(13)]
  runs = {name: {"history": [[10, 2.0 + i], [20, 1.0 + i]], "selected_step": None} for i, name in enumerate(names)}
  ax = plots.loss_figure(runs).axes[0]
  lines = {line.get_label(): (line.get_color(), line.get_linestyle()) for line in ax.get_lines()}
  assert list(lines) == names and len(set(lines.values())) == 13  # tab10 alone would repeat task0's blue
  assert lines["task0"][0] == lines["task10"][0] and lines["task0"][1] != lines["task10"][1]
  assert len(set(plots.series_styles(40))) == 40


def test_last_loss_is_the_mean_of_the_last_tenth_of_the_steps():
  # Logged at steps 10..100; the last 10% of 100 steps are steps >= 90: (0.8 + 0.4) / 2 = 0.6.
  history = [[step, 3.0 - step / 50] for step in range(10, 90, 10)] + [[90, 0.8], [100, 0.4]]
  assert report.last_loss(history) == approx(0.6)
  assert report.last_loss([[50, 2.5]]) == 2.5 and report.last_loss([]) is None
  table = report.finetuning_table({"xnli": {"task": "xnli", "train_steps": 100, "history": history}})
  assert table.splitlines()[2] == "| xnli | xnli | 100 | final | - | 0.600 |"


def test_languages_without_data_on_disk_read_not_in_the_data():
  # The sample holds French only for BUCC / Tatoeba: pawsx's fr is not on disk, its es has data but no prediction.
  results = report.results_from_metrics({"pawsx": {"en": {"accuracy": 90.0}}, "bucc2018": BUCC})
  marked = report.mark_not_in_data(results, {"pawsx": ["en", "es"], "bucc2018": ["de", "fr", "ru", "zh"]})
  missing = marked["tasks"]["pawsx"]["missing"]
  assert missing["es"] == "not evaluated" and missing["fr"] == missing["zh"] == report.NOT_IN_DATA
  assert results["tasks"]["pawsx"]["missing"]["fr"] == "not evaluated"  # the input is left as it was
  text = report.render_markdown(marked)
  assert "| pawsx | Acc. | 1/7 (5 not in the data) | 90.0* |" in text
  assert "Not scored: de, fr, ja, ko, zh (not in the data on disk); es (not evaluated)." in text
  from xtreme_jax.evaluation import scorer
  table = scorer.format_table(marked).splitlines()  # the run's printed table: n/s, not miss, for fr
  header = table[0].split()
  pawsx = dict(zip(header[1:], next(line for line in table if line.startswith("pawsx")).split()[1:]))
  assert pawsx["fr"] == "n/s" and pawsx["en"] == "90.0"
  assert any(line.startswith("n/s: a language the data on disk") for line in table)


PUBLISHED = {"model": "xlmr_large", "benchmark": "xtreme", "settings": ["zero_shot"],
             "source": {"citation": "A paper", "table": "its table", "read_from": "https://example.org/x", "row": "R"},
             "tasks": {"mlqa": {"f1": {"avg": 70.0, "languages": {"en": 80.0, "de": 68.0}}},
                       "xnli": {"accuracy": {"avg": 79.0}}}}


def test_published_scores_are_shown_beside_the_runs_own_with_their_source():
  results = {"pawsx": PAWSX, "mlqa": MLQA, "published": [PUBLISHED]}
  text = report.render_markdown(results)
  section = text.split("## Published scores")[1].split("## Cross-lingual")[0]
  # mlqa F1: (75 + 55.5 + 50.4) / 3 = 60.3 over the 3 languages scored; xnli and pawsx: not both run and published.
  assert "| mlqa | F1 | 60.3 (3) | 70.0 | [1] |" in section and "xnli" not in section
  assert "| yours | 75.0 | 55.5 | 50.4 |" in section and "| published [1] | 80.0 | 68.0 | - |" in section
  assert "- [1] A paper: its table, row 'R'; read from https://example.org/x." in section
  assert "Published" not in report.render_markdown({"pawsx": PAWSX, "mlqa": MLQA})  # no model named: nothing
  xglue = {"tasks": {"XNLI": {"en": 0.8, "de": 0.6, "avg": 0.7}}, "avg_u": None, "avg_g": None, "average": 0.7,
           "published": [{**PUBLISHED, "benchmark": "xglue", "tasks": {"XNLI": {"accuracy": {"avg": 83.9}}}}]}
  assert "| XNLI | Acc. | 70.0 (2) | 83.9 | [1] |" in report.render_xglue_markdown(xglue)
