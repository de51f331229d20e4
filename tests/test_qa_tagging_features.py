"""Sliding-window tagging features, QA doc-stride features and SQuAD span decoding.

Runs offline on a tiny WordPiece vocab.txt written here and the bundled
XLM-R-style sentencepiece model.
"""

import importlib.resources
import unicodedata

import numpy as np
import pytest

from xtreme_jax.data.features import qa_features as Q
from xtreme_jax.errors import ConfigError, DataError
from xtreme_jax.data.features.tagging_features import merge_window_predictions, tagging_windows
from xtreme_jax.data.vocab.vocabularies import WordPieceVocabulary, XlmrSentencePieceVocabulary
from xtreme_jax.evaluation.span_decoding import best_spans
from xtreme_jax.text import locate_answer

TIER = "unit"  # conftest.py: this file's tier

CONTEXTS = {
    "zh": "北京是中华人民共和国的首都，也是全国的政治和文化中心。上海是中国最大的城市，人口超过两千万。ＡＢＣ公司",
    "ar": "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها. يمر نهر النيل عبر المدينة منذ آلاف السنين.",
    "hi": "नई दिल्ली भारत की राजधानी है। हिंदी भारत की सबसे अधिक बोली जाने वाली भाषा है। "
          "मैं रोज़ सुबह क़िला देखने जाता हूँ। \u095bरूर बा\u0930\u093c",
    "th": "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย และเป็นเมืองที่มีประชากรมากที่สุด ภาษาไทยสวยงาม",
    "fr": "Les élèves étudient à l'université de Montréal depuis 1998. L'œuvre « naïve » du "
          "cafe\u0301 coûte 20 €, déjà payée 😀 ! La ﬁnale a eu lieu à Genève.",
}
UNSEEN = set("😀")  # not in vocab.txt: words holding it become [UNK]
# Substrings of the space-free zh / th contexts used as answers.
CHAR_ANSWERS = {"zh": ["北京", "中华人民共和国", "首都", "政治和文化中心", "上海", "两千万", "ＡＢＣ"],
                "th": ["กรุงเทพมหานคร", "เมืองหลวง", "ประเทศไทย", "ประชากร", "ภาษาไทย"]}


def _vocab_file(path, lower=False):
  texts = "".join(CONTEXTS.values()) + "abcdefghijklmnopqrstuvwxyz unbelievable question what where"
  chars = sorted({c for c in texts if not c.isspace()} - UNSEEN)
  if lower:
    chars = sorted({c for ch in chars for c in unicodedata.normalize("NFD", ch.lower())
                    if unicodedata.category(c) != "Mn"})
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##believ", "##able",
            "question", "what", "where", "Montréal", "##ité"]
  tokens += chars + ["##" + c for c in chars]
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
  return WordPieceVocabulary(_vocab_file(tmp_path_factory.mktemp("wp") / "vocab.txt"))


@pytest.fixture(scope="module")
def wordpiece_lower(tmp_path_factory):
  return WordPieceVocabulary(_vocab_file(tmp_path_factory.mktemp("wpl") / "vocab.txt", True),
                             do_lower_case=True)


@pytest.fixture(scope="module")
def spm():
  path = importlib.resources.files("xtreme_jax") / "sample_data" / "sample_spm.model"
  return XlmrSentencePieceVocabulary(str(path))


@pytest.fixture(scope="module", params=["wordpiece", "wordpiece_lower", "spm"])
def vocab(request):
  return request.getfixturevalue(request.param)


# ----------------------------------------------------------------------------- tagging


def _subwords(window):
  """The window's subword ids, without specials and padding."""
  n = int(window["input_mask"].sum())
  return window["input_ids"][1:n - 1].tolist()


