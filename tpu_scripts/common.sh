# Shared settings and helpers of the TPU VM scripts (sourced); override the settings with environment variables.
# Every script takes --dry-run (or DRY_RUN=1): it prints each gcloud command it would run, one per line and
# shell-quoted exactly as it would run it, and runs nothing (no gcloud call, no local folder).
# shellcheck shell=bash disable=SC2034,SC2088  # (~ is expanded by the worker's shell)
: "${DRY_RUN:=0}"
_args=()
for _arg in "$@"; do
  if [ "$_arg" = --dry-run ]; then DRY_RUN=1; else _args+=("$_arg"); fi
done
set -- ${_args[@]+"${_args[@]}"}
unset _arg _args
case $DRY_RUN in '' | 0) DRY_RUN=0 ;; *) DRY_RUN=1 ;; esac

: "${TPU_NAME:?set TPU_NAME (the TPU VM name)}"
: "${ZONE:=us-central2-b}"
: "${PROJECT:=}"                        # empty: gcloud's own default project (core/project)
: "${REPO_URL:=}"                       # git URL of this repository (setup.sh)
: "${REPO_DIR:=~/xtreme-jax}"           # checkout on every worker; a leading ~/ is the worker's home
: "${STAMP:=$(date +%Y%m%d-%H%M%S)}"    # names the log folder of a launch / sweep (and of a collect)
: "${COORDINATOR_PORT:=8476}"           # process 0's port for jax.distributed (several workers)
: "${QUEUED:=1}"                        # 1: the slice comes from a queued resource (create.sh, teardown.sh)
: "${QUEUED_RESOURCE:=$TPU_NAME-qr}"    # its name
: "${UPLOAD_S:=60}"                     # a worker copies its log folder to LOG_URL every UPLOAD_S seconds
[[ $UPLOAD_S =~ ^[1-9][0-9]*$ ]] || { echo "error: UPLOAD_S must be a positive number of seconds" >&2; exit 2; }
LOGS='~/xtreme-jax-logs'                # log folder on every worker (~ is the worker's home)
TPU_FLAGS=(--zone "$ZONE")
[ -z "$PROJECT" ] || TPU_FLAGS+=(--project "$PROJECT")

die() {  # die MESSAGE: one line `error: MESSAGE` on stderr, exit 2
  echo "error: $*" >&2
  exit 2
}

note() {  # note MESSAGE: progress on stderr (stdout is kept for the dry-run commands)
  if [ "$DRY_RUN" = 1 ]; then echo "(dry run) $*" >&2; else echo "$*" >&2; fi
}

