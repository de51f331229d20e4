#!/usr/bin/env bash
# Start one xtreme-jax run on every worker at once, detached. With several workers, worker i runs it as
# process i of a multi-process run: JAX_COORDINATOR_ADDRESS=<worker 0's address>:$COORDINATOR_PORT,
# JAX_NUM_PROCESSES=<workers>, JAX_PROCESS_ID=i (common.sh run_detached; a dry run needs NUM_WORKERS and
# COORDINATOR_IP, a real one asks gcloud). The arguments reach `xtreme-jax run` exactly as given here (quoted
# once for the worker's shell):
#   TPU_NAME=my-tpu bash tpu_scripts/launch.sh [--dry-run] --gin_file=experiments/xtreme_mbert.gin \
#       --gin.RUN_DIR="'gs://my-bucket/runs/xtreme_mbert'" ...
# Log: ~/xtreme-jax-logs/$STAMP/run.log on each worker (collect.sh copies them); once the run ends, its exit
# status (0: finished or stopped cleanly, 2: bad input, ...) in ~/xtreme-jax-logs/$STAMP/exit_status.
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || die "usage: launch.sh [--dry-run] --gin_file=FILE [--gin.NAME=VALUE ...]"
run_detached "$LOGS/$STAMP/run.log" "xtreme-jax run $(quote "$@"); echo \$? > $(remote_path "$LOGS/$STAMP/exit_status")"
note "launched on all workers of $TPU_NAME; log $LOGS/$STAMP/run.log"
