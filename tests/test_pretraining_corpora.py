"""VECO pretraining corpora: readers, language sampling, alternation, flips, masking, TLM layout."""

import os
import zlib

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.pretraining import pretraining_corpora as pc

TIER = "unit"  # conftest.py: this file's tier

SAMPLE_PRETRAIN = os.path.join(paths.sample_dir(), "pretrain")


class WordVocab:
  """Whitespace 'tokenizer' with WordPiece-like specials: pad 0, unk 1, cls 2, sep 3, mask 4."""

  vocab_size = 100
  pad_id, unk_id, cls_id, sep_id, mask_id = 0, 1, 2, 3, 4

  def encode(self, text):
    return [5 + zlib.crc32(w.encode()) % 95 for w in text.split()]

  def build_inputs(self, a, b=None):
    ids = [self.cls_id, *a, self.sep_id]
    types = [0] * len(ids)
    if b is not None:
      ids += [*b, self.sep_id]
      types += [1] * (len(b) + 1)
    return ids, types


def _write(path, lines):
  path.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
  return path


def _words(i, n):
  return " ".join(f"w{i}_{k}" for k in range(n))


@pytest.fixture
def corpus(tmp_path):
  """Monolingual aa/bb/cc with 2/20/200 pairs; parallel aa-bb (5 pairs, aligned) and aa-cc (50, tsv)."""
  mono, para = tmp_path / "mono", tmp_path / "para"
  mono.mkdir()
  para.mkdir()
  for lang, n in (("aa", 2), ("bb", 20), ("cc", 200)):
    _write(mono / f"{lang}.txt", [f"{lang} " + _words(i, 6) for i in range(n)])
  _write(para / "aa-bb.aa", [f"src {_words(i, 4)}" for i in range(5)])
  _write(para / "aa-bb.bb", [f"tgt {_words(i, 5)}" for i in range(5)])
  _write(para / "aa-cc.tsv", [f"s {_words(i, 3)}\tt {_words(i, 7)}" for i in range(50)])
  return mono, para


@pytest.fixture(scope="module")
def sample_vocab():
  from xtreme_jax.data.vocab.vocabularies import load_vocabulary
  return load_vocabulary(paths.sample_vocab())


@pytest.fixture(scope="module")
def sample_source(tmp_path_factory, sample_vocab):
  para = tmp_path_factory.mktemp("sample_para")
  en = ["The river runs past the old mill and into the valley.",
        "Every morning the baker opens his shop before sunrise.",
        "Children walk to school along the quiet road by the lake.",
        "She planted tomatoes, beans and sunflowers in the garden.",
        "The train to the coast leaves at seven and arrives at noon."]
  de = ["Der Fluss fließt an der alten Mühle vorbei ins Tal.",
        "Jeden Morgen öffnet der Bäcker seinen Laden vor Sonnenaufgang.",
        "Kinder gehen auf der ruhigen Straße am See zur Schule.",
        "Sie pflanzte Tomaten, Bohnen und Sonnenblumen im Garten.",
        "Der Zug an die Küste fährt um sieben ab und kommt mittags an."]
  _write(para / "en-de.en", en)
  _write(para / "en-de.de", de)
  return pc.VecoPairSource(sample_vocab, monolingual_dir=SAMPLE_PRETRAIN, parallel_dir=str(para),
                           segment_len=32, batch_size=16, seed=3, blank_line_documents=True)


def test_language_sampling_probs():
  p = pc.language_sampling_probs({"en": 100, "sw": 1}, 0.5)
  assert p == pytest.approx({"en": 10 / 11, "sw": 1 / 11})
  assert pc.language_sampling_probs({"a": 4, "b": 9}, 1.0) == pytest.approx({"a": 4 / 13, "b": 9 / 13})
  assert pc.language_sampling_probs({"a": 4, "b": 9}, 0.0) == pytest.approx({"a": 0.5, "b": 0.5})
  with pytest.raises(ValueError, match="empty"):
    pc.language_sampling_probs({}, 0.5)
  with pytest.raises(ValueError, match="'sw'"):
    pc.language_sampling_probs({"en": 3, "sw": 0}, 0.5)


