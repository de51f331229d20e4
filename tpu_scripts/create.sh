#!/usr/bin/env bash
# Create a TPU VM (pod slice):
#   TPU_NAME=my-tpu ACCELERATOR=v4-32 [RUNTIME=...] [SPOT=1] [AUTOCHECKPOINT=0|1] bash tpu_scripts/create.sh [--dry-run]
# Through a queued resource ($QUEUED_RESOURCE, default $TPU_NAME-qr), waiting until it is ACTIVE (QUEUED=0: a
# plain `tpu-vm create`). SPOT=1: a spot slice (0 or unset: on demand).
# RUNTIME follows the accelerator (tpu_scripts/README.md): v4 tpu-ubuntu2204-base, v5e (v5litepod-N)
# v2-alpha-tpuv5-lite, v5p v2-alpha-tpuv5, v6e v2-alpha-tpuv6e.
# AUTOCHECKPOINT=1 (the default where Cloud TPU offers it: v2, v3, v4, v5e) asks for autocheckpoint (gcloud's
# alpha track): before a maintenance event the workers get SIGTERM and up to 5 minutes to save. It does not
# cover a spot preemption.
set -euo pipefail
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
[ $# -eq 0 ] || die "usage: create.sh [--dry-run] (settings come from the environment)"
: "${ACCELERATOR:=v4-8}"
case $ACCELERATOR in
  v6e-*) default_runtime=v2-alpha-tpuv6e ;;
  v5p-*) default_runtime=v2-alpha-tpuv5 ;;
  v5litepod-* | v5e-*) default_runtime=v2-alpha-tpuv5-lite ;;
  *) default_runtime=tpu-ubuntu2204-base ;;
esac
: "${RUNTIME:=$default_runtime}"
case $ACCELERATOR in
  v2-* | v3-* | v4-* | v5litepod-* | v5e-*) default_autocheckpoint=1 ;;  # (Cloud TPU's autocheckpoint page)
  *) default_autocheckpoint=0 ;;
esac
: "${SPOT:=0}" "${AUTOCHECKPOINT:=$default_autocheckpoint}"
case $SPOT in 0 | 1) ;; *) die "SPOT must be 1 (a spot slice) or 0 (on demand), got '$SPOT'" ;; esac
case $AUTOCHECKPOINT in 0 | 1) ;; *) die "AUTOCHECKPOINT must be 1 or 0, got '$AUTOCHECKPOINT'" ;; esac
flags=() track=()
[ "$SPOT" = 0 ] || flags+=(--spot)
if [ "$AUTOCHECKPOINT" = 1 ]; then  # a checkpoint before maintenance (SIGTERM first): in gcloud's alpha track
  track=(alpha)
  flags+=(--autocheckpoint-enabled)
fi
if [ "$QUEUED" = 0 ]; then  # a plain VM: created now or refused
  run_gcloud ${track[@]+"${track[@]}"} compute tpus tpu-vm create "$TPU_NAME" "${TPU_FLAGS[@]}" \
    --accelerator-type "$ACCELERATOR" --version "$RUNTIME" ${flags[@]+"${flags[@]}"}
  exit
fi
# A queued resource (Cloud TPU's way to wait for capacity): the request, then its state until ACTIVE.
run_gcloud ${track[@]+"${track[@]}"} compute tpus queued-resources create "$QUEUED_RESOURCE" "${TPU_FLAGS[@]}" \
  --node-id "$TPU_NAME" --accelerator-type "$ACCELERATOR" --runtime-version "$RUNTIME" ${flags[@]+"${flags[@]}"}
state=(compute tpus queued-resources describe "$QUEUED_RESOURCE" "${TPU_FLAGS[@]}" --format 'value(state.state)')
if [ "$DRY_RUN" = 1 ]; then
  run_gcloud "${state[@]}"  # (asked every POLL_S seconds until ACTIVE)
  exit
fi
while :; do
  slice_state "${state[@]}"
  case $STATE in
    ACTIVE) break ;;
    FAILED | SUSPENDED | SUSPENDING | DELETING | GONE) die "queued resource $QUEUED_RESOURCE is $STATE: see gcloud \
compute tpus queued-resources describe $QUEUED_RESOURCE" ;;
    '') note "could not ask for the state of queued resource $QUEUED_RESOURCE ($STATE_ERROR)" ;;
  esac
  note "queued resource $QUEUED_RESOURCE: ${STATE:-?}; asking again in ${POLL_S:-60} s"
  sleep "${POLL_S:-60}"
done
note "$TPU_NAME is ready (queued resource $QUEUED_RESOURCE)"
