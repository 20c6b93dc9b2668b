package client

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// awaitResult is what a WaitForOutput run in a goroutine returned.
type awaitResult struct {
	job FinishedJob
	err error
}

// startWait runs WaitForOutput in a goroutine and returns once its
// registration is in backoff.job_awaiters, so that what the test does next
// happens while it waits.
func startWait(t *testing.T, pool *pgxpool.Pool, c *Client, id int64, poll time.Duration) <-chan awaitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	done := make(chan awaitResult, 1)
	go func() {
		defer cancel()
		j, err := c.WaitForOutput(ctx, id, poll)
		done <- awaitResult{j, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM backoff.job_awaiters WHERE job_id = $1`, id).Scan(&n))
		if n == 1 {
			return done
		}
		require.True(t, time.Now().Before(deadline), "WaitForOutput never registered")
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitForOutput on a pool returns when the call that finishes the job
// notifies: with a poll of an hour, only the notification can end the
// wait. Every way a job finishes notifies, and takes the registration.
func TestWaitForOutputWakesWhenTheJobFinishes(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("await"))

	finishers := map[string]struct {
		finish func(t *testing.T, j Job)
		want   Status
		output string
	}{
		"complete": {func(t *testing.T, j Job) {
			_, err := c.CompleteWithOutput(ctx, j.ID, j.Token, map[string]int{"rows": 42})
			require.NoError(t, err)
		}, StatusCompleted, `{"rows": 42}`},
		"complete_many": {func(t *testing.T, j Job) {
			_, err := c.CompleteMany(ctx, []int64{j.ID}, []int{j.Token})
			require.NoError(t, err)
		}, StatusCompleted, ""},
		"fail": {func(t *testing.T, j Job) {
			_, err := c.Fail(ctx, j.ID, j.Token, "broken", NonRetryable())
			require.NoError(t, err)
		}, StatusDeadLettered, ""},
		"cancel": {func(t *testing.T, j Job) {
			_, err := pool.Exec(ctx, `SELECT backoff.cancel($1, 'not needed')`, j.ID)
			require.NoError(t, err)
		}, StatusCancelled, ""},
		"reap": {func(t *testing.T, j Job) {
			later := c.With(pool)
			later.cfg = &config{now: func() time.Time { return now.Add(2 * wfLease) }, workerID: "await", logger: c.cfg.logger, metrics: c.cfg.metrics}
			n, err := later.Reap(ctx, 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}, StatusDeadLettered, ""},
	}
	for name, f := range finishers {
		t.Run(name, func(t *testing.T) {
			queue := "await-" + name
			id, err := c.Enqueue(ctx, queue, nil, MaxAttempts(1))
			require.NoError(t, err)
			done := startWait(t, pool, c, id, time.Hour)
			jobs, err := c.Claim(ctx, queue, 1, wfLease)
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			f.finish(t, jobs[0])
			select {
			case r := <-done:
				require.NoError(t, r.err)
				require.Equal(t, id, r.job.ID)
				require.Equal(t, f.want, r.job.Status)
				if f.output == "" {
					require.Nil(t, r.job.Output)
				} else {
					require.JSONEq(t, f.output, string(r.job.Output))
				}
			case <-time.After(time.Minute):
				t.Fatal("WaitForOutput did not return after the job finished")
			}
			var left int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.job_awaiters`).Scan(&left))
			require.Zero(t, left, "the finishing call takes the registration")
		})
	}
}

// A finished job's output comes back at once; a missing job is
// ErrJobNotFound; a wait that outlives its context ends with the
// context's error and leaves no registration behind.
func TestWaitForOutputFinishedMissingAndTimeout(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	c := newTestClient(t, pool, WithWorkerID("await"))

	id, err := c.Enqueue(ctx, "await-done", nil)
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "await-done", 1, wfLease)
	require.NoError(t, err)
	_, err = c.CompleteWithOutput(ctx, id, jobs[0].Token, json.RawMessage(`{"ok": true}`))
	require.NoError(t, err)
	got, err := c.WaitForOutput(ctx, id, 0)
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, got.Status)
	require.JSONEq(t, `{"ok": true}`, string(got.Output))

	_, err = c.WaitForOutput(ctx, id+1000, 0)
	require.ErrorIs(t, err, ErrJobNotFound)

	pending, err := c.Enqueue(ctx, "await-never", nil)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.WaitForOutput(short, pending, time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.job_awaiters`).Scan(&left))
	require.Zero(t, left, "a wait that gave up ends its registration")
}

// On a DB that is not a pool (here one connection) WaitForOutput polls.
func TestWaitForOutputPollsWithoutAPool(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	c := newTestClient(t, pool, WithWorkerID("await"))
	conn, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	onConn := c.With(conn)

	id, err := c.Enqueue(ctx, "await-poll", nil)
	require.NoError(t, err)
	done := startWait(t, pool, onConn, id, 20*time.Millisecond)
	jobs, err := c.Claim(ctx, "await-poll", 1, wfLease)
	require.NoError(t, err)
	_, err = c.CompleteWithOutput(ctx, id, jobs[0].Token, []int{1, 2})
	require.NoError(t, err)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.JSONEq(t, `[1, 2]`, string(r.job.Output))
	case <-time.After(time.Minute):
		t.Fatal("WaitForOutput did not return after the job finished")
	}
}
