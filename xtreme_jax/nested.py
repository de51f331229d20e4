"""Nested dicts as flat `{dotted key: leaf}` dicts: flatten, unflatten, merge, compare."""

from __future__ import annotations

import json
from typing import Any

ABSENT = "<absent>"


def flatten(tree: dict, sep: str = ".", prefix: str = "") -> dict:
  """{"a": {"b": 1}} -> {"a.b": 1} (empty dicts vanish)."""
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(flatten(value, sep, f"{prefix}{key}{sep}"))
    else:
      out[f"{prefix}{key}"] = value
  return out


def unflatten(flat: dict, sep: str = ".") -> dict:
  """The inverse of `flatten`."""
  out: dict = {}
  for key, value in flat.items():
    *parents, leaf = key.split(sep)
    node = out
    for p in parents:
      node = node.setdefault(p, {})
    node[leaf] = value
  return out


def merge(base: dict, changes: dict) -> dict:
  """`base` with the leaves of `changes` set (recursively; neither is modified)."""
  out = dict(base)
  for key, value in changes.items():
    out[key] = merge(out.get(key, {}), value) if isinstance(value, dict) else value
  return out


def differing_keys(old: dict, new: dict) -> dict[str, tuple]:
  """{dotted key: (old, new)} of the leaves that differ (ABSENT where one side lacks the key)."""
  a, b = flatten(old), flatten(new)
  return {k: (a.get(k, ABSENT), b.get(k, ABSENT)) for k in sorted(set(a) | set(b))
          if a.get(k, ABSENT) != b.get(k, ABSENT)}


def _short(value: Any, width: int = 40) -> str:
  text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
  return text if len(text) <= width else text[: width - 3] + "..."


def describe(diffs: dict[str, tuple]) -> str:
  """'key (old -> new), ...' for the output of `differing_keys`."""
  return ", ".join(f"{k} ({_short(a)} -> {_short(b)})" for k, (a, b) in diffs.items())
