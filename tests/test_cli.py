"""The command line: user errors as one line (exit 2), `run --help`, quiet logging, `python -m` parity."""

from __future__ import annotations

import json
import errno
import importlib.metadata
import logging
import os
import re
import subprocess
import sys
import textwrap

import gin
import pytest

from xtreme_jax import cli, errors, main

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = "experiments/pretrain_sample.gin"


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


@pytest.fixture
def restore_logging():
  names = ("", *main.LIBRARY_LOGGERS)
  levels = {name: logging.getLogger(name).level for name in names}
  yield
  for name, level in levels.items():
    logging.getLogger(name).setLevel(level)


def run_error(capsys, *argv) -> str:
  """stderr of `xtreme-jax run ARGV`, asserted to be one `error:` line with exit code 2."""
  assert cli.main(["run", *argv]) == 2
  captured = capsys.readouterr()
  lines = captured.err.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
  return lines[0]


def gin_file(tmp_path, text: str, name: str = "exp.gin") -> str:
  path = tmp_path / name
  path.write_text(textwrap.dedent(text))
  return str(path)


# --- Gin problems are one-line ConfigErrors naming the file:line or the flag ---------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("# unclosed\nx = (\n", "Gin syntax error ({path}:2): EOF in multi-line statement"),
    ("# a\n\nTRAIN = [1,\n  2,\n# end\n", "Gin syntax error ({path}:3)"),
    ("# value\na.b = 1 2\n", "Gin syntax error ({path}:2): Expected newline."),
    ("# configurable\nfoo.bar = 3\n", "{path}:2: No configurable matching 'foo'"),
    ("# import\nfrom __gin__ import dynamic_registration\nfrom xtreme_jax.data import nope\n",
     "{path}:3: No module named 'xtreme_jax.data.nope'"),
    ("# reference\nfrom __gin__ import dynamic_registration\nx = @undeclared.fn\n",
     "{path}:3: 'undeclared' was not provided by an import statement"),
])
def test_gin_file_errors_are_one_line_with_file_and_line(tmp_path, capsys, text, expected):
  path = gin_file(tmp_path, text)
  assert run_error(capsys, f"--gin_file={path}").startswith("error: " + expected.format(path=path))


def test_syntax_error_in_an_included_file_names_that_file(tmp_path, capsys):
  nested = gin_file(tmp_path, "# nested\na = 1\nb = )\n", "nested.gin")
  unclosed = gin_file(tmp_path, "# nested\na = 1\nb = {'x':\n", "unclosed.gin")
  top = gin_file(tmp_path, f"# top\ninclude '{nested}'\n", "top.gin")
  assert f"Gin syntax error ({nested}:3): Unable to parse value" in run_error(capsys, f"--gin_file={top}")
  top = gin_file(tmp_path, f"# top\ninclude '{unclosed}'\n", "top2.gin")
  assert f"Gin syntax error ({unclosed}:3): EOF in multi-line statement" in run_error(capsys, f"--gin_file={top}")


@pytest.mark.parametrize("binding,expected", [
    ("--gin.TRAIN_STEPS=abc", "error: Gin syntax error (--gin.TRAIN_STEPS=abc): Failed to parse token 'abc' "
                              "(a string value needs its own quotes: --gin.NAME=\"'text'\")"),
    ("--gin.TRAIN_STEPS=(", "error: Gin syntax error (--gin.TRAIN_STEPS=(): EOF in multi-line statement"),
    ("--gin.train.pretrain.trian_data=None", "error: --gin.train.pretrain.trian_data=None: Configurable "
                                             "'train.pretrain' doesn't have a parameter named 'trian_data'."),
    ("--gin.nonexistent.fn.x=1", "error: --gin.nonexistent.fn.x=1: No configurable matching 'nonexistent.fn'."),
    ("--gin.TRAIN_STEP=5", "error: --gin.TRAIN_STEP=5: no macro 'TRAIN_STEP' is defined by"),
    ("--gin.RUN_DIR=%UNDEFINED", "error: experiments/pretrain_sample.gin: macro %UNDEFINED is used but no Gin "
                                 "file or flag defines it"),
    ("--gin.TRAIN_STEPS", "error: gin binding '--gin.TRAIN_STEPS' must look like --gin.NAME=VALUE"),
])
def test_bad_bindings_are_one_line_naming_the_flag(tmp_path, capsys, binding, expected):
  run_dir = tmp_path / "run"
  assert run_error(capsys, f"--gin_file={SAMPLE}", f"--gin.RUN_DIR='{run_dir}'", binding).startswith(expected)
  assert not run_dir.exists()  # nothing was read, compiled or written