@pytest.mark.parametrize("alpha", [pc.UNICODER_ALPHA, pc.VECO_ALPHA, pc.MBERT_ALPHA])
def test_sampled_language_frequencies_follow_n_to_the_alpha(corpus, alpha):
  mono, para = corpus
  src = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), parallel_dir=str(para),
                          segment_len=8, batch_size=100, alpha=alpha, seed=11)
  assert {k: len(v) for k, v in src.monolingual.items()} == {"aa": 2, "bb": 20, "cc": 200}
  expected = np.asarray([2, 20, 200], float) ** alpha
  expected /= expected.sum()
  assert [src.mono_probs[l] for l in ("aa", "bb", "cc")] == pytest.approx(expected)
  draws = [src.plan(p, row)["language"] for p in range(0, 400, 2) for row in range(100)]
  assert len(draws) == 20_000
  for lang, prob in zip(("aa", "bb", "cc"), expected):
    assert abs(draws.count(lang) / len(draws) - prob) < 0.01, (lang, alpha)
  # Bilingual pairs are sampled the same way (5 vs 50 pairs).
  bi = [src.plan(p, row)["language"] for p in range(1, 201, 2) for row in range(100)]
  p_ab = 5 ** alpha / (5 ** alpha + 50 ** alpha)
  assert abs(bi.count("aa-bb") / len(bi) - p_ab) < 0.01


def test_batches_alternate_and_follow_the_plan(corpus):
  mono, para = corpus
  src = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), parallel_dir=str(para),
                          segment_len=8, batch_size=8, seed=1)
  for p in range(6):
    b = src.batch(p)
    assert (b["is_bilingual"] == p % 2).all()
    langs = src.languages_index
    for row in range(8):
      plan = src.plan(p, row)
      assert plan["bilingual"] == bool(p % 2)
      x_lang, y_lang = plan["language"].split("-") if plan["bilingual"] else [plan["language"]] * 2
      assert (langs[b["x_language_id"][row]], langs[b["y_language_id"][row]]) == (x_lang, y_lang)
    if p % 2 == 0:
      assert not b["tlm_masked_weights"].any()  # TLM only on bilingual pairs
    else:
      assert b["tlm_masked_weights"].sum(-1).min() > 0
  only_mono = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), segment_len=8, batch_size=4)
  only_bi = pc.VecoPairSource(WordVocab(), parallel_dir=str(para), segment_len=8, batch_size=4)
  for p in range(3):
    assert not only_mono.batch(p)["is_bilingual"].any()
    assert only_bi.batch(p)["is_bilingual"].all()


def _unmask(ids, positions, masked_ids, weights):
  out = ids.copy()
  real = weights > 0
  out[positions[real]] = masked_ids[real]
  return out


def test_monolingual_order_flipped_half_the_time(corpus):
  mono, para = corpus
  src = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), parallel_dir=str(para),
                          segment_len=8, batch_size=50, seed=5)
  flips = [src.plan(p, row)["flipped"] for p in range(0, 200, 2) for row in range(50)]
  assert abs(np.mean(flips) - 0.5) < 0.02
  assert not any(src.plan(p, row)["flipped"] for p in (1, 3) for row in range(50))
  b = src.batch(0)
  v = WordVocab()
  seen = set()
  for row in range(50):
    plan = src.plan(0, row)
    x, y = src.monolingual[plan["language"]][plan["index"]]
    if plan["flipped"]:
      x, y = y, x
    seen.add(plan["flipped"])
    for name, ids in (("x", x), ("y", y)):
      got = _unmask(*(b[f"{name}_{k}"][row] for k in ("input_ids", "masked_positions", "masked_ids",
                                                      "masked_weights")))
      assert got[:len(ids) + 2].tolist() == [v.cls_id, *ids, v.sep_id]
      assert (got[len(ids) + 2:] == v.pad_id).all()
  assert seen == {True, False}


