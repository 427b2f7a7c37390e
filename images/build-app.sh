#!/usr/bin/env bash
# Offline builder for the sandpit application image sandpit/sandpit:<package version>: the
# operator (`sandpit operator`) and the gateway (`sandpit serve`) in one image, made without any
# container registry from the same cached Debian 12 base as the sandbox images (images/build.sh).
#
#   images/build.sh's debootstrap base (cached)      -> copy
#   + apt-get install APP_PACKAGES, user sandpit (1000), the host's Node.js 20 binary
#                                                     -> docker import  sandpit/rootfs:app
#   npm pack of this repo + npm ci --omit=dev (the lockfile's versions, npm cache kept)
#   docker build (legacy builder, FROM that)          -> sandpit/sandpit:<version>
#
# Each stage is keyed by a hash of its inputs (labels sandpit.dev/rootfs-hash, sandpit.dev/build-hash),
# so a no-op run returns in about a second and a code change redoes only the last stage.
# `npm run build` must have run first. See --help and charts/sandpit/README.md.
set -euo pipefail

IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$IMAGES_DIR/.." && pwd)
SELF=$IMAGES_DIR/build-app.sh
BUILD_SH=$IMAGES_DIR/build.sh
SCRIPT=images/build-app.sh
# shellcheck source=images/lib.sh
source "$IMAGES_DIR/lib.sh"
CACHE_DIR=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/sandpit/images
LABEL_MANAGED=sandpit.dev/managed-by
LABEL_BUILD_HASH=sandpit.dev/build-hash
LABEL_ROOTFS_HASH=sandpit.dev/rootfs-hash
ROOTFS_TAG=sandpit/rootfs:app
REPOSITORY=${SANDPIT_APP_IMAGE_REPOSITORY:-sandpit/sandpit}
# Node's shared libraries (libstdc++6, libgcc-s1; libc6 is in every base) and tini as PID 1.
APP_PACKAGES=(libstdc++6 libgcc-s1 tini)
APP_UID=1000
# Node.js of the image: the host's, which must be 20.19 or newer 20.x (package.json engines).
NODE_BIN=${SANDPIT_APP_NODE:-}

