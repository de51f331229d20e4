"""FILTER's task kinds (runs/filter_kinds.py) and soft-label files (runs/soft_labels.py)."""

import json

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.vocab.vocabularies import load_vocabulary
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
  s = TaskSettings(seq_len=24, qa=task_kinds.QaSettings(doc_stride=6, max_query_len=6))
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
  predicted = kind.decode(spec, s, lambda keys: outputs, task_kinds.Featurised(pairs, rows, owners))
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


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


# three teachers' logits for one classification example / one tagged sentence of 2 tokens / 2 QA windows
_TEACHERS = {"xnli": [[[1.0, -2.0, 0.5]], [[3.0, 0.0, -1.0]], [[-0.5, 1.0, 2.0]]],
             "udpos": [[[[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]]], [[[2.0, 2.0, 0.0], [0.0, 3.0, 1.0]]],
                       [[[1.0, 0.0, 1.0], [-1.0, 0.0, 0.0]]]],
             "xquad": [[[1.0, 4.0, -2.0, 0.0], [0.0, 0.0, 3.0, 1.0]], [[2.0, 0.0, 1.0, 0.0], [6.0, 0.0, 0.0, 1.0]],
                       [[0.0, 5.0, 1.0, 0.0], [0.0, 3.0, 0.0, 1.0]]]}


@pytest.mark.parametrize("task,temperature", [("xnli", 0.1), ("xquad", 6.0), ("udpos", 1.0)])
def test_soft_labels_are_the_softmax_of_the_teachers_mean_logits_at_the_authors_temperature(task, temperature):
  from conftest import TINY
  spec, kind = _filter(task, student=True)
  model = kind.model(spec, TINY)
  assert kind.temperature == model.temperature == temperature  # run_xcls.py 0.1, run_xqa.py 6, run_xtag.py 1
  teachers = [np.asarray(t, np.float32) for t in _TEACHERS[task]]
  stored = soft_labels.average(teachers)
  mean = (teachers[0] + teachers[1] + teachers[2]) / 3  # the logits' mean, not the probabilities'
  np.testing.assert_allclose(stored, mean, rtol=1e-6)
  if task == "xquad":  # window 0's last position is padding: no mass, the rest renormalised
    mask = np.asarray([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    hand = [np.append(_softmax(mean[0, :3] / 6.0), 0.0), _softmax(mean[1] / 6.0)]
    np.testing.assert_allclose(model.soft_targets(stored, mask), hand, rtol=1e-5, atol=1e-7)
  else:
    np.testing.assert_allclose(model.soft_targets(stored), _softmax(mean / temperature), rtol=1e-5, atol=1e-7)
  if task == "xnli":  # by hand: mean (7/6, -1/3, 1/2); / 0.1 -> (11.67, -3.33, 5): p = (.99873, 3.1e-7, .00127)
    np.testing.assert_allclose(model.soft_targets(stored)[0], [0.99873, 3.06e-7, 1.27e-3], rtol=3e-3, atol=1e-9)


def test_one_teacher_is_stored_as_is_and_a_cache_of_averaged_probabilities_is_refused(tmp_path):
  a = np.asarray([[0.0, np.log(3.0)]])
  np.testing.assert_array_equal(soft_labels.average([a]), a.astype(np.float32))
  rows = [{"source_input_ids": np.arange(4), "input_ids": np.arange(3)}]
  digest = soft_labels.rows_digest(rows)
  soft_labels.save(str(tmp_path), "xnli", digest, ["t1", "t2"], {"teacher_logits": a})
  meta_path = tmp_path / "soft_labels.json"
  meta = json.loads(meta_path.read_text())
  assert meta["combined"] == "mean logits"
  # a file of the earlier format (several teachers' probabilities averaged, log(mean softmax)) is not read as logits
  meta_path.write_text(json.dumps({**meta, "format": 1, "combined": "mean probability"}))
  with pytest.raises(errors.ConfigError, match=r"are for format 1 \(several teachers' probabilities averaged\)"):
    soft_labels.load(str(tmp_path), "xnli", digest, ["t1", "t2"])


@pytest.fixture
def clean_gin():
  import gin
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


@pytest.mark.parametrize("binding,temperature", [(None, 0.1), ("filter_kinds.FilterSettings.temperature = 2.5", 2.5),
                                                 ("xnli/filter_kinds.FilterSettings.temperature = 4.0", 4.0)])
def test_the_gin_temperature_reaches_the_students_kl(clean_gin, binding, temperature):
  import gin
  from conftest import TINY
  from xtreme_jax import main
  from xtreme_jax.runs import xtreme
  main.parse_gin(["experiments/xtreme_filter_quickstart.gin"], [binding] if binding else [])
  settings = gin.get_configurable(xtreme.FinetuneSettings)().recipe("xnli").filter
  spec = XTREME.task("xnli")
  model = filter_kinds.Filter(task_kinds.of(spec), settings, student=True).model(spec, TINY)
  teacher = np.asarray([[1.0, 0.0, -1.0], [0.0, 0.5, 2.0]], np.float32)
  outputs = {"source": np.zeros((2, 3), np.float32), "target": np.asarray([[0.0, 2.0, 0.0], [1.0, 0.0, 1.0]],
                                                                          np.float32)}
  batch = {"labels": np.asarray([-1, -1], np.int32), "example_weights": np.ones(2, np.float32),
           "teacher_logits": teacher}  # no labels: the loss is the KL alone
  loss, sums = model.loss_terms(outputs, batch)
  p, q = _softmax(teacher / temperature), _softmax(outputs["target"] / temperature)
  kl = temperature ** 2 * np.sum(p * np.log(p / q), -1)  # run_xcls.py's T^2 factor, per example
  assert float(loss / sums["weight"]) == pytest.approx(float(np.mean(kl)), rel=1e-4)
