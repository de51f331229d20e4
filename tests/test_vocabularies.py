"""Parity of `xtreme_jax.data.vocab.vocabularies` with the Hugging Face tokenizers.

Tiny WordPiece / SentencePiece vocabularies are built from inline multilingual
text; every check compares our ids and strings with `transformers` tokenizers
loaded from the same files (offline).
"""

import json
import pickle
import random
import shutil
import string
import subprocess
import sys
import unicodedata

import huggingface_hub.constants
import numpy as np
import pytest
import seqio
import sentencepiece as spm
import tensorflow as tf
import transformers
from tokenizers import normalizers, pre_tokenizers

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.vocab import vocabularies as V
from xtreme_jax.data.vocab.seqio_vocabulary import as_seqio

TIER = "unit"  # conftest.py: this file's tier

SCRIPTS = {
    "latin": "Le garçon mangea une pomme à côté de l'église. Über den Wolken muss die "
             "Freiheit wohl grenzenlos sein! ¿Dónde está la estación de tren? Ça coûte "
             "trois euros, n'est-ce pas? Příliš žluťoučký kůň úpěl ďábelské ódy. Zażółć "
             "gęślą jaźń, powiedział nauczyciel.",
    "cyrillic": "Москва — столица России. Я люблю читать книги по вечерам. Сегодня очень "
                "холодно, но солнечно. Мы будем изучать языки вместе с друзьями. Київ є "
                "столицею України.",
    "arabic": "اللغة العربية جميلة جدا. ذهب الولد إلى المدرسة صباحا. هل تحب القهوة؟ يعيش "
              "الناس في المدينة الكبيرة منذ زمن طويل.",
    "devanagari": "हिन्दी भारत की एक प्रमुख भाषा है। मैं रोज़ सुबह चाय पीता हूँ। यह किताब "
                  "बहुत अच्छी है। हम सब मिलकर काम करेंगे।",
    "chinese": "我爱北京天安门。今天天气很好，我们去公园散步吧！中文分词是一个有趣的问题。"
               "学习语言需要很多时间和耐心。",
    "japanese": "私は毎朝コーヒーを飲みます。東京タワーはとても高いです。ひらがなとカタカナと"
                "漢字を使います。日本語の勉強は楽しいです。",
    "thai": "ภาษาไทยเป็นภาษาที่สวยงาม ฉันชอบกินข้าวผัด วันนี้อากาศดีมาก เราจะไปเที่ยวทะเลด้วยกัน",
}
# Control chars, odd spaces, punctuation runs, composed and decomposed accents,
# a 120-char word (> max_input_chars_per_word), apostrophes, unseen symbols.
EDGE = ("  Hello,\tworld!!\x00 foo\u200b\x07bar   naïve café\u00a0déjà-vu  (test) [x] "
        "\"quoted\" it's don't   e\u0301 " + "a" * 120 + " supercalifragilistic "
        "\ufffd\u2028end...?! 😀 Ωmega  ")
TEXTS = {**SCRIPTS, "edge": EDGE}
# No vocab.txt entry contains these, so the words holding them become [UNK].
UNSEEN_CHARS = set("üęчعह北カท")
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module", autouse=True)
def _offline():
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")
    mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    yield


def _words(text):
  text = normalizers.BertNormalizer(lowercase=False).normalize_str(text)
  return [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text)]


