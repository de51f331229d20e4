"""The mBERT paper's tasks (Wu & Dredze 2019, "Beto, Bentz, Becas") as registry entries.

Each task trains on English and is evaluated zero-shot on every language;
model selection on English dev. Layouts are the datasets' own file names
under one data folder (`data/readers/mbert_data.py` reads them):

| task | languages | files |
|---|---|---|
| mldoc | de en es fr it ja ru zh | `mldoc/{language}.train.1000`, `.dev`, `.test` (the `mldoc` scripts' output; `language` the English name) |
| ner | en de es nl zh | CoNLL-2003 `conll2003/eng.{train,testa,testb}`, `conll2003/deu.*`; CoNLL-2002 `conll2002/esp.*`, `conll2002/ned.*` (testa = dev, testb = test); the Chinese set (Levow 2006, test only) `chinese_ner/test.txt` (our name) |
| pos | bg da de en es fa hu it nl pl pt ro sk sl sv | UD v1.4, `ud-treebanks-v1.4/UD_{Language}/{code}-ud-{split}.conllu` |
| parsing, parsing_gold_pos | the 31 UD v2.2 languages of the paper | `ud-treebanks-v2.2/{treebank}/{code}-ud-{split}.conllu`, every treebank of the language in `PARSING_TREEBANKS` read as one; `parsing_gold_pos` is the paper's second setting, gold UPOS tags given to the parser |

MLDoc trains on its 1,000-document set (Schwenk & Li's smallest, the one
the zero-shot comparisons use); the other sizes are other files of the
same layout. Parsing reads every treebank `PARSING_TREEBANKS` lists for a
language as one (the paper's data: Ahmad et al. 2019's treebanks,
concatenated per language; English is EWT alone), skipping those not on
disk; `MbertData(concatenate_treebanks=False)` reads the first alone.
"""

from __future__ import annotations

import dataclasses

from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec
from xtreme_jax.registry.xtreme import UPOS_TAGS

MLDOC_LABELS = ("CCAT", "ECAT", "GCAT", "MCAT")
NER_TYPES = ("LOC", "MISC", "ORG", "PER")
NER_TAGS = ("O",) + tuple(f"{p}-{t}" for t in NER_TYPES for p in "BI")
# The 37 universal relations of UD v2 (the coarse labels the parser predicts).
UD_RELATIONS = ("acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound", "conj",
                "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat", "goeswith", "iobj",
                "list", "mark", "nmod", "nsubj", "nummod", "obj", "obl", "orphan", "parataxis", "punct",
                "reparandum", "root", "vocative", "xcomp")

MLDOC_LANGUAGES = {"de": "german", "en": "english", "es": "spanish", "fr": "french", "it": "italian",
                   "ja": "japanese", "ru": "russian", "zh": "chinese"}
NER_FILES = {"en": "conll2003/eng", "de": "conll2003/deu", "es": "conll2002/esp", "nl": "conll2002/ned"}
NER_SPLITS = {"train": "train", "dev": "testa", "test": "testb"}
POS_LANGUAGES = {"bg": "Bulgarian", "da": "Danish", "de": "German", "en": "English", "es": "Spanish", "fa": "Persian",
                 "hu": "Hungarian", "it": "Italian", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
                 "ro": "Romanian", "sk": "Slovak", "sl": "Slovenian", "sv": "Swedish"}
