"""XTREME through TFDS builders: table coverage on mocked builders, conversions on hand-built examples.

Nothing here touches the network: `tfds.testing.mock_data` replaces every builder's
data (with `MockPolicy.USE_CODE` no metadata files are needed), and the missing-data
test points `data_dir` at an empty folder with `download=False`.
"""

import logging
import warnings

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets")

from tensorflow_datasets.testing.mocking import RandomFakeGenerator  # noqa: E402

from xtreme_jax import errors  # noqa: E402
from xtreme_jax.data.readers import xtreme_readers as xr  # noqa: E402
from xtreme_jax.data.readers import xtreme_tfds as xt  # noqa: E402

TIER = "unit"  # conftest.py: this file's tier

NUM_EXAMPLES = 10  # > 9 TyDiQA languages, so every language gets a train question
LOADS = []  # (builder name, config name, split) of every mocked load


def _aligned_as_dataset(self, split, decoders=None, read_config=None, shuffle_files=False):
  """Random examples from the builder's feature spec, made consistent like real data.

  The stock mock draws every variable-length field with its own length (tokens vs tags,
  answer texts vs starts), random language codes and answers that are not in their
  context; real TFDS data never looks like that. Here all variable dims get length 10,
  TranslationVariableLanguages fields hold the feature's languages, QA answers are
  spans of their context at their answer_start, and tydi_qa ids carry a language-name
  prefix.
  """
  del decoders, read_config, shuffle_files
  features = self.info.features
  config = self.builder_config.name if self.builder_config else None
  LOADS.append((self.name, config, str(split)))
  tydi_names = sorted(xt.TYDIQA_LANGUAGE_NAMES.values())

  def gen():
    rng = np.random.default_rng(0)
    fake = RandomFakeGenerator(features, num_examples=NUM_EXAMPLES, constant_dynamic_shape=True)
    for i, ex in enumerate(fake):
      for key, feature in features.items():
        if isinstance(feature, tfds.features.TranslationVariableLanguages):
          langs = sorted(feature.languages)
          ex[key] = {"language": np.array(langs, dtype=object),
                     "translation": np.array([f"{lg} text {rng.integers(99)}" for lg in langs], dtype=object)}
      if "answers" in ex and "context" in ex:
        context = xt._s(ex["context"])
        starts = rng.choice([k for k, c in enumerate(context) if c != " "], len(ex["answers"]["text"]))
        ex["answers"] = {"text": np.array([context[k:k + 3] for k in starts], dtype=object),
                         "answer_start": starts.astype(np.int32)}
      if self.name == "tydi_qa":
        ex["id"] = f"{tydi_names[i % len(tydi_names)]}-{i}-0"
      yield ex

  spec = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.tf_dtype), features.get_tensor_info())
  return tf.data.Dataset.from_generator(gen, output_signature=spec)


@pytest.fixture
def mocked():
  LOADS.clear()
  with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=_aligned_as_dataset):
    yield LOADS


def _representative(langs):
  """First, 'en' and last language of a split (the table entries differ by language only in templates)."""
  return sorted({langs[0], langs[-1]} | ({"en"} & set(langs)))


