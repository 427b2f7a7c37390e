#!/usr/bin/env bash
# Runs one test tier with node's built-in runner through tsx.
#   test/run.sh unit|docker|docker-pools|oci|e2e|e2e-shared|e2e-alone|kube|kube-shared|kube-alone|kube-pools|kube-burst|contract|contract-docker|contract-oci|contract-kube|kube-disruptive|hostile|hostile-kube|faults|faults-kube|load [--list] [FILE...]
# Node 20 has no --test globbing, so each tier's files are listed explicitly (found under its
# folder, sorted; --list prints them). A tier that runs zero tests fails, as does one whose engine or
# cluster is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tier=${1:?usage: test/run.sh unit|docker|docker-pools|oci|e2e|e2e-shared|e2e-alone|kube|kube-shared|kube-alone|kube-pools|kube-burst|contract|contract-docker|contract-oci|contract-kube|kube-disruptive|hostile|hostile-kube|faults|faults-kube|load [--list] [FILE...]}
shift
# The Kubernetes tier's warm-pool files, and those that must run alone (see kube-alone).
kube_pools='operator-pools|operator-warm|operator-session-pools'
kube_alone='cluster|operator-scale|operator-gvisor|operator-ha|operator-node-limits'
case $tier in
  unit) dirs=(test/unit) ;;
  docker) dirs=(test/integration/docker) ;;
  # The Docker tier again with warm pools pre-warmed for every template: the files where pools
  # change the path a run or session takes (the core and session cases under both runtimes, limits,
  # I/O, output files, clean-up, the runner's channel).
  docker-pools) dirs=(test/integration/docker) && export SANDPIT_TEST_POOL=on &&
    only='/(runc|runsc|sessions|sessions-runsc|limits|io|outputs|lifecycle|runner-channel)\.test\.ts$' ;;
  # The oci backend (runc and runsc driven directly; needs root and the engine's images): the Docker
  # tier's core properties and limits against it, its clean-up on every path and after a SIGKILL.
  oci) dirs=(test/integration/oci) ;;
  # The warm-pool files run as a tier of their own; the burst of 100 runs loads the machine, so it
  # runs alone (test/run-all.sh).
  kube) dirs=(test/integration/kubernetes) && except="/($kube_pools|pools-burst)\\.test\\.ts\$" ;;
  # Its halves (test/run-all.sh). Every file has its own namespaces and operator, so most run two
  # at a time; these run alone: the cluster's own test (it runs the cluster script, under the
  # cluster's lock, and 24 pods at once), 50 runs at once, the fork bomb under gVisor, the leader
  # hand-over's timing bounds, and the node-limit floods that must end inside their deadlines.
  kube-shared) dirs=(test/integration/kubernetes) && except="/($kube_pools|pools-burst|$kube_alone)\\.test\\.ts\$" ;;
  kube-alone) dirs=(test/integration/kubernetes) && only="/($kube_alone)\\.test\\.ts\$" ;;
  kube-pools) dirs=(test/integration/kubernetes) && only="/($kube_pools)\\.test\\.ts\$" ;;
  kube-burst) dirs=(test/integration/kubernetes) && only='/pools-burst\.test\.ts$' ;;
  # The same cases against both backends (needs the Docker engine and the cluster), and the
  # gateway in Kubernetes mode end to end.
  contract) dirs=(test/contract) ;;
  # Its halves, to run beside the other lane's tiers (test/run-all.sh): the Docker backend's file,
  # and the rest (the Kubernetes backend, and the gateway in Kubernetes mode).
  contract-docker) dirs=(test/contract) && only='/docker\.test\.ts$' ;;
  # The same cases against the oci backend.
  contract-oci) dirs=(test/contract) && only='/oci\.test\.ts$' ;;
  contract-kube) dirs=(test/contract) && except='/(docker|oci)\.test\.ts$' ;;
  # Kills the API server and takes the cluster down and up: run last, alone.
  kube-disruptive) dirs=(test/integration/kubernetes-disruptive) ;;
  e2e) dirs=(test/e2e) ;;
  # Its halves (test/run-all.sh): the file that measures the gateway's responsiveness under a
  # hostile client runs alone; the rest in the lane that ends first, beside the other's last tiers.
  e2e-shared) dirs=(test/e2e) && except='/gateway-exhaustion\.test\.ts$' ;;
  e2e-alone) dirs=(test/e2e) && only='/gateway-exhaustion\.test\.ts$' ;;
  # Hostile programs (issue 21): escape and privilege techniques and leaks, tried from inside the
  # sandbox on Docker, oci and Kubernetes, in the configurations test/hostile/untrusted.ts's
  # configs() gives (runc warm runs and sessions, a gVisor cold run; the bombs only runc's;
  # SANDPIT_RELIABILITY=full: every combination of runtime, pool and path); and hostile request
  # inputs and clients at the gateway served over HTTP on Docker (request-inputs, gateway-surface).
  # Its Kubernetes files run as a tier of their own, in the lane that has the cluster
  # (test/run-all.sh).
  hostile) dirs=(test/hostile) && except='/(bombs-)?kubernetes\.test\.ts$' ;;
  hostile-kube) dirs=(test/hostile) && only='/(bombs-)?kubernetes\.test\.ts$' ;;
  # Faults (issue 21), the disruptive tier, its files one at a time like every tier that starts
  # sandboxes. Its Docker and oci half restarts the project's dockerd: nothing else may use the
  # engine meanwhile (test/run-all.sh runs it before the cluster starts). Its Kubernetes half
  # (kube-*.test.ts) kills the operator and restarts the apiserver: nothing else may use the
  # cluster meanwhile (test/run-all.sh runs it last in the cluster's lane).
  faults) dirs=(test/faults) && except='/kube-[^/]*\.test\.ts$' ;;
  faults-kube) dirs=(test/faults) && only='/kube-[^/]*\.test\.ts$' ;;
  # Load (issue 21): concurrent calls to a gateway, a soak (SANDPIT_SOAK_SECONDS, 600 by default),
  # and SandboxRuns applied at once; their figures go to the reliability report.
  load) dirs=(test/load) ;;
  *) echo "unknown tier: $tier" >&2; exit 64 ;;
