"""XGLUE (Liang et al., 2020): its nine understanding and two generation tasks over the official
`xglue_full_dataset` layout.

Tasks and test languages are listed in the order of the official scorer
(`evaluation/xglue_evaluate.py` in microsoft/XGLUE, `task2lg`), which is the
order its per-task averages are summed in. Task names are the official ones
(folder names of the dataset and of a submission). `files` are the layout's
paths under the dataset root, `{lg}` / `{split}` filled in (`*`: any split).
The generation tasks QG (passage -> question) and NTG (news body -> title)
are line-aligned pairs of files, `{side}` = `src` / `tgt` (`TaskSpec.sides`):
`QG/xglue.qg.{lg}.src.{split}` holds the inputs, `.tgt.` the references (the
release hides the test targets); their score is the scorer's lowercased
sacreBLEU / 100 (`evaluation/bleu.py`).

Training data: the release ships English only. Every language of an
understanding task may have a training split here (the generation tasks:
English only): the pivot-language and multi-language settings
(the XGLUE paper's Tables 5-8, trained on machine-translated training data)
read a language's training data from the English file's path with that
language's code (`NC/xglue.nc.de.train`, `XNLI/multinli.train.de.tsv`,
`PAWSX/de/train.tsv`, `MLQA/squad1.1/train-v1.1.de.json`, ...); whether it
is there is looked up on disk.
"""

from __future__ import annotations

from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec
from xtreme_jax.registry.xtreme import PAWSX_LABELS, UPOS_TAGS, XNLI_LABELS, XNLI_LANGS

NER_TAGS = ("B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER", "O")  # CoNLL, IOB2
NC_LABELS = ("autos", "entertainment", "finance", "foodanddrink", "health", "lifestyle", "news", "sports",
             "travel", "video")
QADSM_LABELS = ("Bad", "Good")
QAM_LABELS = ("0", "1")
WPR_LABELS = ("0", "1", "2", "3", "4")  # relevance ratings



def _task(name: str, test: str, kind: str, files: dict, **facts) -> TaskSpec:
  langs = tuple(test.split())
  return TaskSpec(name=name, benchmark="xglue", languages={"train": langs, "dev": langs, "test": langs}, kind=kind,
                  category="understanding", files=files, **facts)


NER = _task("NER", "de en es nl", "tagging", {"*": "NER/{lg}.{split}"}, labels=NER_TAGS, score="f1",
            train=("NER", "en", "train"), model="NER")
POS = _task("POS", "pl ar ru bg de el en es fr hi it nl pt th tr ur vi zh", "tagging", {"*": "POS/{lg}.{split}"},
            labels=UPOS_TAGS, score="precision", train=("POS", "en", "train"), model="POS")
NC = _task("NC", "de en es fr ru", "pair_classification", {"*": "NC/xglue.nc.{lg}.{split}"}, labels=NC_LABELS,
           train=("NC", "en", "train"), model="NC")
MLQA = _task("MLQA", "ar de en es hi vi zh", "span_qa",
             # train: SQuAD v1.1 where Data_Format.txt lists it (`squad1.1/`, in the task folder; not checked
             # against the real archive); dev / test: where the official scorer reads them.
             {"train:en": "MLQA/squad1.1/train-v1.1.json", "train": "MLQA/squad1.1/train-v1.1.{lg}.json",
              "*": "MLQA/MLQA_V1/{split}/{split}-context-{lg}-question-{lg}.json"},
             score="f1", train=("MLQA", "en", "train"), model="MLQA", prediction_suffix="json", by_position=False)
XNLI = TaskSpec(name="XNLI", benchmark="xglue",
                languages={"train": XNLI_LANGS, "dev": XNLI_LANGS, "test": XNLI_LANGS},
                kind="pair_classification", category="understanding", labels=XNLI_LABELS,
                train=("XNLI", "en", "train"), model="XNLI",
                files={"train": "XNLI/multinli.train.{lg}.tsv", "*": "XNLI/{lg}.{split}"})
PAWSX = _task("PAWSX", "de en es fr", "pair_classification",
              {"train": "PAWSX/{lg}/train.tsv", "*": "PAWSX/{lg}/{split}_2k.tsv"}, labels=PAWSX_LABELS,
              train=("PAWSX", "en", "train"), model="PAWSX")
QADSM = _task("QADSM", "de en fr", "pair_classification", {"*": "QADSM/xglue.qadsm.{lg}.{split}"},
              labels=QADSM_LABELS, train=("QADSM", "en", "train"), model="QADSM")
WPR = _task("WPR", "de en es fr it pt zh", "ranking", {"*": "WPR/xglue.wpr.{lg}.{split}"}, labels=WPR_LABELS,
            score="ndcg", train=("WPR", "en", "train"), model="WPR")
QAM = _task("QAM", "de en fr", "pair_classification", {"*": "QAM/xglue.qam.{lg}.{split}"}, labels=QAM_LABELS,
            train=("QAM", "en", "train"), model="QAM")


def _generation(name: str, test: str, files: str) -> TaskSpec:
  langs = tuple(test.split())
  return TaskSpec(name=name, benchmark="xglue", languages={"train": ("en",), "dev": langs, "test": langs},
                  kind="generation", category="generation", score="bleu", train=(name, "en", "train"), model=name,
                  files={"*": files}, sides=("src", "tgt"))


QG = _generation("QG", "de en es fr it pt", "QG/xglue.qg.{lg}.{side}.{split}")
NTG = _generation("NTG", "de en es fr ru", "NTG/xglue.ntg.{lg}.{side}.{split}")

# The XGLUE paper's multi-task fine-tuning (Table 9): one model on the merged English training sets of these.
MULTI_TASK = ("XNLI", "PAWSX", "NC", "QAM", "QADSM")

XGLUE = BenchmarkSpec(
    name="xglue",
    tasks=(NER, POS, NC, MLQA, XNLI, PAWSX, QADSM, WPR, QAM, QG, NTG),
    categories={"understanding": ("NER", "POS", "NC", "MLQA", "XNLI", "PAWSX", "QADSM", "WPR", "QAM"),
                "generation": ("QG", "NTG")},
    scale=1.0,
    settings=("zero_shot", "pivot_language", "multi_language", "multi_task", "filter_teacher", "filter_student"),
    submission_file="{task}/{lg}.prediction")