def _write_vocab(path, specials=BERT_SPECIALS):
  words = sorted(set(_words(" ".join(SCRIPTS.values()))))
  chars = {c for w in words for c in w} | set(string.ascii_letters + string.punctuation)
  pieces = set(words[::2]) | chars | {"##" + c for c in chars}
  for w in words[1::3]:  # split some words into a prefix and a ## suffix
    pieces |= {w[:len(w) // 2 + 1], "##" + w[len(w) // 2 + 1:]}
  pieces = sorted(p for p in pieces - {"##"} if not UNSEEN_CHARS & set(p))
  path.write_text("\n".join(specials + pieces) + "\n", encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("mbert")
  _write_vocab(d / "vocab.txt")
  return d


@pytest.fixture(scope="module")
def xlmr_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("xlmr")
  lines = [s for s in SCRIPTS.values() for _ in range(3)]
  # XLM-R's sentencepiece.bpe.model is in fact a unigram model with the default
  # special layout unk=0, <s>=1, </s>=2 and no pad piece.
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines), model_prefix=str(d / "sentencepiece.bpe"),
      vocab_size=400, hard_vocab_limit=False, character_coverage=1.0,
      model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
      minloglevel=2)
  return d


@pytest.fixture(scope="module")
def bert(bert_dir):
  return V.WordPieceVocabulary(str(bert_dir / "vocab.txt"))


@pytest.fixture(scope="module")
def xlmr(xlmr_dir):
  return V.XlmrSentencePieceVocabulary(str(xlmr_dir / "sentencepiece.bpe.model"))


@pytest.fixture(scope="module")
def xlmr_json(xlmr_dir, hf_xlmr, tmp_path_factory):
  """XLM-R's tokenizer as a `tokenizers` file (what transformers saves), no sentencepiece model."""
  d = tmp_path_factory.mktemp("xlmr_json")
  hf_xlmr["fast"].save_pretrained(str(d))
  (d / "sentencepiece.bpe.model").unlink(missing_ok=True)
  return V.load_vocabulary(str(d))


@pytest.fixture(scope="module")
def hf_bert(bert_dir):
  """{'slow': ..., 'fast': ...} BERT tokenizers (transformers 4.x and 5.x)."""
  fast = transformers.BertTokenizerFast.from_pretrained(
      str(bert_dir), do_lower_case=False, local_files_only=True)
  try:  # transformers 5: BertTokenizer is the fast one; the Python one is "legacy".
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as slow
  except ImportError:
    slow = transformers.BertTokenizer
  return {"slow": slow(str(bert_dir / "vocab.txt"), do_lower_case=False), "fast": fast}


@pytest.fixture(scope="module")
def hf_xlmr(xlmr_dir):
  toks = {"slow": transformers.XLMRobertaTokenizer, "fast": transformers.XLMRobertaTokenizerFast}
  return {k: cls.from_pretrained(str(xlmr_dir), local_files_only=True) for k, cls in toks.items()}


@pytest.mark.parametrize("name", TEXTS)
def test_wordpiece_matches_hf(bert, hf_bert, name):
  text = TEXTS[name]
  ids = bert.encode(text)
  assert ids == hf_bert["fast"].encode(text, add_special_tokens=False)
  # The Python HF tokenizer NFC-normalises first (so "e\u0301" -> "é"); the
  # `tokenizers` one (what AutoTokenizer returns) does not. We follow the latter.
  assert bert.encode(unicodedata.normalize("NFC", text)) == hf_bert["slow"].encode(
      text, add_special_tokens=False)
  assert bert.decode(ids) == hf_bert["fast"].decode(ids)
  with_specials, _ = bert.build_inputs(ids)
  assert bert.decode(with_specials) == hf_bert["fast"].decode(with_specials)


def test_wordpiece_vocab_covers_some_but_not_all(bert):
  ids = [i for t in SCRIPTS.values() for i in bert.encode(t)]
  assert 0.02 < ids.count(bert.unk_id) / len(ids) < 0.5
  assert bert.encode("a" * 101) == [bert.unk_id]
  assert bert.encode("a" * 100) != [bert.unk_id]


# Code points that Python's Unicode tables (3.11) and those of `tokenizers` class
# differently (punctuation, control, CJK), plus other edge cases.
TABLE_EDGES = (
    (0x61D, 0x61D), (0x9FD, 0x9FD), (0xA76, 0xA76), (0xC77, 0xC77), (0xC84, 0xC84), (0x1B7D, 0x1B7E),
    (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0x10EAD, 0x10EAD), (0x10F55, 0x10F59), (0x10F86, 0x10F89),
    (0x1144B, 0x1144F), (0x1145A, 0x1145D), (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1183B, 0x1183B),
    (0x11944, 0x11946), (0x119E2, 0x119E2), (0x11A3F, 0x11A46), (0x11A9A, 0x11AA2), (0x11C41, 0x11C45),
    (0x11C70, 0x11C71), (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x16E97, 0x16E9A),
    (0x16FE2, 0x16FE2), (0x1E95E, 0x1E95F), (0x890, 0x891), (0x8E2, 0x8E2), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x166D, 0x166D), (0x111C9, 0x111C9), (0x378, 0x378), (0x2B820, 0x2B820),
    (0x2B91F, 0x2B920), (0x3000, 0x3000), (0x2029, 0x2029), (0xE000, 0xE000), (0xAD, 0xAD), (0x85, 0x85))


