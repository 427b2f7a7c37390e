#!/usr/bin/env bash
# The whole suite on a fresh Debian/Ubuntu machine with Node 20 and root: dependencies, build,
# static checks, the Docker engine and images, the Kubernetes test cluster, and every tier.
# Idempotent and cached: a warm run reuses node_modules, the engine, the images and the built
# Kubernetes binaries. Every tier runs even if an earlier one failed; the exit status is 0 only
# when all passed.
#
# Much of a tier's time is spent waiting on an engine or the cluster, so independent work runs in
# two lanes side by side, each line prefixed with its lane's name (a third lane was tried: the
# 2 cores were already busy, and every tier only got slower). Neither lane waits for the other
# but where it needs what the other makes:
#   docker: the static checks and the unit tier; then, once the kube lane has the Docker engine
#           and images back from its faults, the Docker and oci tiers, the contract cases on both,
#           and the hostile programs on both
#   kube:   the Docker engine and images, the Docker and oci faults (they restart dockerd), the
#           cluster, the app image; the Kubernetes tiers, the contract cases and the hostile
#           programs on Kubernetes (the cluster has its own containerd), then the Kubernetes
#           faults (the operator killed, the apiserver restarted) and the disruptive tier (the
#           cluster's components killed, the cluster down and up): the last users of the cluster
# Each lane then takes files of the e2e tier (all but its responsiveness file: they need only the
# Docker engine), one at a time, until none is left: so both lanes work until the end.
# Then, alone: a burst of runs on a pool, and the e2e file that measures the gateway's
# responsiveness under a hostile client.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$SECONDS
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
export SANDPIT_TEST_FAILURES=$results/failures
# Every test's outcome, a JSON line each, for the reliability report printed at the end.
export SANDPIT_RESULTS_DIR=$PWD/.reliability/results
rm -rf "$SANDPIT_RESULTS_DIR"

# step NAME COMMAND...: runs it, and records "ok|FAIL  seconds  NAME" under the lane's file.
step() {
  local name=$1
  shift
  local t0=$SECONDS status=ok
  echo "==> $name" >&2
  "$@" || status=FAIL
  printf '%-4s  %4ds  %s\n' "$status" $((SECONDS - t0)) "$name" >>"$results/$lane"
  [ "$status" = ok ]
}

# in_lane NAME FUNCTION: runs a lane in the background, its output prefixed with [NAME].
in_lane() {
  local name=$1 fn=$2
  (
    lane=$name
    "$fn" 2>&1 | sed -u "s/^/[$name] /"
  ) &
}

