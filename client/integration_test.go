package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestTypedAPIAgainstPostgres drives the typed API through a job's life
// with an injected clock, and checks that the real functions' SQLSTATEs
// arrive as the client's typed errors.
func TestTypedAPIAgainstPostgres(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := newTestClient(t, pool, WithClock(clock), WithWorkerID("it"))
	o := ops.New(pool, ops.WithClock(clock))

	ids, err := c.EnqueueMany(ctx, []NewJob{
		{Queue: "api", Payload: map[string]int{"n": 1}, DedupeKey: "one"},
		{Queue: "api", Payload: map[string]int{"n": 2}, Priority: 5},
		{Queue: "api", Payload: map[string]int{"n": 3}, DedupeKey: "one"}, // same key: same job
		{Queue: "api", Payload: map[string]int{"n": 4}, RunAt: now.Add(time.Hour), MaxAttempts: 1},
	})
	require.NoError(t, err)
	require.Len(t, ids, 4)
	require.Equal(t, ids[0], ids[2], "dedupe key returns the existing id")

	jobs, err := c.Claim(ctx, "api", 10, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 2, "the future job is not due")
	if jobs[0].ID != ids[1] { // claim order is priority first; RETURNING order is not promised
		jobs[0], jobs[1] = jobs[1], jobs[0]
	}
	require.Equal(t, []int64{ids[1], ids[0]}, []int64{jobs[0].ID, jobs[1].ID})
	require.Equal(t, "it", jobs[0].LockedBy)
	require.Equal(t, 1, jobs[0].Token)
	require.WithinDuration(t, now.Add(30*time.Second), *jobs[0].LeaseUntil, 0, "the policy's lease, from the injected now")

	done, err := c.CompleteMany(ctx, []int64{jobs[0].ID, jobs[1].ID}, []int{1, 7})
	require.NoError(t, err)
	require.Equal(t, []int64{jobs[0].ID}, done, "a wrong fencing token is skipped, not completed")

	_, err = c.Complete(ctx, jobs[1].ID, 7)
	require.ErrorIs(t, err, ErrStaleAttempt)
	_, err = c.Complete(ctx, jobs[0].ID, 1)
	require.ErrorIs(t, err, ErrInvalidTransition)
	_, err = c.Complete(ctx, 999999, 1)
	require.ErrorIs(t, err, ErrJobNotFound)
	_, err = c.Claim(ctx, "", 1, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = c.Get(ctx, 999999)
	require.ErrorIs(t, err, ErrJobNotFound)

	until, err := c.Heartbeat(ctx, jobs[1].ID, 1, time.Minute)
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(time.Minute), until, 0)

	failed, err := c.Fail(ctx, jobs[1].ID, 1, "boom")
	require.NoError(t, err)
	require.Equal(t, StatusRetrying, failed.Status)
	require.Equal(t, "boom", failed.LastError)
	require.WithinDuration(t, now, *failed.LastFailedAt, 0)
	require.True(t, failed.RunAt.After(now))

	// Acquire: not ready until the future job's run_at, then claimed.
	_, err = c.Acquire(ctx, ids[3], 0)
	var nr *NotReadyError
	require.ErrorAs(t, err, &nr)
	require.ErrorIs(t, err, ErrNotReady)
	require.True(t, now.Add(time.Hour).Equal(nr.RetryAt), "RetryAt %s", nr.RetryAt)
	require.Equal(t, 0, nr.Token)
	now = now.Add(time.Hour)
	acq, err := c.Acquire(ctx, ids[3], 0)
	require.NoError(t, err)
	require.Equal(t, StatusRunning, acq.Status)
	_, err = c.Acquire(ctx, ids[3], 0)
	require.ErrorIs(t, err, ErrStaleAttempt, "a running job")

	dead, err := c.Fail(ctx, ids[3], 1, "bad", NonRetryable())
	require.NoError(t, err)
	require.Equal(t, StatusDeadLettered, dead.Status)
	replayed, err := o.Replay(ctx, ids[3])
	require.NoError(t, err)
	require.Equal(t, StatusPending, replayed.Status)
	require.Equal(t, 1, replayed.Token, "replay keeps the token")
	require.Equal(t, 0, replayed.AttemptNumber(), "and gives a fresh budget")
	require.Len(t, replayed.Errors, 2, "history kept, and the replay recorded")
	require.Equal(t, "replayed", replayed.Errors[1].Kind)
	require.NotEmpty(t, replayed.Errors[1].Role)
	cancelled, err := o.Cancel(ctx, ids[3], "not needed")
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, cancelled.Status)

	list, err := o.List(ctx, ops.ListParams{Queue: "api", Statuses: []Status{StatusCompleted, StatusCancelled}})
	require.NoError(t, err)
	require.Len(t, list.Jobs, 2)
	require.Empty(t, list.Next)
	stats, err := o.Stats(ctx, 0)
	require.NoError(t, err)
	require.Len(t, stats, 1)
	require.Equal(t, "api", stats[0].Queue)
	require.EqualValues(t, 1, stats[0].Completed)
	require.EqualValues(t, 1, stats[0].Retrying)
	require.EqualValues(t, 1, stats[0].Cancelled)
}

func TestNewRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, testdb.NewEmptyURL(t))
	_, err := New(context.Background(), pool)
	require.ErrorIs(t, err, ErrSchemaTooOld)
	require.ErrorContains(t, err, "backoffctl migrate up")
}

// TestEnqueueWithPolicyAgainstPostgres: UsePolicy (and NewJob.Policy in
// EnqueueMany) records the named policy on the job instead of its queue's,
// the job then runs under it, and an unknown name is ErrInvalidArgument.
func TestEnqueueWithPolicyAgainstPostgres(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := newTestClient(t, pool, WithClock(clock))
	o := ops.New(pool, ops.WithClock(clock))
	_, err := pool.Exec(ctx, `INSERT INTO backoff.policies (name, strategy, base, max_delay, jitter, max_attempts, lease)
		VALUES ('slow', 'fixed', '7 minutes', '1 hour', 'none', 2, '2 minutes')`)
	require.NoError(t, err)

	id, err := c.Enqueue(ctx, "pol", nil, UsePolicy("slow"))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "pol", nil)
	require.NoError(t, err)
	ids, err := c.EnqueueMany(ctx, []NewJob{{Queue: "pol", Policy: "conservative"}, {Queue: "pol"}})
	require.NoError(t, err)
	for want, id := range map[string]int64{"slow": id, "default": plain, "conservative": ids[0]} {
		j, err := c.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, j.Policy, "job %d", id)
	}
	j, err := c.Get(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, "default", j.Policy, "a job of the batch without Policy: its queue's")

	acq, err := c.Acquire(ctx, id, 0)
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(2*time.Minute), *acq.LeaseUntil, 0, "slow's lease")
	failed, err := c.Fail(ctx, id, acq.Token, "boom")
	require.NoError(t, err)
	require.Equal(t, StatusRetrying, failed.Status)
	require.WithinDuration(t, now.Add(7*time.Minute), failed.RunAt, 0, "slow's delay")

	_, err = c.Enqueue(ctx, "pol", nil, UsePolicy("nope"))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, `unknown policy "nope"`)
	_, err = c.EnqueueMany(ctx, []NewJob{{Queue: "pol"}, {Queue: "pol", Policy: "nope"}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	list, err := o.List(ctx, ops.ListParams{Queue: "pol"})
	require.NoError(t, err)
	require.Len(t, list.Jobs, 4, "the failed batch added nothing")
}

// TestAcquireNotReadyReadsTheServersError reads BK004 as backoff.acquire
// raises it, with a run_at that has microseconds and a session in another
// time zone: RetryAt is the job's run_at to the microsecond, Attempts its
// claims so far.
func TestAcquireNotReadyReadsTheServersError(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "ALTER DATABASE "+pool.Config().ConnConfig.Database+" SET TimeZone = 'Asia/Kolkata'")
	require.NoError(t, err)
	pool.Reset()
	now := time.Date(2030, 6, 1, 12, 0, 0, 123456000, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }))

	id, err := c.Enqueue(ctx, "steps", nil)
	require.NoError(t, err)
	acq, err := c.Acquire(ctx, id, 0)
	require.NoError(t, err)
	failed, err := c.Fail(ctx, id, acq.Token, "boom", RetryIn(30*time.Second+654321*time.Microsecond))
	require.NoError(t, err)

	_, err = c.Acquire(ctx, id, 0)
	var nr *NotReadyError
	require.ErrorAs(t, err, &nr)
	require.True(t, failed.RunAt.Equal(nr.RetryAt), "RetryAt %s, run_at %s", nr.RetryAt, failed.RunAt)
	require.Equal(t, time.UTC, nr.RetryAt.Location())
	require.Equal(t, 1, nr.Token)
	require.Equal(t, id, nr.JobID)
}
