"""training/stopping.py on its own: the plateau schedule's steps, the finite-metrics check and the re-run advice
(the Trainer's use of them: tests/test_training.py, tests/test_run_safety.py)."""

import math

import pytest

from xtreme_jax.training.stopping import NonFiniteLossError, PlateauSchedule, PlateauState, checked, nan_advice

TIER = "unit"  # conftest.py: this file's tier


def test_plateau_state_lowers_after_patience_evaluations_and_stops_below_the_floor():
  schedule, state = PlateauSchedule(factor=0.5, patience=2, min_learning_rate=1e-3), PlateauState()
  improved = [False, False, True, False, False, False, False, False]
  notes = [state.after_evaluation(schedule, i, 4e-3) for i in improved]
  # By hand: two evaluations without a new best halve the rate (4e-3 -> 2e-3), a new best restarts the count,
  # two more halve it to 1e-3 (not below the floor), two more to 5e-4 < 1e-3: stop; after that nothing moves.
  assert notes == ["", "; learning rate lowered to 2.00e-03", "", "", "; learning rate lowered to 1.00e-03", "",
                   "; learning rate 5.00e-04 < 1e-03: stopping", ""]
  assert (state.scale, state.waited, state.stopped) == (0.125, 0, True)


def test_checked_returns_floats_with_the_step_and_stops_on_a_non_finite_value():
  def advice():
    raise AssertionError("asked for advice although every value is finite")

  assert checked(7, {"loss": 2, "grad_norm": 1.5, "update_norm": 0.25}, advice) == {
      "loss": 2.0, "grad_norm": 1.5, "update_norm": 0.25, "step": 7}
  with pytest.raises(NonFiniteLossError, match=r"^non-finite grad_norm=inf, update_norm=nan at step 9; stopped\. "
                                               r"lower it$"):
    checked(9, {"loss": 1.0, "grad_norm": math.inf, "update_norm": math.nan}, lambda: "lower it")


def test_nan_advice_names_what_a_re_run_accepts():
  flag = "--gin.RESUME_OVERRIDES=\"{'learning_rate': 0.0001}\""
  assert nan_advice(1e-3, "/runs/a", None, claimed=False) == (
      "No checkpoint was written in /runs/a; lower the learning rate in the configuration (e.g. learning_rate=0.0001) "
      "or check the data, then re-run")
  assert nan_advice(1e-3, "/runs/a", None, claimed=True) == (
      "No checkpoint was written yet in /runs/a. To start the run again from step 0 with a lower learning rate, "
      f"re-run the same command with {flag} (or check the data)")
  assert nan_advice(1e-3, "/runs/a", 40, claimed=True) == (
      "The last good checkpoint is step 40 in /runs/a. To resume from it with a lower learning rate, re-run the "
      f"same command with {flag} (or check the data)")
