"""TPU VM scripts: `--dry-run` prints the exact gcloud commands and runs nothing; remote commands keep argv intact.

No gcloud here: dry runs put a `gcloud` first on PATH that fails loudly, real runs one that records its argv.
A worker is simulated by evaluating the remote command with `bash -c` in a fake home whose venv puts a stub
`xtreme-jax` (prints its argv one per line) on PATH.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import time

import pytest

TIER = "unit"  # conftest.py: this file's tier

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / "tpu_scripts"
ENV = {"TPU_NAME": "my-tpu", "ZONE": "us-east1-d", "PROJECT": "my-proj", "STAMP": "20250102-030405",
       "REPO_URL": "https://example.com/xtreme-jax.git", "COMMIT": "0123abcd"}
SSH = "gcloud compute tpus tpu-vm ssh my-tpu --zone us-east1-d --project my-proj --worker all --command "
SCP = "gcloud compute tpus tpu-vm scp --recurse --zone us-east1-d --project my-proj --worker "
DESCRIBE = "gcloud compute tpus tpu-vm describe my-tpu --zone us-east1-d --project my-proj --format 'value(state)'"
ENTER = ("cd ~/xtreme-jax && . ~/venv/bin/activate && mkdir -p ~/xtreme-jax-logs/20250102-030405 && "
         "{ ! pgrep -f '\\''bin/[x]treme-jax run'\\'' > /dev/null || { echo \"error: an xtreme-jax run already uses"
         " this TPU VM (pgrep -af xtreme-jax lists it)\" >&2; exit 3; }; } && ")
# Worker commands are evaluated here, on a machine that may be running a real xtreme-jax run: there their busy
# check (common.sh BUSY) and their stop look for this session's stand-in name instead, so that such a run neither
# makes a simulated worker busy nor is stopped by one.
HERE = f"xtreme-jax-test-{os.getpid()}"


def _here(command: str) -> str:
  """A worker's `command` as evaluated here: its busy pattern renamed to match only `HERE`'s processes."""
  return command.replace("bin/[x]treme-jax run", f"bin/[x]{HERE[1:]} run")


# A worker's log folder copied to gs:// beside the run (common.sh uploading), around the commands.
UPLOAD = ("up() {{ gcloud storage rsync --recursive ~/xtreme-jax-logs/20250102-030405"
          " {}/tpu_logs/20250102-030405/worker\"${{JAX_PROCESS_ID:-0}}\" > /dev/null 2>&1; }};"
          " (while sleep 60; do up; done) & uploader=$!; ")
# Gin bindings with single quotes, spaces, parentheses, braces, $, *, a backslash and shell operators.
TRICKY = ["--gin_file=experiments/xtreme_mbert.gin", "--gin.RUN_DIR='/mnt/runs/a b'",
          "--gin.TASKS=('xnli','panx')", "--gin.LANGS={'xnli': ['de']}", "--gin.NOTE=\"it's $HOME *\"",
          "--gin.X='a\\b;`id`&|'"]


def _write_exe(path: pathlib.Path, text: str) -> None:
  path.write_text(text)
  path.chmod(0o755)


@pytest.fixture
def sh(tmp_path):
  """sh(script, *args, gcloud="fail"|"record", **env) -> CompletedProcess, run in tmp_path/work."""
  bin_dir, calls, work = tmp_path / "bin", tmp_path / "calls", tmp_path / "work"
  for d in (bin_dir, calls, work):
    d.mkdir()

  def run(script, *args, gcloud="fail", check=True, **env):
    fake = ('echo "FAKE GCLOUD CALLED: $*" >&2; exit 99' if gcloud == "fail" else
            f'n=$(ls {calls} | wc -l); printf "%s\\0" "$@" > {calls}/$(printf %03d "$n");'
            ' case $* in *ipAddress*) echo 10.0.0.2 ;; *describe*state.state*) if [ -n "${QR_FILE-}" ]; then'
            ' read -r now rest < "$QR_FILE"; echo "$now"; [ -z "$rest" ] || echo "$rest" > "$QR_FILE";'
            ' else echo ACTIVE; fi ;; *"value(state)"*) if [ "${NODE_STATE:-READY}" = GONE ]; then echo "ERROR:'
            ' (gcloud.compute.tpus.tpu-vm.describe) NOT_FOUND: Resource my-tpu was not found" >&2; exit 1; fi;'
            ' echo "${NODE_STATE:-READY}" ;; *describe*) echo 2 ;; esac')
    _write_exe(bin_dir / "gcloud", f"#!/usr/bin/env bash\n{fake}\n")
    full_env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
                "LC_ALL": "C", **ENV, **env}
    proc = subprocess.run(["bash", str(SCRIPTS / f"{script}.sh"), *args], cwd=work, env=full_env,
                          capture_output=True, text=True, timeout=30)
    if check:
      assert proc.returncode == 0, proc.stderr
      assert "FAKE GCLOUD CALLED" not in proc.stderr
    return proc

  run.calls = lambda: [(calls / f).read_text().split("\0")[:-1] for f in sorted(os.listdir(calls))]
  run.work = work
  return run


def _lines(proc) -> list[str]:
  return proc.stdout.splitlines()


def _remote_command(line: str) -> str:
  argv = shlex.split(line)
  return argv[argv.index("--command") + 1]


def _on_worker(tmp_path, command: str, name: str = "worker") -> pathlib.Path:
  """Evaluates `command` as a worker's shell would (waiting for what it detaches); returns the fake home."""
  home = tmp_path / name
  (home / "xtreme-jax").mkdir(parents=True)
  (home / "venv" / "bin").mkdir(parents=True)
  (home / "stub").mkdir()
  (home / "venv" / "bin" / "activate").write_text(f'PATH="{home}/stub:$PATH"\n')
  _write_exe(home / "stub" / "xtreme-jax", '#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n'
             'case "$*" in *fail*) exit 3 ;; esac\n'
             '[ -z "${JAX_PROCESS_ID-}" ] || echo "process $JAX_PROCESS_ID of $JAX_NUM_PROCESSES @ $JAX_COORDINATOR_ADDRESS"\n')
  subprocess.run(["bash", "-c", _here(command) + "\nwait"], env={"PATH": os.environ["PATH"], "HOME": str(home)},
                 check=True, timeout=30)
  return home