def test_wordpiece_unicode_tables_match_tokenizers(bert, hf_bert):
  """Code points classified differently by Python's and `tokenizers`' tables."""
  cps = [cp for lo, hi in TABLE_EDGES for cp in range(lo, hi + 1)]
  text = " ".join(f"a{chr(cp)}b" for cp in cps)
  assert bert.encode(text) == hf_bert["fast"].encode(text, add_special_tokens=False)


@pytest.mark.parametrize("name", TEXTS)
def test_xlmr_matches_hf(xlmr, hf_xlmr, name):
  text = TEXTS[name]
  ids = xlmr.encode(text)
  for tok in hf_xlmr.values():
    assert ids == tok.encode(text, add_special_tokens=False)
    assert xlmr.decode(ids) == tok.decode(ids)
    with_specials, _ = xlmr.build_inputs(ids)
    assert xlmr.decode(with_specials) == tok.decode(with_specials)


@pytest.mark.parametrize("which", ["bert", "xlmr"])
def test_generated_text_has_no_special_or_unknown_tokens(request, which):
  """`detokenize` (generated text) equals Hugging Face's decode(skip_special_tokens=True) up to the first EOS."""
  vocab, hf = request.getfixturevalue(which), request.getfixturevalue(f"hf_{which}")["fast"]
  words = vocab.encode("When does the river rise")
  ids = [vocab.cls_id] + words[:3] + [vocab.unk_id] + words[3:] + [vocab.mask_id, vocab.eos_id, 7, vocab.pad_id]
  text = vocab.detokenize(ids)
  assert text == hf.decode(ids[:ids.index(vocab.eos_id)], skip_special_tokens=True)
  assert "<unk>" not in text and "[UNK]" not in text and "does the" in text.lower()


@pytest.mark.parametrize("text", ["\u0930\u093c", "a\u0301\u094d", "e\u00a0\u0941", "a\u00a0\u0301"])
def test_xlmr_follows_sentencepiece_normalisation(xlmr, xlmr_dir, text):
  """Where `tokenizers`' Precompiled normaliser departs from sentencepiece's
  (combining sequences of >= 6 UTF-8 bytes, which it does not compose, or
  drops), we follow sentencepiece: fairseq XLM-R and transformers 4 do too."""
  sp = spm.SentencePieceProcessor(model_file=str(xlmr_dir / "sentencepiece.bpe.model"))
  expected = [{0: 3, 1: 0, 2: 2}.get(i, i + 1) for i in sp.encode(text)]
  assert xlmr.encode(text) == expected
  assert xlmr.encode_tf(tf.constant(text)).numpy().tolist() == expected


def test_special_ids(bert, hf_bert, xlmr, hf_xlmr):
  fast = hf_bert["fast"]
  assert (bert.pad_id, bert.unk_id, bert.cls_id, bert.sep_id, bert.mask_id) == (0, 1, 2, 3, 4)
  assert (bert.bos_id, bert.eos_id) == (fast.cls_token_id, fast.sep_token_id)
  assert bert.vocab_size == len(fast) and bert.extra_ids == 0
  tok = hf_xlmr["fast"]
  assert (xlmr.cls_id, xlmr.pad_id, xlmr.sep_id, xlmr.unk_id) == (0, 1, 2, 3)
  assert (xlmr.bos_id, xlmr.eos_id) == (0, 2)
  assert xlmr.mask_id == tok.mask_token_id == xlmr.vocab_size - 1
  assert xlmr.vocab_size == len(tok) == xlmr._sp.get_piece_size() + 2
  assert tok.convert_ids_to_tokens(list(range(xlmr.vocab_size))) == xlmr._tokens


