#!/usr/bin/env bash
# Install this repository at one commit, with TPU JAX, in ~/venv (Python 3.11, made by uv) on every worker.
#   TPU_NAME=my-tpu REPO_URL=https://.../xtreme-jax.git [COMMIT=<sha>] bash tpu_scripts/setup.sh [--dry-run]
# COMMIT defaults to this checkout's HEAD (push it first: the workers fetch it from REPO_URL). The TPU images
# ship Python 3.10 and the package needs 3.11: uv (pip-installed for the user) makes a 3.11 venv (a venv of
# an older Python left by an earlier setup is replaced; a 3.11 one is kept: setup reruns). jax[tpu] is
# pinned to the jax the package resolved. Ends with every worker joining the run's processes and printing
# its place: "worker i of N processes, D devices (L here)".
set -euo pipefail
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
[ $# -eq 0 ] || die "usage: setup.sh [--dry-run] (settings come from the environment)"
[ -n "$REPO_URL" ] || die "set REPO_URL (the git URL of this repository)"
: "${COMMIT:=$(git -C "$(dirname "$0")/.." rev-parse HEAD 2>/dev/null || true)}"
[[ $COMMIT =~ ^[0-9a-f]{7,40}$ ]] || die "set COMMIT to the commit to install (a hex sha; got '$COMMIT')"
repo=$(remote_path "$REPO_DIR")
# shellcheck disable=SC2088  # (the worker's shell expands ~)
uv='~/.local/bin/uv'
check='from xtreme_jax.training.distributed import initialize_distributed as join; join(); import jax as j; '\
'print(f"worker {j.process_index()} of {j.process_count()} processes, {j.device_count()} devices '\
'({j.local_device_count()} here)")'
gcloud_ssh all "set -e; [ -d $repo ] || git clone -q $(quote_word "$REPO_URL") $repo; cd $repo; \
git fetch -q origin; git checkout -q --detach $COMMIT; \
python3 -m pip install -q --user -U uv; \
~/venv/bin/python -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null || \
{ rm -rf ~/venv; $uv venv -q --python 3.11 ~/venv; }; . ~/venv/bin/activate; \
$uv pip install -q -e '.[gcs]'; \
$uv pip install -q \"jax[tpu]==\$(python -c 'import jax; print(jax.__version__)')\" \
-f https://storage.googleapis.com/jax-releases/libtpu_releases.html; \
python -c $(quote_word "$check")"