def test_dry_run_prints_the_exact_gcloud_commands(sh):
  # v4: autocheckpoint by default (gcloud's alpha track); AUTOCHECKPOINT=0 turns it off.
  assert _lines(sh("create", "--dry-run", ACCELERATOR="v4-32", SPOT="1")) == [
      "gcloud alpha compute tpus queued-resources create my-tpu-qr --zone us-east1-d --project my-proj --node-id"
      " my-tpu --accelerator-type v4-32 --runtime-version tpu-ubuntu2204-base --spot --autocheckpoint-enabled",
      "gcloud compute tpus queued-resources describe my-tpu-qr --zone us-east1-d --project my-proj"
      " --format 'value(state.state)'"]
  assert _lines(sh("create", "--dry-run", ACCELERATOR="v4-32", SPOT="1", AUTOCHECKPOINT="0"))[0] == (
      "gcloud compute tpus queued-resources create my-tpu-qr --zone us-east1-d --project my-proj --node-id my-tpu"
      " --accelerator-type v4-32 --runtime-version tpu-ubuntu2204-base --spot")
  assert _lines(sh("create", "--dry-run", ACCELERATOR="v4-32", SPOT="0", AUTOCHECKPOINT="0"))[0].endswith(
      " --runtime-version tpu-ubuntu2204-base")  # SPOT=0: on demand
  assert _lines(sh("create", "--dry-run", ACCELERATOR="v4-32", SPOT="1", QUEUED="0")) == [
      "gcloud alpha compute tpus tpu-vm create my-tpu --zone us-east1-d --project my-proj --accelerator-type v4-32"
      " --version tpu-ubuntu2204-base --spot --autocheckpoint-enabled"]
  for setting, value in (("SPOT", "yes"), ("AUTOCHECKPOINT", "on")):
    proc = sh("create", "--dry-run", check=False, **{setting: value})
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.startswith(f"error: {setting} must be 1 ")
  setup, = _lines(sh("setup", "--dry-run"))
  assert setup.startswith(SSH) and _remote_command(setup).startswith(
      "set -e; [ -d ~/xtreme-jax ] || git clone -q https://example.com/xtreme-jax.git ~/xtreme-jax; cd ~/xtreme-jax;"
      " git fetch -q origin; git checkout -q --detach 0123abcd; python3 -m pip install -q --user -U uv;")
  assert _lines(sh("launch", "--gin_file=experiments/xtreme_mbert.gin", "--gin.RUN_DIR='gs://b/runs/x'",
                   "--dry-run", NUM_WORKERS="1")) == [
      SSH + "'" + ENTER + "{ (trap \"\" HUP; " + UPLOAD.format("gs://b/runs/x") + "xtreme-jax run"
      " --gin_file=experiments/xtreme_mbert.gin"
      " \"--gin.RUN_DIR='\\''gs://b/runs/x'\\''\"; echo $? > ~/xtreme-jax-logs/20250102-030405/exit_status;"
      " kill $uploader; up) > ~/xtreme-jax-logs/20250102-030405/run.log 2>&1"
      " < /dev/null & }'"]
  assert _lines(sh("sweep", "--dry-run", "a.gin", "LR", "1e-5", "('xnli','panx')", RUN_ROOT="gs://b/sw",
                   NUM_WORKERS="1")) == [
      SSH + "'" + ENTER + "{ (trap \"\" HUP; " + UPLOAD.format("gs://b/sw") + "failed=0; say() { echo \"$(date -u +%FT%TZ) $*\"; };"
      " one() { name=$1; shift; say start \"$name\"; xtreme-jax run \"$@\" >"
      " ~/xtreme-jax-logs/20250102-030405/\"$name\".log 2>&1; rc=$?; if [ $rc -eq 0 ]; then say ok \"$name\";"
      " else say FAILED \"$name\" \"(exit $rc)\"; failed=$((failed + 1)); fi; };"
      " one LR=1e-5 --gin_file=a.gin --gin.LR=1e-5 \"--gin.RUN_DIR='\\''gs://b/sw/LR=1e-5'\\''\";"
      " one LR=xnli_panx --gin_file=a.gin \"--gin.LR=('\\''xnli'\\'','\\''panx'\\'')\""
      " \"--gin.RUN_DIR='\\''gs://b/sw/LR=xnli_panx'\\''\";"
      " say \"sweep finished: $failed of 2 runs failed\"; kill $uploader; up)"
      " > ~/xtreme-jax-logs/20250102-030405/sweep.log 2>&1"
      " < /dev/null & }'"]
  # PROJECT unset: no --project (gcloud's default project) and no gcloud call to look it up.
  assert _lines(sh("teardown", "--dry-run", PROJECT="")) == [
      "gcloud compute tpus queued-resources delete my-tpu-qr --zone us-east1-d --force --quiet"]
  assert _lines(sh("teardown", "--dry-run", PROJECT="", QUEUED="0")) == [
      "gcloud compute tpus tpu-vm delete my-tpu --zone us-east1-d --quiet"]
  assert _lines(sh("teardown", "--collect", "gs://b/runs/x", "--dry-run", NUM_WORKERS="1")) == [
      DESCRIBE, SCP + "0 'my-tpu:~/xtreme-jax-logs' tpu_logs/x/worker0",
      "gcloud storage rsync --recursive --exclude '(^|.*/)(checkpoints|best|averaged)/.*' gs://b/runs/x"
      " tpu_logs/x/x",
      "gcloud compute tpus queued-resources delete my-tpu-qr --zone us-east1-d --project my-proj --force --quiet"]
  assert _lines(sh("create", DRY_RUN="1"))[0].startswith("gcloud alpha compute tpus queued-resources create my-tpu-qr")


def test_the_runtime_and_autocheckpoint_follow_the_accelerator(sh):
  """Autocheckpoint is on where Cloud TPU offers it (v2-v4, v5e: its Autocheckpoint page), off elsewhere."""
  for accelerator, runtime, autocheckpoint in (
      ("v4-32", "tpu-ubuntu2204-base", True), ("v3-8", "tpu-ubuntu2204-base", True),
      ("v5litepod-16", "v2-alpha-tpuv5-lite", True), ("v5p-16", "v2-alpha-tpuv5", False),
      ("v6e-16", "v2-alpha-tpuv6e", False)):
    line = _lines(sh("create", "--dry-run", ACCELERATOR=accelerator))[0]
    assert line.endswith(f"--accelerator-type {accelerator} --runtime-version {runtime}"
                         + " --autocheckpoint-enabled" * autocheckpoint)
    assert line.startswith("gcloud alpha " if autocheckpoint else "gcloud compute ")
  line = _lines(sh("create", "--dry-run", ACCELERATOR="v6e-16", RUNTIME="my-image", AUTOCHECKPOINT="1"))[0]
  assert line.endswith("--runtime-version my-image --autocheckpoint-enabled")


