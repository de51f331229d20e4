"""The fine-tuning settings (`runs/fine_tuning.py`): what each trains on, predicts, checks and calls its mixture."""

import dataclasses
import types
from typing import Optional

import pytest

from xtreme_jax import errors
from xtreme_jax.registry import BENCHMARKS, XGLUE, XTREME, BenchmarkSpec
from xtreme_jax.runs.fine_tuning import SETTINGS, TrainingSet

TIER = "unit"  # conftest.py: this file's tier

EN = ("xnli", "en", "train")


@dataclasses.dataclass
class FakeRun:
  """The `fine_tuning.Run` a setting asks: registry specs, data on disk (`on_disk`; None: everything)."""

  benchmark: BenchmarkSpec = XTREME
  pivot_language: str = "en"
  train_languages: Optional[tuple] = None
  language_rates: Optional[dict] = None
  multi_tasks: tuple = ("XNLI", "PAWSX")
  on_disk: Optional[set] = None

  @property
  def settings(self):
    return types.SimpleNamespace(pivot_language=self.pivot_language, train_languages=self.train_languages,
                                 language_rates=self.language_rates, multi_tasks=self.multi_tasks)

  def spec(self, task):
    return self.benchmark.task(task)

  def available(self, task, language, split):
    return self.on_disk is None or (task, language, split) in self.on_disk

  @property
  def store(self):  # FILTER's training sources (`model_store.ModelStore.filter_sources`)
    sources = lambda task: ((task, "en", "filter_train"), (task, "de", "filter_train"))  # noqa: E731
    return types.SimpleNamespace(filter_sources=sources)

  def kind(self, task):
    return self.spec(task).kind

  def say(self, message):
    print(message)


def test_every_benchmark_setting_is_an_object_named_as_gin_names_it():
  names = {s for b in BENCHMARKS.values() for s in b.settings}
  assert names == set(SETTINGS)
  assert all(setting.name == name for name, setting in SETTINGS.items())


def test_zero_shot_trains_every_task_on_its_training_language():
  run, zero = FakeRun(), SETTINGS["zero_shot"]
  assert zero.training_set(run, "xnli", "de") == TrainingSet("xnli", (EN,), None)
  assert zero.training_set(run, "mlqa", "de") == ("squad", (("squad", "en", "train"),), None)
  assert zero.test_split("xnli", "de") == "test" and zero.label("de") == "zero_shot"
  assert zero.mixture("xtreme", "xnli") == "xtreme_xnli_zero_shot"
  assert zero.mixture("xglue", "NER") == "xglue_ner_zero_shot"


def test_in_language_settings_train_on_the_test_language():
  run = FakeRun()
  own, few, multi = SETTINGS["in_language"], SETTINGS["in_language_fewshot"], SETTINGS["in_language_multi"]
  assert own.training_set(run, "panx", "de") == ("panx_de", (("panx", "de", "train"),), None)
  assert few.training_set(run, "panx", "de") == ("panx_de_fewshot1000", (("panx", "de", "train"),), 1000)
  assert own.training_set(run, "xnli", "de") == ("xnli", (EN,), None)  # no German training data: zero-shot
  with pytest.raises(errors.ConfigError, match="tydiqa: de has no training split for the in_language setting"):
    own.training_set(run, "tydiqa", "de")
  on_disk = {("tydiqa", "en", "train"), ("tydiqa", "sw", "train")}
  assert multi.training_set(FakeRun(on_disk=on_disk), "tydiqa", "fi") == (
      "tydiqa_all", (("tydiqa", "en", "train"), ("tydiqa", "sw", "train")), None)
  assert own.mixture("xtreme", "panx", "de") == "xtreme_panx_in_language_de"
  assert few.mixture("xtreme", "panx", "de") == "xtreme_panx_in_language_fewshot_de"
  assert multi.mixture("xtreme", "panx") == "xtreme_panx_in_language_all"
  assert own.mixture("xtreme", "xnli", "de") == multi.mixture("xtreme", "xnli") == "xtreme_xnli_zero_shot"


