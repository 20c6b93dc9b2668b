#!/usr/bin/env bash
# What recording "last ran" costs while a snapshot is held
# (docs/adr/0079): backoff._note_maintenance writes backoff.maintenance at
# most once every 15 seconds; while a snapshot is held, no version it
# leaves can be removed, and the check every maintenance call makes (a read
# of the row) walks them. This writes VERSIONS versions (default 5760: a
# day of one write every 15 s), on a simulated clock, first with nothing
# held, then with a REPEATABLE READ transaction that has an xid held open,
# and prints the mean latency of the write, of the check alone (a call
# that writes nothing) and of a whole backoff.reap() with no job to reap.
#
# Needs pgbench and psql on PATH and a database with the schema
# (PGHOST, PGPORT, PGUSER, PGDATABASE as for psql), e.g. dist/backoff.sql.
set -euo pipefail
versions=${VERSIONS:-5760}
chunks=${CHUNKS:-4}
psql=(psql -X -q -t -A -v ON_ERROR_STOP=1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; "${psql[@]}" -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\''liveness-holder'\''" >/dev/null || true' EXIT

cat >"$tmp/write.sql" <<'SQL'
SELECT backoff._note_maintenance('reap', NULL, timestamptz '2030-01-01 00:00+00' + nextval('liveness_clock') * interval '15 seconds');
SQL
cat >"$tmp/check.sql" <<'SQL'
SELECT backoff._note_maintenance('reap', NULL, timestamptz '2030-01-01 00:00+00' + currval_clock() * interval '15 seconds');
SQL
cat >"$tmp/reap.sql" <<'SQL'
SELECT backoff.reap();
SQL

"${psql[@]}" <<'SQL'
DROP SEQUENCE IF EXISTS liveness_clock;
CREATE SEQUENCE liveness_clock;
-- The latest simulated time written, for a check that writes nothing.
CREATE OR REPLACE FUNCTION currval_clock() RETURNS bigint LANGUAGE sql STABLE
AS 'SELECT last_value FROM liveness_clock';
UPDATE backoff.maintenance SET ran_at = NULL;
VACUUM backoff.maintenance;
SQL

latency() { # script, transactions: mean latency in ms
    pgbench -n -c 1 -t "$2" -f "$1" 2>/dev/null | sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'
}
state() {
    "${psql[@]}" -c "SELECT format('%s pages, %s dead versions counted', pg_relation_size('backoff.maintenance') / 8192, n_dead_tup)
                      FROM pg_stat_user_tables WHERE relid = 'backoff.maintenance'::regclass"
}
run() { # label
    local per=$((versions / chunks)) i
    for i in $(seq 1 "$chunks"); do
        echo "$1: write, versions $(((i - 1) * per + 1))-$((i * per)): $(latency "$tmp/write.sql" "$per") ms"
    done
    echo "$1: check alone after $versions versions: $(latency "$tmp/check.sql" 2000) ms"
    echo "$1: backoff.reap() after $versions versions: $(latency "$tmp/reap.sql" 2000) ms"
    echo "$1: backoff.maintenance: $(state)"
}

run "free"

"${psql[@]}" -c "UPDATE backoff.maintenance SET ran_at = NULL" -c "VACUUM backoff.maintenance"
PGAPPNAME=liveness-holder "${psql[@]}" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT txid_current()" \
    -c "SELECT pg_sleep(86400)" >/dev/null 2>&1 &
sleep 1
run "held"
