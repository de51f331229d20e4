"""seqio Tasks / Mixtures of `xtreme_tasks.xtreme` on tiny fixtures in the official XTREME layout (offline)."""

import csv
import importlib
import json
import socket

import numpy as np
import pytest
import seqio

import xtreme_tasks.xtreme as xt
from xtreme_jax.data.readers import xtreme_readers as xr
from xtreme_jax.registry import XTREME
from xtreme_jax.runs.fine_tuning import SETTINGS, InLanguage

TIER = "unit"  # conftest.py: this file's tier


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
  """Any Python-level connection attempt (TFDS, GCS auth, ...) fails the test."""
  def refuse(*args, **kwargs):
    raise AssertionError(f"network access attempted: {args!r}")
  monkeypatch.setattr(socket.socket, "connect", refuse)
  monkeypatch.setattr(socket, "create_connection", refuse)


def _write(root, rel, text):
  path = root / rel
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def _write_csv(root, rel, rows):
  path = root / rel
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, delimiter="\t").writerows(rows)


def _squad_json(title, context, qas):
  return json.dumps({"version": "1.1", "data": [{"title": title, "paragraphs": [{"context": context, "qas": [
      {"id": qid, "question": q, "answers": [{"text": t, "answer_start": s} for t, s in answers]}
      for qid, q, answers in qas]}]}]}, ensure_ascii=False)


N_PANX_DE_TRAIN = 1203


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
  """Official-layout fixtures for the tasks the tests read; `set_data_dir` points at them."""
  _write_csv(tmp_path, "xnli/train-en.tsv", [['He said "hi" .', "He spoke .", "entailment"],
                                            ["A cat sleeps", "A dog barks", "contradiction"],
                                            ["It rains", "It is wet", "neutral"]])
  _write_csv(tmp_path, "xnli/dev-en.tsv", [["Dev premise", "Dev hypothesis", "neutral"]])
  _write_csv(tmp_path, "xnli/test-de.tsv", [["Die Katze schläft", "Ein Tier ruht"]])
  _write_csv(tmp_path, "pawsx/train-en.tsv", [["s one", "s two", "1"], ["s three", "s four", "0"]])
  _write(tmp_path, "panx/train-en.tsv", "London\tB-LOC\nis\tO\n\nAda\tB-PER\nLovelace\tI-PER\n")
  _write(tmp_path, "panx/test-de.tsv", "Berlin\nist\ngroß\n")
  _write(tmp_path, "panx/dev-de.tsv", "Köln\tB-LOC\n")
  _write(tmp_path, "panx/train-de.tsv",
         "".join(f"Wort{i}\tO\nStadt{i}\tB-LOC\n\n" for i in range(N_PANX_DE_TRAIN)))
  _write(tmp_path, "udpos/train-en.tsv", "Dogs\tNOUN\nrun\tVERB\n")
  _write(tmp_path, "squad/train-v1.1.json", _squad_json("T", "Paris is in France.", [
      ("q1", "Where is Paris?", [("France", 12)]), ("q2", "What is in France?", [("Paris", 0), ("Paris", 0)])]))
  _write(tmp_path, "xquad/xquad.de.json", _squad_json("T", "Paris liegt in Frankreich.", [
      ("x1", "Wo liegt Paris?", [("", 0)])]))
  _write(tmp_path, "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json", _squad_json("Y", "Ice is cold.", [
      ("t1", "What is cold?", [("Ice", 0)])]))
  _write(tmp_path, "bucc2018/de-en.dev.de", "de-000001\tHallo Welt\nde-000002\tGuten Tag\n")
  _write(tmp_path, "bucc2018/de-en.dev.en", "en-000001\tHello world\n")
  _write(tmp_path, "bucc2018/de-en.dev.gold", "de-000001\ten-000001\n")
  _write(tmp_path, "tatoeba/de-en.de", "Ich bin hier.\nDanke.\n")
  _write(tmp_path, "tatoeba/de-en.en", "I am here.\nThanks.\n")
  monkeypatch.delenv(xt.DATA_DIR_ENV, raising=False)
  xt.set_data_dir(tmp_path)
  yield tmp_path
  xt.set_data_dir(None)


