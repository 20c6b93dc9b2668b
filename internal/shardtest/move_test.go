package shardtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// moveKilled runs router.MoveQueue once per step of a move, killing each
// run (cancelling its context) after that step (after the second copy and
// delete of its jobs for those), then once more to the end: every kind of
// step is interrupted and then resumed. onStep sees every step of every
// run. It returns the steps after which a run was killed.
func moveKilled(t *testing.T, ctx context.Context, queue string, to int, opts router.MoveOptions, onStep func(string)) map[string]int {
	t.Helper()
	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	killed := map[string]int{}
	targets := []string{router.StepMarkTarget, router.StepMarkSource, router.StepDrain, router.StepKeys, router.StepFlip,
		router.StepSchedules, router.StepCopy, router.StepDelete, router.StepControls, ""}
	for _, target := range targets {
		rctx, cancel := context.WithCancel(ctx)
		seen := 0
		o := opts
		o.Step = func(s string) {
			onStep(s)
			if s == target {
				if seen++; seen == 2 || (s != router.StepCopy && s != router.StepDelete) {
					killed[s]++
					cancel()
				}
			}
		}
		conn, err := pgx.Connect(ctx, env.RouterURL)
		require.NoError(t, err)
		_, err = router.MoveQueue(rctx, conn, base, queue, to, o)
		cancel()
		conn.Close(context.Background())
		if target == "" {
			require.NoError(t, err, "the last run of the move")
			return killed
		}
		if killed[target] == 0 {
			require.NoError(t, err, "the run to be killed after %s", target)
		} else {
			require.ErrorIs(t, err, context.Canceled, "the run killed after %s", target)
		}
	}
	return killed
}

// moveQueueName is a queue name of its own for a test, and its shard.
func moveQueueName(t *testing.T, prefix string) (string, int) {
	t.Helper()
	q := fmt.Sprintf("%s-%d", prefix, rand.IntN(1_000_000_000))
	return q, router.QueueShard(q, NShards)
}

