"""`xtreme-jax` console script: one `Command` per name in `COMMANDS` (`run` is the Gin entry point)."""

from __future__ import annotations

import dataclasses
import difflib
import importlib.metadata
import sys
from typing import Callable

from xtreme_jax import errors


@dataclasses.dataclass(frozen=True)
class Command:
  """One `xtreme-jax` command: its arguments and help lines for the usage text, and what runs it."""

  arguments: str
  help: tuple[str, ...]
  run: Callable[[list[str]], int]
  compiles: bool = False  # it compiles JAX programs: the compilation cache is set up first (`run` does it from Gin)


def _run(argv: list[str]) -> int:
  from xtreme_jax import main as entry
  return entry.main(argv)


def _import_hf(argv: list[str]) -> int:
  from xtreme_jax import hf
  return hf.cli_import_hf(argv)


def _export_hf(argv: list[str]) -> int:
  from xtreme_jax import hf_export
  return hf_export.cli_export_hf(argv)


def _export_encoder(argv: list[str]) -> int:
  if len(argv) not in (2, 3) or (len(argv) == 3 and not (argv[2].isdigit() or argv[2] == "all")):
    print("usage: xtreme-jax export-encoder RUN_DIR OUT [LANGUAGE_ID|all]", file=sys.stderr)
    return 2
  from xtreme_jax.models import veco_assembly
  language = None if len(argv) == 2 else argv[2] if argv[2] == "all" else int(argv[2])
  print(f"wrote {veco_assembly.export_encoder(argv[0], argv[1], language)}")
  return 0


def _export(name: str) -> Callable[[list[str]], int]:
  def export(argv: list[str]) -> int:
    if len(argv) != 2:
      print(f"usage: xtreme-jax {name} RUN_DIR OUT", file=sys.stderr)
      return 2
    from xtreme_jax.models import veco_assembly
    print(f"wrote {getattr(veco_assembly, name.replace('-', '_'))(argv[0], argv[1])}")
    return 0
  return export


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


def _sweep_summary(argv: list[str]) -> int:
  from xtreme_jax.runs import sweeps
  return sweeps.main(argv)


def _score(argv: list[str]) -> int:
  from xtreme_jax.runs import score_command
  return score_command.main(argv)


COMMANDS = {
    "run": Command("--gin_file=FILE [--gin.NAME=VALUE ...] [-v]", (
        "pretrain / finetune / evaluate / a benchmark, as the Gin files say",
        "(`xtreme-jax run --help`: Gin flags, bundled experiments, examples)"), _run),
    "import-hf": Command("SRC OUT [--scan_layers]", (
        "Hugging Face checkpoint (dir or hub id) -> orbax checkpoint",), _import_hf, compiles=True),
    "export-encoder": Command("RUN_DIR OUT [LANGUAGE_ID|all]", (
        "NLU encoder of a VECO pretraining run -> import-hf format",
        "(LANGUAGE_ID: language embedding to fold in, XLM-style runs; all: keep every language)"), _export_encoder, compiles=True),
    "export-veco": Command("RUN_DIR OUT", (
        "the whole VECO stack (cross-attention included) -> import-hf",), _export("export-veco"), compiles=True),
    "export-seq2seq": Command("RUN_DIR OUT", (
        "an xDAE / xFNP run's encoder-decoder -> import-hf",
        "format: INIT_CHECKPOINT of NLG fine-tuning (QG, NTG, WMT14)"), _export("export-seq2seq"), compiles=True),
    "export-hf": Command("RUN_DIR OUT [--step N]", (
        "a fine-tuned classifier / tagger / QA / seq2seq run -> a",
        "Hugging Face transformers folder (config.json, safetensors,",
        "tokenizer files); prints the architecture it maps to"),
        _export_hf),
    "average-checkpoints": Command("RUN_DIR [--last N] [--allow-fewer]", (
        "mean parameters of the newest N checkpoints (default 10)",
        "-> RUN_DIR/averaged/<newest step>/ (VECO translation)"), _average_checkpoints, compiles=True),
    "sweep-summary": Command("RUN_ROOT [--baseline RUN]", (
        "the best run of a tpu_scripts/sweep.sh sweep per fine-tuned model",
        "(selected dev score) -> RUN_ROOT/sweep.md, sweep.json; with a",
        "baseline run, test scores minus its own (sweep_differences.png)"), _sweep_summary),
    "score": Command("--predictions DIR --labels DIR [--out FILE] [--tasks T,...] "
                     "[--benchmark xtreme|xglue|mbert|lab] [--split dev|test] [--report DIR]", (
                         "leaderboard scores of a submission folder",
                         "(default --out: <parent>/scores-<name>.json;",
                         "xglue: as the official xglue_evaluate.py)"), _score),
}


def _usage() -> str:
  lines = ["usage: xtreme-jax COMMAND ...   (xtreme-jax --version: the installed version)", "", "commands:"]
  for name, command in COMMANDS.items():
    head = f"  {name} {command.arguments}"
    first, *more = command.help
    lines += [f"{head:<46}{first}"] if len(head) < 46 else [head, " " * 46 + first]
    lines += [" " * 46 + line for line in more]
  return "\n".join(lines + ["", "A user error (bad data, bad binding, missing file) prints one line and exits 2;",
                            "add --debug (or set XTREME_JAX_DEBUG=1) to see the traceback."])


USAGE = _usage()


def version() -> str:
  """The installed distribution's version."""
  try:
    return importlib.metadata.version("xtreme-jax")
  except importlib.metadata.PackageNotFoundError:
    return "unknown (not installed)"


def main(argv=None) -> int:
  """Runs one command; a user error is one line on stderr and exit code 2 (`--debug`: traceback)."""
  return errors.run_cli(_dispatch, list(sys.argv[1:] if argv is None else argv))


def _dispatch(argv: list[str]) -> int:
  if not argv or argv[0] in ("-h", "--help"):
    print(USAGE)
    return 0 if argv else 2
  if argv[0] == "--version":
    print(f"xtreme-jax {version()}")
    return 0
  name, rest = argv[0], argv[1:]
  command = COMMANDS.get(name)
  if command is None:
    close = difflib.get_close_matches(name, COMMANDS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise errors.ConfigError(f"unknown command {name!r}; {hint}`xtreme-jax --help` lists the commands")
  from xtreme_jax import tensorflow_startup
  tensorflow_startup.install()  # (`run -vv` shows TensorFlow's start-up lines: main.configure_logging)
  if command.compiles:
    from xtreme_jax import compilation_cache
    compilation_cache.configure()
  return command.run(rest)


if __name__ == "__main__":
  sys.exit(main())
