#!/usr/bin/env bash
# What TRUNCATE of a segment needs and what it does to an old snapshot.
# Runs in its own database (default: mvcc_locks) on the prototype cluster.
#   1. the locks b.maintain's truncate step takes;
#   2. an old REPEATABLE READ snapshot that never touched b.hot, after its
#      segment is truncated: what it sees;
#   3. an old snapshot that read b.hot (AccessShareLock kept to its end):
#      the truncate waits; a claim issued meanwhile waits behind it.
set -euo pipefail
export PGHOST=${PGHOST:-/tmp} PGPORT=${PGPORT:-55432} PGUSER=${PGUSER:-postgres}
DB=${DB:-mvcc_locks}
HERE=$(cd "$(dirname "$0")" && pwd)
psql -Xq -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>/dev/null
export PGDATABASE=$DB
for f in setup enqueue claim complete maintain; do psql -Xq -v ON_ERROR_STOP=1 -f "$HERE/$f.sql" >/dev/null 2>&1; done
q() { psql -X -qAt "$@"; }

echo "== 1. locks held by the truncate step, just before its COMMIT"
q -c "SELECT b.enqueue('q', 3)" >/dev/null
q <<'SQL'
UPDATE b.segments SET state = 'draining' WHERE seg = 0;
UPDATE b.segments SET state = 'current' WHERE seg = 1;
DELETE FROM b.hot;
BEGIN;
LOCK TABLE b.hot_0 IN ACCESS EXCLUSIVE MODE;
TRUNCATE b.hot_0;
SELECT '   ' || c.relname || ': ' || l.mode FROM pg_locks AS l JOIN pg_class AS c ON c.oid = l.relation
WHERE l.pid = pg_backend_pid() AND c.relnamespace = 'b'::regnamespace ORDER BY c.relname, l.mode;
COMMIT;
UPDATE b.segments SET state = 'free' WHERE seg IN (1, 2);
UPDATE b.segments SET state = 'current' WHERE seg = 0;
SQL

echo "== 2. an old snapshot that did not read b.hot, after the truncate"
q -c "TRUNCATE b.history" -c "SELECT b.enqueue('q', 5)" >/dev/null
q -c "SELECT count(*) FROM b.claim('q', 'w', 2, '5 minutes')" >/dev/null
{
    echo "BEGIN ISOLATION LEVEL REPEATABLE READ;"
    echo "SELECT 1;"
    echo "SELECT pg_sleep(3);"
    echo "SELECT '   old snapshot sees: ' || (SELECT count(*) FROM b.hot) || ' live rows in b.hot (' || (SELECT count(*) FROM b.hot_0) || ' in the truncated segment), ' || (SELECT count(*) FROM b.history) || ' in b.history';"
    echo "COMMIT;"
} | q >/tmp/mvcc-locks-2.out 2>&1 &
H=$!
sleep 1
echo "   before: 5 jobs in segment 0, 2 of them running; the old snapshot sees those 5"
q -c "SELECT b.complete_many(array_agg(h.id), array_agg(h.attempts)) FROM (SELECT * FROM b.hot WHERE status = 'running' LIMIT 1) AS h" >/dev/null
echo "   then: one of the running jobs completed (moved to b.history), the segment switched, its 4 live rows moved, the segment truncated"
q -c "CALL b.maintain(1, 2000, '1s')" 2>&1 | sed 's/^/   /'
q -c "SELECT '   a new snapshot sees: ' || (SELECT count(*) FROM b.hot) || ' live rows in b.hot, ' || (SELECT count(*) FROM b.history) || ' in b.history'"
wait $H
sed 's/^/ /' /tmp/mvcc-locks-2.out

echo "== 3. an old snapshot that read b.hot: truncate waits, claims wait behind it"
q -c "SELECT b.enqueue('q', 5)" >/dev/null
{
    echo "BEGIN ISOLATION LEVEL REPEATABLE READ;"
    echo "SELECT count(*) FROM b.hot;"
    echo "SELECT pg_sleep(6);"
    echo "COMMIT;"
} | q >/dev/null 2>&1 &
H=$!
sleep 1
( sleep 0.5; q -c '\timing on' -c "SELECT count(*) FROM b.claim('q', 'w', 1, '5 minutes')" 2>&1 | sed 's/^/   claim during the truncate attempt: /' ) &
C=$!
q -c '\timing on' -c "CALL b.maintain(1, 2000, '2s')" 2>&1 | sed 's/^/   maintain (lock_timeout 2s): /'
wait $C
q -c '\timing on' -c "SELECT count(*) FROM b.claim('q', 'w', 1, '5 minutes')" 2>&1 | sed 's/^/   claim after the attempt gave up: /'
wait $H
q -c "CALL b.maintain(1, 2000, '2s')" 2>&1 | sed 's/^/   maintain once the reader ended: /'
psql -Xq -d postgres -c "DROP DATABASE $DB"
