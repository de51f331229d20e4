"""The markdown parts every report shares: numbers with one decimal (`fmt`), means (`mean`), tables
(`markdown`), languages in a benchmark's order (`ordered_languages`) and each metric's display name
(`METRIC_LABEL`)."""

from __future__ import annotations

from typing import Optional, Sequence

from xtreme_jax.evaluation import metrics

ENGLISH = "en"
# Display name of each metric a report shows (QG / NTG "bleu": lowercased sacreBLEU, as the official scorer).
METRIC_LABEL = {"accuracy": "Acc.", "f1": "F1", "em_f1": "(EM + F1) / 2", "exact_match": "EM",
                "precision": "Precision (chunks)", "ndcg": "nDCG", "bleu": "BLEU", "las": "LAS", "uas": "UAS"}


def fmt(value: Optional[float]) -> str:
  return "-" if value is None else f"{value:.1f}"


def mean(values: Sequence[float]) -> Optional[float]:
  values = list(values)
  return sum(values) / len(values) if values else None


def markdown(header: Sequence[str], align: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
  """A markdown table: `align` holds each column's `---` / `---:`."""
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  return "\n".join(lines)


def ordered_languages(task: Optional[str], languages: Sequence[str]) -> list[str]:
  """English first, then the XTREME task's benchmark order, then the others as given."""
  benchmark = metrics.TASK_LANGUAGES.get(task, ()) if task else ()
  present = list(dict.fromkeys(languages))
  known = [lg for lg in benchmark if lg in present and lg != ENGLISH]
  extra = [lg for lg in present if lg not in benchmark and lg != ENGLISH]
  return ([ENGLISH] if ENGLISH in present else []) + known + extra
