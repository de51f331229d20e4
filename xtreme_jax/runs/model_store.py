"""The fine-tuned models of a benchmark run: each trained (or resumed, or reloaded when finished) in its own run
directory `<run_dir>/models/<name>` and selected on dev; FILTER's teachers and their soft labels; the training
accuracy and `runs.json`. One model is held in memory at a time."""

from __future__ import annotations

import functools
import logging
import math
import os
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import jax
import numpy as np

from xtreme_jax import atomic, errors, fs
from xtreme_jax.data import paths
from xtreme_jax.data.translation import xtreme_translations as translations
from xtreme_jax.data.features.sources import FeatureListSource
from xtreme_jax.runs import bookkeeping, filter_kinds, inference, language_ids, soft_labels, task_kinds
from xtreme_jax.runs.recipes import TaskSettings
from xtreme_jax.runs.train import apply_overrides, describe, pretrained_loader
from xtreme_jax.training.checkpoints import RunDirectory
from xtreme_jax.training.trainer import Trainer, TrainerConfig

if TYPE_CHECKING:
  from xtreme_jax.runs.xtreme import XtremeRunner

HISTORY_POINTS = 500  # the loss history in runs.json: at most this many [step, mean loss] points


def selected(model: Mapping) -> tuple[str, int]:
  """(criterion, step) of the parameters a finished model (`ModelStore.finished_model`) predicts with."""
  selection, best = model["config"].get("selection"), model["summary"].get("best")
  if selection and best:
    return selection["criterion"], int(best["step"])
  return "final", int(model["summary"]["train_steps"])


def loss_history(log: Sequence[Mapping], points: int = HISTORY_POINTS) -> list[list]:
  """[[step, loss], ...] from the Trainer's per-step records; beyond `points` records, the mean loss of
  consecutive equal-sized buckets at each bucket's last step."""
  pairs = [(int(r["step"]), float(r["loss"])) for r in log if "loss" in r]
  size = max(1, math.ceil(len(pairs) / points))
  buckets = [pairs[i:i + size] for i in range(0, len(pairs), size)]
  return [[b[-1][0], sum(loss for _, loss in b) / len(b)] for b in buckets]


