"""XTREME's analyses (Hu et al. 2020, Section 6): seen / unseen in English training data, language families, scripts.

* `entities_seen_unseen`: the gold entities of a target test set split by
  whether their string (the entity's words joined by a space) is an entity
  of the English training data (any type); per part, the share of gold
  entities predicted exactly (same words, same type). Recall is the measure
  here because a predicted entity of an unseen string belongs to neither
  part's precision in a well-defined way.
* `pos_trigrams_seen_unseen`: each test token's gold tag trigram (previous,
  own, next tag; sentence boundaries as `<s>` / `</s>`) is seen when it
  occurs in the English training data; token accuracy per part.
* `by_group`: the mean per-language score of each language family
  (`plots.LANGUAGE_FAMILY`) or writing system (`SCRIPT`).

`write_report(out_dir, ...)` puts them in `analyses.md`; the runner writes
it for XTREME runs scored against labels (`report/analyses.md`).
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Mapping, Optional, Sequence

from xtreme_jax import atomic
from xtreme_jax.evaluation import metrics, plots

# Writing system of XTREME's languages (and a few of XGLUE's).
SCRIPT = {
    **{lg: "Latin" for lg in ("af", "de", "en", "es", "et", "eu", "fi", "fr", "hu", "id", "it", "jv", "ms", "nl",
                              "pt", "sw", "tl", "tr", "vi", "yo", "pl", "ro", "lt", "az", "ht", "qu", "wo")},
    **{lg: "Cyrillic" for lg in ("bg", "kk", "ru", "uk")},
    **{lg: "Arabic" for lg in ("ar", "fa", "ur")},
    **{lg: "Devanagari" for lg in ("hi", "mr")},
    "bn": "Bengali", "el": "Greek", "he": "Hebrew", "ja": "Japanese", "ka": "Georgian", "ko": "Hangul",
    "ml": "Malayalam", "my": "Myanmar", "ta": "Tamil", "te": "Telugu", "th": "Thai", "zh": "Han",
    "gu": "Gujarati", "pa": "Gurmukhi",
}


def _entities(tokens: Sequence[str], tags: Sequence[str]) -> list[tuple[str, str]]:
  """(type, string) of each entity of one sentence (seqeval 0.0.x chunks, as the scorer)."""
  return [(t, " ".join(tokens[s:e + 1])) for t, s, e in metrics.get_chunks([tags]) if e < len(tokens)]


def entities_seen_unseen(train: Iterable[Mapping], tokens: Sequence[Sequence[str]], gold: Sequence[Sequence[str]],
                         predicted: Sequence[Sequence[str]]) -> dict:
  """{"seen" | "unseen": {"entities": n, "recall": % of them predicted exactly}} (module docstring)."""
  known = {text for r in train for _, text in _entities(r["tokens"], r["tags"])}
  counts = {"seen": [0, 0], "unseen": [0, 0]}
  for words, g, p in zip(tokens, gold, predicted):
    found = {(t, s, e) for t, s, e in metrics.get_chunks([p])}
    for t, s, e in metrics.get_chunks([g]):
      part = counts["seen" if " ".join(words[s:e + 1]) in known else "unseen"]
      part[0] += 1
      part[1] += (t, s, e) in found
  return {k: {"entities": n, "recall": 100.0 * hit / n if n else None} for k, (n, hit) in counts.items()}


def _trigrams(tags: Sequence[str]) -> list[tuple[str, str, str]]:
  padded = ["<s>", *tags, "</s>"]
  return [tuple(padded[i:i + 3]) for i in range(len(tags))]


def pos_trigrams_seen_unseen(train: Iterable[Mapping], gold: Sequence[Sequence[str]],
                             predicted: Sequence[Sequence[str]]) -> dict:
  """{"seen" | "unseen": {"tokens": n, "accuracy": %}} by the gold tag trigram around each token."""
  known = {t for r in train for t in _trigrams(r["tags"])}
  counts = {"seen": [0, 0], "unseen": [0, 0]}
  for g, p in zip(gold, predicted):
    for trigram, gt, pt in zip(_trigrams(g), g, p):
      part = counts["seen" if trigram in known else "unseen"]
      part[0] += 1
      part[1] += gt == pt
  return {k: {"tokens": n, "accuracy": 100.0 * hit / n if n else None} for k, (n, hit) in counts.items()}


def by_group(per_language: Mapping[str, float], group_of: Callable[[str], str]) -> dict[str, float]:
  """{group: mean score of its languages}, groups in first-seen order."""
  groups: dict[str, list[float]] = {}
  for lg, score in per_language.items():
    groups.setdefault(group_of(lg), []).append(score)
  return {g: sum(v) / len(v) for g, v in groups.items()}


def _fmt(value: Optional[float]) -> str:
  return "-" if value is None else f"{value:.1f}"


def markdown(task_scores: Mapping[str, Mapping[str, float]], seen: Mapping[str, Mapping[str, dict]]) -> str:
  """The report: per task, mean score by family and by script; per tagging task and language, seen / unseen."""
  lines = ["# Analyses (XTREME, Section 6)", ""]
  for task, per_language in task_scores.items():
    lines += [f"## {task}", "", "| group | mean |", "|---|---:|"]
    lines += [f"| {g} | {s:.1f} |" for g, s in by_group(per_language, plots.language_family).items()]
    lines += [f"| script: {g} | {s:.1f} |" for g, s in by_group(per_language, lambda lg: SCRIPT.get(lg, "other"))
              .items()]
    lines.append("")
    if task in seen:
      measure = "recall" if next(iter(seen[task].values()))["seen"].get("entities") is not None else "accuracy"
      unit = "entities" if measure == "recall" else "tokens"
      lines += [f"Seen / unseen in English training ({measure}, {unit}):", "",
                f"| language | seen | unseen | seen {unit} | unseen {unit} |", "|---|---:|---:|---:|---:|"]
      lines += [f"| {lg} | {_fmt(r['seen'][measure])} | {_fmt(r['unseen'][measure])} | {r['seen'][unit]} | "
                f"{r['unseen'][unit]} |" for lg, r in seen[task].items()]
      lines.append("")
  return "\n".join(lines)


def write_report(out_dir: str, task_scores: Mapping[str, Mapping[str, float]],
                 seen: Mapping[str, Mapping[str, dict]]) -> str:
  path = os.path.join(out_dir, "analyses.md")
  atomic.write_text(path, markdown(task_scores, seen))
  return path
