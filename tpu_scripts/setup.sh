#!/usr/bin/env bash
# Clone (or update) this repository and install it with TPU JAX in ~/venv on every worker of the slice.
#   TPU_NAME=my-tpu REPO_URL=https://.../xtreme-jax.git bash tpu_scripts/setup.sh [--dry-run]
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -eq 0 ] || die "usage: setup.sh [--dry-run] (settings come from the environment)"
[ -n "$REPO_URL" ] || die "set REPO_URL (the git URL of this repository)"
repo=$(remote_path "$REPO_DIR")
gcloud_ssh all "set -e; [ -d $repo ] || git clone $(quote_word "$REPO_URL") $repo; cd $repo; git pull --ff-only; \
python3 -m venv ~/venv; . ~/venv/bin/activate; pip install -q -U pip; \
pip install -q -e '.[gcs]' 'jax[tpu]' -f https://storage.googleapis.com/jax-releases/libtpu_releases.html"
