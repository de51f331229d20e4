"""Pretraining seqio tasks (files, wiki40b, mC4, OPUS via TFDS mocks) and the streaming SeqioPairSource."""

import os

import numpy as np
import pytest
import seqio
import tensorflow as tf
import tensorflow_datasets as tfds
from test_pretraining_corpora import WordVocab, _unmask, _write

import xtreme_tasks.pretraining as pt
from xtreme_jax.data import paths
from xtreme_jax.data.pretraining import pretraining_corpora as pc
from xtreme_jax.data.pretraining import pretraining_streams as ps, stream_state

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = paths.sample_dir()


def _examples(task_name, split="train"):
  task = seqio.get_mixture_or_task(task_name)
  ds = task.get_dataset(None, split=split, shuffle=False, try_in_mem_cache=False)
  return [{k: v.decode() for k, v in ex.items()} for ex in ds.as_numpy_iterator()]


@pytest.fixture
def registered():
  """Registers test tasks; removes them (and any configured directory) afterwards."""
  names = []

  def add(fn, *args, **kwargs):
    task = fn(*args, **kwargs)
    names.append(task.name)
    return task.name

  yield add
  for name in names:
    seqio.TaskRegistry.remove(name)
  pt.set_monolingual_dir(None)
  pt.set_parallel_dir(None)


# ----------------------------------------------------------------------------- file tasks

DOC_LINES = ["a b c", "d e", "", "  f g h i ", "", "", "j", ""]


def test_text_task_documents_per_line_and_per_block(tmp_path, registered, monkeypatch):
  _write(tmp_path / "en.txt", DOC_LINES)
  # by hand: 4 non-empty lines; 3 blank-line-separated blocks
  lines = registered(pt.register_text_task, "en", str(tmp_path), False, name="test_text_lines")
  blocks = registered(pt.register_text_task, "en", str(tmp_path), True, name="test_text_blocks")
  assert _examples(lines) == [{"text": t} for t in ("a b c", "d e", "f g h i", "j")]
  assert _examples(blocks) == [{"text": t} for t in ("a b c\nd e", "f g h i", "j")]
  assert seqio.get_mixture_or_task(lines).num_input_examples("train") == 4
  assert seqio.get_mixture_or_task(blocks).num_input_examples("train") == 3
  from xtreme_jax import text
  assert list(pc.iter_documents(str(tmp_path / "en.txt"), True)) == text.blocks(l.strip() for l in DOC_LINES)
  # the registered `pretrain_text_en` looks its directory up when the dataset is built
  monkeypatch.delenv(pt.MONO_DIR_ENV, raising=False)
  monkeypatch.delenv(pt.BLANK_LINE_ENV, raising=False)
  with pytest.raises(ValueError, match=pt.MONO_DIR_ENV):
    _examples("pretrain_text_en")
  pt.set_monolingual_dir(tmp_path, blank_line_documents=True)
  assert len(_examples("pretrain_text_en")) == 3
  pt.set_monolingual_dir(None)
  monkeypatch.setenv(pt.MONO_DIR_ENV, str(tmp_path))
  assert len(_examples("pretrain_text_en")) == 4
  monkeypatch.setenv(pt.BLANK_LINE_ENV, "1")
  assert seqio.get_mixture_or_task("pretrain_text_en").num_input_examples("train") == 3
  with pytest.raises(FileNotFoundError, match=r"sw\.txt.*languages in .*\['en'\]"):
    _examples("pretrain_text_sw")


