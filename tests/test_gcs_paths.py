"""Run directories, data and reports under gs:// URLs (offline: epath's gs backend mapped to a tmp folder).

`gcs` maps `gs://bucket/...` to `<tmp>/gcs/bucket/...` through
`etils.epath.testing.mock_epath`, with TensorFlow's tf.io.gfile backend
turned off (epath would otherwise pick it over the mock) and appends refused,
as object stores refuse them. orbax's tensorstore writes to real GCS cannot be
tested offline; only orbax's directory handling is.
"""

import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from etils.epath import gpath
from etils.epath.testing import mock_epath

from xtreme_jax import atomic, errors, fs, text
from xtreme_jax.data.readers import xtreme_readers as xr
from xtreme_jax.evaluation import report, scorer
from xtreme_jax.training import checkpoints, locks, writers
from xtreme_jax.training.checkpoints import (FINGERPRINT_VERSION, ForeignRunDirectoryError, RunDirectory,
                                             RunDirectoryInUseError)

TIER = "unit"  # conftest.py: this file's tier

RUN = "gs://bucket/runs/r1"


@pytest.fixture
def gcs(tmp_path, tmp_path_factory, monkeypatch):
  """`gs://` served from `<tmp>/gcs`; the working directory is `<tmp>` (where nothing else may appear)."""
  root = str(tmp_path / "gcs")
  uploads = str(tmp_path_factory.mktemp("uploads"))
  os.makedirs(root)
  monkeypatch.chdir(tmp_path)

  def local(path):
    path = os.fspath(path)
    assert path.startswith("gs://"), path  # a URL turned into a local path would show up here
    return os.path.join(root, path[len("gs://"):])

  def remote(path):
    return "gs://" + os.path.relpath(os.fspath(path), root).replace(os.sep, "/")

  def one(original, path, *args, **kwargs):
    return original(local(path), *args, **kwargs)

  def rename(original, src, dst):  # (the original checks `dst` through the mock again)
    if os.path.exists(local(dst)):
      raise FileExistsError(dst)
    os.rename(local(src), local(dst))

  def open_(original, path, mode):
    if "a" in mode or "+" in mode:
      raise NotImplementedError(f"objects cannot be appended to ({path}, mode {mode!r})")
    if "w" in mode:  # an object needs no parent folder, and appears whole when its upload ends
      os.makedirs(os.path.dirname(local(path)), exist_ok=True)
      handle, upload = tempfile.mkstemp(dir=uploads)
      os.close(handle)
      return _Upload(original(upload, mode), upload, local(path))
    return original(local(path), mode)

  def walk(original, top, **kwargs):
    for root_, dirs, files in original(local(top), **kwargs):
      yield remote(root_), dirs, files

  monkeypatch.setattr(gpath, "_is_tf_installed", lambda: False)
  with mock_epath(open=open_, exists=one, isdir=one, listdir=one, makedirs=one, mkdir=one, remove=one, rmtree=one,
                  stat=one, rename=rename, walk=walk,
                  glob=lambda original, pattern: [remote(p) for p in original(local(pattern))]):
    yield root
    for stop in locks._RENEWING.values():  # a lock a failed test left held renews no object outside the fake
      stop.set()
  assert sorted(os.listdir(tmp_path)) == ["gcs"]  # no `gs:` folder in the working directory


class _Upload:
  """A file being written as an object: readers see the old object (or none) until it is closed, then the new one
  whole, as on GCS (a plain local write would show readers an empty object while it is under way)."""

  def __init__(self, file, upload, path):
    self._file, self._upload, self._path = file, upload, path

  def __getattr__(self, name):
    return getattr(self._file, name)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()

  def close(self):
    if not self._file.closed:
      self._file.close()
      os.replace(self._upload, self._path)


def objects(root):
  """Every file under the fake bucket root, relative, sorted."""
  return sorted(os.path.relpath(os.path.join(r, n), root) for r, _, names in os.walk(root) for n in names)


