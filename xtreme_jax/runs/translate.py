"""Translation fine-tuning end to end (WMT14 En-De / En-Fr, VECO's recipe): train, average, decode, score.

`translate` (Gin `translate.translate`, `gin_configs/runs/translate.gin`):

1. trains `model` (a `Seq2SeqModel`) on `train_data` in `run_dir`, a run
   directory like `pretrain`'s (locked, fingerprinted, resumable), the
   encoder-decoder cut from `init_checkpoint` by `veco_assembly.seq2seq_backbone`
   (a VECO stack from `export-veco`, or an encoder with fresh cross-attention);
2. averages the newest `average_last` checkpoints (VECO: 10;
   `training/averaging.py`; the trainer must keep that many);
3. decodes `test` with the average (the model's `decode_settings`: VECO beam 5);
4. writes `<run_dir>/translations-<split>.txt` (one line per source) and
   `<run_dir>/scores-<split>.json`: detokenised sacreBLEU with its signature
   (13a, mixed case; the VECO paper's) and case-insensitive tokenised BLEU
   (`evaluation/bleu.py`).

`translate_task` (Gin `runs/translate_task.gin`, after a translation
experiment) translates a benchmark task's file with such a run's model into
the layout FILTER's pairs read (`data/filter/filter_translations.py`).

The training data is `data/translation/wmt14_batches.WmtStream`: the TFDS training split
streamed, tokenized and packed into token-count batches, resumable.
"""

from __future__ import annotations

import itertools
import logging
import os
from typing import Optional

from xtreme_jax import atomic, errors
from xtreme_jax.data.filter import filter_translations
from xtreme_jax.data.translation import wmt14
from xtreme_jax.data.translation.wmt14_batches import WmtStream
from xtreme_jax.evaluation import bleu
from xtreme_jax.models.seq2seq import DecodeSettings, Seq2SeqModel
from xtreme_jax.models.veco_assembly import Seq2SeqAssembly, seq2seq_backbone
from xtreme_jax.runs import task_kinds
from xtreme_jax.runs.train import run_training
from xtreme_jax.runs.benchmarks import PROTOCOLS
from xtreme_jax.runs.inference import predict_features
from xtreme_jax.runs.recipes import TaskSettings
from xtreme_jax.training import averaging
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.partitioning import PartitionConfig
from xtreme_jax.training.trainer import Trainer, TrainerConfig


def translate(run_dir: str, model: Seq2SeqModel, train_data: WmtStream, test_split: str = "test",
              test_limit: Optional[int] = None, init_checkpoint: Optional[str] = None, decoder_from: str = "last",
              optimizer: OptimizerConfig = OptimizerConfig(learning_rate=1e-4),
              trainer: TrainerConfig = TrainerConfig(), partition: PartitionConfig = PartitionConfig(),
              average_last: int = 10, decode_batch: int = 32, resume_overrides: Optional[dict] = None) -> dict:
  """Train, average the last checkpoints, decode `test_split` of the training data's direction, score it."""
  if trainer.keep_checkpoints < average_last:
    raise errors.ConfigError(f"average_last={average_last} but the trainer keeps {trainer.keep_checkpoints} "
                             "checkpoints; raise TrainerConfig.keep_checkpoints")
  assembly = Seq2SeqAssembly(model.seq2seq.decoder_layers, decoder_from, model.seq2seq.scale_decoder_embeddings,
                             fresh_cross_attention=True)
  run_training("translate", run_dir, model, train_data, None, optimizer, trainer, partition, init_checkpoint,
         resume_overrides, transform=lambda params: seq2seq_backbone(params, model.config, assembly))
  done = averaging.average_checkpoints(run_dir, average_last, allow_fewer=True)
  print(f"averaged steps {', '.join(map(str, done.steps))} -> {done.path}")
  records = list(itertools.islice(wmt14.records(train_data.direction, test_split, train_data.data_dir,
                                                train_data.text_dir), test_limit))
  hypotheses = decode(run_dir, model, train_data, records, partition, decode_batch)
  scores = score(hypotheses, [r["target"] for r in records])
  split = wmt14.tfds_split(test_split)
  atomic.write_text(os.path.join(run_dir, f"translations-{split}.txt"), "".join(h + "\n" for h in hypotheses))
  atomic.write_json(os.path.join(run_dir, f"scores-{split}.json"), {**scores, "averaged_steps": list(done.steps)})
  print(f"WMT14 {train_data.direction} {split}: sacreBLEU {scores['sacrebleu']:.2f} ({scores['signature']}), "
        f"tokenized BLEU {scores['tokenized_bleu']:.2f}")
  return scores


