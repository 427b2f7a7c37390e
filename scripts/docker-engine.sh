#!/usr/bin/env bash
# Start (or reuse) a local Docker engine for sandpit, without systemd.
#
#   scripts/docker-engine.sh up       engine answering on /var/run/docker.sock, runsc (and runsc-egress) registered
#   scripts/docker-engine.sh status   what is running, and who started it
#   scripts/docker-engine.sh down     stop the dockerd that `up` started (never any other)
#   scripts/docker-engine.sh restart  stop the dockerd that `up` started and start it again
#
# See --help for the environment variables.
set -euo pipefail

SOCK=/var/run/docker.sock
DAEMON_JSON=${SANDPIT_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
STATE_DIR=${SANDPIT_STATE_DIR:-/var/lib/sandpit/state}/docker
PID_FILE=$STATE_DIR/dockerd.pid
LOG_FILE=$STATE_DIR/dockerd.log
START_TIMEOUT=${SANDPIT_DOCKER_START_TIMEOUT:-90}
STOP_TIMEOUT=${SANDPIT_DOCKER_STOP_TIMEOUT:-30}
RUNSC_PATH=/usr/bin/runsc
# The runtime entry this script owns inside daemon.json. gVisor only works here with the
# ptrace platform (no nested KVM) and without its own network stack; --oci-seccomp makes it
# apply the container's seccomp profile (sandpit's) inside the sandbox, which it otherwise ignores.
RUNSC_ENTRY='{"path":"/usr/bin/runsc","runtimeArgs":["--platform=ptrace","--network=none","--oci-seccomp"]}'
# The same runtime for sandboxes with an egress allowlist, plus --host-uds=open: their one way out
# is sandpit's egress proxy, reached through a Unix socket the gateway binds on the host and
# bind-mounts into the sandbox (read-only), and gVisor connects to a host socket only with it.
# `open` lets the sandbox connect to host sockets that are mounted into it, nothing more: it cannot
# create (bind) one on the host (that is `create`), and sandpit mounts only the proxy's directory,
# and only into egress sandboxes. Every other sandbox keeps runsc and its default, none: a second
# runtime rather than the flag on runsc, so that a sandbox without egress cannot reach any host
# socket even if one were ever mounted into it.
RUNSC_EGRESS_ENTRY='{"path":"/usr/bin/runsc","runtimeArgs":["--platform=ptrace","--network=none","--oci-seccomp","--host-uds=open"]}'

usage() {
  cat <<EOF
usage: ${0##*/} up | status | down | restart | --help

  up      Use the engine answering on $SOCK if there is one (start nothing).
          Otherwise install Debian's docker.io when it is missing, start dockerd in the
          background (no systemd) and wait until it answers. Either way: install runsc when
          missing and register it as runtimes "runsc" and "runsc-egress" (runsc with
          --host-uds=open, for sandboxes whose way out is sandpit's egress proxy socket) in
          $DAEMON_JSON (merged into the existing JSON; other keys are kept), sending SIGHUP to
          a running dockerd only when the file changed. Idempotent; a no-op when everything
          is in place.
  status  Print whether the engine answers, its version and runtimes, and whether this
          script started it. Exit 0 when it answers, 3 when it does not.
  down    Stop the dockerd that 'up' started (recorded PID); leave any other dockerd alone.
  restart Stop the dockerd that 'up' started (SIGTERM to its recorded PID: with live-restore
          off it stops its containers) and start it again ('up'); with none running, 'up'.
          Refuses when a dockerd that 'up' did not start is running: that one is not ours.

environment:
  SANDPIT_STATE_DIR              state root (default /var/lib/sandpit/state); PID and log
                                 live in \$SANDPIT_STATE_DIR/docker/ (now: $STATE_DIR)
  SANDPIT_DOCKER_START_TIMEOUT   seconds to wait for dockerd to answer (default 90)
  SANDPIT_DOCKER_STOP_TIMEOUT    seconds to wait for dockerd to exit on 'down' (default 30)
EOF
}

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'docker-engine: error: %s\n' "$*" >&2; exit 1; }

docker_cli() {
  if [[ -x /usr/local/bin/docker ]]; then echo /usr/local/bin/docker
  elif command -v docker >/dev/null 2>&1; then command -v docker
  else echo ""
  fi
}

# True when something answers the Engine API on $SOCK.
engine_answers() {
  [[ -S $SOCK ]] || return 1
  local cli
  cli=$(docker_cli)
  if [[ -n $cli ]]; then
    DOCKER_HOST=unix://$SOCK timeout 10 "$cli" version --format '{{.Server.Version}}' >/dev/null 2>&1
  elif command -v curl >/dev/null 2>&1; then
    [[ $(timeout 10 curl -fsS --unix-socket "$SOCK" http://localhost/_ping 2>/dev/null) == OK ]]
  else
    return 1
  fi
}

server_version() {
  DOCKER_HOST=unix://$SOCK timeout 10 "$(docker_cli)" version --format '{{.Server.Version}}' 2>/dev/null || true
}

server_runtimes() {
  # shellcheck disable=SC2016 # a Go template, not shell
  DOCKER_HOST=unix://$SOCK timeout 10 "$(docker_cli)" info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null || true
}

# is_dockerd PID: the process exists and is a dockerd.
is_dockerd() {
  local pid=$1 comm
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [[ $comm == dockerd ]]
}

# PID recorded by 'up', if that process is still a dockerd.
our_pid() {
  local pid
  [[ -f $PID_FILE ]] || return 1
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  is_dockerd "$pid" || return 1
  echo "$pid"
}

# PID of whatever dockerd is running (its own pidfile), if any.
running_dockerd_pid() {
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null) || return 1
  is_dockerd "$pid" || return 1
  echo "$pid"
}

apt_install() {
  local pkgs=("$@")
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
  log "installing ${pkgs[*]} (apt)"
  [[ $(id -u) -eq 0 ]] || die "installing ${pkgs[*]} needs root"
  # policy-rc.d (if the machine has one) keeps the package from starting its own daemon;
  # without systemd the init script would otherwise try to.
  if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${pkgs[@]}" >&2; then
    log "apt-get install failed; refreshing package lists and retrying"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q update >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${pkgs[@]}" >&2
  fi
}

# Merge runtimes.runsc and runtimes.runsc-egress into daemon.json, keeping every other key. Prints "changed" or
# "unchanged" on stdout. Refuses to touch a file that is not valid JSON.
merge_daemon_json() {
  command -v node >/dev/null 2>&1 || die "node is needed to edit $DAEMON_JSON"
  mkdir -p "$(dirname "$DAEMON_JSON")"
  # shellcheck disable=SC2016 # JavaScript, not shell
  DAEMON_JSON=$DAEMON_JSON RUNSC_ENTRY=$RUNSC_ENTRY RUNSC_EGRESS_ENTRY=$RUNSC_EGRESS_ENTRY node -e '
    const fs = require("fs");
    const file = process.env.DAEMON_JSON;
    const want = { runsc: JSON.parse(process.env.RUNSC_ENTRY), "runsc-egress": JSON.parse(process.env.RUNSC_EGRESS_ENTRY) };
    let text = null;
    try { text = fs.readFileSync(file, "utf8"); } catch (e) { if (e.code !== "ENOENT") throw e; }
    let cfg = {};
    if (text !== null && text.trim() !== "") {
      try { cfg = JSON.parse(text); } catch (e) {
        console.error(`docker-engine: error: ${file} is not valid JSON (${e.message}); not touching it`);
        process.exit(2);
      }
      if (cfg === null || typeof cfg !== "object" || Array.isArray(cfg)) {
        console.error(`docker-engine: error: ${file} is not a JSON object; not touching it`);
        process.exit(2);
      }
    }
    const runtimes = cfg.runtimes && typeof cfg.runtimes === "object" ? cfg.runtimes : {};
    const same = Object.keys(want).every((k) => JSON.stringify(runtimes[k]) === JSON.stringify(want[k]));
    if (same) { console.log("unchanged"); process.exit(0); }
    cfg.runtimes = { ...runtimes, ...want };
    const tmp = `${file}.sandpit-tmp-${process.pid}`;
    fs.writeFileSync(tmp, JSON.stringify(cfg, null, 2) + "\n", { mode: 0o644 });
    fs.renameSync(tmp, file);
    console.log("changed");
  '
}

ensure_runsc() {
  if [[ ! -x $RUNSC_PATH ]]; then
    apt_install runsc
  fi
  local result
  result=$(merge_daemon_json) || die "could not update $DAEMON_JSON"
  if [[ $result == changed ]]; then
    log "registered runtimes runsc and runsc-egress in $DAEMON_JSON"
    local pid
    if pid=$(running_dockerd_pid); then
      log "reloading dockerd (pid $pid) with SIGHUP"
      kill -HUP "$pid"
    fi
  fi
}

# Wait (briefly) for a reloaded dockerd to list runsc and runsc-egress among its runtimes.
check_runsc_registered() {
  local i have
  for i in 1 2 3 4 5 6 7 8 9 10; do
    have=" $(server_runtimes) "
    [[ $have == *" runsc "* && $have == *" runsc-egress "* ]] && return 0
    [[ $i -eq 10 ]] || sleep 0.3
  done
  log "warning: the engine does not list runtimes runsc and runsc-egress (is $DAEMON_JSON the file it reads?)"
}

# dockerd outlives this script: it must not keep a caller's locks or pipes open (a held flock
# blocks every later `kube-cluster.sh up`; a held pipe keeps a CI log from ending).
close_inherited_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

start_dockerd() {
  mkdir -p "$STATE_DIR"
  if ! command -v dockerd >/dev/null 2>&1; then
    apt_install docker.io
  fi
  local pid
  if pid=$(our_pid) || pid=$(running_dockerd_pid); then
    log "dockerd (pid $pid) is running but not answering yet; waiting"
  else
    log "starting dockerd (log: $LOG_FILE)"
    printf '\n--- %s: started by %s up\n' "$(date -u +%FT%TZ)" "$0" >>"$LOG_FILE"
    # setsid: own session, so that the caller's process group ending does not take it along.
    (
      close_inherited_fds
      exec setsid dockerd --host "unix://$SOCK" </dev/null >>"$LOG_FILE" 2>&1
    ) &
    pid=$!
    echo "$pid" >"$PID_FILE"
  fi
  local deadline=$((SECONDS + START_TIMEOUT))
  until engine_answers; do
    # kill -0, not is_dockerd: right after the fork the child may still be setsid.
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$LOG_FILE" >&2 || true
      die "dockerd (pid $pid) exited before answering; see $LOG_FILE"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$LOG_FILE" >&2 || true
      die "dockerd (pid $pid) did not answer on $SOCK within ${START_TIMEOUT}s; see $LOG_FILE"
    fi
    sleep 0.2
  done
  log "dockerd (pid $pid) answers on $SOCK (server $(server_version))"
}

cmd_up() {
  # daemon.json first, so that a dockerd we start reads it at start-up.
  ensure_runsc
  if engine_answers; then
    local pid who="not started by this script"
    if pid=$(our_pid); then who="started by this script, pid $pid"
    elif pid=$(running_dockerd_pid); then who="pid $pid, not started by this script"
    fi
    log "engine already answers on $SOCK (server $(server_version); $who)"
  else
    start_dockerd
  fi
  check_runsc_registered
}

cmd_status() {
  local pid
  if engine_answers; then
    echo "engine:   answering on $SOCK (server $(server_version))"
    echo "runtimes: $(server_runtimes)"
  else
    echo "engine:   not answering on $SOCK"
  fi
  if pid=$(our_pid); then
    echo "dockerd:  pid $pid, started by ${0##*/} up (log: $LOG_FILE)"
  elif pid=$(running_dockerd_pid); then
    echo "dockerd:  pid $pid, not started by ${0##*/}"
  else
    echo "dockerd:  no local dockerd process"
  fi
  engine_answers || return 3
}

cmd_down() {
  local pid
  if ! pid=$(our_pid); then
    rm -f "$PID_FILE"
    if pid=$(running_dockerd_pid); then
      log "dockerd (pid $pid) was not started by ${0##*/} up; leaving it alone"
    else
      log "no dockerd started by ${0##*/} up is running"
    fi
    return 0
  fi
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while is_dockerd "$pid"; do
    if ((SECONDS >= deadline)); then
      die "dockerd (pid $pid) still running after ${STOP_TIMEOUT}s; see $LOG_FILE"
    fi
    sleep 0.2
  done
  rm -f "$PID_FILE"
  log "dockerd stopped"
}

cmd_restart() {
  if ! our_pid >/dev/null; then
    local pid
    if pid=$(running_dockerd_pid); then
      die "dockerd (pid $pid) was not started by ${0##*/} up; not restarting it"
    fi
  fi
  cmd_down
  cmd_up
}

main() {
  case ${1:-} in
    up) cmd_up ;;
    status) cmd_status ;;
    down) cmd_down ;;
    restart) cmd_restart ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