def test_create_waits_for_the_queued_resource_and_stops_on_a_failed_one(sh, tmp_path):
  states = tmp_path / "states"  # what the stand-in gcloud answers, one state a call
  states.write_text("WAITING_FOR_RESOURCES PROVISIONING ACTIVE\n")
  proc = sh("create", gcloud="record", QR_FILE=str(states), POLL_S="0")
  assert [c[c.index("queued-resources") + 1] for c in sh.calls()] == ["create", "describe", "describe", "describe"]
  assert "queued resource my-tpu-qr: PROVISIONING; asking again in 0 s" in proc.stderr
  assert proc.stderr.strip().endswith("my-tpu is ready (queued resource my-tpu-qr)")
  states.write_text("WAITING_FOR_RESOURCES FAILED\n")
  proc = sh("create", gcloud="record", check=False, QR_FILE=str(states), POLL_S="0")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: queued resource my-tpu-qr is FAILED: see gcloud compute tpus queued-resources describe my-tpu-qr")


def test_setup_installs_the_commit_in_a_python_3_11_venv_pins_jax_tpu_and_checks_every_worker(sh, tmp_path):
  """The remote command on a stand-in worker (git, pip, uv and python record what they are asked), twice: the
  second run keeps the 3.11 venv the first made."""
  line, = _lines(sh("setup", "--dry-run"))
  home, stub, log = tmp_path / "w", tmp_path / "stub", tmp_path / "w" / "log"
  stub.mkdir(parents=True)
  home.mkdir()
  record = f'echo "$(basename "$0") $*" >> {log}\n'
  _write_exe(stub / "git", f"#!/usr/bin/env bash\n{record}"
             'case $1 in clone) mkdir -p "${@: -1}" ;; esac\n')
  _write_exe(stub / "python3", f"#!/usr/bin/env bash\n{record}"  # the image's Python 3.10: installs uv
             'mkdir -p ~/.local/bin; cp "$(dirname "$0")/uv" ~/.local/bin/uv\n')
  python = (f"#!/usr/bin/env bash\n{record}"
            'case "$*" in *version_info*) exit 0 ;; *__version__*) echo 0.7.2 ;;'
            ' *process_count*) echo "worker 0 of 4 processes, 16 devices (4 here)" ;; esac\n')
  _write_exe(stub / "uv", f"#!/usr/bin/env bash\n{record}"
             f'if [ "$1" = venv ]; then mkdir -p ~/venv/bin; cp {stub}/python ~/venv/bin/python;'
             ' echo "PATH=~/venv/bin:\\$PATH" > ~/venv/bin/activate; fi\n')
  _write_exe(stub / "python", python)
  run = lambda: subprocess.run(["bash", "-c", _here(_remote_command(line))], env={  # noqa: E731
      "PATH": f"{stub}{os.pathsep}/usr/bin:/bin", "HOME": str(home)}, capture_output=True, text=True, timeout=30)
  first = run()
  assert first.returncode == 0, first.stderr
  assert first.stdout.strip() == "worker 0 of 4 processes, 16 devices (4 here)"
  calls = log.read_text().splitlines()
  assert calls[:4] == ["git clone -q https://example.com/xtreme-jax.git " + str(home / "xtreme-jax"),
                       "git fetch -q origin", "git checkout -q --detach 0123abcd",
                       "python3 -m pip install -q --user -U uv"]
  assert "uv venv -q --python 3.11 " + str(home / "venv") in calls
  assert "uv pip install -q -e .[gcs]" in calls
  assert ("uv pip install -q jax[tpu]==0.7.2 -f https://storage.googleapis.com/jax-releases/libtpu_releases.html"
          in calls)
  log.unlink()
  assert run().returncode == 0
  assert not [c for c in log.read_text().splitlines() if c.startswith(("uv venv", "git clone"))]  # kept


def test_collect_makes_one_new_folder_per_run_and_worker(sh):
  lines = _lines(sh("collect", "--dry-run", "gs://bucket/runs/xnli/", NUM_WORKERS="2"))
  assert lines == [DESCRIBE, SCP + "0 'my-tpu:~/xtreme-jax-logs' tpu_logs/xnli/worker0",
                   SCP + "1 'my-tpu:~/xtreme-jax-logs' tpu_logs/xnli/worker1",
                   "gcloud storage rsync --recursive --exclude '(^|.*/)(checkpoints|best|averaged)/.*'"
                   " gs://bucket/runs/xnli tpu_logs/xnli/xnli"]
  assert _lines(sh("collect", "--dry-run", "gs://bucket/runs/xnli", NUM_WORKERS="1", CHECKPOINTS="1"))[-1] == (
      "gcloud storage cp -r gs://bucket/runs/xnli tpu_logs/xnli/")  # everything, the parameters too
  assert not (sh.work / "tpu_logs").exists()  # a dry run creates nothing
  (sh.work / "tpu_logs" / "xnli").mkdir(parents=True)
  assert _lines(sh("collect", "--dry-run", "/mnt/runs/xnli", NUM_WORKERS="1")) == [
      SCP + "0 'my-tpu:~/xtreme-jax-logs' tpu_logs/xnli-1/worker0",
      SCP + "0 my-tpu:/mnt/runs/xnli tpu_logs/xnli-1/"]
  assert _lines(sh("collect", "--dry-run", NUM_WORKERS="1")) == [
      SCP + "0 'my-tpu:~/xtreme-jax-logs' tpu_logs/20250102-030405/worker0"]
  # Real runs: the worker count comes from gcloud; every collect gets its own folder.
  for suffix in ("-1", "-2"):
    sh("collect", "/mnt/runs/xnli", gcloud="record")
    assert sorted(os.listdir(sh.work / "tpu_logs" / f"xnli{suffix}")) == ["worker0", "worker1"]
  assert sh.calls()[0] == ["compute", "tpus", "tpu-vm", "describe", "my-tpu", "--zone", "us-east1-d",
                           "--project", "my-proj", "--format", "value(networkEndpoints.len())"]
  proc = sh("collect", "--dry-run", check=False)
  assert proc.returncode == 2 and proc.stderr.strip().startswith("error: a dry run does not ask gcloud")


