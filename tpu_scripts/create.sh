#!/usr/bin/env bash
# Create a TPU VM (pod slice):
#   TPU_NAME=my-tpu ACCELERATOR=v4-32 [RUNTIME=...] [SPOT=1] bash tpu_scripts/create.sh [--dry-run]
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -eq 0 ] || die "usage: create.sh [--dry-run] (settings come from the environment)"
: "${ACCELERATOR:=v4-8}"
: "${RUNTIME:=tpu-ubuntu2204-base}"
spot=()
[ -z "${SPOT:-}" ] || spot=(--spot)
run_gcloud compute tpus tpu-vm create "$TPU_NAME" "${TPU_FLAGS[@]}" \
  --accelerator-type "$ACCELERATOR" --version "$RUNTIME" ${spot[@]+"${spot[@]}"}
