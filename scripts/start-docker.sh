#!/usr/bin/env bash
# Makes sure a Docker engine is installed and running on this machine.
# Installs Debian's docker.io when the engine is missing; starts dockerd in the
# background when nothing answers on the socket. Prints "started" when it
# started the daemon itself, so the caller knows to stop it.
set -euo pipefail

if ! command -v dockerd >/dev/null 2>&1; then
  echo "start-docker: installing docker.io" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq docker.io >/dev/null
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi

log=${DOCKERD_LOG:-/tmp/pgbackoff-dockerd.log}
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    echo started
    exit 0
  fi
  sleep 0.5
done
echo "start-docker: dockerd did not come up; see $log" >&2
tail -20 "$log" >&2 || true
exit 1
