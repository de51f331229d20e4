"""`xtreme-jax` console script: `run` (Gin entry point) and `import-hf`."""

from __future__ import annotations

import sys

from xtreme_jax import errors

USAGE = """usage: xtreme-jax COMMAND ...

commands:
  run --gin_file=FILE [--gin.NAME=VALUE ...] [-v]
                                              pretrain / finetune / evaluate as the Gin files say
                                              (`xtreme-jax run --help`: Gin flags, bundled experiments, examples)
  import-hf SRC OUT [--scan_layers]           Hugging Face checkpoint (dir or hub id) -> orbax checkpoint
  export-encoder RUN_DIR OUT [LANGUAGE_ID]     NLU encoder of a VECO pretraining run -> import-hf format
                                              (LANGUAGE_ID: language embedding to fold in, XLM-style runs)
  export-veco RUN_DIR OUT                      the whole VECO stack (cross-attention included) -> import-hf
  export-seq2seq RUN_DIR OUT                   an xDAE / xFNP run's encoder-decoder -> import-hf
                                              format: INIT_CHECKPOINT of NLG fine-tuning (QG, NTG, WMT14)
  average-checkpoints RUN_DIR [--last N] [--allow-fewer]
                                              mean parameters of the newest N checkpoints (default 10)
                                              -> RUN_DIR/averaged/<newest step>/ (VECO translation)
  sweep-summary RUN_ROOT [--baseline RUN]      the best run of a tpu_scripts/sweep.sh sweep per fine-tuned model
                                              (selected dev score) -> RUN_ROOT/sweep.md, sweep.json; with a
                                              baseline run, test scores minus its own (sweep_differences.png)
  score --predictions DIR --labels DIR [--out FILE] [--tasks T,...] [--benchmark xtreme|xglue] [--split dev|test]
                                              leaderboard scores of a submission folder
                                              (default --out: <parent>/scores-<name>.json;
                                              xglue: as the official xglue_evaluate.py)

A user error (bad data, bad binding, missing file) prints one line and exits 2;
add --debug (or set XTREME_JAX_DEBUG=1) to see the traceback.
"""


# Commands that compile JAX programs, besides `run` (which configures the compilation cache from Gin too).
COMPILING = ("import-hf", "export-encoder", "export-veco", "export-seq2seq", "average-checkpoints")


def main(argv=None) -> int:
  """Runs one command; a user error is one line on stderr and exit code 2 (`--debug`: traceback)."""
  return errors.run_cli(_dispatch, list(sys.argv[1:] if argv is None else argv))


def _dispatch(argv: list[str]) -> int:
  if not argv or argv[0] in ("-h", "--help"):
    print(USAGE)
    return 0 if argv else 2
  command, rest = argv[0], argv[1:]
  if command in COMPILING:
    from xtreme_jax import compilation_cache
    compilation_cache.configure()
  if command == "run":
    from xtreme_jax import main as entry
    return entry.main(rest)
  if command == "import-hf":
    from xtreme_jax import hf
    return hf.cli_import_hf(rest)
  if command == "export-encoder":
    if len(rest) not in (2, 3) or (len(rest) == 3 and not rest[2].isdigit()):
      print("usage: xtreme-jax export-encoder RUN_DIR OUT [LANGUAGE_ID]", file=sys.stderr)
      return 2
    from xtreme_jax.models import veco_assembly
    language_id = int(rest[2]) if len(rest) == 3 else None
    print(f"wrote {veco_assembly.export_encoder(rest[0], rest[1], language_id)}")
    return 0
  if command in ("export-veco", "export-seq2seq"):
    if len(rest) != 2:
      print(f"usage: xtreme-jax {command} RUN_DIR OUT", file=sys.stderr)
      return 2
    from xtreme_jax.models import veco_assembly
    export = veco_assembly.export_veco if command == "export-veco" else veco_assembly.export_seq2seq
    print(f"wrote {export(rest[0], rest[1])}")
    return 0
  if command == "average-checkpoints":
    return _average_checkpoints(rest)
  if command == "sweep-summary":
    from xtreme_jax.runs import sweeps
    return sweeps.main(rest)
  if command == "score":
    from xtreme_jax.evaluation import scorer
    return scorer.main(rest)
  print(f"unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
  return 2


def _average_checkpoints(argv: list[str]) -> int:
  parser = errors.ArgumentParser(prog="xtreme-jax average-checkpoints",
                                 description="Average the parameters of a run's newest checkpoints.")
  parser.add_argument("run_dir", metavar="RUN_DIR")
  parser.add_argument("--last", type=int, default=10, help="how many of the newest checkpoints (default 10)")
  parser.add_argument("--allow-fewer", action="store_true", help="average all checkpoints when there are fewer")
  args = parser.parse_args(argv)
  from xtreme_jax.training import averaging
  done = averaging.average_checkpoints(args.run_dir, args.last, allow_fewer=args.allow_fewer, progress=True)
  steps = ", ".join(map(str, done.steps))
  if done.written:
    print(f"averaged steps {steps} -> {done.path}")
  else:
    print(f"{done.path} already holds the average of steps {steps}; nothing written")
  return 0


if __name__ == "__main__":
  sys.exit(main())