# UD v2.2 treebanks of each language (folder, file prefix) for the parsing task, read as one (concatenated, in this
# order; `data/readers/mbert_data.py`): Ahmad et al. (2019)'s languages and treebanks (their Appendix; uclanlp/
# CrossLingualDepParser, examples/run_more/prepare_data.py), which the mBERT paper's authors concatenate per
# language (shijie-wu/crosslingual-nlp, example/surprising-mbert/README.md). The first names the language's files
# (`TaskSpec.files`); Spanish lists AnCora, before this list the project's one Spanish treebank, first (Ahmad et
# al. list GSD first: the order only orders the sentences).
PARSING_TREEBANKS = {
    "ar": (("UD_Arabic-PADT", "ar_padt"),), "bg": (("UD_Bulgarian-BTB", "bg_btb"),),
    "ca": (("UD_Catalan-AnCora", "ca_ancora"),),
    "cs": (("UD_Czech-PDT", "cs_pdt"), ("UD_Czech-CAC", "cs_cac"), ("UD_Czech-CLTT", "cs_cltt"),
           ("UD_Czech-FicTree", "cs_fictree")),
    "da": (("UD_Danish-DDT", "da_ddt"),), "de": (("UD_German-GSD", "de_gsd"),), "en": (("UD_English-EWT", "en_ewt"),),
    "es": (("UD_Spanish-AnCora", "es_ancora"), ("UD_Spanish-GSD", "es_gsd")),
    "et": (("UD_Estonian-EDT", "et_edt"),), "fi": (("UD_Finnish-TDT", "fi_tdt"),), "fr": (("UD_French-GSD", "fr_gsd"),),
    "he": (("UD_Hebrew-HTB", "he_htb"),), "hi": (("UD_Hindi-HDTB", "hi_hdtb"),), "hr": (("UD_Croatian-SET", "hr_set"),),
    "id": (("UD_Indonesian-GSD", "id_gsd"),), "it": (("UD_Italian-ISDT", "it_isdt"),),
    "ja": (("UD_Japanese-GSD", "ja_gsd"),), "ko": (("UD_Korean-GSD", "ko_gsd"), ("UD_Korean-Kaist", "ko_kaist")),
    "la": (("UD_Latin-PROIEL", "la_proiel"),), "lv": (("UD_Latvian-LVTB", "lv_lvtb"),),
    "nl": (("UD_Dutch-Alpino", "nl_alpino"), ("UD_Dutch-LassySmall", "nl_lassysmall")),
    "no": (("UD_Norwegian-Bokmaal", "no_bokmaal"), ("UD_Norwegian-Nynorsk", "no_nynorsk")),
    "pl": (("UD_Polish-LFG", "pl_lfg"), ("UD_Polish-SZ", "pl_sz")),
    "pt": (("UD_Portuguese-Bosque", "pt_bosque"), ("UD_Portuguese-GSD", "pt_gsd")),
    "ro": (("UD_Romanian-RRT", "ro_rrt"),), "ru": (("UD_Russian-SynTagRus", "ru_syntagrus"),),
    "sk": (("UD_Slovak-SNK", "sk_snk"),), "sl": (("UD_Slovenian-SSJ", "sl_ssj"), ("UD_Slovenian-SST", "sl_sst")),
    "sv": (("UD_Swedish-Talbanken", "sv_talbanken"),), "uk": (("UD_Ukrainian-IU", "uk_iu"),),
    "zh": (("UD_Chinese-GSD", "zh_gsd"),)}
PARSING_SPLITS = ("train", "dev", "test")


def parsing_files(language: str, split: str) -> tuple[str, ...]:
  """The files (under the data folder) of the treebanks of `language`'s `split`, in reading order."""
  return tuple(f"ud-treebanks-v2.2/{folder}/{prefix}-ud-{split}.conllu"
               for folder, prefix in PARSING_TREEBANKS[language])

def _every_split(langs: tuple) -> dict:
  return {"train": ("en",), "dev": ("en",), "test": langs}


MLDOC = TaskSpec(
    name="mldoc", benchmark="mbert", languages=_every_split(tuple(MLDOC_LANGUAGES)), kind="pair_classification",
    labels=MLDOC_LABELS, score="accuracy", category="classification", train=("mldoc", "en", "train"), model="mldoc",
    files={f"{split}:{lg}": f"mldoc/{name}.{'train.1000' if split == 'train' else split}"
           for lg, name in MLDOC_LANGUAGES.items() for split in ("train", "dev", "test")})
NER = TaskSpec(
    name="ner", benchmark="mbert", languages=_every_split(("en", "de", "es", "nl", "zh")), kind="tagging",
    labels=NER_TAGS, score="f1", category="structured_prediction", train=("ner", "en", "train"), model="ner",
    files={**{f"{split}:{lg}": f"{stem}.{suffix}" for lg, stem in NER_FILES.items()
              for split, suffix in NER_SPLITS.items()}, "test:zh": "chinese_ner/test.txt"})
POS = TaskSpec(
    name="pos", benchmark="mbert", languages=_every_split(tuple(POS_LANGUAGES)), kind="tagging", labels=UPOS_TAGS,
    score="accuracy", category="structured_prediction", train=("pos", "en", "train"), model="pos",
    files={f"{split}:{lg}": f"ud-treebanks-v1.4/UD_{name}/{lg}-ud-{split}.conllu"
           for lg, name in POS_LANGUAGES.items() for split in ("train", "dev", "test")})
PARSING = TaskSpec(
    name="parsing", benchmark="mbert", languages=_every_split(tuple(PARSING_TREEBANKS)), kind="parsing",
    labels=UD_RELATIONS, score="las", category="structured_prediction", train=("parsing", "en", "train"),
    model="parsing",
    files={f"{split}:{lg}": parsing_files(lg, split)[0] for lg in PARSING_TREEBANKS for split in PARSING_SPLITS})

# The paper's second parsing setting: gold UPOS tags embedded beside the encoder's states (same data).
PARSING_GOLD_POS = dataclasses.replace(PARSING, name="parsing_gold_pos", kind="parsing_gold_pos",
                                       train=("parsing_gold_pos", "en", "train"), model="parsing_gold_pos")

MBERT = BenchmarkSpec(
    name="mbert",
    tasks=(MLDOC, NER, POS, PARSING, PARSING_GOLD_POS),
    categories={"classification": ("mldoc",),
                "structured_prediction": ("ner", "pos", "parsing", "parsing_gold_pos")},
    settings=("zero_shot", "feature_based"),
    submission_file="{task}/test-{lg}.{suffix}")