# -- fs and atomic ---------------------------------------------------------------------

def test_paths_keep_their_scheme():
  assert fs.is_remote("gs://b/x") and not fs.is_remote("/tmp/x") and not fs.is_remote("C:\\x")
  assert fs.abspath("gs://b/x/../y/") == "gs://b/y" and fs.realpath("gs://b//x") == "gs://b/x"
  assert fs.dirname("gs://b/run/report") == "gs://b/run" and fs.basename("gs://b/run/") == "run"
  assert fs.relpath("gs://b/run/a/c.json", "gs://b/run") == "a/c.json"
  assert scorer.default_out("gs://b/subs/mine/") == "gs://b/subs/scores-mine.json"
  assert scorer.default_out("sub") == os.path.join(os.getcwd(), "scores-sub.json")
  with pytest.raises(errors.ConfigError, match=r"^ftp://h/x: unsupported URL scheme ftp://; expected a local path "
                                                r"or one of gs://, s3://, az://, hf://$"):
    fs.exists("ftp://h/x")


def test_atomic_writes_upload_whole_objects_and_leave_no_temporary_object(gcs):
  atomic.write_json(f"{RUN}/a.json", {"ü": 1})
  atomic.write_text(f"{RUN}/b.txt", "x\r\ny\n")
  atomic.write_with(f"{RUN}/deep/c.bin", lambda tmp: open(tmp, "wb").write(b"\x00\x01"))
  assert json.loads(fs.read_text(f"{RUN}/a.json")) == {"ü": 1}
  assert fs.read_bytes(f"{RUN}/b.txt") == b"x\r\ny\n" and fs.read_bytes(f"{RUN}/deep/c.bin") == b"\x00\x01"
  assert objects(gcs) == ["bucket/runs/r1/a.json", "bucket/runs/r1/b.txt", "bucket/runs/r1/deep/c.bin"]
  assert fs.isfile(f"{RUN}/a.json") and fs.isdir(RUN) and not fs.isfile(RUN) and not fs.exists(f"{RUN}/no")
  assert sorted(fs.listdir(RUN)) == ["a.json", "b.txt", "deep"]
  assert fs.glob(f"{RUN}/*.json") == [f"{RUN}/a.json"]
  with pytest.raises(errors.ConfigError, match="last component only"):
    fs.glob(f"{RUN}/d*/c.bin")
  assert atomic.remove_stale(RUN) == []
  fs.rmtree(f"{RUN}/deep")
  assert not fs.exists(f"{RUN}/deep") and fs.exists(f"{RUN}/a.json")


# -- run directories -------------------------------------------------------------------

def test_run_directory_on_gcs_locks_checks_and_commits(gcs):
  lock = os.path.join(gcs, "bucket/runs/r1/.lock")
  with RunDirectory(RUN, {"a": 1}, files={"languages.json": ["de"]}) as claim:
    held = open(lock).read()
    assert re.fullmatch(rf"host {re.escape(socket.gethostname())} pid {os.getpid()} since \S+Z seen \S+Z token \w+\n",
                        held)
    assert claim.check() is False
    claim.commit(0)
  assert objects(gcs) == ["bucket/runs/r1/languages.json", "bucket/runs/r1/run_config.json"]  # lock released
  assert json.loads(fs.read_text(f"{RUN}/run_config.json")) == {"fingerprint_version": FINGERPRINT_VERSION, "a": 1}
  # Another run holds the lock: refused in one line naming its host, pid and time and how to remove it.
  with open(lock, "w") as f:
    f.write("host tpu-vm-7 pid 4242 since 2030-01-02T03:04:05Z token abc\n")
  with pytest.raises(RunDirectoryInUseError) as refused:
    RunDirectory(RUN, {"a": 1}).lock()
  assert str(refused.value) == (
      f"{RUN} is in use by host tpu-vm-7 pid 4242 since 2030-01-02T03:04:05Z, last seen 0 s ago (lock file "
      f"{RUN}/.lock); wait for that run to end or use another RUN_DIR; if it is no longer running, delete the lock: "
      f"gsutil rm {RUN}/.lock (it is taken over once not renewed for 300 s)")
  assert open(lock).read().startswith("host tpu-vm-7 ")  # a refused run leaves the holder's lock alone
  # A lock of this host whose process is gone is taken over; another configuration is still refused.
  dead = subprocess.Popen([sys.executable, "-c", ""])
  dead.wait()
  with open(lock, "w") as f:
    f.write(f"host {socket.gethostname()} pid {dead.pid} since 2030-01-02T03:04:05Z token abc\n")
  with pytest.raises(ForeignRunDirectoryError, match=r"differing keys: a \(1 -> 2\)"), \
       RunDirectory(RUN, {"a": 2}) as claim:
    claim.check()
  assert not os.path.exists(lock)
  with RunDirectory(RUN, {"a": 1}) as claim:
    assert claim.check() is True