def _check_schema(task, split, out):
  if task in ("xnli", "pawsx"):
    names = xr.XNLI_LABELS if task == "xnli" else xr.PAWSX_LABELS
    assert isinstance(out, list) and len(out) == NUM_EXAMPLES
    for r in out:
      assert set(r) == {"id", "text_a", "text_b", "label"}
      assert isinstance(r["text_a"], str) and isinstance(r["text_b"], str) and r["label"] in names
  elif task in ("panx", "udpos"):
    names = set(xt.WIKIANN_TAGS if task == "panx" else xt.UPOS_TFDS_LABELS)
    assert isinstance(out, list) and len(out) == NUM_EXAMPLES
    for r in out:
      assert set(r) == {"id", "tokens", "tags"}
      assert all(isinstance(t, str) for t in r["tokens"]) and len(r["tokens"]) == len(r["tags"]) > 0
      assert set(r["tags"]) <= names
  elif task in ("xquad", "mlqa", "tydiqa", "squad"):
    assert isinstance(out, list) and out
    for r in out:
      assert set(r) == {"id", "orig_id", "title", "context", "question", "answers"}
      assert all(isinstance(r[k], str) for k in ("id", "orig_id", "title", "context", "question"))
      a = r["answers"]
      assert len(a["text"]) == len(a["answer_start"]) > 0
      assert all(isinstance(t, str) for t in a["text"]) and all(type(s) is int for s in a["answer_start"])
  elif task == "bucc2018":
    assert set(out) == {"source", "target", "gold"}
    for side in ("source", "target"):
      assert all(isinstance(i, str) and isinstance(s, str) for i, s in out[side])
    src_ids, tgt_ids = {i for i, _ in out["source"]}, {i for i, _ in out["target"]}
    assert out["gold"] and all(s in src_ids and t in tgt_ids for s, t in out["gold"])
  elif task == "tatoeba":
    assert set(out) == {"source", "target"}
    assert len(out["source"]) == len(out["target"]) == NUM_EXAMPLES
    assert all(isinstance(s, str) for s in out["source"] + out["target"])
  else:
    raise AssertionError(task)


def test_every_table_entry_loads_and_converts(mocked):
  assert set(xt.TABLE) == set(xr.TASKS)
  for task, spec in xr.TASKS.items():
    assert set(xt.TABLE[task]) == set(spec.languages), task
    for split, langs in spec.languages.items():
      for lg in _representative(langs):
        src = xt.source(task, lg, split)
        kwargs = {"bucc_gold_only": True} if task == "bucc2018" else {}
        mocked.clear()
        out = xt.read(task, None, lg, split, **kwargs)
        name, _, config = src.name.partition("/")
        assert mocked == [(name, config or None, src.split)], (task, lg, split)
        _check_schema(task, split, out)
        if task in ("xnli", "pawsx", "panx", "udpos"):
          assert [r["id"] for r in out] == [f"{task}-{lg}-{split}-{i}" for i in range(NUM_EXAMPLES)]
        if task == "xnli" and split != "train":  # hypothesis taken from the requested language
          assert all(r["text_b"].startswith(f"{lg} text ") for r in out)
        if task == "tydiqa" and split == "train":  # routed by id prefix: 10 ids over 9 languages
          assert out and all(xt.tydiqa_language(r["id"]) == lg for r in out)


def test_table_entries_by_hand():
  assert xt.source("xnli", "sw", "test") == ("xnli", "test", xt.convert_xnli)
  assert xt.source("xnli", "en", "train")[:2] == ("multi_nli", "train")
  assert xt.source("pawsx", "ko", "dev")[:2] == ("paws_x_wiki/ko", "validation")
  assert xt.source("panx", "yo", "dev")[:2] == ("wikiann/yo", "validation")
  assert xt.source("udpos", "kk", "train")[:2] == ("xtreme_pos/xtreme_pos_kk", "train")
  assert xt.source("udpos", "de", "dev")[:2] == ("xtreme_pos/xtreme_pos_de", "dev")
  # TFDS's xtreme_pos swaps Tamil and Tagalog; the table follows the treebank language.
  assert xt.source("udpos", "ta", "train")[:2] == ("xtreme_pos/xtreme_pos_tl", "train")
  assert xt.source("udpos", "tl", "test")[:2] == ("xtreme_pos/xtreme_pos_ta", "test")
  assert xt.source("mlqa", "hi", "dev")[:2] == ("mlqa/hi", "validation")
  assert xt.source("tydiqa", "te", "test")[:2] == ("tydi_qa/goldp", "validation-te")
  assert xt.source("tydiqa", "te", "train")[:3] == ("tydi_qa/goldp", "train", xt.convert_tydiqa_train)
  assert xt.source("squad", "en", "dev")[:2] == ("squad/v1.1", "validation")
  assert xt.source("bucc2018", "zh", "test")[:2] == ("bucc/bucc_zh", "test")
  assert xt.source("tatoeba", "fa", "test")[:2] == ("tatoeba/tatoeba_fa", "train")