def decode(run_dir: str, model: Seq2SeqModel, data: WmtStream, records: list[dict], partition: PartitionConfig,
           batch_size: int) -> list[str]:
  """Beam-search translations of `records` with the run's averaged (else newest) parameters."""
  kind = task_kinds.KINDS["generation"]
  recipe = _recipe(data, model.decode_settings or DecodeSettings())
  examples = [{**r, "target": None, "language": "xx"} for r in records]
  featurised = kind.featurise(None, examples, data.vocab, recipe, training=False)
  runner = Trainer(model, OptimizerConfig(), TrainerConfig(train_steps=1, progress_bar=False), partition, run_dir)
  try:
    params, source = averaging.restore_averaged_or_latest(run_dir)
    check_decoder(params, run_dir)
    logging.info("decoding with the parameters of %s", source)
    runner.prepare(data.shape_batch(*runner.feed_slot))  # the parameters' shapes
    predicted = predict_features(runner, runner.place_params(params), featurised.features, kind.predict_keys,
                                 batch_size)
  finally:
    runner.close()
  return kind.decode(None, recipe, lambda keys: predicted, featurised, data.vocab)


def translate_task(run_dir: str, model: Seq2SeqModel, data: WmtStream, task: str, language: str, split: str,
                   data_dir: str, translations_dir: str, benchmark: str = "xtreme",
                   partition: PartitionConfig = PartitionConfig(), decode_batch: int = 32) -> str:
  """Translates one file of a benchmark task with the run's model into the folder FILTER reads translations
  from (`data/filter/filter_translations.py`): split `train` the English training file into `language`, dev / test
  the `language` file into English. The model translates `data`'s direction, which must match."""
  source, target = ("en", language) if split == "train" else (language, "en")
  pair = wmt14.direction(data.direction)
  if (pair.source, pair.target) != (source, target):
    raise errors.ConfigError(f"{task} {split} {language}: needs a {source}->{target} model, but {run_dir} translates "
                             f"{pair.source}->{pair.target} (DIRECTION={data.direction!r})")
  bench = PROTOCOLS[benchmark].data("official", data_dir, translations_dir)

  def translate_texts(texts):
    records = [{"id": str(i), "source": t} for i, t in enumerate(texts)]
    return decode(run_dir, model, data, records, partition, decode_batch)

  path = filter_translations.write_translation(task, bench, language, split, translate_texts, translations_dir)
  print(f"wrote {path}")
  return path


def check_decoder(params: dict, where: str) -> None:
  """A one-line ConfigError when `params` (a run's checkpoint) hold no decoder to decode with."""
  if "decoder" not in params.get("backbone", {}):
    raise errors.ConfigError(f"{where}: the checkpoint has no decoder (params/backbone/decoder): it is not an "
                             "encoder-decoder run; decode a run of runs/translate.gin (or XGLUE QG / NTG)")


def _recipe(data: WmtStream, settings: DecodeSettings) -> TaskSettings:
  """The generation task kind's recipe that featurises and decodes `data`'s sources as `settings` say."""
  return TaskSettings(seq_len=data.source_len, generation=task_kinds.GenerationSettings(
      target_len=settings.max_length, beam_size=settings.beam_size, alpha=settings.alpha,
      length_penalty=settings.length_penalty))


def score(hypotheses: list[str], references: list[str]) -> dict:
  """Detokenised sacreBLEU (13a, mixed case) with its signature and case-insensitive tokenised BLEU, 0-100."""
  sacre = bleu.sacrebleu_detok(hypotheses, references)
  return {"sacrebleu": sacre.score, "signature": sacre.signature,
          "tokenized_bleu": bleu.tokenized_bleu(hypotheses, references), "sentences": len(hypotheses)}
