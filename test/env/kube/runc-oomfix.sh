#!/bin/sh
# runc wrapper for machines without CAP_SYS_RESOURCE (see /work/shared/notes/kube-test-cluster.md).
#
# The kubelet asks for a negative oom_score_adj on every pod sandbox (-998) and on Guaranteed pods
# (-997). Without CAP_SYS_RESOURCE runc cannot set it and fails with
# "can't get final child's PID from pipe: EOF". For `create` and `run` this wrapper clamps a negative
# .process.oomScoreAdj in <bundle>/config.json to 0, then hands every call to the real runc unchanged.
#
# kube-cluster.sh installs it into the state dir and registers it in /etc/docker/daemon.json as
# "runtimes": {"sandpit-runc": {"path": ...}}, "default-runtime": "sandpit-runc".
set -eu

REAL_RUNC=/usr/sbin/runc
[ -x "$REAL_RUNC" ] || REAL_RUNC=$(command -v runc)
JQ=/usr/bin/jq

# Find the subcommand after runc's global options (those that take a value are skipped with it).
cmd="" bundle="" expect=""
for arg in "$@"; do
  if [ -n "$expect" ]; then
    [ "$expect" = bundle ] && bundle=$arg
    expect=""
    continue
  fi
  if [ -z "$cmd" ]; then
    case "$arg" in
      --root|--log|--log-format|--criu|--rootless) expect=skip ;;
      -*) ;;
      *) cmd=$arg ;;
    esac
    continue
  fi
  case "$arg" in
    --bundle|-b) expect=bundle ;;
    --bundle=*) bundle=${arg#--bundle=} ;;
  esac
done

if [ "$cmd" = create ] || [ "$cmd" = run ]; then
  config="${bundle:-.}/config.json"
  if [ -f "$config" ] && [ -x "$JQ" ] &&
    "$JQ" -e '(.process.oomScoreAdj // 0) < 0' "$config" >/dev/null 2>&1; then
    tmp="$config.oomfix.$$"
    if "$JQ" -c '.process.oomScoreAdj = 0' "$config" >"$tmp"; then
      mv -f "$tmp" "$config"
    else
      rm -f "$tmp"
    fi
  fi
fi

exec "$REAL_RUNC" "$@"
