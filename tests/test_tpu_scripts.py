"""TPU VM scripts: `--dry-run` prints the exact gcloud commands and runs nothing; remote commands keep argv intact.

No gcloud here: dry runs put a `gcloud` first on PATH that fails loudly, real runs one that records its argv.
A worker is simulated by evaluating the remote command with `bash -c` in a fake home whose venv puts a stub
`xtreme-jax` (prints its argv one per line) on PATH.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess

import pytest

TIER = "unit"  # conftest.py: this file's tier

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / "tpu_scripts"
ENV = {"TPU_NAME": "my-tpu", "ZONE": "us-east1-d", "PROJECT": "my-proj", "STAMP": "20250102-030405",
       "REPO_URL": "https://example.com/xtreme-jax.git", "COMMIT": "0123abcd"}
SSH = "gcloud compute tpus tpu-vm ssh my-tpu --zone us-east1-d --project my-proj --worker all --command "
SCP = "gcloud compute tpus tpu-vm scp --recurse --zone us-east1-d --project my-proj --worker "
ENTER = ("cd ~/xtreme-jax && . ~/venv/bin/activate && mkdir -p ~/xtreme-jax-logs/20250102-030405 && "
         "{ ! pgrep -f '\\''bin/[x]treme-jax run'\\'' > /dev/null || { echo \"error: an xtreme-jax run already uses"
         " this TPU VM (pgrep -af xtreme-jax lists it)\" >&2; exit 3; }; } && ")
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
            ' else echo ACTIVE; fi ;; *describe*) echo 2 ;; esac')
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
  subprocess.run(["bash", "-c", command + "\nwait"], env={"PATH": os.environ["PATH"], "HOME": str(home)},
                 check=True, timeout=30)
  return home


def test_dry_run_prints_the_exact_gcloud_commands(sh):
  assert _lines(sh("create", "--dry-run", ACCELERATOR="v4-32", SPOT="1")) == [
      "gcloud compute tpus queued-resources create my-tpu-qr --zone us-east1-d --project my-proj --node-id my-tpu"
      " --accelerator-type v4-32 --runtime-version tpu-ubuntu2204-base --spot",
      "gcloud compute tpus queued-resources describe my-tpu-qr --zone us-east1-d --project my-proj"
      " --format 'value(state.state)'"]
  assert _lines(sh("create", "--dry-run", SPOT="1", AUTOCHECKPOINT="1"))[0].startswith(
      "gcloud alpha compute tpus queued-resources create my-tpu-qr ")
  assert _lines(sh("create", "--dry-run", SPOT="1", AUTOCHECKPOINT="1"))[0].endswith(
      " --spot --autocheckpoint-enabled")
  assert _lines(sh("create", "--dry-run", ACCELERATOR="v4-32", SPOT="1", QUEUED="0")) == [
      "gcloud compute tpus tpu-vm create my-tpu --zone us-east1-d --project my-proj --accelerator-type v4-32"
      " --version tpu-ubuntu2204-base --spot"]
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
      SCP + "0 'my-tpu:~/xtreme-jax-logs' tpu_logs/x/worker0",
      "gcloud storage rsync --recursive --exclude '(^|.*/)(checkpoints|best|averaged)/.*' gs://b/runs/x"
      " tpu_logs/x/x",
      "gcloud compute tpus queued-resources delete my-tpu-qr --zone us-east1-d --project my-proj --force --quiet"]
  assert _lines(sh("create", DRY_RUN="1"))[0].startswith("gcloud compute tpus queued-resources create my-tpu-qr")


def test_the_runtime_follows_the_accelerator(sh):
  for accelerator, runtime in (("v4-32", "tpu-ubuntu2204-base"), ("v5litepod-16", "v2-alpha-tpuv5-lite"),
                               ("v5p-16", "v2-alpha-tpuv5"), ("v6e-16", "v2-alpha-tpuv6e")):
    line = _lines(sh("create", "--dry-run", ACCELERATOR=accelerator))[0]
    assert line.endswith(f"--accelerator-type {accelerator} --runtime-version {runtime}")
  line = _lines(sh("create", "--dry-run", ACCELERATOR="v6e-16", RUNTIME="my-image"))[0]
  assert line.endswith("--runtime-version my-image")


def test_create_waits_for_the_queued_resource_and_stops_on_a_failed_one(sh, tmp_path):
  states = tmp_path / "states"  # what the stand-in gcloud answers, one state a call
  states.write_text("WAITING_FOR_RESOURCES PROVISIONING ACTIVE\n")
  proc = sh("create", gcloud="record", QR_FILE=str(states), POLL_S="0")
  assert [c[3] for c in sh.calls()] == ["create", "describe", "describe", "describe"]
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
  run = lambda: subprocess.run(["bash", "-c", _remote_command(line)], env={  # noqa: E731
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
  assert lines == [SCP + "0 'my-tpu:~/xtreme-jax-logs' tpu_logs/xnli/worker0",
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
  busy = subprocess.Popen(["bash", "-c", 'exec -a "/home/u/venv/bin/xtreme-jax run --gin_file=old.gin" sleep 30'])
  try:
    home = tmp_path / "busy"
    (home / "xtreme-jax").mkdir(parents=True)
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "activate").write_text("")
    proc = subprocess.run(["bash", "-c", _remote_command(line)], env={"PATH": os.environ["PATH"], "HOME": str(home)},
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
# (one word a call, the last one kept; ERROR: the query fails); runs an ssh command that starts `xtreme-jax run` in the worker home
# $WORKER (and waits for it), records any other; `storage rsync` / `storage cat` work on the folder $BUCKET.
SLICE = r'''#!/usr/bin/env bash
printf '%s\0' "$@" > "$CALLS/$(printf %03d "$(ls "$CALLS" | wc -l)")"
case $* in
  *queued-resources\ describe*)  # ERROR: the query fails
    read -r now rest < "$STATES"; [ -z "$rest" ] || echo "$rest" > "$STATES"; [ "$now" != ERROR ] || exit 1
    echo "$now" ;;
  *tpu-vm\ ssh*)
    command=${!#}
    case $command in *"xtreme-jax run"*)
      HOME=$WORKER PATH="$WORKER/stub:$PATH" bash -c "$command"$'\nwait' ;; esac ;;
  storage\ rsync*)
    dest=$BUCKET/${5#gs://}; mkdir -p "$dest"; cp -r "$4/." "$dest/" ;;
  storage\ cat*)
    cat "$BUCKET/${3#gs://}" ;;
esac
'''


@pytest.fixture
def pod(tmp_path):
  """pod(*launch_args, states=..., codes=..., **env) -> CompletedProcess of `launch.sh --restart` against a
  stand-in one-worker slice whose `xtreme-jax run` exits with each of `codes` in turn."""
  tmp_path = tmp_path / "pod"
  bin_dir, calls, bucket, worker = (tmp_path / n for n in ("bin", "calls", "bucket", "worker"))
  for d in (bin_dir, calls, bucket, worker / "xtreme-jax", worker / "venv" / "bin", worker / "stub"):
    d.mkdir(parents=True)
  (worker / "venv" / "bin" / "activate").write_text("")
  _write_exe(bin_dir / "gcloud", SLICE)
  _write_exe(worker / "stub" / "xtreme-jax", '#!/usr/bin/env bash\necho "run $*"\n'
             'read -r code rest < ~/codes; echo "$rest" > ~/codes; exit "$code"\n')

  def run(*args, states, codes, **env):
    (tmp_path / "states").write_text(states + "\n")
    (worker / "codes").write_text(codes + "\n")
    full = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home"), "LC_ALL": "C",
            **ENV, "CALLS": str(calls), "STATES": str(tmp_path / "states"), "BUCKET": str(bucket),
            "WORKER": str(worker), "NUM_WORKERS": "1", "POLL_S": "0", **env}
    return subprocess.run(["bash", str(SCRIPTS / "launch.sh"), "--restart", *args], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=60)

  run.calls = lambda: [(calls / f).read_text().split("\0")[:-1] for f in sorted(os.listdir(calls))]
  run.bucket = bucket
  return run


RUN = ["--gin_file=a.gin", "--gin.RUN_DIR='gs://b/runs/x'"]


def test_restart_relaunches_a_stopped_run_and_remakes_a_preempted_slice_until_the_run_finishes(pod):
  """Attempt 1 crashes (exit 1) on a live slice: relaunched there once the state is known again (a failed query,
  a slice coming up: neither is a loss). Attempt 2 is stopped by the preemption's SIGTERM (143) and the queued
  resource is then SUSPENDED: deleted, created, set up, launched: attempt 3 finishes."""
  proc = pod(*RUN, states="ACTIVE ERROR PROVISIONING ACTIVE SUSPENDED ACTIVE", codes="1 143 0")
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr.strip().splitlines()[-1] == "the run has finished (attempt 3); logs in gs://b/runs/x/tpu_logs"
  kinds = []
  for call in pod.calls():
    if call[:2] == ["storage", "cat"]:
      kinds.append("status " + call[2].split("/")[-3])
    elif call[3] == "ssh":
      command = call[-1]
      kinds.append("launch" if "xtreme-jax run" in command else "stop" if "pkill" in command else "setup")
    elif call[:2] != ["storage", "rsync"]:
      kinds.append(" ".join(call[3:5]) if call[2] == "queued-resources" else call[3])
  assert kinds == [
      "describe my-tpu-qr", "launch", "status 20250102-030405-1",
      "describe my-tpu-qr", "describe my-tpu-qr",
      "describe my-tpu-qr", "stop", "launch", "status 20250102-030405-2",
      "describe my-tpu-qr", "delete my-tpu-qr", "create my-tpu-qr", "describe my-tpu-qr", "setup", "launch",
      "status 20250102-030405-3"]
  logs = pod.bucket / "b" / "runs" / "x" / "tpu_logs"  # beside the run, one folder per attempt and worker
  for attempt, code in (("1", "1"), ("2", "143"), ("3", "0")):
    worker = logs / f"20250102-030405-{attempt}" / "worker0"
    assert (worker / "exit_status").read_text() == code + "\n"
    assert (worker / "run.log").read_text() == "run run " + " ".join(RUN) + "\n"  # the stub echoes its argv


def test_restart_stops_on_bad_input_and_after_max_restarts(pod, sh):
  proc = pod(*RUN, states="ERROR ERROR ERROR ACTIVE", codes="2")  # gone: made again, then bad input
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: the run stopped on bad input (exit 2): the last line of "
      "gs://b/runs/x/tpu_logs/20250102-030405-1/worker0/run.log says why")
  assert "my-tpu is gone: making it again (teardown.sh, create.sh, setup.sh)" in proc.stderr
  proc = pod(*RUN, states="ACTIVE", codes="1 1 1 0", MAX_RESTARTS="1")
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: the run did not finish after 1 relaunches: see gs://b/runs/x/tpu_logs")
  proc = pod("--gin_file=a.gin", "--gin.RUN_DIR='/mnt/runs/x'", states="ACTIVE", codes="0")
  assert proc.returncode == 2 and proc.stderr.strip() == (
      "error: --restart reads each attempt's exit status from gs://: give a gs:// --gin.RUN_DIR (or LOG_URL)")
  lines = _lines(sh("launch", "--dry-run", "--restart", *RUN, NUM_WORKERS="1"))
  assert lines[0] == ("gcloud compute tpus queued-resources describe my-tpu-qr --zone us-east1-d --project my-proj"
                      " --format 'value(state.state)'")
  assert "20250102-030405-1/run.log" in lines[1] and lines[2] == (
      "gcloud storage cat gs://b/runs/x/tpu_logs/20250102-030405-1/worker0/exit_status")


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