def test_teardown_collect_copies_a_gs_run_dir_and_deletes_a_dead_slice(sh):
  """A slice that is gone (NOT_FOUND) or not READY (a suspended spot slice's VM): no scp of its workers' logs (the
  uploaded ones come with the run dir's tpu_logs/), the run dir is copied, and the slice is deleted."""
  for state, says in (("GONE", "gone (NOT_FOUND)"), ("PREEMPTED", "PREEMPTED")):
    done = len(os.listdir(sh.work.parent / "calls"))
    proc = sh("teardown", "--collect", "gs://b/runs/x", gcloud="record", NODE_STATE=state)
    assert [c[:4] for c in sh.calls()[done:]] == [
        ["compute", "tpus", "tpu-vm", "describe"], ["storage", "rsync", "--recursive", "--exclude"],
        ["compute", "tpus", "queued-resources", "delete"]]
    assert f"my-tpu is {says}: its workers' logs are not copied (launch.sh and sweep.sh upload them to" \
           " gs://b/runs/x/tpu_logs)" in proc.stderr


@pytest.mark.parametrize("script,args,env", [
    ("create", [], {"SPOT": "1"}), ("setup", [], {}), ("launch", TRICKY, {}), ("teardown", ["--collect"], {}),
    ("sweep", ["a.gin", "LR", "1e-5", "'x y'"], {"RUN_ROOT": "gs://b/sw"}),
    ("collect", ["gs://b/runs/x"], {"NUM_WORKERS": "2"})])
def test_dry_run_lines_are_the_commands_a_real_run_executes(sh, script, args, env):
  env = {"NUM_WORKERS": "2", "COORDINATOR_IP": "10.0.0.2", **env}
  printed = [shlex.split(line) for line in _lines(sh(script, "--dry-run", *args, **env))]
  sh(script, *args, gcloud="record", **env)
  assert [["gcloud", *call] for call in sh.calls()] == printed


def test_launch_passes_every_argument_unchanged(sh, tmp_path):
  line, = _lines(sh("launch", "--dry-run", *TRICKY, NUM_WORKERS="1"))
  home = _on_worker(tmp_path, _remote_command(line))
  log = home / "xtreme-jax-logs" / "20250102-030405" / "run.log"
  assert log.read_text().splitlines() == ["run", *TRICKY]
  assert (log.parent / "exit_status").read_text() == "0\n"
  line, = _lines(sh("launch", "--dry-run", "--gin.fail=1", NUM_WORKERS="1"))  # the stand-in exits 3
  home = _on_worker(tmp_path, _remote_command(line), "failing")
  assert (home / "xtreme-jax-logs" / "20250102-030405" / "exit_status").read_text() == "3\n"


def test_a_second_launch_on_a_busy_worker_is_refused_in_one_line(sh, tmp_path):
  """While an xtreme-jax run (its Python process: `.../bin/xtreme-jax run ...`) uses the worker, launching
  another fails on that worker with one line and starts nothing."""
  line, = _lines(sh("launch", "--dry-run", "--gin_file=a.gin", NUM_WORKERS="1"))
  busy = subprocess.Popen(["bash", "-c", f'exec -a "/home/u/venv/bin/{HERE} run --gin_file=old.gin" sleep 30'])
  try:
    home = tmp_path / "busy"
    (home / "xtreme-jax").mkdir(parents=True)
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "activate").write_text("")
    proc = subprocess.run(["bash", "-c", _here(_remote_command(line))], env={"PATH": os.environ["PATH"],
                                                                             "HOME": str(home)},
                          capture_output=True, text=True, timeout=30)
  finally:
    busy.kill()
    busy.wait()
  assert proc.returncode == 3 and proc.stderr.strip() == (
      "error: an xtreme-jax run already uses this TPU VM (pgrep -af xtreme-jax lists it)")
  assert not (home / "xtreme-jax-logs" / "20250102-030405" / "run.log").exists()


def test_several_workers_run_as_the_processes_of_one_run(sh, tmp_path):
  lines = _lines(sh("launch", "--dry-run", "--gin_file=a.gin", NUM_WORKERS="2", COORDINATOR_IP="10.0.0.2"))
  assert [shlex.split(line)[shlex.split(line).index("--worker") + 1] for line in lines] == ["0", "1"]
  for i, line in enumerate(lines):
    home = _on_worker(tmp_path, _remote_command(line), f"worker{i}")
    assert (home / "xtreme-jax-logs" / "20250102-030405" / "run.log").read_text().splitlines() == [
        "run", "--gin_file=a.gin", f"process {i} of 2 @ 10.0.0.2:8476"]  # xtreme_jax/training/distributed.py
  # A real run asks gcloud for the workers and worker 0's address; a dry run needs both given.
  sh("launch", "--gin_file=a.gin", gcloud="record")
  calls = sh.calls()
  assert [c[-1] for c in calls[:2]] == ["value(networkEndpoints.len())", "value(networkEndpoints[0].ipAddress)"]
  assert [c[c.index("--worker") + 1] for c in calls[2:]] == ["0", "1"]
  assert "export JAX_COORDINATOR_ADDRESS=10.0.0.2:8476 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=1;" in calls[3][-1]
  proc = sh("launch", "--dry-run", "--gin_file=a.gin", NUM_WORKERS="2", check=False)
  assert proc.returncode == 2 and proc.stderr.strip().endswith("set COORDINATOR_IP")