@pytest.mark.parametrize("pair", [False, True])
def test_build_inputs(bert, hf_bert, xlmr, hf_xlmr, pair):
  a, b = SCRIPTS["latin"][:60], SCRIPTS["cyrillic"][:50] if pair else None
  for vocab, toks in ((bert, hf_bert), (xlmr, hf_xlmr)):
    ids_a = vocab.encode(a)
    ids_b = vocab.encode(b) if pair else None
    input_ids, type_ids = vocab.build_inputs(ids_a, ids_b)
    for tok in toks.values():
      enc = tok(a, b, return_token_type_ids=True)
      assert (input_ids, type_ids) == (enc["input_ids"], enc["token_type_ids"])
      if hasattr(tok, "build_inputs_with_special_tokens"):
        assert input_ids == tok.build_inputs_with_special_tokens(ids_a, ids_b)
  assert xlmr.build_inputs([7], [8]) == ([0, 7, 2, 2, 8, 2], [0] * 6)
  assert bert.build_inputs([7], [8]) == ([2, 7, 3, 8, 3], [0, 0, 0, 1, 1])


@pytest.mark.parametrize("which", ["bert", "xlmr", "xlmr_json"])
def test_tf_matches_python(request, which):
  vocab = request.getfixturevalue(which)
  view = as_seqio(vocab)
  assert isinstance(view, seqio.Vocabulary) and as_seqio(view) is view and view == as_seqio(vocab)
  assert (view.vocab_size, view.eos_id, view.pad_id) == (vocab.vocab_size, vocab.eos_id, vocab.pad_id)
  rows = [vocab.encode(t) for t in TEXTS.values()]
  assert [view.encode(t) for t in TEXTS.values()] == rows
  assert [view.decode(ids) for ids in rows] == [vocab.decode(ids) for ids in rows]
  for text, ids in zip(TEXTS.values(), rows):
    assert vocab.encode_tf(tf.constant(text)).numpy().tolist() == ids
    assert vocab.decode_tf(tf.constant(ids, tf.int32)).numpy().decode() == vocab.decode(ids)
  # Batched, padded, with an EOS in the middle of a row; and inside tf.data.
  rows[0] = rows[0][:5] + [vocab.eos_id] + rows[0][5:]
  batch = np.full((len(rows), max(map(len, rows))), vocab.pad_id, np.int32)
  for r, ids in enumerate(rows):
    batch[r, :len(ids)] = ids
  decoded = [s.decode() for s in vocab.decode_tf(tf.constant(batch)).numpy()]
  assert decoded == [vocab.decode(ids) for ids in rows]
  ds = tf.data.Dataset.from_tensor_slices(list(TEXTS.values())).map(vocab.encode_tf)
  assert [x.tolist() for x in ds.as_numpy_iterator()] == [vocab.encode(t) for t in TEXTS.values()]
  assert vocab.decode_tf(tf.constant([], tf.int32)).numpy() == b""
  assert vocab.decode([rows[1][0], vocab.pad_id, rows[1][1]]) == vocab.decode(rows[1][:2])


def test_load_vocabulary(bert_dir, xlmr_dir, tmp_path):
  assert isinstance(V.load_vocabulary(str(bert_dir)), V.WordPieceVocabulary)
  assert isinstance(V.load_vocabulary(str(bert_dir / "vocab.txt")), V.WordPieceVocabulary)
  assert isinstance(V.load_vocabulary(str(xlmr_dir)), V.XlmrSentencePieceVocabulary)
  model = str(xlmr_dir / "sentencepiece.bpe.model")
  assert V.load_vocabulary(model) == V.XlmrSentencePieceVocabulary(model)
  assert V.load_vocabulary(str(bert_dir)) != V.load_vocabulary(model)
  with pytest.raises(errors.DataError, match="vocab.txt.*sentencepiece.bpe.model") as e:
    V.load_vocabulary(str(tmp_path))  # a folder without a vocabulary
  assert str(tmp_path) in str(e.value) and isinstance(e.value, ValueError)
  with pytest.raises(errors.MissingInputError, match="weights.bin"):
    V.load_vocabulary(str(tmp_path / "weights.bin"))


