#!/usr/bin/env bash
# Builds the guest image of Berth's VM (kernel + initramfs) from Debian packages into a cache folder named by
# the digest of its inputs, and prints that folder. A second run with the same inputs reuses it.
#   ./scripts/build-guest-image.sh [--arch amd64|arm64] [--cache DIR] [--node FILE|debian] [--resolve-only] [--rootfs-tar] [--rebuild]
# Needs apt-get, dpkg-deb, depmod (kmod) and debian-archive-keyring (Debian or Ubuntu), root for the device node
# of the initramfs' console, and the daemon built (npm run build -w daemon). BERTH_GUEST_CACHE sets the cache
# (default ~/.cache/berth/guest), SOURCE_DATE_EPOCH the files' dates, BERTH_GUEST_MIRROR the Debian mirror.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$ROOT/daemon/dist/src/vm/guest/image.js" ]; then
  echo "build-guest-image: build the daemon first (npm run build -w daemon)" >&2
  exit 1
fi
exec node "$ROOT/daemon/dist/src/vm/guest/image.js" "$@"
