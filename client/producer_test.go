package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// A trickle on a queue without controls: a registered producer woken by a
// notification claims once, and that claim, short, is the whole look: no
// second claim that finds nothing, no queue_state read after it
// (docs/adr/0051). Each batch is one transaction, so one notification;
// the poll is an hour away.
func TestWorkerTrickleClaimsOncePerWakeUp(t *testing.T) {
	t.Parallel()
	pool, cc := countingPool(t, testdb.NewURL(t))
	c := newTestClient(t, pool)
	ctx := context.Background()
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "trickle", Concurrency: 10, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error { return nil },
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	startWorker(t, w)
	registered := func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = $1)
			+ (SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'trickle' AND expires_at > now())`,
			"LISTEN "+NotifyChannel).Scan(&n))
		return n == 2
	}
	eventually(t, time.Minute, "listening and registered as waiting", registered)
	enqueue := func(k int) {
		jobs := make([]NewJob, k)
		for j := range jobs {
			jobs[j] = NewJob{Queue: "trickle"}
		}
		_, err := c.EnqueueMany(ctx, jobs)
		require.NoError(t, err)
	}
	// A first job, so that the start-up's looks (and the wake-up of LISTEN
	// taking effect) are over before counting.
	enqueue(1)
	eventually(t, time.Minute, "first job completed", func() bool { return countStatus(t, pool, StatusCompleted) == 1 })

	const batches, size = 10, 3
	claims, states := cc.claims.Load(), cc.states.Load()
	for i := range batches {
		enqueue(size)
		eventually(t, time.Minute, "batch completed", func() bool { return countStatus(t, pool, StatusCompleted) == 1+(i+1)*size })
	}
	claims, states = cc.claims.Load()-claims, cc.states.Load()-states
	t.Logf("%d batches: %d claims, %d queue_state reads", batches, claims, states)
	// One claim per batch; one more (and its state read) at most, for a
	// wake-up of the start-up still pending.
	require.LessOrEqual(t, claims, int64(batches+1), "claims that found nothing after a short claim")
	require.LessOrEqual(t, states, int64(1), "state reads after claims that found nothing")
	require.True(t, registered(), "the trickle ended the registration")
	requireNoneRunning(t, pool)
}

// A short claim on a rate-limited queue is not a drained queue: the
// producer must claim again (and read the state) rather than wait for a
// notification that will not come. One transaction of 6 jobs, one
// notification, a burst of 2, an hour's poll: after the claim of 2 the
// producer goes on claiming by itself. (Whether every job then runs at
// the rate is TestWorkerHonoursARateLimit's.)
func TestWorkerShortClaimOfARateLimitedQueueGoesOn(t *testing.T) {
	t.Parallel()
	pool, cc := countingPool(t, testdb.NewURL(t))
	c := newTestClient(t, pool)
	ctx := context.Background()
	setControls(t, pool, "limited", "rate = 1, burst = 2")
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "limited", Concurrency: 10, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error { return nil },
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "registered as waiting", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'limited'").Scan(&n))
		return n == 1
	})
	claims, states := cc.claims.Load(), cc.states.Load()
	jobs := make([]NewJob, 6)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "limited"}
	}
	_, err = c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)
	eventually(t, time.Minute, "the burst's 2 jobs completed", func() bool { return countStatus(t, pool, StatusCompleted) >= 2 })
	eventually(t, time.Minute, "a claim and a state read after the short claim", func() bool {
		return cc.claims.Load()-claims >= 2 && cc.states.Load()-states >= 1
	})
	// A token comes every second, so the Worker may hold a job it just
	// claimed: stopped, it settles what it holds.
	stop()
	requireNoneRunning(t, pool)
}

// A token that arrives between a claim that found none and the state read
// after it must not leave a rate-limited queue waiting for the poll: the
// state then shows nothing to wait for, yet jobs are due. 40 jobs at 200
// per second with a burst of 2 (a token every 5 ms, so the race is common)
// and an hour's poll all run within seconds.
func TestWorkerRateLimitedQueueDoesNotStallOnALateToken(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	setControls(t, pool, "fast", "rate = 200, burst = 2")
	const n = 40
	jobs := make([]NewJob, n)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "fast"}
	}
	_, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "fast", Concurrency: 10, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error { return nil },
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	startWorker(t, w)
	eventually(t, time.Minute, "every job ran", func() bool { return countStatus(t, pool, StatusCompleted) == n })
	requireNoneRunning(t, pool)
}