def test_missing_special_token(tmp_path):
  path = _write_vocab(tmp_path / "vocab.txt", specials=BERT_SPECIALS[:4])
  with pytest.raises(errors.DataError, match=r"vocab\.txt.*\[MASK\]"):
    V.WordPieceVocabulary(str(path))


def test_pickle_roundtrip(bert, xlmr, xlmr_json):
  for vocab in (bert, xlmr, xlmr_json):
    clone = pickle.loads(pickle.dumps(vocab))
    assert clone == vocab and clone.encode(SCRIPTS["thai"]) == vocab.encode(SCRIPTS["thai"])


# ----------------------------------------------------------------------------- checkpoint settings
# 200 sentences from per-script word lists, each mixing two scripts, with
# punctuation and control / format characters inside words (not between a
# character and its combining marks). Latin words carry composed and decomposed
# accents.
WORDS = {
    "latin": "Le garçon mangea une pomme église Über Wolken Freiheit Dónde está estación Ça coûte "
             "naïve cafe\u0301 déjà nai\u0308ve man\u0303ana Příliš žluťoučký kůň Zażółć gęślą jaźń Tiếng "
             "Việt Straße Ærø façade Héllo WORLD ÉCOLE Œuvre İstanbul Crème".split(),
    "cyrillic": "Москва столица России Я люблю читать книги Київ України Ёлка ПРИВЕТ".split(),
    "greek": "Καλημέρα κόσμε Ελλάδα γλώσσα Αθήνα ΟΔΥΣΣΕΥΣ ψυχή ἀρχή".split(),
    "arabic": "اللغة العربية جميلة ذهب الولد إلى المدرسة القهوة؟ مُحَمَّد".split(),
    "hebrew": "שלום עולם ירושלים ספר".split(),
    "devanagari": "हिन्दी भारत प्रमुख भाषा है। रोज़ सुबह क़िला".split(),
    "tamil": "வணக்கம் தமிழ் நாடு".split(),
    "thai": "ภาษาไทย สวยงาม ฉันชอบกินข้าวผัด อากาศดีมาก".split(),
    "han": "我爱北京天安门。 今天天气很好， 中文分词 學習語言".split(),
    "kana": "私は毎朝コーヒーを飲みます。 ひらがな カタカナ 東京タワー ｶﾀｶﾅ".split(),
    "hangul": "안녕하세요 세계 한국어 서울 대한민국".split(),
    "georgian": "გამარჯობა საქართველო".split(),
    "armenian": "Բարեւ Հայաստան".split(),
    "emoji": "😀 👍🏽 🇫🇷 ❤️ 👨‍👩‍👧 ✨ ①②".split(),
}
CONTROLS = ["\x00", "\x07", "\x1b", "\u200b", "\u200d", "\u00ad", "\ufeff", "\ufffd", "\t", "\n", "\r\n",
            "\u00a0", "\u3000", "\u2028"]
PUNCT = [",", ".", "!", "?", "...", "-", "(", ")", "«", "»", "\"", "'", "n't", "1998", "3,14", "%", "€"]
COMBINING = {c for words in WORDS.values() for c in "".join(words) if unicodedata.category(c).startswith("M")}
# No WordPiece vocabulary below holds these, so the words with them become [UNK].
UNSEEN_WP = set("Ёעჯ한ひ👍")


def _sentences(n=200, seed=0):
  rng = random.Random(seed)
  scripts = list(WORDS)
  out = []
  for k in range(n):
    pool = WORDS[scripts[k % len(scripts)]] + WORDS[rng.choice(scripts)]
    words = []
    for _ in range(rng.randint(4, 10)):
      word, r = rng.choice(pool), rng.random()
      if r < 0.2:  # between two characters, not inside a character + combining mark cluster
        i = rng.choice([i for i in range(len(word) + 1) if word[i:i + 1] not in COMBINING])
        word = word[:i] + rng.choice(CONTROLS) + word[i:]
      elif r < 0.35:
        word += rng.choice(PUNCT)
      words.append(word)
    out.append(rng.choice([" ", "  "]).join(words) + rng.choice(["", ".", " !", "?"]))
  return out