def test_file_tasks_read_in_tf_exactly_what_the_python_readers_give(tmp_path):
  # The datasets are TF-native (no Python generator); the counters and error checks are Python:
  # both must agree on stripping (Unicode whitespace, CRLF) and on blank lines.
  lines = ["  Erster Satz.\r", "\u3000zweiter\u3000", "", "", "drei\t", "\u00a0", "vier fünf", "   ", "letzte"]
  (tmp_path / "de.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  by_hand = {False: ["Erster Satz.", "zweiter", "drei", "vier fünf", "letzte"],
             True: ["Erster Satz.\nzweiter", "drei", "vier fünf", "letzte"]}
  for blocks, want in by_hand.items():
    source = pt.TextFileSource("de", str(tmp_path), blocks)
    got = [x["text"].decode() for x in source.get_dataset("train").as_numpy_iterator()]
    assert got == want == ["\n".join(d) for d in pc.iter_documents(str(tmp_path / "de.txt"), blocks)]
    assert source.num_input_examples("train") == len(want)
  (tmp_path / "de-en.tsv").write_text("a\tb\n \t x\n\n c \t d\r\n", encoding="utf-8")
  (tmp_path / "fr-en.fr").write_text("un\n\ndeux\n", encoding="utf-8")
  (tmp_path / "fr-en.en").write_text("one\ntwo\n two \n", encoding="utf-8")
  for pair, want in ((("de", "en"), [("a", "b"), ("c", "d")]), (("fr", "en"), [("un", "one"), ("deux", "two")])):
    source = pt.ParallelFileSource(*pair, str(tmp_path))
    got = [(x["source"].decode(), x["target"].decode()) for x in source.get_dataset("train").as_numpy_iterator()]
    assert got == want == list(pc.iter_parallel(source.files()))
  (tmp_path / "es-en.es").write_text("uno\n", encoding="utf-8")
  (tmp_path / "es-en.en").write_text("one\ntwo\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"es-en\.es has 1 lines but .*es-en\.en has 2 lines"):
    pt.ParallelFileSource("es", "en", str(tmp_path)).get_dataset("train")


def test_sample_text_tasks_read_the_bundled_sample():
  sample_langs = sorted(f[:-4] for f in os.listdir(os.path.join(SAMPLE, "pretrain")))
  assert sorted(pt.SAMPLE_LANGUAGES) == sample_langs
  assert set(sample_langs) <= set(pt.TEXT_LANGUAGES) and len(pt.TEXT_LANGUAGES) == 40
  names = set(seqio.TaskRegistry.names())
  assert all(f"pretrain_text_{lg}" in names for lg in pt.TEXT_LANGUAGES)
  for lg in sample_langs:
    with open(os.path.join(SAMPLE, "pretrain", f"{lg}.txt"), encoding="utf-8") as f:
      lines = [line.strip() for line in f if line.strip()]
    got = _examples(f"pretrain_sample_text_{lg}")
    assert [ex["text"] for ex in got] == lines
    assert seqio.get_mixture_or_task(f"pretrain_sample_text_{lg}").num_input_examples("train") == len(lines)
  de_en = _examples("pretrain_sample_parallel_de_en")
  assert len(de_en) == 17 and de_en[0]["target"] == "The river runs past the old mill and into the valley."


def test_parallel_tasks_from_aligned_and_tsv_files(tmp_path, registered):
  aligned, tsv = tmp_path / "a", tmp_path / "t"
  aligned.mkdir()
  tsv.mkdir()
  src = ["one two", "", "three", "four five six "]
  tgt = ["uno dos", "x", "tres", "cuatro cinco seis"]
  _write(aligned / "en-es.en", src)
  _write(aligned / "en-es.es", tgt)
  _write(tsv / "en-es.tsv", [f"{s}\t{t}" for s, t in zip(src, tgt)])
  expected = [{"source": s, "target": t} for s, t in
              (("one two", "uno dos"), ("three", "tres"), ("four five six", "cuatro cinco seis"))]
  a = registered(pt.register_parallel_task, "en", "es", str(aligned), name="test_par_aligned")
  t = registered(pt.register_parallel_task, "en", "es", str(tsv), name="test_par_tsv")
  assert _examples(a) == _examples(t) == expected
  assert seqio.get_mixture_or_task(a).num_input_examples("train") == 3
  assert seqio.get_mixture_or_task(a).source.pretrain_language_pair == ("en", "es")
  pt.set_parallel_dir(tsv)
  assert _examples("pretrain_parallel_en_es") == expected
  with pytest.raises(FileNotFoundError, match=r"'en-sw'.*\['en-es'\]"):
    _examples("pretrain_parallel_en_sw")


# ----------------------------------------------------------------------------- TFDS tasks

WIKI_ARTICLE = ("\n_START_ARTICLE_\nRiver Mill\n_START_SECTION_\nHistory\n_START_PARAGRAPH_\n"
                "The mill was built in 1820._NEWLINE_It burned down in 1901.\n"
                "_START_PARAGRAPH_\nIt was rebuilt.\n_START_SECTION_\nSee also\n_START_PARAGRAPH_\n"
                "Old mills of the valley.\n")
WIKI_TEXT = "The mill was built in 1820.\nIt burned down in 1901.\nIt was rebuilt.\nOld mills of the valley."


def test_wiki40b_markup_conversion():
  assert pt.wiki40b_text(WIKI_ARTICLE) == WIKI_TEXT
  assert pt.wiki40b_text("\n_START_ARTICLE_\nOnly a title\n") == ""
  ds = pt.wiki40b_preprocessor(tf.data.Dataset.from_tensor_slices({"text": [WIKI_ARTICLE, "\n_START_ARTICLE_\nT\n"]}))
  assert [ex["text"].decode() for ex in ds.as_numpy_iterator()] == [WIKI_TEXT]  # the empty article is dropped


def test_tfds_builder_lists_match():
  from tensorflow_datasets.text import c4, wiki40b
  assert pt.WIKI40B_LANGUAGES == tuple(wiki40b.WIKIPEDIA_LANGUAGES)
  assert str(wiki40b._VERSION) == pt.WIKI40B_VERSION
  assert pt.MC4_LANGUAGES == tuple(c4.MC4_LANGUAGES)
  assert str(c4._VERSION) == pt.MC4_VERSION
  opus = tfds.builder_cls("opus")
  assert tuple(c.name for c in opus.BUILDER_CONFIGS) == pt.OPUS_SUBSETS
  assert {tuple(c.language_pair) for c in opus.BUILDER_CONFIGS} == {pt.OPUS_PAIR}
  assert {str(c.version) for c in opus.BUILDER_CONFIGS} == {pt.OPUS_VERSION}
  names = set(seqio.TaskRegistry.names())
  assert {"pretrain_wiki40b_zh_cn", "pretrain_mc4_bg_Latn", "pretrain_opus_it_de_en"} <= names


def _mock(examples_by_split):
  seen = []

  def as_dataset(builder, split, **kwargs):
    seen.append((builder.name, builder.builder_config.name, str(split)))
    rows = examples_by_split[str(split)]
    return tf.data.Dataset.from_tensor_slices({k: [r[k] for r in rows] for k in rows[0]})

  return tfds.testing.mock_data(as_dataset_fn=as_dataset), seen


def test_wiki40b_mc4_opus_tasks_with_mocked_tfds():
  mock, seen = _mock({"train": [{"text": WIKI_ARTICLE, "wikidata_id": "Q1", "version_id": "1"},
                                {"text": "\n_START_ARTICLE_\nEmpty\n", "wikidata_id": "Q2", "version_id": "1"}]})
  with mock:
    assert _examples("pretrain_wiki40b_zh_cn") == [{"text": WIKI_TEXT}]
  assert seen == [("wiki40b", "zh-cn", "train")]
  page = {"text": "First paragraph.\n\n  Second paragraph. \n", "url": "u", "content-type": "c",
          "content-length": "1", "timestamp": "t"}
  mock, seen = _mock({"sw": [page, {**page, "text": " \n "}], "sw-validation": [{**page, "text": "Dev."}]})
  with mock:
    assert _examples("pretrain_mc4_sw") == [{"text": "First paragraph.\nSecond paragraph."}]
    assert _examples("pretrain_mc4_sw", "validation") == [{"text": "Dev."}]
  assert seen == [("c4", "multilingual", "sw"), ("c4", "multilingual", "sw-validation")]
  mock, seen = _mock({"train": [{"de": "Guten Morgen.\n", "en": "Good morning.\n"}, {"de": "Nur.\n", "en": "\n"}]})
  with mock:
    assert _examples("pretrain_opus_it_de_en") == [{"source": "Guten Morgen.", "target": "Good morning."}]
  assert seen == [("opus", "IT", "train")]
  # Randomly generated mock data passes through every task family too.
  with tfds.testing.mock_data(num_examples=3):
    for name in ("pretrain_wiki40b_en", "pretrain_mc4_en", "pretrain_opus_medical_de_en"):
      for ex in _examples(name):
        assert all(isinstance(v, str) and v for v in ex.values())


def test_stream_counts_tfds_examples_when_the_split_has_no_metadata():
  articles = [{"text": WIKI_ARTICLE, "wikidata_id": f"Q{i}", "version_id": "1"} for i in range(5)]
  mock, _ = _mock({"train": articles})
  with mock:
    src = ps.SeqioPairSource(WordVocab(), monolingual_tasks=("pretrain_wiki40b_de", "pretrain_wiki40b_zh_cn"),
                             segment_len=8, batch_size=4)
    assert src.example_counts == {"de": 5, "zh-cn": 5}  # no split metadata under the mock: counted
    b = src.batch(0)
  assert b["x_input_ids"].shape == (4, 10) and src.languages_index == ("de", "zh-cn")


# ----------------------------------------------------------------------------- the streaming source


@pytest.fixture
def corpus(tmp_path, registered):
  """Monolingual aa/bb/cc with 2/20/200 one-line documents; parallel aa-bb (5 pairs) and aa-cc (50)."""
  for lang, n in (("aa", 2), ("bb", 20), ("cc", 200)):
    _write(tmp_path / f"{lang}.txt", [f"{lang} doc{i} " + " ".join(f"w{i}_{k}" for k in range(6)) for i in range(n)])
  _write(tmp_path / "aa-bb.aa", [f"src s{i} x y" for i in range(5)])
  _write(tmp_path / "aa-bb.bb", [f"tgt t{i} u v w" for i in range(5)])
  _write(tmp_path / "aa-cc.tsv", [f"s{i} a\tt{i} b c" for i in range(50)])
  mono = {lg: registered(pt.register_text_task, lg, str(tmp_path), False, name=f"test_mono_{lg}")
          for lg in ("aa", "bb", "cc")}
  para = {k: registered(pt.register_parallel_task, *k.split("-"), str(tmp_path), name=f"test_par_{k.replace('-', '_')}")
          for k in ("aa-bb", "aa-cc")}
  return tmp_path, mono, para


def _same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_features_equal_veco_pair_source_in_shape_and_dtype(corpus):
  directory, mono, para = corpus
  stream = ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para, segment_len=8, batch_size=8)
  memory = pc.VecoPairSource(WordVocab(), monolingual_dir=str(directory), parallel_dir=str(directory),
                             segment_len=8, batch_size=8)
  for p in (0, 1):
    a, b = stream.batch(p), memory.batch(p)
    assert {k: (v.shape, v.dtype) for k, v in a.items()} == {k: (v.shape, v.dtype) for k, v in b.items()}
    assert (a["is_bilingual"] == p).all()
  assert stream.languages_index == memory.languages_index == ("aa", "bb", "cc")
  assert stream.example_counts == {"aa": 2, "bb": 20, "cc": 200, "aa-bb": 5, "aa-cc": 50}
  # task names alone work for tasks whose source knows its language
  named = ps.SeqioPairSource(WordVocab(), monolingual_tasks=tuple(mono.values()),
                             parallel_tasks=tuple(para.values()), segment_len=8, batch_size=8)
  _same(named.batch(0), ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para,
                                           segment_len=8, batch_size=8).batch(0))