def test_translation_settings():
  on_disk = {("squad", "de", "translate_train"), ("squad", "es", "translate_train")}
  run = FakeRun(on_disk=on_disk)
  one, every, test = SETTINGS["translate_train"], SETTINGS["translate_train_all"], SETTINGS["translate_test"]
  assert one.training_set(run, "xnli", "de") == ("xnli_translate_train_de", (EN, ("xnli", "de", "translate_train")),
                                                 None)
  assert one.training_set(run, "xquad", "de") == (  # XQuAD's translate-train data: SQuAD's translations
      "squad_translate_train_de", (("squad", "en", "train"), ("squad", "de", "translate_train")), None)
  assert one.training_set(run, "xnli", "en") == ("xnli", (EN,), None)
  assert one.training_set(run, "panx", "de") == ("panx", (("panx", "en", "train"),), None)  # no translations
  assert every.training_set(run, "mlqa", "hi") == (
      "squad_translate_train_all", (("squad", "en", "train"), ("squad", "de", "translate_train"),
                                    ("squad", "es", "translate_train")), None)
  assert test.training_set(run, "xnli", "de") == ("xnli", (EN,), None)
  assert [test.test_split(t, lg) for t, lg in (("xnli", "de"), ("xnli", "en"), ("panx", "de"))] == [
      "translate_test", "test", "test"]
  assert one.test_split("xnli", "de") == "test"
  assert one.mixture("xtreme", "xnli", "de") == "xtreme_xnli_translate_train_en_de"
  assert every.mixture("xtreme", "xquad") == "xtreme_xquad_translate_train_all"
  assert test.mixture("xtreme", "mlqa") == "xtreme_mlqa_translate_test"


def test_pivot_and_multi_language_settings(capsys):
  pivot, multi = SETTINGS["pivot_language"], SETTINGS["multi_language"]
  run = FakeRun(XGLUE, pivot_language="de")
  assert pivot.training_set(run, "NER", "es") == ("NER_pivot_de", (("NER", "de", "train"),), None)
  assert pivot.training_set(run, "QG", "es") == ("QG", (("QG", "en", "train"),), None)  # no German data
  assert pivot.label("de") == "pivot_language-de" and pivot.mixture("xglue", "NER", "de") == "xglue_ner_pivot_de"
  pivot.check(run, ["NER", "QG"])
  assert "QG: de is not one of its languages; it stays zero-shot (en)" in capsys.readouterr().out
  with pytest.raises(errors.ConfigError, match=r"training language\(s\) \['xx'\] are languages of none"):
    pivot.check(FakeRun(XGLUE, pivot_language="xx"), ["NER"])
  run = FakeRun(XGLUE, train_languages=("nl", "en"), language_rates={"en": 2})
  sources = (("NER", "en", "train"), ("NER", "nl", "train"))
  assert multi.training_set(run, "NER", "de") == ("NER_multi_en_nl", sources, None)  # the task's own order
  assert multi.language_rates(run, sources) == {"en": 2.0, "nl": 0.0}
  assert multi.language_rates(run, sources[:1]) is None and pivot.language_rates(run, sources) is None
  assert multi.mixture("xglue", "NER") == "xglue_ner_multi_language"


def test_multi_task_filter_and_feature_based_settings():
  multi, teacher, student = SETTINGS["multi_task"], SETTINGS["filter_teacher"], SETTINGS["filter_student"]
  run = FakeRun(XGLUE)
  assert multi.multi_task(run, "PAWSX") and not multi.multi_task(run, "NER")
  assert multi.training_set(run, "PAWSX", "de") == (
      "multi_task_XNLI_PAWSX", (("XNLI", "en", "train"), ("PAWSX", "en", "train")), None)
  assert multi.training_set(run, "NER", "de") == ("NER", (("NER", "en", "train"),), None)
  assert multi.mixture("xglue", "XNLI") == "xglue_multi_task"
  with pytest.raises(errors.ConfigError, match=r"multi_tasks: unknown XGLUE task\(s\) \['XX'\]"):
    multi.check(FakeRun(XGLUE, multi_tasks=("XNLI", "XX")), ["XNLI"])
  assert teacher.training_set(FakeRun(), "xquad", "de") == (
      "squad_filter_teacher", (("xquad", "en", "filter_train"), ("xquad", "de", "filter_train")), None)
  assert student.training_set(FakeRun(), "xnli", "de").model == "xnli_filter_student"
  assert (teacher.filter_stage, student.filter_stage, multi.filter_stage) == ("teacher", "student", None)
  assert teacher.mixture("xtreme", "xnli") is None
  feature_based = SETTINGS["feature_based"]
  assert feature_based.training_set(FakeRun(), "panx", "de") == ("panx_feature_based", (("panx", "en", "train"),),
                                                                  None)
  with pytest.raises(errors.ConfigError, match=r"takes classification, tagging and parsing tasks; TASKS holds "
                                               r"\['xquad'\]"):
    feature_based.check(FakeRun(), ["xnli", "xquad"])