def _py(value):
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if isinstance(value, np.ndarray):
    return [_py(v) for v in value.tolist()]
  if isinstance(value, (np.integer, int)):
    return int(value)
  return value


def _examples(name, split, **kwargs):
  ds = seqio.get_mixture_or_task(name).get_dataset(split=split, shuffle=False, sequence_length=None, **kwargs)
  return [{k: _py(v) for k, v in ex.items()} for ex in ds.as_numpy_iterator()]


def test_pair_task_yields_reader_examples_exactly(data_dir):
  assert _examples("xtreme_xnli_en", "train") == [
      {"id": "xnli-en-train-0", "text_a": '"He said ""hi"" ."', "text_b": "He spoke .", "label": "entailment"},
      {"id": "xnli-en-train-1", "text_a": "A cat sleeps", "text_b": "A dog barks", "label": "contradiction"},
      {"id": "xnli-en-train-2", "text_a": "It rains", "text_b": "It is wet", "label": "neutral"}]
  # Unlabeled test files give label "".
  assert _examples("xtreme_xnli_de", "test") == [
      {"id": "xnli-de-test-0", "text_a": "Die Katze schläft", "text_b": "Ein Tier ruht", "label": ""}]
  task = seqio.get_mixture_or_task("xtreme_xnli_de")
  assert tuple(task.splits) == ("dev", "test") and tuple(seqio.get_mixture_or_task("xtreme_xnli_en").splits) == (
      "train", "dev", "test")


def test_tagging_task_has_variable_length_string_vectors(data_dir):
  ds = seqio.get_mixture_or_task("xtreme_panx_en").get_dataset(split="train", shuffle=False, sequence_length=None)
  assert ds.element_spec["tokens"].shape.as_list() == [None]
  assert _examples("xtreme_panx_en", "train") == [
      {"id": "panx-en-train-0", "tokens": ["London", "is"], "tags": ["B-LOC", "O"]},
      {"id": "panx-en-train-1", "tokens": ["Ada", "Lovelace"], "tags": ["B-PER", "I-PER"]}]
  assert _examples("xtreme_panx_de", "test") == [
      {"id": "panx-de-test-0", "tokens": ["Berlin", "ist", "groß"], "tags": []}]


def test_qa_task_flattens_answers(data_dir):
  assert _examples("xtreme_squad_en", "train") == [
      {"id": "q1", "orig_id": "q1", "title": "T", "context": "Paris is in France.", "question": "Where is Paris?",
       "answers/text": ["France"], "answers/answer_start": [12]},
      {"id": "q2", "orig_id": "q2", "title": "T", "context": "Paris is in France.",
       "question": "What is in France?", "answers/text": ["Paris", "Paris"], "answers/answer_start": [0, 0]}]
  assert _examples("xtreme_xquad_de", "test")[0]["answers/text"] == [""]


def test_retrieval_tasks_hold_the_whole_corpus_in_one_example(data_dir):
  assert _examples("xtreme_bucc2018_de", "dev") == [
      {"source_id": ["de-000001", "de-000002"], "source": ["Hallo Welt", "Guten Tag"],
       "target_id": ["en-000001"], "target": ["Hello world"],
       "gold_source_id": ["de-000001"], "gold_target_id": ["en-000001"]}]
  assert _examples("xtreme_tatoeba_de", "test") == [
      {"source": ["Ich bin hier.", "Danke."], "target": ["I am here.", "Thanks."]}]


