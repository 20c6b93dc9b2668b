package shardtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// A Worker in direct mode (client.WorkerConfig.DirectShards,
// docs/adr/0093-workers-call-shards-directly.md): given the router's pool,
// it claims and settles on the shards themselves.

// settleFunctions are the functions a Worker's hot path calls.
var settleFunctions = []string{"claim", "complete", "complete_many", "fail", "heartbeat", "snooze"}

// routerCalls counts, on the router, the calls of each of settleFunctions
// that its backends have reported (pg_stat_user_functions: the router
// database has track_functions = all, trackRouterCalls). A fresh
// connection per read: no stats snapshot is kept.
func routerCalls(t *testing.T) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT funcname::text, sum(calls)::bigint FROM pg_stat_user_functions
		WHERE schemaname = 'backoff' AND funcname = ANY($1) GROUP BY funcname`, settleFunctions)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var f string
		var n int64
		require.NoError(t, rows.Scan(&f, &n))
		out[f] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// trackRouterCalls makes the router's new sessions count their function
// calls (pg_stat_user_functions) until the test ends.
func trackRouterCalls(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET track_functions TO ''all''', current_database()); END $$`)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.RouterURL)
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, err = c.Exec(context.Background(), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET track_functions', current_database()); END $$`)
		require.NoError(t, err)
	})
}

