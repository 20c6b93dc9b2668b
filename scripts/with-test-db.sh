#!/usr/bin/env bash
# Runs a command (normally `go test ...`) with a PostgreSQL for the tests:
#   - TEST_DATABASE_URL set: the tests use that server, nothing else is done;
#   - otherwise Testcontainers starts one per test package. When no image is
#     named (BACKOFF_TEST_PG_IMAGE) and postgres:17-alpine is not present and
#     cannot be pulled, it builds pgbackoff/postgres:15-local from this
#     machine's PostgreSQL binaries and uses that.
set -euo pipefail

if [ -z "${TEST_DATABASE_URL:-}" ]; then
  export TESTCONTAINERS_RYUK_DISABLED=${TESTCONTAINERS_RYUK_DISABLED:-true}
  export TESTCONTAINERS_HOST_OVERRIDE=${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}
  if [ -z "${BACKOFF_TEST_PG_IMAGE:-}" ] && docker info >/dev/null 2>&1; then
    if docker image inspect postgres:17-alpine >/dev/null 2>&1 || timeout 20 docker pull -q postgres:17-alpine >/dev/null 2>&1; then
      export BACKOFF_TEST_PG_IMAGE=postgres:17-alpine
    elif [ -x /usr/lib/postgresql/15/bin/postgres ]; then
      local_image=pgbackoff/postgres:15-local
      docker image inspect "$local_image" >/dev/null 2>&1 || "$(dirname "$0")/build-pg-image.sh" "$local_image" >&2
      export BACKOFF_TEST_PG_IMAGE=$local_image
    fi
  fi
  echo "tests use Testcontainers with image ${BACKOFF_TEST_PG_IMAGE:-postgres:17-alpine}" >&2
else
  echo "tests use TEST_DATABASE_URL" >&2
fi
exec "$@"