def test_zero_shot_mixture_trains_on_english_and_evaluates_every_language(data_dir):
  mix = seqio.get_mixture_or_task("xtreme_panx_zero_shot")
  names = {t.name for t in mix.tasks}
  # panx/train-de.tsv exists, yet the German member has no train split: training stays English.
  assert names == {"xtreme_panx_en"} | {f"xtreme_panx_{lg}_eval" for lg in xr.PANX_LANGS if lg != "en"}
  train = _examples("xtreme_panx_zero_shot", "train", num_epochs=1)
  assert [ex["id"] for ex in train] == ["panx-en-train-0", "panx-en-train-1"]
  assert all("test" in t.splits for t in mix.tasks)

  xnli = seqio.get_mixture_or_task("xtreme_xnli_zero_shot")
  assert {t.name for t in xnli.tasks} == {f"xtreme_xnli_{lg}" for lg in xr.XNLI_LANGS}
  assert [ex["id"] for ex in _examples("xtreme_xnli_zero_shot", "train", num_epochs=1)] == [
      "xnli-en-train-0", "xnli-en-train-1", "xnli-en-train-2"]
  # XQuAD / MLQA train on English SQuAD.
  xquad = seqio.get_mixture_or_task("xtreme_xquad_zero_shot")
  assert {t.name for t in xquad.tasks} == {"xtreme_squad_en"} | {f"xtreme_xquad_{lg}" for lg in xr.XQUAD_LANGS}
  assert [ex["id"] for ex in _examples("xtreme_xquad_zero_shot", "train", num_epochs=1)] == ["q1", "q2"]


def test_fewshot_keeps_the_first_1000_training_examples(data_dir):
  de = _examples("xtreme_panx_de_fewshot1000", "train")
  assert len(de) == min(1000, N_PANX_DE_TRAIN) == 1000
  assert [ex["id"] for ex in de] == [f"panx-de-train-{i}" for i in range(1000)]
  assert de[999]["tokens"] == ["Wort999", "Stadt999"]
  assert len(_examples("xtreme_panx_en_fewshot1000", "train")) == 2  # min(1000, 2)
  assert len(_examples("xtreme_panx_de", "train")) == N_PANX_DE_TRAIN
  assert _examples("xtreme_panx_de_fewshot1000", "dev") == [{"id": "panx-de-dev-0", "tokens": ["Köln"],
                                                            "tags": ["B-LOC"]}]
  assert seqio.get_mixture_or_task("xtreme_panx_de_fewshot1000").num_input_examples("train") == 1000


def test_in_language_and_multitask_mixtures(data_dir):
  de = _examples("xtreme_panx_in_language_de", "train", num_epochs=1)
  assert len(de) == N_PANX_DE_TRAIN and all(ex["id"].startswith("panx-de-train-") for ex in de)
  all_lg = seqio.get_mixture_or_task("xtreme_panx_in_language_all")
  assert {t.name for t in all_lg.tasks} == {f"xtreme_panx_{lg}" for lg in xr.PANX_LANGS}
  # Examples-proportional rates.
  assert all_lg.get_rate(seqio.get_mixture_or_task("xtreme_panx_de")) == N_PANX_DE_TRAIN

  multi = seqio.get_mixture_or_task("xtreme_multitask")
  assert [t.name for t in multi.tasks] == sorted(f"xtreme_{t}_en_multitask" for t in
                                                 ("xnli", "pawsx", "panx", "udpos", "squad", "tydiqa"))
  assert {t.name: multi.get_rate(t) for t in multi.tasks} == {  # examples-proportional
      "xtreme_xnli_en_multitask": 3, "xtreme_pawsx_en_multitask": 2, "xtreme_panx_en_multitask": 2,
      "xtreme_udpos_en_multitask": 1, "xtreme_squad_en_multitask": 2, "xtreme_tydiqa_en_multitask": 1}
  exs = _examples("xtreme_multitask", "train", num_epochs=1)
  assert exs and all(set(ex) == set(xt.UNION_FEATURES) for ex in exs)
  assert {ex["task"] for ex in exs} <= {"xnli", "pawsx", "panx", "udpos", "squad", "tydiqa"}
  assert all(ex["id"].startswith(f"{ex['task']}-en-train-") for ex in exs if ex["task"] in ("xnli", "pawsx"))
  # Fields a family lacks are "" / empty vectors in the union schema.
  empty = {k: "" if rank == 0 else [] for k, (_, rank) in xt.UNION_FEATURES.items()}
  assert _examples("xtreme_udpos_en_multitask", "train") == [
      {**empty, "task": "udpos", "id": "udpos-en-train-0", "tokens": ["Dogs", "run"], "tags": ["NOUN", "VERB"]}]
  assert _examples("xtreme_pawsx_en_multitask", "train")[1] == {
      **empty, "task": "pawsx", "id": "pawsx-en-train-1", "text_a": "s three", "text_b": "s four", "label": "0"}


