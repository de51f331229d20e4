#!/usr/bin/env bash
# Start one xtreme-jax run on every worker at once, detached. With several workers, worker i runs it as
# process i of a multi-process run: JAX_COORDINATOR_ADDRESS=<worker 0's address>:$COORDINATOR_PORT,
# JAX_NUM_PROCESSES=<workers>, JAX_PROCESS_ID=i (common.sh run_detached; a dry run needs NUM_WORKERS and
# COORDINATOR_IP, a real one asks gcloud). The arguments reach `xtreme-jax run` exactly as given here (quoted
# once for the worker's shell):
#   TPU_NAME=my-tpu bash tpu_scripts/launch.sh [--dry-run] [--restart] --gin_file=experiments/xtreme_mbert.gin \
#       --gin.RUN_DIR="'gs://my-bucket/runs/xtreme_mbert'" ...
# Log: ~/xtreme-jax-logs/$STAMP/run.log on each worker, and once the run ends its exit status in
# ~/xtreme-jax-logs/$STAMP/exit_status (0: finished; 128+N: stopped by signal N after saving, 143 for SIGTERM;
# 2: bad input; 1: an unexpected error). With a gs:// RUN_DIR (or LOG_URL) each worker also copies that folder
# to $RUN_DIR/tpu_logs/$STAMP/worker<i>/ every UPLOAD_S seconds (60) and when the run ends.
#
# --restart stays in the foreground and keeps the run going until it has finished (worker 0's exit status 0).
# It needs a gs:// RUN_DIR (or LOG_URL) and what a remake of the slice needs, fixed once for every remake:
# ACCELERATOR, SPOT (1 or 0) and REPO_URL set (exported for create.sh / setup.sh, as the README's walk-through
# does), COMMIT (default: this checkout's HEAD, read once). Every POLL_S seconds (60) it asks for the slice's
# state and for the exit status on gs://:
#   - a slice coming up, suspending or being deleted is waited for; so is a state query that fails for another
#     reason than NOT_FOUND (network, auth);
#   - a slice that is down (queued resource SUSPENDED or FAILED, VM PREEMPTED, ...) or gone (NOT_FOUND) is
#     deleted and made again (teardown.sh, create.sh, setup.sh; a failed create or setup is tried again after
#     POLL_S s); worker 0's address is asked again;
#   - a run that stopped (preemption's SIGTERM, a crash), a launch that failed on a worker, or a run whose
#     uploaded run.log has not changed for STALE_S seconds (3600: a hung run, or uploads that fail) is launched
#     again, after what is left of it on the workers has been stopped (SIGTERM, up to STOP_S = 300 s to save,
#     then SIGKILL); launch k logs under $STAMP-k, and resumes from the last checkpoint.
# It stops with one line on bad input (exit status 2), when two launches in a row end with exit status 1 and
# the same last line in run.log (a failure a relaunch repeats, e.g. a NaN loss), and after MAX_RESTARTS (10)
# counted failures (relaunches, failed creates and setups). A launch refused because a run still holds the TPU
# (3) or the run directory (exit status 75) is tried again without counting, for up to BUSY_S seconds (1800).
# It refuses a STAMP whose first launch folder ($log_url/$STAMP-1) exists.
set -euo pipefail
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
usage="usage: launch.sh [--dry-run] [--restart] --gin_file=FILE [--gin.NAME=VALUE ...]"
restart=0
if [ "${1:-}" = --restart ]; then
  restart=1
  shift
fi
[ $# -gt 0 ] || die "$usage"
args=("$@")
log_url=$(log_url_for "$(run_dir_of "$@")")

launch() {  # launch: the run on every worker, logging to $LOGS/$STAMP (and log_url); run_detached's status
  local logs
  logs=$(remote_path "$LOGS/$STAMP")
  run_detached "$LOGS/$STAMP/run.log" "$(uploading "$log_url" \
    "xtreme-jax run $(quote "${args[@]}"); echo \$? > $logs/exit_status")"
}

if [ "$restart" = 0 ]; then
  rc=0
  launch || rc=$?
  [ "$rc" != 2 ] || exit 2  # (its line said why)
  if [ "$rc" != 0 ]; then
    echo "error: the run did not start on worker(s)$FAILED_WORKERS (worker:exit status); stop what started on the \
others (pgrep -af xtreme-jax) before launching again" >&2
    exit "$rc"
  fi
  note "launched on all workers of $TPU_NAME; log $LOGS/$STAMP/run.log${log_url:+ (copied to $log_url/$STAMP)}"
  exit
fi

# --restart: watch the slice and the run until the run has finished.
case $log_url in
  gs://*) ;;
  *) die "--restart reads each attempt's exit status from gs://: give a gs:// --gin.RUN_DIR (or LOG_URL)" ;;
