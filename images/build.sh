#!/usr/bin/env bash
# Offline builder for sandpit's sandbox images: the same tags and contents as the Dockerfiles
# in this folder, made from Debian 12 packages without any container registry.
#
#   debootstrap --variant=minbase bookworm        -> cached base rootfs (once)
#   copy base + chroot setup-rootfs.sh PACKAGES   -> docker import  sandpit/rootfs:<template>
#   docker build (legacy builder, FROM that)      -> sandpit/<template>:<version>
#        COPY sandpit-runner, the template's setup.sh (RUN, when it has one), setuid/setgid bits
#        stripped, ENV, USER, WORKDIR, LABELs
#
# Every stage is keyed by a hash of its inputs, so a rebuild after only the runner source
# changed redoes just the last, small layer. See --help and images/README.md.
set -euo pipefail

IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$IMAGES_DIR/build.sh
SETUP=$IMAGES_DIR/setup-rootfs.sh
RUNNER_DIR=$IMAGES_DIR/runner
RUNNER_SRC=$RUNNER_DIR/sandpit-runner.c
SCRIPT=images/build.sh
# shellcheck source=images/lib.sh
source "$IMAGES_DIR/lib.sh"
CACHE_DIR=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/sandpit/images
SUITE=bookworm
MIRROR=${SANDPIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SANDPIT_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
LABEL_MANAGED=sandpit.dev/managed-by
LABEL_TEMPLATE=sandpit.dev/template
LABEL_BUILD_HASH=sandpit.dev/build-hash
LABEL_ROOTFS_HASH=sandpit.dev/rootfs-hash
TEMPLATES=(python python-data node bash c rust)

# Tags per template; the first is the canonical one (DESIGN §4a). python:3.11 lets the seed's
# examples run verbatim.
template_tags() {
  case $1 in
    python) echo "sandpit/python:3.11 python:3.11" ;;
    python-data) echo "sandpit/python-data:3.11" ;;
    node) echo "sandpit/node:18" ;;
    bash) echo "sandpit/bash:5" ;;
    c) echo "sandpit/c:12" ;;
    rust) echo "sandpit/rust:1" ;;
    *) return 1 ;;
  esac
}

# No setuid or setgid file stays in an image (CIS Docker Benchmark 4.8): Debian's su, passwd,
# mount and the like would grant nothing under no_new_privs, but nothing should rely on that
# alone. The last step of the final layer, after the template's own (images/Dockerfile does the same).
STRIP_SETID='find / -xdev -type f -perm /6000 -exec chmod ug-s {} +'

# Every image starts a shell by default, as the registry route's images/Dockerfile does; sandpit
# itself always runs sandpit-runner.
template_cmd() {
  echo '["bash"]'
}

usage() {
  cat <<EOF
usage: images/build.sh [--force] [--no-cache] [TEMPLATE...]
       images/build.sh --list | list

Builds the sandbox images from Debian 12 packages (no registry needed) and tags them:
  python  sandpit/python:3.11 (also python:3.11)    node  sandpit/node:18
  bash    sandpit/bash:5                            c     sandpit/c:12
  rust    sandpit/rust:1                            python-data  sandpit/python-data:3.11
With no TEMPLATE, builds all of them. An image whose build-hash label matches its inputs
(this script, setup-rootfs.sh, the template's package list and setup.sh, the runner's sources)
is skipped. Needs a running engine: scripts/docker-engine.sh up.

options:
  --force      rebuild the named images even when up to date (re-runs the package install
               on the cached base rootfs)
  --no-cache   with --force semantics, also redo the debootstrap base (downloaded .debs stay)
  --list       print the sandpit images that exist, their sizes and whether they are current
  -h, --help   this text

cache: $CACHE_DIR
  base/<hash>/rootfs   debootstrap minbase rootfs      debs/   downloaded .deb files
  runner/<hash>/       compiled sandpit-runner          logs/   output of the last builds
env: SANDPIT_DEBIAN_MIRROR (default $MIRROR),
     SANDPIT_DEBIAN_SECURITY_MIRROR (default $SECURITY_MIRROR), XDG_CACHE_HOME
EOF
}



packages_of() { grep -v -e '^#' -e '^[[:space:]]*$' "$IMAGES_DIR/$1/packages" | tr '\n' ' ' | sed 's/ $//'; }

