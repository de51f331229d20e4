"""The task registry: every benchmark's tasks as frozen specs (see `spec`), the single source of truth.

    from xtreme_jax.registry import XTREME
    XTREME.task("xnli").test_languages
"""

from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec
from xtreme_jax.registry.xtreme import XTREME

BENCHMARKS = {"xtreme": XTREME}

__all__ = ["BENCHMARKS", "BenchmarkSpec", "TaskSpec", "XTREME"]
