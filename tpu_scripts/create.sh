#!/usr/bin/env bash
# Create a TPU VM (pod slice):
#   TPU_NAME=my-tpu ACCELERATOR=v4-32 [RUNTIME=...] [SPOT=1] bash tpu_scripts/create.sh [--dry-run]
# RUNTIME follows the accelerator (tpu_scripts/README.md): v4 tpu-ubuntu2204-base, v5e (v5litepod-N)
# v2-alpha-tpuv5-lite, v5p v2-alpha-tpuv5, v6e v2-alpha-tpuv6e.
set -euo pipefail
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
spot=()
[ -z "${SPOT:-}" ] || spot=(--spot)
run_gcloud compute tpus tpu-vm create "$TPU_NAME" "${TPU_FLAGS[@]}" \
  --accelerator-type "$ACCELERATOR" --version "$RUNTIME" ${spot[@]+"${spot[@]}"}