def test_missing_gin_file_lists_where_it_looked(tmp_path, capsys, monkeypatch):
  monkeypatch.chdir(tmp_path)
  line = run_error(capsys, "--gin_file=no_such.gin")
  assert line.startswith("error: gin file 'no_such.gin' not found in the working directory")
  assert str(tmp_path) in line and main.GIN_DIR in line
  path = gin_file(tmp_path, "# include\ninclude 'runs/no_such_mode.gin'\n")
  assert run_error(capsys, f"--gin_file={path}").startswith(f"error: {path}:2: Unable to open file: runs/no_such_mode")
  with pytest.raises(errors.MissingInputError):
    main.parse_gin(["no_such.gin"], [])


def test_required_macro_and_run_mode(tmp_path, capsys):
  line = run_error(capsys, "--gin_file=experiments/xtreme_mbert.gin", "--gin.RUN_DIR='r'")
  assert line == ("error: macro DATA_DIR is required and not set: set it in a Gin file or with "
                  "--gin.DATA_DIR=VALUE")
  gin.clear_config(clear_constants=True)
  path = gin_file(tmp_path, "# no run mode\ninclude 'models/tiny.gin'\n")
  assert "bind no run mode (main.execute.run)" in run_error(capsys, f"--gin_file={path}")
  assert run_error(capsys).startswith("error: no --gin_file given")


def test_gin_file_with_a_namespace_package_of_the_same_name_in_cwd(tmp_path, capsys, monkeypatch):
  """gin's package-path reader crashed on `include 'runs/...'` when the working directory had a `runs/` folder."""
  (tmp_path / "runs").mkdir()
  (tmp_path / "models").mkdir()
  monkeypatch.chdir(tmp_path)
  monkeypatch.syspath_prepend(str(tmp_path))
  assert "no macro 'TRAIN_STEP'" in run_error(capsys, f"--gin_file={SAMPLE}", "--gin.TRAIN_STEP=1")


# --- errors raised inside the (gin-wrapped) run keep their class; the one line has no gin call context -------------

@pytest.fixture
def failing_run(tmp_path, monkeypatch):
  (tmp_path / "h6_failing_run.py").write_text(textwrap.dedent("""
      from xtreme_jax import errors
      def fail():
        raise errors.DataError("train.tsv:3: expected 3 tab-separated fields, found 2")
  """))
  monkeypatch.syspath_prepend(str(tmp_path))
  return gin_file(tmp_path, """\
      # a run mode whose run function raises a user error
      from __gin__ import dynamic_registration
      from xtreme_jax import main
      import h6_failing_run
      main.execute.run = @h6_failing_run.fail
  """)


def test_user_error_inside_the_run_is_one_clean_line(failing_run, capsys):
  assert run_error(capsys, f"--gin_file={failing_run}") == "error: train.tsv:3: expected 3 tab-separated fields, found 2"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_exception(failing_run, monkeypatch, how):
  argv = ["run", f"--gin_file={failing_run}"]
  if how == "flag":
    argv.append("--debug")
  else:
    monkeypatch.setenv("XTREME_JAX_DEBUG", "1")
  with pytest.raises(errors.DataError, match="expected 3 tab-separated fields"):  # the class survives gin's re-raise
    cli.main(argv)
  gin.clear_config(clear_constants=True)
  with pytest.raises(errors.ConfigError, match="TRAIN_STEP"):
    cli.main(["run", f"--gin_file={SAMPLE}", "--gin.TRAIN_STEP=1", "--debug"])


