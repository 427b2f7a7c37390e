#!/usr/bin/env bash
# The whole suite on a fresh Debian/Ubuntu machine with Node 20 and root: dependencies, build,
# static checks, the Docker engine and images, the Kubernetes test cluster, and every tier.
# Idempotent and cached: a warm run reuses node_modules, the engine, the images and the built
# Kubernetes binaries. Every tier runs even if an earlier one failed; the exit status is 0 only
# when all passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$SECONDS
declare -a summary=()
failed=0

step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "==> $name" >&2
  if "$@"; then
    summary+=("ok    $(printf '%4ds' $((SECONDS - t0)))  $name")
  else
    summary+=("FAIL  $(printf '%4ds' $((SECONDS - t0)))  $name")
    failed=1
  fi
}

deps() {
  # npm ci only when the lockfile changed since the last install.
  if [ -f node_modules/.package-lock.json ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
    echo "node_modules is up to date" >&2
  else
    npm ci --no-audit --no-fund
  fi
}

cluster_down() {
  if [ "${SANDPIT_KEEP_CLUSTER:-0}" != 1 ]; then
    echo "==> kube cluster down" >&2
    bash test/env/kube-cluster.sh down || true
  fi
}

step "dependencies" deps || exit 1
step "build" npm run build
step "typecheck" npm run typecheck
step "lint" npm run lint
step "unit tier" bash test/run.sh unit
step "docker engine and images" bash test/env/docker.sh up
step "docker tier (cold runs)" bash test/run.sh docker
step "docker tier (warm pools)" env SANDPIT_TEST_POOL=on bash test/run.sh docker
step "e2e tier" bash test/run.sh e2e
trap cluster_down EXIT
step "kube cluster up" bash test/env/kube-cluster.sh up
step "kubernetes tier" bash test/run.sh kube
step "contract tier (both backends)" bash test/run.sh contract
step "kubernetes disruptive tier" bash test/run.sh kube-disruptive

echo >&2
echo "==> summary ($((SECONDS - started)) s)" >&2
printf '%s\n' "${summary[@]}" >&2
exit $failed