apt_install() {
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
  log "installing $* on the host (apt)"
  [[ $(id -u) -eq 0 ]] || die "installing $* needs root"
  if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "$@" >&2; then
    log "apt-get install failed; refreshing package lists and retrying"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q update >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "$@" >&2
  fi
}

# --- keys ---------------------------------------------------------------------------------
# Cache keys hash the inputs of a stage, including the text of the functions that run it, so
# editing an unrelated part of this script does not throw away the debootstrap base.

base_key() {
  {
    echo "base $SUITE $MIRROR $SECURITY_MIRROR"
    declare -f build_base write_base_config
  } | sha
}

rootfs_key() {
  {
    base_key
    file_sha "$SETUP"
    packages_of "$1"
    declare -f build_rootfs chroot_setup
  } | sha
}

# A template's own setup step, run in its final layer (images/<template>/setup.sh), when it has one.
template_setup() { [[ -f $IMAGES_DIR/$1/setup.sh ]] && echo "$IMAGES_DIR/$1/setup.sh"; return 0; }

# The build-hash label: every input of the final image.
build_hash() {
  {
    rootfs_key "$1"
    file_sha "$SELF"
    file_sha "$(template_setup "$1")"
    runner_sha
    template_tags "$1"
    template_cmd "$1"
  } | sha
}

# --- engine -------------------------------------------------------------------------------

