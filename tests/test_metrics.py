"""Metrics on hand-computed examples (offline, plain Python); the scorer is in test_scorer.py."""

import pytest

from xtreme_jax.evaluation import metrics as m

TIER = "unit"  # conftest.py: this file's tier

approx = pytest.approx


def test_accuracy():
  assert m.accuracy(["a", "b", "c"], ["a", "b", "d"]) == approx(200 / 3)
  with pytest.raises(ValueError, match="2 predicted items but 3 gold"):
    m.accuracy(["a", "b"], ["a", "b", "c"])


# --- sequence labelling -----------------------------------------------------

def test_entity_f1_iob2_with_i_after_o_and_type_change():
  gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "I-LOC", "I-LOC"], ["I-PER", "I-ORG"]]
  # I-LOC after O opens LOC(3,4); I-PER then I-ORG are two chunks (second sentence starts at 6).
  assert m.get_chunks(pred) == [("PER", 0, 1), ("LOC", 3, 4), ("PER", 6, 6), ("ORG", 7, 7)]
  # 2 of 4 predicted chunks are among the 3 gold ones: P=1/2, R=2/3, F1=4/7.
  assert m.entity_f1(pred, gold) == approx({"precision": 50.0, "recall": 200 / 3, "f1": 400 / 7})


# Expected chunks written by hand from seqeval 0.0.12's get_entities / end_of_chunk / start_of_chunk:
# prefix = tag[0], type = tag.split('-')[-1]; the scan starts with prev ("O", type "") and every
# sentence (and the sequence) ends with an "O" (type "O").
@pytest.mark.parametrize("tags, chunks", [
    (["B-"], [("", 0, 0)]),  # a B with the empty type (seqeval >= 1.0 would say "_")
    (["X-PER", "I-PER", "O"], [("PER", 0, 1)]),  # X opens by the type change O -> PER; I-PER continues
    (["B-PER", "X-PER", "b-per"], [("PER", 0, 1), ("per", 2, 2)]),  # X continues; "per" != "PER" closes
    (["b-per", "b-per", "B-PER"], [("per", 0, 1), ("PER", 2, 2)]),  # lower case: boundaries by type only
    (["O", "I-PER", "I-PER"], [("PER", 1, 2)]),  # I after O opens a chunk
    (["B-PER", "I-LOC"], [("PER", 0, 0), ("LOC", 1, 1)]),  # a type change closes and opens
    (["PER", "PER", "O"], [("PER", 0, 1)]),  # a bare type: prefix P, type PER
    (["B-X-PER", "I-Y-PER"], [("PER", 0, 1)]),  # the type is after the LAST "-"
    (["I-PER", "B-PER", "B"], [("PER", 0, 0), ("PER", 1, 1), ("B", 2, 2)]),
    (["E-PER", "I-PER", "S-LOC", "I-LOC"], [("PER", 0, 0), ("PER", 1, 1), ("LOC", 2, 2), ("LOC", 3, 3)]),
    ([".", "I-PER", "."], [("PER", 1, 1)]),  # "." ends nothing, opens nothing
])
def test_ner_chunking_is_seqeval_0_0_x(tags, chunks):
  assert m.get_chunks([tags]) == chunks


def test_entity_f1_of_malformed_tags_as_the_leaderboard():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG"]]
  pred = [["PER", "X-PER", "O", "B-"], ["b-org", "I-ORG"]]
  # Gold: PER(0,1) LOC(3,3) ORG(5,6). Pred: PER(0,1) (PER opens, X-PER continues, O closes), ""(3,3),
  # org(5,5), ORG(6,6) (org -> ORG is a type change). 1 correct: P=1/4, R=1/3, F1=2/7.
  assert m.entity_f1(pred, gold) == approx({"precision": 25.0, "recall": 100 / 3, "f1": 200 / 7})
  assert m.entity_f1([["PER"]], [["B-PER"]])["f1"] == 100.0