def test_masking_rates_and_specials_never_masked(sample_source, sample_vocab):
  src, v = sample_source, sample_vocab
  specials = [v.pad_id, v.cls_id, v.sep_id, v.unk_id, v.mask_id]
  rates = {0: [], 1: []}
  for p in range(8):
    b = src.batch(p)
    kind = p % 2
    for prefix in ("x", "y") + (("tlm",) if kind else ()):
      ids = b[f"{prefix}_input_ids"]
      w = b[f"{prefix}_masked_weights"]
      pos = b[f"{prefix}_masked_positions"]
      orig = np.stack([_unmask(ids[r], pos[r], b[f"{prefix}_masked_ids"][r], w[r]) for r in range(len(ids))])
      maskable = ~np.isin(orig, specials)
      rates[kind].append((w.sum(), maskable.sum()))
      real = w > 0
      assert not np.isin(b[f"{prefix}_masked_ids"][real], specials).any()
      # special tokens and padding are left as they are
      special_pos = ~maskable
      assert (ids[special_pos] == orig[special_pos]).all()
      # only picked positions changed
      changed = ids != orig
      rows, cols = np.nonzero(changed)
      for r, c in zip(rows, cols):
        assert c in pos[r][real[r]]
      # the mask token is used (80/10/10), on a fair share of picks
      assert (ids == v.mask_id).sum() >= 0.5 * w.sum()
  mono = sum(a for a, _ in rates[0]) / sum(n for _, n in rates[0])
  bi = sum(a for a, _ in rates[1]) / sum(n for _, n in rates[1])
  assert abs(mono - 0.15) < 0.02, mono
  assert abs(bi - 0.25) < 0.03, bi


def test_deterministic_and_host_sliced(corpus):
  mono, para = corpus
  make = lambda: pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), parallel_dir=str(para),
                                   segment_len=8, batch_size=8, seed=7)
  a, b = make(), make()
  for p in (0, 1, 5, 12):
    full = a.batch(p)
    again = b.batch(p)
    assert full.keys() == again.keys()
    for k in full:
      np.testing.assert_array_equal(full[k], again[k])
    for hosts in (2, 4):
      parts = [a.batch(p, h, hosts) for h in range(hosts)]
      for k in full:
        np.testing.assert_array_equal(np.concatenate([q[k] for q in parts]), full[k])
  assert not np.array_equal(a.batch(0)["x_input_ids"], a.batch(2)["x_input_ids"])
  other = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), parallel_dir=str(para),
                            segment_len=8, batch_size=8, seed=8)
  assert not np.array_equal(other.batch(0)["x_input_ids"], a.batch(0)["x_input_ids"])
  with pytest.raises(ValueError, match="divisible"):
    a.batch(0, 0, 3)


def test_fixed_shapes_across_batch_kinds(sample_source):
  shapes = [{k: v.shape for k, v in sample_source.batch(p).items()} for p in range(2)]
  assert shapes[0] == shapes[1]
  s = sample_source
  assert shapes[0]["x_input_ids"] == (16, s.segment_len + 2)
  assert shapes[0]["tlm_input_ids"] == (16, 2 * s.segment_len + 4)
  assert shapes[0]["tlm_positions"] == shapes[0]["tlm_language_ids"] == shapes[0]["tlm_input_ids"]
  assert sample_source.batch(0)["tlm_language_ids"].dtype == np.int32
  assert shapes[0]["is_bilingual"] == (16,)


def test_tlm_layout_and_positions_restart(corpus, sample_source, sample_vocab):
  _, para = corpus
  v = WordVocab()
  src = pc.VecoPairSource(v, parallel_dir=str(para), segment_len=8, batch_size=4, seed=2)
  b = src.batch(1)
  for row in range(4):
    plan = src.plan(1, row)
    x, y = src.bilingual[plan["language"]][plan["index"]]
    ids = _unmask(*(b[f"tlm_{k}"][row] for k in ("input_ids", "masked_positions", "masked_ids",
                                                 "masked_weights")))
    n = len(x) + len(y) + 3
    assert ids[:n].tolist() == [v.cls_id, *x, v.sep_id, *y, v.sep_id]
    assert b["tlm_token_type_ids"][row][:n].tolist() == [0] * (len(x) + 2) + [1] * (len(y) + 1)
    assert b["tlm_positions"][row].tolist() == (list(range(len(x) + 2)) + list(range(len(y) + 1))
                                                + [0] * (src.tlm_len - n))
    assert b["tlm_input_mask"][row].tolist() == [1] * n + [0] * (src.tlm_len - n)
    # XLM language embeddings: x's language on [CLS] x [SEP], y's on y [SEP], 0 on padding
    x_id, y_id = (src.languages_index.index(l) for l in plan["language"].split("-"))
    assert (b["x_language_id"][row], b["y_language_id"][row]) == (x_id, y_id)
    assert b["tlm_language_ids"][row].tolist() == ([x_id] * (len(x) + 2) + [y_id] * (len(y) + 1)
                                                   + [0] * (src.tlm_len - n))
  # XLM-R layout (<s> x </s></s> y </s>): the second part starts at the extra </s>.
  b = sample_source.batch(1)
  sv = sample_vocab
  for row in range(3):
    plan = sample_source.plan(1, row)
    x, y = sample_source.bilingual[plan["language"]][plan["index"]]
    ids = _unmask(*(b[f"tlm_{k}"][row] for k in ("input_ids", "masked_positions", "masked_ids",
                                                 "masked_weights")))
    first = len(x) + 2
    assert ids[first - 1] == ids[first] == sv.sep_id
    pos = b["tlm_positions"][row]
    assert pos[first - 1] == first - 1 and pos[first] == 0 and pos[first + len(y) + 1] == len(y) + 1
    langs = b["tlm_language_ids"][row]
    x_id, y_id = (sample_source.languages_index.index(l) for l in plan["language"].split("-"))
    end = first + len(y) + 2  # <s> x </s> | </s> y </s>
    assert langs[:first].tolist() == [x_id] * first and langs[first:end].tolist() == [y_id] * (end - first)
    assert not langs[end:].any()


