"""Entry point: parse Gin, run the selected run mode, nothing else.

    xtreme-jax run --gin_file=experiments/pretrain_sample.gin \
        --gin.TRAIN_STEPS=100 --gin.RUN_DIR="'/tmp/run'"
    python -m xtreme_jax.main ...   # the same command

The run-mode Gin file binds `xtreme_jax.main.execute.run` to one of the
functions in `xtreme_jax.runs`. Every binding is validated while parsing (an
unknown configurable, parameter or macro fails before any data is read or
anything is compiled). Library functions here raise `errors.UserError`s; the
CLI (`cli.main`, also behind `python -m xtreme_jax.main`) reports them as one
line.
"""

from __future__ import annotations

import argparse
import functools
import glob
import logging
import os
import re
import sys
import textwrap
import tokenize
from typing import Callable, Optional

import gin

from xtreme_jax import errors, fs, tensorflow_startup
from xtreme_jax.data import paths

GIN_DIR = paths.gin_dir()
# Loggers kept at WARNING unless -vv (their INFO is about the libraries, not the run).
LIBRARY_LOGGERS = ("absl", "jax", "jaxlib", "orbax", "tensorflow", "tensorflow_datasets", "seqio", "etils",
                   "fsspec", "h5py", "matplotlib", "PIL", "urllib3", "huggingface_hub", "transformers", "torch")
# gin appends where an error happened: '  In file "F", line N' (innermost first).
_GIN_LOCATION = re.compile(r'In file "([^"]+)", line (\d+)')

USAGE = "xtreme-jax run --gin_file=FILE [--gin_file=FILE ...] [--gin.NAME=VALUE ...] [-v | -vv] [--debug]"
DESCRIPTION = f"""Pretrain, fine-tune, evaluate or run a benchmark, as the Gin files say.

Gin flags:
  --gin_file=FILE     a Gin file: a path, or a path under the bundled configs
                      ({GIN_DIR}); repeatable, parsed in order
  --gin.NAME=VALUE    a binding parsed after the files; NAME is a macro the files define
                      (TRAIN_STEPS, RUN_DIR, ...) or configurable.parameter; VALUE is a
                      Python literal, so a string needs its own quotes: --gin.RUN_DIR="'/tmp/run'"
"""
EXAMPLES = """examples:
  xtreme-jax run --gin_file=experiments/xtreme_quickstart.gin
  xtreme-jax run --gin_file=experiments/pretrain_sample.gin --gin.TRAIN_STEPS=200 --gin.RUN_DIR="'/tmp/my_run'"
  xtreme-jax run --gin_file=my_experiment.gin --gin.LAYOUT="'fsdp'" -v
  python -m xtreme_jax.main --gin_file=experiments/pretrain_sample.gin   (the same as xtreme-jax run)

A user error (bad binding, missing file, malformed data) prints one line and exits 2."""


def execute(run: Callable = gin.REQUIRED, compilation_cache: Optional[str] = None):
  """Calls the run function bound in the run-mode Gin file.

  `compilation_cache`: the persistent compilation cache's folder or `'off'` (`xtreme_jax.compilation_cache`;
  None: XTREME_JAX_CACHE_DIR, else the default folder); applied by `main` before anything compiles.
  """
  del compilation_cache
  return run()


def experiments() -> list[tuple[str, str]]:
  """(path under GIN_DIR, first comment line) of each bundled experiment file: one sentence describing it."""
  out = []
  for path in sorted(glob.glob(os.path.join(GIN_DIR, "experiments", "*.gin"))):
    with open(path, encoding="utf-8") as f:
      first = f.readline().strip()
    out.append((os.path.relpath(path, GIN_DIR), first.lstrip("#").strip() if first.startswith("#") else ""))
  return out


def _listing(listed: list[tuple[str, str]]) -> str:
  """The experiments for `run --help`: the quickstarts first (where to start), each description wrapped."""
  width = max((len(rel) for rel, _ in listed), default=0)

  def block(rows):
    return "\n".join(textwrap.fill(description, 118, initial_indent=f"  {rel:<{width}}  ",
                                   subsequent_indent=" " * (width + 4), break_long_words=False,
                                   break_on_hyphens=False)
                     for rel, description in rows)

  quick = [row for row in listed if "quickstart" in row[0]]
  return ("start here: the quickstarts, on the bundled sample on a CPU (--gin_file=FILE with FILE as listed):\n"
          + block(quick) + "\n\nall bundled experiments:\n" + block(listed))


