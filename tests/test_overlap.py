"""Subword overlap (Wu & Dredze 2019, Fig. 3) on a hand-made example."""

import pytest
from scipy import stats

from xtreme_jax.evaluation import overlap

TIER = "unit"  # conftest.py: this file's tier


def test_p_type_and_p_token_by_hand():
  train = overlap.subword_counts([{"tokens": ["the", "cat", "sat"]}, {"text_a": "the dog", "text_b": "ran"}],
                                 lambda t: t.split())
  test = overlap.subword_counts([{"tokens": ["the", "cat", "the", "the"]}, {"question": "where", "context": "cat"}],
                                lambda t: t.split())
  # test types: the (3), cat (2), where (1): 2 of 3 types seen; 5 of 6 tokens seen
  got = overlap.overlap(train, test)
  assert got["p_type"] == pytest.approx(100 * 2 / 3) and got["p_token"] == pytest.approx(100 * 5 / 6)


def test_correlation_is_pearson_with_its_p_value(tmp_path):
  xs, ys = [10.0, 40.0, 55.0, 80.0], [20.0, 35.0, 70.0, 72.0]
  got = overlap.correlation(xs, ys)
  r, p = stats.pearsonr(xs, ys)
  assert got == {"r": pytest.approx(r), "p_value": pytest.approx(p), "points": 4}
  rows = [{"task": "ner", "language": lg, "p_type": x, "p_token": x + 1, "score": y}
          for lg, x, y in zip("de es nl zh".split(), xs, ys)]
  assert "| ner | es | 40.0 | 41.0 | 35.0 |" in overlap.table(rows)
  overlap.scatter_plot(rows, "p_type", str(tmp_path / "overlap.png"))
  assert (tmp_path / "overlap.png").read_bytes()[:4] == b"\x89PNG"


def test_rows_of_a_run_compare_each_test_set_with_english_training_data():
  from xtreme_jax.data import paths
  from xtreme_jax.data.readers.mbert_data import MbertData
  data = MbertData(data_dir=paths.sample_mbert_dir())
  got = overlap.rows(data, {"pos": {"en": 50.0, "de": 40.0, "es": 30.0}}, lambda t: t.split())
  assert [(r["language"], r["score"]) for r in got] == [("de", 40.0), ("es", 30.0)]  # English is not a target
  # German test words seen in the English POS training words: only "." (2 of 9 tokens, 1 of 8 types)
  assert got[0]["p_token"] == pytest.approx(100 * 2 / 9) and got[0]["p_type"] == pytest.approx(100 / 8)


def test_scatter_plot_has_a_title_and_readable_labels():
  rows = [{"task": task, "language": lg, "p_type": x, "p_token": x, "score": y}
          for task in ("ner", "pos") for lg, x, y in (("de", 10.0, 20.0), ("es", 40.0, 35.0))]
  ax = overlap.scatter_figure(rows, "p_token").axes[0]
  assert ax.get_title() == "Zero-shot score against subword overlap (p_token)"
  assert ax.get_xlabel() == overlap.MEASURE_LABEL["p_token"] and ax.get_ylabel() == "zero-shot score (%)"
  assert sorted(t.get_text() for t in ax.texts) == ["de", "de", "es", "es"]
  assert min(t.get_fontsize() for t in ax.texts) >= 8
  assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ner", "pos"]
