"""FILTER's soft labels: a teacher's target-side logits for the student's training rows, on disk.

`<teacher model dir>/soft_labels.npz` holds one float32 array per soft-label
key (`filter_kinds.Filter.soft_label_keys`), row i for training row i, and
`soft_labels.json` what they belong to: the task, the digest of the training
rows (`rows_digest`: both sides' token ids, in order), the teacher models'
identities and how they were combined. Several teachers (seeds) are averaged
in logits, as the authors' code (the mean of the teachers' logits files):
the file holds mean_t logits_t, before any temperature (the student's KL
softens them: `models/filter.py`). Format 1 held log(mean_t softmax(logits_t))
and is refused, never read as logits (the runner rewrites it from the
teachers). Both files are written atomically, the JSON last, so a file pair
is complete when the JSON exists and names it.

`load` gives a student the arrays only if they are for its task, its training
rows and the teachers it expects; otherwise one ConfigError naming the
expected path and what differs (or how to make them: train the teacher).
"""

from __future__ import annotations

import hashlib
import io
import os
from typing import Mapping, Sequence

import numpy as np

from xtreme_jax import atomic, errors, fs, hf

NPZ, META = "soft_labels.npz", "soft_labels.json"
FORMAT = 2  # 2: the teachers' mean logits; 1: log of their mean probabilities (refused)


def rows_digest(features: Sequence[Mapping]) -> str:
  """sha256 over every row's source and target token ids, in order (what the soft labels are aligned with)."""
  h = hashlib.sha256()
  for f in features:
    for key in ("source_input_ids", "input_ids"):
      h.update(np.ascontiguousarray(np.asarray(f[key], np.int32)).tobytes())
  return h.hexdigest()


def average(logits: Sequence[np.ndarray]) -> np.ndarray:
  """The mean of the teachers' logits (float32); one teacher's logits are returned as they are."""
  if len(logits) == 1:
    return np.asarray(logits[0], np.float32)
  return np.mean(np.stack([np.asarray(x, np.float64) for x in logits]), axis=0).astype(np.float32)


def save(directory: str, task: str, digest: str, teachers: Sequence[str], arrays: Mapping[str, np.ndarray]) -> str:
  """Writes the soft labels into `directory`; returns the .npz path."""
  buffer = io.BytesIO()
  np.savez(buffer, **{k: np.asarray(v, np.float32) for k, v in arrays.items()})
  path = os.path.join(directory, NPZ)
  atomic.write_bytes(path, buffer.getvalue())
  atomic.write_json(os.path.join(directory, META), {
      "format": FORMAT, "task": task, "rows": digest, "teachers": list(teachers), "keys": sorted(arrays),
      "shapes": {k: list(np.shape(v)) for k, v in arrays.items()}, "combined": "mean logits"})
  return path


def load(directory: str, task: str, digest: str, teachers: Sequence[str]) -> dict[str, np.ndarray]:
  """The soft labels in `directory` if they belong to `task`, these training rows and `teachers`; else a
  ConfigError naming the expected path."""
  path, meta_path = os.path.join(directory, NPZ), os.path.join(directory, META)
  if not fs.isfile(meta_path) or not fs.isfile(path):
    raise errors.ConfigError(f"the FILTER student needs its teacher's soft labels at {path}, which do not exist; "
                             "train the teacher first (setting 'filter_teacher', or FilterSettings.train_teacher "
                             "= True to let the student run train it)")
  meta = hf.read_json(meta_path, "FILTER soft labels' metadata (soft_labels.json)")
  expected = {"format": FORMAT, "task": task, "rows": digest, "teachers": list(teachers)}
  differ = [k for k, v in expected.items() if meta.get(k) != v]
  if differ:
    what = {"format": _format(meta.get("format")), "task": f"task {meta.get('task')!r}, not {task!r}",
            "rows": "other training rows (another task, data, vocabulary or recipe)",
            "teachers": "other teacher models (retrained, or another number of teachers)"}
    raise errors.ConfigError(f"the soft labels at {path} are for {'; '.join(what[k] for k in differ)}; re-run the "
                             "teacher (setting 'filter_teacher') to rewrite them for this student")
  with np.load(io.BytesIO(fs.read_bytes(path))) as data:
    arrays = {k: data[k] for k in data.files}
  if sorted(arrays) != meta.get("keys"):
    raise errors.DataError(f"{path}: arrays {sorted(arrays)}; {meta_path} lists {meta.get('keys')}")
  return arrays


def _format(found) -> str:
  old = " (several teachers' probabilities averaged)" if found == 1 else ""
  return f"format {found!r}{old}, not {FORMAT} (the teachers' logits averaged)"