def test_tagging_windows_predict_every_word_once(wordpiece):
  words = [chr(ord("a") + i % 26) for i in range(150)]  # one subword each
  words[28] = "unbelievable"  # subwords 28-30 straddle the 30-subword budget of window 1
  words[60] = "\u200b"  # tokenizes to nothing -> one [UNK], still predicted
  words[100] = "a" * 40  # longer than a window: cut, but its first subword is predicted
  tags = [f"T{i % 7}" for i in range(150)]
  label_map = {f"T{i}": i for i in range(7)}
  windows = tagging_windows(words, wordpiece, max_seq_len=32, context=8, tags=tags,
                            label_map=label_map)
  assert len(windows) > 5
  seen = []
  for k, w in enumerate(windows):
    assert all(w[key].shape == (32,) for key in ("input_ids", "labels", "label_weights"))
    assert w["input_ids"][0] == wordpiece.cls_id
    pred = np.flatnonzero(w["label_weights"])
    np.testing.assert_array_equal(pred, np.flatnonzero(w["labels"] != -100))
    np.testing.assert_array_equal(pred, np.flatnonzero(w["word_index"] >= 0))
    for pos in pred:  # label sits on the word's first subword only
      word = int(w["word_index"][pos])
      assert w["input_ids"][pos] == (wordpiece.encode(words[word]) or [wordpiece.unk_id])[0]
      assert w["labels"][pos] == label_map[tags[word]]
    seen += w["word_index"][pred].tolist()
    if k:  # left context = last 8 subwords of the previous window, never predicted
      prev = _subwords(windows[k - 1])
      assert _subwords(w)[:8] == prev[-8:]
      assert not w["label_weights"][1:9].any()
  assert seen == list(range(150))
  # The boundary word is not cut: all its subwords are in the window predicting it.
  assert len(wordpiece.encode("unbelievable")) == 3
  assert _subwords(windows[0]) == [wordpiece.encode(x)[0] for x in words[:28]]  # ended early
  w = windows[1]
  pos = int(np.flatnonzero(w["word_index"] == 28)[0])
  assert w["input_ids"][pos:pos + 3].tolist() == wordpiece.encode("unbelievable")


def test_merge_round_trip_and_errors(wordpiece):
  words = [chr(ord("a") + i % 26) for i in range(150)]
  words[40] = "unbelievable"
  labels = np.random.default_rng(0).integers(0, 5, 150)
  windows = tagging_windows(words, wordpiece, 32, 8, tags=labels)
  preds = np.stack([np.where(w["labels"] >= 0, w["labels"], 99) for w in windows])
  assert merge_window_predictions(windows, preds, 150) == labels.tolist()
  with pytest.raises(ValueError, match="more than once"):
    merge_window_predictions(windows + windows[:1], np.concatenate([preds, preds[:1]]), 150)
  with pytest.raises(ValueError, match="never predicted"):
    merge_window_predictions(windows[1:], preds[1:], 150)


def test_tagging_multilingual_spm_and_no_tags(spm):
  words = (CONTEXTS["hi"].split() + CONTEXTS["ar"].split() + CONTEXTS["fr"].split()) * 3
  windows = tagging_windows(words, spm, max_seq_len=16, context=4)
  seen = [i for w in windows for i in w["word_index"][w["word_index"] >= 0]]
  assert seen == list(range(len(words)))
  assert all(w["input_mask"].sum() <= 16 for w in windows)
  assert all((w["labels"][w["label_weights"] > 0] == 0).all() for w in windows)
  merged = merge_window_predictions(windows, [w["input_ids"] for w in windows], len(words))
  assert merged == [spm.encode(word)[0] for word in words]
  short = tagging_windows(["a", "b"], spm, 16, 4)
  assert len(short) == 1 and short[0]["label_weights"].sum() == 2
  with pytest.raises(ValueError):
    tagging_windows(words, spm, max_seq_len=16, context=14)


# ----------------------------------------------------------------------------- alignment


@pytest.mark.parametrize("word,pieces,expected", [
    ("Montréal", ["Mont", "ré", "al"], ["Mont", "ré", "al"]),
    ("cafe\u0301", ["caf", "é"], ["caf", "e\u0301"]),  # decomposed vs composed
    ("élève", ["", "e", "leve"], ["é", "é", "lève"]),  # lower-cased, accents stripped
    ("x\u200dyz", ["x", "yz"], ["x\u200d", "yz"]),  # dropped control char
    ("a😀🦄b", ["a", None, "b"], ["a", "😀🦄", "b"]),  # unknown run
    ("北京是中", [None, "中"], ["北京是", "中"]),
    ("ﬁne", ["f", "in", "e"], ["ﬁ", "ﬁn", "e"]),  # ligature split between pieces
    ("\u0930\u093c", ["\u0931"], ["\u0930\u093c"]),  # composed by the tokenizer
    ("abc", ["zz", "q"], ["a", "bc"]),  # no alignment: even split
])
def test_align_pieces(word, pieces, expected):
  assert [word[s:e] for s, e in Q.align_pieces(word, pieces)] == expected


