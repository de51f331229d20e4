"""Field checks for the config dataclasses: a bad value is a one-line `ConfigError` naming the key.

    require(self, "train_steps", positive_int, "a positive integer")
    -> ConfigError: TrainerConfig.train_steps = -5: expected a positive integer
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

from xtreme_jax import errors


def require(config: Any, name: str, ok: Callable[[Any], bool], expected: str) -> None:
  """Raise ConfigError unless `ok(config.<name>)`."""
  value = getattr(config, name)
  if not ok(value):
    raise errors.ConfigError(f"{type(config).__name__}.{name} = {value!r}: expected {expected}")


def is_int(value: Any) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def positive_int(value: Any) -> bool:
  return is_int(value) and value > 0


def non_negative_int(value: Any) -> bool:
  return is_int(value) and value >= 0


def positive(value: Any) -> bool:
  return is_number(value) and value > 0


def non_negative(value: Any) -> bool:
  return is_number(value) and value >= 0


def optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
  return lambda value: value is None or check(value)