def test_translations_load_and_convert(mocked):
  for (task, kind), (langs, _, _, _) in xt.TRANSLATIONS.items():
    lg = langs[0]
    src = xt.translation_source(task, lg, kind)
    mocked.clear()
    out = xt.read_translation(task, None, lg, kind)
    name, _, config = src.name.partition("/")
    # translate_test ids are checked against the TFDS test split (item: as the official route does)
    also = [(name, config, "test")] if kind == "translate_test" else []
    assert mocked == [(name, config or None, src.split)] + also, (task, kind)
    _check_schema(task, "train", out)
    if task in ("xnli", "pawsx"):
      assert out[0]["id"] == f"{task}-{lg}-{kind}-0"
  assert xt.translation_source("xquad", "de", "translate_test")[:2] == ("xquad/de", "translate-test")
  assert xt.translation_source("mlqa", "zh", "translate_train")[:2] == ("xquad/zh", "translate-train")
  assert xt.translation_source("squad", "el", "translate_dev")[:2] == ("xquad/el", "translate-dev")
  assert xt.translation_source("tydiqa", "ko", "translate_train")[:2] == ("tydi_qa/goldp", "translate-train-ko")
  assert xt.translation_source("pawsx", "ja", "translate_train")[:2] == ("xtreme_pawsx/ja", "train")
  assert xt.translation_source("xnli", "ur", "translate_train")[:2] == ("xtreme_xnli", "train")


def test_stock_random_mock_also_converts():
  """The plain random mock (unaligned sequences) is enough for the fixed-shape builders."""
  with tfds.testing.mock_data(num_examples=3, policy=tfds.testing.MockPolicy.USE_CODE):
    assert len(xt.read("pawsx", None, "de", "test")) == 3
    assert len(xt.read("xnli", None, "en", "train")) == 3
    tat = xt.read("tatoeba", None, "af", "test")
    assert len(tat["source"]) == len(tat["target"]) == 3
    bucc = xt.read("bucc2018", None, "ru", "dev", bucc_gold_only=True)
    assert len(bucc["gold"]) == 3


def test_label_names_match_the_builders(mocked):
  def names(name, key):
    return tuple(tfds.builder(name).info.features[key].names)
  for name in ("xnli", "multi_nli", "xtreme_xnli"):
    assert names(name, "label") == xt.XNLI_TFDS_LABELS
  for name in ("paws_x_wiki/en", "xtreme_pawsx/de"):
    assert names(name, "label") == xt.PAWSX_TFDS_LABELS
  assert names("wikiann/en", "tags") == xt.WIKIANN_TAGS
  assert names("xtreme_pos/xtreme_pos_en", "upos") == xt.UPOS_TFDS_LABELS
  assert set(xt.XNLI_TFDS_LABELS) == set(xr.XNLI_LABELS)


# ----------------------------------------------------------------------------- errors


def test_unknown_names_list_the_valid_ones():
  with pytest.raises(ValueError, match=r"unknown language 'xx' for panx; valid languages: af ar .* zh"):
    xt.read("panx", None, "xx", "dev")
  with pytest.raises(ValueError, match="unknown XTREME task 'nope'; valid tasks: bucc2018, mlqa"):
    xt.read("nope", None, "en", "test")
  with pytest.raises(ValueError, match="xquad has no split 'train'; valid splits: test"):
    xt.read("xquad", None, "en", "train")
  with pytest.raises(ValueError, match="udpos has no 'dev' split for 'kk'"):
    xt.read("udpos", None, "kk", "dev")
  with pytest.raises(ValueError, match="unknown language 'en' for xnli translate_train; valid languages: ar bg"):
    xt.read_translation("xnli", None, "en", "translate_train")
  with pytest.raises(ValueError, match="unknown translation kind 'train'; valid kinds: translate_train"):
    xt.read_translation("xnli", None, "de", "train")
  with pytest.raises(ValueError, match="TFDS has no translate_test data for mlqa.*xtreme_translations"):
    xt.read_translation("mlqa", None, "de", "translate_test")
  with pytest.raises(ValueError, match="no TFDS translate_train data for task 'panx'; tasks with .*: mlqa, pawsx"):
    xt.read_translation("panx", None, "de", "translate_train")
  with pytest.raises(ValueError, match="TFDS has no pseudo_test data for xquad"):
    xt.read_translation("xquad", None, "yo", "pseudo_test")


