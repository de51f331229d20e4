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
# --restart stays in the foreground and keeps the run going until it has finished (worker 0's exit status 0):
# every POLL_S seconds (60) it asks for the slice's state and for the exit status on gs://; a slice that is down
# (preempted spot slice: queued resource SUSPENDED, VM PREEMPTED; gone: 3 failed state queries) is deleted and made again
# (teardown.sh, create.sh, setup.sh), and a run that stopped (preemption's SIGTERM, a crash) is launched again
# (attempt k logs under $STAMP-k), where it resumes from its last checkpoint. Exit status 2 (bad input) stops
# it; so do MAX_RESTARTS (10) relaunches. Needs a gs:// RUN_DIR or LOG_URL.
set -euo pipefail
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

launch() {  # launch: the run on every worker, logging to $LOGS/$STAMP (and log_url)
  local logs
  logs=$(remote_path "$LOGS/$STAMP")
  run_detached "$LOGS/$STAMP/run.log" "$(uploading "$log_url" \
    "xtreme-jax run $(quote "${args[@]}"); echo \$? > $logs/exit_status")"
}

if [ "$restart" = 0 ]; then
  launch
  note "launched on all workers of $TPU_NAME; log $LOGS/$STAMP/run.log${log_url:+ (copied to $log_url/$STAMP)}"
  exit
fi

# --restart: watch the slice and the run until the run has finished.
case $log_url in
  gs://*) ;;
  *) die "--restart reads each attempt's exit status from gs://: give a gs:// --gin.RUN_DIR (or LOG_URL)" ;;
esac
: "${MAX_RESTARTS:=10}" "${POLL_S:=60}"
[[ $MAX_RESTARTS =~ ^[0-9]+$ ]] || die "MAX_RESTARTS must be a number of relaunches, got '$MAX_RESTARTS'"
here=$(dirname "$0")
if [ "$QUEUED" = 0 ]; then
  state=(compute tpus tpu-vm describe "$TPU_NAME" "${TPU_FLAGS[@]}" --format 'value(state)') up=READY
else
  state=(compute tpus queued-resources describe "$QUEUED_RESOURCE" "${TPU_FLAGS[@]}" --format 'value(state.state)')
  up=ACTIVE
fi
base=$STAMP
status_url() {  # status_url: where worker 0 writes the current attempt's exit status
  printf '%s' "$log_url/$STAMP/worker0/exit_status"
}
next_attempt() {  # next_attempt: counts a launch (or a failed setup) against MAX_RESTARTS
  [ "$attempt" -le "$MAX_RESTARTS" ] || die "the run did not finish after $MAX_RESTARTS relaunches: see $log_url"
  attempt=$((attempt + 1))
}
if [ "$DRY_RUN" = 1 ]; then  # one round: the state, the first launch, the exit status it then asks for
  run_gcloud "${state[@]}"
  STAMP=$base-1
  launch
  run_gcloud storage cat "$(status_url)"
  note "(every POLL_S seconds: the state, then the exit status; a slice not $up is made again, a stopped run relaunched)"
  exit
fi
attempt=0 running=0 fresh=1 installed=1 misses=0  # (the slice as create.sh and setup.sh left it)
while :; do
  now=$(gcloud "${state[@]}" 2> /dev/null) || now=''
  case $now in
    "$up") misses=0 ;;
    ACCEPTED | WAITING_FOR_RESOURCES | PROVISIONING | CREATING | STARTING | RESTARTING | REPAIRING)
      note "$TPU_NAME is $now; asking again in $POLL_S s"
      sleep "$POLL_S"
      continue ;;
    '')  # gcloud could not say (a network hiccup, or the slice is gone): gone after 3 such answers in a row
      misses=$((misses + 1))
      if [ "$misses" -lt 3 ]; then
        note "could not ask for the state of $TPU_NAME; asking again in $POLL_S s"
        sleep "$POLL_S"
        continue
      fi ;;
  esac
  if [ "$now" != "$up" ]; then
    misses=0
    note "$TPU_NAME is ${now:-gone}: making it again (teardown.sh, create.sh, setup.sh)"
    bash "$here/teardown.sh" > /dev/null 2>&1 || true  # (nothing to delete once it is gone)
    bash "$here/create.sh"
    running=0 fresh=1 installed=0
  fi
  if [ "$installed" = 0 ]; then
    if ! bash "$here/setup.sh"; then
      next_attempt
      note "setup failed; trying again in $POLL_S s"
      sleep "$POLL_S"
      continue
    fi
    installed=1
  fi
  if [ "$running" = 0 ]; then
    next_attempt
    STAMP=$base-$attempt
    # A relaunch on the same slice first stops what is left of the last attempt on the other workers.
    [ "$fresh" = 1 ] || gcloud_ssh all "pkill -f '$BUSY'; true" || true
    if launch; then
      running=1 fresh=0
      note "attempt $attempt launched; logs in $log_url/$STAMP"
    else
      note "attempt $attempt could not be launched; trying again in $POLL_S s"
    fi
  fi
  sleep "$POLL_S"
  [ "$running" = 1 ] || continue
  status=$(gcloud storage cat "$(status_url)" 2> /dev/null || true)
  case $status in
    '') ;;
    0) note "the run has finished (attempt $attempt); logs in $log_url"; exit 0 ;;
    2) die "the run stopped on bad input (exit 2): the last line of $log_url/$STAMP/worker0/run.log says why" ;;
    *) note "attempt $attempt ended with exit status $status; launching it again"; running=0 ;;
  esac
done