def _norm(text, lower):
  """NFKC + casefold; for a lower-casing vocab also without combining marks."""
  text = unicodedata.normalize("NFKC", text).casefold()
  if lower:
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
  return unicodedata.normalize("NFKC", text)


def test_context_token_spans_match_pieces(vocab, request):
  lower = request.node.callspec.params["vocab"] == "wordpiece_lower"
  for lang, context in CONTEXTS.items():
    ids, spans = Q.tokenize_with_offsets(context, vocab)
    assert len(ids) == len(spans)
    for ws, we in Q.whitespace_words(context):  # the spans tile every word
      word = [sp for sp in spans if ws <= sp[0] < we]
      assert word[0][0] == ws and word[-1][1] == we and all(s < e <= we for s, e in word)
      assert all(b[0] <= a[1] for a, b in zip(word, word[1:]))
    texts = Q.piece_texts(vocab, ids)
    for k, (text, (s, e)) in enumerate(zip(texts, spans)):
      if not text:
        continue
      # One character split between tokens ("ﬁ" -> "f" + "in", U+095B -> "ज" + "़")
      # gives overlapping spans; otherwise the characters normalise to the piece.
      shared = any(spans[j][0] < e and s < spans[j][1] for j in (k - 1, k + 1)
                   if 0 <= j < len(spans) and texts[j] != "")
      got, want = _norm(context[s:e], lower), _norm(text, lower)
      assert (want in got) if shared else (got == want), (lang, text, context[s:e])


# ----------------------------------------------------------------------------- QA windows


def _answers(lang):
  """(text, start) answers: every word and word pair, or chosen substrings (zh, th)."""
  context = CONTEXTS[lang]
  words = [] if lang in CHAR_ANSWERS else Q.whitespace_words(context)
  spans = words + [(a[0], b[1]) for a, b in zip(words, words[1:])]
  spans += [(context.index(t), context.index(t) + len(t)) for t in CHAR_ANSWERS.get(lang, [])]
  return [(context[s:e], s) for s, e in spans]


def _example(lang, text, start, question="what where question " * 3):
  return {"id": f"{lang}-{start}-{len(text)}", "context": CONTEXTS[lang], "question": question,
          "answers": {"text": [text], "answer_start": [start]}}


def _mapped(window, start, end):
  return window["context"][window["token_to_char"][start, 0]:window["token_to_char"][end, 1]]


def test_gold_answers_map_back_exactly(vocab, request):
  name = request.node.callspec.params["vocab"]
  inexact = []
  for lang in CONTEXTS:
    for text, start in _answers(lang):
      windows = Q.qa_windows(_example(lang, text, start), vocab, max_seq_len=40, doc_stride=8,
                             max_query_len=8, is_training=True)
      hits = [w for w in windows if w["start_positions"] > 0]
      assert hits, (lang, text)
      for w in hits:
        s, e = int(w["start_positions"]), int(w["end_positions"])
        assert 0 < s <= e and w["token_to_char"][s, 0] >= 0 and w["token_to_char"][e, 0] >= 0
        got = _mapped(w, s, e)
        if got != text:  # only where an answer boundary falls inside a token
          assert text in got, (lang, text, got)
          inexact.append((lang, text))
      assert all(w["end_positions"] == 0 for w in windows if w["start_positions"] == 0)
  # WordPiece isolates CJK characters and this vocab has every ##char; the tiny spm
  # model merges runs of unknown Chinese characters into one <unk> token.
  assert all(lang == "zh" for lang, _ in inexact) and (name == "spm" or not inexact), inexact


