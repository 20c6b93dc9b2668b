package faulttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestKillWorkerProcess: a worker process holding five jobs is killed with
// SIGKILL in the middle of them. Their leases expire, the reaper returns
// them through the normal retry decision (history kind lease_expired,
// status retrying), and another worker finishes every job.
func TestKillWorkerProcess(t *testing.T) {
	faultServer(t)
	dbURL, admin := newFaultDB(t)
	ids := enqueue(t, admin, "kill", 30)

	victim := startWorkerProcess(t, dbURL, "kill", "victim", time.Hour)
	waitFor(t, 20*time.Second, "the victim to hold 5 jobs", func() bool {
		return count(admin, `SELECT count(*) FROM backoff.jobs WHERE locked_by = 'victim'`) == 5
	})
	require.NoError(t, victim.Process.Kill()) // SIGKILL: no shutdown, no fail, no complete
	_ = victim.Wait()
	var held []int64
	require.NoError(t, admin.QueryRow(context.Background(),
		`SELECT array_agg(id) FROM backoff.jobs WHERE locked_by = 'victim' AND status = 'running'`).Scan(&held))
	require.Len(t, held, 5, "the killed process's jobs stay running until their lease expires")

	// The victim's leases (two seconds) run out because it was killed;
	// the worker that finishes the jobs holds leases of a minute, longer
	// than any stall of a busy machine, so that only the victim's are
	// reaped.
	var stale atomic.Int64
	stop := runWorkers(t, testdb.Pool(t, dbURL), 1, client.WorkerConfig{
		Queue: "kill", Concurrency: 10, Lease: time.Minute, PollInterval: 100 * time.Millisecond,
		ReapInterval: 300 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		Handler: func(context.Context, *client.Job) error { time.Sleep(10 * time.Millisecond); return nil },
	}, &stale)
	waitFor(t, 30*time.Second, "every job completed", func() bool {
		return count(admin, `SELECT count(*) FROM backoff.jobs WHERE queue = 'kill' AND status = 'completed'`) == len(ids)
	})
	stop()

	// The victim's jobs went through the reaper's decision: one
	// lease_expired entry for attempt 1, then completed by attempt 2.
	rows, err := admin.Query(context.Background(), `
SELECT attempts, errors -> 0 ->> 'kind', (errors -> 0 ->> 'attempt')::int, jsonb_array_length(errors)
FROM backoff.jobs WHERE id = ANY($1)`, held)
	require.NoError(t, err)
	for rows.Next() {
		var attempts, attempt, n int
		var kind string
		require.NoError(t, rows.Scan(&attempts, &kind, &attempt, &n))
		require.Equal(t, 2, attempts)
		require.Equal(t, "lease_expired", kind)
		require.Equal(t, 1, attempt)
		require.Equal(t, 1, n)
	}
	require.NoError(t, rows.Err())
	a := account(t, admin, "kill -9 worker", ids)
	require.Equal(t, 5, a.reaped)
}

