#!/usr/bin/env bash
# Installs what the engine and its tests need on Debian 12, as root, then the npm packages.
# Idempotent: a second run installs nothing new. Only Debian's apt and the npm registry are used.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_MAJOR_MIN=20

# What the daemon and its tests call on the host.
#   crun runc conmon            OCI runtimes and the per-container monitor
#   tini                        the init of containers run with --init (tini-static, mounted as /sbin/docker-init)
#   busybox-static              the root filesystem of test and first-run images (no pulls from the internet)
#   iptables nftables iproute2  bridges, veth pairs, network namespaces, NAT and port publishing; VXLAN
#                               overlays (ip, bridge fdb), swarm VIPs and the routing mesh (nft)
#   util-linux                  mount, umount, unshare, nsenter
#   docker-registry             a local registry for pull/push tests on 127.0.0.1
#   openssl ca-certificates     TLS certificates for the TCP listener tests
#   curl procps psmisc          probing the socket, reading processes in tests and scripts
#   tar xz-utils zstd bzip2     image layer formats and build contexts (xz, zstd and bzip2 are spawned to decompress)
#   build-essential python3     node-gyp, for the native addons (daemon/native)
#   git                         the repository itself
#   chromium                    the browser the end-to-end tests drive (Playwright, executablePath /usr/bin/chromium)
#   docker-compose              a real compose client (1.29, with python3-docker: the docker-py tests use it too)
#   python3-docker              docker-py, a real client the tests drive over a TCP listener (with /usr/bin/python3)
#   etcd-server                 swarm mode: each manager's daemon runs an etcd member as the cluster's store
#   qemu-system-x86             the VM path's tests boot the guest image under QEMU (TCG here)
#   kmod debian-archive-keyring the guest image build: depmod for the guest's modules, and the archive's keys
#                               that apt checks the guest's packages against
#   tcpdump                     the encrypted overlay test captures the underlay between nodes (ESP, no VXLAN)
APT_PACKAGES=(
  crun runc conmon tini busybox-static
  iptables nftables iproute2 util-linux
  docker-registry
  openssl ca-certificates curl procps psmisc
  tar xz-utils zstd bzip2
  build-essential python3 git
  chromium
  docker-compose python3-docker
  etcd-server
  qemu-system-x86 kmod debian-archive-keyring
  tcpdump
)

log() { printf '[install-deps] %s\n' "$*"; }
die() { printf '[install-deps] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (sudo $0)"
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  . /etc/os-release
  [ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ] || log "warning: made for Debian 12, this is ${PRETTY_NAME:-unknown}"
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

node_major() { command -v node >/dev/null 2>&1 && node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# Services that packages start on installation (docker-registry listens on :5000) would get in the tests' way:
# a policy-rc.d keeps them stopped while apt runs, and is removed afterwards if this script put it there.
POLICY=/usr/sbin/policy-rc.d
policy_added=0
cleanup() { if [ "$policy_added" = 1 ]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

apt_ready=0
apt_update() {
  if [ "$apt_ready" = 0 ]; then
    log "apt-get update"
    apt-get update -q -o DPkg::Lock::Timeout=300
    apt_ready=1
  fi
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do installed "$pkg" || missing+=("$pkg"); done
if [ "${#missing[@]}" -gt 0 ]; then
  apt_update
  if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY" && chmod 755 "$POLICY" && policy_added=1
  fi
  log "apt-get install ${missing[*]}"
  apt-get install "${APT_OPTS[@]}" --no-install-recommends "${missing[@]}"
else
  log "Debian packages: all present"
fi

# The docker CLI. Debian 12 has no client-only package: when `docker` is missing, take the client binary out of
# Debian's docker.io package without installing its daemon (a second dockerd would manage the host's bridges).
if ! command -v docker >/dev/null 2>&1; then
  apt_update
  tmp="$(mktemp -d)"
  # apt downloads as the unprivileged _apt user when it can write the folder.
  if id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
  log "docker CLI: extracting /usr/bin/docker from Debian's docker.io"
  (cd "$tmp" && apt-get download -q docker.io)
  dpkg-deb --fsys-tarfile "$tmp"/docker.io_*.deb | tar -x -C "$tmp" ./usr/bin/docker
  install -m 755 "$tmp/usr/bin/docker" /usr/local/bin/docker
  rm -rf "$tmp"
fi
log "docker CLI: $(docker --version)"

# Node >= 20 with npm. Debian 12's own nodejs is 18: use a Debian package only if apt offers 20 or newer.
if [ "$(node_major)" -lt "$NODE_MAJOR_MIN" ]; then
  apt_update
  candidate="$(apt-cache policy nodejs | awk '/Candidate:/ {print $2}')"
  candidate_major="$(printf '%s' "$candidate" | sed -E 's/^([0-9]+:)?([0-9]+).*/\2/')"
  if [[ "$candidate_major" =~ ^[0-9]+$ ]] && [ "$candidate_major" -ge "$NODE_MAJOR_MIN" ]; then
    log "apt-get install nodejs ($candidate)"
    apt-get install "${APT_OPTS[@]}" nodejs
  else
    die "Node.js >= $NODE_MAJOR_MIN with npm is required (found: $(command -v node >/dev/null && node --version || echo none); Debian 12 offers nodejs ${candidate:-none}). Install Node 20 and run again."
  fi
fi
command -v npm >/dev/null 2>&1 || die "npm is missing: install the npm that comes with Node $NODE_MAJOR_MIN"
log "node $(node --version), npm $(npm --version)"

# Native addons build with node-gyp against the installed Node's headers (no header download: no internet).
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node_api.h ]; then export npm_config_nodedir=/usr; fi

# npm packages, exactly as locked. Skipped when node_modules already matches the lock file, so that a second run
# does not pull the tree out from under a running build.
cd "$ROOT"
if [ "${CI:-}" = true ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  # Electron's own binary download cannot work offline; its types and builder come from npm all the same.
  ELECTRON_SKIP_BINARY_DOWNLOAD=1 npm ci --no-audit --no-fund
else
  log "npm packages: up to date with package-lock.json"
fi

# crun (the default runtime) refuses a hybrid cgroup layout whose cgroup2 mount still holds controllers; on
# these machines hugetlb is one that no v1 hierarchy took. Give each such controller a v1 hierarchy of its own,
# as systemd does for the others, so that crun runs here (runc would work either way, about twice as slowly).
UNIFIED=/sys/fs/cgroup/unified
if [ -r "$UNIFIED/cgroup.controllers" ] && [ -n "$(cat "$UNIFIED/cgroup.controllers")" ] && [ -z "$(cat "$UNIFIED/cgroup.subtree_control" 2>/dev/null)" ]; then
  for controller in $(cat "$UNIFIED/cgroup.controllers"); do
    if mkdir -p "/sys/fs/cgroup/$controller" && mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller"; then
      log "cgroup: mounted a v1 hierarchy for $controller (crun needs cgroup2 without controllers in hybrid mode)"
    else
      log "warning: could not mount a v1 hierarchy for the $controller cgroup controller: the engine will use runc"
    fi
  done
fi