def test_translation_table_mirrors_xtreme_translations():
  xtr = pytest.importorskip("xtreme_jax.data.translation.xtreme_translations")
  assert xt.TRANSLATION_KINDS == xtr.KINDS
  theirs = {(task, kind) for kind in xtr.KINDS for task in xtr.tasks(kind)}
  assert set(xt.TRANSLATIONS) | xt.TRANSLATIONS_NOT_IN_TFDS == theirs
  assert not set(xt.TRANSLATIONS) & xt.TRANSLATIONS_NOT_IN_TFDS
  for (task, kind), (langs, _, _, _) in xt.TRANSLATIONS.items():
    assert langs == xtr.languages(task, kind), (task, kind)


def test_bucc_needs_explicit_gold_only_opt_in():
  with pytest.raises(ValueError, match=r"bucc/bucc_de:test.*only the gold-aligned sentence pairs"):
    xt.read("bucc2018", None, "de", "test")


def test_missing_dataset_names_builder_and_build_command(tmp_path):
  with pytest.raises(FileNotFoundError) as e:
    xt.read("panx", str(tmp_path), "sw", "dev")
  msg = str(e.value)
  assert "'wikiann/sw'" in msg and "builder 'wikiann', config 'sw'" in msg and str(tmp_path) in msg
  assert f"tfds build wikiann/sw --data_dir {tmp_path}" in msg and "download_and_prepare()" in msg
  with pytest.raises(FileNotFoundError, match=r"tfds build xtreme_xnli"):
    xt.read_translation("xnli", str(tmp_path), "de", "translate_train")


# ----------------------------------------------------------------------------- conversions by hand


def test_xnli_takes_the_requested_language():
  ex = {"premise": {"de": b"Die Katze schl\xc3\xa4ft.", "en": b"The cat sleeps.", "zh": "猫在睡觉。".encode()},
        "hypothesis": {"language": np.array([b"de", b"en", b"zh"], dtype=object),
                       "translation": np.array([b"Ein Tier ruht.", b"An animal rests.", "动物在休息。".encode()],
                                               dtype=object)},
        "label": np.int64(0)}
  assert xt.xnli_pair(ex, "de") == ("Die Katze schläft.", "Ein Tier ruht.", "entailment")
  assert xt.xnli_pair(ex, "zh") == ("猫在睡觉。", "动物在休息。", "entailment")
  ex["label"] = np.int64(2)
  assert xt.convert_xnli([ex], "xnli", "en", "dev") == [
      {"id": "xnli-en-dev-0", "text_a": "The cat sleeps.", "text_b": "An animal rests.", "label": "contradiction"}]
  with pytest.raises(KeyError, match="no 'fr' text"):
    xt.xnli_pair(ex, "fr")
  assert xt.mnli_pair({"premise": b"p", "hypothesis": b"h", "label": 1}) == ("p", "h", "neutral")


def test_pawsx_labels_are_the_official_strings():
  rows = [{"sentence1": b"A b .", "sentence2": b"B a .", "label": np.int64(1)},
          {"sentence1": "x", "sentence2": "y", "label": 0}]
  assert xt.convert_pawsx(rows, "pawsx", "fr", "test") == [
      {"id": "pawsx-fr-test-0", "text_a": "A b .", "text_b": "B a .", "label": "1"},
      {"id": "pawsx-fr-test-1", "text_a": "x", "text_b": "y", "label": "0"}]
  with pytest.raises(ValueError, match="out of range"):
    xt.pawsx_pair({"sentence1": b"a", "sentence2": b"b", "label": 2})