def test_a_lock_left_by_a_preempted_vm_is_taken_over_once_its_lease_has_run_out(gcs, monkeypatch, caplog):
  """A recreated VM (another host name) resumes: the old holder's lease ran out. A holder that still renews
  its lease keeps the directory."""
  lock = os.path.join(gcs, "bucket/runs/r1/.lock")
  old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=400)
  os.makedirs(os.path.dirname(lock))
  with open(lock, "w") as f:
    f.write(f"host tpu-vm-0-old pid 77 since 2026-01-01T00:00:00Z seen {old:%Y-%m-%dT%H:%M:%SZ} token a\n")
  with caplog.at_level("WARNING"), RunDirectory(RUN, {"a": 1}):
    assert open(lock).read().startswith(f"host {socket.gethostname()} pid {os.getpid()} ")
  assert re.search(r"lease was last renewed 40\d s ago \(more than 300 s\)", caplog.text)  # (whole seconds)
  recent = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=100)
  with open(lock, "w") as f:
    f.write(f"host tpu-vm-0 pid 77 since 2026-01-01T00:00:00Z seen {recent:%Y-%m-%dT%H:%M:%SZ} token b\n")
  with pytest.raises(RunDirectoryInUseError, match=r"since 2026-01-01T00:00:00Z, last seen 10\d s ago \(lock file"):
    RunDirectory(RUN, {"a": 1}).lock()


def test_a_held_lock_is_renewed_and_a_taken_over_one_is_let_go(gcs, monkeypatch, caplog):
  monkeypatch.setattr(locks, "HEARTBEAT_S", 0.05)
  path = f"{RUN}/.lock"
  locks.acquire(path, RUN)
  try:
    first = fs.read_text(path)
    fields = lambda record: dict(zip(record.split()[0::2], record.split()[1::2]))  # noqa: E731
    deadline = time.time() + 10
    while fields(fs.read_text(path))["seen"] == fields(first)["seen"] and time.time() < deadline:
      time.sleep(0.1)  # `seen` has a resolution of one second
    renewed = fs.read_text(path)
    assert fields(renewed)["seen"] > fields(first)["seen"]
    assert {k: v for k, v in fields(renewed).items() if k != "seen"} == {
        k: v for k, v in fields(first).items() if k != "seen"}
    # Another run takes it over (written until the beat has seen it: a renewal already under way when the
    # takeover lands writes over it once, as on a real bucket a holder does only while it is alive).
    other = "host other pid 8 since T seen T token z\n"
    with caplog.at_level("ERROR"):
      deadline = time.time() + 10
      while "is no longer this run's" not in caplog.text and time.time() < deadline:
        fs.write_bytes(path, other.encode("utf-8"))
        time.sleep(0.1)
      time.sleep(0.3)
    assert fs.read_text(path) == other  # left alone from then on
    assert "is no longer this run's (host other pid 8 since T)" in caplog.text
  finally:
    locks.release(path)


