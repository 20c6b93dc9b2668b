package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// settledRow is what a failed attempt's settlement decides and records,
// as text so that every value compares exactly.
type settledRow struct {
	ID     int64
	Fields string
}

const settledSQL = `SELECT id, concat_ws('|', status, run_at, dead_letter_reason, completed_at, last_failed_at,
		lease_until, locked_by, attempts, jsonb_array_length(errors),
		errors->-1->>'attempt', errors->-1->>'at', errors->-1->>'worker')
	FROM backoff.jobs ORDER BY id`

func settled(t *testing.T, tx pgx.Tx) []settledRow {
	t.Helper()
	rows, err := tx.Query(context.Background(), settledSQL)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (settledRow, error) {
		var s settledRow
		err := r.Scan(&s.ID, &s.Fields)
		return s, err
	})
	require.NoError(t, err)
	return out
}

// TestReapDecidesAsFailOverManyRows reaps thousands of expired leases with
// mixed policies (each strategy and jitter, a queue's policy, a deleted
// policy falling back, job-level max_attempts) and mixed outcomes (retry,
// max_attempts, deadline) in batches that span policies, and compares every
// row with what fail decides for the same attempt at the same time: reap is
// set-based, but the decision must be fail's, row for row.
func TestReapDecidesAsFailOverManyRows(t *testing.T) {
	t.Parallel()
	const n = 3000
	db := newDB(t)
	ctx := context.Background()
	exec(t, db, `INSERT INTO backoff.policies (name, strategy, base, multiplier, exponent, schedule, max_delay, jitter, jitter_ratio, max_attempts, lease, deadline) VALUES
		('rb_exp',   'exponential', '1 second',  2, 2, '{}', '60 seconds', 'proportional', 0.1, 4, '30 seconds', '2 minutes'),
		('rb_sched', 'schedule',    '1 second',  2, 2, '{1 second, 30 seconds, 5 minutes}', '1 hour', 'full', 0.1, 6, '30 seconds', '10 minutes'),
		('rb_fixed', 'fixed',       '10 seconds', 2, 2, '{}', '60 seconds', 'equal', 0.1, 3, '30 seconds', NULL),
		('rb_poly',  'polynomial',  '2 seconds', 2, 3, '{}', '1 hour', 'none', 0.1, 10, '30 seconds', '1 hour')`)
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('rb_q', 'rb_fixed')`)
	now := at(time.Hour)
	// Running jobs whose lease expired a second before now; attempts 1..7,
	// created 0..12 minutes before now, every sixth with no policy (the
	// queue's, or 'default' for rb_none) and every sixth with a policy that
	// no longer exists.
	exec(t, db, `INSERT INTO backoff.jobs (queue, payload, policy, status, attempts, max_attempts, run_at, created_at,
			lease_until, locked_by, last_attempted_at)
		SELECT CASE WHEN g % 2 = 0 THEN 'rb_q' ELSE 'rb_none' END, '{}',
			(ARRAY['rb_exp', 'rb_sched', 'rb_fixed', 'rb_poly', NULL, 'rb_gone'])[1 + g % 6],
			'running', 1 + g % 7, CASE WHEN g % 11 = 0 THEN 2 END,
			$1::timestamptz - interval '20 minutes', $1::timestamptz - (g % 13) * interval '1 minute',
			$1::timestamptz - interval '1 second', 'worker-' || (g % 5), $1::timestamptz - interval '31 seconds'
		FROM generate_series(1, $2) AS g`, now, n)

	// Reap, in batches that each span several policies.
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	total := 0
	for {
		k := scalar[int](t, tx, `SELECT backoff.reap($1, 700)`, now)
		if k == 0 {
			break
		}
		total += k
	}
	require.Equal(t, n, total)
	reaped := settled(t, tx)
	var outcomes map[string]int
	require.NoError(t, tx.QueryRow(ctx, `SELECT jsonb_object_agg(o, c) FROM (
			SELECT coalesce(dead_letter_reason, status) AS o, count(*) AS c FROM backoff.jobs GROUP BY 1) AS x`).Scan(&outcomes))
	require.Equal(t, 0, scalar[int](t, tx, `SELECT count(*) FROM backoff.jobs
		WHERE last_error <> 'lease expired' OR errors->-1->>'kind' <> 'lease_expired'`))
	require.NoError(t, tx.Rollback(ctx))
	t.Logf("outcomes: %v", outcomes)
	for _, o := range []string{"retrying", "max_attempts", "deadline"} {
		require.Greater(t, outcomes[o], 100, "outcome %s is exercised", o)
	}

	// The same attempts failed one by one, retryable, no requested delay.
	tx, err = db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.Equal(t, n, scalar[int](t, tx, `SELECT count(f.id) FROM backoff.jobs AS j,
			LATERAL backoff.fail(j.id, j.attempts, 'lease expired', NULL, true, $1) AS f`, now))
	failed := settled(t, tx)

	require.Len(t, failed, n)
	for i := range reaped {
		require.Equal(t, failed[i], reaped[i], "job %d: reap and fail decide alike", failed[i].ID)
	}
}