def test_wikiann_and_xtreme_pos_tags():
  ex = {"tokens": np.array([b"Rick", b"lives", b"in", b"New", b"York"], dtype=object),
        "tags": np.array([1, 0, 0, 5, 6]), "langs": np.array([b"en"] * 5, dtype=object),
        "spans": np.array([b"PER: Rick", b"LOC: New York"], dtype=object)}
  assert xt.convert_wikiann([ex], "panx", "en", "test") == [
      {"id": "panx-en-test-0", "tokens": ["Rick", "lives", "in", "New", "York"],
       "tags": ["B-PER", "O", "O", "B-LOC", "I-LOC"]}]
  pos = {"tokens": np.array([b"Sie", b"schl\xc3\xa4ft", b"."], dtype=object), "upos": np.array([10, 15, 12])}
  assert xt.xtreme_pos_sentence(pos) == (["Sie", "schläft", "."], ["PRON", "VERB", "PUNCT"])
  assert xt.xtreme_pos_sentence({"tokens": [b"x"], "upos": [13]}) == (["x"], ["SCONJ"])
  with pytest.raises(ValueError, match="2 tokens but 1 tags"):
    xt.wikiann_sentence({"tokens": [b"a", b"b"], "tags": [0]})


def test_squad_record_and_tydiqa_language_routing():
  def qa(qid, title=b"T"):
    return {"id": qid, "title": title, "context": b"Helsinki on Suomen p\xc3\xa4\xc3\xa4kaupunki.",
            "question": b"Mik\xc3\xa4?", "answers": {"text": np.array([b"Helsinki", b"Helsinki"], dtype=object),
                                                    "answer_start": np.array([0, 0], dtype=np.int32)}}
  rec = xt.squad_record(qa(b"finnish-123-0"))
  assert rec == {"id": "finnish-123-0", "orig_id": "finnish-123-0", "title": "T",
                 "context": "Helsinki on Suomen pääkaupunki.", "question": "Mikä?",
                 "answers": {"text": ["Helsinki", "Helsinki"], "answer_start": [0, 0]}}
  assert all(type(s) is int for s in rec["answers"]["answer_start"])
  assert xt.tydiqa_language("finnish-123-0") == "fi" and xt.tydiqa_language("swahili-9-1") == "sw"
  assert xt.tydiqa_language("klingon-1-0") is None
  examples = [qa(b"finnish-1-0"), qa(b"arabic-2-0"), qa(b"finnish-3-1"), qa(b"english-4-0")]
  assert [r["id"] for r in xt.convert_tydiqa_train(examples, "tydiqa", "fi", "train")] == [
      "finnish-1-0", "finnish-3-1"]
  assert [r["id"] for r in xt.convert_tydiqa_train(examples, "tydiqa", "en", "train")] == ["english-4-0"]
  with pytest.raises(errors.DataError, match=r"^tfds:tydi_qa/goldp:train holds no korean question \(no id starts "
                                             r"with 'korean-'\) among its 4$"):
    xt.convert_tydiqa_train(examples, "tydiqa", "ko", "train")  # never 0 training examples silently
  bad = qa(b"x")
  bad["answers"]["answer_start"] = np.array([0], dtype=np.int32)
  with pytest.raises(ValueError, match="2 answer texts but 1 starts"):
    xt.squad_record(bad)


def test_bucc_and_tatoeba_conversions():
  pairs = [{"source_id": b"de-000000009", "target_id": b"en-000000002", "source_sentence": b"Zwei",
            "target_sentence": b"Two"},
           {"source_id": b"de-000000001", "target_id": b"en-000000005", "source_sentence": b"Eins",
            "target_sentence": b"One"}]
  assert xt.convert_bucc(pairs, "bucc2018", "de", "dev") == {
      "source": [("de-000000001", "Eins"), ("de-000000009", "Zwei")],
      "target": [("en-000000002", "Two"), ("en-000000005", "One")],
      "gold": [("de-000000001", "en-000000005"), ("de-000000009", "en-000000002")]}
  rows = [{"source_sentence": b"Hallo.\n", "target_sentence": b"Hello.\r\n"},
          {"source_sentence": b"Ende", "target_sentence": b"End"}]
  assert xt.convert_tatoeba(rows, "tatoeba", "de", "test") == {"source": ["Hallo.", "Ende"],
                                                              "target": ["Hello.", "End"]}


