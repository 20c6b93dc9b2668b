#!/usr/bin/env bash
# Builds a PostgreSQL container image from this machine's own PostgreSQL
# binaries, for machines that cannot pull images from a registry.
#
# The image behaves like the official postgres image as far as the
# container start of pgserver needs: it honours POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB, runs initdb on first start, accepts a
# leading "postgres" argument and passes the rest (e.g. "-c fsync=off") to
# the server.
#
# pgserver runs it (embedded) when Docker answers but no image can be pulled:
# with --changes and --tar, and imports the tar with its container engine
# (the tests' Testcontainers, through the Docker API; the docker command for
# the demo and the benchmarks). `make pg-image` runs it by hand, and it then
# imports the image with the docker command.
#
# Usage: internal/pgserver/build-pg-image.sh [IMAGE_TAG]   (default pgbackoff/postgres:$PG_MAJOR-local, PG_MAJOR default 15)
#        internal/pgserver/build-pg-image.sh --changes     (the image's settings, one Dockerfile instruction a line)
#        internal/pgserver/build-pg-image.sh --tar         (the image's root filesystem, a tar on stdout)
set -euo pipefail

pg_major=${PG_MAJOR:-15}
pg_lib=/usr/lib/postgresql/$pg_major
pg_share=/usr/share/postgresql/$pg_major

# The image's settings, as docker import --change takes them.
changes() {
  printf '%s\n' \
    "ENV PATH=$pg_lib/bin:/usr/local/bin:/bin" \
    "ENV PGDATA=/var/lib/postgresql/data" \
    "USER postgres" \
    "EXPOSE 5432" \
    'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
    'CMD ["postgres"]'
}

mode=import
case "${1-}" in
  --changes) changes; exit 0 ;;
  --tar) mode=tar ;;
  *) tag=${1:-pgbackoff/postgres:$pg_major-local} ;;
esac

[ -x "$pg_lib/bin/postgres" ] || { echo "build-pg-image: $pg_lib/bin/postgres not found (install postgresql-$pg_major)" >&2; exit 1; }
[ $mode = tar ] || command -v docker >/dev/null || { echo "build-pg-image: docker not found" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

mkdir -p "$root"/{bin,tmp,etc,var/lib/postgresql,var/run/postgresql,usr/local/bin,usr/share}
chmod 1777 "$root/tmp"

# Server binaries and their data files.
mkdir -p "$root/usr/lib/postgresql" "$root/usr/share/postgresql"
cp -a "$pg_lib" "$root/usr/lib/postgresql/"
cp -a "$pg_share" "$root/usr/share/postgresql/"
# Debian builds against the system time zone database.
[ -d /usr/share/zoneinfo ] && cp -a /usr/share/zoneinfo "$root/usr/share/"

# Every shared library the binaries and loadable modules need, except the JIT
# provider's LLVM (PostgreSQL runs without JIT when it cannot load it).
copy_libs() {
  { ldd "$1" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while read -r lib; do
    [ -e "$root$lib" ] && continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}
for f in "$pg_lib"/bin/* "$pg_lib"/lib/*.so; do
  case "$f" in */llvmjit*.so) continue ;; esac
  copy_libs "$f"
done
# The dynamic loader itself (ldd prints it as an absolute path too, but make sure).
for ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do
  [ -e "$ld" ] && { mkdir -p "$root$(dirname "$ld")"; cp -L "$ld" "$root$ld"; }
done

cp /bin/dash "$root/bin/sh"
copy_libs /bin/dash

cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh
PASSWD
cat > "$root/etc/group" <<'GROUP'
root:x:0:
postgres:x:999:
GROUP
chown -R 999:999 "$root/var/lib/postgresql" "$root/var/run/postgresql"

# The entrypoint: dash only (the image has no cat, rm, awk or nc).
cat > "$root/usr/local/bin/docker-entrypoint.sh" <<'ENTRY'
#!/bin/sh
set -e
if [ "$1" = "postgres" ]; then shift; fi
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_PASSWORD:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile \
    --encoding=UTF8 --locale=C --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  : > /tmp/pwfile
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != "postgres" ]; then
    printf 'CREATE DATABASE "%s";\n' "$POSTGRES_DB" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
  echo "pgbackoff image: cluster initialised"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
ENTRY
chmod 755 "$root/usr/local/bin/docker-entrypoint.sh"

if [ $mode = tar ]; then
  tar -C "$root" -c .
  exit 0
fi
args=()
while IFS= read -r c; do args+=(--change "$c"); done < <(changes)
tar -C "$root" -c . | docker import "${args[@]}" - "$tag" >/dev/null
echo "built $tag"
