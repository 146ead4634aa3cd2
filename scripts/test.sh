#!/usr/bin/env bash
# Runs every test of the repository: installs what is missing, builds, and runs `npm test`
# (node's test runner; its summary closes the output). Exits non-zero when any test fails.
# As root: the integration tests start real daemons and containers.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The whole CI run (apt, npm ci, the guest image, build, tests) has to fit in 40 minutes; a hung test must not eat
# them silently.
TEST_TIMEOUT="${BERTH_TEST_TIMEOUT:-32m}"

[ "$(id -u)" = 0 ] || { echo "test.sh: run as root (sudo $0)" >&2; exit 1; }

./scripts/install-deps.sh

# Native addons build with node-gyp against the installed Node's headers (no header download: no internet).
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node_api.h ]; then export npm_config_nodedir=/usr; fi

started=$(date +%s)
set +e
timeout --kill-after=30s "$TEST_TIMEOUT" npm test </dev/null
status=$?
set -e
elapsed=$(( $(date +%s) - started ))
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
  echo "test.sh: the tests did not finish within $TEST_TIMEOUT and were stopped" >&2
fi
echo "test.sh: build and tests took ${elapsed}s, exit status $status"
exit "$status"