def split_gin_args(argv: list[str]) -> tuple[list[str], list[str], list[str]]:
  """(gin files, gin bindings, remaining args) from `--gin_file=F` / `--gin.NAME=VALUE`."""
  files, bindings, rest = [], [], []
  it = iter(argv)
  for arg in it:
    if arg == "--gin_file" or arg.startswith("--gin_file="):
      value = arg.split("=", 1)[1] if "=" in arg else next(it, None)
      if not value:
        raise errors.ConfigError("--gin_file needs a file name: --gin_file=FILE")
      files.append(value)
    elif arg.startswith("--gin."):
      name, _, value = arg[len("--gin."):].partition("=")
      if not name or not value:
        raise errors.ConfigError(f"gin binding {arg!r} must look like --gin.NAME=VALUE")
      bindings.append(f"{name} = {value}")
    else:
      rest.append(arg)
  return files, bindings, rest


@functools.cache
def _setup_gin() -> None:
  """Once per process: the bundled configs on the search path; gin's package-path reader off.

  That reader logs an ERROR for every search-path miss of an include and
  crashes on a namespace package of the same name (a `runs/` folder in the
  working directory); includes here are plain files.
  """
  from gin import resource_reader
  gin.add_config_file_search_path(GIN_DIR)
  readers = gin.config._FILE_READERS  # pylint: disable=protected-access
  readers[:] = [r for r in readers if r[0] is not resource_reader.system_path_reader]


def _gin_path(name: str) -> Optional[str]:
  """`name` as given or under GIN_DIR (gin's search path), None if neither is a file."""
  return next((path for path in (name, os.path.join(GIN_DIR, name)) if os.path.isfile(path)), None)


def find_gin_file(name: str) -> str:
  """`name` as given or under GIN_DIR."""
  path = _gin_path(name)
  if path is None:
    raise errors.MissingInputError(
        f"gin file {name!r} not found in the working directory ({os.getcwd()}) or the bundled configs ({GIN_DIR}); "
        "`xtreme-jax run --help` lists the bundled experiments")
  return path


def gin_error(e: Exception, where: str) -> errors.UserError:
  """A one-line `UserError` for what gin raised while parsing `where` (a file, a --gin flag)."""
  text = str(e)
  found = _GIN_LOCATION.search(text)
  loc = errors.location(found[1], int(found[2])) if found else where
  if isinstance(e, SyntaxError):  # gin's own carry the file (None for a binding) and line
    msg = str(e.msg or e)
    unquoted = any(m in msg for m in ("Failed to parse token", "Unable to parse value"))
    hint = " (a string value needs its own quotes: --gin.NAME=\"'text'\")" if unquoted else ""
    loc = errors.location(e.filename, e.lineno) if e.filename else where
    return errors.ConfigError(f"Gin syntax error ({loc}): {msg.splitlines()[-1].strip()}{hint}")
  if isinstance(e, tokenize.TokenError):  # tokenize says only "EOF"; an include's re-raise drops the args
    original = e
    while not original.args and original.__context__ is not None:
      original = original.__context__
    included = re.search(r"^\s*include\s+['\"]([^'\"]+)['\"]", text, re.M) if found else None
    path = _gin_path(included[1] if included else where)
    loc = errors.location(path, _open_statement(path)) if path else where
    message = original.args[0] if original.args else "EOF in multi-line statement"
    return errors.ConfigError(f"Gin syntax error ({loc}): {message} (a bracket or quote is never closed)")
  first = text.splitlines()[0].strip() if text.strip() else type(e).__name__
  if isinstance(e, OSError):
    return errors.MissingInputError(f"{loc}: {first}")
  required = re.match(r"(\S+?)(/macro\.value)? set to `%gin\.REQUIRED` but not subsequently overridden", first)
  if required:
    name = required[1]
    return errors.ConfigError(f"{'macro ' if required[2] else ''}{name} is required and not set: "
                              f"set it in a Gin file or with --gin.{name}=VALUE")
  undefined = re.match(r"No bindings specified for '([^'/]+)/gin\.macro'", first)
  if undefined:
    return errors.ConfigError(f"{loc}: macro %{undefined[1]} is used but no Gin file or flag defines it")
  return errors.ConfigError(f"{loc}: {first}")


def _open_statement(path: str) -> Optional[int]:
  """First line of the statement a Gin file leaves open at its end."""
  start = None
  with open(path, encoding="utf-8") as f:
    try:
      for token in tokenize.generate_tokens(f.readline):
        if token.type == tokenize.NEWLINE:
          start = None
        elif start is None and token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
          start = token.start[0]
    except (tokenize.TokenError, SyntaxError):
      pass
  return start


