"""FILTER's task kinds (runs/filter_kinds.py) and soft-label files (runs/soft_labels.py)."""

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.vocabularies import load_vocabulary
from xtreme_jax.registry import XTREME
from xtreme_jax.runs import filter_kinds, soft_labels, task_kinds
from xtreme_jax.runs.xtreme import TaskSettings

TIER = "unit"  # conftest.py: this file's tier


@pytest.fixture(scope="module")
def vocab():
  return load_vocabulary(paths.sample_vocab())


def _filter(task, student=False, **settings):
  spec = XTREME.task(task)
  return spec, filter_kinds.Filter(task_kinds.of(spec), filter_kinds.FilterSettings(**settings), student)


def _pair(source, target, language="de"):
  return {"id": target["id"], "language": language, "source": source, "target": target}


def test_classification_rows_are_both_sides_base_features_sharing_the_label(vocab):
  spec, kind = _filter("xnli")
  s = TaskSettings(seq_len=16)
  en = {"id": "en-1", "text_a": "the shop sells bread", "text_b": "a shop", "label": "entailment"}
  de = {"id": "de-1", "text_a": "der laden", "text_b": "ein laden", "label": "entailment"}
  rows, owners = kind.features(spec, [_pair(en, de)], vocab, s, training=True)
  base = task_kinds.of(spec)
  (src,), _ = base.features(spec, [en], vocab, s, training=True)
  (tgt,), _ = base.features(spec, [de], vocab, s, training=True)
  assert owners == [0] and len(rows) == 1
  for key in ("input_ids", "input_mask", "token_type_ids"):
    np.testing.assert_array_equal(rows[0]["source_" + key], src[key])
    np.testing.assert_array_equal(rows[0][key], tgt[key])
  assert int(rows[0]["labels"]) == spec.labels.index("entailment")
  assert set(kind.model_keys) <= set(rows[0]) and kind.predict_keys[-1] == "example_weights"
  # a student's rows also carry the teacher's logits
  _, student = _filter("xnli", student=True)
  assert "teacher_logits" in student.model_keys and student.kl_weight == 0.5


def test_tagging_translation_without_tags_keeps_only_the_kl_positions(vocab):
  spec, kind = _filter("udpos", student=True)
  s = TaskSettings(seq_len=16)
  en = {"id": "en-1", "tokens": ["the", "shop"], "tags": ["DET", "NOUN"]}
  de = {"id": "de-1", "tokens": ["der", "laden", "hier"], "tags": None}
  (row,), _ = kind.features(spec, [_pair(en, de)], vocab, s, training=True)
  assert np.all(row["labels"] == -100) and row["label_weights"].sum() == 3  # one position per word
  assert sorted(row["source_labels"][row["source_label_weights"] > 0]) == sorted(
      [spec.labels.index("DET"), spec.labels.index("NOUN")])
  (self_pair,), _ = kind.features(spec, [_pair(en, en, "en")], vocab, s, training=True)
  np.testing.assert_array_equal(self_pair["labels"], self_pair["source_labels"])  # English with itself: gold both
  assert kind.kl_weight == 1.0


def test_qa_target_windows_pair_with_the_same_window_or_the_sources_last(vocab):
  spec, kind = _filter("xquad")
  s = TaskSettings(seq_len=24, doc_stride=6, max_query_len=6)
  long = " ".join(f"word{i}" for i in range(40))
  target = {"id": "q1", "question": "where", "context": long, "answers": {"text": [], "answer_start": []}}
  source = {"id": "q1", "question": "where", "context": "a short context", "answers": {"text": [],
                                                                                        "answer_start": []}}
  rows, owners = kind.features(spec, [_pair(source, target)], vocab, s, training=False)
  base = task_kinds.of(spec)
  tgt, _ = base.features(spec, [target], vocab, s, training=False)
  (src,), _ = base.features(spec, [source], vocab, s, training=False)
  assert len(rows) == len(tgt) > 1 and owners == [0] * len(tgt)
  for row, window in zip(rows, tgt):
    np.testing.assert_array_equal(row["input_ids"], window["input_ids"])
    np.testing.assert_array_equal(row["source_input_ids"], src["input_ids"])  # the source's only window
  assert all(float(r["example_weights"]) == 1.0 for r in rows)  # inference: every window predicted