def test_a_holder_whose_lock_was_taken_over_or_deleted_is_told_to_stop_and_leaves_the_new_lock(gcs, monkeypatch):
  """The loss is recorded (`lost`), `check_held` raises the one-line "in use" error (exit 75) that stops the
  trainer at its next step, and neither release nor process exit deletes the lock object of the run that took
  it over."""
  monkeypatch.setattr(locks, "HEARTBEAT_S", 0.05)
  path = f"{RUN}/.lock"
  other = "host other pid 8 since T seen T token z\n"

  def lose(write):  # until the renewal has seen it (a renewal under way may write over a takeover once)
    deadline = time.time() + 10
    while locks.lost(path) is None and time.time() < deadline:
      write()
      time.sleep(0.1)
    time.sleep(0.2)
    write()

  locks.acquire(path, RUN)
  try:
    assert locks.lost(path) is None
    locks.check_held()  # its own lock: nothing to say
    lose(lambda: fs.write_bytes(path, other.encode("utf-8")))
    with pytest.raises(RunDirectoryInUseError) as stopped:
      locks.check_held()
    assert stopped.value.exit_code == 75 and str(stopped.value) == (
        f"{RUN} is in use by host other pid 8 since T (lock file {path}): another run took over this run's lock, "
        "so this run stops without saving; wait for that run to end or use another RUN_DIR")
    locks._release_remote_at_exit()  # (what process exit runs)
    assert fs.read_text(path) == other
  finally:
    locks.release(path)
  assert fs.read_text(path) == other and not locks.held(path) and locks.lost(path) is None
  locks.check_held()
  fs.remove(path)
  with RunDirectory(RUN, {"a": 1}):  # deleted (someone's `gsutil rm`): lost as well
    lose(lambda: fs.remove(path, missing_ok=True))
    with pytest.raises(RunDirectoryInUseError, match=rf"^{RUN} is no longer locked by this run: its lock file "
                                                       rf"{RUN}/.lock was deleted, so this run stops without saving"):
      locks.check_held()
    fs.write_bytes(path, other.encode("utf-8"))  # a new run took it meanwhile
  assert fs.read_text(path) == other


def test_lock_written_over_by_another_run_is_refused(gcs, monkeypatch):
  write = fs.write_bytes
  monkeypatch.setattr(fs, "write_bytes", lambda path, data: write(path, b"host other pid 7 since T token z\n"))
  with pytest.raises(RunDirectoryInUseError, match="is in use by host other pid 7 since T "):
    locks.acquire(f"{RUN}/.lock", RUN)
  assert not locks.held(f"{RUN}/.lock")


def test_failed_new_claim_on_gcs_leaves_nothing(gcs):
  with pytest.raises(errors.ConfigError, match="holds no run to resume"), \
       RunDirectory(f"{RUN}/models/xnli", {"a": 1}, overrides={"lr": 1.0}) as claim:
    claim.check()
  assert objects(gcs) == [] and not fs.exists(f"{RUN}/models/xnli")


def test_checkpoint_directories_stay_urls(gcs, monkeypatch):
  with pytest.raises(errors.ConfigError, match=r"^checkpoints under gs://bucket/c need the google-cloud-storage "
                                                r"package .*: pip install 'google-cloud-storage>=2.14'$"):
    checkpoints.check_remote_checkpoints("gs://bucket/c")
  from orbax.checkpoint._src.path import gcs_utils
  monkeypatch.setattr(checkpoints, "check_remote_checkpoints", lambda directory: None)
  monkeypatch.setattr(gcs_utils, "is_hierarchical_namespace_enabled", lambda path: False)  # asks GCS otherwise
  step = os.path.join(gcs, "bucket/runs/r1/checkpoints/3")
  os.makedirs(step)
  open(os.path.join(step, "commit_success.txt"), "w").close()  # a finished step on GCS (unfinished: removed)
  ckpt = checkpoints.Checkpointer(f"{RUN}/checkpoints/", every=5, keep=2)
  ckpt.manager._maybe_await_cleanup_tmp_directory()  # orbax's background listing, before the mock goes
  assert ckpt.directory == f"{RUN}/checkpoints" and str(ckpt.manager.directory) == f"{RUN}/checkpoints"
  assert ckpt.all_steps() == [3]  # orbax lists the steps through epath
  ckpt._set_aside([3], resumed_from=0)
  assert [n.startswith("corrupt-3-") for n in fs.listdir(f"{RUN}/checkpoints")] == [True]
  ckpt.close()