usage() {
  cat <<EOF
usage: images/build-app.sh [--force]
       images/build-app.sh --tag | --list

Builds the application image $REPOSITORY:<version of package.json> offline: the debootstrap
base of images/build.sh, ${APP_PACKAGES[*]}, the host's Node.js 20 binary, and this
repository's npm package with its production dependencies. Entry point: sandpit (tini as PID 1),
user $APP_UID:$APP_UID; nothing is written to the root file system, so it runs read-only.

  docker run --rm $REPOSITORY:<version> operator --help
  docker run --rm $REPOSITORY:<version> serve --help

Run \`npm run build\` first: the image gets the package \`npm pack\` makes from dist/. An image
whose build-hash label matches its inputs (this script, the base, the Node binary, the package,
package-lock.json) is skipped. Needs root and a running engine (scripts/docker-engine.sh up).

options:
  --force      rebuild even when up to date (redoes the package install on the cached base)
  --tag        print the image reference this checkout builds and exit
  --list       print the app images that exist, their sizes and whether they are current
  -h, --help   this text

env: SANDPIT_APP_NODE (the node binary to copy; default: the node on PATH),
     SANDPIT_APP_IMAGE_REPOSITORY (default sandpit/sandpit), XDG_CACHE_HOME
cache: $CACHE_DIR (shared with images/build.sh; npm cache in npm/)
EOF
}

package_version() { node -p 'require(process.argv[1]).version' "$REPO_ROOT/package.json"; }
image_ref() { echo "$REPOSITORY:$(package_version)"; }

require_built() {
  [[ -f $REPO_ROOT/dist/cmd/cli.js ]] ||
    die "dist/cmd/cli.js is missing: run \`npm run build\` first (the image gets the package npm pack makes from dist/)"
  local newer
  newer=$(find "$REPO_ROOT/src" -newer "$REPO_ROOT/dist/cmd/cli.js" -type f -print -quit)
  [[ -z $newer ]] ||
    note "warning: ${newer#"$REPO_ROOT"/} is newer than dist/: run \`npm run build\` for an image of the current source"
}

require_node() {
  command -v npm >/dev/null 2>&1 || die "npm is needed (npm pack, npm ci)"
  [[ -n $NODE_BIN ]] || NODE_BIN=$(node -p process.execPath)
  [[ -x $NODE_BIN ]] || die "no Node.js binary at '$NODE_BIN' (SANDPIT_APP_NODE)"
  local v
  v=$("$NODE_BIN" -p process.versions.node) || die "$NODE_BIN does not run"
  [[ $v =~ ^20\.([0-9]+)\. && ${BASH_REMATCH[1]} -ge 19 ]] ||
    die "$NODE_BIN is Node.js $v; the image needs Node.js 20 (>= 20.19, package.json engines). Point SANDPIT_APP_NODE at one"
}

# --- keys ---------------------------------------------------------------------------------

# Everything stage 1 is made of. The node binary is hashed by content (about 0.3 s).
rootfs_key() {
  {
    bash "$BUILD_SH" __base-key
    file_sha "$NODE_BIN"
    echo "${APP_PACKAGES[*]} uid $APP_UID"
    declare -f build_rootfs chroot_setup
  } | sha
}

# npm's own digest of the package `npm pack` would make (dist/, crds/, images/, charts/, …).
package_integrity() {
  (cd "$REPO_ROOT" && npm pack --dry-run --json --ignore-scripts 2>/dev/null) |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s)[0].integrity))'
}

build_hash() {
  {
    rootfs_key
    file_sha "$SELF"
    package_integrity
    file_sha "$REPO_ROOT/package-lock.json"
    image_ref
  } | sha
}

# --- stage 1: base + packages + user + node -> sandpit/rootfs:app -----------------------

# Runs inside `unshare --mount` (like images/build.sh __chroot-setup): /proc, a minimal /dev and the
# shared .deb cache are mounted into ROOT for apt, and vanish with the namespace.
chroot_setup() {
  local root=$1 debs=$2
  shift 2
  mount -t proc proc "$root/proc"
  mount -t tmpfs -o mode=0755,nosuid devtmp "$root/dev"
  local spec
  for spec in null:3 zero:5 full:7 random:8 urandom:9; do
    mknod -m 0666 "$root/dev/${spec%%:*}" c 1 "${spec##*:}"
  done
  mkdir -p "$root/var/cache/sandpit-debs" "$debs/partial"
  mount --bind "$debs" "$root/var/cache/sandpit-debs"
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive sh -euc '
      apt_opts="-q -o Dpkg::Use-Pty=0 -o Acquire::Languages=none -o Dir::Cache::Archives=/var/cache/sandpit-debs -o APT::Sandbox::User=root"
      apt-get $apt_opts update
      apt-get $apt_opts upgrade -y  # security updates since the base was made
      apt-get $apt_opts install -y --no-install-recommends "$@"
      uid=$0
      getent group sandpit >/dev/null || groupadd --gid "$uid" sandpit
      getent passwd sandpit >/dev/null ||
        useradd --uid "$uid" --gid "$uid" --home-dir /home/sandpit --create-home --shell /usr/sbin/nologin sandpit
      # Does the copied Node.js find every library it links, in the versions it needs?
      if ldd /usr/local/bin/node 2>&1 | grep "not found"; then
        echo "the host Node.js binary needs libraries this Debian 12 base lacks (above)" >&2
        exit 1
      fi
      /usr/local/bin/node -e "require(\"node:crypto\").randomUUID(); console.log(\"node\", process.version, \"runs in the image\")"
    ' "$APP_UID" "$@"
}

build_rootfs() {
  local key=$1 base work root t0 logf
  t0=$(now)
  base=$(bash "$BUILD_SH" __base)
  logf=$CACHE_DIR/logs/app.log
  work=$CACHE_DIR/work/app.$$
  rm -rf "$work" && mkdir -p "$work"
  root=$work/rootfs
  log "app: rootfs: base + ${APP_PACKAGES[*]} + user sandpit + $NODE_BIN (log: $logf)"
  cp -a "$base" "$root"
  install -m 0755 -o 0 -g 0 "$NODE_BIN" "$root/usr/local/bin/node"
  ln -sfn /opt/sandpit/dist/cmd/cli.js "$root/usr/local/bin/sandpit"
  cat /etc/resolv.conf >"$root/etc/resolv.conf" # apt inside the chroot downloads
  if ! unshare --mount --propagation private -- "$BASH" "$SELF" __chroot-setup \
    "$root" "$CACHE_DIR/debs" "${APP_PACKAGES[@]}" >"$logf" 2>&1; then
    tail -n 20 "$logf" >&2
    rm -rf "$work"
    die "app: package install or the Node.js check failed; see $logf"
  fi
  note "app: $(tail -n 1 "$logf") ($(since "$t0"))"
  # Files the engine provides at run time stay empty; no docs, man pages, translations, apt lists.
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  rm -rf "$root/var/cache/sandpit-debs" "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/var/log/apt "$root"/var/log/*.log "$root"/tmp/* "$root/root/.cache"
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$root/dev" "$root/proc" "$root/sys" -mindepth 1 -delete 2>/dev/null || true
  chmod 1777 "$root/tmp"
  tar --numeric-owner -C "$root" -cf - . |
    docker import --change "LABEL $LABEL_MANAGED=sandpit $LABEL_ROOTFS_HASH=$key" - "$ROOTFS_TAG" >/dev/null
  note "app: imported $ROOTFS_TAG ($(du -sh "$root" | cut -f1)) in $(since "$t0")"
  rm -rf "$work"
}

# --- stage 2: the package and its production dependencies -> sandpit/sandpit:<version> ---

build_final() {
  local hash=$1 ref=$2 ctx t0 version
  t0=$(now)
  version=${ref##*:}
  ctx=$CACHE_DIR/work/app-final.$$
  rm -rf "$ctx" && mkdir -p "$ctx/pack"
  (cd "$REPO_ROOT" && npm pack --silent --ignore-scripts --pack-destination "$ctx/pack" >/dev/null) ||
    die "npm pack failed"
  tar -xzf "$ctx"/pack/*.tgz -C "$ctx"
  mv "$ctx/package" "$ctx/app"
  # The lockfile's exact versions, not whatever the ranges resolve to today. No install scripts:
  # optional native addons (ssh2's) fall back to JavaScript, and nothing is compiled or downloaded.
  cp "$REPO_ROOT/package-lock.json" "$ctx/app/"
  log "app: npm ci --omit=dev (npm cache $CACHE_DIR/npm)"
  if ! (cd "$ctx/app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline \
    --cache "$CACHE_DIR/npm" --loglevel=error) >"$CACHE_DIR/logs/app.npm.log" 2>&1; then
    cat "$CACHE_DIR/logs/app.npm.log" >&2
    rm -rf "$ctx"
    die "npm ci --omit=dev failed (log above)"
  fi
  # Type declarations and source maps are not needed to run (about a third of node_modules).
  find "$ctx/app/node_modules" -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' \
    -o -name '*.d.cts' \) -delete
  rm -f "$ctx/app/package-lock.json" "$ctx/app/node_modules/.package-lock.json"
  # node_modules in a layer of its own: a code change leaves it to the build cache.
  mv "$ctx/app/node_modules" "$ctx/node_modules"
  cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS_TAG
COPY node_modules /opt/sandpit/node_modules
COPY app /opt/sandpit
ENV NODE_ENV=production LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/sandpit
WORKDIR /opt/sandpit
USER $APP_UID:$APP_UID
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sandpit"]
CMD ["--help"]
EOF
  if ! DOCKER_BUILDKIT=0 docker build -q --force-rm \
    --label "$LABEL_MANAGED=sandpit" --label "$LABEL_BUILD_HASH=$hash" \
    --label "sandpit.dev/component=app" \
    --label "org.opencontainers.image.title=sandpit" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.licenses=Apache-2.0" \
    -t "$ref" "$ctx" >"$CACHE_DIR/logs/app.final.log" 2>&1; then
    cat "$CACHE_DIR/logs/app.final.log" >&2
    rm -rf "$ctx"
    die "docker build of the final layers failed"
  fi
  note "app: package + production dependencies ($(du -sh "$ctx/node_modules" | cut -f1) node_modules) in $(since "$t0")"
  rm -rf "$ctx"
}

smoke_test() {
  local ref=$1 out name t0 code
  # No network, read-only root, the pod's user: what the chart runs.
  out=$(docker run --rm --network none --read-only --user "$APP_UID:$APP_UID" --cap-drop ALL \
    --security-opt no-new-privileges "$ref" operator --help 2>&1) ||
    die "$ref does not run \`sandpit operator --help\`: $out"
  grep -q 'usage: sandpit operator' <<<"$out" || die "unexpected output of $ref operator --help: $out"
  # SIGTERM reaches node through tini: `sandpit serve` shuts down cleanly at once, not after a kill.
  name=sandpit-app-smoke-$$
  docker run -d --name "$name" --network none --read-only --user "$APP_UID:$APP_UID" --cap-drop ALL \
    "$ref" serve >/dev/null
  for _ in $(seq 100); do
    docker logs "$name" 2>&1 | grep -q 'MCP server listening' && break
    sleep 0.2
  done
  t0=$(now)
  docker stop -t 20 "$name" >/dev/null
  code=$(docker inspect --format '{{.State.ExitCode}}' "$name")
  out=$(docker logs "$name" 2>&1 | tail -n 5)
  docker rm "$name" >/dev/null
  [[ $code == 0 && $(($(now) - t0)) -lt 10000000 ]] ||
    die "$ref: \`sandpit serve\` did not stop cleanly on SIGTERM (exit $code after $(since "$t0")): $out"
}

# --- main ---------------------------------------------------------------------------------

cmd_list() {
  require_engine
  local hash="" size
  printf '%-26s %-9s %-10s %s\n' IMAGE SIZE STATE BUILD-HASH
  for ref in "$(image_ref)" "$ROOTFS_TAG"; do
    size=$(image_field "$ref" '{{.Size}}')
    if [[ -z $size ]]; then
      printf '%-26s %-9s %s\n' "$ref" - missing
    elif [[ $ref == "$ROOTFS_TAG" ]]; then
      printf '%-26s %-9s %-10s %s\n' "$ref" "$(numfmt --to=si "$size")B" "(base)" \
        "$(label_of "$ref" "$LABEL_ROOTFS_HASH" | cut -c1-12)"
    else
      require_node
      hash=$(build_hash)
      printf '%-26s %-9s %-10s %s\n' "$ref" "$(numfmt --to=si "$size")B" \
        "$([[ $(label_of "$ref" "$LABEL_BUILD_HASH") == "$hash" ]] && echo current || echo stale)" \
        "$(label_of "$ref" "$LABEL_BUILD_HASH" | cut -c1-12)"
    fi
  done
}

main() {
  local force=0 arg
  if [[ ${1:-} == __chroot-setup ]]; then
    shift
    chroot_setup "$@"
    return
  fi
  for arg in "$@"; do
    case $arg in
      -h | --help | help) usage; return 0 ;;
      --tag) image_ref; return 0 ;;
      -l | --list | list) cmd_list; return 0 ;;
      -f | --force) force=1 ;;
      *) usage >&2; die "unknown argument $arg" ;;
    esac
  done
  require_built
  require_node
  require_engine
  local t0 ref hash rkey old_final old_rootfs
  t0=$(now)
  ref=$(image_ref)
  hash=$(build_hash)
  if [[ $force == 0 && $(label_of "$ref" "$LABEL_BUILD_HASH") == "$hash" ]]; then
    log "app: $ref up to date (build-hash ${hash:0:12}, $(since "$t0"))"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "building the app image needs root (debootstrap base, chroot, mounts)"
  mkdir -p "$CACHE_DIR/logs" "$CACHE_DIR/work" "$CACHE_DIR/npm"
  exec 9>"$CACHE_DIR/.lock"
  if ! flock -n 9; then
    log "another image build is running (lock $CACHE_DIR/.lock); waiting for it"
    flock 9
  fi
  if [[ $force == 0 && $(label_of "$ref" "$LABEL_BUILD_HASH") == "$hash" ]]; then
    log "app: $ref up to date (built by another invocation)"
    return 0
  fi
  old_final=$(image_id "$ref")
  old_rootfs=""
  rkey=$(rootfs_key)
  if [[ $force == 0 && $(label_of "$ROOTFS_TAG" "$LABEL_ROOTFS_HASH") == "$rkey" ]]; then
    note "app: rootfs up to date ($ROOTFS_TAG ${rkey:0:12})"
  else
    old_rootfs=$(image_id "$ROOTFS_TAG")
    build_rootfs "$rkey"
  fi
  build_final "$hash" "$ref"
  smoke_test "$ref"
  note "app: smoke test passed (operator --help; serve stops on SIGTERM)"
  [[ -z $old_final || $old_final == "$(image_id "$ref")" ]] || remove_if_unused "$old_final" "$ref"
  [[ -z $old_rootfs || $old_rootfs == "$(image_id "$ROOTFS_TAG")" ]] || remove_if_unused "$old_rootfs" "$ROOTFS_TAG"
  log "app: built $ref ($(image_field "$ref" '{{.Size}}' | numfmt --to=si)B) in $(since "$t0")"
}

main "$@"
