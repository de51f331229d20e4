"""FILTER fine-tuning as a task kind: a plain kind's features on both sides of each (English, target) pair.

`Filter(base, settings, student)` wraps the task's own kind (`task_kinds`:
pair classification, ranking as classification, tagging, span QA). Its
examples are pairs (`data/filter/filter_pairs.py`): {"id", "language", "source" (the
English record), "target" (the target-language record)}, in the readers'
schemas. Each side is featurised by the base kind; the target's windows keep
their names, the source's are prefixed `source_`. A target window j is paired
with the source's window j (its last, when the source has fewer: a sentence
or context cut into more windows on one side), so a pair gives as many rows
as its target. A side without gold (a translated tagging sentence, an
inference pair) is featurised without labels (tagging: `labels` -100, the
predicted positions kept in `label_weights` for the KL). Predictions, dev
scores and submissions are the base kind's, on the target records and the
target side's outputs (`models/filter.py`).

A student's rows carry the teacher's target-side logits (`soft_label_keys`,
attached by `with_soft_labels`): classification and tagging `teacher_logits`,
QA `teacher_start_logits` / `teacher_end_logits`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from xtreme_jax import errors
from xtreme_jax.models.filter import FilterClassificationModel, FilterQaModel, FilterTaggingModel
from xtreme_jax.runs import task_kinds
from xtreme_jax.training import validation as v

ENGLISH_SOURCES = ("translate_test", "parallel")
# the paper's KL weights (1 - lambda) per base kind
KL_WEIGHTS = {"pair_classification": 0.5, "ranking": 0.5, "tagging": 1.0, "span_qa": 0.1}
# the authors' KL temperatures per base kind (--temperature of run_xcls.py, run_xtag.py, run_xqa.py)
TEMPERATURES = {"pair_classification": 0.1, "ranking": 0.1, "tagging": 1.0, "span_qa": 6.0}
# the features of each base kind both sides carry (the target's under their own names)
_SIDE_KEYS = {"pair_classification": ("input_ids", "input_mask", "token_type_ids"),
              "tagging": ("input_ids", "input_mask", "token_type_ids", "labels", "label_weights"),
              "span_qa": ("input_ids", "input_mask", "token_type_ids", "start_positions", "end_positions",
                          "example_weights")}


@dataclasses.dataclass(frozen=True)
class FilterSettings:
  """FILTER's part of a task's recipe (`TaskSettings.filter`).

  `local_layers` (m) and `fusion_layers` (k): `networks/filter.py`.
  `kl_weight`: the student's 1 - lambda (None: the paper's for the task's
  kind, `KL_WEIGHTS`). `temperature`: T of the student's KL, T^2
  KL(softmax(teacher / T) || softmax(student / T)) (None: the authors' for
  the task's kind, `TEMPERATURES`: classification and ranking 0.1, tagging
  1, QA 6; one task's with a Gin scope, `squad/filter_kinds.FilterSettings.
  temperature = 4.0`). The soft-label files hold logits: T is applied when
  the student trains, so changing it keeps them.
  `english`: the English side of inference pairs, `translate_test` (XTREME's
  translate-test files) or `parallel` (the dataset's own parallel English,
  as the released code uses for MLQA / XQuAD); see `data/filter/filter_pairs.py`.
  `teachers`: how many teacher runs (seeds seed, seed + 1, ...) give the
  soft labels, their logits averaged as the authors' (the paper: 1).
  `train_teacher`: a student run trains its missing teacher first (one
  command); False refuses a student whose teacher's soft labels are missing.
  """

  local_layers: int = 1
  fusion_layers: int = 1
  kl_weight: Optional[float] = None
  temperature: Optional[float] = None
  english: str = "translate_test"
  teachers: int = 1
  train_teacher: bool = True

  def __post_init__(self):
    for name in ("local_layers", "fusion_layers"):
      v.require(self, name, v.non_negative_int, "an integer >= 0")
    v.require(self, "kl_weight", v.optional(lambda x: v.is_number(x) and 0 <= x <= 1),
              "None (the paper's per task kind) or a number in [0, 1]")
    v.require(self, "temperature", v.optional(v.positive), "None (the authors' per task kind) or a number > 0")
    v.require(self, "english", lambda x: x in ENGLISH_SOURCES, f"one of {ENGLISH_SOURCES}")
    v.require(self, "teachers", v.positive_int, "a positive integer")


def with_depths(depths: Sequence[int], settings: FilterSettings = FilterSettings()) -> FilterSettings:
  """`settings` with (m, k) = `depths`: the m x k grid sweeps one Gin macro (`experiments/*_filter_grid.gin`)."""
  if isinstance(depths, str) or len(depths) != 2:
    raise errors.ConfigError(f"FILTER depths = {depths!r}; expected (local_layers m, fusion_layers k), e.g. (1, 10)")
  return dataclasses.replace(settings, local_layers=depths[0], fusion_layers=depths[1])


def base_kind_name(base: task_kinds.Kind) -> str:
  """The `_SIDE_KEYS` / `KL_WEIGHTS` name of a base kind (ConfigError for kinds FILTER does not take)."""
  if isinstance(base, task_kinds.SpanQa):
    return "span_qa"
  if isinstance(base, task_kinds.Tagging):
    return "tagging"
  if isinstance(base, (task_kinds.MultiTask, task_kinds.RankingRegression)) or \
      not isinstance(base, task_kinds.PairClassification):
    raise errors.ConfigError(f"FILTER takes pair classification, ranking (classification head), tagging and span "
                             f"QA tasks, not {type(base).__name__}")
  return "ranking" if isinstance(base, task_kinds.Ranking) else "pair_classification"


class Filter(task_kinds.Kind):
  """The FILTER teacher (`student=False`) or student of a base kind; see the module docstring."""

  def __init__(self, base: task_kinds.Kind, settings: FilterSettings, student: bool):
    self.base, self.settings, self.student = base, settings, student
    self.name = base_kind_name(base)
    side = _SIDE_KEYS["pair_classification" if self.name == "ranking" else self.name]
    source = tuple("source_" + k for k in side)
    self.soft_label_keys = (("teacher_start_logits", "teacher_end_logits") if self.name == "span_qa"
                            else ("teacher_logits",))
    extra = (self.soft_label_keys + (("window_weights",) if self.name == "span_qa" else ())) if student else ()
    # the base's weight key last: padding rows of a prediction batch are weighted out by the last key
    self.model_keys = source + extra + base.model_keys
    self.predict_keys = source[:3] + base.predict_keys
    self.weight_key, self.selection, self.gold_key = base.weight_key, base.selection, base.gold_key

  @property
  def kl_weight(self) -> float:
    return KL_WEIGHTS[self.name] if self.settings.kl_weight is None else float(self.settings.kl_weight)

  @property
  def temperature(self) -> float:
    return TEMPERATURES[self.name] if self.settings.temperature is None else float(self.settings.temperature)

  def model(self, spec, config, settings=None, vocab=None):
    s = self.settings
    common = {"local_layers": s.local_layers, "fusion_layers": s.fusion_layers,
              "kl_weight": self.kl_weight if self.student else None, "temperature": self.temperature}
    if self.name == "span_qa":
      return FilterQaModel(config, **common)
    if self.name == "tagging":
      return FilterTaggingModel(config, **common, num_labels=len(spec.labels))
    return FilterClassificationModel(config, **common, num_classes=len(spec.labels),
                                     head=task_kinds.classification_head(config))

  def has_gold(self, record: dict) -> bool:
    if self.name == "span_qa":
      return bool((record.get("answers") or {}).get("text"))
    return record.get(self.gold_key) is not None

  def _side(self, spec, record: dict, vocab, settings, training: bool) -> list[dict]:
    gold = training and self.has_gold(record)
    windows, _ = self.base.features(spec, [record], vocab, settings, training=gold)
    if self.name == "tagging" and not gold:
      for w in windows:  # no gold tags: nothing to learn here, the positions stay for the KL
        w["labels"] = np.full_like(w["labels"], -100)
    if self.name == "span_qa" and not gold:
      for w in windows:
        w.update(start_positions=np.asarray(0, np.int32), end_positions=np.asarray(0, np.int32),
                 example_weights=np.asarray(0.0 if training else 1.0, np.float32))
    return windows

  def features(self, spec, examples: Sequence[dict], vocab, settings, training: bool) -> tuple[list, list]:
    side_keys = [k[len("source_"):] for k in self.model_keys if k.startswith("source_")]
    out, owners = [], []
    for i, pair in enumerate(examples):
      target = self._side(spec, pair["target"], vocab, settings, training)
      source = self._side(spec, pair["source"], vocab, settings, training)
      if not target or not source:
        continue  # a QA training side whose answer is not in its context
      for j, window in enumerate(target):
        mate = source[min(j, len(source) - 1)]
        row = {**window, **{"source_" + k: mate[k] for k in side_keys}}
        if self.name == "span_qa":  # the student's KL units (teacher and student rows stay the same)
          row["window_weights"] = np.asarray(1.0, np.float32)
        out.append(row)
        owners.append(i)
    return out, owners

  def target_outputs(self, outputs):
    """The target side's outputs in the base model's form."""
    return outputs if self.name == "span_qa" else outputs["target"]

  def soft_labels(self, outputs) -> dict[str, np.ndarray]:
    """{soft label key: the teacher's target-side logits} from a FILTER model's outputs over rows."""
    if self.name == "span_qa":
      return {"teacher_start_logits": np.asarray(outputs["start_logits"]),
              "teacher_end_logits": np.asarray(outputs["end_logits"])}
    return {"teacher_logits": np.asarray(outputs["target"])}

  def decode(self, spec, settings, predict, data, vocab=None):
    targets = data._replace(examples=[pair["target"] for pair in data.examples])
    return self.base.decode(spec, settings, lambda keys: self.target_outputs(predict(self.predict_keys)), targets,
                            vocab)

  def train_accuracy(self, examples, predicted):
    """The base kind's, over the pairs whose target has gold (QA: `predicted` is {id: answer})."""
    if self.name == "span_qa":
      return self.base.train_accuracy([p["target"] for p in examples if self.has_gold(p["target"])], predicted)
    gold = [(p["target"], y) for p, y in zip(examples, predicted) if self.has_gold(p["target"])]
    return self.base.train_accuracy([g for g, _ in gold], [y for _, y in gold]) if gold else float("nan")

  def dev_score(self, examples, predicted):
    return self.base.dev_score([p["target"] for p in examples], predicted)

  def submission_text(self, predicted, questions=(), where=""):
    return self.base.submission_text(predicted, [q.get("target", q) for q in questions], where)


def with_soft_labels(features: list[dict], soft: dict[str, np.ndarray]) -> list[dict]:
  """Each row with its teacher logits (row i gets entry i of every array)."""
  n = {len(v) for v in soft.values()}
  if n != {len(features)}:
    raise errors.DataError(f"soft labels for {sorted(n)} rows; the training data has {len(features)}")
  return [{**f, **{k: v[i] for k, v in soft.items()}} for i, f in enumerate(features)]