def test_sweep_runs_each_value_in_its_own_run_dir_and_records_failures(sh, tmp_path):
  values = ["1e-5", "'/data/a b'", "('xnli','panx')", "{'xnli': ['de']}", "'fail $x *'"]
  proc = sh("sweep", "--dry-run", "experiments/xtreme_mbert.gin", "LR", *values, "--", "--gin.STEPS=3",
            RUN_ROOT="gs://bucket/sweeps/lr/", NUM_WORKERS="1")
  line, = _lines(proc)
  assert line.startswith(SSH + "'" + ENTER + "{ (trap \"\" HUP; " + UPLOAD.format("gs://bucket/sweeps/lr")
                         + "failed=0; ")
  assert ("; one LR=xnli_panx --gin_file=experiments/xtreme_mbert.gin \"--gin.LR=('\\''xnli'\\'','\\''panx'\\'')\""
          " --gin.STEPS=3 \"--gin.RUN_DIR='\\''gs://bucket/sweeps/lr/LR=xnli_panx'\\''\";") in line
  home = _on_worker(tmp_path, _remote_command(line))
  logs = home / "xtreme-jax-logs" / "20250102-030405"
  names = ["LR=1e-5", "LR=data_a_b", "LR=xnli_panx", "LR=xnli_de", "LR=fail_x"]
  for name, value in zip(names, values):
    assert (logs / f"{name}.log").read_text().splitlines() == [
        "run", "--gin_file=experiments/xtreme_mbert.gin", f"--gin.LR={value}", "--gin.STEPS=3",
        f"--gin.RUN_DIR='gs://bucket/sweeps/lr/{name}'"]
  outcomes = [ln.split(" ", 1)[1] for ln in (logs / "sweep.log").read_text().splitlines()]
  assert outcomes == [x for n in names[:-1] for x in (f"start {n}", f"ok {n}")] + [
      "start LR=fail_x", "FAILED LR=fail_x (exit 3)", "sweep finished: 1 of 5 runs failed"]


@pytest.mark.parametrize("args,env,message", [
    (["a.gin", "LR", "'a b'", "'a_b'"], {}, "error: two values of LR share the run directory gs://b/LR=a_b"),
    (["a.gin", "bad-name", "1"], {}, "error: MACRO must be a Gin macro name"),
    (["a.gin", "LR", "1", "--", "--gin.RUN_DIR='x'"], {}, "error: sweep.sh sets RUN_DIR itself"),
    (["a.gin", "LR"], {}, "error: usage: sweep.sh"),
    (["a.gin", "LR", "1"], {"RUN_ROOT": "gs://b/it's"}, "error: RUN_ROOT must not contain")])
def test_sweep_refuses_bad_input_with_one_line(sh, args, env, message):
  proc = sh("sweep", "--dry-run", *args, check=False, **{"RUN_ROOT": "gs://b", **env})
  assert proc.returncode == 2 and proc.stdout == ""
  assert proc.stderr.splitlines()[-1].startswith(message)


# -- launch.sh --restart, against a stand-in slice ---------------------------------------------------------------

# The stand-in gcloud of the restart tests: records each call; answers the queued resource's state from $STATES
# (one word a call, the last one kept; ERROR: the query fails as on a network or auth failure; GONE: NOT_FOUND);
# worker 0's address from $IP (a create gives the new slice another one); runs an ssh command that starts
# `xtreme-jax run` on worker i in the home $WORKERS/w<i> ("all": w0), and waits for it, unless the next word of
# $FAILS is an exit status (not "ok"): then that ssh fails with it; records any other ssh command. `storage
# rsync` / `cat` / `ls` work on the folder $BUCKET, where the first $BUCKET/.failing_uploads rsyncs fail.
SLICE = r"""#!/usr/bin/env bash
printf '%s\0' "$@" > "$CALLS/$(printf %03d "$(ls "$CALLS" | wc -l)")"
pop() { read -r first rest < "$1"; [ -z "$rest" ] || echo "$rest" > "$1"; echo "$first"; }
case $* in
  *queued-resources\ describe*)
    now=$(pop "$STATES")
    say="ERROR: (gcloud.compute.tpus.queued-resources.describe)"
    case $now in
      ERROR) echo "$say There was a problem refreshing your current auth tokens" >&2; exit 1 ;;
      GONE) echo "$say NOT_FOUND: Resource 'projects/my-proj/locations/us-east1-d/queuedResources/my-tpu-qr' was"\
" not found" >&2; exit 1 ;;
    esac
    echo "$now" ;;
  *queued-resources\ create*) echo 10.0.0.9 > "$IP" ;;
  *tpu-vm\ describe*ipAddress*) cat "$IP" ;;
  *tpu-vm\ ssh*)
    command=${!#} worker=0
    for ((i = 1; i < $#; i++)); do j=$((i + 1)); [ "${!i}" != --worker ] || worker=${!j}; done
    [ "$worker" != all ] || worker=0
    case $command in *"xtreme-jax run"*)
      fail=$(pop "$FAILS")
      [ "$fail" = ok ] || exit "$fail"
      home=$WORKERS/w$worker
      command=${command//"bin/[x]treme-jax run"/"$BUSY_HERE"}  # tests/test_tpu_scripts.py _here
      HOME=$home PATH="$home/stub:$PATH" bash -c "$command"$'\nwait' ;; esac ;;
  storage\ rsync*)
    failing=$(cat "$BUCKET/.failing_uploads" 2> /dev/null || echo 0)
    if [ "$failing" -gt 0 ]; then echo $((failing - 1)) > "$BUCKET/.failing_uploads"; exit 1; fi
    dest=$BUCKET/${5#gs://}; mkdir -p "$dest"; cp -r "$4/." "$dest/" ;;
  storage\ cat*)
    cat "$BUCKET/${3#gs://}" ;;
  storage\ ls*)
    path=$BUCKET/${!##gs://}; [ -e "$path" ] || exit 1
    [ "$3" != -l ] || stat -c '%s %y' "$path" ;;
esac
"""