def test_alternation_and_single_kind_sources(corpus):
  _, mono, para = corpus
  both = ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para, segment_len=8, batch_size=4)
  for p in range(4):
    b = both.batch(p)
    assert (b["is_bilingual"] == p % 2).all()
    assert bool(b["tlm_masked_weights"].any()) == bool(p % 2)
  only_mono = ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, segment_len=8, batch_size=4)
  only_bi = ps.SeqioPairSource(WordVocab(), parallel_tasks=para, segment_len=8, batch_size=4)
  for p in range(3):
    assert not only_mono.batch(p)["is_bilingual"].any()
    assert only_bi.batch(p)["is_bilingual"].all()


def test_a_dropped_source_frees_its_tf_data_iterators_at_once(corpus):
  """No reference cycle: the garbage collector's later teardown of an iterator can stall a trace for seconds."""
  import gc
  import weakref
  _, mono, para = corpus
  src = ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para, segment_len=8, batch_size=4)
  src.batch(0), src.batch(1)
  streams = [weakref.ref(s) for s in src._state["streams"].values()]
  assert streams
  gc.disable()
  try:
    del src
    assert all(s() is None for s in streams)
  finally:
    gc.enable()


@pytest.mark.parametrize("alpha", [pc.UNICODER_ALPHA, pc.VECO_ALPHA, pc.MBERT_ALPHA])
def test_language_frequencies_follow_n_to_the_alpha(corpus, alpha):
  _, mono, para = corpus
  src = ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para, segment_len=8,
                           batch_size=100, alpha=alpha, seed=11)
  expected = np.asarray([2, 20, 200], float) ** alpha  # the fixture's document counts
  expected /= expected.sum()
  draws = [lg for p in range(0, 400, 2) for lg in src.row_languages(p)]
  assert len(draws) == 20_000
  for lang, prob in zip(("aa", "bb", "cc"), expected):
    assert abs(draws.count(lang) / len(draws) - prob) < 0.01, (lang, alpha)
  bi = [k for p in range(1, 201, 2) for k in src.row_languages(p)]
  p_ab = 5 ** alpha / (5 ** alpha + 50 ** alpha)
  assert abs(bi.count("aa-bb") / len(bi) - p_ab) < 0.01
  # counts given by hand override the tasks' sizes
  flat = ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, counts={"aa": 7, "bb": 7, "cc": 7}, batch_size=100)
  assert flat.mono_probs == pytest.approx({"aa": 1 / 3, "bb": 1 / 3, "cc": 1 / 3})