// waitFor polls cond every 20 ms until it holds or deadline passes.
func waitFor(t *testing.T, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: %s", deadline, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// directPool is a pool on the router for a direct Worker, of its own so
// that closing it ends its router sessions (which then report their
// function calls).
func directPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 8
	cfg.ConnConfig.RuntimeParams["application_name"] = "direct-worker-test"
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// TestDirectWorker: a direct Worker serves a queue on each of the three
// shards. Its jobs run exactly once (some fail once and are retried, some
// run long enough to heartbeat), each completed on its own shard; no
// claim, completion, failure or heartbeat reaches the router (its
// pg_stat_user_functions, which a claim made through the router for
// control does raise); and an idle queue wakes on NOTIFY from its shard
// (polling is an hour away and the maintenance loop is off).
func TestDirectWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	trackRouterCalls(t)
	before := routerCalls(t)
	queues := queuesOnEveryShard(t, fmt.Sprintf("direct-%d", time.Now().UnixNano()))
	forgetJobs(t, queues...)
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)

	var mu sync.Mutex
	runs := map[int64]int{}      // job -> handler runs
	succeeded := map[int64]int{} // job -> successful runs
	handler := func(ctx context.Context, j *client.Job) error {
		var p struct{ Fail, Slow bool }
		if err := j.UnmarshalPayload(&p); err != nil {
			return client.Permanent(err)
		}
		mu.Lock()
		runs[j.ID]++
		first := runs[j.ID] == 1
		mu.Unlock()
		if p.Fail && first {
			return client.RetryAfter(errors.New("first attempt fails"), 0)
		}
		if p.Slow {
			// Long enough for a few heartbeats (every 100 ms).
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(400 * time.Millisecond):
			}
		}
		mu.Lock()
		succeeded[j.ID]++
		mu.Unlock()
		return nil
	}
	var qc []client.QueueConfig
	for _, q := range queues {
		qc = append(qc, client.QueueConfig{Queue: q, Handler: handler, Concurrency: 4, Lease: time.Minute, HeartbeatInterval: 100 * time.Millisecond})
	}
	quiet := client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	// start runs a direct Worker on a pool of its own (closed when the
	// test ends, or by the caller); stop ends it.
	start := func(cfg client.WorkerConfig, id string) (wp *pgxpool.Pool, stop func()) {
		wp = directPool(t, env.RouterURL)
		cfg.Queues, cfg.DirectShards = qc, true
		w, err := client.NewWorker(wp, cfg, client.WithWorkerID(id), quiet)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		return wp, func() { cancel(); require.NoError(t, <-done) }
	}

	// Jobs for a Worker with the default settings: some fail once (and
	// are retried at once), some are slow.
	wp1, stop := start(client.WorkerConfig{}, "direct-worker-1")
	const perQueue = 30
	var jobs []client.NewJob
	for _, q := range queues {
		for i := range perQueue {
			jobs = append(jobs, client.NewJob{Queue: q, Payload: map[string]bool{"Fail": i%5 == 0, "Slow": i%10 == 1}})
		}
	}
	ids, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)
	require.NoError(t, c.WaitIdle(ctx, queues...))
	stop()
	wp1.Close()

	// A Worker that nothing but a notification wakes when a queue is
	// idle: no look, no reaper, a poll an hour away. Idle, each queue's
	// producer registers on its shard that it waits (which it does only
	// while LISTEN holds there).
	wp2, stop := start(client.WorkerConfig{PollInterval: time.Hour, ReapInterval: -1, ScheduleInterval: -1}, "direct-worker-2")
	for k, q := range queues {
		waitFor(t, time.Minute, fmt.Sprintf("the worker registered as waiting for %s on shard %d", q, k), func() bool {
			return shardRowsWhere(t, k, `SELECT count(*) FROM backoff.waiting_workers WHERE queue = $1 AND worker = 'direct-worker-2'`, q) == 1
		})
	}
	// A job enqueued now runs at once: only the NOTIFY on its shard can
	// wake the producer.
	for _, q := range queues {
		id, err := c.Enqueue(ctx, q, map[string]bool{})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	waitFor(t, time.Minute, "the jobs enqueued into idle queues ran (woken by NOTIFY)", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids[len(ids)-len(queues):] {
			if succeeded[id] != 1 {
				return false
			}
		}
		return true
	})
	require.NoError(t, c.WaitIdle(ctx, queues...))
	stop()
	wp2.Close()

	mu.Lock()
	for _, id := range ids {
		require.Equal(t, 1, succeeded[id], "job %d succeeded once", id)
	}
	mu.Unlock()
	for k, q := range queues {
		require.Equal(t, perQueue+1, shardCount(t, k, "queue = $1 AND status = 'completed'", q), "shard %d completed its queue's jobs", k)
		require.Equal(t, perQueue/5, shardCount(t, k, "queue = $1 AND attempts = 2", q), "shard %d: the failed jobs ran twice", k)
	}

	// The router saw none of it: its sessions report their calls when
	// they end. The Workers' pools are closed: wait until their sessions
	// have ended, then make one claim through the router and wait until
	// it is counted.
	waitFor(t, time.Minute, "the Workers' router sessions ended", func() bool {
		var n int
		require.NoError(t, rp.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'direct-worker-test'`).Scan(&n))
		return n == 0
	})
	ctl, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	_, err = ctl.Exec(ctx, `SELECT count(*) FROM backoff.claim($1, 'control')`, queues[0])
	require.NoError(t, err)
	require.NoError(t, ctl.Close(ctx))
	var after map[string]int64
	waitFor(t, time.Minute, "the router counted the control claim", func() bool {
		after = routerCalls(t)
		return after["claim"] > before["claim"]
	})
	after = routerCalls(t)
	for _, f := range settleFunctions {
		want := before[f]
		if f == "claim" {
			want++
		}
		require.Equal(t, want, after[f], "calls of backoff.%s through the router (before %v, after %v)", f, before, after)
	}
}

// forgetJobs deletes the jobs of queues on every shard when the test ends:
// a later test that prunes a shard counts only its own.
func forgetJobs(t *testing.T, queues ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		for k := range NShards {
			conn, err := pgx.Connect(ctx, env.ShardURLs[k])
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `DELETE FROM backoff.jobs WHERE queue = ANY($1)`, queues)
			conn.Close(ctx)
			require.NoError(t, err)
		}
	})
}

// shardRowsWhere runs a count query on shard k directly.
func shardRowsWhere(t *testing.T, k int, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.ShardURLs[k])
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n))
	return n
}

// TestDirectWorkerFollowsMove: a queue moves to another shard
// (router.MoveQueue) while producers enqueue into it through the router
// and a direct Worker serves it. Every job runs exactly once, the Worker
// claims on the new shard after the flip, and the pause of its claims
// (from the flip to its first job of the new shard) is measured.
func TestDirectWorkerFollowsMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	q, from := moveQueueName(t, "direct-move")
	to := (from + 1) % NShards
	forgetJobs(t, q)
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)

	type run struct {
		at    time.Time
		shard int
	}
	var mu sync.Mutex
	succeeded := map[int]int{} // the job's number (its payload) -> successful runs
	var runs []run
	w, err := client.NewWorker(directPool(t, env.RouterURL), client.WorkerConfig{
		Queue: q, Concurrency: 4, Lease: time.Minute, DirectShards: true,
		Handler: func(ctx context.Context, j *client.Job) error {
			var p struct{ N int }
			if err := j.UnmarshalPayload(&p); err != nil {
				return client.Permanent(err)
			}
			mu.Lock()
			succeeded[p.N]++
			runs = append(runs, run{time.Now(), sharding.ShardOfJob(j.ID)})
			mu.Unlock()
			return nil
		},
	}, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()

	// A producer through the router, a job every 10 ms, enqueuing again
	// what the moment between the old shard's mark and the flip refuses.
	pctx, stopProducing := context.WithCancel(ctx)
	var enqueued int
	produced := make(chan error, 1)
	go func() {
		for n := 0; pctx.Err() == nil; {
			_, err := c.Enqueue(ctx, q, map[string]int{"N": n})
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr) && pgErr.Code == "55006":
			case err != nil:
				produced <- err
				return
			default:
				n++
				enqueued = n
			}
			_ = pause(pctx, 10*time.Millisecond)
		}
		produced <- nil
	}()
	waitFor(t, time.Minute, "the worker ran jobs on the queue's first shard", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) >= 20
	})

	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	mover, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	var flipped time.Time
	moveStart := time.Now()
	_, err = router.MoveQueue(ctx, mover, base, q, to, router.MoveOptions{Step: func(s string) {
		if s == router.StepFlip && flipped.IsZero() {
			flipped = time.Now()
		}
	}})
	require.NoError(t, mover.Close(ctx))
	require.NoError(t, err)
	require.False(t, flipped.IsZero())

	waitFor(t, time.Minute, "the worker ran jobs on the queue's new shard", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) > 0 && runs[len(runs)-1].shard == to
	})
	stopProducing()
	require.NoError(t, <-produced)
	require.NoError(t, c.WaitIdle(ctx, q))
	stopWorker()
	require.NoError(t, <-done)

	mu.Lock()
	defer mu.Unlock()
	for n := range enqueued {
		require.Equal(t, 1, succeeded[n], "job %d ran once", n)
	}
	require.Len(t, succeeded, enqueued)
	sort.Slice(runs, func(i, j int) bool { return runs[i].at.Before(runs[j].at) })
	var lastFrom, firstTo time.Time
	for _, r := range runs {
		if r.shard == from && r.at.Before(flipped) {
			lastFrom = r.at
		}
		if r.shard == to && firstTo.IsZero() {
			firstTo = r.at
		}
	}
	for _, r := range runs {
		if r.at.After(firstTo) {
			require.Equal(t, to, r.shard, "after its first claim on the new shard the worker claims nowhere else")
		}
	}
	pause := firstTo.Sub(flipped)
	t.Logf("claims paused %s after the flip (%s from the last job claimed on shard %d; the move took %s; %d jobs)",
		pause.Round(time.Millisecond), firstTo.Sub(lastFrom).Round(time.Millisecond), from, time.Since(moveStart).Round(time.Millisecond), enqueued)
	// The goal is 5 s (a layout check every 5 s at the latest); a
	// stalled machine gets twice that.
	require.Less(t, pause, 10*time.Second, "the claims of the moved queue paused too long")
}

// TestDirectWorkerNeedsARouter: a direct Worker given a pool that is not a
// router's (a shard's) refuses to run, saying so.
func TestDirectWorkerNeedsARouter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sp := pool(t, env.ShardURLs[0])
	w, err := client.NewWorker(sp, client.WorkerConfig{
		Queue: "direct-not-a-router", DirectShards: true,
		Handler: func(context.Context, *client.Job) error { return nil },
	})
	require.NoError(t, err)
	err = w.Run(ctx)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	require.ErrorContains(t, err, "DirectShards needs a pool connected to a pgbackoff router")
	require.NoError(t, ctx.Err(), "Run returned at once")
}