esac
: "${MAX_RESTARTS:=10}" "${POLL_S:=60}" "${STALE_S:=3600}" "${STOP_S:=300}" "${BUSY_S:=1800}"
for setting in MAX_RESTARTS POLL_S STALE_S STOP_S BUSY_S; do
  [[ ${!setting} =~ ^[0-9]+$ ]] || die "$setting must be a whole number, got '${!setting}'"
done
here=$(dirname "$0")
# What a remake needs (create.sh and setup.sh read it from the environment), fixed now for every remake.
[ -n "${ACCELERATOR:-}" ] && [ -n "${SPOT:-}" ] && [ -n "$REPO_URL" ] || die "--restart remakes a lost slice as \
create.sh and setup.sh made it: export ACCELERATOR, SPOT (1: spot, 0: on demand) and REPO_URL for every step"
case $SPOT in 0 | 1) ;; *) die "SPOT must be 1 (a spot slice) or 0 (on demand), got '$SPOT'" ;; esac
: "${COMMIT:=$(git -C "$here/.." rev-parse HEAD 2>/dev/null || true)}"
[[ $COMMIT =~ ^[0-9a-f]{7,40}$ ]] || die "set COMMIT to the commit a remade slice installs (a hex sha; got '$COMMIT')"
export ACCELERATOR SPOT REPO_URL COMMIT
if [ "$QUEUED" = 0 ]; then
  state=(compute tpus tpu-vm describe "$TPU_NAME" "${TPU_FLAGS[@]}" --format 'value(state)') up=READY
else
  state=(compute tpus queued-resources describe "$QUEUED_RESOURCE" "${TPU_FLAGS[@]}" --format 'value(state.state)')
  up=ACTIVE
fi
base=$STAMP
status_url() {  # status_url: where worker 0 writes the current launch's exit status
  printf '%s' "$log_url/$STAMP/worker0/exit_status"
}
note "launch k logs to $log_url/$base-k/worker<i>/run.log; a remade slice is ACCELERATOR=$ACCELERATOR \
SPOT=$SPOT with commit $COMMIT"
if [ "$DRY_RUN" = 1 ]; then  # one round: the used-STAMP check, the state, the first launch, its exit status
  run_gcloud storage ls "$log_url/$base-1/"
  run_gcloud "${state[@]}"
  STAMP=$base-1
  launch
  run_gcloud storage cat "$(status_url)"
  note "(every POLL_S seconds: the state, then the exit status; a slice not $up is made again, a stopped run relaunched)"
  exit
fi
if gcloud storage ls "$log_url/$base-1/" > /dev/null 2>&1; then
  die "STAMP=$base was used before ($log_url/$base-1 exists, and its exit status would be read as this run's): \
leave STAMP unset or pick a new one"
fi