@pytest.fixture
def pod(tmp_path):
  """pod(*launch_args, states=..., codes=..., workers=1, fails="ok", **env) -> CompletedProcess of `launch.sh
  --restart` against a stand-in slice of `workers` workers (NUM_WORKERS) whose `xtreme-jax run` exits with each
  of `codes` in turn (one string for every worker, or a list of one per worker)."""
  tmp_path = tmp_path / "pod"
  bin_dir, calls, bucket = (tmp_path / n for n in ("bin", "calls", "bucket"))
  for d in (bin_dir, calls, bucket):
    d.mkdir(parents=True)
  _write_exe(bin_dir / "gcloud", SLICE)

  def run(*args, states, codes, workers=1, fails="ok", **env):
    (tmp_path / "states").write_text(states + "\n")
    (tmp_path / "fails").write_text(fails + "\n")
    (tmp_path / "ip").write_text("10.0.0.5\n")
    for i, worker_codes in enumerate([codes] * workers if isinstance(codes, str) else codes):
      home = tmp_path / "workers" / f"w{i}"
      for d in (home / "xtreme-jax", home / "venv" / "bin", home / "stub"):
        d.mkdir(parents=True, exist_ok=True)
      (home / "venv" / "bin" / "activate").write_text("")
      _write_exe(home / "stub" / "xtreme-jax", '#!/usr/bin/env bash\necho "run $*"\n'
                 'read -r code rest < ~/codes; echo "$rest" > ~/codes; exit "$code"\n')
      (home / "codes").write_text(worker_codes + "\n")
    full = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home"), "LC_ALL": "C",
            **ENV, "CALLS": str(calls), "STATES": str(tmp_path / "states"), "BUCKET": str(bucket),
            "WORKERS": str(tmp_path / "workers"), "FAILS": str(tmp_path / "fails"), "IP": str(tmp_path / "ip"),
            "NUM_WORKERS": str(workers), "POLL_S": "0", "ACCELERATOR": "v4-8", "SPOT": "1",
            "BUSY_HERE": f"bin/[x]{HERE[1:]} run", **env}
    full = {k: v for k, v in full.items() if v is not None}  # None: unset
    return subprocess.run(["bash", str(SCRIPTS / "launch.sh"), "--restart", *args], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=60)

  run.calls = lambda: [(calls / f).read_text().split("\0")[:-1] for f in sorted(os.listdir(calls))]
  run.bucket = bucket
  return run


RUN = ["--gin_file=a.gin", "--gin.RUN_DIR='gs://b/runs/x'"]
LOGS_URL = "gs://b/runs/x/tpu_logs"


def _kinds(calls) -> list[str]:
  """The restart loop's gcloud calls, named: state queries, launches (per worker), stops, setups, creates, ..."""
  kinds = []
  for call in calls:
    call = call[1:] if call[0] == "alpha" else call
    if call[:2] == ["storage", "cat"]:
      kinds.append(("log " if call[2].endswith("run.log") else "status ") + call[2].split("/")[-3])
    elif call[:2] == ["storage", "ls"]:
      kinds.append("stale? " + call[-1].split("/")[-3] if "-l" in call else "stamp? " + call[-1].split("/")[-2])
    elif call[:2] == ["storage", "rsync"]:
      continue
    elif call[3] == "ssh":
      command, worker = call[-1], call[call.index("--worker") + 1]
      kinds.append(f"launch {worker}" if "xtreme-jax run" in command else "stop" if "pkill" in command else "setup")
    elif call[2] == "queued-resources":
      kinds.append(call[3])
    else:
      kinds.append(call[3] + (" ip" if "ipAddress" in call[-1] else ""))
  return kinds


def test_restart_relaunches_a_stopped_run_and_remakes_a_preempted_slice_until_the_run_finishes(pod):
  """Launch 1 crashes (exit 1) on a live slice: relaunched there once the state is known again (a failed query,
  a slice coming up: neither is a loss). Launch 2 is stopped by the preemption's SIGTERM (143) and the queued
  resource is then SUSPENDED: deleted, created, set up, launched: launch 3 finishes."""
  proc = pod(*RUN, states="ACTIVE ERROR PROVISIONING ACTIVE SUSPENDED ACTIVE", codes="1 143 0")
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr.strip().splitlines()[-1] == f"the run has finished (launch 3); logs in {LOGS_URL}"
  assert _kinds(pod.calls()) == [
      "stamp? 20250102-030405-1", "describe", "launch all", "status 20250102-030405-1",
      "log 20250102-030405-1",  # (exit 1: its last line, against a failure that a relaunch repeats)
      "describe", "describe", "describe", "stop", "launch all", "status 20250102-030405-2",
      "describe", "delete", "create", "describe", "setup", "launch all", "status 20250102-030405-3"]
  logs = pod.bucket / "b" / "runs" / "x" / "tpu_logs"  # beside the run, one folder per launch and worker
  for launch, code in (("1", "1"), ("2", "143"), ("3", "0")):
    worker = logs / f"20250102-030405-{launch}" / "worker0"
    assert (worker / "exit_status").read_text() == code + "\n"
    assert (worker / "run.log").read_text() == "run run " + " ".join(RUN) + "\n"  # the stub echoes its argv
  assert "could not ask for the state of my-tpu (ERROR: (gcloud.compute.tpus.queued-resources.describe) There" \
         " was a problem refreshing your current auth tokens); asking again in 0 s" in proc.stderr


def test_restart_stops_on_bad_input_after_max_restarts_and_on_a_failure_that_repeats(pod, sh):
  proc = pod(*RUN, states="GONE ACTIVE", codes="2")  # gone: made again, then bad input
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: the run stopped on bad input (exit 2): the last line of "
      f"{LOGS_URL}/20250102-030405-1/worker0/run.log says why")
  assert "my-tpu is gone (NOT_FOUND): making it again (teardown.sh, create.sh, setup.sh)" in proc.stderr
  assert "delete" not in _kinds(pod.calls())  # (nothing to delete)
  proc = pod(*RUN, states="ACTIVE", codes="1 143 1 0", MAX_RESTARTS="1", STAMP="m")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      f"error: the run did not finish after 1 relaunches: see {LOGS_URL}")
  # Two launches in a row end with exit 1 and the same last line (a NaN loss at the step both resume from).
  proc = pod(*RUN, states="ACTIVE", codes="1 1 0", STAMP="s")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: launches 1 and 2 failed alike (exit 1, the same last line of run.log: run run " + " ".join(RUN)
      + f"); a relaunch would repeat it: see {LOGS_URL}/s-2/worker0/run.log")
  proc = pod("--gin_file=a.gin", "--gin.RUN_DIR='/mnt/runs/x'", states="ACTIVE", codes="0")
  assert proc.returncode == 2 and proc.stderr.strip() == (
      "error: --restart reads each attempt's exit status from gs://: give a gs:// --gin.RUN_DIR (or LOG_URL)")
  lines = _lines(sh("launch", "--dry-run", "--restart", *RUN, NUM_WORKERS="1", ACCELERATOR="v4-8", SPOT="1"))
  assert lines[0] == f"gcloud storage ls {LOGS_URL}/20250102-030405-1/"
  assert lines[1] == ("gcloud compute tpus queued-resources describe my-tpu-qr --zone us-east1-d --project my-proj"
                      " --format 'value(state.state)'")
  assert "20250102-030405-1/run.log" in lines[2] and lines[3] == (
      f"gcloud storage cat {LOGS_URL}/20250102-030405-1/worker0/exit_status")