// TestMoveQueueUnderLoad moves a queue to another shard while two
// producers enqueue into it through the router, each key twice (the second
// call must return the job of the first), and Go Workers claim and complete
// its jobs through the router; a worker that claimed a job is "killed"
// (never settles it: its lease expires and the reaper retries the job on
// the old shard, where the mover picks it up), and the mover is killed
// after each of its steps and run again. At the end: every key has exactly
// one job, completed once by a handler; the dead letter and the schedule
// moved; the killed worker's late completion settles nothing.
func TestMoveQueueUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	q, from := moveQueueName(t, "move")
	to := (from + 1) % NShards
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		ids     = map[string][]int64{} // key -> ids the enqueues returned
		ready   = map[string]bool{}    // key -> both enqueues done
		success = map[string]int{}     // key -> successful handler runs
	)
	var refused atomic.Int64
	enqueue := func(key string, opts ...client.EnqueueOption) (int64, error) {
		for {
			id, err := c.Enqueue(ctx, q, map[string]string{"k": key}, append(opts, client.DedupeKey(key))...)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55006" {
				// The moment between the old shard's mark and the flip.
				refused.Add(1)
				if err := pause(ctx, 5*time.Millisecond); err != nil {
					return 0, err
				}
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("enqueue %s: %w", key, err)
			}
			return id, nil
		}
	}
	produce := func(key string) error {
		// Attempts to spare: a job whose second enqueue is not done yet
		// is retried (below), however long that takes.
		a, err := enqueue(key, client.MaxAttempts(10000))
		if err != nil {
			return err
		}
		b, err := enqueue(key, client.MaxAttempts(10000))
		if err != nil {
			return err
		}
		mu.Lock()
		ids[key] = append(ids[key], a, b)
		ready[key] = true
		mu.Unlock()
		return nil
	}

	// Before the move: waiting jobs, a dead letter and a job held by a
	// worker that dies.
	for i := range 150 {
		require.NoError(t, produce(fmt.Sprintf("pre-%d", i)))
	}
	dead, err := enqueue("dead", client.Priority(100), client.MaxAttempts(1))
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, q, 1, time.Hour)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, dead, jobs[0].ID)
	_, err = c.Fail(ctx, dead, jobs[0].Token, "poison")
	require.NoError(t, err)
	killedID, err := enqueue("killed", client.Priority(99))
	require.NoError(t, err)
	var killedToken int
	// The dying worker's lease is short so that the reaper retries its
	// job while the move waits; the other workers' leases are long.
	require.NoError(t, rp.QueryRow(ctx, `SELECT attempts FROM backoff.claim($1, 'dying-worker', 1, interval '2 seconds')`, q).Scan(&killedToken))
	// A job that runs on the old shard through the move and completes
	// there, once the mover copies.
	slowID, err := enqueue("slow", client.Priority(98))
	require.NoError(t, err)
	slow, err := c.Claim(ctx, q, 1, time.Hour)
	require.NoError(t, err)
	require.Len(t, slow, 1)
	require.Equal(t, slowID, slow[0].ID)
	mu.Lock()
	ready["killed"], ready["dead"] = true, true
	mu.Unlock()
	_, err = rp.Exec(ctx, `SELECT backoff.put_schedule($1, $2, p_every => interval '1 hour', p_anchor => now())`, q+"-hourly", q)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Other tests fire every shard's schedules far in the future.
		_, err := rp.Exec(context.Background(), `SELECT backoff.drop_schedule($1)`, q+"-hourly")
		require.NoError(t, err)
	})

	// Workers through the router.
	handler := func(_ context.Context, j *client.Job) error {
		var p struct{ K string }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if !ready[p.K] {
			// Its second enqueue is not done: keep it unfinished.
			return client.RetryAfter(errors.New("not yet"), 20*time.Millisecond)
		}
		success[p.K]++
		return nil
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	startWorkers := func() {
		for w := range 2 {
			wk, err := client.NewWorker(rp, client.WorkerConfig{
				Queue: q, Handler: handler, Concurrency: 2, Lease: time.Minute,
				PollInterval: 20 * time.Millisecond, ReapInterval: 200 * time.Millisecond,
				ShutdownTimeout: 10 * time.Second, DisableListen: true,
			}, client.WithWorkerID(fmt.Sprintf("%s-w%d", q, w)), client.WithLogger(quiet))
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = wk.Run(wctx)
			}()
		}
	}
	// Producers through the router, until the move is done.
	pctx, stopProducers := context.WithCancel(ctx)
	var produced atomic.Int64
	var pwg sync.WaitGroup
	for p := range 2 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := 0; pctx.Err() == nil; i++ {
				if err := produce(fmt.Sprintf("p%d-%d", p, i)); err != nil {
					if pctx.Err() == nil {
						t.Errorf("producer %d: %v", p, err)
					}
					return
				}
				produced.Add(1)
			}
		}()
	}

	// The workers start once the old shard is marked, so that its waiting
	// jobs are there to copy; the slow job completes there during the
	// copies.
	started, slowDone := false, false
	killed := moveKilled(t, ctx, q, to, router.MoveOptions{Batch: 10, Poll: 50 * time.Millisecond, Wait: 2 * time.Minute}, func(s string) {
		if s == router.StepMarkSource && !started {
			started = true
			startWorkers()
		}
		if s == router.StepCopy && !slowDone {
			slowDone = true
			_, err := c.Complete(ctx, slowID, slow[0].Token)
			require.NoError(t, err, "a running job completes on the old shard")
			mu.Lock()
			success["slow"]++
			mu.Unlock()
		}
	})
	for _, s := range []string{router.StepMarkTarget, router.StepMarkSource, router.StepDrain, router.StepKeys,
		router.StepFlip, router.StepSchedules, router.StepCopy, router.StepDelete, router.StepControls} {
		require.Positive(t, killed[s], "the mover was killed after step %s", s)
	}
	// A few more after the move, on the new shard.
	for n := produced.Load(); produced.Load() < n+20; {
		require.NoError(t, pause(ctx, 10*time.Millisecond))
	}
	stopProducers()
	pwg.Wait()

	// Every key's job completes (the dead letter stays dead).
	mu.Lock()
	total := len(ids) + 3
	mu.Unlock()
	require.Eventually(t, func() bool {
		var n int
		err := rp.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = $1 AND status IN ('completed', 'dead_lettered')`, q).Scan(&n)
		return err == nil && n == total
	}, 2*time.Minute, 50*time.Millisecond, "every job settles")
	stopWorkers()
	wg.Wait()

	// Where things are.
	var placed int
	require.NoError(t, rp.QueryRow(ctx, `SELECT backoff.router_queue_shard($1)`, q).Scan(&placed))
	require.Equal(t, to, placed)
	require.Zero(t, shardCount(t, from, "queue = $1 AND status NOT IN ('completed', 'cancelled')", q), "only history stays on the old shard")
	require.Equal(t, 1, shardCount(t, to, "queue = $1 AND status = 'dead_lettered' AND dedupe_key = 'dead' AND errors::text LIKE '%poison%'", q))
	src := pool(t, env.ShardURLs[from])
	dst := pool(t, env.ShardURLs[to])
	var n int
	require.NoError(t, dst.QueryRow(ctx, `SELECT count(*) FROM backoff.schedules WHERE queue = $1`, q).Scan(&n))
	require.Equal(t, 1, n, "the schedule moved")
	require.NoError(t, src.QueryRow(ctx, `SELECT count(*) FROM backoff.schedules WHERE queue = $1`, q).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, src.QueryRow(ctx, `SELECT count(*) FROM backoff.queue_moves WHERE queue = $1 AND direction = 'out' AND peer = $2`, q, to).Scan(&n))
	require.Equal(t, 1, n, "the old shard keeps refusing the queue")
	require.NoError(t, dst.QueryRow(ctx, `SELECT count(*) FROM backoff.queue_moves WHERE queue = $1`, q).Scan(&n))
	require.Zero(t, n)

	// Every key: one job, settled once; both enqueues named it (the
	// second may name its copy on the new shard).
	rows, err := rp.Query(ctx, `SELECT dedupe_key, count(*), min(id), min(status) FROM backoff.jobs WHERE queue = $1 GROUP BY 1`, q)
	require.NoError(t, err)
	type keyRow struct {
		n      int
		id     int64
		status string
	}
	byKey := map[string]keyRow{}
	for rows.Next() {
		var k string
		var r keyRow
		require.NoError(t, rows.Scan(&k, &r.n, &r.id, &r.status))
		byKey[k] = r
	}
	require.NoError(t, rows.Err())
	moved := map[int64]int64{}
	rows, err = dst.Query(ctx, `SELECT from_id, job_id FROM backoff.moved_jobs WHERE queue = $1`, q)
	require.NoError(t, err)
	for rows.Next() {
		var a, b int64
		require.NoError(t, rows.Scan(&a, &b))
		moved[a] = b
	}
	require.NoError(t, rows.Err())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, byKey, total)
	for k, got := range ids {
		r := byKey[k]
		require.Equal(t, 1, r.n, "key %s: one job", k)
		require.Equal(t, "completed", r.status, "key %s", k)
		require.Equal(t, 1, success[k], "key %s: completed once", k)
		for _, id := range got {
			require.True(t, id == r.id || moved[id] == r.id, "key %s: enqueue returned %d, the job is %d", k, id, r.id)
		}
	}
	require.Equal(t, 1, success["killed"], "the dying worker's job ran again elsewhere, once")
	require.Equal(t, 1, success["slow"])
	require.Equal(t, 1, shardCount(t, from, "id = $1 AND status = 'completed'", slowID), "the slow job completed where it ran")
	require.Zero(t, success["dead"])
	require.NotContains(t, moved, int64(0))

	// The dying worker wakes up: its id and token settle nothing.
	_, err = c.Complete(ctx, killedID, killedToken)
	require.Error(t, err, "a late completion of a moved or reaped job is refused")
	_, killedMoved := moved[killedID]
	t.Logf("moved %s from shard %d to %d: %d keys, %d jobs copied (the dying worker's: %v), %d enqueues refused during the flip, the mover killed after %v",
		q, from, to, total, len(moved), killedMoved, refused.Load(), killed)
}

// TestMoveQueueAbort kills a move between a batch's copy and its delete,
// lets workers complete half of the jobs on the new shard (copies whose
// originals are still on the old one among them), then aborts, the abort
// itself killed after each step: the jobs still waiting are back on the
// shard they came from, each key held by one job, none that completed
// left to run again, and the router sends the queue there again.
func TestMoveQueueAbort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, from := moveQueueName(t, "abort")
	to := (from + 2) % NShards
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)
	const jobs = 60
	for i := range jobs {
		_, err := c.Enqueue(ctx, q, map[string]int{"i": i}, client.DedupeKey(fmt.Sprintf("k%d", i)))
		require.NoError(t, err)
	}
	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	// Killed after its second batch is copied, before it is deleted.
	rctx, stop := context.WithCancel(ctx)
	copies := 0
	_, err = router.MoveQueue(rctx, conn, base, q, to, router.MoveOptions{Batch: 20, Step: func(s string) {
		if s == router.StepCopy {
			if copies++; copies == 2 {
				stop()
			}
		}
	}})
	stop()
	require.Error(t, err)
	require.Equal(t, 40, shardCount(t, to, "queue = $1", q))
	require.Equal(t, 40, shardCount(t, from, "queue = $1", q), "the second batch is on both shards, its copy recorded")

	// Meanwhile the router sends the queue to the new shard: a key
	// enqueued again names its job, wherever it is.
	for i := range jobs {
		_, err := c.Enqueue(ctx, q, map[string]int{"i": i}, client.DedupeKey(fmt.Sprintf("k%d", i)))
		require.NoError(t, err)
	}
	require.Equal(t, jobs, shardCount(t, from, "queue = $1", q)+shardCount(t, to, "queue = $1", q)-20)
	// Workers complete half of the jobs on the new shard, among them
	// copies whose originals are still on the old one.
	for done := 0; done < jobs/2; {
		claimed, err := c.Claim(ctx, q, 5, time.Minute)
		require.NoError(t, err)
		require.NotEmpty(t, claimed)
		for _, j := range claimed {
			require.Equal(t, to, router.ShardOfJob(j.ID))
			_, err := c.Complete(ctx, j.ID, j.Token)
			require.NoError(t, err)
			done++
		}
	}
	require.Equal(t, 10, shardCount(t, from, "queue = $1 AND dedupe_key IN ('k20', 'k21', 'k22', 'k23', 'k24', 'k25', 'k26', 'k27', 'k28', 'k29')", q),
		"completed copies whose originals are still on the old shard")

	// Abort, itself killed once after each of its steps.
	o := router.MoveOptions{Abort: true, Batch: 20}
	for kill := 1; ; kill++ {
		require.Less(t, kill, 100)
		actx, stop := context.WithCancel(ctx)
		steps := 0
		o.Step = func(string) {
			if steps++; steps == kill {
				stop()
			}
		}
		c2, err := pgx.Connect(ctx, env.RouterURL)
		require.NoError(t, err)
		if kill == 1 {
			_, err = router.MoveQueue(actx, c2, base, q, -1, o)
		} else {
			// An interrupted abort is a move back under way: finish it.
			o.Abort = false
			_, err = router.MoveQueue(actx, c2, base, q, from, o)
		}
		stop()
		c2.Close(context.Background())
		if err == nil {
			break
		}
		require.ErrorIs(t, err, context.Canceled)
	}

	// Back on the old shard: the jobs that waited (the originals of the
	// completed copies gone), each key once; the completed ones stay on
	// the new shard as history.
	var placed int
	require.NoError(t, rp.QueryRow(ctx, `SELECT backoff.router_queue_shard($1)`, q).Scan(&placed))
	require.Equal(t, from, placed)
	require.Equal(t, jobs/2, shardCount(t, to, "queue = $1 AND status = 'completed'", q))
	require.Equal(t, jobs/2, shardCount(t, to, "queue = $1", q))
	require.Equal(t, jobs/2, shardCount(t, from, "queue = $1 AND status = 'pending'", q))
	require.Equal(t, jobs/2, shardCount(t, from, "queue = $1", q))
	for i := range jobs {
		key := fmt.Sprintf("k%d", i)
		require.Equal(t, 1, shardCount(t, from, "queue = $1 AND dedupe_key = $2", q, key)+shardCount(t, to, "queue = $1 AND dedupe_key = $2", q, key), key)
	}
	// Dedupe keys hold on the old shard again, and its jobs are claimed
	// there.
	id, err := c.Enqueue(ctx, q, map[string]int{"i": 40}, client.DedupeKey("k40"))
	require.NoError(t, err)
	require.Equal(t, from, router.ShardOfJob(id))
	require.Equal(t, jobs/2, shardCount(t, from, "queue = $1", q))
	done := 0
	for done < jobs/2 {
		claimed, err := c.Claim(ctx, q, 10, time.Minute)
		require.NoError(t, err)
		require.NotEmpty(t, claimed)
		for _, j := range claimed {
			_, err := c.Complete(ctx, j.ID, j.Token)
			require.NoError(t, err)
			done++
		}
	}
	require.Equal(t, jobs/2, shardCount(t, from, "queue = $1 AND status = 'completed'", q))
}

// TestMoveQueueWaitsAndRefuses: a move waits for the jobs running on the
// old shard and, past its wait, stops where it is and resumes when run
// again; the state of the queue's controls moves with it; a queue in a workflow is refused mid-move and then moved back with
// --abort, its jobs and edges intact; the old shard refuses direct
// enqueues, acquires and replays of a queue moved away.
func TestMoveQueueWaitsAndRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)
	move := func(q string, to int, o router.MoveOptions) error {
		conn, err := pgx.Connect(ctx, env.RouterURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = router.MoveQueue(ctx, conn, base, q, to, o)
		return err
	}

	// Two running jobs, one holding a dedupe key: the move copies the rest
	// and waits for them.
	q, from := moveQueueName(t, "wait")
	to := (from + 1) % NShards
	keyed, err := c.Enqueue(ctx, q, nil, client.DedupeKey("held"), client.Priority(10))
	require.NoError(t, err)
	for i := range 5 {
		_, err := c.Enqueue(ctx, q, map[string]int{"i": i})
		require.NoError(t, err)
	}
	running, err := c.Claim(ctx, q, 2, time.Hour)
	require.NoError(t, err)
	require.Len(t, running, 2)
	require.Equal(t, keyed, running[0].ID)
	// The state of its controls (as a rate and a breaker leave it).
	src := pool(t, env.ShardURLs[from])
	for _, stmt := range []string{
		`INSERT INTO backoff.queue_tokens (queue, slot, tokens, refilled_at) VALUES ($1, 0, 2.5, now()), ($1, 1, 1, now())`,
		`INSERT INTO backoff.queue_failures (queue, failed_at) VALUES ($1, now())`,
		`INSERT INTO backoff.queue_breakers (queue, opened_at, half_open_at, counted_from) VALUES ($1, NULL, NULL, now())`,
	} {
		_, err = src.Exec(ctx, stmt, q)
		require.NoError(t, err)
	}
	waiting := func(running int) {
		t.Helper()
		for {
			// A wait of a millisecond: past it while jobs run (a run that
			// stopped at a transaction in flight on the old shard goes
			// again).
			err = move(q, to, router.MoveOptions{Wait: time.Millisecond, Poll: time.Millisecond})
			require.ErrorIs(t, err, router.ErrMoveWaiting)
			if !strings.Contains(err.Error(), "transactions that were open") {
				break
			}
		}
		require.ErrorContains(t, err, fmt.Sprintf("%d jobs still running on shard %d", running, from))
	}
	waiting(2)
	require.Equal(t, 4, shardCount(t, to, "queue = $1 AND status = 'pending'", q))
	require.Equal(t, 2, shardCount(t, from, "queue = $1", q))
	// The new shard holds the running job's key for it...
	again, err := c.Enqueue(ctx, q, nil, client.DedupeKey("held"))
	require.NoError(t, err)
	require.Equal(t, keyed, again)
	// ...until it completes on the old shard, where it runs.
	_, err = c.Complete(ctx, running[0].ID, running[0].Token)
	require.NoError(t, err, "a running job completes where it runs")
	waiting(1)
	again, err = c.Enqueue(ctx, q, nil, client.DedupeKey("held"))
	require.NoError(t, err)
	require.Equal(t, to, router.ShardOfJob(again), "a key freed on the old shard is free on the new one")
	_, err = c.Complete(ctx, running[1].ID, running[1].Token)
	require.NoError(t, err)
	require.NoError(t, move(q, to, router.MoveOptions{}))
	require.Equal(t, 2, shardCount(t, from, "queue = $1 AND status = 'completed'", q))
	require.Equal(t, 5, shardCount(t, to, "queue = $1 AND status = 'pending'", q))
	dst := pool(t, env.ShardURLs[to])
	controls := `SELECT (SELECT coalesce(sum(tokens), 0) FROM backoff.queue_tokens WHERE queue = $1)
	                  + (SELECT count(*) FROM backoff.queue_failures WHERE queue = $1)
	                  + (SELECT count(*) FROM backoff.queue_breakers WHERE queue = $1)`
	var state float64
	require.NoError(t, dst.QueryRow(ctx, controls, q).Scan(&state))
	require.Equal(t, 5.5, state, "the controls' state moved")
	require.NoError(t, src.QueryRow(ctx, controls, q).Scan(&state))
	require.Zero(t, state)

	// The old shard, reached directly, refuses the queue.
	_, err = src.Exec(ctx, `SELECT backoff.enqueue($1)`, q)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55006", pgErr.Code)
	require.Contains(t, pgErr.Message, fmt.Sprintf("the queue moves to shard %d", to))
	var n int
	require.NoError(t, src.QueryRow(ctx, `SELECT count(*) FROM backoff.claim($1, 'w')`, q).Scan(&n))
	require.Zero(t, n)

	// A workflow: refused before anything changes.
	q2, from2 := moveQueueName(t, "graph")
	to2 := (from2 + 1) % NShards
	graph := func(q string) {
		g := client.NewGraph()
		g.Add("a", q, nil, nil)
		g.Add("b", q, nil, []client.Dependency{client.After("a")})
		_, err := c.EnqueueGraph(ctx, g)
		require.NoError(t, err)
	}
	graph(q2)
	err = move(q2, to2, router.MoveOptions{})
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55006", pgErr.Code)
	require.Contains(t, pgErr.Message, "blocked jobs or jobs in a workflow")
	require.NoError(t, rp.QueryRow(ctx, `SELECT backoff.router_queue_shard($1)`, q2).Scan(&n))
	require.Equal(t, from2, n)
	require.NoError(t, rp.QueryRow(ctx, `SELECT count(*) FROM backoff.queue_moves WHERE queue = $1`, q2).Scan(&n))
	require.Zero(t, n, "no shard marked")
	require.ErrorContains(t, move(q2, -1, router.MoveOptions{Abort: true}), "no move of this queue is under way")

	// A graph enqueued after the move began (its first run killed after
	// its first mark) stops it once the old shard is marked; abort brings
	// the queue back whole.
	q3, from3 := moveQueueName(t, "graph-late")
	to3 := (from3 + 1) % NShards
	_, err = c.Enqueue(ctx, q3, nil, client.DedupeKey("plain"))
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	kctx, kill := context.WithCancel(ctx)
	_, err = router.MoveQueue(kctx, conn, base, q3, to3, router.MoveOptions{Step: func(string) { kill() }})
	kill()
	conn.Close(context.Background())
	require.ErrorIs(t, err, context.Canceled)
	graph(q3)
	err = move(q3, to3, router.MoveOptions{})
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55006", pgErr.Code)
	require.Contains(t, pgErr.Message, "blocked jobs or jobs in a workflow")
	require.NoError(t, move(q3, -1, router.MoveOptions{Abort: true}))
	require.Equal(t, 3, shardCount(t, from3, "queue = $1 AND status IN ('pending', 'blocked')", q3))
	require.Zero(t, shardCount(t, to3, "queue = $1", q3))
	id, err := c.Enqueue(ctx, q3, nil, client.DedupeKey("plain"))
	require.NoError(t, err)
	require.Equal(t, from3, router.ShardOfJob(id))
	require.Equal(t, 3, shardCount(t, from3, "queue = $1", q3), "the key still holds")
}

// pause waits for d or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TestMoveQueueFiresEachSlotOnce: a schedule that fires every slot
// (catch_up all) moves with its queue. The old shard fires none of its
// slots once marked, the new one fires those that came due meanwhile when
// the schedule arrives, and no slot is enqueued twice across the shards:
// the slot fired before the move moves as a waiting job.
func TestMoveQueueFiresEachSlotOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, from := moveQueueName(t, "move-slots")
	to := (from + 1) % NShards
	name := q + "-minutely"
	anchor := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	minute := func(n int) time.Time { return anchor.Add(time.Duration(n) * time.Minute) }
	rp := pool(t, env.RouterURL)
	_, err := rp.Exec(ctx, `SELECT backoff.put_schedule($1, $2, p_every => interval '1 minute', p_catch_up => 'all', p_anchor => $3, p_now => $3)`, name, q, anchor)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = rp.Exec(context.Background(), `SELECT backoff.drop_schedule($1)`, name) })
	shards := map[int]*pgx.Conn{}
	for _, k := range []int{from, to} {
		c, err := pgx.Connect(ctx, env.ShardURLs[k])
		require.NoError(t, err)
		defer c.Close(context.Background())
		shards[k] = c
	}
	fire := func(k, at int) []time.Time {
		rows, err := shards[k].Query(ctx, `SELECT slot FROM backoff.fire_schedules(p_now => $1) WHERE schedule = $2`, minute(at), name)
		require.NoError(t, err)
		slots, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		require.NoError(t, err)
		return slots
	}
	require.Len(t, fire(from, 1), 1, "before the move the old shard fires")

	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = router.MoveQueue(ctx, conn, base, q, to, router.MoveOptions{Step: func(s string) {
		switch s {
		case router.StepMarkSource:
			require.Empty(t, fire(from, 2), "marked, the old shard fires nothing")
		case router.StepSchedules:
			require.Empty(t, fire(from, 3), "the schedule left the old shard")
			require.Len(t, fire(to, 3), 2, "the new shard fires the slots that came due meanwhile")
		}
	}})
	require.NoError(t, err)
	require.Len(t, fire(to, 4), 1)

	var slots []time.Time
	for _, k := range []int{from, to} {
		rows, err := shards[k].Query(ctx, `SELECT schedule_slot FROM backoff.jobs WHERE schedule = $1 ORDER BY schedule_slot`, name)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		require.NoError(t, err)
		if k == from {
			require.Empty(t, got, "the old shard keeps no job of the schedule")
		}
		for _, g := range got {
			slots = append(slots, g.UTC())
		}
	}
	var want []time.Time
	for n := 1; n <= 4; n++ {
		want = append(want, minute(n))
	}
	require.Equal(t, want, slots, "each slot once")
}
