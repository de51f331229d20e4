"""The task registry is the one source of the benchmark constants every layer uses."""

import inspect

import pytest

from xtreme_jax import errors
from xtreme_jax.data.readers import xtreme_readers, xtreme_tfds
from xtreme_jax.evaluation import metrics, scorer
from xtreme_jax.registry import BENCHMARKS, LAB, MBERT, XGLUE, XTREME, BenchmarkSpec, TaskSpec
from xtreme_jax.runs import fine_tuning, recipes, xtreme as xtreme_run

TIER = "unit"  # conftest.py: this file's tier


def test_xtreme_spec_facts():
  assert XTREME.task_names == ("xnli", "pawsx", "udpos", "panx", "xquad", "mlqa", "tydiqa", "bucc2018", "tatoeba")
  assert BENCHMARKS == {"xtreme": XTREME, "xglue": XGLUE, "mbert": MBERT, "lab": LAB} and set(XTREME.specs) == set(XTREME.task_names) | {"squad"}
  xnli = XTREME.task("xnli")
  assert len(xnli.test_languages) == 15 and xnli.languages["train"] == ("en",) and xnli.fine_tuned
  assert XTREME.task("udpos").languages["train"] == tuple(
      lg for lg in XTREME.task("udpos").test_languages if lg not in ("th", "tl", "yo"))
  assert XTREME.where(kind="span_qa") == ("xquad", "mlqa", "tydiqa")
  assert XTREME.where(in_language=True) == ("udpos", "panx", "tydiqa")
  assert not XTREME.task("tatoeba").fine_tuned and XTREME.task("xquad").model == XTREME.task("mlqa").model == "squad"
  with pytest.raises(errors.ConfigError, match="unknown XTREME task 'xnlii'; valid tasks: xnli, pawsx, udpos"):
    XTREME.task("xnlii")


def test_every_layer_reads_the_registry():
  for name, spec in XTREME.specs.items():
    assert xtreme_readers.TASKS[name].languages == dict(spec.languages)
    assert xtreme_readers.TFDS_BUILDERS[name] == spec.tfds_builder
  assert metrics.TASK_LANGUAGES == {t.name: t.test_languages for t in XTREME.tasks}
  assert metrics.CATEGORIES == XTREME.categories and list(metrics.TASK_METRIC) == list(XTREME.task_names)
  assert scorer.ORDER_DEPENDENT == ("xnli", "pawsx", "udpos", "panx", "tatoeba")
  assert scorer.VALID == {"xnli": set(xtreme_readers.XNLI_LABELS), "pawsx": {"0", "1"},
                          "udpos": set(xtreme_readers.UPOS_TAGS), "panx": set(xtreme_readers.PANX_TAGS)}
  assert xtreme_run.TASKS == XTREME.task_names and recipes.FINETUNED == (
      "xnli", "pawsx", "udpos", "panx", "squad", "tydiqa")
  assert fine_tuning.TRANSLATE_TRAIN_SOURCE == {"xnli": "xnli", "pawsx": "pawsx", "xquad": "squad", "mlqa": "squad",
                                               "tydiqa": "tydiqa"}
  assert xtreme_tfds.QA_TASKS == ("xquad", "mlqa", "tydiqa", "squad")


def test_benchmark_spec_checks_its_tasks():
  task = TaskSpec(name="a", benchmark="b", languages={"test": ("en",)}, kind="tagging")
  with pytest.raises(ValueError, match="duplicate task names"):
    BenchmarkSpec(name="b", tasks=(task, task))
  with pytest.raises(ValueError, match=r"categories name unknown tasks \['z'\]"):
    BenchmarkSpec(name="b", tasks=(task,), categories={"c": ("a", "z")})


def test_xglue_spec_facts():
  # The official scorer's task order (task2lg): understanding, then generation.
  assert XGLUE.task_names == ("NER", "POS", "NC", "MLQA", "XNLI", "PAWSX", "QADSM", "WPR", "QAM", "QG", "NTG")
  assert XGLUE.categories == {"understanding": XGLUE.task_names[:9], "generation": ("QG", "NTG")}
  assert XGLUE.scale == 1.0
  assert XGLUE.task("POS").test_languages[0] == "pl" and len(XGLUE.task("POS").test_languages) == 18
  assert XGLUE.task("XNLI").test_languages == XTREME.task("xnli").test_languages
  assert XGLUE.task("PAWSX").file("dev", "de") == "PAWSX/de/dev_2k.tsv"
  assert XGLUE.task("PAWSX").file("train", "en") == "PAWSX/en/train.tsv"
  assert XGLUE.task("MLQA").file("test", "ar") == "MLQA/MLQA_V1/test/test-context-ar-question-ar.json"
  assert len(XGLUE.task("NC").labels) == 10 and XGLUE.task("WPR").kind == "ranking"
  with pytest.raises(errors.ConfigError, match="unknown XGLUE task 'ner'; valid tasks: NER, POS"):
    XGLUE.task("ner")


def test_xglue_generation_specs():
  qg, ntg = XGLUE.task("QG"), XGLUE.task("NTG")
  assert qg.languages == {"train": ("en",), "dev": ("de", "en", "es", "fr", "it", "pt"),
                          "test": ("de", "en", "es", "fr", "it", "pt")}
  assert ntg.test_languages == ("de", "en", "es", "fr", "ru") and ntg.languages["train"] == ("en",)
  assert XGLUE.where(kind="generation") == ("QG", "NTG") and {qg.score, ntg.score} == {"bleu"}
  assert (qg.model, qg.train, ntg.model, ntg.train) == ("QG", ("QG", "en", "train"), "NTG", ("NTG", "en", "train"))
  assert qg.sides == ("src", "tgt") and qg.file("train", "en") == "QG/xglue.qg.en.src.train"
  assert ntg.file("dev", "fr", "tgt") == "NTG/xglue.ntg.fr.tgt.dev"
  assert XGLUE.prediction_file("NTG", "ru") == "NTG/ru.prediction"


def test_every_xglue_task_is_fine_tuned_by_the_runner():
  assert recipes.finetuned_models(XGLUE) == XGLUE.task_names
  assert inspect.signature(xtreme_run.xglue).parameters["tasks"].default == XGLUE.task_names