def _parse(where: str, parse: Callable[[], object]) -> None:
  try:
    parse()
  except (SyntaxError, tokenize.TokenError, ValueError, OSError, ModuleNotFoundError, NameError) as e:
    if isinstance(e, errors.UserError):
      raise
    raise gin_error(e, where) from e


def parse_gin(files: list[str], bindings: list[str]) -> None:
  """Parse files then bindings; a macro binding must name a macro the files define.

  Raises `errors.ConfigError` (or `MissingInputError`) with a one-line message
  naming the file:line or the --gin flag.
  """
  if not files:
    raise errors.ConfigError("no --gin_file given; `xtreme-jax run --help` lists the bundled experiments")
  _setup_gin()
  for name in files:
    path = find_gin_file(name)
    _parse(path, functools.partial(gin.parse_config_file, path))
  for binding in bindings:
    name, _, value = (part.strip() for part in binding.partition("="))
    flag = f"--gin.{name}={value}"
    if "." not in name and "/" not in name:
      try:
        gin.query_parameter(f"%{name}")
      except ValueError:
        raise errors.ConfigError(f"{flag}: no macro {name!r} is defined by {files}; check the spelling") from None
    _parse(flag, functools.partial(gin.parse_config, binding))
  _parse(", ".join(files), gin.finalize)


class _PlainFormatter(logging.Formatter):
  """`warning: <message>`: a log record at the default verbosity, without time or logger name."""

  def format(self, record: logging.LogRecord) -> str:
    return f"{record.levelname.lower()}: {super().format(record)}"


def configure_logging(verbosity: int) -> None:
  """WARNING by default (as `warning: ...` lines), INFO with -v, DEBUG with -vv (with times and logger names);
  library chatter (absl, JAX, TF's C++ lines) only with -vv."""
  level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbosity, 2)]
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbosity >= 2 else "2")  # read when TF / XLA load
  tensorflow_startup.install(quiet=verbosity < 2)
  if verbosity:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
  else:  # like the run's other lines (and the CLI's `error: ...`)
    handler = logging.StreamHandler()
    handler.setFormatter(_PlainFormatter())
    logging.basicConfig(handlers=[handler])
  logging.getLogger().setLevel(level)
  for name in LIBRARY_LOGGERS:
    logging.getLogger(name).setLevel(level if verbosity >= 2 else logging.WARNING)


def build_parser() -> argparse.ArgumentParser:
  """`xtreme-jax run`'s options; --help also lists the Gin flags, the bundled experiments and examples."""
  epilog = _listing(experiments()) + "\n\n" + EXAMPLES
  parser = errors.ArgumentParser(prog="xtreme-jax run", usage=USAGE, description=DESCRIPTION, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("-v", "--verbose", action="count", default=0,
                      help="more logging: -v INFO, -vv DEBUG including absl / JAX / TensorFlow (default: warnings)")
  parser.add_argument("--debug", action="store_true",
                      help="show the traceback of a user error (or set XTREME_JAX_DEBUG=1)")
  return parser


def _write_config(run_dir: Optional[str]) -> None:
  """Save the Gin config of this invocation beside the run (atomically)."""
  if run_dir and fs.isdir(run_dir):
    from xtreme_jax import atomic
    atomic.write_text(os.path.join(run_dir, "config.gin"), gin.config_str())


def _bound(name: str):
  """The value Gin binds to `name` (a parameter or %MACRO), None when unbound."""
  try:
    return gin.query_parameter(name)
  except ValueError:
    return None


def main(argv: Optional[list[str]] = None) -> int:
  """`xtreme-jax run`: parse the Gin flags, run the bound run mode; user errors raise (the CLI reports them)."""
  files, bindings, rest = split_gin_args(list(sys.argv[1:] if argv is None else argv))
  args = build_parser().parse_args(rest)
  configure_logging(args.verbose)
  parse_gin(files, bindings)
  try:
    gin.query_parameter("xtreme_jax.main.execute.run")
  except ValueError:
    raise errors.ConfigError(f"{files} bind no run mode (main.execute.run): include one of the bundled "
                             "runs/*.gin, as the experiments do") from None
  from xtreme_jax import compilation_cache
  compilation_cache.configure(_bound("xtreme_jax.main.execute.compilation_cache"))
  from xtreme_jax.training.distributed import initialize_distributed
  initialize_distributed()
  run_dir = _bound("%RUN_DIR")
  gin.get_configurable(execute)()
  import jax
  if jax.process_index() == 0:
    _write_config(run_dir)  # only after success: a refused run must not touch another run's directory
  return 0


if __name__ == "__main__":
  from xtreme_jax import cli
  sys.exit(cli.main(["run", *sys.argv[1:]]))
