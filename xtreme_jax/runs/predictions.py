"""The prediction files of a benchmark run: each (task, language) predicted by the model its setting names (or
by retrieval), written in the benchmark's submission layout, and recorded with what made it so that a re-run
keeps the files that are up to date (`bookkeeping.PredictionRecords`)."""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Optional, Sequence

import jax

from xtreme_jax import atomic, fs, text
from xtreme_jax.data.translation import xtreme_translations as translations
from xtreme_jax.runs import bookkeeping, inference
from xtreme_jax.runs.model_store import selected

if TYPE_CHECKING:
  from xtreme_jax.runs.xtreme import XtremeRunner


class Predictions:
  """The prediction files of run `run` (the runner): its submission, and the pseudo test one."""

  def __init__(self, run: XtremeRunner):
    self.run = run
    self._records: dict[str, bookkeeping.PredictionRecords] = {}

  def records(self, directory: str) -> bookkeeping.PredictionRecords:
    """The records of the prediction folder `directory` (read once)."""
    if directory not in self._records:
      self._records[directory] = bookkeeping.PredictionRecords(directory)
    return self._records[directory]

  def path(self, task: str, language: str, directory: Optional[str] = None) -> str:
    """The prediction file of (task, language) in `directory` (the submission by default)."""
    return os.path.join(directory or self.run.submission, self.run.benchmark.prediction_file(task, language))

  def write(self, task: str, language: str, split: str, text: str,
            directory: Optional[str] = None) -> str:
    """Writes (process 0) and records the prediction file of (task, language) made from `split`; its path."""
    path = self.path(task, language, directory)
    if jax.process_index() == 0:
      atomic.write_text(path, text)
    self.records(directory or self.run.submission).record(path, self.made_by(task, language, split))
    logging.info("wrote %s", path)
    return path

  def made_by(self, task: str, language: str, split: str) -> Optional[str]:
    """Digest of everything that makes the prediction of (task, language, split): the finished model
    (None while it is not) or the retrieval encoder and settings, and the input files' stamps."""
    if self.run.spec(task).retrieval:
      maker = self.run.retrieval.maker(task)
    else:
      name, sources, limit = self.run.training_set(task, language)
      model = self.run.store.finished_model(name)
      if model is None or any(model["config"].get(k) != v for k, v in
                              bookkeeping.normalized(self.run.store.model_spec(task, name, sources, limit)).items()):
        return None
      maker = {"model": model["identity"], "selected": selected(model)}  # run_config.json holds the settings
    inputs = [bookkeeping.stamp(p) for p in self.input_paths(task, language, split)]
    return bookkeeping.digest({"task": task, "language": language, "split": split, **maker, "inputs": inputs})

  def input_paths(self, task: str, language: str, split: str) -> list[str]:
    """Every file (TFDS: the builder location) that predicting (task, language, split) reads."""
    splits = [split] + (["test"] if split == "translate_test" else []) + (["dev"] if self.run.spec(task).kind == "bitext_mining" else [])
    return [path for sp in splits for path in self.run.data.locations(task, language, sp)]

  def predict_task(self, task: str, languages: Sequence[str], pseudo: bool = False) -> None:
    """Predicts `task` for `languages`, model by model; prediction files that are up to date are kept."""
    directory = self.run.pseudo_submission if pseudo else self.run.submission
    groups: dict[str, list[str]] = {}
    for lg in languages:
      name = self.run.training_set(task, lg)[0]
      self.run.store.models.setdefault(name, self.run.recipe_key(task))
      made_by = self.made_by(task, lg, self.run.test_split(task, lg, pseudo))
      if not self.records(directory).up_to_date(self.path(task, lg, directory), made_by):
        groups.setdefault(name, []).append(lg)
    kept = len(languages) - sum(len(g) for g in groups.values())
    if kept:
      bookkeeping.say(f"{task}{' (pseudo test)' if pseudo else ''}: {kept} of {len(languages)} predictions up to "
                      "date, kept")
    for name, todo in groups.items():
      self.run.store.finetuned(task, todo[0])  # fine-tune (its own progress bar) before the prediction bar
      bar = bookkeeping.progress(todo, f"predict {task}" + (" (pseudo test)" if pseudo else ""))
      for lg in bar:
        bar.set_postfix_str(lg, refresh=False)
        self.predict_language(task, lg, pseudo)

  def predict_language(self, task: str, language: str, pseudo: bool = False) -> str:
    """Predicts the test set of `language` (the translated / pseudo one where the setting says so); its path."""
    spec = self.run.spec(task)
    kind, s = self.run.kind(task), self.run.recipe(task)
    split = self.run.test_split(task, language, pseudo)
    examples = self.run.read(task, language, split)
    trainer, params = self.run.store.finetuned(task, language)
    data = kind.featurise(spec, examples, self.run.vocab, s, training=False)
    predicted = inference.decode(kind, spec, s, trainer, params, data, self.run.vocab)
    # translate_test rows are line-aligned with the original test file, and QA keeps the original question ids
    # (checked by the reader, `check_inputs`): id-keyed answers are mapped back in the original order.
    by_id = split == "translate_test" and not spec.by_position
    questions = self.run.read(task, language, "test") if by_id else examples
    text = kind.submission_text(predicted, questions, f"{task} {language}")
    return self.write(task, language, split, text, self.run.pseudo_submission if pseudo else None)

  def pseudo_languages(self, task: str) -> list[str]:
    """Pseudo test languages of `task` found on disk (none for tasks without pseudo test sets)."""
    if task not in translations.tasks("pseudo_test") or self.run.translations_dir is None:
      return []
    return translations.pseudo_languages_on_disk(task, self.run.translations_dir)

  def write_pseudo_gold(self, task: str, language: str) -> str:
    """The gold of a pseudo test set in the leaderboard labels layout (under `pseudo_labels`)."""
    examples = self.run.read(task, language, "pseudo_test")
    path = self.path(task, language, self.run.pseudo_labels)
    if self.run.spec(task).prediction_suffix == "json":  # QA: the labels hold the SQuAD JSON
      source = translations.translation_path(task, self.run.translations_dir, language, "pseudo_test")
      gold = json.dumps(json.loads(text.read_utf8(source)), ensure_ascii=False)  # the SQuAD JSON, as labels hold it
    else:
      gold = "".join(f"{ex['label']}\n" for ex in examples)
    if jax.process_index() == 0:
      atomic.write_text(path, gold)
    return path

  def write_manifests(self, *folders: str) -> None:
    """Record the data source (official or TFDS order) in each existing prediction / label folder."""
    from xtreme_jax.evaluation import scorer
    if not self.run.protocol.ordered_predictions:  # the manifest records XTREME's TFDS-or-official order
      return
    for folder in folders:
      if jax.process_index() == 0 and fs.isdir(folder):
        scorer.write_manifest(folder, self.run.data.source)
