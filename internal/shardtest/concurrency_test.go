package shardtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// TestConcurrentWorkersThroughRouter runs two Go Workers per queue, one
// queue on each shard, all connected to the router, over jobs of which
// every fifth fails its first attempt. With local clusters, shard 1 is
// restarted once a third of the jobs are done. Accounting at the end, read
// on each shard directly: every job enqueued is completed exactly once on
// its own shard, no row is lost, added or moved; a handler ran a job's
// successful attempt twice only when the shard lost the first completion
// (its job then has a later attempt recorded).
func TestConcurrentWorkersThroughRouter(t *testing.T) {
	const perQueue = 300
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	queues := queuesOnEveryShard(t, "conc")
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)

	want := map[int64]string{}
	for _, q := range queues {
		var batch []client.NewJob
		for i := range perQueue {
			batch = append(batch, client.NewJob{Queue: q, Payload: map[string]int{"i": i}})
		}
		ids, err := c.EnqueueMany(ctx, batch)
		require.NoError(t, err)
		for _, id := range ids {
			want[id] = q
		}
	}
	total := len(want)
	require.Equal(t, NShards*perQueue, total)

	var (
		mu        sync.Mutex
		successes = map[int64]int{}
		done      atomic.Int64
		restarted = make(chan struct{})
	)
	handler := func(_ context.Context, j *client.Job) error {
		if j.ID%5 == 0 && j.Token == 1 {
			return client.RetryAfter(errors.New("first attempt fails"), 10*time.Millisecond)
		}
		mu.Lock()
		successes[j.ID]++
		first := successes[j.ID] == 1
		mu.Unlock()
		if first {
			done.Add(1)
		}
		return nil
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, q := range queues {
		for w := range 2 {
			wk, err := client.NewWorker(rp, client.WorkerConfig{
				Queue: q, Handler: handler, Concurrency: 4, Lease: 2 * time.Second,
				PollInterval: 20 * time.Millisecond, ReapInterval: 200 * time.Millisecond,
				ShutdownTimeout: 5 * time.Second, DisableListen: true,
			}, client.WithWorkerID(fmt.Sprintf("%s-w%d", q, w)), client.WithLogger(quiet))
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = wk.Run(wctx)
			}()
		}
	}

	// A shard restart in the middle.
	canRestart := env.Local()
	go func() {
		defer close(restarted)
		if !canRestart {
			return
		}
		for done.Load() < int64(total/3) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		if err := env.RestartShard(ctx, 1); err != nil {
			t.Errorf("restart shard 1: %v", err)
		}
	}()

	// Wait until every job is completed on its shard (read through the
	// router, which also proves it reconnected after the restart).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		err := rp.QueryRow(ctx, "SELECT count(*) FROM backoff.jobs WHERE status = 'completed' AND queue LIKE 'conc-%'").Scan(&n)
		if err == nil && n == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs completed (last error: %v)", n, total, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-restarted
	stopWorkers()
	wg.Wait()

	// Accounting on each shard directly.
	seen := 0
	for k := range NShards {
		rows := shardRows(t, k)
		for _, r := range rows {
			q, ok := want[r.id]
			require.True(t, ok, "shard %d holds job %d that nobody enqueued", k, r.id)
			require.Equal(t, q, r.queue)
			require.Equal(t, k, router.ShardOfJob(r.id))
			require.Equal(t, router.QueueShard(q, NShards), k)
			require.Equal(t, "completed", r.status, "job %d", r.id)
			mu.Lock()
			runs := successes[r.id]
			mu.Unlock()
			require.GreaterOrEqual(t, runs, 1, "job %d completed without a successful run", r.id)
			if runs > 1 {
				require.Greater(t, r.attempts, 1, "job %d ran twice successfully in one attempt", r.id)
			}
			if r.id%5 == 0 {
				require.GreaterOrEqual(t, r.attempts, 2, "job %d failed its first attempt", r.id)
			}
			seen++
		}
	}
	require.Equal(t, total, seen, "rows on the shards")
	doubles := 0
	for _, n := range successes {
		if n > 1 {
			doubles++
		}
	}
	t.Logf("%d jobs over %d shards; shard 1 restarted: %v; jobs run again after a lost completion: %d", total, NShards, canRestart, doubles)
}

type jobRow struct {
	id       int64
	queue    string
	status   string
	attempts int
}

func shardRows(t *testing.T, k int) []jobRow {
	t.Helper()
	ctx := context.Background()
	p := pool(t, env.ShardURLs[k])
	rows, err := p.Query(ctx, "SELECT id, queue, status, attempts FROM backoff.jobs WHERE queue LIKE 'conc-%' ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	var out []jobRow
	for rows.Next() {
		var r jobRow
		require.NoError(t, rows.Scan(&r.id, &r.queue, &r.status, &r.attempts))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}