attempt=0 launches=0 running=0 fresh=1 installed=1 busy_since='' failed_with='' seen_log='' changed_at=0
budget() {  # budget: dies once MAX_RESTARTS relaunches (and failed creates or setups) are used up
  [ "$attempt" -le "$MAX_RESTARTS" ] || die "the run did not finish after $MAX_RESTARTS relaunches: see $log_url"
}
counted() {  # counted: one more launch, failed create or failed setup against MAX_RESTARTS
  budget
  attempt=$((attempt + 1))
}
in_use() {  # in_use WHY: a launch refused while a run holds the TPU or the run directory: tried again, not counted
  [ -n "$busy_since" ] || busy_since=$SECONDS
  [ $((SECONDS - busy_since)) -lt "$BUSY_S" ] || die "$1, for $BUSY_S s or more: another run holds it; stop that \
run or use another RUN_DIR (logs: $log_url)"
  note "$1; launching again in $POLL_S s (not counted)"
}
while :; do
  slice_state "${state[@]}"
  case $STATE in
    "$up") ;;
    ACCEPTED | WAITING_FOR_RESOURCES | PROVISIONING | CREATING | STARTING | RESTARTING | REPAIRING | SUSPENDING | \
      DELETING | STOPPING)
      note "$TPU_NAME is $STATE; asking again in $POLL_S s"
      sleep "$POLL_S"
      continue ;;
    '')  # gcloud could not say (network, auth): only NOT_FOUND means gone
      note "could not ask for the state of $TPU_NAME (${STATE_ERROR:-no answer}); asking again in $POLL_S s"
      sleep "$POLL_S"
      continue ;;
    *)  # down (SUSPENDED, FAILED, PREEMPTED, ...) or GONE
      note "$TPU_NAME is ${STATE/#GONE/gone (NOT_FOUND)}: making it again (teardown.sh, create.sh, setup.sh)"
      running=0 fresh=1 installed=0 busy_since=''
      unset COORDINATOR_IP  # (worker 0 of the new slice has another address)
      if [ "$STATE" != GONE ]; then
        bash "$here/teardown.sh" > /dev/null || note "teardown.sh failed; creating anyway"
      fi
      if ! bash "$here/create.sh"; then
        counted
        note "create.sh failed; trying again in $POLL_S s"
        sleep "$POLL_S"
        continue
      fi ;;
  esac
  if [ "$installed" = 0 ]; then
    if ! bash "$here/setup.sh"; then
      counted
      note "setup.sh failed; trying again in $POLL_S s"
      sleep "$POLL_S"
      continue
    fi
    installed=1
  fi
  if [ "$running" = 0 ]; then
    budget
    # On the same slice, first stop what is left of the last launch (a SIGTERM saves a checkpoint).
    [ "$fresh" = 1 ] || stop_runs "$STOP_S" || note "what is left of launch $launches did not stop on every worker"
    launches=$((launches + 1)) STAMP=$base-$launches
    rc=0
    launch || rc=$?
    case $rc in
      0)
        attempt=$((attempt + 1)) running=1 fresh=0 seen_log='' changed_at=$SECONDS
        note "launch $launches (attempt $attempt) started; logs in $log_url/$STAMP" ;;
      3) in_use "launch $launches: a run already uses the TPU of worker(s)$FAILED_WORKERS" ;;
      *)
        attempt=$((attempt + 1)) fresh=0
        note "launch $launches did not start on every worker; trying again in $POLL_S s" ;;
    esac
  fi
  sleep "$POLL_S"
  [ "$running" = 1 ] || continue
  status=$(gcloud storage cat "$(status_url)" 2> /dev/null || true)
  case $status in
    '')  # still running: unless its log has stopped changing
      log=$(gcloud storage ls -l "$log_url/$STAMP/worker0/run.log" 2> /dev/null || true)
      if [ "$log" != "$seen_log" ]; then
        seen_log=$log changed_at=$SECONDS
      elif [ $((SECONDS - changed_at)) -ge "$STALE_S" ]; then
        note "launch $launches: worker 0's run.log on gs:// has not changed for $STALE_S s (a hung run, or its \
uploads fail); stopping it and launching again"
        running=0 failed_with=''
      fi ;;
    0) note "the run has finished (launch $launches); logs in $log_url"; exit 0 ;;
    2) die "the run stopped on bad input (exit 2): the last line of $log_url/$STAMP/worker0/run.log says why" ;;
    75)
      running=0 attempt=$((attempt - 1)) failed_with=''
      in_use "launch $launches: the run directory is in use (exit 75: another run's lock, or a stopped holder's \
lease not yet expired)" ;;
    *)
      running=0 busy_since=''
      last=''
      if [ "$status" = 1 ]; then
        last=$(gcloud storage cat "$log_url/$STAMP/worker0/run.log" 2> /dev/null | tail -n 1 || true)
        if [ -n "$last" ] && [ "$last" = "$failed_with" ]; then
          die "launches $((launches - 1)) and $launches failed alike (exit 1, the same last line of run.log: \
$last); a relaunch would repeat it: see $log_url/$STAMP/worker0/run.log"
        fi
      fi
      failed_with=$last
      note "launch $launches ended with exit status $status; launching it again" ;;
  esac
done