def test_doc_stride_windows(vocab):
  context = " ".join([CONTEXTS["fr"], CONTEXTS["hi"], CONTEXTS["ar"]])
  example = {"id": "long", "context": context, "question": "question what " * 40}
  windows = Q.qa_windows(example, vocab, max_seq_len=48, doc_stride=16, max_query_len=6)
  doc_ids, doc_spans = Q.tokenize_with_offsets(context, vocab)
  query = vocab.encode(example["question"])[:6]
  prefix = vocab.build_inputs(query, [])[0]
  window_len = 48 - len(prefix)
  assert len(windows) > 3
  assert len(windows) == -(-(len(doc_ids) - window_len) // 16) + 1  # ceil
  max_count = np.zeros(len(doc_ids), int)
  for k, w in enumerate(windows):
    assert w["window_index"] == k and w["input_ids"].shape == (48,)
    n = int(w["input_mask"].sum())
    assert w["input_ids"][:len(prefix) - 1].tolist() == prefix[:-1]  # truncated query
    pos = np.flatnonzero(w["token_to_char"][:, 0] >= 0)
    start = 16 * k
    assert pos.tolist() == list(range(len(prefix) - 1, n - 1))
    assert w["input_ids"][pos].tolist() == doc_ids[start:start + len(pos)]
    assert [tuple(x) for x in w["token_to_char"][pos]] == doc_spans[start:start + len(pos)]
    assert len(pos) == (window_len if k < len(windows) - 1 else len(doc_ids) - start)
    assert not w["is_max_context"][w["token_to_char"][:, 0] < 0].any()
    np.add.at(max_count, start + pos - pos[0], w["is_max_context"][pos])
  assert (max_count == 1).all()  # every context token is max-context in exactly one window
  spans = Q.doc_windows(len(doc_ids), window_len, 16)
  for t in range(len(doc_ids)):  # BERT's _check_is_max_context
    best, best_score = None, None
    for k, (start, length) in enumerate(spans):
      if start <= t < start + length:
        score = min(t - start, start + length - 1 - t) + 0.01 * length
        if best_score is None or score > best_score:
          best, best_score = k, score
    assert windows[best]["is_max_context"][len(prefix) - 1 + t - spans[best][0]]


def test_training_answer_edge_cases(wordpiece):
  context = CONTEXTS["fr"]
  start = context.index("Montréal")
  fixed = Q.qa_windows(_example("fr", "Montréal", start + 3), wordpiece, 40, 8, 8, True)
  w = next(w for w in fixed if w["start_positions"])
  assert _mapped(w, w["start_positions"], w["end_positions"]) == "Montréal"
  assert Q.qa_windows(_example("fr", "Toronto", 0), wordpiece, 40, 8, 8, True) == []
  empty = Q.qa_windows({"id": "e", "context": "", "question": "what"}, wordpiece, 40, 8, 8)
  assert len(empty) == 1 and (empty[0]["token_to_char"] < 0).all()
  assert best_spans(empty, np.zeros((1, 40)), np.zeros((1, 40))) == {"e": ""}


def test_locate_answer_at_its_start_else_nearest():
  ctx = "ab ab ab"
  assert locate_answer(ctx, "ab", 3) == 3  # at answer_start
  assert locate_answer(ctx, "ab", 4) == 3 and locate_answer(ctx, "ab", 5) == 6  # else the nearest occurrence
  assert locate_answer("ab  ab", "ab", 2) == 0  # the first on ties
  assert locate_answer("aaa", "aa", 2) == 1  # overlapping occurrences count
  assert locate_answer(ctx, "ab", -5) == 0 and locate_answer(ctx, "ab", 99) == 6
  assert locate_answer(ctx, "abc", 0) is None and locate_answer(ctx, "", 0) is None
  # qa_windows trains on the same span the readers count as found (xtreme_readers.answer_in_context).
  assert Q._answer_chars({"context": ctx, "answers": {"text": ["ab"], "answer_start": [5]}}) == (6, 8)


def test_unknown_tag_and_bad_settings_are_user_errors(wordpiece):
  with pytest.raises(DataError, match=r"^unknown tag\(s\) \['B-MISC'\]; allowed tags: O B-LOC$"):
    tagging_windows(["Paris", "IBM"], wordpiece, 16, 4, ["B-LOC", "B-MISC"], {"O": 0, "B-LOC": 1})
  with pytest.raises(ConfigError, match=r"context=16 must be in \[0, 14\)"):
    tagging_windows(["Paris"], wordpiece, 16, 16)
  with pytest.raises(ConfigError, match="must be positive"):
    Q.doc_windows(10, 0, 4)


# ----------------------------------------------------------------------------- decoding


@pytest.fixture(scope="module")
def fr_windows(wordpiece):
  example = {"id": "fr", "context": CONTEXTS["fr"], "question": "what question"}
  windows = Q.qa_windows(example, wordpiece, max_seq_len=40, doc_stride=8)
  assert len(windows) > 2
  return windows


def _logits(windows, low=-100.0):
  shape = (len(windows), len(windows[0]["input_ids"]))
  return np.full(shape, low), np.full(shape, low)


def _ctx(w):
  return np.flatnonzero(w["token_to_char"][:, 0] >= 0)


def test_best_spans_picks_highest_score(fr_windows):
  s_log, e_log = _logits(fr_windows)
  w, c = fr_windows[1], _ctx(fr_windows[1])
  a = int(next(p for p in c[2:] if w["is_max_context"][p]))
  s_log[:, 0] = e_log[:, 0] = 50.0  # CLS and query positions are never answers
  s_log[1, 1] = e_log[1, 1] = 40.0
  s_log[1, a + 3], e_log[1, a - 1] = 30.0, 30.0  # start > end: invalid
  s_log[1, a], e_log[1, a + 2] = 5.0, 6.0  # best valid pair
  s_log[1, a + 1], e_log[1, a + 1] = 4.0, 4.0  # runner-up (score 8 < 11)
  preds, nbest = best_spans(fr_windows, s_log, e_log, return_nbest=True)
  assert preds == {"fr": _mapped(w, a, a + 2)}
  top = nbest["fr"]
  assert top[0]["score"] == 11.0 and top[0]["text"] == preds["fr"]
  assert [c["score"] for c in top] == sorted((c["score"] for c in top), reverse=True)
  assert len({c["text"] for c in top}) == len(top) <= 20
  assert abs(sum(c["probability"] for c in top) - 1) < 1e-9
  for c in top:
    assert CONTEXTS["fr"][c["start_char"]:c["end_char"]] == c["text"] and c["text"] in CONTEXTS["fr"]


def test_best_spans_max_answer_len(fr_windows):
  s_log, e_log = _logits(fr_windows)
  w, c = fr_windows[0], _ctx(fr_windows[0])
  a = int(c[0])
  s_log[0, a], e_log[0, a + 5], e_log[0, a + 1], e_log[0, a] = 5.0, 9.0, 3.0, 1.0
  assert best_spans(fr_windows, s_log, e_log, max_answer_len=3)["fr"] == _mapped(w, a, a + 1)
  assert best_spans(fr_windows, s_log, e_log, max_answer_len=6)["fr"] == _mapped(w, a, a + 5)
  assert best_spans(fr_windows, s_log, e_log, max_answer_len=1)["fr"] == _mapped(w, a, a)


def test_best_spans_respects_max_context(fr_windows):
  w0, w1 = fr_windows[0], fr_windows[1]
  # A document token in both windows that is max-context only in window 1.
  p0 = int(next(p for p in _ctx(w0) if not w0["is_max_context"][p]
                and p - _ctx(w0)[0] >= 8))
  p1 = p0 - 8
  assert (w1["token_to_char"][p1] == w0["token_to_char"][p0]).all() and w1["is_max_context"][p1]
  s_log, e_log = _logits(fr_windows)
  s_log[0, p0], e_log[0, p0] = 20.0, 20.0
  s_log[1, p1], e_log[1, p1] = 5.0, 5.0
  preds, nbest = best_spans(fr_windows, s_log, e_log, return_nbest=True)
  assert preds["fr"] == _mapped(w1, p1, p1) and nbest["fr"][0]["score"] == 10.0
  s_log, e_log = _logits(fr_windows)
  s_log[:, 0] = 1.0  # with n_best=1 only CLS is a start candidate
  assert best_spans(fr_windows, s_log, e_log, n_best=1) == {"fr": ""}


def test_random_logits_give_context_substrings(vocab):
  windows = [w for lang in CONTEXTS for w in Q.qa_windows(
      {"id": lang, "context": CONTEXTS[lang], "question": "question"}, vocab, 32, 8)]
  rng = np.random.default_rng(0)
  s_log, e_log = rng.normal(size=(2, len(windows), 32))
  preds, nbest = best_spans(windows, s_log, e_log, n_best=5, max_answer_len=4, return_nbest=True)
  assert set(preds) == set(CONTEXTS)
  for lang, text in preds.items():
    assert text and text in CONTEXTS[lang]
    assert all(CONTEXTS[lang][c["start_char"]:c["end_char"]] == c["text"] for c in nbest[lang])