def test_resume_gives_the_uninterrupted_stream(corpus):
  _, mono, para = corpus
  make = lambda: ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para, segment_len=8,
                                    batch_size=16, seed=3)
  straight = make()
  batches = [straight.batch(p) for p in range(6)]
  first, second = make(), make()
  for p in range(3):
    _same(first.batch(p), batches[p])
  for p in range(3, 6):  # a fresh instance, as after a restart: replays the draws, skips in the streams
    _same(second.batch(p), batches[p])
  assert second.cursors(6) == straight._state["cursors"]
  # A stream opened by skipping saves a state that restores into the same pipeline (its `skip` recorded).
  restored = make()
  restored.restore_input_state(_round_trip(second.input_state(6)), 6)
  _same(restored.batch(6), straight.batch(6))
  # any order, repeats (the trainer asks for batch 0 twice), and 20 epochs of `aa` (2 documents): streams cycle
  jumping = make()
  for p in (4, 1, 1, 5, 0, 2, 3):
    _same(jumping.batch(p), batches[p])
  assert jumping.cursors(200)["aa"] > 40
  jumping.batch(199)
  jumping.close()
  _same(jumping.batch(200), make().batch(200))


def _round_trip(state):
  """What a checkpoint gives back: the state through JSON."""
  import json
  return json.loads(json.dumps(state, sort_keys=True))


