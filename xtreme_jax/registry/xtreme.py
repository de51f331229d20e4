"""XTREME (Hu et al., 2020): its nine tasks, their languages per split, labels, scores and settings.

Languages follow the official `download/` layout of google-research/xtreme
(`scripts/download_data.sh`). UD v2.5 has no training treebank for th, tl,
yo and no dev set for kk, th, tl, yo, so those (language, split) pairs are
left out of udpos.
"""

from __future__ import annotations

from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec

XNLI_LABELS = ("contradiction", "entailment", "neutral")
PAWSX_LABELS = ("0", "1")
PANX_TAGS = ("B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER", "O")  # IOB2 over LOC / ORG / PER
UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
             "PUNCT", "SCONJ", "SYM", "VERB", "X")  # the 17 Universal Dependencies POS tags

XNLI_LANGS = tuple("ar bg de el en es fr hi ru sw th tr ur vi zh".split())
PAWSX_LANGS = tuple("de en es fr ja ko zh".split())
PANX_LANGS = tuple("af ar bg bn de el en es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr ms my nl pt "
                   "ru sw ta te th tl tr ur vi yo zh".split())
UDPOS_LANGS = tuple("af ar bg de el en es et eu fa fi fr he hi hu id it ja kk ko mr nl pt ru ta te th tl tr "
                    "ur vi yo zh".split())
XQUAD_LANGS = tuple("ar de el en es hi ru th tr vi zh".split())
MLQA_LANGS = tuple("ar de en es hi vi zh".split())
TYDIQA_LANGS = tuple("ar bn en fi id ko ru sw te".split())
BUCC_LANGS = tuple("de fr ru zh".split())
TATOEBA_LANGS = tuple(lg for lg in PANX_LANGS if lg not in ("en", "ms", "my", "yo"))
EN = ("en",)


def _but(langs: tuple, *absent: str) -> tuple:
  return tuple(lg for lg in langs if lg not in absent)


def _task(name: str, languages: dict, kind: str, **facts) -> TaskSpec:
  return TaskSpec(name=name, benchmark="xtreme", languages=languages, kind=kind, **facts)


XNLI = _task("xnli", {"train": EN, "dev": XNLI_LANGS, "test": XNLI_LANGS}, "pair_classification",
             labels=XNLI_LABELS, score="accuracy", category="classification", train=("xnli", "en", "train"),
             model="xnli", translate_train="xnli", translate_test=True, pseudo_test=True,
             tfds_builder="xtreme_xnli")
PAWSX = _task("pawsx", {"train": EN, "dev": PAWSX_LANGS, "test": PAWSX_LANGS}, "pair_classification",
              labels=PAWSX_LABELS, score="accuracy", category="classification", train=("pawsx", "en", "train"),
              model="pawsx", translate_train="pawsx", translate_test=True, tfds_builder="xtreme_pawsx")
UDPOS = _task("udpos", {"train": _but(UDPOS_LANGS, "th", "tl", "yo"), "dev": _but(UDPOS_LANGS, "kk", "th", "tl", "yo"),
                        "test": UDPOS_LANGS}, "tagging",
              labels=UPOS_TAGS, score="f1", category="structured_prediction", train=("udpos", "en", "train"),
              model="udpos", in_language=True, tfds_builder="xtreme_pos")
PANX = _task("panx", {s: PANX_LANGS for s in ("train", "dev", "test")}, "tagging",
             labels=PANX_TAGS, score="f1", category="structured_prediction", train=("panx", "en", "train"),
             model="panx", in_language=True, tfds_builder="wikiann")
XQUAD = _task("xquad", {"test": XQUAD_LANGS}, "span_qa", score="em_f1", category="qa",
              train=("squad", "en", "train"), model="squad", prediction_suffix="json", by_position=False,
              translate_train="squad", translate_test=True, pseudo_test=True, tfds_builder="xquad")
MLQA = _task("mlqa", {"dev": MLQA_LANGS, "test": MLQA_LANGS}, "span_qa", score="em_f1", category="qa",
             train=("squad", "en", "train"), model="squad", prediction_suffix="json", by_position=False,
             translate_train="squad", translate_test=True, tfds_builder="mlqa")
TYDIQA = _task("tydiqa", {"train": TYDIQA_LANGS, "test": TYDIQA_LANGS}, "span_qa", score="em_f1", category="qa",
               train=("tydiqa", "en", "train"), model="tydiqa", prediction_suffix="json", by_position=False,
               in_language=True, translate_train="tydiqa", tfds_builder="tydi_qa")
BUCC2018 = _task("bucc2018", {"dev": BUCC_LANGS, "test": BUCC_LANGS}, "bitext_mining", score="f1",
                 category="retrieval", by_position=False, tfds_builder="bucc", pivot="en")
TATOEBA = _task("tatoeba", {"test": TATOEBA_LANGS}, "similarity_search", score="accuracy", category="retrieval",
                tfds_builder="tatoeba", pivot="en")
SQUAD = _task("squad", {"train": EN, "dev": EN}, "span_qa", score="em_f1", prediction_suffix="json",
              by_position=False, tfds_builder="squad")  # read only: the training data of xquad and mlqa

XTREME = BenchmarkSpec(
    name="xtreme",
    tasks=(XNLI, PAWSX, UDPOS, PANX, XQUAD, MLQA, TYDIQA, BUCC2018, TATOEBA),
    extra_tasks=(SQUAD,),
    categories={"classification": ("xnli", "pawsx"), "structured_prediction": ("udpos", "panx"),
                "qa": ("xquad", "mlqa", "tydiqa"), "retrieval": ("bucc2018", "tatoeba")},
    scale=100.0,
    settings=("zero_shot", "in_language", "in_language_fewshot", "in_language_multi", "translate_train",
              "translate_train_all", "translate_test", "filter_teacher", "filter_student", "feature_based"))