class ModelStore:
  """The fine-tuned models of run `run` (the runner: data, settings, task kinds) and `runs.json`.

  `finetuned(task, language)` gives (trainer, parameters) of the model a
  prediction uses, training it first when its directory holds no finished
  run; `models` maps every model the run used to its recipe key.
  """

  def __init__(self, run: XtremeRunner):
    self.run = run
    self._model_in_memory = (None, None)
    self._training_rows = (None, None)  # FILTER: (key, Featurised) of the last training set
    self._filter_sources: dict[str, tuple] = {}  # FILTER: model -> its training sources (`filter_sources`)
    self.models: dict[str, str] = {}  # every fine-tuned model this run used -> its settings key
    self.resumed_with_overrides: list[str] = []  # models this run resumed with `resume_overrides`

  def model_dir(self, name: str) -> str:
    return os.path.join(self.run.run_dir, "models", name)

  def selection(self, task: str) -> Optional[dict]:
    """How `task`'s models choose the parameters that predict: {"criterion", "metric" (the evaluator's key),
    "dev": ((task, language, "dev"), ...)}; None for the final model (`final`, QA, no dev data on disk)."""
    kind, s = self.run.kind(task), self.run.recipe(task)
    if s.selection == "final" or kind.selection is None:
      return None
    members = self.run.settings.multi_tasks if self.run.multi_task(task) else (task,)
    devs = []
    for member in members:
      dev = self.run.spec(member).languages.get("dev", ())
      wanted = ("en",) if s.selection == "english_dev" else dev
      devs += [(member, lg, "dev") for lg in wanted if lg in dev and self.run.available(member, lg, "dev")]
    if not devs:
      return None
    metric, name = kind.selection
    if len(members) > 1:
      scope = "en dev" if s.selection == "english_dev" else "mean dev"
      criterion = f"mean over {len({d[0] for d in devs})} tasks of their {scope} {name} ({len(devs)} dev sets)"
    else:
      n = len(devs)
      criterion = (f"en dev {name}" if s.selection == "english_dev"
                   else f"mean dev {name} over {n} language" + "s" * (n > 1))
    return {"criterion": criterion, "metric": metric, "dev": tuple(devs)}

  def model_spec(self, task: str, name: str, sources: tuple, limit: Optional[int], student: Optional[bool] = None,
                 seed: Optional[int] = None) -> dict:
    """What defines fine-tuned model `name`, short of its step count (which needs the featurised data).

    The optimizer is a top-level key, as in `runs/train.py`, so that
    RESUME_OVERRIDES ({"optimizer": {...}}) address it the same way.
    `student` / `seed`: a FILTER teacher trained by a student run, and its seed.
    A FILTER student's spec names its teachers' identities (a retrained
    teacher retrains the student).
    """
    s, generation = self.run.recipe(task), self.run.spec(task).kind == "generation"
    # `generation` / `filter` only where they apply: changing them retrains only the models they shape
    skip = {"optimizer"} | ({"generation"} if not generation else set()) | (set() if self.run.filtering else {"filter"})
    settings = {k: v for k, v in describe(s).items() if k not in skip}
    kind = self.run.kind(task, student)
    seed = self.run.settings.seed if seed is None else seed
    spec = {"mode": f"{self.run.benchmark.name}-finetune",
            "model": describe(kind.model(self.run.spec(task), self.run.config, s, self.run.vocab)), "train": sources,
            "limit": limit, "settings": {**settings, "seed": seed}, "optimizer": describe(s.optimizer),
            "selection": self.selection(task), "init_checkpoint": self.run.init_checkpoint,
            "vocabulary": paths.portable(self.run.vocabulary),
            "data_dir": bookkeeping.fingerprint_dir(self.run.data_dir)}
    if self.run.data.source != "official":
      spec["data_source"] = self.run.data.source
    if self.run.language_rates(sources):
      spec["language_rates"] = self.run.language_rates(sources)
    if any(src[2] in translations.KINDS for src in sources):
      spec["translations"] = [paths.portable(self.run.data.location(*src)) for src in sources
                              if src[2] in translations.KINDS]
    if getattr(kind, "student", False):
      spec["teachers"] = [(self.finished_model(n) or {}).get("identity") for n in self.teacher_names(task)]
    return spec

  def finished_model(self, name: str, summary: Optional[dict] = None) -> Optional[dict]:
    """{"config", "summary", "identity"} of model `name` when its directory holds a finished run, else None.

    The identity digests the directory's `run_config.json` and its summary's
    steps, losses and best checkpoint: a retrained model gets a new one.
    `summary`: the one `Trainer.fit` returned (the same on every process),
    instead of reading `summary.json`.
    """
    run_dir = self.model_dir(name)
    config = bookkeeping.read_json(os.path.join(run_dir, "run_config.json"))
    summary = summary if summary is not None else bookkeeping.read_json(os.path.join(run_dir, "summary.json"))
    finished = (isinstance(config, dict) and isinstance(summary, dict)
                and summary.get("train_steps") == config.get("steps"))
    if not finished:
      return None
    stable = {k: summary.get(k) for k in ("train_steps", "first_loss", "final_loss", "best")}
    return {"config": config, "summary": summary, "identity": bookkeeping.digest({"config": config, "summary": stable})}

  def finetuned(self, task: str, language: str):
    """(trainer, params) of the model `task` uses for `language` (one model in memory at a time)."""
    name, sources, limit = self.run.training_set(task, language)
    self.models.setdefault(name, self.run.recipe_key(task))
    if self._model_in_memory[0] != name:
      self._model_in_memory = (None, None)  # free the previous model first
      self._model_in_memory = (name, self._finetune(task, name, sources, limit))
    return self._model_in_memory[1]

  def _finetune(self, task: str, name: str, sources: tuple, limit: Optional[int]):
    """Train (or resume, or reload when finished) `name`; (trainer, the parameters `selection` chose). A
    FILTER teacher also writes the soft labels of its training rows (`teacher_soft_labels`)."""
    result = self.train(task, name, sources, limit)
    self.run.setting.after_training(self.run, task, sources, limit)
    return result

  def train(self, task: str, name: str, sources: tuple, limit: Optional[int], student: Optional[bool] = None,
            seed: Optional[int] = None):
    """Train (or resume, or reload when finished) `name` in its own run directory; (trainer, the parameters
    `selection` chose: the best on dev, or the final ones). `student` / `seed`: as `model_spec`."""
    spec = self.run.spec(task)
    kind, s = self.run.kind(task, student), self.run.recipe(task)
    seed = self.run.settings.seed if seed is None else seed
    data = self.training_features(task, sources, limit)
    if getattr(kind, "student", False):
      data = data._replace(features=filter_kinds.with_soft_labels(data.features,
                                                                  self.teacher_soft_labels(task, sources, limit)))
    source = FeatureListSource(data.features, s.batch_size, seed, weight_keys=(kind.weight_key,),
                               model_keys=language_ids.fed_keys(kind.model_keys, data.features))
    steps = max(1, int(round(s.epochs * len(data.features) / s.batch_size)))
    selection = self.selection(task)
    if selection is None and s.selection != "final" and kind.selection is not None:
      logging.warning("%s: no dev data for the %s selection; the final model predicts", name, s.selection)
    if selection is None and s.plateau is not None:
      logging.warning("%s: the plateau schedule needs a dev selection; the rate follows the optimizer alone", name)
    config = TrainerConfig(train_steps=steps, accum_steps=s.accum_steps,
                           log_every=min(self.run.settings.log_every, steps),
                           checkpoint_every=steps, keep_checkpoints=1, seed=seed,
                           eval_every=s.eval_interval(len(data.features)) if selection else None,
                           select_metric=selection["metric"] if selection else None,
                           plateau=s.plateau if selection else None)
    dev = self.dev_sets(task, s, selection) if selection else None  # all data is read before training starts
    run_dir = self.model_dir(name)
    fingerprint = {**self.model_spec(task, name, sources, limit, student, seed), "steps": steps}
    with RunDirectory(run_dir, fingerprint, overrides=self._overrides(name)) as claim:
      claim.check()
      model = kind.model(spec, self.run.config, s, self.run.vocab)
      trainer = Trainer(model, apply_overrides(claim, s.optimizer), config,
                        self.run.partition, run_dir, run_directory=claim)
      evaluator = functools.partial(self.dev_scores, task, s, trainer, selection["metric"], dev) if dev else None
      bookkeeping.say(f"fine-tuning {name}: {len(data.examples)} examples ({len(data.features)} windows), {steps} steps"
                      + (f", selecting on {selection['criterion']}" if selection else ""))
      logging.info("fine-tuning %s on %s", name, sources)
      try:
        loader = pretrained_loader(self.run.init_checkpoint, self.run.config, kind.pretrained(s, self.run.config))
        state, summary = trainer.fit(source, None, loader, evaluator)
        self._measure_train_accuracy(spec, s, name, summary, trainer, state.params, data, kind)
        best = trainer.restore_best_params() if selection else None
      finally:
        trainer.close()
    return trainer, state.params if best is None else best

  def filter_sources(self, task: str) -> tuple:
    """The FILTER training sources of `task`'s model, ((task, language, "filter_train"), ...): English and
    every language of the model's tasks with training pairs on disk (`FinetuneSettings.train_languages`: of
    those, only these), read as the model's first task (XQuAD and MLQA share SQuAD's pairs)."""
    model = self.run.spec(task).model
    if model in self._filter_sources:
      return self._filter_sources[model]
    members = [t for t in self.run.benchmark.tasks if t.fine_tuned and t.model == model]
    first, wanted = members[0].name, self.run.settings.train_languages
    languages = [lg for lg in dict.fromkeys(["en"] + [lg for t in members for lg in t.test_languages])
                 if wanted is None or lg in wanted]
    from xtreme_jax.data.filter import filter_pairs  # pylint: disable=g-import-not-at-top  (FILTER only)
    missing = filter_pairs.left_out(first, self.run.data, languages, self.run.translations_dir)
    self._filter_sources[model] = tuple((first, lg, "filter_train") for lg in languages
                                        if lg not in missing and self.run.available(first, lg, "filter_train"))
    return self._filter_sources[model]

  def teacher_names(self, task: str) -> list[str]:
    """The model names of `task`'s FILTER teachers (`FilterSettings.teachers`; seeds seed, seed + 1, ...)."""
    base = f"{self.run.spec(task).model}_filter_teacher"
    seed = self.run.settings.seed
    return [base] + [f"{base}_seed{seed + i}" for i in range(1, self.run.recipe(task).filter.teachers)]

  def teacher_soft_labels(self, task: str, sources: tuple, limit: Optional[int]) -> dict[str, np.ndarray]:
    """The teachers' target-side logits for the training rows (`soft_labels`), from the first teacher's
    directory; missing or stale ones are made by training (or reloading) the teachers and predicting the rows,
    unless a student run may not (`FilterSettings.train_teacher=False`: refused, naming the expected file)."""
    s, key, names = self.run.recipe(task), self.run.recipe_key(task), self.teacher_names(task)
    kind = self.run.kind(task, student=False)
    features = self.training_features(task, sources, limit).features
    digest, directory = soft_labels.rows_digest(features), self.model_dir(names[0])
    identities = lambda: [(self.finished_model(n) or {}).get("identity") for n in names]  # noqa: E731
    try:
      return soft_labels.load(directory, key, digest, identities())
    except errors.ConfigError:
      if self.run.setting.filter_stage == "student" and not s.filter.train_teacher:
        raise
    outputs = []
    for i, name in enumerate(names):
      self.models.setdefault(name, key)
      trainer, params = self.train(task, name, sources, limit, student=False, seed=self.run.settings.seed + i)
      bookkeeping.say(f"{name}: soft labels of {len(features)} training windows")
      logits = inference.predict_features(trainer, params, features, kind.predict_keys, s.batch_size)
      outputs.append(kind.soft_labels(logits))
      del trainer, params
    arrays = {k: soft_labels.average([o[k] for o in outputs]) for k in kind.soft_label_keys}
    if jax.process_index() == 0:
      logging.info("wrote %s", soft_labels.save(directory, key, digest, identities(), arrays))
    return arrays

  def training_features(self, task: str, sources: tuple, limit: Optional[int]) -> task_kinds.Featurised:
    """`task`'s model's training data, featurised; each source as its own task (the multi-task model's sources
    are several tasks)."""
    kind, s = self.run.kind(task), self.run.recipe(task)
    if self.run.filtering:  # the teachers and the student train on the same rows: featurised once
      key = (self.run.recipe_key(task), sources, limit)
      if self._training_rows[0] != key:
        self._training_rows = (None, None)
        examples = self.training_examples(sources, limit)
        self._training_rows = (key, kind.featurise(self.run.spec(task), examples, self.run.vocab, s, training=True))
      return self._training_rows[1]
    if not self.run.multi_task(task):
      examples = self.training_examples(sources, limit)
      return kind.featurise(self.run.spec(task), examples, self.run.vocab, s, training=True)
    examples, features, owners = [], [], []
    for src in sources:
      part = kind.featurise(self.run.spec(src[0]), self.training_examples((src,), limit), self.run.vocab, s,
                            training=True)
      features += part.features
      owners += [len(examples) + i for i in part.owners]
      examples += part.examples
    return task_kinds.Featurised(examples, features, owners)

  def training_examples(self, sources: tuple, limit: Optional[int]) -> list[dict]:
    """The training examples of `sources` (each cut to `limit`), concatenated; with `language_rates`, each
    language's share of the concatenation's size is its weight's share, its examples repeated in order or
    cut (a deterministic sample of the mixture, so that a resumed run sees the same data)."""
    parts = [self.run.read(*src)[:limit] for src in sources]
    rates = self.run.language_rates(sources)
    if rates is None:
      return [ex for part in parts for ex in part]
    total, weight = sum(len(p) for p in parts), sum(rates.values())
    errors.require(weight > 0, f"FinetuneSettings.language_rates {self.run.settings.language_rates} gives no training "
                   f"language of {[src[1] for src in sources]} a weight")
    out = []
    for (_, lg, _), part in zip(sources, parts):
      share = round(total * rates[lg] / weight)
      out += [part[i % len(part)] for i in range(share)] if part else []
    return out

  def _overrides(self, name: str) -> Optional[dict]:
    """`resume_overrides` as RunDirectory overrides when model `name` is being resumed (its directory holds an
    unfinished run), else None: finished models and new ones keep their configured optimizer."""
    if not self.run.resume_overrides or self.finished_model(name) is not None:
      return None
    if not fs.isfile(os.path.join(self.model_dir(name), "run_config.json")):
      logging.warning("RESUME_OVERRIDES %s not applied to %s: it holds no run to resume (a run stopped at its "
                      "first step is not kept), so it starts with its configured optimizer", self.run.resume_overrides,
                      self.model_dir(name))
      return None
    self.resumed_with_overrides.append(name)
    return {"optimizer": dict(self.run.resume_overrides)}

  def dev_sets(self, task: str, s: TaskSettings, selection: dict) -> list[tuple]:
    """[(task, language, its featurised dev set)] of the dev sets `selection` evaluates, featurised once."""
    kind = self.run.kind(task)
    return [(member, lg, kind.featurise(self.run.spec(member), self.run.read(member, lg, split), self.run.vocab, s,
                                        training=False))
            for member, lg, split in selection["dev"]]

  def dev_scores(self, task: str, s: TaskSettings, trainer: Trainer, metric: str, dev: Sequence[tuple],
                 params: Any) -> dict[str, float]:
    """The `Trainer.fit` evaluator (`params` bound last): {metric: the mean dev score, metric/<lg>: each
    language's (when several)}, predicted with the step the test predictions use (compiled once). A
    multi-task model's score is the mean over its tasks of their means (keys metric/<task>/<lg>)."""
    kind = self.run.kind(task)
    by_task: dict[str, dict[str, float]] = {}
    for member, lg, data in dev:
      predicted = inference.decode(kind, self.run.spec(member), s, trainer, params, data, self.run.vocab)
      by_task.setdefault(member, {})[lg] = kind.dev_score(data.examples, predicted)
    several = len(by_task) > 1
    each = {f"{metric}/{member + '/' if several else ''}{lg}": value
            for member, scores in by_task.items() for lg, value in scores.items()}
    means = [sum(scores.values()) / len(scores) for scores in by_task.values()]
    return {**(each if len(each) > 1 else {}), metric: sum(means) / len(means)}

  def _measure_train_accuracy(self, spec, s, name, summary, trainer, params, data: task_kinds.Featurised,
                              kind: task_kinds.Kind) -> None:
    """Predict the first `train_accuracy_examples` training examples once; saved beside the model."""
    n = self.run.settings.train_accuracy_examples
    subset = data.head(len(data.examples) if n is None else n)
    model = self.finished_model(name, summary)
    path = os.path.join(self.model_dir(name), "train_accuracy.json")
    if not subset.features or model is None or (bookkeeping.read_json(path) or {}).get("model") == model["identity"]:
      return  # nothing to predict, or measured when this model was trained
    predicted = inference.decode(kind, spec, s, trainer, params, subset, self.run.vocab)
    if jax.process_index() == 0:
      atomic.write_json(path, {"model": model["identity"], "examples": len(subset.examples),
                               "train_accuracy": kind.train_accuracy(subset.examples, predicted)})

  def run_entry(self, name: str) -> Optional[dict]:
    """runs.json's entry of model `name`: task (settings key), criterion and selected step (`selected`), steps,
    loss history, training accuracy of the final parameters (None when unmeasured); None while unfinished."""
    model = self.finished_model(name)
    if model is None:
      return None
    summary, steps = model["summary"], model["summary"]["train_steps"]
    criterion, step = selected(model)
    measured = bookkeeping.read_json(os.path.join(self.model_dir(name), "train_accuracy.json")) or {}
    return {"task": self.models.get(name, name), "criterion": criterion, "selected_step": step, "train_steps": steps,
            "history": loss_history(summary.get("history", [])),
            "train_accuracy": measured.get("train_accuracy") if measured.get("model") == model["identity"] else None}

  def write_runs(self) -> dict:
    """{model: run_entry} of every model this run used, merged into `<run_dir>/runs.json`."""
    runs = {name: entry for name in self.models if (entry := self.run_entry(name)) is not None}
    if jax.process_index() == 0 and runs:
      path = os.path.join(self.run.run_dir, "runs.json")
      atomic.write_json(path, {**(bookkeeping.read_json(path) or {}), **runs})
    return runs