SENTENCES = _sentences()


def _wordpiece_pieces(lowercase):
  """Whole words, word halves and every character (alone and as ##) of WORDS."""
  text = normalizers.BertNormalizer(lowercase=lowercase).normalize_str(" ".join(sum(WORDS.values(), [])))
  words = sorted({w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text)})
  chars = {c for w in words for c in w} | set(string.ascii_lowercase + string.punctuation)
  pieces = set(words[::2]) | chars | {"##" + c for c in chars} | {"hello", "world"}
  for w in words[1::3]:
    pieces |= {w[:len(w) // 2 + 1], "##" + w[len(w) // 2 + 1:]}
  return sorted(p for p in pieces - {"##"} if not UNSEEN_WP & set(p))


@pytest.fixture(scope="module")
def wordpiece_checkpoints(tmp_path_factory):
  """{case: (vocab.txt + tokenizer_config.json dir, tokenizer.json dir saved by transformers, HF tokenizer)}."""
  out = {}
  for case, lower in (("cased", False), ("uncased", True)):
    plain = tmp_path_factory.mktemp(f"{case}_plain")
    (plain / "vocab.txt").write_text("\n".join(BERT_SPECIALS + _wordpiece_pieces(lower)) + "\n", encoding="utf-8")
    (plain / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": lower, "tokenizer_class": "BertTokenizer"}), encoding="utf-8")
    # transformers 5 ignores BertTokenizerFast(vocab_file=...): load the folder instead.
    hf = transformers.BertTokenizerFast.from_pretrained(str(plain), local_files_only=True)
    saved = tmp_path_factory.mktemp(f"{case}_saved")
    hf.save_pretrained(str(saved))
    (saved / "vocab.txt").unlink(missing_ok=True)  # transformers 4 writes it too; test tokenizer.json alone
    out[case] = (plain, saved, hf)
  return out


@pytest.fixture(scope="module")
def xlmr_sample(tmp_path_factory):
  """(sample_spm.model as an XLM-R checkpoint, the tokenizer.json transformers saves for it, HF tokenizer)."""
  d = tmp_path_factory.mktemp("xlmr_sample")
  shutil.copy(paths.sample_vocab(), d / "sentencepiece.bpe.model")
  hf = transformers.XLMRobertaTokenizerFast.from_pretrained(str(d), local_files_only=True)
  saved = tmp_path_factory.mktemp("xlmr_sample_saved")
  hf.save_pretrained(str(saved))
  (saved / "sentencepiece.bpe.model").unlink(missing_ok=True)
  return d, saved, hf


def test_sentences_cover_scripts_and_controls():
  assert len(SENTENCES) == 200 and len(set(SENTENCES)) > 190 and len(WORDS) >= 12
  for words in WORDS.values():
    assert any(w in s for s in SENTENCES for w in words)
  for ch in ("\x00", "\x07", "\u200b", "\u00ad", "e\u0301", "😀"):
    assert any(ch in s for s in SENTENCES)


def _assert_matches_hf(vocab, hf, sentences):
  expected = hf(sentences, add_special_tokens=False)["input_ids"]
  assert [vocab.encode(s) for s in sentences] == expected
  assert [vocab.decode(ids) for ids in expected[:50]] == hf.batch_decode(expected[:50])
  for a, b in zip(sentences[:20], sentences[20:40]):
    enc = hf(a, b, return_token_type_ids=True)
    assert vocab.build_inputs(vocab.encode(a), vocab.encode(b)) == (enc["input_ids"], enc["token_type_ids"])
    assert vocab.build_inputs(vocab.encode(a))[0] == hf(a)["input_ids"]
  return expected


@pytest.mark.parametrize("case", ["cased", "uncased"])
@pytest.mark.parametrize("layout", ["vocab_txt", "tokenizer_json"])
def test_200_sentences_wordpiece_match_hf_fast(wordpiece_checkpoints, case, layout):
  plain, saved, hf = wordpiece_checkpoints[case]
  vocab = V.load_vocabulary(str(plain if layout == "vocab_txt" else saved))
  assert type(vocab) is (V.WordPieceVocabulary if layout == "vocab_txt" else V.TokenizerVocabulary)
  assert (vocab.vocab_size, vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
      len(hf), hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id, hf.mask_token_id)
  ids = [i for row in _assert_matches_hf(vocab, hf, SENTENCES) for i in row]
  assert 0.01 < ids.count(vocab.unk_id) / len(ids) < 0.3


@pytest.mark.parametrize("layout", ["sentencepiece", "tokenizer_json"])
def test_200_sentences_xlmr_match_hf_fast(xlmr_sample, layout):
  spm_dir, saved, hf = xlmr_sample
  vocab = V.load_vocabulary(str(spm_dir if layout == "sentencepiece" else saved))
  assert type(vocab) is (V.XlmrSentencePieceVocabulary if layout == "sentencepiece" else V.TokenizerVocabulary)
  assert (vocab.vocab_size, vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
      len(hf), hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id, hf.mask_token_id)
  _assert_matches_hf(vocab, hf, SENTENCES)


def test_uncased_checkpoint_lowercases_and_strips_accents(wordpiece_checkpoints, tmp_path):
  """tokenizer_config.json's do_lower_case=true is honoured (the vocab holds only lower-case pieces)."""
  plain, saved, hf = wordpiece_checkpoints["uncased"]
  text = "Héllo WORLD"
  expected = hf.encode(text, add_special_tokens=False)
  assert hf.convert_ids_to_tokens(expected) == ["hello", "world"]
  for path in (plain, saved, plain / "vocab.txt", saved / "tokenizer.json"):
    assert V.load_vocabulary(str(path)).encode(text) == expected
  bare = tmp_path / "vocab.txt"  # no tokenizer_config.json next to it: cased, unless told
  shutil.copy(plain / "vocab.txt", bare)
  assert V.load_vocabulary(str(bare)).encode(text) == [hf.unk_token_id] * 2
  assert V.load_vocabulary(str(bare), do_lower_case=True).encode(text) == expected
  # Keyword settings override the checkpoint's, for tokenizer.json too.
  cased_dir, cased_saved, cased_hf = wordpiece_checkpoints["cased"]
  lowered = V.load_vocabulary(str(cased_saved), do_lower_case=True)
  assert lowered.encode("ÉCOLE Straße") == V.load_vocabulary(str(cased_dir)).encode("ecole straße")
  assert lowered != V.load_vocabulary(str(cased_saved))


def test_settings_and_special_tokens_from_config_files(tmp_path):
  pieces = ["hello", "world", "##s", "a", "b", "é", "e", "[", "]", "MASK"]
  (tmp_path / "vocab.txt").write_text("\n".join(["[???]", "[PAS]", "[END]", "[BEG]", "[MSK]"] + pieces) + "\n",
                                      encoding="utf-8")
  (tmp_path / "tokenizer_config.json").write_text(json.dumps({
      "do_lower_case": False, "strip_accents": True, "tokenize_chinese_chars": False, "unk_token": "[???]",
      "pad_token": "[PAS]", "cls_token": "[BEG]", "sep_token": "[END]", "mask_token": "[MASK]"}))
  (tmp_path / "special_tokens_map.json").write_text(json.dumps({  # wins over tokenizer_config.json
      "mask_token": {"content": "[MSK]", "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False}}))
  hf = transformers.BertTokenizerFast.from_pretrained(str(tmp_path), local_files_only=True)
  vocab = V.load_vocabulary(str(tmp_path))
  assert (vocab.unk_id, vocab.pad_id, vocab.sep_id, vocab.cls_id, vocab.mask_id) == (0, 1, 2, 3, 4) == (
      hf.unk_token_id, hf.pad_token_id, hf.sep_token_id, hf.cls_token_id, hf.mask_token_id)
  texts = ["hello worlds é", "HELLO 北京 a", "a [MASK] b"]
  _assert_matches_hf(vocab, hf, texts)
  assert vocab.encode("é [MSK]") == [11, 12, 0, 13]  # "e": accents stripped; a literal special is text
  assert vocab.build_inputs([5], [6]) == ([3, 5, 2, 6, 2], [0, 0, 0, 1, 1])
  (tmp_path / "special_tokens_map.json").unlink()
  with pytest.raises(errors.DataError, match=r"vocab\.txt.*mask token '\[MASK\]'"):
    V.load_vocabulary(str(tmp_path))


def test_broken_checkpoint_files_are_user_errors(tmp_path):
  (tmp_path / "vocab.txt").write_text("\n".join(BERT_SPECIALS) + "\n", encoding="utf-8")
  (tmp_path / "tokenizer_config.json").write_text('{\n  "do_lower_case": tru\n}')
  with pytest.raises(errors.DataError, match=r"tokenizer_config\.json:2"):
    V.load_vocabulary(str(tmp_path))
  (tmp_path / "tokenizer_config.json").unlink()
  (tmp_path / "tokenizer.json").write_text('{"model": {"type": "WordPiece"}}')
  with pytest.raises(errors.DataError, match=r"tokenizer\.json: not a Hugging Face tokenizers file"):
    V.load_vocabulary(str(tmp_path))
  (tmp_path / "sentencepiece.bpe.model").write_bytes(b"not a model")
  with pytest.raises(errors.DataError, match=r"sentencepiece\.bpe\.model: not a sentencepiece model"):
    V.load_vocabulary(str(tmp_path))


def test_wordpiece_and_sentencepiece_vocabularies_do_not_import_tensorflow(wordpiece_checkpoints):
  """A run that builds no tf.data pipeline loads and uses its vocabulary without TensorFlow (or seqio)."""
  plain, saved, _ = wordpiece_checkpoints["uncased"]
  code = ("import sys\n"
          "import xtreme_jax.data.vocab.vocabularies as v\n"
          "assert all(v.load_vocabulary(p).encode('hello') for p in sys.argv[1:])\n"
          "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'tensorflow_text', 'seqio'})\n"
          "assert not loaded, loaded\n")
  subprocess.run([sys.executable, "-c", code, paths.sample_vocab(), str(plain), str(saved)], check=True)


def test_settings_a_vocabulary_does_not_take_are_config_errors(tmp_path):
  model = paths.sample_vocab()
  with pytest.raises(errors.ConfigError, match=rf"^{model}: XlmrSentencePieceVocabulary does not take the tokenizer "
                                               r"setting\(s\) \['do_lower_case'\]; it takes none$"):
    V.load_vocabulary(model, do_lower_case=True)
  (tmp_path / "vocab.txt").write_text("\n".join(BERT_SPECIALS) + "\n", encoding="utf-8")
  with pytest.raises(errors.ConfigError, match=r"vocab\.txt: WordPieceVocabulary does not take the tokenizer "
                                               r"setting\(s\) \['lowercase'\]; valid settings: \['do_lower_case'"):
    V.load_vocabulary(str(tmp_path), lowercase=True)


def test_vocabulary_files_are_read_through_fs(tmp_path, monkeypatch):
  """A URL (gs://...) vocabulary is read through `xtreme_jax.fs` (here: a bucket mapped onto a local folder)."""
  from xtreme_jax import fs
  (tmp_path / "vocab.txt").write_text("\n".join(BERT_SPECIALS + ["hello"]) + "\n", encoding="utf-8")
  (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": true}')
  shutil.copy(paths.sample_vocab(), tmp_path / "spm.model")
  local = lambda url: url.replace("gs://bucket", str(tmp_path))  # noqa: E731
  for name in ("exists", "isdir", "read_bytes"):
    monkeypatch.setattr(fs, name, lambda url, f=getattr(fs, name): f(local(url)))
  assert V.load_vocabulary("gs://bucket").encode("HELLO") == [5]  # tokenizer_config.json's lower-casing applies
  assert V.load_vocabulary("gs://bucket/spm.model") == V.load_vocabulary(paths.sample_vocab())