def test_one_line_drops_gin_call_context():
  message = ("bad row\n  In call to configurable 'xtreme' (<function xtreme at 0x7f>)\n"
             "  In call to configurable 'execute' (<function execute at 0x7f>)")
  assert errors.one_line(message) == "bad row"
  assert errors.one_line("a\n  b\n\n") == "a; b"


def test_argparse_errors_exit_2(capsys):
  assert cli.main(["run", f"--gin_file={SAMPLE}", "--no_such_flag"]) == 2
  assert capsys.readouterr().err.splitlines() == [
      "error: xtreme-jax run: unrecognized arguments: --no_such_flag (see xtreme-jax run --help)"]


# --- help ---------------------------------------------------------------------------------------------------------

def test_run_help_lists_gin_flags_experiments_and_examples(capsys):
  with pytest.raises(SystemExit) as exit_:
    cli.main(["run", "--help"])
  assert exit_.value.code == 0
  out = capsys.readouterr().out
  for flag in ("--gin_file=FILE", "--gin.NAME=VALUE", "-v, --verbose", "--debug", "examples:",
               "xtreme-jax run --gin_file=experiments/xtreme_quickstart.gin"):
    assert flag in out
  listed = main.experiments()
  assert len(listed) == len(os.listdir(os.path.join(main.GIN_DIR, "experiments")))
  assert ("experiments/xtreme_quickstart.gin", "Quickstart: the whole XTREME benchmark (nine tasks) on the bundled "
          "sample with the tiny preset, on CPU.") in listed
  # Each description is a whole sentence of at most 110 characters: the first line of the file's header.
  assert dict(listed)["experiments/wmt14_tiny.gin"] == (
      "The WMT14 recipe at CPU scale on the bundled En-De sample: train, average, beam search, BLEU.")
  start, everything = out.split("start here: ", 1)[1].split("all bundled experiments:\n")
  everything = everything.split("\n\nexamples:")[0]
  for rel, description in listed:
    assert description.endswith(".") and description[0].isupper() and len(description) <= 110, rel
    assert description.count("(") == description.count(")"), rel
    entry = everything.split(f"  {rel} ", 1)[1].split("\n  experiments/")[0]
    assert entry.split() == description.split(), rel
  # The quickstarts come first: the place to start.
  quickstarts = [rel for rel, _ in listed if "quickstart" in rel]
  assert len(quickstarts) == 6 and all(f"  {rel} " in start for rel in quickstarts)
  assert "run --help" in cli.USAGE


def test_version_and_unknown_commands_are_one_line(capsys):
  assert cli.main(["--version"]) == 0
  assert capsys.readouterr().out == f"xtreme-jax {importlib.metadata.version('xtreme-jax')}\n"
  assert cli.main(["rnu", "--gin_file=x.gin"]) == 2
  assert capsys.readouterr().err.splitlines() == [
      "error: unknown command 'rnu'; did you mean 'run'? `xtreme-jax --help` lists the commands"]
  assert cli.main(["bogus"]) == 2
  assert capsys.readouterr().err.splitlines() == ["error: unknown command 'bogus'; `xtreme-jax --help` lists the commands"]
  assert cli.main(["run", f"--gin_file={SAMPLE}", "--gin.RUN_DIR=/tmp/x"]) == 2
  assert capsys.readouterr().err.splitlines() == [
      "error: Gin syntax error (--gin.RUN_DIR=/tmp/x): Unable to parse value. (a string value needs its own quotes: "
      "--gin.NAME=\"'text'\")"]


def test_os_errors_a_user_can_fix_are_one_line_naming_the_path(tmp_path, capsys):
  (tmp_path / "file").write_text("")
  assert cli.main(["run", f"--gin_file={SAMPLE}", f"--gin.RUN_DIR='{tmp_path}/file/run'"]) == 2
  assert capsys.readouterr().err.splitlines() == [
      f"error: {tmp_path}/file/run: Not a directory (a part of the path is a file, not a folder)"]

  def full_disk(argv):  # as a library (orbax) wraps it
    try:
      raise OSError(errno.ENOSPC, "No space left on device", "/runs/r/checkpoints/8")
    except OSError as e:
      raise RuntimeError("background save failed") from e
  assert errors.run_cli(full_disk, []) == 2
  assert capsys.readouterr().err == ("error: /runs/r/checkpoints/8: No space left on device (the disk is full: "
                                     "free some space or write elsewhere)\n")
  with pytest.raises(RuntimeError):
    errors.run_cli(full_disk, ["--debug"])

  def fallback_bug(argv):  # a bug in code that handles a permission error stays a bug
    try:
      raise PermissionError(errno.EACCES, "Permission denied", "/x")
    except PermissionError:
      return {}["missing"]
  with pytest.raises(KeyError):
    errors.run_cli(fallback_bug, [])

  def reset(argv):
    raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
  with pytest.raises(ConnectionResetError):  # not something the user can fix: a traceback
    errors.run_cli(reset, [])