deps() {
  # npm ci only when the lockfile changed since the last install.
  if [ -f node_modules/.package-lock.json ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
    echo "node_modules is up to date" >&2
  else
    npm ci --no-audit --no-fund
  fi
}

# ready NAME / await NAME: one lane says that what it makes is there (whether or not it worked:
# the tiers that need it then fail and say why), another waits for it.
ready() { touch "$results/ready.$1"; }
await() {
  while [ ! -e "$results/ready.$1" ]; do sleep 2; done
}

# The application image (the operator and gateway in one) that the Helm test installs, built and
# given to the cluster here, before the Kubernetes tier, instead of inside it.
app_image() {
  bash images/build-app.sh && bash test/env/kube-cluster.sh images "$(bash images/build-app.sh --tag)"
}

docker_lane() {
  step "typecheck" npm run typecheck
  step "lint" npm run lint
  step "unit tier" bash test/run.sh unit
  await docker
  step "docker tier (cold runs)" bash test/run.sh docker
  step "docker tier (warm pools)" bash test/run.sh docker-pools
  step "contract tier (Docker backend)" bash test/run.sh contract-docker
  # The oci backend needs no engine on its path, only the images the kube lane built.
  step "oci tier" bash test/run.sh oci
  step "contract tier (oci backend)" bash test/run.sh contract-oci
  # Escapes, leaks, bombs, request inputs and the gateway's surface (Docker and oci).
  step "hostile tier" bash test/run.sh hostile
  e2e_files
}

# The images the Kubernetes tiers' pods use: the cluster gets only these (rust, c and node run on
# Docker and oci alone; copying their 1.3 GB into containerd took about 50 s of a cold run). A pod
# whose image is not there fails with ErrImageNeverPull, naming it.
export SANDPIT_KUBE_IMAGES='sandpit/pause:3 sandpit/python:3.11 python:3.11 sandpit/bash:5 sandpit/python-data:3.11'

kube_lane() {
  step "docker engine and images" bash test/env/docker.sh up
  # The Docker and oci faults restart the project's dockerd (by its PID), which kills every
  # container on it: so here, first, while the other lane runs its static checks and unit tier (no
  # container; the cluster's kubelet has its own containerd, but the cluster's start copies images
  # out of dockerd). The engine and images are back when it ends (`up` again, in case a case failed
  # midway).
  step "faults tier (Docker and oci)" bash test/run.sh faults
  step "docker engine back" bash test/env/docker.sh up
  ready docker
  step "kube cluster up" bash test/env/kube-cluster.sh up
  step "app image" app_image
  step "kubernetes tier (files that run alone)" bash test/run.sh kube-alone
  step "kubernetes tier (two files at a time)" bash test/run.sh kube-shared
  step "kubernetes tier (warm pools)" bash test/run.sh kube-pools
  step "contract tier (Kubernetes backend)" bash test/run.sh contract-kube
  step "hostile tier (Kubernetes)" bash test/run.sh hostile-kube
  # Kill the operator, restart the apiserver, take the cluster down and up: last in the only lane
  # that uses the cluster (the burst after the lanes finds it up again).
  step "faults tier (Kubernetes)" bash test/run.sh faults-kube
  step "kubernetes disruptive tier" bash test/run.sh kube-disruptive
  step "kube cluster up (after the disruptive tier)" bash test/env/kube-cluster.sh up
  e2e_files
}

# The e2e tier but its responsiveness file, a file at a time, shared by the lanes: each takes the
# next file of the queue that neither has taken (mv is atomic: it fails for the lane that comes
# second).
e2e_queue() {
  mkdir -p "$results/e2e-queue" "$results/e2e-taken"
  local file
  while read -r file; do
    printf '%s\n' "$file" >"$results/e2e-queue/$(basename "$file" .test.ts)"
  done < <(bash test/run.sh e2e-shared --list)
}
e2e_files() {
  local item name
  for item in "$results"/e2e-queue/*; do
    name=$(basename "$item")
    mv "$item" "$results/e2e-taken/$name" 2>/dev/null || continue
    SANDPIT_RESULTS_NAME=e2e-shared.$name step "e2e tier: $name" bash test/run.sh e2e-shared "$(cat "$results/e2e-taken/$name")"
  done
}

cluster_down() {
  if [ "${SANDPIT_KEEP_CLUSTER:-0}" != 1 ]; then
    echo "==> kube cluster down" >&2
    bash test/env/kube-cluster.sh down || true
  fi
  rm -rf "$results"
}

lane=setup
step "dependencies" deps || exit 1
step "build" npm run build
trap cluster_down EXIT
e2e_queue
in_lane docker docker_lane
in_lane kube kube_lane
wait
lane=last
step "kubernetes tier (a burst on a pool)" bash test/run.sh kube-burst
step "e2e tier (the gateway under a hostile client)" bash test/run.sh e2e-alone

# The reliability report (issue 21): the hostile cases, faults and load figures this run measured.
if node --import tsx test/reliability/report.ts --results "$SANDPIT_RESULTS_DIR" --out .reliability/report.md; then
  echo "==> reliability report (.reliability/report.md)" >&2
  cat .reliability/report.md >&2
fi

echo >&2
echo "==> summary ($((SECONDS - started)) s)" >&2
for l in setup docker kube last; do
  case $l in setup | last) cat "$results/$l" ;; *) sed "s/^/[$l] /" "$results/$l" ;; esac
done >&2 2>/dev/null
if [ -s "$SANDPIT_TEST_FAILURES" ]; then
  echo "==> failed tests (suite, then its test)" >&2
  cat "$SANDPIT_TEST_FAILURES" >&2
fi
! grep -q -d skip '^FAIL' "$results"/*
