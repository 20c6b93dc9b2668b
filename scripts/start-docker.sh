#!/usr/bin/env bash
# Makes sure a Docker engine is installed and running on this machine.
# Installs Debian's docker.io when the engine is missing; starts dockerd in the
# background when nothing answers on the socket. Prints the process id of the
# dockerd it started (nothing when one already ran), so that the caller stops
# exactly that process: `kill PID`.
set -euo pipefail

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo

if ! command -v dockerd >/dev/null 2>&1; then
  echo "start-docker: installing docker.io" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq docker.io >/dev/null
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi

log=${DOCKERD_LOG:-/tmp/pgbackoff-dockerd.log}
$sudo nohup dockerd >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    echo "$pid"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  sleep 0.5
done
echo "start-docker: dockerd did not come up; see $log" >&2
tail -20 "$log" >&2 || true
kill "$pid" 2>/dev/null || true
exit 1