def test_every_task_and_language_is_registered():
  tasks, mixtures = set(seqio.TaskRegistry.names()), set(seqio.MixtureRegistry.names())
  for task in xt.ALL_TASKS:
    for lg in xt.languages(task):
      assert f"xtreme_{task}_{lg}" in tasks
  assert {f"xtreme_{t}_zero_shot" for t in xt.BENCHMARK_TASKS} <= mixtures
  assert {"xtreme_multitask", "xtreme_udpos_in_language_all", "xtreme_tydiqa_in_language_sw"} <= mixtures
  assert "xtreme_udpos_th_fewshot1000" not in tasks  # UD has no Thai training treebank
  assert "xtreme_udpos_th" in tasks and "xtreme_udpos_th_eval" not in tasks
  # Every XTREME setting's mixture is registered under the name its object gives (`fine_tuning.Setting.mixture`).
  for name in XTREME.settings:
    for task in xt.BENCHMARK_TASKS:
      in_language = isinstance(SETTINGS[name], InLanguage) and task in xt.IN_LANGUAGE_TASKS
      for lg in xt.languages(task, "train" if in_language else None):
        mixture = SETTINGS[name].mixture("xtreme", task, lg)
        assert mixture is None or mixture in mixtures, (name, task, lg, mixture)
  assert "xtreme_panx_in_language_fewshot_de" in mixtures


def test_unknown_task_or_language_is_a_clear_error(data_dir):
  with pytest.raises(ValueError, match=r"unknown language 'xx' for XTREME task 'xnli'; valid languages: ar bg"):
    xt.task_name("xnli", "xx")
  with pytest.raises(ValueError, match=r"unknown XTREME task 'nli'; valid tasks: xnli"):
    xt.get_task("nli", "en")
  with pytest.raises(ValueError, match="no XTREME seqio task 'xtreme_xnli_de_fewshot1000'"):
    xt.get_task("xnli", "de", "fewshot1000")
  with pytest.raises(ValueError, match="No Task or Mixture found"):
    seqio.get_mixture_or_task("xtreme_xnli_xx")
  with pytest.raises(ValueError, match=r"has no split 'train' here; available splits: dev, test"):
    _examples("xtreme_xnli_de", "train")


def test_missing_data_dir_names_both_settings(data_dir, monkeypatch):
  xt.set_data_dir(None)
  with pytest.raises(ValueError, match=r"set_data_dir\(path\) or set the environment variable XTREME_JAX_DATA_DIR"):
    _examples("xtreme_xnli_en", "train")
  monkeypatch.setenv(xt.DATA_DIR_ENV, str(data_dir))  # the environment variable alone is enough
  assert len(_examples("xtreme_xnli_en", "train")) == 3
  xt.set_data_dir(data_dir / "nowhere")
  with pytest.raises(FileNotFoundError, match="from set_data_dir"):
    _examples("xtreme_xnli_en", "train")


def test_missing_file_names_the_expected_path(data_dir):
  with pytest.raises(FileNotFoundError, match=r"pawsx/dev-en\.tsv does not exist"):
    _examples("xtreme_pawsx_en", "dev")