def test_xtreme_pos_config_by_treebank_language():
  assert xt.xtreme_pos_config("ta") == "xtreme_pos_tl"  # TFDS: "tl": "Tamil"
  assert xt.xtreme_pos_config("tl") == "xtreme_pos_ta"  # TFDS: "ta": "Tagalog"
  assert xt.xtreme_pos_config("zh") == "xtreme_pos_zh"
  assert set(xt.UDPOS_LANGUAGE_NAMES) == set(xr.UDPOS_LANGS)


def test_translate_test_ids_checked_against_official_file(mocked, tmp_path):
  import json
  records = xt.read_translation("xquad", None, "de", "translate_test")
  assert records and all(r["id"] == r["orig_id"] for r in records)

  def write(ids):
    qas = [{"id": i, "question": "q?", "answers": [{"text": "", "answer_start": 0}]} for i in ids]
    path = tmp_path / "xquad" / "xquad.de.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}))

  write([r["id"] for r in records])
  assert xt.read_translation("xquad", None, "de", "translate_test", str(tmp_path)) == records
  write([r["id"] for r in records[:-1]] + ["other-id"])
  with pytest.raises(errors.DataError, match=rf"^xquad translate_test de: tfds:xquad/de:translate-test holds question "
                                             rf"ids the original test file {tmp_path}/xquad/xquad.de.json does not "
                                             rf"have, e.g. \['{records[-1]['id']}'\]; the translation lacks question "
                                             rf"ids of the original, e.g. \['other-id'\]; translated questions"):
    xt.read_translation("xquad", None, "de", "translate_test", str(tmp_path))


# ----------------------------------------------------------------------------- issue 9: trustworthy data


def _qa(qid, context, texts, starts):
  return {"id": qid, "title": b"", "context": context, "question": b"q?",
          "answers": {"text": np.array(texts, dtype=object), "answer_start": np.array(starts, dtype=np.int32)}}


def test_tydiqa_train_ids_without_language_prefix_are_refused():
  examples = [_qa(b"finnish-1-0", b"Helsinki", [b"Helsinki"], [0]), _qa(b"1234-0", b"Oulu", [b"Oulu"], [0]),
              _qa(b"5678", b"Turku", [b"Turku"], [0])]
  with pytest.raises(errors.DataError, match=r"^tfds:tydi_qa/goldp:train: 2 of 3 question ids carry no TyDiQA "
                                             r"language prefix \(e\.g\. \['1234-0', '5678'\]\) and the builder has "
                                             r"no language feature.*expected ids like 'finnish-<n>-<k>'"):
    xt.convert_tydiqa_train(examples, "tydiqa", "fi", "train")


def test_duplicate_ids_keep_the_answers_of_their_own_context(caplog):
  # What TFDS's squadlike generator yields for id "a" asked on two paragraphs: the first
  # paragraph's context with the answers of both (the second's offset is into its own context).
  merged = _qa(b"a", b"Paris is big. Rome is not.", [b"Paris", b"Lyon", b"Rome", b""], [0, 0, 0, 0])
  rec = xt.squad_record(merged)
  assert rec["context"] == "Paris is big. Rome is not."
  # "Lyon" is not in this context: dropped; "Rome" is, but not at 0: moved to where it is; "" (stripped) kept.
  assert rec["answers"] == {"text": ["Paris", "Rome", ""], "answer_start": [0, 14, 0]}
  assert xt.own_answers("abc", ["x"], [1]) == (["x"], [1])  # none in the context: the data is broken, kept as given
  with caplog.at_level(logging.INFO):
    assert [r["answers"]["text"] for r in xt.convert_squad([merged], "squad", "en", "train")] == [
        ["Paris", "Rome", ""]]
  assert "squad en train: dropped 1 answers not in their question's context" in caplog.text


