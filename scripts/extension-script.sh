#!/bin/sh
# Print pgbackoff's CREATE EXTENSION script (extension/backoff--VERSION.sql)
# derived from the one committed install file, dist/backoff.sql
# (docs/adr/0031-one-install-file.md). The two differ only in their header:
# the extension's schema comes from backoff.control and CREATE EXTENSION
# pins search_path itself, so the script starts at the version table.
# `make install-extension` runs it; internal/distribution tests that its
# output is what distribution.Render(Extension) gives.
set -eu
src=${1:-dist/backoff.sql}
[ -f "$src" ] || { echo "extension-script.sh: $src: no such file" >&2; exit 1; }
printf '%s\n' \
  '-- pgbackoff extension script, generated from sql/migrations.' \
  '-- Do not edit: run `make generate` after changing sql/.' \
  '\echo Use "CREATE EXTENSION backoff" to load this file. \quit' \
  ''
sed -n '/^CREATE TABLE backoff\.schema_migrations /,$p' "$src"
