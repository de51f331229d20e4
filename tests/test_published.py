"""The published-score files agree with the registry, and a run finds its model's (offline, no jax)."""

import numbers
import os

import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.evaluation import published
from xtreme_jax.registry import BENCHMARKS

TIER = "unit"  # conftest.py: this file's tier

ENTRIES = published.entries()


def test_there_are_files_and_each_names_a_preset_a_benchmark_and_its_settings():
  assert len(ENTRIES) >= 5
  presets = {name[:-len(".gin")] for name in os.listdir(os.path.join(paths.gin_dir(), "models"))}
  for e in ENTRIES:
    assert set(e) == {"model", "benchmark", "settings", "source", "tasks", "file"}, e["file"]
    assert e["model"] in presets, e["file"]
    assert e["benchmark"] in BENCHMARKS, e["file"]
    assert e["settings"] and set(e["settings"]) <= set(BENCHMARKS[e["benchmark"]].settings), e["file"]


def test_every_source_is_named():
  for e in ENTRIES:
    source = e["source"]
    assert all(isinstance(source.get(k), str) and source[k].strip() for k in published.SOURCE_KEYS), e["file"]
    assert source["read_from"].startswith("https://github.com/") and "/blob/" in source["read_from"], e["file"]
    commit = source["read_from"].split("/blob/")[1].split("/")[0]
    assert len(commit) == 40 and int(commit, 16) >= 0, e["file"]  # a commit, not a moving branch


def test_tasks_metrics_languages_and_values_exist_in_the_registry():
  for e in ENTRIES:
    bench = BENCHMARKS[e["benchmark"]]
    assert e["tasks"], e["file"]
    for task, by_metric in e["tasks"].items():
      assert task in bench.task_names, (e["file"], task)
      assert by_metric and set(by_metric) <= set(published.metrics_of(e["benchmark"], task)), (e["file"], task)
      for scores in by_metric.values():
        assert set(scores) <= {"avg", "languages"} and scores, (e["file"], task)
        values = list(scores.get("languages", {}).values()) + ([scores["avg"]] if "avg" in scores else [])
        assert set(scores.get("languages", {})) <= set(bench.task(task).test_languages), (e["file"], task)
        assert all(isinstance(v, numbers.Real) and not isinstance(v, bool) and 0 <= v <= 100 for v in values)


def test_a_run_finds_the_files_of_its_model_benchmark_and_setting():
  assert [e["file"] for e in published.for_run("xlmr_large", "xtreme", "zero_shot")] == [
      "xtreme_xlmr_large_mt5_readme.json", "xtreme_xlmr_large_xlmr_readme.json"]
  assert published.for_run("xlmr_large", "xtreme", "translate_train") == []  # other numbers, other setting
  assert [e["file"] for e in published.for_run("xlmr_large", "xglue", "filter_student")] == [
      "xglue_xlmr_large_filter_leaderboard.json"]
  assert published.for_run(None, "xtreme", "zero_shot") == []  # the sample runs name no model
  published.check_model(None)
  published.check_model("mbert_base")
  with pytest.raises(errors.ConfigError, match="published_model='tiny' has no published scores"):
    published.check_model("tiny")


def test_citation_line_names_table_row_and_where_it_was_read():
  entry = published.for_run("veco_large", "xtreme", "zero_shot")[1]
  line = published.citation_line(1, entry)
  assert line.startswith("[2] Luo et al., VECO") and "row 'VECO_large'" in line
  assert "read from https://github.com/alibaba/AliceMind/blob/" in line
