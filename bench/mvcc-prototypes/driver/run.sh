#!/usr/bin/env bash
# Runs one candidate under the measured load and prints one line per
# interval: completed/s, backlog, dead tuples, size, WAL.
#
#   run.sh DIR SCHEMA MODE [SECONDS] [INTERVAL]
#
# DIR     the candidate's folder (setup.sql, enqueue.sql, claim.sql,
#         complete.sql, maintain.sql; work.pgbench if it has its own worker)
# MODE    free      nothing else runs
#         held      BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; kept open
#         heldxid   the same, and it writes a row first (it has an xid)
#         heldread  the same, and it reads the candidate's live jobs first
#                   ($HELD_READ, e.g. SELECT count(*) FROM b.hot), so it
#                   holds AccessShareLock on them
# Environment: PGHOST/PGPORT/PGUSER (default /tmp, 55432, postgres),
# RATE (producer calls/s, 20 jobs each; default 100 = 2,000 jobs/s),
# WORKERS (default 4), MAINT_EVERY (seconds between maintain calls, default
# 2), MAINT_ARGS (arguments of the maintain call, default none), SEED (jobs
# enqueued before the run starts, default 0), OUT (log folder, default
# /tmp/mvcc-proto-runs).
set -euo pipefail
DIR=$1 S=$2 MODE=$3 DUR=${4:-90} IVL=${5:-15}
export PGHOST=${PGHOST:-/tmp} PGPORT=${PGPORT:-55432} PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
RATE=${RATE:-100} WORKERS=${WORKERS:-4} MAINT_EVERY=${MAINT_EVERY:-2} SEED=${SEED:-0} MAINT_ARGS=${MAINT_ARGS:-}
PGBENCH=${PGBENCH:-/usr/lib/postgresql/15/bin/pgbench}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/mvcc-proto-runs}/$S-$MODE-$(date +%H%M%S)
mkdir -p "$OUT"
q() { psql -X -v ON_ERROR_STOP=1 -qAt -F ' ' "$@"; }

for f in setup enqueue claim complete maintain; do q -f "$DIR/$f.sql" >/dev/null; done
q -c "CREATE TABLE IF NOT EXISTS public.held_scratch (x int)"
sed "s/@S@/$S/g" "$HERE/enqueue.pgbench" >"$OUT/enqueue.pgbench"
if [ -f "$DIR/work.pgbench" ]; then W="$DIR/work.pgbench"; else W="$HERE/work.pgbench"; fi
sed "s/@S@/$S/g" "$W" >"$OUT/work.pgbench"
if [ "$SEED" -gt 0 ]; then q -c "SELECT $S.enqueue('q', $SEED)" >/dev/null; fi
q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null

HELD_PID=
if [ "$MODE" != free ]; then
    case $MODE in
        held) FIRST="SELECT 1;" ;;
        heldxid) FIRST="INSERT INTO public.held_scratch VALUES (1);" ;;
        heldread) FIRST="${HELD_READ:?set HELD_READ for heldread};" ;;
    esac
    PGAPPNAME=mvcc-proto-held psql -X -q >"$OUT/held.log" 2>&1 <<SQL &
BEGIN ISOLATION LEVEL REPEATABLE READ;
$FIRST
SELECT pg_sleep($DUR + 600);
SQL
    HELD_PID=$!
    sleep 1
fi

LSN0=$(q -c "SELECT pg_current_wal_lsn()")
T0=$(date +%s)
( while sleep "$MAINT_EVERY"; do
      q -c '\timing on' -c "CALL $S.maintain($MAINT_ARGS)" 2>&1 | sed "s/^/$(date +%T) /"
  done ) >"$OUT/maintain.log" 2>&1 &
MAINT_PID=$!
"$PGBENCH" -n -M prepared -c 2 -j 1 -R "$RATE" -T "$DUR" -f "$OUT/enqueue.pgbench" >"$OUT/enqueue.out" 2>&1 &
ENQ_PID=$!
"$PGBENCH" -n -M prepared -c "$WORKERS" -j 1 -T "$DUR" -D k=0 -f "$OUT/work.pgbench" >"$OUT/work.out" 2>&1 &
WORK_PID=$!

echo "# $S $MODE ${DUR}s rate=$((RATE * 20))/s workers=$WORKERS seed=$SEED maintain($MAINT_ARGS) ($OUT)"
echo "# t completed/s backlog dead_tuples size_MB"
SINCE=$(q -c "SELECT now()")
for ((t = IVL; t <= DUR; t += IVL)); do
    sleep $((T0 + t - $(date +%s)))
    NOW=$(q -c "SELECT now()")
    q -c "SELECT $t, round($S.completed_since('q', '$SINCE') / extract(epoch FROM '$NOW'::timestamptz - '$SINCE'))::int,
                 $S.backlog('q'),
                 (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = '$S'),
                 (SELECT round(sum(pg_total_relation_size(relid)) / 1048576.0, 1) FROM pg_stat_user_tables WHERE schemaname = '$S')"
    SINCE=$NOW
done
wait "$ENQ_PID" "$WORK_PID" || true
kill "$MAINT_PID" 2>/dev/null || true
wait "$MAINT_PID" 2>/dev/null || true
LSN1=$(q -c "SELECT pg_current_wal_lsn()")
if [ -n "$HELD_PID" ]; then
    q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'mvcc-proto-held'" >/dev/null
    wait "$HELD_PID" 2>/dev/null || true
fi
CALLS=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$OUT/enqueue.out")
read -r ENQ DONE LIVE DISTINCT < <(q -c "SELECT * FROM $S.counts()")
echo "# producer calls $CALLS x 20 + seed $SEED = $((CALLS * 20 + SEED)) offered; in tables: $ENQ enqueued = $DONE completed + $LIVE live ($DISTINCT distinct ids)"
q -c "SELECT '# WAL ' || pg_size_pretty(pg_wal_lsn_diff('$LSN1', '$LSN0')) || ', ' || round(pg_wal_lsn_diff('$LSN1', '$LSN0') / greatest($DONE, 1)) || ' bytes per completed job'"
grep -h "latency average\|^tps" "$OUT/work.out" | sed 's/^/# work: /'
grep -ch "^.* Time:" "$OUT/maintain.log" | sed 's/^/# maintain calls: /'