def test_reimport_reregisters_without_error():
  before = sorted(n for n in seqio.TaskRegistry.names() if n.startswith("xtreme_"))
  importlib.reload(xt)
  after = sorted(n for n in seqio.TaskRegistry.names() if n.startswith("xtreme_"))
  # 324 benchmark tasks + translate-train (xnli 14, pawsx 6, squad 10, tydiqa 8) + translate-test
  # (xnli 14, pawsx 6, xquad 10, mlqa 6) + pseudo test (xnli 25, xquad 29) = 324 + 38 + 36 + 54.
  assert before == after and len(after) == 452
  # 92 + in_language_fewshot_{lg} (79, as in_language_{lg}) + translate_train_en_{lg} (14 + 6 + 10 + 6 + 8)
  # + translate_train_all (5) + translate_test (4).
  assert len([n for n in seqio.MixtureRegistry.names() if n.startswith("xtreme_")]) == 224


def test_metric_fns_are_the_official_metrics_of_the_rows(data_dir):
  """A fine-tuned task's metric takes the Task's own rows and the predictions; values by hand."""
  def metric(name, split, predictions):
    (fn,) = seqio.get_mixture_or_task(name).metric_fns
    return fn(_examples(name, split), predictions)

  # 2 of the 3 English XNLI training pairs right.
  assert metric("xtreme_xnli_en", "train", ["entailment", "contradiction", "entailment"])["accuracy"] == (
      pytest.approx(200 / 3))
  # Gold entities LOC "London" and PER "Ada Lovelace"; predicted LOC and a PER "Ada" alone: P = R = F1 = 50.
  panx = metric("xtreme_panx_en", "train", [["B-LOC", "O"], ["B-PER", "O"]])
  assert (panx["precision"], panx["recall"], panx["f1"]) == pytest.approx((50.0, 50.0, 50.0))
  # SQuAD rows (answers flattened): q1 exact, q2 wrong.
  squad = seqio.get_mixture_or_task("xtreme_squad_en")
  assert squad.metric_fns == []  # read only: not a benchmark task
  (xquad_metric,) = seqio.get_mixture_or_task("xtreme_xquad_de").metric_fns
  rows = _examples("xtreme_squad_en", "train")
  assert xquad_metric(rows, {"q1": "France", "q2": "London"})["exact_match"] == pytest.approx(50.0)
  assert seqio.get_mixture_or_task("xtreme_tatoeba_de").metric_fns == []  # scored as a whole corpus


def test_wmt14_tasks_translate_from_english_with_sacrebleu_metrics():
  """`xtreme_tasks.translation` on a mocked `wmt14_translate` (no network): inputs English, targets German;
  the metric: sacreBLEU (13a, mixed case), lowercased tokenised BLEU and the signature, by hand."""
  import tensorflow as tf
  import tensorflow_datasets as tfds
  import xtreme_tasks.translation as tr

  def as_dataset(self, split, decoders=None, read_config=None, shuffle_files=False):
    assert (self.builder_config.name, str(split)) == ("de-en", "validation")
    return tf.data.Dataset.from_tensor_slices({"de": ["Die Katze schläft.", "Guten Morgen."],
                                               "en": ["The cat sleeps.", "Good morning."]})

  assert {"wmt14_en_de", "wmt14_en_fr"} <= set(seqio.TaskRegistry.names())
  task = seqio.get_mixture_or_task(tr.task_name("en_de"))
  assert tuple(task.splits) == ("train", "validation", "test")
  with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=as_dataset):
    rows = _examples("wmt14_en_de", "validation")
  assert rows == [{"inputs": "The cat sleeps.", "targets": "Die Katze schläft."},
                  {"inputs": "Good morning.", "targets": "Guten Morgen."}]
  # 13a tokens "Die Katze schläft ." and "guten Morgen ." against "Guten Morgen .": p1 6/7, p2 4/5, p3 2/3, p4 1/1.
  (metric,) = task.metric_fns
  scores = metric(rows, ["Die Katze schläft.", "guten Morgen ."])
  assert scores["bleu"] == pytest.approx(100 * (6 / 7 * 4 / 5 * 2 / 3) ** 0.25, rel=1e-12)
  assert scores["tokenized_bleu"] == pytest.approx(100.0)  # case-insensitive
  assert scores["sacrebleu_signature"].textdata.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|")