quote_word() {  # quote_word WORD: WORD as one shell word: as is, '...', "..." (a ' and nothing special) or '..'\''..'
  case $1 in
    '' | *[![:alnum:]_./:=@%+,-]*) ;;
    *) printf '%s' "$1"; return ;;
  esac
  case $1 in
    *\'*) ;;
    *) printf "'%s'" "$1"; return ;;
  esac
  case $1 in
    *[\$\`\\\"!]*) ;;
    *) printf '"%s"' "$1"; return ;;
  esac
  local rest=$1 out="'"
  while [[ $rest == *\'* ]]; do
    out+="${rest%%\'*}'\\''"
    rest=${rest#*\'}
  done
  out+="$rest'"
  case $out in "''\\"*) out=${out#"''"} ;; esac    # drop the empty '' before a leading \'
  case $out in *"\\'''") out=${out%"''"} ;; esac   # and after a trailing one
  printf '%s' "$out"
}

quote() {  # quote WORD...: the words shell-quoted, separated by spaces
  local word sep=''
  for word in "$@"; do
    printf '%s%s' "$sep" "$(quote_word "$word")"
    sep=' '
  done
}

remote_path() {  # remote_path PATH: PATH quoted for the worker's shell, keeping a leading ~/ expandable
  case $1 in
    '~') printf '~' ;;
    '~/'*) printf '~/%s' "$(quote_word "${1#'~/'}")" ;;
    *) quote_word "$1" ;;
  esac
}

run_gcloud() {  # run_gcloud ARG...: gcloud ARG... (dry run: print the command instead)
  if [ "$DRY_RUN" = 1 ]; then
    quote gcloud "$@"
    echo
  else
    gcloud "$@"
  fi
}

gcloud_ssh() {  # gcloud_ssh WORKER COMMAND: run COMMAND (a string for the worker's shell) on one worker or "all"
  run_gcloud compute tpus tpu-vm ssh "$TPU_NAME" "${TPU_FLAGS[@]}" --worker "$1" --command "$2"
}

in_repo() {  # in_repo: the worker-shell prefix that enters the checkout and its virtual environment
  printf 'cd %s && . ~/venv/bin/activate' "$(remote_path "$REPO_DIR")"
}

BUSY="bin/[x]treme-jax run"  # pgrep -f's pattern for a running xtreme-jax run (its Python process); the [x]
# keeps it from matching the worker's own shell, whose command line holds this pattern

detached() {  # detached LOG COMMANDS: the worker-shell line running COMMANDS in the checkout, detached (SIGHUP ignored);
  # refused (exit 3, one line) while an xtreme-jax run already uses the worker's TPU
  printf '%s' "$(in_repo) && mkdir -p $(remote_path "$LOGS/$STAMP") && \
{ ! pgrep -f '$BUSY' > /dev/null || { echo \"error: an xtreme-jax run already uses this TPU VM \
(pgrep -af xtreme-jax lists it)\" >&2; exit 3; }; } && { (trap \"\" HUP; $2) > $(remote_path "$1") 2>&1 < /dev/null & }"
}

FAILED_WORKERS=''  # run_detached: ' <worker>:<exit status>' for each worker whose ssh failed

run_detached() {  # run_detached LOG COMMANDS: on every worker, COMMANDS detached; with several workers each is one
  # process of a multi-process run, joined as xtreme_jax/training/distributed.py reads it: worker i gets
  # JAX_COORDINATOR_ADDRESS (worker 0's address), JAX_NUM_PROCESSES (the workers) and JAX_PROCESS_ID=i.
  # Every worker is tried; returns 0 if each started, 3 if those that did not were busy (exit 3), else 1, and
  # lists the failed ones in FAILED_WORKERS.
  local n ip i rc
  FAILED_WORKERS=''
  n=$(num_workers) || return 2
  if [ "$n" = 1 ]; then
    rc=0
    gcloud_ssh all "$(detached "$1" "$2")" || rc=$?
    [ "$rc" = 0 ] || FAILED_WORKERS=" 0:$rc"
  else
    ip=$(coordinator_ip) || return 2
    for ((i = 0; i < n; i++)); do
      rc=0
      gcloud_ssh "$i" "$(detached "$1" "export JAX_COORDINATOR_ADDRESS=$ip:$COORDINATOR_PORT \
JAX_NUM_PROCESSES=$n JAX_PROCESS_ID=$i; $2")" || rc=$?
      [ "$rc" = 0 ] || FAILED_WORKERS+=" $i:$rc"
    done
  fi
  [ -n "$FAILED_WORKERS" ] || return 0
  note "could not start on worker(s)$FAILED_WORKERS (worker:exit status; 3: an xtreme-jax run already uses that \
TPU VM, 255: ssh failed)"
  for i in $FAILED_WORKERS; do
    [ "${i#*:}" = 3 ] || return 1
  done
  return 3
}

stop_runs() {  # stop_runs SECONDS: on every worker, SIGTERM to a running xtreme-jax run (it saves a checkpoint and
  # exits), waiting up to SECONDS for it to end, then SIGKILL; fails if one is still running
  gcloud_ssh all "pkill -f '$BUSY'; i=0; while pgrep -f '$BUSY' > /dev/null && [ \$i -lt $1 ]; do sleep 1; \
i=\$((i + 1)); done; ! pgrep -f '$BUSY' > /dev/null || { pkill -KILL -f '$BUSY'; sleep 2; \
! pgrep -f '$BUSY' > /dev/null; }"
}

run_dir_of() {  # run_dir_of ARG...: the value of the last --gin.RUN_DIR=... argument, without its quotes
  local arg value=''
  for arg in "$@"; do
    case $arg in --gin.RUN_DIR=*) value=${arg#--gin.RUN_DIR=} ;; esac
  done
  case $value in \'*\' | \"*\") value=${value:1:${#value}-2} ;; esac
  printf '%s' "$value"
}

log_url_for() {  # log_url_for RUN_DIR: where the workers' logs go: LOG_URL if set (empty: nowhere), else
  # RUN_DIR/tpu_logs for a gs:// RUN_DIR (a run's claim ignores that folder), else nowhere
  if [ -n "${LOG_URL+set}" ]; then
    printf '%s' "${LOG_URL%/}"
    return
  fi
  case $1 in gs://*) printf '%s/tpu_logs' "${1%/}" ;; esac
}

uploading() {  # uploading URL COMMANDS: worker-shell COMMANDS while the worker copies its log folder ($LOGS/$STAMP)
  # to URL/$STAMP/worker<i> (i: JAX_PROCESS_ID, 0 on one worker) every UPLOAD_S seconds and once at the end, so the
  # logs outlive the VM; URL empty: COMMANDS alone
  [ -n "$1" ] || { printf '%s' "$2"; return; }
  printf '%s' "up() { gcloud storage rsync --recursive $(remote_path "$LOGS/$STAMP") \
$(quote_word "$1/$STAMP/worker")\"\${JAX_PROCESS_ID:-0}\" > /dev/null 2>&1; }; \
(while sleep $UPLOAD_S; do up; done) & uploader=\$!; $2; kill \$uploader; up"
}

safe_name() {  # safe_name VALUE: VALUE as a file name (each run of other characters -> _, trimmed)
  local name
  name=$(printf '%s' "$1" | LC_ALL=C tr -cs 'A-Za-z0-9._+-' '_')
  name=${name#_}
  name=${name%_}
  printf '%s' "${name:-_}"
}

make_dirs() {  # make_dirs DIR...: mkdir -p locally (not in a dry run)
  [ "$DRY_RUN" = 1 ] || mkdir -p -- "$@"
}

new_folder() {  # new_folder PATH: the first of PATH, PATH-1, PATH-2, ... that does not exist; created (not in a dry run)
  local path=$1 i=0
  while [ -e "$path" ]; do
    i=$((i + 1))
    path=$1-$i
  done
  if [ "$DRY_RUN" = 0 ]; then mkdir -p -- "$(dirname -- "$path")" && mkdir -- "$path" || return; fi
  printf '%s' "$path"
}

STATE='' STATE_ERROR=''
slice_state() {  # slice_state ARG...: sets STATE to what `gcloud ARG...` (a describe) prints: GONE if gcloud says
  # that the resource does not exist (NOT_FOUND), empty if it could not say (network, auth: STATE_ERROR, its last line)
  local err
  err=$(mktemp)
  STATE_ERROR=''
  if ! STATE=$(gcloud "$@" 2> "$err"); then
    STATE=''
    STATE_ERROR=$(tail -n 1 -- "$err")
    case $(cat -- "$err") in *NOT_FOUND* | *"was not found"*) STATE=GONE ;; esac
  fi
  rm -f -- "$err"
}

coordinator_ip() {  # coordinator_ip: COORDINATOR_IP, else worker 0's internal IP address (asks gcloud)
  local ip=${COORDINATOR_IP:-}
  if [ -z "$ip" ]; then
    [ "$DRY_RUN" = 0 ] || die "a dry run does not ask gcloud for worker 0's address: set COORDINATOR_IP"
    ip=$(gcloud compute tpus tpu-vm describe "$TPU_NAME" "${TPU_FLAGS[@]}" \
      --format 'value(networkEndpoints[0].ipAddress)')
  fi
  [[ $ip =~ ^[0-9A-Za-z.:-]+$ ]] || die "COORDINATOR_IP must be worker 0's internal address, got '$ip'"
  printf '%s' "$ip"
}

num_workers() {  # num_workers: NUM_WORKERS, else the number of workers of the TPU VM (asks gcloud)
  local n=${NUM_WORKERS:-}
  if [ -z "$n" ]; then
    [ "$DRY_RUN" = 0 ] || die "a dry run does not ask gcloud how many workers $TPU_NAME has: set NUM_WORKERS"
    n=$(gcloud compute tpus tpu-vm describe "$TPU_NAME" "${TPU_FLAGS[@]}" --format 'value(networkEndpoints.len())')
  fi
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "NUM_WORKERS must be a positive number of workers, got '$n'"
  printf '%s' "$n"
}
