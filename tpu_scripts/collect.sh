#!/usr/bin/env bash
# Copy the logs of every worker (and a run directory) to a new folder ./tpu_logs/<name>/; nothing is overwritten.
#   TPU_NAME=my-tpu [NUM_WORKERS=4] bash tpu_scripts/collect.sh [--dry-run] [RUN_DIR]
# <name>: RUN_DIR's base name, else $STAMP (a timestamp); when tpu_logs/<name> exists: <name>-1, <name>-2, ...
#   tpu_logs/<name>/worker<i>/xtreme-jax-logs/...   ~/xtreme-jax-logs of worker i (scp)
#   tpu_logs/<name>/<RUN_DIR's base name>/...        RUN_DIR: gs:// with `gcloud storage rsync`, else worker 0's (scp)
# A gs:// RUN_DIR comes without its parameters (checkpoints/, best/, averaged/ at any depth: the results, logs,
# predictions and reports); CHECKPOINTS=1 copies them too. A worker's local RUN_DIR is copied whole.
# NUM_WORKERS: the number of workers (default: asked from gcloud; a dry run needs it set).
# With a gs:// RUN_DIR the VM's state is asked first: a VM that is not READY (a suspended or deleted spot slice)
# is skipped with a note (launch.sh and sweep.sh upload the workers' logs to RUN_DIR/tpu_logs, copied with it).
set -euo pipefail
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
[ $# -le 1 ] || die "usage: collect.sh [--dry-run] [RUN_DIR]"
run_dir=${1:-}
while [[ $run_dir == ?*/ ]]; do run_dir=${run_dir%/}; done
name=$STAMP
[ -z "$run_dir" ] || name=$(safe_name "${run_dir##*/}")
workers=''
case $run_dir in
  gs://*)
    node=(compute tpus tpu-vm describe "$TPU_NAME" "${TPU_FLAGS[@]}" --format 'value(state)')
    if [ "$DRY_RUN" = 1 ]; then
      run_gcloud "${node[@]}"  # (READY: the workers' logs are copied)
    else
      slice_state "${node[@]}"
      if [ "$STATE" != READY ]; then
        state=${STATE/#GONE/gone (NOT_FOUND)}
        note "$TPU_NAME is ${state:-of unknown state (${STATE_ERROR:-no answer})}: its workers' logs are not copied \
(launch.sh and sweep.sh upload them to $run_dir/tpu_logs)"
        workers=0
      fi
    fi ;;
esac
[ -n "$workers" ] || workers=$(num_workers)
dest=$(new_folder "tpu_logs/$name")
for ((i = 0; i < workers; i++)); do
  make_dirs "$dest/worker$i"
  run_gcloud compute tpus tpu-vm scp --recurse "${TPU_FLAGS[@]}" --worker "$i" "$TPU_NAME:$LOGS" "$dest/worker$i"
done
case $run_dir in
  '') ;;
  gs://*)
    if [ "${CHECKPOINTS:-0}" = 1 ]; then
      run_gcloud storage cp -r "$run_dir" "$dest/"
    else
      run_gcloud storage rsync --recursive --exclude '(^|.*/)(checkpoints|best|averaged)/.*' "$run_dir" \
        "$dest/${run_dir##*/}"
    fi ;;
  *) run_gcloud compute tpus tpu-vm scp --recurse "${TPU_FLAGS[@]}" --worker 0 "$TPU_NAME:$run_dir" "$dest/" ;;
esac
note "copied to $dest"
