#!/usr/bin/env bash
# npm run test:reliability: the reliability tier in full (issue 21). Every hostile case in the whole
# matrix (SANDPIT_RELIABILITY=full: Docker, oci and Kubernetes, runc and gVisor, cold and warm, runs
# and sessions), the faults, and the load tier with its 10-minute soak and 100 SandboxRuns at once.
# Then the report, docs/reliability.md, whose totals the README quotes. Takes about an hour.
#   SANDPIT_SOAK_SECONDS shortens the soak (600 by default); SANDPIT_RELIABILITY=ci runs CI's subset
#   of the matrix instead; --out FILE writes the report elsewhere.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

out=docs/reliability.md
[ "${1:-}" = --out ] && out=${2:?--out FILE}
results=.reliability/results
rm -rf "$results"
export SANDPIT_RELIABILITY=${SANDPIT_RELIABILITY:-full} SANDPIT_RESULTS_DIR=$results
status=0
tier() {
  bash test/run.sh "$1" || status=1
}

bash test/env/docker.sh up || exit 1
# The Docker and oci faults restart dockerd: first, before the cluster starts (test/run-all.sh does the same).
tier faults
bash test/env/docker.sh up || exit 1
bash test/env/kube-cluster.sh up || exit 1
tier hostile
tier hostile-kube
tier load
# Kills the operator and restarts the apiserver: last.
tier faults-kube

node --import tsx test/reliability/report.ts --results "$results" --out "$out" --matrix "$SANDPIT_RELIABILITY" &&
  npx prettier --write "$out" >/dev/null || status=1
echo "==> reliability report: $out" >&2
exit "$status"
