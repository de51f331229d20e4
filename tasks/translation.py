"""seqio Tasks for WMT14 translation, the VECO paper's En->De and En->Fr (`xtreme_jax.data.translation.wmt14`).

Importing `xtreme_tasks.translation` registers `wmt14_en_de` and
`wmt14_en_fr`: splits `train`, `validation` (newstest2013) and `test`
(newstest2014) of the TFDS builder `wmt14_translate` (`de-en`, `fr-en`),
never downloaded. Features are raw text, untokenized (as every task module
here): `inputs` the English sentence, `targets` the German / French one.
The TFDS data dir is looked up when a dataset is built: `set_data_dir(path)`,
else TFDS's default (`$TFDS_DATA_DIR` or `~/tensorflow_datasets`).

`metric_fns`: `metric(targets, predictions)` takes the references (the
Task's rows, or their target strings) and the predicted detokenised texts
and returns `bleu` (sacreBLEU: 13a tokenizer, mixed case, exp smoothing),
`tokenized_bleu` (lowercased, no smoothing, `bleu.tokenized_bleu`; VECO
reports it beside sacreBLEU), both 0-100, and `sacrebleu_signature`
(a `seqio.metrics.Text`).
"""

from __future__ import annotations

import functools
import os
from typing import Mapping, Optional, Sequence, Union

import seqio
import tensorflow as tf

from xtreme_jax.data.translation import wmt14
from xtreme_jax.evaluation import bleu
from xtreme_tasks.xtreme import output_features

FEATURES = {"inputs": (tf.string, 0), "targets": (tf.string, 0)}
_data_dir: Optional[str] = globals().get("_data_dir")  # kept across importlib.reload


def set_data_dir(path: Optional[Union[str, os.PathLike]]) -> None:
  """Sets the TFDS data dir the WMT14 datasets are read from (None: TFDS's default)."""
  global _data_dir
  _data_dir = None if path is None else os.fspath(path)


def task_name(direction: str) -> str:
  """`wmt14_en_de` for the direction `en_de` (`wmt14.DIRECTIONS`)."""
  wmt14.direction(direction)
  return f"wmt14_{direction}"


def _dataset_fn(direction: str, split: str, shuffle_files: bool, seed: Optional[int] = None) -> tf.data.Dataset:
  del seed
  ds = wmt14.dataset(direction, split, _data_dir, shuffle_files=shuffle_files)
  return ds.map(lambda ex: {"inputs": ex["source"], "targets": ex["target"]})


def _text(value) -> str:
  value = value["targets"] if isinstance(value, Mapping) else value
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def metric(targets: Sequence, predictions: Sequence[str]) -> dict:
  """Detokenised sacreBLEU, tokenised BLEU (0-100) and the sacreBLEU signature of `predictions`."""
  refs, preds = [_text(t) for t in targets], [_text(p) for p in predictions]
  sacre = bleu.sacrebleu_detok(preds, refs)
  return {"bleu": sacre.score, "tokenized_bleu": bleu.tokenized_bleu(preds, refs),
          "sacrebleu_signature": seqio.metrics.Text(textdata=sacre.signature)}


def register_task(direction: str) -> seqio.Task:
  """Registers (replacing any previous one) `task_name(direction)`."""
  name = task_name(direction)
  source = seqio.FunctionDataSource(dataset_fn=functools.partial(_dataset_fn, direction), splits=wmt14.SPLITS)
  seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(name, source=source, output_features=output_features(FEATURES), preprocessors=[],
                                metric_fns=[metric])


def register_all() -> None:
  for direction in wmt14.DIRECTIONS:
    register_task(direction)


register_all()
