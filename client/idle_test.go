package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// busyFor asserts that WaitIdle is still waiting when a short deadline
// ends, and that its error names the queue and status it waits for. The
// deadline bounds the test; nothing waits for a backoff.
func busyFor(t *testing.T, c *Client, queue string, status Status, queues ...string) {
	t.Helper()
	// Long enough for a first look on a loaded machine: before it answers,
	// WaitIdle knows no queue to name.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := c.WaitIdle(ctx, queues...)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `queue "`+queue+`" still has a `+string(status)+` job`)
}

func TestWaitIdleWaitsForEveryUnfinishedJob(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := newTestClient(t, pool, WithClock(clock))
	o := ops.New(pool, ops.WithClock(clock))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	require.NoError(t, c.WaitIdle(ctx), "no job at all")
	done, err := c.Enqueue(ctx, "other", nil)
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "other", 1, 0)
	require.NoError(t, err)
	_, err = c.Complete(ctx, done, jobs[0].Token)
	require.NoError(t, err)
	cancelled, err := c.Enqueue(ctx, "other", nil)
	require.NoError(t, err)
	_, err = o.Cancel(ctx, cancelled, "not needed")
	require.NoError(t, err)
	require.NoError(t, c.WaitIdle(ctx), "finished jobs leave their queue idle")

	id, err := c.Enqueue(ctx, "emails", nil, RunAt(now.Add(24*time.Hour)))
	require.NoError(t, err)
	busyFor(t, c, "emails", StatusPending)
	busyFor(t, c, "emails", StatusPending, "emails", "other")
	require.NoError(t, c.WaitIdle(ctx, "other"), "only the queues named")
	require.ErrorContains(t, c.WaitIdle(canceled(), "emails", "other"), `wait until queues "emails", "other" are idle: context canceled`)

	now = now.Add(24 * time.Hour)
	acq, err := c.Acquire(ctx, id, 0)
	require.NoError(t, err)
	busyFor(t, c, "emails", StatusRunning, "emails")
	_, err = c.Fail(ctx, id, acq.Token, "downstream 500", RetryIn(time.Hour))
	require.NoError(t, err)
	busyFor(t, c, "emails", StatusRetrying, "emails")

	// The retry an hour away: time moves on by the clock, not by sleeping.
	idle := make(chan error, 1)
	go func() { idle <- c.WaitIdle(ctx, "emails") }()
	now = now.Add(time.Hour)
	acq, err = c.Acquire(ctx, id, 0)
	require.NoError(t, err)
	select {
	case err := <-idle:
		t.Fatalf("WaitIdle returned while the job runs: %v", err)
	default:
	}
	_, err = c.Complete(ctx, id, acq.Token)
	require.NoError(t, err)
	require.NoError(t, <-idle, "returns once the last job has finished")
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// The harness's use: enqueue, run a worker, wait until it has drained the
// queue, then look at the results.
func TestWaitIdleAfterAWorkerDrainsItsQueue(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	jobs := make([]NewJob, 25)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "drain", Payload: map[string]int{"n": i}}
	}
	_, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)
	w, err := NewWorker(pool, WorkerConfig{Queue: "drain", Concurrency: 5, BatchSize: 2, ReapInterval: -1,
		Handler: func(context.Context, *Job) error { return nil }}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	startWorker(t, w)

	require.NoError(t, c.WaitIdle(ctx, "drain"))
	require.Equal(t, 25, countStatus(t, pool, StatusCompleted))
}
