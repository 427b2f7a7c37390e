#!/bin/bash
# gVisor for containerd's CRI through the runc v2 shim: the `runsc` handler's BinaryName.
# Debian ships runsc but no containerd-shim-runsc-v1, so containerd-shim-runc-v2 drives runsc as
# if it were runc. test/env/README.md ("gVisor through the runc v2 shim") has the whole story;
# in short, this wrapper bridges four differences:
#
# 1. Flags. The shim passes only runc's global flags; gVisor needs, on this machine, the ptrace
#    platform (no KVM) and --network=none (the sandbox keeps only its own loopback; the pod's CNI
#    interface is never used).
# 2. Who watches a container. runsc runs a whole pod in one sandbox: the pause container creates
#    it, every other container joins it. For a joining container runsc writes the *sandbox's* PID
#    to --pid-file, so the shim would see the container end only when the pod does. So for such a
#    container `create` starts a keeper process and writes *its* PID instead: the keeper exits with
#    the container's status (`runsc wait`; 128+signal for a signalled process), or 137 if the
#    sandbox itself died (e.g. the host OOM killer took the sentry). It joins the sandbox's cgroups,
#    so the shim's OOM watch for the container is on the cgroup the sandbox's memory is charged to.
# 3. Stdio. runsc hands a joining container the stdio of `runsc start`, while the shim gives the
#    container's pipes only to `create` (and runs `start` with none). So the keeper, which holds the
#    pipes from `create`, runs `runsc start` itself when the shim's `start` asks it to (a FIFO).
# 4. The pod's pids limit (the kubelet's podPidsLimit on the pod cgroup). The sandbox's own
#    threads count against it: the sentry, the gofers and, on the ptrace platform, stub processes
#    whose threads grow with the product of guest processes and sentry threads (~85 for an idle
#    python, ~1900 for 128 sleeping processes). When a stub cannot be made, the sentry panics and
#    the whole pod dies. So the limit moves inside: every process of the pod (containers and
#    execs) gets RLIMIT_NPROC = the pod's limit, which gVisor enforces (fork fails with EAGAIN, as
#    under runc), and the pod cgroup's pids.max is raised to GVISOR_HOST_PIDS for the sandbox.
#
# Everything else goes to runsc unchanged (plus the flags): state, delete, ps, the root (pause)
# container. `kill` of a finished container is reported in runc's words, which the shim takes for
# "already done".
# shellcheck disable=SC2016 # the `bash -c` snippets take their values as arguments
set -euo pipefail

RUNSC=${SANDPIT_RUNSC:-/usr/bin/runsc}
# --oci-seccomp: the pod's seccomp profile (sandpit/gvisor.json) is applied inside the sandbox, as
# the Docker engine's runsc runtime does; without it the Sentry serves every system call.
RUNSC_FLAGS=(--platform=ptrace --network=none --oci-seccomp)
GVISOR_HOST_PIDS=4096
HANDOFF_TIMEOUT=60
PIDS_CGROUP=/sys/fs/cgroup/pids

global=() cmd='' rest=() root=/run/runsc
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; global+=("$1" "$2"); shift 2 ;;
    --log | --log-format | --criu | --rootless) global+=("$1" "$2"); shift 2 ;;
    -*) global+=("$1"); shift ;;
    *) cmd=$1; shift; rest=("$@"); break ;;
  esac
done
runsc=("$RUNSC" "${RUNSC_FLAGS[@]}" "${global[@]}")

# The container id: the first argument that is not an option or an option's value.
container_id() {
  local a skip=''
  for a in "$@"; do
    if [ -n "$skip" ]; then skip=''; continue; fi
    case $a in
      --bundle | -b | --pid-file | --console-socket | --process | -p | --signal | --cwd | --env | -e | --user | -u) skip=1 ;;
      -*) ;;
      *) echo "$a"; return ;;
    esac
  done
}

# Our state beside runsc's: per pod its pids limit, per joining container its handoff FIFOs.
pod_dir() { echo "$root/sandpit/pods/$1"; }
container_dir() { echo "$root/sandpit/containers/$1"; }

