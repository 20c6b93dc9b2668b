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
	eventually(t, time.Minute, "the stranded job reaped", func() bool {
		return countStatus(t, pool, StatusRunning) == 0
	})
	var kind string
	require.NoError(t, pool.QueryRow(ctx, `SELECT errors -> -1 ->> 'kind' FROM backoff.jobs WHERE queue = 'crashed'`).Scan(&kind))
	require.Equal(t, "lease_expired", kind)
}
