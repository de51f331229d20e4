#!/usr/bin/env bash
# Sweep one Gin macro: one run per value, one after another, on every worker, detached like launch.sh.
# Each run gets --gin.MACRO=VALUE and its own run directory $RUN_ROOT/MACRO=<VALUE as a file name>
# (local path, shared mount or gs:// URL, passed through as is); ARG... (after --) go to every run.
# A failed run is recorded and the sweep goes on with the next value.
#   TPU_NAME=my-tpu RUN_ROOT=gs://my-bucket/sweeps/xnli_lr bash tpu_scripts/sweep.sh [--dry-run] \
#     experiments/xtreme_mbert.gin LEARNING_RATE 1e-5 2e-5 3e-5 [-- --gin.TASKS="('xnli',)" ...]
# Logs on each worker: ~/xtreme-jax-logs/$STAMP/sweep.log (start / ok / FAILED per run) and one
# ~/xtreme-jax-logs/$STAMP/MACRO=<value>.log per run; with a gs:// RUN_ROOT (or LOG_URL) each worker copies
# them to $RUN_ROOT/tpu_logs/$STAMP/worker<i>/ every UPLOAD_S seconds (60) and at the end.
# shellcheck disable=SC2016  # the worker's shell expands the $ in the loop it runs
set -euo pipefail
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
usage="usage: sweep.sh [--dry-run] GIN_FILE MACRO VALUE... [-- ARG...]"
: "${RUN_ROOT:?set RUN_ROOT (the folder of the run directories of the sweep)}"
[ $# -ge 3 ] || die "$usage"
gin_file=$1 macro=$2
shift 2
[[ $macro =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "MACRO must be a Gin macro name like LEARNING_RATE, got '$macro'"
case $RUN_ROOT in *[\'\\]*) die "RUN_ROOT must not contain ' or \\ (it goes into a Gin string): $RUN_ROOT" ;; esac
root=$RUN_ROOT
while [[ $root == ?*/ ]]; do root=${root%/}; done
values=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  values+=("$1")
  shift
done
[ ${#values[@]} -gt 0 ] || die "$usage"
[ $# -eq 0 ] || shift
extra=("$@")
for arg in ${extra[@]+"${extra[@]}"}; do
  case $arg in --gin.RUN_DIR=*) die "sweep.sh sets RUN_DIR itself (under RUN_ROOT); drop $arg" ;; esac
done

log_dir=$(remote_path "$LOGS/$STAMP")
# The worker runs this list; `one NAME ARG...` runs `xtreme-jax run ARG...` into NAME.log, records the outcome.
script='failed=0; say() { echo "$(date -u +%FT%TZ) $*"; }; one() { name=$1; shift; say start "$name"; '\
'xtreme-jax run "$@" > '"$log_dir"'/"$name".log 2>&1; rc=$?; if [ $rc -eq 0 ]; then say ok "$name"; '\
'else say FAILED "$name" "(exit $rc)"; failed=$((failed + 1)); fi; };'
seen=' '
for value in "${values[@]}"; do
  name="$macro=$(safe_name "$value")"
  case $seen in *" $name "*) die "two values of $macro share the run directory $root/$name; give distinct values" ;; esac
  seen+="$name "
  args=("--gin_file=$gin_file" "--gin.$macro=$value" ${extra[@]+"${extra[@]}"} "--gin.RUN_DIR='$root/$name'")
  script+=" one $(quote "$name" "${args[@]}");"
  note "== $name: run dir $root/$name"
done
script+=' say "sweep finished: $failed of '"${#values[@]}"' runs failed"'
log_url=$(log_url_for "$root")
rc=0
run_detached "$LOGS/$STAMP/sweep.log" "$(uploading "$log_url" "$script")" || rc=$?
[ "$rc" != 2 ] || exit 2  # (its line said why)
if [ "$rc" != 0 ]; then
  echo "error: the sweep did not start on worker(s)$FAILED_WORKERS (worker:exit status); stop what started on the \
others (pgrep -af xtreme-jax) before starting it again" >&2
  exit "$rc"
fi
note "sweep of ${#values[@]} runs started on all workers of $TPU_NAME; log $LOGS/$STAMP/sweep.log"
