#!/usr/bin/env bash
# Makes sure a Docker engine is installed and running on this machine.
# Installs Debian's docker.io when the engine is missing; starts dockerd in the
# background when nothing answers on the socket (its data in memory when it
# can: see below). Prints the process id of the
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

# The engine's data (images, the containers' files) in memory when /dev/shm
# is a tmpfs with room (8 GB free): the test servers run in containers, and
# their CREATE DATABASE, a copy of the migrated template for every test,
# took ten times as long on the virtual disk. It stays there until a
# reboot, so the local image is built once. DOCKERD_DATA_ROOT chooses
# another place; empty, the engine's default.
data_root=${DOCKERD_DATA_ROOT-}
if [ -z "${DOCKERD_DATA_ROOT+set}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
  [ "$(df --output=avail -B1G /dev/shm 2>/dev/null | tail -1 | tr -d ' ')" -ge 8 ] 2>/dev/null; then
  data_root=/dev/shm/pgbackoff-docker
fi
args=()
[ -n "$data_root" ] && args=(--data-root "$data_root")

log=${DOCKERD_LOG:-/tmp/pgbackoff-dockerd.log}
$sudo nohup dockerd "${args[@]}" >"$log" 2>&1 &
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
