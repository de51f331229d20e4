"""The transfer lab: what makes zero-shot transfer work, tested on synthetic languages over the real stack.

`lab` (the Gin run mode `experiments/lab_quickstart.gin`, `lab_full.gin`) runs, in `run_dir`:

1. `data/`: the languages (`data/synthetic/lab_dataset.py`: a base language from a grammar and languages derived
   from it by recipes such as `shift(1)+invert`), their task files and pretraining text;
2. `vocab/`: a sentencepiece vocabulary trained on the union of the pretraining texts;
3. `pretrain/<condition>/`: a masked-LM pretraining run (the pretraining run mode: VECO's IS-MLM objective, the
   languages sampled with exponent `alpha`) per pretraining condition: `pretrained` (every language at once;
   `LabExperiment.pretraining='per_language'`: one run per derived language with the base,
   `pretrain/pretrained_<lg>/`, the papers' bilingual models) and the control `base_only` (the base language
   alone); the control `no_pretraining` starts from a random encoder. Each encoder is exported (`.../encoder`,
   the import-hf format);
4. `<condition>/seed<k>/` (per language: `<condition>/<lg>/seed<k>/`): the benchmark runner on the lab's tasks
   (`registry/lab.py`; POS tagging and topic classification), trained on the base language only and tested
   zero-shot on every language its encoder knows, once per seed; for `pretrained`, also
   `translate_train/seed<k>/` (per language: `translate_train/<lg>/seed<k>/`; the in-language setting: each
   language's exact translation of the base's training set, the upper reference);
5. `<condition>/retrieval/` (per language: `<condition>/<lg>/retrieval/`): the benchmark runner on the lab's
   `retrieval` task, Tatoeba-style accuracy of each language's test sentences against the base's with each
   condition's encoder (the alignment measure);
6. `lab/results.json` and `lab/report.md` with the plots (`evaluation/lab_report.py`).

Every stage is a claimed, resumable run directory of its own mode: a rerun of the same command skips what is
done. A `run_dir` holding a lab with other languages or sizes is refused. Several processes may run the same
command on one `run_dir` at once (one per accelerator, say): each encoder (a unit: its pretraining, retrieval
and fine-tuning runs) is locked by the process running it (`<run_dir>/.lab-<encoder>.lock`), a process takes
the next encoder no other holds, then waits for those others hold and writes the whole report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import tempfile
import time
from typing import Optional, Sequence

from xtreme_jax import atomic, errors, fs
from xtreme_jax.data.readers.lab_data import LabData
from xtreme_jax.data.synthetic import lab_dataset
from xtreme_jax.data.synthetic.lab_dataset import LabLanguages
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.registry.lab import BASE
from xtreme_jax.runs import bookkeeping, xtreme
from xtreme_jax.runs.recipes import FinetuneSettings, RetrievalSettings
from xtreme_jax.training import locks, validation as v
from xtreme_jax.training.partitioning import PartitionConfig

CONDITIONS = ("pretrained", "base_only", "no_pretraining")  # the pretraining conditions, the two controls last
RESULTS = ("zero_shot", "translate_train")  # a unit's fine-tuning results, {seed: {task: {language: score}}} each
POLL_S = 30.0  # how often a process waiting for an encoder another process runs looks again


@dataclasses.dataclass(frozen=True)
class LabExperiment:
  """What the lab runs: the pretraining (steps, batch, segment length, learning rate, language sampling
  exponent, vocabulary size), the fine-tuning seeds, the conditions (`CONDITIONS`; `pretrained` is always run),
  whether translate-train is run as the upper reference, and the position embeddings: `'shared'` by every
  language, or `'separate'`, a table per language (Dufter & Schuetze 2020; each example, in pretraining,
  fine-tuning and test, reads its own language's table)."""

  pretrain_steps: int = 3000
  pretrain_batch_size: int = 32
  segment_len: int = 30
  pretrain_learning_rate: float = 2e-3
  alpha: float = 0.7
  vocab_size: int = 1000
  seeds: Sequence[int] = (0, 1, 2)
  tasks: Sequence[str] = ("pos", "topic")
  controls: Sequence[str] = ("base_only", "no_pretraining")
  translate_train: bool = True
  pretraining: str = "joint"  # "joint": one encoder over every language; "per_language": base + each one
  positions: str = "shared"

  def __post_init__(self):
    v.require(self, "pretrain_steps", v.positive_int, "a positive integer")
    v.require(self, "seeds", lambda x: not isinstance(x, str) and len(x) > 0 and all(v.non_negative_int(s) for s in x),
              "a non-empty list of seeds")
    v.require(self, "tasks", lambda x: not isinstance(x, str) and set(x) <= {"pos", "topic"} and len(x) > 0,
              "a non-empty list of 'pos' / 'topic'")
    v.require(self, "controls", lambda x: not isinstance(x, str) and set(x) <= set(CONDITIONS[1:]),
              f"a list of {CONDITIONS[1:]}")
    v.require(self, "pretraining", lambda x: x in ("joint", "per_language"), "'joint' or 'per_language'")
    v.require(self, "positions", lambda x: x in ("shared", "separate"), "'shared' or 'separate'")

  def model(self, config: TransformerConfig, unit: "Unit") -> TransformerConfig:
    """The model of `unit`'s encoder: `config`, with a position table per language of the unit where the
    positions are separate."""
    if self.positions == "shared":
      return config
    return config.replace(num_languages=len(unit.languages), languages=tuple(unit.languages),
                          language_positions=True)

  @property
  def conditions(self) -> tuple[str, ...]:
    return tuple(c for c in CONDITIONS if c == "pretrained" or c in self.controls)


@dataclasses.dataclass(frozen=True)
class Unit:
  """One encoder of a condition: the languages it is pretrained on (None: a random encoder), those its
  fine-tuned models are tested on, and its name ('' for a condition's only encoder; else the derived language
  it pairs with the base)."""

  pretrained_on: Optional[tuple]
  languages: tuple
  name: str = ""


def units(condition: str, names: tuple, experiment: LabExperiment) -> list[Unit]:
  """The encoders of `condition`: per_language pretraining gives the base and each derived language their own
  (the papers' bilingual models); the controls and joint pretraining one for every language."""
  if condition == "no_pretraining":
    return [Unit(None, names)]
  if condition == "base_only":
    return [Unit((BASE,), names)]
  if experiment.pretraining == "joint":
    return [Unit(names, names)]
  return [Unit((BASE, lg), (BASE, lg), lg) for lg in names if lg != BASE]


def merge(parts: list[dict]) -> dict:
  """{task: {language: score}} of several units' runs: each derived language from its unit, the base's score
  the mean over the units (each fine-tunes its own base model)."""
  out: dict = {}
  for task in parts[0]:
    base = [p[task][BASE] for p in parts]
    out[task] = {BASE: sum(base) / len(base)}
    for part in parts:
      out[task].update({lg: v for lg, v in part[task].items() if lg != BASE})
  return out


def _claim_data(run_dir: str, languages: LabLanguages) -> str:
  """Writes the lab's data folder (or keeps the one there if it is this lab's); refuses another lab's."""
  data_dir = os.path.join(run_dir, "data")
  found = lab_dataset.written(data_dir)
  errors.require(found in (None, lab_dataset.manifest(languages)), f"{run_dir} holds a lab with other languages or "
                 f"sizes ({os.path.join(data_dir, lab_dataset.MANIFEST)}); use another RUN_DIR or restore its settings")
  bookkeeping.say(f"lab: languages {', '.join(languages.names)} -> {data_dir}")
  lab_dataset.write_lab_data(data_dir, languages)
  return data_dir


def _vocabulary(run_dir: str, data_dir: str, names: Sequence[str], size: int, config: TransformerConfig) -> str:
  """A sentencepiece model trained on every language's pretraining text (kept once trained)."""
  from xtreme_jax.data.vocab.spm_training import train_xlmr_style
  from xtreme_jax.data.vocab.vocabularies import load_vocabulary
  path = os.path.join(run_dir, "vocab", "spm.model")
  if not fs.isfile(path):
    texts = [fs.read_text(os.path.join(data_dir, "pretrain", f"{lg}.txt")) for lg in names]
    lines = [line for text in texts for line in text.splitlines(keepends=True) if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:  # sentencepiece writes local files; the run directory may be a URL
      with open(train_xlmr_style(lines, os.path.join(tmp, "spm"), size), "rb") as f:
        atomic.write_bytes(path, f.read())
  ids = load_vocabulary(path).vocab_size
  errors.require(ids <= config.vocab_size, f"the lab's vocabulary {path} has {ids} ids but the model's vocab_size is "
                 f"{config.vocab_size}; raise vocab_size or lower LabExperiment.vocab_size")
  return path


def _pretrain(run_dir: str, data_dir: str, vocab: str, config: TransformerConfig, languages: Sequence[str],
              experiment: LabExperiment, partition: PartitionConfig) -> str:
  """The exported encoder of a masked-LM pretraining on `languages` (trained once, resumed if interrupted)."""
  from xtreme_jax.data.pretraining.pretraining_corpora import VecoPairSource
  from xtreme_jax.models.veco import VecoModel
  from xtreme_jax.models.veco_assembly import export_encoder
  from xtreme_jax.runs import train
  from xtreme_jax.training.optim import OptimizerConfig
  from xtreme_jax.training.trainer import TrainerConfig
  encoder = os.path.join(run_dir, "encoder")
  if fs.isfile(os.path.join(encoder, "config.json")):
    return encoder
  source = VecoPairSource(vocabulary=vocab, data_dir=data_dir, monolingual_dir="pretrain", languages=tuple(languages),
                          blank_line_documents=True, segment_len=experiment.segment_len,
                          batch_size=experiment.pretrain_batch_size, alpha=experiment.alpha,
                          language_order=config.languages or None)
  steps = experiment.pretrain_steps
  train.pretrain(os.path.join(run_dir, "run"), config, source, model=VecoModel(config, objectives=("is",)),
                 optimizer=OptimizerConfig(learning_rate=experiment.pretrain_learning_rate, warmup_ratio=0.05,
                                           eps=1e-6),
                 trainer=TrainerConfig(train_steps=steps, log_every=max(1, steps // 20),
                                       checkpoint_every=min(1000, steps), keep_checkpoints=1),
                 partition=partition)
  return export_encoder(os.path.join(run_dir, "run"), encoder, "all" if config.languages else None)


def _retrieval(run_dir: str, data_dir: str, vocab: str, config: TransformerConfig, encoder: Optional[str],
               settings: FinetuneSettings, partition: PartitionConfig, languages: Sequence[str]) -> dict:
  """{language: accuracy %} of the lab's `retrieval` task (each test sentence's translation found among the
  base's: Tatoeba's measure), a benchmark run of `encoder` (None: a random one) over the derived `languages`."""
  derived = [lg for lg in languages if lg != BASE]
  result = xtreme.lab(run_dir, data_dir, config, vocab, labels_dir=data_dir, tasks=("retrieval",),
                      languages={"retrieval": derived}, init_checkpoint=encoder, partition=partition,
                      settings=dataclasses.replace(settings, setting="zero_shot"))
  return _scores(result)["retrieval"]


def _names(plan: Sequence[tuple[str, Unit]]) -> list[str]:
  """'condition' or 'condition language' of each (condition, unit) of a lab's plan."""
  return [" ".join(filter(None, (condition, unit.name))) for condition, unit in plan]


def _scores(result: dict) -> dict:
  """{task: {language: score}} of a benchmark run's results."""
  return {task: {lg: m["accuracy"] for lg, m in r["languages"].items()} for task, r in result["tasks"].items()}


class _Taken(Exception):
  """Another process holds an encoder's lock (`holder`: "pid N", ...)."""

  def __init__(self, holder: str):
    super().__init__(holder)
    self.holder = holder


@contextlib.contextmanager
def _holding(path: str, what: str, wait: bool):
  """Holds the lock `path` for the block. Held by another process: raises _Taken, or with `wait` waits for it
  (saying so once). An InUseError from the block (a stage's own run directory) is not caught here."""
  waited = False
  while True:
    try:
      locks.acquire(path, what)
      break
    except locks.InUseError as e:
      if not wait:
        raise _Taken(e.holder) from None
      if not waited:
        bookkeeping.say(f"lab: waiting for {e.holder}, which runs {what}")
        waited = True
      time.sleep(POLL_S)
  try:
    yield
  finally:
    locks.release(path)


def _run_unit(run_dir: str, condition: str, unit: Unit, data_dir: str, vocab: str, config: TransformerConfig,
              experiment: LabExperiment, settings: FinetuneSettings, partition: PartitionConfig) -> dict:
  """One encoder's stages (its pretraining, retrieval, fine-tuning per seed): {"retrieval": {language:
  accuracy}, "zero_shot" (and "translate_train"): {seed: {task: {language: score}}}}."""
  encoder = None if unit.pretrained_on is None else _pretrain(
      os.path.join(run_dir, "pretrain", "_".join(filter(None, (condition, unit.name)))), data_dir, vocab,
      config, unit.pretrained_on, experiment, partition)
  out: dict = {"retrieval": _retrieval(os.path.join(run_dir, condition, unit.name, "retrieval"), data_dir, vocab,
                                       config, encoder, settings, partition, unit.languages)}
  runs = [("zero_shot", condition)] + ([("in_language", "translate_train")]
                                       if condition == "pretrained" and experiment.translate_train else [])
  for (setting, folder), seed in itertools.product(runs, experiment.seeds):
    bookkeeping.say(f"lab: {condition} {unit.name} {setting} seed {seed}".replace("  ", " "))
    result = xtreme.lab(os.path.join(run_dir, folder, unit.name, f"seed{seed}"), data_dir, config, vocab,
                        labels_dir=data_dir, tasks=tuple(experiment.tasks),
                        languages={task: list(unit.languages) for task in experiment.tasks},
                        init_checkpoint=encoder, partition=partition,
                        settings=dataclasses.replace(settings, setting=setting, seed=seed))
    key = RESULTS[0] if setting == "zero_shot" else RESULTS[1]
    out.setdefault(key, {})[str(seed)] = _scores(result)
  return out


def _conditions(plan: Sequence[tuple[str, Unit]], done: dict) -> dict:
  """`results.json`'s conditions from the units `done` ({index in `plan`: `_run_unit`'s result}): per
  condition, its encoders' pretraining languages, their retrieval, and per seed their scores merged."""
  conditions: dict = {}
  for i, (condition, unit) in enumerate(plan):
    if i in done:
      entry = conditions.setdefault(condition, {"pretrained_on": [], "retrieval": {}})
      entry["pretrained_on"].append(unit.pretrained_on)
      entry["retrieval"].update(done[i]["retrieval"])
      for key in RESULTS:
        for seed, scores in done[i].get(key, {}).items():
          entry.setdefault(key, {}).setdefault(seed, []).append(scores)
  for entry in conditions.values():
    for key in RESULTS:
      if key in entry:
        entry[key] = {seed: merge(parts) for seed, parts in entry[key].items()}
  return conditions


def lab(run_dir: str, model_config: TransformerConfig, languages: LabLanguages = LabLanguages(),
        experiment: LabExperiment = LabExperiment(), settings: FinetuneSettings = FinetuneSettings(),
        partition: PartitionConfig = PartitionConfig()) -> dict:
  """Runs the lab (module docstring); returns `lab/results.json`'s content. `settings` holds the tasks'
  fine-tuning recipes (`pos`, `topic`) and the retrieval settings (`retrieval`); its setting and seed are the
  lab's to set."""
  import jax
  from xtreme_jax.evaluation import lab_report
  from xtreme_jax.runs.train import describe
  errors.require(isinstance(languages, LabLanguages), f"LAB_LANGUAGES must be a lab_dataset.LabLanguages, got "
                 f"{type(languages).__name__}")
  if "retrieval" not in settings.tasks:
    settings = dataclasses.replace(settings, tasks={**settings.tasks, "retrieval": RetrievalSettings(seq_len=64)})
  fs.makedirs(run_dir)
  with _holding(os.path.join(run_dir, ".lab.lock"), "the lab's data and vocabulary", wait=True):
    data_dir = _claim_data(run_dir, languages)
    vocab = _vocabulary(run_dir, data_dir, languages.names, experiment.vocab_size, model_config)
  results: dict = {"languages": languages.describe(), "experiment": describe(experiment), "conditions": {},
                   "chance": lab_report.chance(LabData(data_dir=data_dir), experiment.tasks)}
  plan = [(condition, unit) for condition in experiment.conditions
          for unit in units(condition, languages.names, experiment)]
  names, done, others = _names(plan), {}, []
  on_disk = bookkeeping.read_json(os.path.join(run_dir, "lab", "results.json")) or {"partial": True}
  finished = "partial" not in on_disk and bookkeeping.normalized(
      [on_disk.get("languages"), on_disk.get("experiment")]) == bookkeeping.normalized(
      [results["languages"], results["experiment"]])  # this lab's whole report is there already

  def run(i: int, wait: bool) -> None:
    condition, unit = plan[i]
    lock = os.path.join(run_dir, f".lab-{names[i].replace(' ', '_')}.lock")
    # The processes of one multi-process JAX job run every encoder together: no lock between them.
    with (_holding(lock, f"the lab's encoder {names[i]}", wait) if jax.process_count() == 1
          else contextlib.nullcontext()):
      done[i] = _run_unit(run_dir, condition, unit, data_dir, vocab, experiment.model(model_config, unit),
                          experiment, settings, partition)
    # The report so far (an interrupted lab shows what it has measured): it needs a pretrained encoder, and a
    # finished report of this lab is left as it is until this process writes its own.
    if len(done) < len(plan) and not finished and any(plan[j][0] == "pretrained" for j in done):
      results.update(conditions=_conditions(plan, done), partial=f"{len(done)} of {len(plan)} encoders done "
                     f"({', '.join(names[j] for j in sorted(done))})")
      written = lab_report.write(os.path.join(run_dir, "lab"), results)
      bookkeeping.say(f"lab: {results['partial']}; the report so far: {written['report.md']}")

  for i in range(len(plan)):
    try:
      run(i, wait=False)
    except _Taken as e:  # another process runs this encoder: take the next one
      bookkeeping.say(f"lab: {e.holder} runs the encoder {names[i]}; taking the next one")
      others.append(i)
  for i in others:  # then wait for each, and read its records
    run(i, wait=True)
  results.pop("partial", None)
  results["conditions"] = _conditions(plan, done)
  written = lab_report.write(os.path.join(run_dir, "lab"), results)
  print(lab_report.summary(results))
  print(f"lab report: {written['report.md']}")
  return results