@pytest.mark.parametrize("unset,message", [
    ("REPO_URL", "error: --restart remakes a lost slice as create.sh and setup.sh made it: export ACCELERATOR, SPOT"
                 " (1: spot, 0: on demand) and REPO_URL for every step"),
    ("ACCELERATOR", "error: --restart remakes a lost slice as create.sh and setup.sh made it: export ACCELERATOR,"),
    ("SPOT", "error: --restart remakes a lost slice as create.sh and setup.sh made it: export ACCELERATOR,")])
def test_restart_needs_what_a_remake_needs(pod, unset, message):
  proc = pod(*RUN, states="ACTIVE", codes="0", **{unset: None})
  assert proc.returncode == 2 and proc.stderr.strip().startswith(message) and not pod.calls()


def test_restart_remakes_the_slice_with_the_first_ones_settings_and_commit(pod):
  """A slice lost before the first launch is made again as ACCELERATOR / SPOT (autocheckpoint: v4's default)
  say, and set up from REPO_URL at the commit read once at the start (COMMIT unset: this checkout's HEAD)."""
  head = subprocess.run(["git", "-C", str(SCRIPTS.parent), "rev-parse", "HEAD"], capture_output=True, text=True)
  proc = pod(*RUN, states="SUSPENDED ACTIVE", codes="0", ACCELERATOR="v4-16", COMMIT=None)
  assert proc.returncode == 0, proc.stderr
  create, = [c for c in pod.calls() if "create" in c]
  assert create[:5] == ["alpha", "compute", "tpus", "queued-resources", "create"]
  assert create[create.index("--accelerator-type") + 1] == "v4-16" and create[-2:] == [
      "--spot", "--autocheckpoint-enabled"]
  setup, = [c[-1] for c in pod.calls() if "ssh" in c and "git checkout" in c[-1]]
  commit = setup.split("git checkout -q --detach ", 1)[1].split(";")[0]
  assert "git clone -q https://example.com/xtreme-jax.git" in setup and re.fullmatch("[0-9a-f]{40}", commit)
  if head.returncode == 0:
    assert f"with commit {commit}" in proc.stderr  # (said once, at the start)


def test_restart_waits_while_the_slice_suspends_or_is_deleted_and_retries_a_failed_create(pod):
  """SUSPENDING and DELETING are waited for; a create.sh that fails (the new request turns FAILED) counts as an
  attempt and is tried again after POLL_S; a slice gone (NOT_FOUND) is created without a teardown."""
  proc = pod(*RUN, states="ACTIVE SUSPENDING SUSPENDED FAILED DELETING GONE ACTIVE", codes="143 0")
  assert proc.returncode == 0, proc.stderr
  assert _kinds(pod.calls()) == [
      "stamp? 20250102-030405-1", "describe", "launch all", "status 20250102-030405-1",
      "describe",  # SUSPENDING: waited for
      "describe", "delete", "create", "describe",  # SUSPENDED: made again; the new request FAILED
      "describe",  # DELETING: waited for
      "describe", "create", "describe", "setup", "launch all", "status 20250102-030405-2"]
  assert "my-tpu is SUSPENDING; asking again in 0 s" in proc.stderr
  assert "error: queued resource my-tpu-qr is FAILED: see gcloud compute tpus queued-resources describe" \
         " my-tpu-qr\ncreate.sh failed; trying again in 0 s" in proc.stderr
  proc = pod(*RUN, states="SUSPENDED FAILED", codes="0", MAX_RESTARTS="2", STAMP="f")  # a create that keeps failing
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      f"error: the run did not finish after 2 relaunches: see {LOGS_URL}")


def test_restart_treats_only_not_found_as_gone(pod):
  """Failed state queries (network, auth) are waited out however many there are: the slice is not remade."""
  proc = pod(*RUN, states="ERROR ERROR ERROR ERROR ERROR ACTIVE", codes="0")
  assert proc.returncode == 0, proc.stderr
  assert _kinds(pod.calls()) == ["stamp? 20250102-030405-1", *["describe"] * 6, "launch all",
                                 "status 20250102-030405-1"]


def test_restart_on_two_workers_relaunches_a_partial_launch_and_asks_for_the_new_address(pod):
  """Worker 0's ssh fails while worker 1's starts: not running; what started is stopped and both are launched
  again. After a remake, worker 0's address is asked from gcloud (the COORDINATOR_IP given was the old slice's)."""
  proc = pod(*RUN, states="ACTIVE ACTIVE SUSPENDED ACTIVE", workers=2, codes=["143 0", "143 143 0"],
             fails="255 ok", COORDINATOR_IP="10.0.0.2")
  assert proc.returncode == 0, proc.stderr
  assert _kinds(pod.calls()) == [
      "stamp? 20250102-030405-1", "describe", "launch 0", "launch 1",  # worker 0: ssh failed
      "describe", "stop", "launch 0", "launch 1", "status 20250102-030405-2",  # 143: relaunched
      "describe", "delete", "create", "describe", "setup", "describe ip", "launch 0", "launch 1",
      "status 20250102-030405-3"]
  assert "could not start on worker(s) 0:255 (worker:exit status; 3: an xtreme-jax run already uses that TPU VM," \
         " 255: ssh failed)\nlaunch 1 did not start on every worker" in proc.stderr
  addresses = [c[-1].split("JAX_COORDINATOR_ADDRESS=")[1].split(" ")[0] for c in pod.calls()
               if "xtreme-jax run" in c[-1]]
  assert addresses == ["10.0.0.2:8476"] * 4 + ["10.0.0.9:8476"] * 2
  for launch in ("2", "3"):
    for worker in ("0", "1"):
      assert (pod.bucket / "b" / "runs" / "x" / "tpu_logs" / f"20250102-030405-{launch}" / f"worker{worker}"
              / "exit_status").exists()


