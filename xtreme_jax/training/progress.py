"""What a training run shows and accumulates while it runs: the checked step records, evaluations and throughput
(`Progress`), the logged loss of each objective (`window_means`) and an evaluation's one-line summary
(`format_scores`)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Mapping, Sequence


@dataclasses.dataclass
class Progress:
  """What `fit` accumulates: checked step records, evaluations, the steps not fetched yet, a throughput window."""

  start: int
  began: float = dataclasses.field(default_factory=time.perf_counter)  # when start-up began (restore or init)
  history: list = dataclasses.field(default_factory=list)
  evals: list = dataclasses.field(default_factory=list)
  earlier: list = dataclasses.field(default_factory=list)  # a resumed run's logged steps before `start`
  logged: int = 0  # the last step written to the metrics
  pending: list = dataclasses.field(default_factory=list)  # (step, metrics on the device), oldest first
  window_start: float = dataclasses.field(default_factory=time.perf_counter)
  examples: int = 0
  tokens: int = 0
  paused: float = 0.0

  @contextlib.contextmanager
  def pause(self):
    """Time inside does not count as training time (evaluation, checkpoints)."""
    t = time.perf_counter()
    try:
      yield
    finally:
      self.paused += time.perf_counter() - t

  def throughput(self) -> dict:
    """Examples and tokens per second of training since the last call."""
    now = time.perf_counter()
    elapsed = max(now - self.window_start - self.paused, 1e-9)
    out = {"examples_per_s": self.examples / elapsed, "tokens_per_s": self.tokens / elapsed}
    self.window_start, self.examples, self.tokens, self.paused = now, 0, 0, 0.0
    return out


def window_means(records: Sequence[Mapping[str, float]]) -> dict[str, float]:
  """`mean_<key>` for `loss` and every `<objective>_loss` over `records` (the steps since the last log line),
  each weighted by its weight as the step weighted it (`<objective>_weight` where the record has one, else
  `weight`): one steady value per objective however the batches alternate (VECO's monolingual / bilingual)."""
  out = {}
  for key in dict.fromkeys(k for r in records for k in r):
    if key != "loss" and not key.endswith("_loss"):
      continue
    weight_key = key[:-len("loss")] + "weight"
    pairs = [(r[key], r.get(weight_key, r.get("weight", 1.0))) for r in records if key in r]
    total = sum(w for _, w in pairs)
    if total > 0:
      out[f"mean_{key}"] = sum(value * w for value, w in pairs) / total
  return out


def format_scores(record: Mapping[str, float]) -> str:
  """An evaluation's scores on one line: every key but `step`, the parts of a key (`key/<part>`, e.g. one per
  dev language) folded into their lowest and highest; the metrics file keeps each part."""
  parts: dict[str, list] = {}
  for key, value in record.items():
    head, _, part = key.partition("/")
    if part and head in record:
      parts.setdefault(head, []).append((value, part))
  shown = []
  for key, value in record.items():
    if key == "step" or "/" in key and key.partition("/")[0] in parts:
      continue
    if key in parts:
      (low, low_part), (high, high_part) = min(parts[key]), max(parts[key])
      shown.append(f"{key}={value:.4f} (lowest {low_part} {low:.4f}, highest {high_part} {high:.4f} "
                   f"of {len(parts[key])})")
    else:
      shown.append(f"{key}={value:.4f}")
  return ", ".join(shown)