def test_parallel_line_count_mismatch_names_both_files(tmp_path):
  _write(tmp_path / "en-fr.en", ["a b", "c d", "e f"])
  _write(tmp_path / "en-fr.fr", ["a b", "c d"])
  with pytest.raises(ValueError) as err:
    pc.read_parallel(str(tmp_path))
  msg = str(err.value)
  assert str(tmp_path / "en-fr.en") in msg and str(tmp_path / "en-fr.fr") in msg
  assert "3 lines" in msg and "2 lines" in msg


def test_parallel_tsv_equals_aligned_files(tmp_path):
  aligned, tsv = tmp_path / "a", tmp_path / "t"
  aligned.mkdir()
  tsv.mkdir()
  src = ["one two", "", "three", "four five six"]
  tgt = ["uno dos", "x", "tres", "cuatro cinco seis"]
  _write(aligned / "en-es.en", src)
  _write(aligned / "en-es.es", tgt)
  _write(tsv / "en-es.tsv", [f"{s}\t{t}" for s, t in zip(src, tgt)])
  expected = {"en-es": [("one two", "uno dos"), ("three", "tres"), ("four five six", "cuatro cinco seis")]}
  assert pc.read_parallel(str(aligned)) == expected
  assert pc.read_parallel(str(tsv)) == expected
  _write(tsv / "en-es.tsv", ["one\ttwo\tthree"])
  with pytest.raises(errors.DataError, match=r"en-es\.tsv:1: 3 tab-separated"):
    pc.read_parallel(str(tsv))
  os.remove(aligned / "en-es.es")
  with pytest.raises(FileNotFoundError, match=r"en-es\.es is missing"):
    pc.read_parallel(str(aligned))


def test_non_utf8_corpora_are_data_errors_naming_file_line_and_byte(tmp_path):
  """Byte 0xfc (Latin-1 'ü') is no UTF-8: one DataError line, never a bare UnicodeDecodeError."""
  bad = b"gut\n\xfcber alles\n"  # line 2, byte 4
  mono = tmp_path / "mono"
  mono.mkdir()
  (mono / "de.txt").write_bytes(bad)
  for blocks in (False, True):
    with pytest.raises(errors.DataError, match=rf"^{tmp_path}/mono/de\.txt:2 \(byte 4\): not UTF-8 \(byte 0xfc: "
                                               r"invalid start byte\); expected a UTF-8 text file of monolingual"):
      pc.read_monolingual(str(mono), blank_line_documents=blocks)
  aligned, tsv = tmp_path / "aligned", tmp_path / "tsv"
  aligned.mkdir()
  tsv.mkdir()
  (aligned / "de-en.de").write_bytes(bad)
  _write(aligned / "de-en.en", ["good", "over all"])
  with pytest.raises(errors.DataError, match=r"de-en\.de:2 \(byte 4\): not UTF-8 \(byte 0xfc.*aligned with "):
    pc.read_parallel(str(aligned))
  (tsv / "de-en.tsv").write_bytes(b"\xef\xbb\xbfgut\tgood\n\xfcber\tover\n")  # a BOM counts in the offset
  with pytest.raises(errors.DataError, match=r"de-en\.tsv:2 \(byte 12\): not UTF-8 \(byte 0xfc.*source<TAB>target"):
    pc.read_parallel(str(tsv))
  (tsv / "de-en.tsv").write_bytes(b"\xef\xbb\xbfgut\tgood\n\xc3\xbcber\tover\n")
  assert pc.read_parallel(str(tsv)) == {"de-en": [("gut", "good"), ("\u00fcber", "over")]}  # the BOM is dropped