def _skips(monkeypatch):
  """Records the `skip` of every stream pipeline built (0: restored or fresh, > 0: re-read up to a cursor)."""
  skips = []
  original = ps.SeqioPairSource._dataset

  def recording(self, task, bilingual, skip, *args):
    skips.append(skip)
    return original(self, task, bilingual, skip, *args)

  monkeypatch.setattr(ps.SeqioPairSource, "_dataset", recording)
  return skips


@pytest.mark.parametrize("hosts", [1, 2])
def test_saved_input_state_resumes_the_uninterrupted_stream_without_rereading(corpus, monkeypatch, hosts):
  _, mono, para = corpus
  make = lambda: ps.SeqioPairSource(WordVocab(), monolingual_tasks=mono, parallel_tasks=para, segment_len=8,
                                    batch_size=16, seed=3)
  straight = [make() for _ in range(hosts)]  # one source per host, as on a pod
  batches = [[straight[h].batch(p, h, hosts) for h in range(hosts)] for p in range(12)]
  states = {}
  for p in (5, 9):  # each stream cycles: `aa` has 2 documents (1 per host with 2 hosts), `bb` 20
    first = [make() for _ in range(hosts)]
    for q in range(p):
      for h in range(hosts):
        first[h].batch(q, h, hosts)
    states[p] = [_round_trip(first[h].input_state(p, h, hosts)) for h in range(hosts)]
    assert all(s["cursors"]["aa"] > 2 // hosts and s["cursors"]["aa-bb"] > 5 // hosts for s in states[p])  # cycled
  skips = _skips(monkeypatch)
  for p, saved in states.items():
    for h in range(hosts):
      resumed = make()
      resumed.restore_input_state(saved[h], p, h, hosts)
      for q in range(p, 12):
        _same(resumed.batch(q, h, hosts), batches[q][h])
      resumed.close()
  assert skips and not any(skips)  # every stream restored from its saved position: nothing re-read
  # a state saved by a restored source (its streams partly still unopened) resumes the same way
  again = make()
  again.restore_input_state(states[5][0], 5, 0, hosts)
  again.batch(5, 0, hosts)
  later = make()
  later.restore_input_state(_round_trip(again.input_state(6, 0, hosts)), 6, 0, hosts)
  _same(later.batch(6, 0, hosts), batches[6][0])


def test_input_state_of_other_data_is_refused_naming_what_changed(corpus, registered):
  directory, mono, para = corpus
  make = lambda **kw: ps.SeqioPairSource(WordVocab(), **{**dict(monolingual_tasks=mono, parallel_tasks=para,
                                                                 segment_len=8, batch_size=16, seed=3), **kw})
  source = make()
  for p in range(3):
    source.batch(p)
  state = _round_trip(source.input_state(3))
  with pytest.raises(ps.errors.ConfigError, match=r"other data or settings: alpha \(0\.5 -> 0\.3\)"):
    make(alpha=0.3).restore_input_state(state, 3)
  with pytest.raises(ps.errors.ConfigError, match=r"hosts \(1 -> 2\).*host \('0 of 1' -> '0 of 2'\)"):
    make().restore_input_state(state, 3, 0, 2)
  with pytest.raises(ps.errors.ConfigError, match=r"streams\.dd\.task \('<absent>' -> 'test_mono_dd'\)"):
    _write(directory / "dd.txt", ["dd doc"])
    make(monolingual_tasks={**mono, "dd": registered(pt.register_text_task, "dd", str(directory), False,
                                                        name="test_mono_dd")}).restore_input_state(state, 3)
  _write(directory / "bb.txt", [f"bb doc{i} more words" for i in range(21)])  # the corpus changed: 21 documents
  with pytest.raises(ps.errors.ConfigError, match=r"streams\.bb\.examples \(20 -> 21\)"):
    make().restore_input_state(state, 3)
  with pytest.raises(ps.errors.DataError, match="of batch 3, the train state of batch 4"):
    make(monolingual_tasks=mono).restore_input_state({**state, "data": make().data_fingerprint()}, 4)


def test_a_stream_that_cannot_be_checkpointed_resumes_by_skipping(registered, monkeypatch, caplog):
  import logging

  def fn(split, shuffle_files):  # a stateful op (a random integer in [0, 1), always 0): the position cannot be saved
    del split, shuffle_files
    zero = lambda: tf.strings.as_string(tf.random.uniform([], 0, 1, tf.int32))
    return tf.data.Dataset.from_tensor_slices([f"g{i} a b c d" for i in range(7)]).map(
        lambda t: {"text": tf.strings.join([t, zero()], " ")})

  seqio.TaskRegistry.remove("test_stateful_aa")
  seqio.TaskRegistry.add("test_stateful_aa", source=seqio.FunctionDataSource(dataset_fn=fn, splits=("train",)),
                         output_features=pt.TEXT_FEATURES, preprocessors=[], metric_fns=[])
  try:
    make = lambda: ps.SeqioPairSource(WordVocab(), monolingual_tasks={"aa": "test_stateful_aa"}, counts={"aa": 7},
                                      segment_len=8, batch_size=4)
    straight = make()
    batches = [straight.batch(p) for p in range(5)]
    with caplog.at_level(logging.WARNING):
      state = _round_trip(_state_at(make(), 3))
    assert state["streams"]["aa"]["iterator"] is None and state["streams"]["aa"]["cursor"] == 12
    assert any("cannot be checkpointed" in r.getMessage() and "re-reads its first 12 examples" in r.getMessage()
               for r in caplog.records)
    skips = _skips(monkeypatch)
    resumed = make()
    resumed.restore_input_state(state, 3)
    _same(resumed.batch(3), batches[3])
    _same(resumed.batch(4), batches[4])
    assert skips == [12]
  finally:
    seqio.TaskRegistry.remove("test_stateful_aa")


def _state_at(source, position):
  for p in range(position):
    source.batch(p)
  return source.input_state(position)


def test_documents_are_streamed_not_loaded(tmp_path, registered, monkeypatch):
  _write(tmp_path / "en.txt", [f"line {i} with some words" for i in range(50_000)])
  name = registered(pt.register_text_task, "en", str(tmp_path), False, name="test_big_en")
  read = []
  original = pc.iter_documents

  def counting(*args, **kwargs):
    for doc in original(*args, **kwargs):
      read.append(1)
      yield doc

  monkeypatch.setattr(pc, "iter_documents", counting)
  src = ps.SeqioPairSource(WordVocab(), monolingual_tasks={"en": name}, counts={"en": 50_000}, segment_len=8,
                           batch_size=8)
  for p in range(3):
    src.batch(p)
  assert src._state["cursors"] == {"en": 24}
  assert len(read) < 5_000  # a prefetch's worth, not the corpus
  assert all(len(s.pending) <= stream_state.READ_CHUNK + src.max_lookahead for s in src._state["streams"].values())


def test_flips_and_skipped_documents(tmp_path, registered):
  v = WordVocab()
  docs = [f"d{i} " + " ".join(f"w{i}_{k}" for k in range(5)) for i in range(30)]  # 6 tokens: one pair each
  _write(tmp_path / "aa.txt", docs)
  halves = {}
  for d in docs:
    ids = v.encode(d)
    halves[tuple(ids[:3])] = tuple(ids[3:])
  name = registered(pt.register_text_task, "aa", str(tmp_path), False, name="test_flip_aa")
  src = ps.SeqioPairSource(v, monolingual_tasks={"aa": name}, segment_len=8, batch_size=10, seed=4)
  flips = []
  for p in range(6):
    b = src.batch(p)
    for row in range(10):
      x, y = (tuple(_unmask(*(b[f"{s}_{k}"][row] for k in ("input_ids", "masked_positions", "masked_ids",
                                                              "masked_weights")))[1:4]) for s in ("x", "y"))
      if halves.get(x) == y:
        flips.append(False)
      else:
        assert halves.get(y) == x
        flips.append(True)
  assert 0.3 < np.mean(flips) < 0.7
  # a document too short for a pair is skipped: rows take the next usable document
  _write(tmp_path / "bb.txt", ["x", "a b c d", "y", "z"])
  short = registered(pt.register_text_task, "bb", str(tmp_path), False, name="test_skip_bb")
  src = ps.SeqioPairSource(v, monolingual_tasks={"bb": short}, segment_len=8, batch_size=8, flip_prob=0.0)
  b = src.batch(0)
  ab = v.encode("a b")
  for row in range(8):
    x = _unmask(*(b[f"x_{k}"][row] for k in ("input_ids", "masked_positions", "masked_ids", "masked_weights")))
    assert x[1:3].tolist() == ab  # (y is "c d": both segments have 2 tokens)
    assert b["x_input_mask"][row].sum() == 4 and b["y_input_mask"][row].sum() == 4
  assert src._state["cursors"] == {"bb": 8}
  _write(tmp_path / "cc.txt", ["x"])
  hopeless = registered(pt.register_text_task, "cc", str(tmp_path), False, name="test_hopeless_cc")
  with pytest.raises(ValueError, match="test_hopeless_cc.*no usable pair"):
    ps.SeqioPairSource(v, monolingual_tasks={"cc": hopeless}, batch_size=2, max_lookahead=5).batch(0)


def test_tlm_language_ids_and_hosts(tmp_path, registered):
  v = WordVocab()
  _write(tmp_path / "aa.txt", ["one two three four"] * 2)  # two copies: one per host below
  _write(tmp_path / "bb-cc.tsv", ["p q r\ts t"] * 2)
  mono = registered(pt.register_text_task, "aa", str(tmp_path), False, name="test_lang_aa")
  para = registered(pt.register_parallel_task, "bb", "cc", str(tmp_path), name="test_lang_bb_cc")
  src = ps.SeqioPairSource(v, monolingual_tasks={"aa": mono}, parallel_tasks={"bb-cc": para}, segment_len=6,
                           batch_size=2, seed=0)
  assert src.languages_index == ("aa", "bb", "cc")
  b = src.batch(1)  # bilingual: [CLS] p q r [SEP] s t [SEP] padding
  for row in range(2):
    assert b["tlm_language_ids"][row].tolist() == [1] * 5 + [2] * 3 + [0] * 8
    assert (b["x_language_id"][row], b["y_language_id"][row]) == (1, 2)
  b = src.batch(0)  # monolingual: x and y both aa (id 0) -> zeros throughout
  assert not b["tlm_language_ids"].any()
  # hosts build their halves of every batch from their own shard of each stream
  hosts = [src.batch(p, h, 2) for p in (0, 1) for h in (0, 1)]
  assert all(h["x_input_ids"].shape == (1, 8) for h in hosts)


def test_tasks_with_extra_variable_length_features_stream(registered):
  def fn(split, shuffle_files):
    del split, shuffle_files
    texts = ["a b c d", "e f g h i j", "k l m"]
    return tf.data.Dataset.from_tensor_slices({"text": texts}).map(
        lambda ex: {"text": ex["text"], "words": tf.strings.split(ex["text"])})  # ragged per example

  class Source(seqio.FunctionDataSource):
    pretrain_language = "aa"

  seqio.TaskRegistry.remove("test_extra_aa")
  seqio.TaskRegistry.add("test_extra_aa", source=Source(dataset_fn=fn, splits=("train",)),
                         output_features=pt.TEXT_FEATURES, preprocessors=[], metric_fns=[])
  try:
    source = ps.SeqioPairSource(WordVocab(), monolingual_tasks=("test_extra_aa",), counts={"aa": 3},
                                segment_len=8, batch_size=4)
    batch = source.batch(0)
    assert batch["x_input_ids"].shape == (4, 10) and source.languages_index == ("aa",)
  finally:
    seqio.TaskRegistry.remove("test_extra_aa")
