"""The bundled XGLUE sample: every file of the official layout reads, carries valid labels, and scores 1.0 against
itself."""

import json
import os

import pytest

from xtreme_jax.data import paths
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.evaluation import xglue_scorer
from xtreme_jax.registry import XGLUE

TIER = "unit"  # conftest.py: this file's tier

SAMPLE = paths.sample_xglue_dir()
# The release (and the sample) has English training data only; other languages' training data is user-supplied.
CASES = [(spec.name, split, lg) for spec in XGLUE.tasks for split, langs in spec.languages.items() for lg in langs
         if split != "train" or lg == "en"]


def test_sample_dir_is_bundled():
  assert os.path.isdir(SAMPLE)
  assert os.path.dirname(SAMPLE) == paths.sample_dir()


@pytest.mark.parametrize("task,split,lg", CASES, ids=["-".join(c) for c in CASES])
def test_every_file_reads_with_valid_labels(task, split, lg):
  spec = XGLUE.task(task)
  examples = xglue_readers.read(task, SAMPLE, lg, split)
  assert examples
  if spec.kind == "tagging":
    for ex in examples:
      assert ex["tokens"] and ex["tags"] is not None and len(ex["tags"]) == len(ex["tokens"])
      assert set(ex["tags"]) <= set(spec.labels)
  elif spec.kind == "span_qa":
    assert len({ex["id"] for ex in examples}) == len(examples)
    for ex in examples:
      assert ex["question"] and ex["answers"]["text"]
      for text, start in zip(ex["answers"]["text"], ex["answers"]["answer_start"]):
        assert text and ex["context"][start:start + len(text)] == text
  elif spec.kind == "generation":  # targets of four or more words: a copy of them scores BLEU 100
    assert len(examples) >= (16 if split == "train" else 4)
    for ex in examples:
      assert ex["source"].strip() and ex["target"] is not None and len(ex["target"].split()) >= 4, ex
  else:
    for ex in examples:
      assert ex["text_a"] and ex["text_b"]
      assert ex["label"] is not None and ex["label"] in spec.labels


def test_files_are_utf8_with_unix_line_ends():
  for root, _, files in os.walk(SAMPLE):
    for name in files:
      with open(os.path.join(root, name), "rb") as f:
        data = f.read()
      data.decode("utf-8")
      assert b"\r" not in data and data.endswith(b"\n"), os.path.join(root, name)


def test_english_training_data_covers_the_labels():
  for spec in XGLUE.tasks:
    examples = xglue_readers.read(spec.name, SAMPLE, "en", "train")
    if spec.kind in ("span_qa", "generation"):
      assert len(examples) >= (20 if spec.kind == "span_qa" else 16)
    elif spec.kind == "tagging":
      assert len(examples) >= 20
      assert {t for ex in examples for t in ex["tags"]} == set(spec.labels), spec.name
    else:
      assert len(examples) >= 24
      assert {ex["label"] for ex in examples} == set(spec.labels), spec.name


@pytest.mark.parametrize("split", ["dev", "test"])
def test_wpr_groups_have_varied_ratings(split):
  spec = XGLUE.task("WPR")
  for lg in spec.languages[split]:
    groups = {}
    for ex in xglue_readers.read("WPR", SAMPLE, lg, split):
      groups.setdefault(ex["group"], []).append(ex["label"])
    assert len(groups) >= 2
    for ratings in groups.values():
      assert len(ratings) >= 2 and len(set(ratings)) > 1 and any(r != "0" for r in ratings), (lg, ratings)


def _perfect_submission(pred_dir, split):
  """Predictions written from the sample's own ground truth, in the official submission layout."""
  for spec in XGLUE.tasks:
    for lg in spec.test_languages:
      examples = xglue_readers.read(spec.name, SAMPLE, lg, split)
      path = xglue_scorer.prediction_path(str(pred_dir), spec.name, lg)
      os.makedirs(os.path.dirname(path), exist_ok=True)
      if spec.kind == "tagging":
        content = "\n".join("".join(f"{t}\n" for t in ex["tags"]) for ex in examples)
      elif spec.kind == "span_qa":
        content = json.dumps({ex["orig_id"]: ex["answers"]["text"][0] for ex in examples}, ensure_ascii=False)
      elif spec.kind == "generation":
        content = "".join(f"{ex['target']}\n" for ex in examples)
      else:
        content = "".join(f"{ex['label']}\n" for ex in examples)
      with open(path, "w", encoding="utf-8") as f:
        f.write(content)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_perfect_submission_scores_one(tmp_path, split):
  _perfect_submission(tmp_path, split)
  results = xglue_scorer.score_submission(str(tmp_path), SAMPLE, split)
  assert results["missing_tasks"] == []
  assert set(results["tasks"]) == set(XGLUE.task_names)
  for task, scores in results["tasks"].items():
    assert set(scores) == set(XGLUE.task(task).test_languages) | {"avg"}
    for lg, score in scores.items():
      assert score == pytest.approx(1.0), (task, lg, score)
  assert results["avg_u"] == pytest.approx(1.0) and results["avg_g"] == pytest.approx(1.0)