esac

list_only=0
[ "${1:-}" = --list ] && list_only=1 && shift
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find "${dirs[@]}" -name '*.test.ts' 2>/dev/null | sort)
  [ -n "${only:-}" ] && mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -E "$only")
  [ -n "${except:-}" ] && mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -vE "$except")
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "test/run.sh: no test files for tier $tier" >&2
  exit 1
fi
if [ "$list_only" = 1 ]; then
  printf '%s\n' "${files[@]}"
  exit 0
fi

# The commands the tests start write their audit trail under $XDG_STATE_HOME: never the user's own.
state=$(mktemp -d)
export XDG_STATE_HOME=$state

# Tiers that start sandboxes run their files one at a time: 2 cores, real engines.
# The Kubernetes half of the contract tier, kube-shared and kube-pools run two files at once: each
# has its own namespaces and operator, and they spend most of their time waiting on the cluster.
concurrency=1
case $tier in contract-kube | kube-shared | kube-pools) concurrency=2 ;; esac
# Two files at once must not both rebuild dist/ (the build starts by removing it): built here first.
if [ "$concurrency" -gt 1 ]; then
  node --import tsx -e "import('./test/support/built-cli.ts').then((m) => m.ensureBuilt())"
fi
log=$(mktemp)
trap 'rm -rf "$log" "$state"' EXIT
echo "==> $tier: ${#files[@]} files" >&2
set +e
# With SANDPIT_RESULTS_DIR set, each test's outcome is also written there, one JSON line a test
# (test/support/results-reporter.mjs), for the reliability report: to the tier's file, or to
# SANDPIT_RESULTS_NAME's (a tier run a file at a time, by two lanes at once).
reporters=(--test-reporter=tap --test-reporter-destination=stdout)
if [ -n "${SANDPIT_RESULTS_DIR:-}" ]; then
  mkdir -p "$SANDPIT_RESULTS_DIR"
  reporters+=(--test-reporter=./test/support/results-reporter.mjs --test-reporter-destination="$SANDPIT_RESULTS_DIR/${SANDPIT_RESULTS_NAME:-$tier}.jsonl")
fi
if [ "$tier" = unit ]; then
  # Its files in one process (test/support/one-process.ts): a process each cost more than the tests.
  node --import tsx "${reporters[@]}" test/support/one-process.ts "${files[@]}" 2>&1 | tee "$log"
else
  node --import tsx --test "${reporters[@]}" --test-concurrency="$concurrency" "${files[@]}" 2>&1 | tee "$log"
fi
status=${PIPESTATUS[0]}
set -e
tests=$(grep -E '^# tests [0-9]+' "$log" | tail -1 | awk '{print $3}')
fails=$(grep -E '^# fail [0-9]+' "$log" | tail -1 | awk '{print $3}')
# A test cancelled because the event loop emptied before it settled is a failure too.
cancelled=$(grep -E '^# cancelled [0-9]+' "$log" | tail -1 | awk '{print $3}')
if [ -z "$tests" ] || [ "$tests" -eq 0 ]; then
  echo "test/run.sh: tier $tier ran zero tests: that is a failure" >&2
  exit 1
fi
echo "==> $tier: $tests tests, ${fails:-?} failed, ${cancelled:-?} cancelled" >&2
# Where the tier's time went: its top-level suites, slowest first.
awk '/^(not )?ok [0-9]+ - / { name = $0; sub(/^(not )?ok [0-9]+ - /, "", name) }
     /^  duration_ms: / && name != "" { printf "%6.0fs  %s\n", $2 / 1000, name; name = "" }' "$log" |
  sort -rn | head -8 | sed "s/^/==> $tier slowest: /" >&2 || true
# The failed tests by name, to $SANDPIT_TEST_FAILURES when set (test/run-all.sh repeats them in its
# summary, which a truncated CI log still shows).
if [ "$status" -ne 0 ] && [ -n "${SANDPIT_TEST_FAILURES:-}" ]; then
  # Each failed test, then the first lines of its error (TAP's YAML block: `error:` and what is
  # indented under it).
  awk -v tier="$tier" '
    /^ *not ok [0-9]+ - / { line = $0; sub(/not ok [0-9]+ - /, "", line); print tier ":" line; grab = 0; next }
    /^ *error: / { grab = 6; indent = match($0, /[^ ]/); print "    " substr($0, indent); next }
    grab > 0 && match($0, /[^ ]/) > indent && !/^ *(code|stack|expected|actual|operator|location|failureType|duration_ms):/ { print "      " substr($0, match($0, /[^ ]/)); grab--; next }
    { grab = 0 }
  ' "$log" >>"$SANDPIT_TEST_FAILURES" || true
fi
exit "$status"
