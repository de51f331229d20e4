#!/usr/bin/env bash
# Delete the TPU VM. With --collect, first copy its logs (and RUN_DIR) with collect.sh; a failed copy keeps the VM.
#   TPU_NAME=my-tpu bash tpu_scripts/teardown.sh [--dry-run] [--collect [RUN_DIR]]
set -euo pipefail
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
usage="usage: teardown.sh [--dry-run] [--collect [RUN_DIR]]"
if [ "${1:-}" = --collect ]; then
  shift
  [ $# -le 1 ] || die "$usage"
  DRY_RUN=$DRY_RUN STAMP=$STAMP bash "$(dirname "$0")/collect.sh" "$@"
else
  [ $# -eq 0 ] || die "$usage"
fi
if [ "$QUEUED" = 0 ]; then
  run_gcloud compute tpus tpu-vm delete "$TPU_NAME" "${TPU_FLAGS[@]}" --quiet
else  # the queued resource and its VM
  run_gcloud compute tpus queued-resources delete "$QUEUED_RESOURCE" "${TPU_FLAGS[@]}" --force --quiet
fi
note "deleted $TPU_NAME"
