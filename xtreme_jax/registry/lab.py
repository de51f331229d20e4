"""The transfer lab's tasks (`runs/lab.py`): synthetic languages generated from one grammar, as registry entries.

The lab's languages are the run's own (a base language and the languages derived from it, named in its
configuration), so `LAB` declares no languages; `lab_benchmark(languages)` is `LAB` with them, for every split
of the fine-tuned tasks (each language has training data: its exact translation of the base's, which the
in-language setting trains on as translate-train) and the test split of retrieval (every language but the base,
which each is matched against). The data object (`data/readers/lab_data.py`) reads the generated files:

| task | kind | files under the lab's data folder |
|---|---|---|
| pos | tagging (UPOS, token accuracy) | `pos/{split}-{lg}.tsv`: `token<TAB>tag` per line, a blank line after each sentence |
| topic | classification (the sentence's topic, accuracy) | `topic/{split}-{lg}.tsv`: `sentence<TAB>label` per line |
| retrieval | parallel-sentence retrieval (Tatoeba's accuracy) | `retrieval/test-{lg}.txt`: the test sentences, line i the translation of the base's line i |
"""

from __future__ import annotations

import dataclasses

from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec
from xtreme_jax.registry.xtreme import UPOS_TAGS

BASE = "base"  # the base language's name: every zero-shot model trains on it
# The labels the heads predict: the universal tag set (the grammar's tags are a subset) and the grammar's topics
# (`data/synthetic/grammar.py`: `topic<k>`; a lab with more topics is refused by its data object).
TOPICS = ("topic0", "topic1", "topic2", "topic3")
SPLITS = ("train", "dev", "test")

POS = TaskSpec(name="pos", benchmark="lab", languages={}, kind="tagging", labels=UPOS_TAGS, score="accuracy",
               category="structured_prediction", train=("pos", BASE, "train"), model="pos", in_language=True,
               files={"*": "pos/{split}-{lg}.tsv"})
TOPIC = TaskSpec(name="topic", benchmark="lab", languages={}, kind="pair_classification", labels=TOPICS,
                 score="accuracy", category="classification", train=("topic", BASE, "train"), model="topic",
                 in_language=True, files={"*": "topic/{split}-{lg}.tsv"})
RETRIEVAL = TaskSpec(name="retrieval", benchmark="lab", languages={}, kind="similarity_search", score="accuracy",
                     category="retrieval", files={"test": "retrieval/test-{lg}.txt"}, pivot=BASE)

LAB = BenchmarkSpec(
    name="lab",
    tasks=(POS, TOPIC, RETRIEVAL),
    categories={"classification": ("topic",), "structured_prediction": ("pos",), "retrieval": ("retrieval",)},
    settings=("zero_shot", "in_language"),
    submission_file="{task}/test-{lg}.{suffix}")


def lab_benchmark(languages: tuple) -> BenchmarkSpec:
  """`LAB` with `languages` (the base first) in every split of every task (retrieval: the test split of the
  languages other than the base, which each is matched against)."""
  def with_languages(spec: TaskSpec) -> TaskSpec:
    if spec.retrieval:
      return dataclasses.replace(spec, languages={"test": tuple(lg for lg in languages if lg != spec.pivot)})
    return dataclasses.replace(spec, languages={split: tuple(languages) for split in SPLITS})
  return dataclasses.replace(LAB, tasks=tuple(with_languages(t) for t in LAB.tasks))
