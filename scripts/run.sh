#!/usr/bin/env bash
# Runs the engine on this machine: installs what is missing, builds, starts daemon/bin/berthd on
# unix:///var/run/engine.sock (or the first unix:// socket given with -H), loads a busybox image made from
# Debian's busybox-static when the engine has none, and prints the DOCKER_HOST line for the docker CLI.
#
#   ./scripts/run.sh [--detach] [berthd flags...]
#
# In the foreground Ctrl-C stops the daemon (containers keep running under conmon, as with dockerd).
# With --detach the daemon keeps running in the background, logging to /var/log/berthd.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

detach=0
args=()
socket=/var/run/engine.sock
exec_root=/run/berth
while [ $# -gt 0 ]; do
  case "$1" in
    --detach|-d) detach=1 ;;
    -H|--host)
      args+=("$1" "${2:?$1 needs an address}")
      case "$2" in unix://*) [ "$socket" = /var/run/engine.sock ] && socket="${2#unix://}" ;; esac
      shift ;;
    --exec-root)
      args+=("$1" "${2:?$1 needs a folder}")
      exec_root="$2"
      shift ;;
    --exec-root=*)
      args+=("$1")
      exec_root="${1#*=}" ;;
    -H=*|--host=*)
      args+=("$1")
      value="${1#*=}"
      case "$value" in unix://*) socket="${value#unix://}" ;; esac ;;
    *) args+=("$1") ;;
  esac
  shift
done
host="unix://$socket"

[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (sudo $0): the engine mounts filesystems and creates namespaces" >&2; exit 1; }

./scripts/install-deps.sh

# Native addons build with node-gyp against the installed Node's headers (no header download: no internet).
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node_api.h ]; then export npm_config_nodedir=/usr; fi
echo "[run] npm run build"
npm run build --silent

ping() { curl -sf --max-time 2 --unix-socket "$socket" http://localhost/_ping >/dev/null 2>&1; }

if ping; then
  echo "[run] an engine already answers on $host: not starting another one" >&2
  pid=""
else
  # The flags the user gave come last, so that they win over the default socket.
  [ "${#args[@]}" -gt 0 ] && printf '%s\n' "${args[@]}" | grep -qE '^(-H|--host)' || args=(-H "$host" "${args[@]}")
  # Where a display exists, the UI comes too: berthd serves it on 127.0.0.1 and prints its address with the
  # access token on its terminal, and writes it to <exec-root>/ui-url (root only; never to the log).
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && ! printf '%s\n' "${args[@]}" | grep -qE '^--ui'; then args+=(--ui); fi
  if [ "$detach" = 1 ]; then
    setsid "$ROOT/daemon/bin/berthd" "${args[@]}" </dev/null >>/var/log/berthd.log 2>&1 &
    pid=$!
    echo "[run] berthd started in the background (pid $pid), logging to /var/log/berthd.log"
  else
    "$ROOT/daemon/bin/berthd" "${args[@]}" </dev/null &
    pid=$!
    trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
  fi
  for _ in $(seq 1 200); do
    ping && break
    kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; echo "[run] berthd exited during start" >&2; exit 1; }
    sleep 0.1
  done
  ping || { echo "[run] berthd did not answer on $host within 20 s" >&2; kill -TERM "$pid" 2>/dev/null || true; exit 1; }
fi

# A first image without the internet: busybox:latest built from /bin/busybox.
if ! curl -sf --unix-socket "$socket" http://localhost/images/busybox:latest/json >/dev/null 2>&1; then
  tarball="$(mktemp /tmp/busybox-image.XXXXXX.tar)"
  node daemon/dist/src/tools/busybox-image.js "$tarball" --tag busybox:latest
  if DOCKER_HOST="$host" docker load -i "$tarball"; then
    echo "[run] loaded busybox:latest"
  else
    echo "[run] warning: could not load the busybox image (docker load failed); the engine keeps running" >&2
  fi
  rm -f "$tarball"
fi

# The daemon prints the UI's address on its own terminal only: in the background (or without a terminal),
# it comes from the file the daemon wrote.
# An engine that was already running is asked the same way.
if [ -z "${pid:-}" ] || [ "$detach" = 1 ] || [ ! -t 1 ]; then
  if [ -n "${pid:-}" ] && printf '%s\n' "${args[@]}" | grep -qE '^--ui'; then
    for _ in $(seq 1 50); do [ -s "$exec_root/ui-url" ] && break; sleep 0.1; done
  fi
  if [ -s "$exec_root/ui-url" ]; then
    echo "[run] open the UI in a browser: $(cat "$exec_root/ui-url")"
  fi
fi

echo
echo "The engine answers on $host. Point the docker CLI at it with:"
echo
echo "export DOCKER_HOST=$host"
echo

if [ -n "${pid:-}" ] && [ "$detach" = 0 ]; then
  echo "[run] berthd runs in the foreground (pid $pid); Ctrl-C stops it."
  set +e
  # `wait` also returns when a trapped signal arrives: keep waiting until the daemon has really ended.
  while :; do
    wait "$pid"
    status=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  exit "$status"
fi
