package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestWorkerReapsAtStart: a Worker started after a crash settles the jobs
// its predecessor stranded at once, not after its first ReapInterval.
func TestWorkerReapsAtStart(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `SELECT backoff.enqueue('crashed', p_run_at => now() - interval '2 hours')`)
	require.NoError(t, err)
	// The dead worker's claim, with a lease that ended an hour ago.
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.claim('crashed', 'w-dead', 1, '1 second', now() - interval '1 hour')`).Scan(&n))
	require.Equal(t, 1, n)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "other", Concurrency: 1, PollInterval: time.Hour, ReapInterval: time.Hour,
		Handler: func(ctx context.Context, job *Job) error { return nil },
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	startWorker(t, w)
	eventually(t, 10*time.Second, "the stranded job reaped", func() bool {
		return countStatus(t, pool, StatusRunning) == 0
	})
	var kind string
	require.NoError(t, pool.QueryRow(ctx, `SELECT errors -> -1 ->> 'kind' FROM backoff.jobs WHERE queue = 'crashed'`).Scan(&kind))
	require.Equal(t, "lease_expired", kind)
}

// TestOperatorHistoryAndStrandedWork: Overview, Stats and Workers count
// the expired leases; SwitchQueue refuses an unknown queue unless create,
// and records its changes (QueueEvents); a replay's history entry has its
// role and is decoded.
func TestOperatorHistoryAndStrandedWork(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('mail', p_run_at => now() - interval '1 hour')`).Scan(&id))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.claim('mail', 'w-dead', 1, '1 second', now() - interval '1 minute')`).Scan(&n))
	require.Equal(t, 1, n)

	ov, err := c.Overview(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), ov[0].Expired)
	st, err := c.Stats(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), st[0].Expired)
	ws, err := c.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "w-dead", ws[0].Name)
	require.Equal(t, []string{"mail"}, ws[0].Queues)
	require.Equal(t, int64(1), ws[0].Expired)

	_, err = c.PauseQueue(ctx, "nosuchqueue")
	require.ErrorIs(t, err, ErrInvalidArgument)
	changed, err := c.SwitchQueue(ctx, "nosuchqueue", true, true)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = c.PauseQueue(ctx, "mail")
	require.NoError(t, err)
	require.True(t, changed)
	st, err = c.Stats(ctx, 0)
	require.NoError(t, err)
	require.True(t, st[0].Paused)
	evs, err := c.QueueEvents(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "mail", evs[0].Queue)
	require.Equal(t, "pause", evs[0].Action)
	require.NotEmpty(t, evs[0].Role)

	_, err = c.Cancel(ctx, id, "stuck")
	require.NoError(t, err)
	_, err = c.Replay(ctx, id)
	require.NoError(t, err)
	d, err := c.Details(ctx, id)
	require.NoError(t, err)
	require.Len(t, d.Errors, 2)
	require.Equal(t, "cancelled", d.Errors[0].Kind)
	require.Equal(t, "w-dead", d.Errors[0].Worker)
	require.NotNil(t, d.Errors[0].Started)
	require.Equal(t, "replayed", d.Errors[1].Kind)
	require.Equal(t, evs[0].Role, d.Errors[1].Role)
}
