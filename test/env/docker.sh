#!/usr/bin/env bash
# The docker test tier's environment: a real local Docker engine and the real sandbox images.
#
#   test/env/docker.sh up       engine up (scripts/docker-engine.sh up), images built (images/build.sh)
#   test/env/docker.sh status   engine state and the images with their sizes
#   test/env/docker.sh down     stop the dockerd that 'up' started; images stay for next time
#   test/env/docker.sh restart  restart that dockerd (by its PID; the faults tier), then 'up'
#
# Idempotent: on a machine where both are in place, 'up' returns in well under a second.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ENGINE=$REPO_ROOT/scripts/docker-engine.sh
BUILD=$REPO_ROOT/images/build.sh

usage() {
  sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

case ${1:-} in
  up)
    "$ENGINE" up
    "$BUILD"
    ;;
  status)
    rc=0
    "$ENGINE" status || rc=$?
    if [[ $rc == 0 ]]; then "$BUILD" --list; fi
    exit "$rc"
    ;;
  down) "$ENGINE" down ;;
  restart)
    "$ENGINE" restart
    "$BUILD"
    ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
