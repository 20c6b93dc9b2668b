package torture

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// checkRows: every job the row log says is there is there, once; and
// every job an acknowledged call enqueued is there, or was deleted from
// the finished partition (pruned). The log is written by a row trigger in
// the transaction that inserts or deletes the row, so its count of
// inserts less deletes is the number of rows the job must have.
func checkRows(ctx context.Context, tx pgx.Tx, acts []act) ([]string, error) {
	acked := acknowledgedEnqueues(acts)
	ids := make([]int64, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	rows, err := tx.Query(ctx, `
WITH l AS (
    SELECT job, sum(CASE op WHEN 'I' THEN 1 ELSE -1 END) AS net,
           (array_agg(op ORDER BY n DESC))[1] AS last_op,
           (array_agg(segment ORDER BY n DESC))[1] AS last_segment,
           (array_agg(status ORDER BY n DESC))[1] AS last_status,
           (array_agg(attempts ORDER BY n DESC))[1] AS last_attempts,
           max(n) AS last_n
    FROM torture.row_log GROUP BY job
), j AS (
    SELECT id, count(*) AS n FROM backoff.jobs GROUP BY id
), a AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
)
SELECT coalesce(l.job, j.id, a.id), coalesce(l.net, 0), coalesce(j.n, 0),
       l.last_op, l.last_segment, l.last_status, l.last_attempts,
       (SELECT format('segment %s was truncated %s times after that insert, the first time by a transaction at %s',
                l.last_segment, count(*), (array_agg(t.isolation ORDER BY t.n))[1])
        FROM torture.truncations AS t WHERE t.segment = l.last_segment AND t.n > l.last_n)
FROM l FULL JOIN j ON j.id = l.job FULL JOIN a ON a.id = coalesce(l.job, j.id)
WHERE coalesce(j.n, 0) <> coalesce(l.net, 0)
   OR coalesce(j.n, 0) > 1
   OR (a.id IS NOT NULL AND coalesce(j.n, 0) = 0
       AND NOT (l.last_op = 'D' AND l.last_segment = 0 AND l.last_status IN ('completed', 'dead_lettered', 'cancelled')))
ORDER BY 1`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var v []string
	for rows.Next() {
		var id, net, present int64
		var lastOp *string
		var lastSeg *int16
		var lastStatus *string
		var lastAttempts *int32
		var truncations *string
		if err := rows.Scan(&id, &net, &present, &lastOp, &lastSeg, &lastStatus, &lastAttempts, &truncations); err != nil {
			return nil, err
		}
		who := "not enqueued by an acknowledged call"
		if a, ok := acked[id]; ok {
			who = describe(a)
		}
		switch {
		case present > 1:
			v = append(v, fmt.Sprintf("job %d is in backoff.jobs %d times (%s)", id, present, who))
		case lastOp == nil:
			v = append(v, fmt.Sprintf("job %d lost: an acknowledged call returned it (%s), yet no row of it was ever inserted", id, who))
		case net > present:
			v = append(v, fmt.Sprintf("job %d lost: its row (segment %d, %s, attempts %d) was never deleted, yet it is gone: destroyed without a DELETE (%s; %s)",
				id, *lastSeg, *lastStatus, *lastAttempts, who, *truncations))
		case present == 0:
			v = append(v, fmt.Sprintf("job %d lost: its last row (segment %d, %s) was deleted without a finished copy (%s)",
				id, *lastSeg, *lastStatus, who))
		default:
			v = append(v, fmt.Sprintf("job %d has %d rows but the row log counts %d (%s)", id, present, net, who))
		}
	}
	return v, rows.Err()
}

// checkCompletions: no job completed twice, whether the calls were
// acknowledged or not: a completed job is never replayed, so it is
// inserted into the finished partition as completed once.
func checkCompletions(ctx context.Context, tx pgx.Tx, acts []act) ([]string, error) {
	rows, err := tx.Query(ctx, `
SELECT job, array_agg(attempts ORDER BY n)
FROM torture.row_log
WHERE op = 'I' AND segment = 0 AND status = 'completed'
GROUP BY job HAVING count(*) > 1 ORDER BY job`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var v []string
	for rows.Next() {
		var id int64
		var attempts []int32
		if err := rows.Scan(&id, &attempts); err != nil {
			return nil, err
		}
		v = append(v, fmt.Sprintf("job %d completed %d times, by attempts %v", id, len(attempts), attempts))
	}
	return v, rows.Err()
}

// checkDedupeKeys: each row of backoff.dedupe_keys names an unfinished job
// of its queue with its key, and each unfinished job with a key is named
// by its row. The settling calls release a key in the transaction that
// finishes its job (enqueue.sql, _take_dedupe_key.sql; _take_dedupe_key
// takes over a row whose job is finished, which only an admin's direct
// write can leave, and the torture writes none).
func checkDedupeKeys(ctx context.Context, tx pgx.Tx, _ []act) ([]string, error) {
	rows, err := tx.Query(ctx, `
SELECT format('dedupe key %L of queue %L names job %s, which %s', k.dedupe_key, k.queue, k.job_id,
              CASE WHEN j.id IS NULL THEN 'does not exist: the key is orphaned'
                   WHEN j.status NOT IN ('pending', 'running', 'retrying') THEN 'is ' || j.status
                   ELSE format('has queue %L and key %L', j.queue, j.dedupe_key) END)
FROM backoff.dedupe_keys AS k
LEFT JOIN backoff.jobs AS j ON j.id = k.job_id
WHERE j.id IS NULL OR j.status NOT IN ('pending', 'running', 'retrying')
   OR j.queue <> k.queue OR j.dedupe_key IS DISTINCT FROM k.dedupe_key
UNION ALL
SELECT format('job %s (%s) has dedupe key %L of queue %L, which backoff.dedupe_keys %s', j.id, j.status, j.dedupe_key, j.queue,
              coalesce('gives to job ' || k.job_id, 'does not hold'))
FROM backoff.jobs AS j
LEFT JOIN backoff.dedupe_keys AS k ON k.queue = j.queue AND k.dedupe_key = j.dedupe_key
WHERE j.dedupe_key IS NOT NULL AND j.status IN ('pending', 'running', 'retrying')
  AND k.job_id IS DISTINCT FROM j.id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// checkJobRules: every row keeps the rules backoff.jobs no longer
// declares as CHECK constraints, which the functions keep instead
// (docs/adr/0084).
func checkJobRules(ctx context.Context, tx pgx.Tx, _ []act) ([]string, error) {
	rows, err := tx.Query(ctx, `
SELECT format('job %s breaks the rules of a job row: segment %s, status %s, attempts %s, uncounted %s, max_attempts %s, lease %s, dead letter reason %s, queue %L',
              j.id, j.segment, j.status, j.attempts, j.uncounted_attempts, coalesce(j.max_attempts::text, 'NULL'),
              coalesce(j.lease_until::text, 'NULL'), coalesce(j.dead_letter_reason, 'NULL'), j.queue)
FROM backoff.jobs AS j
WHERE j.status NOT IN ('pending', 'running', 'retrying', 'blocked', 'completed', 'dead_lettered', 'cancelled')
   OR (j.status = 'running') <> (j.lease_until IS NOT NULL)
   OR j.attempts < 0 OR j.max_attempts < 1
   OR j.uncounted_attempts < 0 OR j.uncounted_attempts > j.attempts
   OR j.queue = ''
   OR j.dead_letter_reason NOT IN ('max_attempts', 'non_retryable', 'deadline', 'lease_expiries')
   OR (j.segment = 0) <> (j.status IN ('completed', 'dead_lettered', 'cancelled'))
ORDER BY j.id
LIMIT 20`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