def test_legacy_chunking_of_upos_tags():
  tags = ["NOUN", "NOUN", "VERB", "SCONJ", "SCONJ", "SYM", "INTJ", "INTJ"]
  # Runs of identical tags are one chunk; S-initial tags (SCONJ, SYM) are one chunk per token.
  assert m.get_chunks([tags]) == [
      ("NOUN", 0, 1), ("VERB", 2, 2), ("SCONJ", 3, 3), ("SCONJ", 4, 4), ("SYM", 5, 5), ("INTJ", 6, 7)]
  # Sentences do not merge (an "O" separates them, offsets are global).
  assert m.get_chunks([["NOUN"], ["NOUN"]]) == [("NOUN", 0, 0), ("NOUN", 2, 2)]
  # An E-initial tag closes a chunk without the next tag opening one: seqeval emits overlapping chunks.
  assert m.get_chunks([["NOUN", "E-NOUN", "NOUN"]]) == [("NOUN", 0, 1), ("NOUN", 0, 2)]


def test_pos_leaderboard_f1_differs_from_token_accuracy():
  gold = [["DET", "NOUN", "NOUN", "VERB", "SCONJ", "SCONJ", "SYM"], ["NOUN", "NOUN"]]
  pred = [["DET", "NOUN", "ADJ", "VERB", "SCONJ", "SCONJ", "SYM"], ["NOUN", "VERB"]]
  # Tokens: 7 of 9 right. Gold chunks: DET NOUN(1-2) VERB SCONJ SCONJ SYM | NOUN(8-9) = 7;
  # predicted: DET NOUN ADJ VERB SCONJ SCONJ SYM | NOUN VERB = 9; shared: DET VERB SCONJ SCONJ SYM = 5.
  assert m.pos_token_accuracy(pred, gold) == approx(700 / 9)
  p, r = 5 / 9, 5 / 7
  assert m.pos_leaderboard_f1(pred, gold) == approx(
      {"precision": 100 * p, "recall": 100 * r, "f1": 100 * 2 * p * r / (p + r)})
  assert m.pos_leaderboard_f1(gold, gold)["f1"] == 100.0
  with pytest.raises(ValueError, match="sentence 2: 1 predicted tags but 2 gold"):
    m.pos_leaderboard_f1([gold[0], ["NOUN"]], gold)


# --- QA -----------------------------------------------------------------------

def test_squad_normalisation():
  assert m.normalize_answer("The Eiffel-Tower, an  icon!") == "eiffeltower icon"
  assert m.normalize_answer("Theater of the Absurd") == "theater of absurd"
  assert m.normalize_answer("«Paris»") == "«paris»"  # only ASCII punctuation is dropped
  assert m.qa_exact_match("the Eiffel Tower.", "Eiffel tower")
  assert m.qa_f1("the cat sat", "a cat sat down") == approx(0.8)  # P=1, R=2/3
  assert m.qa_f1("dog", "cat") == 0


@pytest.mark.parametrize("lang, text, expected", [
    ("en", "«Paris»", "paris"),
    ("es", "El Niño y la niña", "niño y niña"),
    ("de", "Der Bundestag", "bundestag"),
    ("vi", "Thủ đô của Pháp", "thủ đô pháp"),
    ("hi", "एक किताब।", "एक किताब"),
    ("zh", "北京大学 2008年！", "北 京 大 学 2008 年"),
    ("ar", "الكتاب", "كتاب"),
    ("ar", "الاتحاد الأوروبي", "اتحاد أوروبي"),
    ("ar", "مال", "م"),  # "ال" is removed inside words too, as MLQA's regex does
])
def test_mlqa_normalisation(lang, text, expected):
  assert m.normalize_answer(text, lang) == expected


def test_mlqa_chinese_and_arabic_scores():
  assert m.qa_f1("北京大学", "北京", "zh") == approx(2 / 3)  # per-character tokens: P=1/2, R=1
  assert m.qa_f1("北京大学", "北京") == 0  # SQuAD: one whitespace token each
  assert m.qa_exact_match("الكتاب", "كتاب", "ar") and not m.qa_exact_match("الكتاب", "كتاب")
  with pytest.raises(ValueError, match="unknown MLQA language"):
    m.normalize_answer("x", "fr")


def _squad(qas):
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [
      {"id": qid, "question": "q", "answers": [{"text": a, "answer_start": 0} for a in answers]}
      for qid, answers in qas]}]}]}


QA_DATA = _squad([("q1", ["The Eiffel Tower", "Eiffel Tower"]), ("q2", ["the"]), ("q3", ["Paris"]),
                  ("q4", ["Paris"])])