# --- logging -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("verbosity,root,libraries", [
    (0, logging.WARNING, logging.WARNING), (1, logging.INFO, logging.WARNING), (2, logging.DEBUG, logging.DEBUG)])
def test_logging_levels(restore_logging, monkeypatch, verbosity, root, libraries):
  monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
  main.configure_logging(verbosity)
  assert logging.getLogger().level == root
  assert {logging.getLogger(n).level for n in ("absl", "jax", "orbax", "tensorflow")} == {libraries}
  assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == ("0" if verbosity == 2 else "2")


@pytest.mark.parametrize("verbosity,line", [(0, r"warning: lost 2 rows"),
                                             (1, r"\d{4}-\d\d-\d\d [\d:,]+ WARNING root: lost 2 rows")])
def test_warnings_are_plain_lines_by_default_and_timed_log_records_with_v(verbosity, line):
  code = f"from xtreme_jax import main; import logging; main.configure_logging({verbosity}); logging.warning('lost %d rows', 2)"
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert re.fullmatch(line, proc.stderr.strip()), proc.stderr


def _quiet_env():
  env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "XTREME_JAX_DEBUG")}
  env["JAX_PLATFORMS"] = "cpu"
  return env


def test_python_m_main_is_xtreme_jax_run(tmp_path):
  """`python -m xtreme_jax.main` reports like the CLI: one line, exit 2, no log noise (also from TF / absl)."""
  (tmp_path / "runs").mkdir()  # and a `runs/` folder in the working directory does not confuse gin
  proc = subprocess.run([sys.executable, "-m", "xtreme_jax.main", f"--gin_file={SAMPLE}", "--gin.TRAIN_STEP=1"],
                        cwd=tmp_path, env=_quiet_env(), capture_output=True, text=True, timeout=120)
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.splitlines() == ["error: --gin.TRAIN_STEP=1: no macro 'TRAIN_STEP' is defined by "
                                      "['experiments/pretrain_sample.gin']; check the spelling"]


# --- a tiny run in a fresh process: no INFO at default verbosity, no TensorFlow ------------------------------------

TINY_RUN = """
import json, sys
from xtreme_jax import cli
rc = cli.main(["run", "--gin_file=experiments/pretrain_sample.gin", "--gin.RUN_DIR=%r", "--gin.TRAIN_STEPS=2",
               "--gin.EVAL_DATA=None", "--gin.mlm_source.MlmTextSource.batch_size=8",
               "--gin.mlm_source.MlmTextSource.seq_len=32", "--gin.config.TransformerConfig.num_layers=1"])
print(json.dumps({"rc": rc, "tensorflow": sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")[:5]}))
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  run_dir = str(tmp_path_factory.mktemp("tiny_run") / "run")
  proc = subprocess.run([sys.executable, "-c", TINY_RUN % run_dir], env=_quiet_env(), capture_output=True,
                        text=True, timeout=300, cwd=os.path.dirname(run_dir))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.splitlines()[-1]), proc.stderr


def test_tiny_run_has_no_info_lines_by_default(tiny_run):
  result, stderr = tiny_run
  assert result["rc"] == 0
  noise = [line for line in stderr.splitlines()
           if " INFO " in line or line.startswith(("I0", "W0", "WARNING: All log messages"))]
  assert not noise, noise[:5]


def test_tiny_pretraining_run_is_tensorflow_free(tiny_run):
  result, _ = tiny_run
  assert result["tensorflow"] == [], f"the run imported {result['tensorflow']}"
