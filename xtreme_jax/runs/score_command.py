"""Score a benchmark's submission folder against its gold (`xtreme-jax score`).

The benchmark's protocol scores it (`benchmarks.PROTOCOLS`: XTREME's `evaluation/scorer.py`, XGLUE's
`xglue_scorer.py`, the mBERT paper's and the lab's `mbert_scorer.py`); the table is printed and the JSON
written, by default beside the submission folder (`<parent>/scores-<folder name>.json`, never inside it);
`--report DIR` also writes the benchmark's report.
A missing folder, or one without a single prediction file that has its gold, is refused. Folders and `--out`
may be URLs (`gs://...`, through `xtreme_jax.fs`).
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from xtreme_jax import atomic, errors
from xtreme_jax.evaluation.scorer import default_out
from xtreme_jax.runs.benchmarks import PROTOCOLS, Protocol


def _nothing_to_score(predictions: str, labels: str, protocol: Protocol, results: dict) -> str:
  """Why results without one scored language are refused (one line)."""
  if results["tasks"]:
    found = f"no prediction file of {', '.join(results['tasks'])} has its gold"
  else:
    found = f"{protocol.absent} for any of {', '.join(results['missing_tasks'])}"
  return (f"nothing to score: {found} (predictions {predictions}, labels {labels}; expected "
          f"{protocol.predictions_layout})")


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Prints the table, writes the JSON (default: `default_out`) and with `--report` the report; user errors
  raise."""
  parser = errors.ArgumentParser(prog="xtreme-jax score", description=__doc__.splitlines()[0])
  parser.add_argument("--benchmark", default="xtreme", choices=tuple(PROTOCOLS), help="default xtreme")
  parser.add_argument("--predictions", required=True, help="submission folder: " + "; ".join(
      f"{name} {p.predictions_layout}" for name, p in PROTOCOLS.items()))
  parser.add_argument("--labels", required=True,
                      help="; ".join(f"{name}: {p.labels_layout}" for name, p in PROTOCOLS.items()))
  parser.add_argument("--split", default="test", choices=("dev", "test"), help="xglue: the split scored")
  parser.add_argument("--out", help="results JSON (default: <parent>/scores-<name>.json beside the "
                                    "submission folder <parent>/<name>)")
  parser.add_argument("--tasks", help="comma-separated tasks to score (default: every task in both folders)")
  parser.add_argument("--report", help="also write the benchmark's report (report.md, results.json, plots/) "
                                       "into this folder")
  args = parser.parse_args(argv)
  protocol = PROTOCOLS[args.benchmark]
  errors.require(args.split in protocol.splits, f"--split {args.split}: --benchmark {args.benchmark} scores "
                 f"its {' and '.join(protocol.splits)} split only (its labels are test labels)")
  tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
  out = args.out or default_out(args.predictions)
  results = protocol.score_folder(args.predictions, args.labels, tasks, args.split)
  if not protocol.scored(results):
    raise errors.MissingInputError(_nothing_to_score(args.predictions, args.labels, protocol, results))
  atomic.write_json(out, results)
  print(protocol.table(results))
  for task in results["missing_tasks"]:
    print(f"not scored: {task} ({protocol.absent})", file=sys.stderr)
  print(f"wrote {out}")
  if args.report:
    print(f"report: {protocol.write_report(results, args.report)['report.md']}")
  return 0