def test_restart_does_not_count_busy_or_in_use_launches(pod):
  """A worker whose TPU a run still uses (exit 3) and a run directory still locked (exit status 75: the stopped
  holder's lease) are tried again without counting, for up to BUSY_S seconds."""
  proc = pod(*RUN, states="ACTIVE", codes="75 0", fails="3 ok", MAX_RESTARTS="0")
  assert proc.returncode == 0, proc.stderr
  assert _kinds(pod.calls()) == [
      "stamp? 20250102-030405-1", "describe", "launch all",  # busy: nothing started, nothing to stop
      "describe", "launch all", "status 20250102-030405-2",  # 75
      "describe", "stop", "launch all", "status 20250102-030405-3"]
  assert "launch 1: a run already uses the TPU of worker(s) 0:3; launching again in 0 s (not counted)" in proc.stderr
  proc = pod(*RUN, states="ACTIVE", codes="75 0", BUSY_S="0", STAMP="b")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
      "error: launch 1: the run directory is in use (exit 75: another run's lock, or a stopped holder's lease not yet"
      " expired), for 0 s or more: another run holds it")


def test_restart_relaunches_a_run_whose_log_stops_changing_and_refuses_a_used_stamp(pod):
  """Launch 1's uploads fail (no exit status, no run.log on gs://): after STALE_S it is stopped and launched
  again. A STAMP whose launch 1 folder exists is refused: its old exit status would end the loop."""
  (pod.bucket / ".failing_uploads").write_text("1\n")
  proc = pod(*RUN, states="ACTIVE", codes="0 0", STALE_S="0")
  assert proc.returncode == 0, proc.stderr
  assert _kinds(pod.calls()) == [
      "stamp? 20250102-030405-1", "describe", "launch all", "status 20250102-030405-1",
      "stale? 20250102-030405-1", "describe", "stop", "launch all", "status 20250102-030405-2"]
  assert "launch 1: worker 0's run.log on gs:// has not changed for 0 s (a hung run, or its uploads fail);" \
         " stopping it and launching again" in proc.stderr
  status = pod.bucket / "b" / "runs" / "x" / "tpu_logs" / "20250102-030405-1" / "worker0" / "exit_status"
  status.parent.mkdir(parents=True)
  status.write_text("0\n")  # a finished run of an earlier invocation with this STAMP
  proc = pod(*RUN, states="ACTIVE", codes="0")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: STAMP=20250102-030405 was used before (gs://b/runs/x/tpu_logs/20250102-030405-1 exists, and its exit"
      " status would be read as this run's): leave STAMP unset or pick a new one")


def test_stopping_a_launch_waits_for_the_run_to_save_then_kills_it(pod, tmp_path):
  """The stop before a relaunch sends SIGTERM (the run saves a checkpoint and exits) and waits up to STOP_S for
  the run to end; one that ignores it is killed (run here with the pattern renamed: `_here`)."""
  proc = pod(*RUN, states="ACTIVE", codes="143 0", STOP_S="2")
  assert proc.returncode == 0, proc.stderr
  stop, = [c[-1] for c in pod.calls() if "pkill" in c[-1]]
  assert "[ $i -lt 2 ]" in stop
  stop = _here(stop)
  for ignores_term, seconds in ((False, 1), (True, 3)):
    run = subprocess.Popen(["bash", "-c", ('trap "" TERM; ' if ignores_term else "")
                            + f'exec -a "/home/u/venv/bin/{HERE} run --gin_file=a.gin" sleep 30'])
    try:
      time.sleep(0.2)
      start = time.time()
      done = subprocess.run(["bash", "-c", stop], capture_output=True, text=True, timeout=30)
      assert done.returncode == 0, done.stderr
      assert run.wait(timeout=5) == (-9 if ignores_term else -15) and time.time() - start < seconds + 2
    finally:
      if run.poll() is None:
        run.kill()
        run.wait()


def test_the_v4_16_walk_through_runs_as_printed(tmp_path):
  """Every tpu_scripts command of tpu_scripts/README.md's walk-through, as printed, dry-runs (NUM_WORKERS=2),
  and the log it points at is where the launched workers write."""
  text = (SCRIPTS / "README.md").read_text()
  block = text.split("## A v4-16 run", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
  commands = block.replace("\\\n", " ").splitlines()
  steps = [c for c in commands if c.startswith("export ") or "tpu_scripts/" in c]
  assert len(steps) == 5 and sum("--restart" in c for c in steps) == 1
  script = "\n".join(["set -e", *(c if c.startswith("export ") else f"{c} --dry-run" for c in steps)])
  env = {k: v for k, v in os.environ.items() if k not in ENV}
  bin_dir = tmp_path / "walk"
  bin_dir.mkdir()
  _write_exe(bin_dir / "gcloud", '#!/usr/bin/env bash\necho "FAKE GCLOUD CALLED: $*" >&2; exit 99\n')
  proc = subprocess.run(["bash", "-c", script], cwd=SCRIPTS.parent, capture_output=True, text=True, timeout=60,
                        env={**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "NUM_WORKERS": "2",
                             "COORDINATOR_IP": "10.0.0.2", "STAMP": "20260101-000000"})
  assert proc.returncode == 0 and "FAKE GCLOUD" not in proc.stderr, proc.stderr
  lines = proc.stdout.splitlines()
  launches = [ln for ln in lines if "xtreme-jax run" in ln]
  assert [shlex.split(ln)[shlex.split(ln).index("--worker") + 1] for ln in launches] == ["0", "1"]
  assert all(" --zone us-central2-b --project my-project " in ln for ln in launches)
  watched = next(c for c in commands if c.startswith("gcloud storage cat")).split()[-1]
  uploaded = "gs://my-bucket/runs/xtreme_mbert/tpu_logs/20260101-000000-1/worker"
  assert watched.replace("<STAMP>", "20260101-000000") == uploaded + "0/run.log" and uploaded in launches[0]
  assert lines[-1] == ("gcloud compute tpus queued-resources delete xtreme-v4-qr --zone us-central2-b"
                       " --project my-project --force --quiet")
  # Step 1: the spot v4-16 with autocheckpoint; every step reads the settings exported once (--restart too).
  assert lines[0] == ("gcloud alpha compute tpus queued-resources create xtreme-v4-qr --zone us-central2-b --project"
                      " my-project --node-id xtreme-v4 --accelerator-type v4-16 --runtime-version tpu-ubuntu2204-base"
                      " --spot --autocheckpoint-enabled")
  assert "git clone -q https://github.com/my-org/xtreme-jax.git" in lines[2]
  assert "launch k logs to gs://my-bucket/runs/xtreme_mbert/tpu_logs/20260101-000000-k/worker<i>/run.log; a remade" \
         " slice is ACCELERATOR=v4-16 SPOT=1 with commit " in proc.stderr
