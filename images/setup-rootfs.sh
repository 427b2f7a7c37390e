#!/bin/sh
# Turns a Debian 12 root file system into a sandpit sandbox image. Runs as root INSIDE the
# image being built, by both routes, so that they produce the same contents:
#   - the Dockerfiles:   RUN sh /tmp/sandpit-setup/setup-rootfs.sh $(grep -v '^#' packages)
#   - images/build.sh:   chroot ROOTFS sh /tmp/sandpit-setup/setup-rootfs.sh PACKAGE...
#
# usage: setup-rootfs.sh PACKAGE...
# env:   SANDPIT_APT_ARCHIVES  use this directory as apt's .deb cache (offline build: a
#                              cache shared between builds; it is not emptied here)
set -eu

export DEBIAN_FRONTEND=noninteractive
apt_opts="-q -o Dpkg::Use-Pty=0"
if [ -n "${SANDPIT_APT_ARCHIVES:-}" ]; then
  # A root-owned cache shared with the host: download as root instead of _apt.
  apt_opts="$apt_opts -o Dir::Cache::Archives=$SANDPIT_APT_ARCHIVES -o APT::Sandbox::User=root"
fi

# 1. Packages. (word splitting of $apt_opts is intended)
# shellcheck disable=SC2086
apt-get $apt_opts update
if [ "$#" -gt 0 ]; then
  # shellcheck disable=SC2086
  apt-get $apt_opts install -y --no-install-recommends "$@"
fi

# 2. The sandbox user: uid/gid 1000, home /home/sandbox.
getent group sandbox >/dev/null || groupadd --gid 1000 sandbox
getent passwd sandbox >/dev/null ||
  useradd --uid 1000 --gid 1000 --home-dir /home/sandbox --create-home --shell /bin/bash sandbox
if [ "$(id -u sandbox)" != 1000 ] || [ "$(id -g sandbox)" != 1000 ]; then
  echo "setup-rootfs: user sandbox must be uid/gid 1000" >&2
  exit 1
fi

# 3. Directories: a workspace owned by the sandbox user, a sticky world-writable /tmp.
mkdir -p /workspace /tmp /usr/local/bin
chown 1000:1000 /workspace
chmod 0755 /workspace
chmod 1777 /tmp

# 4. Read-only code paths. The runner hands the program its code as a sealed memfd on fd 3;
# these root-owned links let interpreters and compilers that want a file name with the
# right extension read it, and the program cannot modify its own code through them.
mkdir -p /sandpit/code
for ext in py js sh c rs; do
  ln -sfn /proc/self/fd/3 "/sandpit/code/main.$ext"
done
chown -R 0:0 /sandpit
chmod 0755 /sandpit /sandpit/code

# 5. Python's PEP 668 marker goes: a sandbox is throwaway, so a plain `pip install x` may fall back
# to a user install under HOME (/tmp, writable) instead of failing its externally-managed check.
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED

# 6. The contract's tools must be there in every image.
for tool in sh timeout tar; do
  command -v "$tool" >/dev/null || {
    echo "setup-rootfs: $tool is missing" >&2
    exit 1
  }
done

# 7. Keep it small: no docs (copyright files stay), man pages, translations, apt lists, logs.
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
  /var/cache/debconf/*-old /var/lib/dpkg/*-old \
  /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/groff/* \
  /usr/share/lintian /usr/share/linda \
  /var/log/apt /var/log/dpkg.log /var/log/alternatives.log /var/log/bootstrap.log
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /tmp/* /root/.cache