def test_empty_language_file_is_named(tmp_path):
  _write(tmp_path / "en.txt", ["some text here"])
  (tmp_path / "sw.txt").write_text("\n\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"sw\.txt.*'sw'.*no text"):
    pc.read_monolingual(str(tmp_path))
  with pytest.raises(ValueError, match=r"sw\.txt"):
    _ = pc.VecoPairSource(WordVocab(), monolingual_dir=str(tmp_path)).monolingual
  _write(tmp_path / "sw.txt", ["x"])  # text, but too short for a pair
  with pytest.raises(ValueError, match=r"sw\.txt.*no segment pair"):
    _ = pc.VecoPairSource(WordVocab(), monolingual_dir=str(tmp_path)).monolingual
  para = tmp_path / "para"
  para.mkdir()
  (para / "en-sw.tsv").write_text("", encoding="utf-8")
  with pytest.raises(ValueError, match=r"en-sw\.tsv.*no sentence pairs"):
    pc.read_parallel(str(para))
  for read, kind in ((pc.read_monolingual, "monolingual"), (pc.read_parallel, "parallel")):
    with pytest.raises(errors.MissingInputError, match=f"^{tmp_path}/none is not a directory; expected the {kind} "):
      read(str(tmp_path / "none"))


def test_unknown_languages_name_the_valid_ones(corpus):
  mono, para = corpus
  with pytest.raises(ValueError, match=r"\['xx'\].*valid languages: \['aa', 'bb', 'cc'\]"):
    pc.read_monolingual(str(mono), ["aa", "xx"])
  with pytest.raises(ValueError, match=r"\['aa-xx'\].*valid language pairs: \['aa-bb', 'aa-cc'\]"):
    pc.read_parallel(str(para), [("aa", "xx")])
  with pytest.raises(ValueError, match="valid languages"):
    _ = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), languages=("zz",)).monolingual
  src = pc.VecoPairSource(WordVocab(), monolingual_dir=str(mono), parallel_dir=str(para),
                          languages=("aa", "bb"), language_pairs=("aa-cc",))
  assert sorted(src.monolingual) == ["aa", "bb"] and sorted(src.bilingual) == ["aa-cc"]


def test_monolingual_documents_and_segments(tmp_path):
  _write(tmp_path / "en.txt", ["a b c", "d e", "", "f g h i", "", "", "j"])
  assert pc.read_monolingual(str(tmp_path), blank_line_documents=True) == {
      "en": [["a b c", "d e"], ["f g h i"], ["j"]]}
  assert pc.read_monolingual(str(tmp_path)) == {"en": [["a b c"], ["d e"], ["f g h i"], ["j"]]}
  seg = pc.segment_document([[1, 2, 3], [4, 5], [6, 7, 8, 9, 10, 11, 12], [13]], 4)
  assert seg == [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10, 11, 12, 13]]
  assert pc.adjacent_pairs(seg) == [([1, 2, 3], [4, 5]), ([6, 7, 8, 9], [10, 11, 12, 13])]
  assert pc.adjacent_pairs([[1], [2], [3]]) == [([1], [2]), ([2], [3])]
  assert pc.adjacent_pairs([[1, 2, 3, 4, 5]]) == [([1, 2], [3, 4, 5])]
  assert pc.adjacent_pairs([[1]]) == []


def test_sample_corpus_and_eval_batches(sample_source):
  src = sample_source
  assert sorted(src.monolingual) == sorted(f[:-4] for f in os.listdir(SAMPLE_PRETRAIN))
  assert all(len(x) <= 32 and len(y) <= 32 for pairs in src.monolingual.values() for x, y in pairs)
  assert src.num_examples == sum(map(len, src.monolingual.values())) + 5
  batches = list(src.eval_batches())
  assert len(batches) == -(-src.num_examples // src.batch_size)
  assert sum(int(b["is_bilingual"].sum()) for b in batches) == 5 + src.batch_size * len(batches) - src.num_examples
  last = batches[-1]
  pad_rows = src.batch_size * len(batches) - src.num_examples
  if pad_rows:
    assert not last["x_masked_weights"][-pad_rows:].any()
  assert src.tokens_per_batch(src.batch(0)) > 0