# Sets RLIMIT_NPROC (soft = hard) in the OCI process object at jq path $2 ("" for the top) of file $1.
limit_processes() {
  local file=$1 at=$2 n=$3
  jq -c --argjson n "$n" "$at.rlimits = ([$at.rlimits // [] | .[] | select(.type != \"RLIMIT_NPROC\")]
    + [{type: \"RLIMIT_NPROC\", hard: \$n, soft: \$n}])" "$file" >"$file.sandpit" && mv -f "$file.sandpit" "$file"
}

# The pause container makes the sandbox: move the pod's pids limit inside (see 4. above).
new_pod() { # config.json sandbox-id
  local cgroup limit dir
  cgroup=$(jq -r '.linux.cgroupsPath // ""' "$1")
  [ -n "$cgroup" ] || return 0
  cgroup=$PIDS_CGROUP${cgroup%/*}
  limit=$(cat "$cgroup/pids.max" 2>/dev/null) || return 0
  [[ $limit =~ ^[0-9]+$ ]] && [ "$limit" -lt "$GVISOR_HOST_PIDS" ] || return 0
  dir=$(pod_dir "$2")
  mkdir -p "$dir" && echo "$limit" >"$dir/nproc"
  echo "$GVISOR_HOST_PIDS" >"$cgroup/pids.max"
}

keep() { # id: the keeper of a joining container (stdio: the container's pipes)
  local id=$1 dir order out code
  dir=$(container_dir "$id")
  read -r order <"$dir/start.fifo" || order=''
  rm -f "$dir/start.fifo" # from now on `delete` finds no keeper waiting
  [ "$order" = start ] || exit 137 # deleted before it started
  code=0
  # its stdio becomes the container's (its errors go to the shim's --log)
  "${runsc[@]}" start "$id" || code=$?
  timeout "$HANDOFF_TIMEOUT" bash -c 'echo "$1" >"$2"' _ "$code" "$dir/started.fifo" || true
  [ "$code" -eq 0 ] || exit 128
  exec </dev/null >/dev/null 2>&1 # runsc start handed the pipes to the sandbox
  if out=$("${runsc[@]}" wait "$id") && code=$(jq -er .exitStatus <<<"$out"); then exit "$code"; fi
  exit 137
}

create() {
  local bundle=. pidfile='' args=() i=0 a type id sandbox
  while [ $i -lt ${#rest[@]} ]; do
    a=${rest[$i]}
    case $a in
      --pid-file) pidfile=${rest[$((i + 1))]}; i=$((i + 2)); continue ;;
      --bundle | -b) bundle=${rest[$((i + 1))]} ;;
    esac
    args+=("$a")
    i=$((i + 1))
  done
  id=$(container_id "${args[@]}")
  type=$(jq -r '.annotations["io.kubernetes.cri.container-type"] // ""' "$bundle/config.json")
  [ "$type" != sandbox ] || new_pod "$bundle/config.json" "$id"
  if [ "$type" != container ] || [ -z "$pidfile" ]; then
    exec "${runsc[@]}" create ${pidfile:+--pid-file "$pidfile"} "${args[@]}"
  fi
  sandbox=$(jq -r '.annotations["io.kubernetes.cri.sandbox-id"] // ""' "$bundle/config.json")
  local dir
  dir=$(container_dir "$id")
  rm -rf "$dir" && mkdir -p "$dir" && mkfifo "$dir/start.fifo" "$dir/started.fifo"
  if [ -f "$(pod_dir "$sandbox")/nproc" ]; then
    cp "$(pod_dir "$sandbox")/nproc" "$dir/nproc"
    limit_processes "$bundle/config.json" .process "$(cat "$dir/nproc")"
  fi
  "${runsc[@]}" create --pid-file "$pidfile.sandbox" "${args[@]}"
  local sandbox_pid keeper
  sandbox_pid=$(cat "$pidfile.sandbox")
  rm -f "$pidfile.sandbox"
  # The keeper keeps fds 0-2 (the container's pipes) and nothing else of the shim's; once this
  # script exits, the shim (a child subreaper) is its parent and sees its exit.
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    keep "$id"
  ) <&0 & # explicit: bash gives a background job /dev/null as stdin otherwise
  keeper=$!
  # Into the sandbox's cgroups before the shim reads them (it watches this PID's memory cgroup).
  local controllers path procs
  while IFS=: read -r _ controllers path; do
    [ -n "$controllers" ] || continue
    procs=/sys/fs/cgroup/${controllers#name=}$path/cgroup.procs
    if [ -w "$procs" ]; then echo "$keeper" >"$procs" 2>/dev/null || true; fi
  done <"/proc/$sandbox_pid/cgroup"
  printf %s "$keeper" >"$pidfile.tmp"
  mv -f "$pidfile.tmp" "$pidfile"
}

start() {
  local id dir code
  id=$(container_id "${rest[@]}")
  dir=$(container_dir "$id")
  [ -p "$dir/start.fifo" ] || exec "${runsc[@]}" start "${rest[@]}"
  timeout "$HANDOFF_TIMEOUT" bash -c 'echo start >"$1"' _ "$dir/start.fifo" ||
    { echo "runsc-cri: the keeper of $id did not take the start" >&2; exit 1; }
  code=$(timeout "$HANDOFF_TIMEOUT" cat "$dir/started.fifo") || code=1
  [ "$code" = 0 ] || { echo "runsc-cri: runsc start $id failed (exit $code); see the shim's log" >&2; exit 1; }
}

exec_() {
  local i=0 dir
  dir=$(container_dir "$(container_id "${rest[@]}")")
  while [ $i -lt ${#rest[@]} ]; do
    if [ "${rest[$i]}" = --process ] && [ -f "$dir/nproc" ]; then
      limit_processes "${rest[$((i + 1))]}" '' "$(cat "$dir/nproc")"
    fi
    i=$((i + 1))
  done
  exec "${runsc[@]}" exec "${rest[@]}"
}

delete() {
  local id dir
  id=$(container_id "${rest[@]}")
  dir=$(container_dir "$id")
  # a keeper still waiting for its start (its FIFO is there) ends
  if [ -p "$dir/start.fifo" ]; then timeout 2 bash -c 'echo delete >"$1"' _ "$dir/start.fifo" 2>/dev/null || true; fi
  rm -rf "$dir" "$(pod_dir "$id")"
  exec "${runsc[@]}" delete "${rest[@]}"
}

case $cmd in
  create) create ;;
  start) start ;;
  exec) exec_ ;;
  delete) delete ;;
  kill)
    if ! out=$("${runsc[@]}" kill "${rest[@]}" 2>&1); then
      printf '%s\n' "$out" >&2
      if grep -qi 'not running' <<<"$out"; then echo 'container not running' >&2; fi
      exit 1
    fi
    ;;
  *) exec "${runsc[@]}" "$cmd" "${rest[@]}" ;;
esac
