"""The task registry: every benchmark's tasks as frozen specs (see `spec`), the single source of truth.

    from xtreme_jax.registry import XGLUE, XTREME
    XTREME.task("xnli").test_languages
    XGLUE.task("WPR").file("dev", "de")   # 'WPR/xglue.wpr.de.dev'

A benchmark's task names are its own (XGLUE's are upper case, as its folders). `MBERT` holds the tasks of
the mBERT paper (Wu & Dredze 2019), run as a benchmark of their own; `LAB` the transfer lab's tasks on
synthetic languages (`registry/lab.py`).
"""

from xtreme_jax.registry.lab import LAB
from xtreme_jax.registry.mbert import MBERT
from xtreme_jax.registry.spec import BenchmarkSpec, TaskSpec
from xtreme_jax.registry.xglue import XGLUE
from xtreme_jax.registry.xtreme import XTREME

BENCHMARKS = {"xtreme": XTREME, "xglue": XGLUE, "mbert": MBERT, "lab": LAB}

__all__ = ["BENCHMARKS", "BenchmarkSpec", "LAB", "MBERT", "TaskSpec", "XGLUE", "XTREME"]