// TestRestartServer: the PostgreSQL server is stopped (fast shutdown)
// and started again while two workers run. Workers connect through a
// proxy with a fixed address (a container's published port changes on a
// restart); they reconnect and carry on; completions lost in flight are
// recovered by the reaper; no job is lost or completed twice.
func TestRestartServer(t *testing.T) {
	srv := faultServer(t)
	ctx := context.Background()
	dbURL, admin := newFaultDB(t)
	ids := enqueue(t, admin, "restart", 300)

	target := atomic.Value{}
	target.Store(hostPort(t, dbURL))
	p, err := newProxy(func() string { return target.Load().(string) })
	require.NoError(t, err)
	defer p.close()

	var stale atomic.Int64
	stop := runWorkers(t, testdb.Pool(t, viaProxy(t, dbURL, p)), 2, client.WorkerConfig{
		Queue: "restart", Concurrency: 4, Lease: 3 * time.Second, PollInterval: 100 * time.Millisecond,
		ReapInterval: 500 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		Handler: func(context.Context, *client.Job) error { time.Sleep(20 * time.Millisecond); return nil },
	}, &stale)
	waitFor(t, 30*time.Second, "a third of the jobs completed", func() bool {
		return count(admin, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`) >= len(ids)/3
	})
	before := count(admin, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`)

	// SIGINT: PostgreSQL's fast shutdown (sessions are cut, the
	// checkpoint is written), then the server starts again.
	p.closeAll()
	require.NoError(t, srv.Restart(ctx))
	require.NoError(t, testdb.Restarted(ctx))
	newURL := srv.URL
	target.Store(hostPort(t, newURL))
	admin = testdb.Pool(t, viaProxy(t, dbURL, p))
	t.Logf("restarted the server with %d of %d jobs completed", before, len(ids))

	waitFor(t, 60*time.Second, "every job completed after the restart", func() bool {
		return count(admin, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`) == len(ids)
	})
	stop()
	account(t, admin, "server restart", ids)
}

// TestPauseServer: the server is frozen (docker pause, or SIGSTOP for a
// local cluster) for longer than the lease while eight jobs are in their
// first attempt. When it resumes the leases have expired: the reaper
// retries the jobs, other attempts complete them, and the stale handlers'
// completions are refused (the fencing token is no longer the running
// attempt) and dropped.
//
// A heartbeat a first attempt sent during the pause can reach the server
// before any reaper does after the resume: that attempt still holds the job
// (an expired lease that was not reaped can be extended, DESIGN.md) and
// completes it legitimately. When that happens to all eight the round
// tested nothing, so the test pauses again with eight new jobs, up to three
// rounds (CI saw all eight kept once in many runs).
func TestPauseServer(t *testing.T) {
	srv := faultServer(t)
	ctx := context.Background()
	dbURL, admin := newFaultDB(t)

	var stale atomic.Int64
	stop := runWorkers(t, testdb.Pool(t, dbURL), 2, client.WorkerConfig{
		Queue: "pause", Concurrency: 4, Lease: time.Second, PollInterval: 100 * time.Millisecond,
		ReapInterval: 300 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		Handler: func(_ context.Context, j *client.Job) error {
			var p struct{ Slow bool }
			if j.UnmarshalPayload(&p) == nil && p.Slow && j.Token == 1 {
				// A handler that ignores its context and outlives the
				// pause: its completion arrives after the reaper.
				time.Sleep(5 * time.Second)
				return nil
			}
			time.Sleep(20 * time.Millisecond)
			return nil
		},
	}, &stale)

	var ids []int64
	reaped := 0 // first attempts reaped, over all rounds
	for round := 1; round <= 3 && reaped == 0; round++ {
		// Marked slow in the payload: a worker woken by the enqueue can
		// start a job before the enqueue returns its id.
		first := enqueueWith(t, admin, "pause", 8, `{"slow": true}`)
		waitFor(t, 20*time.Second, "the round's eight first attempts running", func() bool {
			return count(admin, `SELECT count(*) FROM backoff.jobs WHERE id = ANY($1) AND status = 'running' AND attempts = 1`, first) == 8
		})
		ids = append(ids, first...)
		ids = append(ids, enqueue(t, admin, "pause", 32)...)

		require.NoError(t, srv.Pause(ctx))
		time.Sleep(3 * time.Second) // three leases
		require.NoError(t, srv.Resume(ctx))

		waitFor(t, 60*time.Second, "every job completed after the pause", func() bool {
			return count(admin, `SELECT count(*) FROM backoff.jobs WHERE id = ANY($1) AND status = 'completed'`, ids) == len(ids)
		})
		var keptByFirst, reapedThenWon int
		require.NoError(t, admin.QueryRow(ctx,
			`SELECT count(*) FROM public.completion_log WHERE job_id = ANY($1) AND attempt = 1`, first).Scan(&keptByFirst))
		require.NoError(t, admin.QueryRow(ctx, `
SELECT count(*) FROM public.completion_log AS l JOIN backoff.jobs AS j ON j.id = l.job_id
WHERE l.job_id = ANY($1) AND l.attempt = 1
  AND EXISTS (SELECT FROM jsonb_array_elements(j.errors) AS e
              WHERE e ->> 'kind' = 'lease_expired' AND (e ->> 'attempt')::int = 1)`, first).Scan(&reapedThenWon))
		t.Logf("round %d: first attempts that kept their job through the pause: %d of 8", round, keptByFirst)
		require.Zero(t, reapedThenWon, "a reaped first attempt completed its job")
		reaped += 8 - keptByFirst
	}
	stop()
	a := account(t, admin, "server paused 3s with a 1s lease", ids)
	t.Logf("stale attempts refused (BK002 or a refused batch completion): %d", stale.Load())
	require.Positive(t, reaped, "no first attempt was reaped in three rounds: the pause did not expire any lease")
	require.GreaterOrEqual(t, a.reaped, reaped, "every first attempt that lost its job was reaped")
	require.GreaterOrEqual(t, stale.Load(), int64(reaped), "every reaped first attempt's completion was refused")
}

// TestConnectionDroppedDuringSettle cuts the connection of a complete, fail,
// snooze or heartbeat call, either after the server ran it (the reply is
// lost) or before (the server never saw it), and retries the call on a new
// connection: the retry either succeeds (the first never ran, or a
// heartbeat of the attempt that still holds the job) or is cleanly refused
// (BK003 for a completed job, BK002 for a failed or snoozed attempt), and
// the job is completed, failed or snoozed exactly once. It needs only the
// proxy, so it runs with TEST_DATABASE_URL too.
func TestConnectionDroppedDuringSettle(t *testing.T) {
	ctx := context.Background()
	dbURL, admin := newFaultDB(t)
	p, err := newProxy(func() string { return hostPort(t, dbURL) })
	require.NoError(t, err)
	defer p.close()
	// Simple protocol: every call carries its SQL text, which the proxy
	// matches.
	proxied := simpleProtocolVia(t, dbURL, p)
	connect := func() *client.Client {
		conn, err := pgx.Connect(ctx, proxied)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(ctx) })
		c, err := client.New(ctx, conn)
		require.NoError(t, err)
		return c
	}
	claim := func(c *client.Client, queue string) client.Job {
		jobs, err := c.Claim(ctx, queue, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		return jobs[0]
	}

	var ids []int64
	for _, tc := range []struct {
		name   string
		call   string // the SQL the proxy cuts
		before bool   // cut before the server sees the call
		retry  error  // what the retried call returns
	}{
		{"complete, reply lost", "backoff.complete", false, client.ErrInvalidTransition},
		{"complete, never sent", "backoff.complete", true, nil},
		{"fail, reply lost", "backoff.fail", false, client.ErrStaleAttempt},
		{"fail, never sent", "backoff.fail", true, nil},
		{"snooze, reply lost", "backoff.snooze", false, client.ErrStaleAttempt},
		{"snooze, never sent", "backoff.snooze", true, nil},
		{"heartbeat, reply lost", "backoff.heartbeat", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := "drop-" + tc.call + map[bool]string{true: "-before", false: "-after"}[tc.before]
			ids = append(ids, enqueue(t, admin, queue, 1)...)
			c := connect()
			j := claim(c, queue)
			cuts := p.cutCount()
			p.arm(tc.call+"(", tc.before, 300*time.Millisecond)
			settle := func(c *client.Client) error {
				var err error
				switch tc.call {
				case "backoff.complete":
					_, err = c.Complete(ctx, j.ID, j.Token)
				case "backoff.fail":
					_, err = c.Fail(ctx, j.ID, j.Token, "downstream 503")
				case "backoff.snooze":
					_, err = c.Snooze(ctx, j.ID, j.Token, time.Hour)
				default:
					_, err = c.Heartbeat(ctx, j.ID, j.Token, time.Minute)
				}
				return err
			}
			err := settle(c)
			require.Error(t, err, "the cut connection must fail the call")
			require.Equal(t, cuts+1, p.cutCount())
			err = settle(connect())
			if tc.retry == nil {
				require.NoError(t, err)
			} else {
				require.True(t, errors.Is(err, tc.retry), "retry: want %v, got %v", tc.retry, err)
			}
			var status string
			var attempts, uncounted, history int
			require.NoError(t, admin.QueryRow(ctx, `SELECT status, attempts, uncounted_attempts, jsonb_array_length(errors) FROM backoff.jobs WHERE id = $1`, j.ID).
				Scan(&status, &attempts, &uncounted, &history))
			require.Equal(t, 1, attempts, "no attempt was spent by the retry")
			switch tc.call {
			case "backoff.snooze":
				require.Equal(t, "pending", status)
				require.Equal(t, 1, uncounted, "snoozed once")
				_, err = admin.Exec(ctx, `SELECT backoff.complete(id, attempts) FROM backoff.acquire($1, 'finisher', NULL, now() + interval '1 day')`, j.ID)
				require.NoError(t, err)
			case "backoff.heartbeat":
				require.Equal(t, "running", status)
				_, err = c.Complete(ctx, j.ID, j.Token)
				require.Error(t, err, "the first client's connection was cut")
				_, err = connect().Complete(ctx, j.ID, j.Token)
				require.NoError(t, err, "the attempt still holds the job")
			case "backoff.fail":
				require.Equal(t, "retrying", status)
				require.Equal(t, 1, history, "the failure is recorded once")
				// Finish the job so that the accounting below holds.
				_, err = admin.Exec(ctx, `SELECT backoff.complete(id, attempts) FROM backoff.acquire($1, 'finisher', NULL, now() + interval '1 day')`, j.ID)
				require.NoError(t, err)
			default:
				require.Equal(t, "completed", status)
			}
		})
	}
	account(t, admin, "connection dropped during complete/fail/snooze/heartbeat", ids)
}