# up_to_date TEMPLATE HASH: every tag exists, points at one image, and carries HASH.
up_to_date() {
  local t=$1 want=$2 tag id first=""
  for tag in $(template_tags "$t"); do
    id=$(image_field "$tag" "{{.Id}} {{index .Config.Labels \"$LABEL_BUILD_HASH\"}}")
    [[ ${id#* } == "$want" ]] || return 1
    id=${id%% *}
    [[ -z $first || $first == "$id" ]] || return 1
    first=$id
  done
}


# --- stage 1: debootstrap base -----------------------------------------------------------

write_base_config() {
  local root=$1
  # The same apt sources and dpkg excludes as debian:bookworm-slim.
  rm -f "$root/etc/apt/sources.list"
  mkdir -p "$root/etc/apt/sources.list.d" "$root/etc/dpkg/dpkg.cfg.d"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$root/etc/dpkg/dpkg.cfg.d/sandpit-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  printf '#!/bin/sh\n# no services start inside an image build\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
}

# Prints the base rootfs directory, building it when it is not cached.
build_base() {
  local key dir tmp t0 logf
  key=$(base_key)
  dir=$CACHE_DIR/base/$key
  if [[ -f $dir/done && -d $dir/rootfs ]]; then
    note "base: cached debootstrap rootfs ${key:0:12}" && echo "$dir/rootfs" && return 0
  fi
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  # Ubuntu hosts have debootstrap but not Debian's archive key, which bookworm is verified with.
  [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] || apt_install debian-archive-keyring
  t0=$(now)
  logf=$CACHE_DIR/logs/base.log
  tmp=$CACHE_DIR/base/.tmp.$$
  rm -rf "$tmp" && mkdir -p "$tmp" "$CACHE_DIR/debs"
  log "base: debootstrap --variant=minbase $SUITE (log: $logf)"
  # A private mount namespace: the /proc and /sys that debootstrap mounts cannot outlive it.
  if ! unshare --mount --propagation private -- debootstrap --variant=minbase --merged-usr \
    --cache-dir="$CACHE_DIR/debs" "$SUITE" "$tmp/rootfs" "$MIRROR" >"$logf" 2>&1; then
    tail -n 20 "$logf" >&2
    rm -rf "$tmp"
    die "debootstrap failed; see $logf"
  fi
  write_base_config "$tmp/rootfs"
  # Replace any older base (other key) and publish this one atomically.
  find "$CACHE_DIR/base" -mindepth 1 -maxdepth 1 -not -name ".tmp.*" -exec rm -rf {} +
  mv "$tmp" "$dir"
  touch "$dir/done"
  note "base: done in $(since "$t0")"
  echo "$dir/rootfs"
}

# --- stage 2: per-template rootfs ---------------------------------------------------------

# Runs inside `unshare --mount`: mounts /proc, a minimal /dev and the shared .deb cache into
# ROOT, then runs setup-rootfs.sh in the chroot. The mounts vanish with the namespace.
chroot_setup() {
  local root=$1 debs=$2
  shift 2
  mount -t proc proc "$root/proc"
  mount -t tmpfs -o mode=0755,nosuid devtmp "$root/dev"
  local spec name
  for spec in null:3 zero:5 full:7 random:8 urandom:9; do
    name=${spec%%:*}
    mknod -m 0666 "$root/dev/$name" c 1 "${spec##*:}"
  done
  mknod -m 0666 "$root/dev/tty" c 5 0
  ln -s /proc/self/fd "$root/dev/fd"
  mkdir -p "$root/dev/pts" "$root/dev/shm" "$root/var/cache/sandpit-debs" "$debs/partial"
  mount --bind "$debs" "$root/var/cache/sandpit-debs"
  chroot "$root" /usr/bin/env -i \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 SANDPIT_APT_ARCHIVES=/var/cache/sandpit-debs \
    sh /tmp/sandpit-setup/setup-rootfs.sh "$@"
}

build_rootfs() {
  local t=$1 key=$2 base=$3 work t0 logf old_id
  local -a pkgs
  read -r -a pkgs <<<"$(packages_of "$t")"
  t0=$(now)
  logf=$CACHE_DIR/logs/$t.log
  work=$CACHE_DIR/work/$t.$$
  rm -rf "$work" && mkdir -p "$work"
  log "$t: rootfs: base + apt-get install ${pkgs[*]} (log: $logf)"
  cp -a "$base" "$work/rootfs"
  mkdir -p "$work/rootfs/tmp/sandpit-setup"
  cp "$SETUP" "$work/rootfs/tmp/sandpit-setup/setup-rootfs.sh"
  cat /etc/resolv.conf >"$work/rootfs/etc/resolv.conf"  # apt inside the chroot downloads
  if ! unshare --mount --propagation private -- "$BASH" "$SELF" __chroot-setup \
    "$work/rootfs" "$CACHE_DIR/debs" "${pkgs[@]}" >"$logf" 2>&1; then
    tail -n 20 "$logf" >&2
    rm -rf "$work"
    die "$t: package install failed; see $logf"
  fi
  note "$t: packages installed in $(since "$t0")"
  # Files the engine provides at run time stay empty; /dev is the engine's too.
  local root=$work/rootfs
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  rm -rf "$root/tmp/sandpit-setup" "$root/var/cache/sandpit-debs"
  find "$root/dev" "$root/proc" "$root/sys" -mindepth 1 -delete 2>/dev/null || true
  old_id=$(image_id "sandpit/rootfs:$t")
  t0=$(now)
  tar --numeric-owner -C "$root" -cf - . |
    docker import \
      --change "LABEL $LABEL_MANAGED=sandpit $LABEL_ROOTFS_HASH=$key" \
      - "sandpit/rootfs:$t" >/dev/null
  note "$t: imported sandpit/rootfs:$t ($(du -sh "$root" | cut -f1)) in $(since "$t0")"
  rm -rf "$work"
  echo "$old_id"
}

# --- stage 3: the runner and the final layer ---------------------------------------------

# Every source file of the runner (runner/*.c, runner/*.h) and its preloaders (runner/preload/*),
# names and contents, as one hash.
runner_sha() {
  [[ -f $RUNNER_SRC ]] || { echo absent; return 0; }
  local f
  for f in "$RUNNER_DIR"/*.c "$RUNNER_DIR"/*.h "$RUNNER_DIR"/preload/*; do
    [[ -f $f ]] || continue
    echo "${f##*/} $(file_sha "$f")"
  done | sha
}

# Prints the path of the compiled runner, or nothing when its source does not exist yet.
build_runner() {
  [[ -f $RUNNER_SRC ]] || return 0
  local key dir
  key=$(runner_sha)
  dir=$CACHE_DIR/runner/$key
  if [[ ! -x $dir/sandpit-runner ]]; then
    if ! command -v gcc >/dev/null 2>&1 || ! dpkg -s libc6-dev >/dev/null 2>&1; then
      apt_install gcc libc6-dev
    fi
    log "runner: gcc -static -O2 runner/*.c"
    rm -rf "$dir" && mkdir -p "$dir"
    gcc -static -O2 -o "$dir/sandpit-runner.tmp" "$RUNNER_DIR"/*.c >&2 ||
      die "compiling $RUNNER_DIR/*.c failed"
    mv "$dir/sandpit-runner.tmp" "$dir/sandpit-runner"
  fi
  echo "$dir/sandpit-runner"
}

build_final() {
  local t=$1 hash=$2 runner=$3 ctx t0 tag
  local -a tag_args=()
  t0=$(now)
  ctx=$CACHE_DIR/work/final-$t.$$
  rm -rf "$ctx" && mkdir -p "$ctx"
  {
    echo "FROM sandpit/rootfs:$t"
    if [[ -n $runner ]]; then
      cp "$runner" "$ctx/sandpit-runner"
      cp -r "$RUNNER_DIR/preload" "$ctx/preload"
      echo "COPY sandpit-runner /usr/local/bin/sandpit-runner"
      echo "COPY preload/ /usr/local/lib/sandpit/preload/"
    fi
    if [[ -n $(template_setup "$t") ]]; then
      cp "$(template_setup "$t")" "$ctx/setup.sh"
      echo "COPY setup.sh /tmp/sandpit-setup/setup.sh"
      echo "RUN sh /tmp/sandpit-setup/setup.sh && rm -rf /tmp/sandpit-setup"
    fi
    echo "RUN $STRIP_SETID"
    echo "ENV LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/sandbox"
    echo "WORKDIR /workspace"
    echo "USER 1000:1000"
    echo "CMD $(template_cmd "$t")"
  } >"$ctx/Dockerfile"
  for tag in $(template_tags "$t"); do tag_args+=(-t "$tag"); done
  # The legacy builder: it works against any engine, offline, from a local FROM image.
  if ! DOCKER_BUILDKIT=0 docker build -q --force-rm \
    --label "$LABEL_MANAGED=sandpit" --label "$LABEL_TEMPLATE=$t" \
    --label "$LABEL_BUILD_HASH=$hash" "${tag_args[@]}" "$ctx" \
    >"$CACHE_DIR/logs/$t.final.log" 2>&1; then
    cat "$CACHE_DIR/logs/$t.final.log" >&2
    rm -rf "$ctx"
    die "$t: docker build of the final layer failed"
  fi
  rm -rf "$ctx"
  note "$t: final layer ($( [[ -n $runner ]] && echo "with sandpit-runner" || echo "no runner source yet")) in $(since "$t0")"
}

build_template() {
  local t=$1 hash=$2 rkey t0 old_final old_rootfs="" runner base
  t0=$(now)
  rkey=$(rootfs_key "$t")
  old_final=$(image_id "$(template_tags "$t" | cut -d' ' -f1)")
  if [[ $FORCE == 0 && $(label_of "sandpit/rootfs:$t" "$LABEL_ROOTFS_HASH") == "$rkey" ]]; then
    note "$t: rootfs up to date (sandpit/rootfs:$t ${rkey:0:12})"
  else
    base=$(build_base)
    old_rootfs=$(build_rootfs "$t" "$rkey" "$base")
  fi
  runner=$(build_runner)
  build_final "$t" "$hash" "$runner"
  [[ -z $old_final || $old_final == "$(image_id "$(template_tags "$t" | cut -d' ' -f1)")" ]] ||
    remove_if_unused "$old_final" "$t"
  remove_if_unused "$old_rootfs" "sandpit/rootfs:$t"
  log "$t: built $(template_tags "$t") ($(image_field "$(template_tags "$t" | cut -d' ' -f1)" '{{.Size}}' | numfmt --to=si)B) in $(since "$t0")"
}

# --- list ---------------------------------------------------------------------------------

cmd_list() {
  require_engine
  local t tag size hash state
  printf '%-22s %-9s %-10s %s\n' IMAGE SIZE STATE BUILD-HASH
  for t in "${TEMPLATES[@]}"; do
    for tag in $(template_tags "$t"); do
      size=$(image_field "$tag" '{{.Size}}')
      hash=$(label_of "$tag" "$LABEL_BUILD_HASH")
      if [[ -z $size ]]; then state=missing size=-
      elif [[ $hash == "$(build_hash "$t")" ]]; then state=current
      else state=stale
      fi
      [[ $size == - ]] || size=$(numfmt --to=si "$size")B
      printf '%-22s %-9s %-10s %s\n' "$tag" "$size" "$state" "${hash:0:12}"
    done
  done
  for t in "${TEMPLATES[@]}"; do
    size=$(image_field "sandpit/rootfs:$t" '{{.Size}}')
    [[ -z $size ]] || printf '%-22s %-9s %-10s %s\n' "sandpit/rootfs:$t" "$(numfmt --to=si "$size")B" \
      "(base)" "$(label_of "sandpit/rootfs:$t" "$LABEL_ROOTFS_HASH" | cut -c1-12)"
  done
  if [[ -d $CACHE_DIR ]]; then
    echo "cache: $CACHE_DIR ($(du -sh "$CACHE_DIR" 2>/dev/null | cut -f1))"
  fi
}

# --- main ---------------------------------------------------------------------------------

FORCE=0
NO_CACHE=0

main() {
  case ${1:-} in
    __chroot-setup) shift; chroot_setup "$@"; return ;;
    # For images/build-app.sh, which holds $CACHE_DIR/.lock while it calls __base.
    __base-key) base_key; return ;;
    __base) mkdir -p "$CACHE_DIR/logs" "$CACHE_DIR/base" "$CACHE_DIR/debs"; build_base; return ;;
  esac
  local -a wanted=()
  local arg
  for arg in "$@"; do
    case $arg in
      -h | --help | help) usage; return 0 ;;
      -l | --list | list) cmd_list; return 0 ;;
      -f | --force) FORCE=1 ;;
      --no-cache) FORCE=1 NO_CACHE=1 ;;
      -*) usage >&2; die "unknown option $arg" ;;
      *)
        template_tags "$arg" >/dev/null ||
          die "unknown template '$arg' (known: ${TEMPLATES[*]}). Other images, e.g. node:20, cannot be built offline: build images/Dockerfile (--build-arg TEMPLATE=…) or pull them where a registry is reachable"
        wanted+=("$arg")
        ;;
    esac
  done
  [[ ${#wanted[@]} -gt 0 ]] || wanted=("${TEMPLATES[@]}")
  require_engine

  # Fast path without the lock: nothing to do.
  local t t0 hash
  local -a todo=()
  t0=$(now)
  for t in "${wanted[@]}"; do
    hash=$(build_hash "$t")
    if [[ $FORCE == 0 ]] && up_to_date "$t" "$hash"; then
      note "$t: up to date ($(template_tags "$t"), build-hash ${hash:0:12})"
    else
      todo+=("$t")
    fi
  done
  if [[ ${#todo[@]} -eq 0 ]]; then
    log "all ${#wanted[@]} image(s) up to date ($(since "$t0"))"
    return 0
  fi

  [[ $(id -u) -eq 0 ]] || die "building images needs root (debootstrap, chroot, mounts)"
  mkdir -p "$CACHE_DIR/logs" "$CACHE_DIR/work" "$CACHE_DIR/base" "$CACHE_DIR/debs"
  exec 9>"$CACHE_DIR/.lock"
  if ! flock -n 9; then
    log "another images/build.sh is running (lock $CACHE_DIR/.lock); waiting for it"
    flock 9
  fi
  # Leftovers of an interrupted build (ours only: we hold the lock).
  rm -rf "$CACHE_DIR/work" "$CACHE_DIR/base"/.tmp.* && mkdir -p "$CACHE_DIR/work"
  if [[ $NO_CACHE == 1 ]]; then
    log "--no-cache: dropping the cached base rootfs"
    find "$CACHE_DIR/base" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
  fi

  t0=$(now)
  local -a built=()
  for t in "${todo[@]}"; do
    hash=$(build_hash "$t")
    # Another invocation may have built it while we waited for the lock.
    if [[ $FORCE == 0 ]] && up_to_date "$t" "$hash"; then
      note "$t: up to date (built by another invocation)"
      continue
    fi
    build_template "$t" "$hash"
    built+=("$t")
  done
  if [[ ${#built[@]} -gt 0 ]]; then
    log "built ${built[*]} in $(since "$t0")"
  else
    log "nothing left to build"
  fi
}

main "$@"
