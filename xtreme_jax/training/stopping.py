"""Why a training run stops before its last step: SIGTERM / SIGINT (`stop_signals`, `Preempted`), a loss, gradient
norm or update norm that is not finite (`checked`, `NonFiniteLossError`, with the flag a re-run needs) and a
dev score that stopped improving (`PlateauSchedule`, `PlateauState`)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import signal
import threading
from typing import Mapping, Optional

from xtreme_jax import errors
from xtreme_jax.training import validation as v


class NonFiniteLossError(errors.UserError, RuntimeError):
  """Training produced a NaN / Inf loss, gradient norm or update norm (exit code 1 through the CLI)."""

  exit_code = 1


class Preempted(errors.UserError):
  """SIGTERM / SIGINT stopped the run after its checkpoint was saved; exit code 128 + the signal number."""

  def __init__(self, message: str, signum: int):
    super().__init__(message)
    self.signum = signum

  @property
  def exit_code(self) -> int:  # a property, so that it survives gin's exception proxy
    return 128 + self.signum


@contextlib.contextmanager
def stop_signals(install: bool = True):
  """Yields a list that SIGTERM / SIGINT append their number to; the previous handlers come back after.

  A second signal gets the previous handler (SIGINT: KeyboardInterrupt at
  once). Handlers are only installed from the main thread.
  """
  received: list[int] = []
  previous: dict = {}
  if not install or threading.current_thread() is not threading.main_thread():
    yield received
    return

  def handle(signum, frame):
    if received:
      signal.signal(signum, previous.get(signum) or signal.SIG_DFL)
      signal.raise_signal(signum)
      return
    received.append(signum)
    logging.warning("received %s: saving a checkpoint after this step, then stopping (send it again to stop at "
                    "once)", signal.Signals(signum).name)

  for signum in (signal.SIGTERM, signal.SIGINT):
    previous[signum] = signal.signal(signum, handle)
  try:
    yield received
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def checked(step: int, metrics: Mapping, advice) -> dict:
  """The step's (fetched) metrics as floats with its `step`; `NonFiniteLossError` with `advice()` (what a re-run
  must change) if the loss, gradient norm or update norm is not finite."""
  record = {k: float(val) for k, val in metrics.items()}
  record["step"] = step
  bad = [k for k in ("loss", "grad_norm", "update_norm") if not math.isfinite(record[k])]
  if bad:
    what = f"non-finite {', '.join(f'{k}={record[k]}' for k in bad)} at step {step}; stopped."
    raise NonFiniteLossError(f"{what} {advice()}")
  return record


def nan_advice(learning_rate: float, run_dir: str, last_checkpoint: Optional[int], claimed: bool) -> str:
  """What a re-run that avoids the NaN must change.

  A claimed run directory (committed now, or by the run this one resumes)
  refuses another learning rate, so the advice is RESUME_OVERRIDES: it
  resumes from the last checkpoint, or without one restarts from step 0 with
  the override recorded. Before the claim (a NaN at the first step) nothing
  is claimed: change the configured rate.
  """
  lower = float(f"{learning_rate / 10:.3g}")
  flag = f"--gin.RESUME_OVERRIDES=\"{ {'learning_rate': lower} }\""
  if not claimed:
    return (f"No checkpoint was written in {run_dir}; lower the learning rate in the configuration "
            f"(e.g. learning_rate={lower}) or check the data, then re-run")
  if last_checkpoint is None:
    return (f"No checkpoint was written yet in {run_dir}. To start the run again from step 0 with a lower "
            f"learning rate, re-run the same command with {flag} (or check the data)")
  return (f"The last good checkpoint is step {last_checkpoint} in {run_dir}. To resume from it with a lower "
          f"learning rate, re-run the same command with {flag} (or check the data)")


@dataclasses.dataclass(frozen=True)
class PlateauSchedule:
  """Multiply the learning rate by `factor` after `patience` evaluations in a row without a new best
  `select_metric`; stop once the rate is below `min_learning_rate` (Wu & Dredze's feature-based recipe:
  halve it, stop below 1e-5). Best with `OptimizerConfig.schedule = "constant"`."""

  factor: float = 0.5
  patience: int = 1
  min_learning_rate: float = 1e-5

  def __post_init__(self):
    v.require(self, "factor", lambda x: v.is_number(x) and 0 < x < 1, "a number in (0, 1)")
    v.require(self, "patience", v.positive_int, "a positive integer")
    v.require(self, "min_learning_rate", v.non_negative, "a number >= 0")


@dataclasses.dataclass
class PlateauState:
  """Where a `PlateauSchedule` stands: the rate's scale, evaluations since the last best, stopped or not (saved
  with each checkpoint as a dict)."""

  scale: float = 1.0
  waited: int = 0
  stopped: bool = False

  def after_evaluation(self, schedule: PlateauSchedule, improved: bool, learning_rate: float) -> str:
    """Advance after an evaluation that did (or did not) bring a new best; `learning_rate` is the unscaled
    rate. Returns a note for the evaluation's line ('' when the rate stays)."""
    if self.stopped:
      return ""
    if improved:
      self.waited = 0
      return ""
    self.waited += 1
    if self.waited < schedule.patience:
      return ""
    self.waited, self.scale = 0, self.scale * schedule.factor
    rate = learning_rate * self.scale
    if rate < schedule.min_learning_rate:
      self.stopped = True
      return f"; learning rate {rate:.2e} < {schedule.min_learning_rate:.0e}: stopping"
    return f"; learning rate lowered to {rate:.2e}"