def test_squad_em_f1_empty_prediction_and_missing_id():
  preds = {"q1": "eiffel tower", "q2": "", "q3": "", "extra": "ignored"}
  # q1 right; q2 "" equals gold "the" once normalised (EM 1) but has no token (F1 0);
  # q3 empty (0, 0); q4 missing (0, 0).
  assert m.squad_em_f1(QA_DATA, preds) == approx({"exact_match": 50.0, "f1": 25.0, "total": 4, "missing": 1})
  assert m.squad_em_f1(QA_DATA["data"], {})["missing"] == 4


def test_mlqa_em_f1():
  data = _squad([("z1", ["北京大学"]), ("z2", ["二〇〇八年"])])
  result = m.mlqa_em_f1(data, {"z1": "北京", "z2": "二〇〇八年。"}, "zh")
  assert result == approx({"exact_match": 50.0, "f1": 100 * (2 / 3 + 1) / 2, "total": 2, "missing": 0})


# --- retrieval ------------------------------------------------------------------

def test_bucc_f1():
  gold = [("de-1", "en-1"), ("de-2", "en-2"), ("de-3", "en-3"), ("de-4", "en-4")]
  pred = [("de-1", "en-1"), ("de-2", "en-2"), ("de-5", "en-5")]
  assert m.bucc_f1(pred, gold) == approx({"precision": 200 / 3, "recall": 50.0, "f1": 400 / 7})
  assert m.bucc_f1([("x", "y")], gold) == {"precision": 0, "recall": 0, "f1": 0}


def test_bucc_best_threshold():
  cands = {("a1", "b1"): 0.9, ("a2", "b2"): 0.8, ("a3", "b3"): 0.7, ("a4", "b4"): 0.6, ("a5", "b5"): 0.5}
  gold = [("a1", "b1"), ("a3", "b3"), ("a6", "b6")]
  # Prefix F1: 1/2, 2/5, 2/3 (best, after 0.7), 4/7, 1/2 -> midpoint (0.7 + 0.6) / 2.
  threshold = m.bucc_best_threshold(cands, gold)
  assert threshold == approx(0.65)
  extracted = m.apply_threshold(cands, threshold)
  assert extracted == [("a1", "b1"), ("a2", "b2"), ("a3", "b3")]
  assert m.bucc_f1(extracted, gold)["f1"] == approx(200 / 3)
  # Best cut after the last candidate: its own score; no gold candidate at all: 0.
  assert m.bucc_best_threshold({("a", "b"): 0.9, ("c", "d"): 0.5}, [("c", "d")]) == 0.5
  assert m.bucc_best_threshold({("a", "b"): 0.9}, [("c", "d")]) == 0


def test_tatoeba_accuracy():
  assert m.tatoeba_accuracy([1, 2, 3, 4], [1, 2, 0, 4]) == 75.0


# --- aggregation ---------------------------------------------------------------

def test_aggregation_and_transfer_gap():
  assert m.task_score("xnli", {"en": 80.0, "de": 70.0, "fr": 60.0}) == approx(70.0)
  qa = {"en": {"exact_match": 60.0, "f1": 80.0}, "de": {"exact_match": 40.0, "f1": 60.0}}
  assert m.task_score("mlqa", qa) == approx(60.0)
  assert m.language_score("mlqa", qa["de"]) == 50.0
  assert m.language_score("udpos", {"f1": 70.0, "accuracy": 90.0}) == 70.0
  assert m.transfer_gap({"en": 80.0, "de": 70.0, "fr": 60.0}) == approx(15.0)
  assert m.category_scores({"xnli": 70.0, "pawsx": 80.0, "udpos": 60.0}) == {"classification": 75.0}
  nine = {task: 10.0 * (i + 1) for i, task in enumerate(m.TASK_METRIC)}
  assert m.overall(nine) == approx(50.0)
  assert m.overall({k: v for k, v in nine.items() if k != "tatoeba"}) is None
  assert set(m.TASK_LANGUAGES) == set(m.TASK_METRIC) == {t for ts in m.CATEGORIES.values() for t in ts}
  assert len(m.TASK_LANGUAGES["panx"]) == 40 and len(m.TASK_LANGUAGES["udpos"]) == 33
  assert len(m.TASK_LANGUAGES["tatoeba"]) == 36