def test_decode_and_scores_use_the_target_side(vocab):
  spec, kind = _filter("pawsx")
  s = TaskSettings(seq_len=16)
  pairs = [_pair({"id": f"en{i}", "text_a": "a", "text_b": "b", "label": "1"},
                 {"id": f"de{i}", "text_a": "c", "text_b": "d", "label": label}) for i, label in enumerate("10")]
  rows, owners = kind.features(spec, pairs, vocab, s, training=False)
  outputs = {"source": np.asarray([[0.0, 5.0], [0.0, 5.0]]), "target": np.asarray([[0.0, 1.0], [2.0, 0.0]])}
  predicted = kind.decode(spec, s, lambda keys: outputs, pairs, rows, owners)
  assert predicted == ["1", "0"] and kind.dev_score(pairs, predicted) == 100.0
  assert kind.submission_text(predicted, pairs) == "1\n0\n"


def test_filter_refuses_kinds_it_does_not_take():
  with pytest.raises(errors.ConfigError, match="not RankingRegression"):
    filter_kinds.Filter(task_kinds.RankingRegression(), filter_kinds.FilterSettings(), False)
  with pytest.raises(errors.ConfigError, match=r"FilterSettings.english = 'pivot': expected one of"):
    filter_kinds.FilterSettings(english="pivot")


def test_soft_labels_round_trip_and_refuse_other_rows_tasks_or_teachers(tmp_path):
  rows = [{"source_input_ids": np.arange(4), "input_ids": np.arange(3) + i} for i in range(2)]
  digest = soft_labels.rows_digest(rows)
  arrays = {"teacher_logits": np.asarray([[1.0, 2.0], [0.5, 0.0]], np.float32)}
  with pytest.raises(errors.ConfigError, match=f"soft labels at {tmp_path}/soft_labels.npz, which do not exist; "
                                               "train the teacher first"):
    soft_labels.load(str(tmp_path), "xnli", digest, ["t1"])
  soft_labels.save(str(tmp_path), "xnli", digest, ["t1"], arrays)
  loaded = soft_labels.load(str(tmp_path), "xnli", digest, ["t1"])
  np.testing.assert_array_equal(loaded["teacher_logits"], arrays["teacher_logits"])
  other_rows = soft_labels.rows_digest([{**rows[0], "input_ids": np.arange(3) + 5}, rows[1]])
  for args, what in (((str(tmp_path), "pawsx", digest, ["t1"]), "task 'xnli', not 'pawsx'"),
                     ((str(tmp_path), "xnli", other_rows, ["t1"]), "other training rows"),
                     ((str(tmp_path), "xnli", digest, ["t2"]), "other teacher models")):
    with pytest.raises(errors.ConfigError, match=f"soft labels at {tmp_path}/soft_labels.npz are for {what}"):
      soft_labels.load(*args)
  assert filter_kinds.with_soft_labels(rows, loaded)[1]["teacher_logits"].tolist() == [0.5, 0.0]
  with pytest.raises(errors.DataError, match=r"soft labels for \[2\] rows; the training data has 1"):
    filter_kinds.with_soft_labels(rows[:1], loaded)


def test_several_teachers_average_their_probabilities():
  a, b = np.asarray([[0.0, np.log(3.0)]]), np.asarray([[np.log(3.0), 0.0]])  # p = (.25, .75) and (.75, .25)
  mean = soft_labels.average([a, b])
  np.testing.assert_allclose(np.exp(mean), [[0.5, 0.5]], rtol=1e-6)
  np.testing.assert_array_equal(soft_labels.average([a]), a.astype(np.float32))
