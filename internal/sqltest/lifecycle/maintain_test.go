package lifecycle_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestMaintainRunsRoundsAtReadCommitted: backoff.maintain, what a pg_cron
// job calls where no Worker runs, reaps and rotates in rounds of their own
// at READ COMMITTED, whatever the database's default: here serializable,
// where a rotate of its own would truncate nothing. Run as a worker login.
func TestMaintainRunsRoundsAtReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	testdb.SetDefaultIsolation(t, url, "serializable")
	admin := poolOn(t, url)
	segmentJobs(t, admin, 2)
	for range 2 {
		enqueue(t, admin, "done", t0)
	}
	for _, j := range claim(t, admin, "done", "w", 2, t0) {
		exec(t, admin, `SELECT backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
	}
	require.EqualValues(t, 1, *rotate(t, admin).SwitchedFrom, "segment 1 switched from, not truncated yet")
	stranded := enqueue(t, admin, "q", t0)
	exec(t, admin, `SELECT FROM backoff.claim('q', 'crashed', 1, '1 second', now() - interval '1 hour')`)

	worker := connAtDefault(t, testdb.LoginRole(t, url, "backoff_worker"))
	var level string
	require.NoError(t, worker.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level))
	require.Equal(t, "serializable", level)
	_, err := worker.Exec(ctx, `CALL backoff.maintain(p_for => '0 seconds')`)
	require.NoError(t, err)
	require.Equal(t, "retrying", get(t, admin, stranded).Status, "the expired lease was reaped")
	require.Zero(t, scalar[int64](t, admin, `SELECT pg_relation_size('backoff.jobs_live_1')`), "segment 1 was truncated")

	// Rounds every 20 ms for 100 ms: more than one, each committed.
	_, err = worker.Exec(ctx, `CALL backoff.maintain(p_for => '100 milliseconds', p_every => '20 milliseconds')`)
	require.NoError(t, err)
	require.Equal(t, byte('I'), worker.PgConn().TxStatus())
}

// TestMaintainRefusesBadInput: the ranges of p_for and p_every, and a call
// inside a transaction block, which it cannot commit.
func TestMaintainRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connOn(t, testdb.NewURL(t))
	for _, call := range []string{
		`CALL backoff.maintain(p_for => '2 hours')`,
		`CALL backoff.maintain(p_for => '-1 second')`,
		`CALL backoff.maintain(p_for => NULL)`,
		`CALL backoff.maintain(p_every => '1 millisecond')`,
		`CALL backoff.maintain(p_every => '2 minutes')`,
	} {
		_, err := conn.Exec(ctx, call)
		requireCode(t, err, "22023")
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `CALL backoff.maintain(p_for => '0 seconds')`)
	requireCode(t, err, "2D000")
}