# -- metrics, data, reports ------------------------------------------------------------

def test_metrics_writer_rewrites_the_whole_object(gcs, monkeypatch):
  path = f"{RUN}/metrics.jsonl"
  out = writers.make_writers(RUN, tensorboard=False)
  out.write_scalars(1, {"train/loss": 2.0})
  out.write_scalars(2, {"train/loss": 1.5})
  assert not fs.exists(path)  # uploaded on flush / close, or every UPLOAD_SECONDS
  out.close()
  assert fs.read_text(path) == '{"step": 1, "train/loss": 2.0}\n{"step": 2, "train/loss": 1.5}\n'
  monkeypatch.setattr(writers, "UPLOAD_SECONDS", 0.0)
  resumed = writers.JsonlWriter(path, resume_step=1)  # drops step 2, then appends
  resumed.write_scalars(2, {"train/loss": 1.4})
  assert fs.read_text(path) == '{"step": 1, "train/loss": 2.0}\n{"step": 2, "train/loss": 1.4}\n'
  resumed.close()


def test_readers_and_scorer_read_gcs(gcs):
  os.makedirs(os.path.join(gcs, "bucket/download/xnli"))
  with open(os.path.join(gcs, "bucket/download/xnli/test-de.tsv"), "wb") as f:
    f.write(b"\xef\xbb\xbfEin Satz .\tNoch einer .\r\n")
  examples = xr.read("xnli", "gs://bucket/download", "de", "test")
  assert [(e["text_a"], e["text_b"], e["label"]) for e in examples] == [("Ein Satz .", "Noch einer .", None)]
  with open(os.path.join(gcs, "bucket/download/bad.txt"), "wb") as f:
    f.write(b"ok\n\xff\n")
  with pytest.raises(errors.DataError, match=r"^gs://bucket/download/bad.txt:2 \(byte 3\): not UTF-8"):
    text.read_utf8("gs://bucket/download/bad.txt")
  with pytest.raises(errors.MissingInputError, match="expected file gs://bucket/download/xnli/test-fr.tsv"):
    xr.read("xnli", "gs://bucket/download", "fr", "test")
  for folder, labels in (("preds", "entailment\nneutral\n"), ("labels", "entailment\ncontradiction\n")):
    atomic.write_text(f"gs://bucket/{folder}/xnli/test-de.tsv", labels)
  results = scorer.score_submission("gs://bucket/preds", "gs://bucket/labels", out="gs://bucket/scores.json",
                                    tasks=["xnli"])
  assert results["tasks"]["xnli"]["languages"]["de"]["accuracy"] == 50.0
  assert json.loads(fs.read_text("gs://bucket/scores.json")) == results


def test_report_written_to_gcs(gcs):
  results = report.results_from_metrics({"pawsx": {"en": {"accuracy": 91.2}, "de": {"accuracy": 85.4}}})
  paths = report.write_report(results, f"{RUN}/report/")
  assert paths == {name: f"{RUN}/report/{name}" for name in ("plots/pawsx.png", "results.json", "report.md")}
  assert fs.read_bytes(paths["plots/pawsx.png"]).startswith(b"\x89PNG\r\n\x1a\n")
  assert fs.read_text(paths["report.md"]) == report.render_markdown(results)
  assert objects(gcs) == [f"bucket/runs/r1/report/{n}" for n in ("plots/pawsx.png", "report.md", "results.json")]