def test_training_answers_outside_the_context_are_refused_on_tfds(monkeypatch, caplog):
  examples = [_qa(f"q{i}".encode(), b"Helsinki is big.", [b"Helsinki"], [0]) for i in range(20)]
  examples[3] = _qa(b"q3", b"Helsinki is big.", [b"Oslo"], [0])
  monkeypatch.setattr(xt, "_load", lambda name, split, data_dir: list(examples))
  assert len(xt.read("squad", None, "en", "train")) == 20  # 1 of 20 (5%): logged, not refused
  assert "tfds:squad/v1.1:train: 1 of 20 training questions have an answer that is not in their context" in caplog.text
  examples[4] = _qa(b"q4", b"Helsinki is big.", [b"Oslo"], [0])
  with pytest.raises(errors.DataError, match=r"^tfds:squad/v1.1:train: 2 of 20 training questions have an answer "
                                             r"that is not in their context .* more than the 5% allowed"):
    xt.read("squad", None, "en", "train")
  assert len(xt.read("squad", None, "en", "dev")) == 20  # evaluation sets are not checked (gold texts only)
  with pytest.raises(errors.DataError, match="^tfds:xquad/de:translate-train: 2 of 20"):
    xt.read_translation("xquad", None, "de", "translate_train")


def test_translate_test_ids_checked_against_the_tfds_test_split(mocked, monkeypatch):
  records = xt.read_translation("xquad", None, "ar", "translate_test")
  original = xt.read("xquad", None, "ar", "test")
  assert sorted(r["id"] for r in records) == sorted(r["id"] for r in original)
  monkeypatch.setattr(xt, "read", lambda *args: original[1:])  # the test split lacks one question
  with pytest.raises(errors.DataError, match=r"^xquad translate_test ar: tfds:xquad/ar:translate-test has 10 questions "
                                             r"but the original test file tfds:xquad/ar:test has 9; tfds:xquad/ar:"
                                             r"translate-test holds question ids the original test file"):
    xt.read_translation("xquad", None, "ar", "translate_test")


def test_reading_tfds_is_quiet_but_actionable_warnings_pass(mocked, tmp_path, caplog):
  from xtreme_jax.data.readers import xtreme_data
  from tensorflow_datasets.core.utils import tqdm_utils
  caplog.set_level(logging.DEBUG)
  caplog.set_level(logging.DEBUG, logger="absl")
  xtreme_data._tfds_prepared.cache_clear()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert len(xt.read("panx", None, "de", "dev")) == NUM_EXAMPLES
    assert len(xt.read_translation("xquad", None, "de", "translate_test")) == NUM_EXAMPLES
    # Probing an unprepared dataset: TFDS warns "Variant folder ... has no dataset_info.json" each time.
    assert not xtreme_data.XtremeData("tfds", str(tmp_path)).available("panx", "sw", "test")
  tfds_records = [r for r in caplog.records if "tensorflow_datasets" in r.pathname]
  allowed = ()  # TFDS records a run may show here: none
  assert [r.getMessage() for r in tfds_records if r.msg not in allowed] == []
  assert [str(w.message) for w in caught] == []
  assert tqdm_utils._active  # the progress-bar switch is restored
  # Actionable TFDS warnings still pass the filter, routine ones do not.
  import tensorflow_datasets.core.utils.file_utils as fu
  def record(level, msg):
    return logging.LogRecord("absl", level, fu.__file__, 1, msg, ("x", "y"), None)
  noise = xt._TfdsNoise()
  assert noise.filter(record(logging.WARNING, "Found a different version of the requested dataset %s %s"))
  assert noise.filter(record(logging.ERROR, "Failed %s %s"))
  assert not noise.filter(record(logging.WARNING, "Variant folder %s has no %s"))
  assert not noise.filter(record(logging.INFO, "Constructing tf.data.Dataset %s for split %s"))
  assert noise.filter(logging.LogRecord("xtreme_jax", logging.INFO, __file__, 1, "ours", (), None))


def test_harmless_tfds_warnings_are_dropped_whoever_is_named_as_their_caller():
  """An "absl" logger made before absl was imported (the CLI sets its level first) names absl's own module as the
  caller of every record, not TFDS's: the harmless lines are still dropped."""
  import absl.logging
  noise = xt._TfdsNoise()
  assert not noise.filter(logging.LogRecord("absl", logging.WARNING, absl.logging.__file__, 1,
                                            "Variant folder %s has no %s", ("/d/wmt14/1.0.0", "x.json"), None))
  assert noise.filter(logging.LogRecord("absl", logging.WARNING, absl.logging.__file__, 1,
                                        "Found a different version of the requested dataset %s", ("x",), None))
