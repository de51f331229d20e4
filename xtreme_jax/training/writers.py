"""Metric writers: `<run_dir>/metrics.jsonl` always, TensorBoard event files when asked.

`JsonlWriter` has the methods of clu's `MetricWriter` interface
(`write_scalars`, `write_hparams`, `flush`, `close`) without subclassing it:
importing anything under `clu.metric_writers` imports TensorFlow, and a run
that builds no tf.data pipeline must not. TensorBoard events are clu's
`SummaryWriter` (tf.summary; needs the `tensorboard` package) in
`<run_dir>/tensorboard/`, written when `TrainerConfig.tensorboard` is True, or
'auto' (the default) and TensorFlow is already imported by the run (a
tf.data pipeline) and `tensorboard` is installed.

Each line of metrics.jsonl is `{"step": s, "train/loss": ..., ...}`. A
resumed run first drops the lines after the step it resumed from, so the file
tells the trajectory the parameters actually took; the trainer flushes (and
fsyncs) it before every checkpoint, so a killed run loses no line of a step
its checkpoint holds, and a resumed run reads its past back (`read_metrics`).

Under a URL run directory (`gs://...`) objects cannot be appended to: the
writer keeps the file's lines and uploads the whole object (atomic) on
`flush` / `close` and at most every `UPLOAD_SECONDS` while writing, so a run
killed without closing loses at most that much of metrics.jsonl.
TensorBoard's writer (tf.summary) writes to gs:// itself.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import sys
import time
from typing import Any, Mapping, Optional

from xtreme_jax import atomic, errors, fs

METRICS = "metrics.jsonl"
TENSORBOARD = "tensorboard"
UPLOAD_SECONDS = 60.0  # a remote metrics.jsonl is uploaded at least this often while written


def check_setting(setting: Any) -> None:
  """ConfigError when TensorBoard events are required but cannot be written."""
  if setting is True and not _installed():
    raise errors.ConfigError("TrainerConfig.tensorboard = True needs the tensorboard and clu packages: "
                             "pip install 'xtreme-jax[tensorboard]' (metrics.jsonl is written regardless)")


def _installed() -> bool:
  return all(importlib.util.find_spec(name) is not None for name in ("tensorboard", "clu"))


def tensorboard_enabled(setting: Any) -> bool:
  if setting == "auto":
    return "tensorflow" in sys.modules and _installed()
  return bool(setting)


class JsonlWriter:
  """Scalars as JSON lines; `resume_step` drops the records of later steps an interrupted run wrote."""

  def __init__(self, path: str, resume_step: Optional[int] = None):
    self.path = path
    if resume_step is not None and fs.exists(path):
      atomic.write_text(path, "".join(line for record, line in _records(path)
                                      if record.get("step", resume_step) <= resume_step))
    if fs.is_remote(path):
      self._file = _RemoteLines(path)
    else:
      os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
      self._file = open(path, "a", encoding="utf-8")

  def write_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
    self._file.write(json.dumps({"step": int(step), **{k: float(v) for k, v in scalars.items()}}) + "\n")

  def write_hparams(self, hparams: Mapping[str, Any]) -> None:
    self._file.write(json.dumps({"hparams": dict(hparams)}, default=str) + "\n")

  def flush(self) -> None:
    """Everything written so far reaches the disk (fsync) or the object store."""
    self._file.flush()
    if not isinstance(self._file, _RemoteLines):
      os.fsync(self._file.fileno())

  def close(self) -> None:
    self._file.close()


class _RemoteLines:
  """An append-only text file on an object store: the whole object is uploaded again when flushed."""

  def __init__(self, path: str):
    self.path = path
    self._text = [fs.read_text(path)] if fs.exists(path) else []
    self._dirty = False
    self._uploaded = time.monotonic()

  def write(self, line: str) -> None:
    self._text.append(line)
    self._dirty = True
    if time.monotonic() - self._uploaded >= UPLOAD_SECONDS:
      self.flush()

  def flush(self) -> None:
    if self._dirty:
      atomic.write_text(self.path, "".join(self._text))
      self._dirty = False
    self._uploaded = time.monotonic()

  def close(self) -> None:
    self.flush()


def _records(path: str) -> list[tuple[dict, str]]:
  """(record, line) of each complete record; a line cut off by a killed process is dropped."""
  out = []
  for line in io.StringIO(fs.read_text(path), newline=None):  # universal newlines, as open() read it
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      continue
    if isinstance(record, dict) and line.endswith("\n"):
      out.append((record, line))
  return out


def read_metrics(run_dir: str, up_to: int) -> tuple[list[dict], list[dict]]:
  """(train records, eval records) that `<run_dir>/metrics.jsonl` holds for steps 1..`up_to`, prefixes dropped
  (`{"step": 5, "loss": ...}`): the past of a resumed run."""
  path = os.path.join(run_dir, METRICS)
  train: list[dict] = []
  evals: list[dict] = []
  for record, _ in _records(path) if fs.exists(path) else []:
    if not isinstance(record.get("step"), int) or record["step"] > up_to:
      continue
    for prefix, out in (("train/", train), ("eval/", evals)):
      values = {k[len(prefix):]: v for k, v in record.items() if k.startswith(prefix)}
      if values:
        out.append({**values, "step": record["step"]})
  return train, evals


class MetricWriters:
  """Fans `write_scalars` / `flush` / `close` out to several writers (clu's MultiWriter, TF-free)."""

  def __init__(self, writers: list):
    self.writers = writers

  def write_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
    for w in self.writers:
      w.write_scalars(step, scalars)

  def flush(self) -> None:
    for w in self.writers:
      w.flush()

  def close(self) -> None:
    for w in self.writers:
      w.close()


def make_writers(run_dir: str, tensorboard: Any, resume_step: Optional[int] = None) -> MetricWriters:
  """metrics.jsonl, plus clu's TensorBoard SummaryWriter if `tensorboard` (True / False / 'auto') says so."""
  writers: list = [JsonlWriter(os.path.join(run_dir, METRICS), resume_step)]
  if tensorboard_enabled(tensorboard):
    from clu.metric_writers import SummaryWriter  # imports TensorFlow
    writers.append(SummaryWriter(os.path.join(run_dir, TENSORBOARD)))
  elif tensorboard == "auto" and "tensorflow" in sys.modules:
    logging.info("no TensorBoard events: the tensorboard package is not installed (metrics.jsonl has the metrics)")
  return MetricWriters(writers)
