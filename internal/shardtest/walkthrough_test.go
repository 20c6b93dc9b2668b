package shardtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/router"
	"github.com/pgbackoff/pgbackoff/internal/shardcluster"
	"github.com/pgbackoff/pgbackoff/migrations"
)

// TestFromOneDatabaseToTwoShards follows docs/sharding.md, "From one
// database to two shards": an application's pgbackoff database, with jobs
// waiting and running, becomes shard 0 behind a new router; an empty
// database becomes shard 1; a queue moves there while a Worker in direct
// mode runs both queues and the jobs that were running finish. Every job
// completes once, the moved queue's last ones on shard 1.
func TestFromOneDatabaseToTwoShards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	suffix := rand.IntN(1_000_000)
	soloURL := newDatabase(t, env.ShardURLs[0], fmt.Sprintf("walk_solo_%d", suffix))
	secondURL := newDatabase(t, env.ShardURLs[1], fmt.Sprintf("walk_second_%d", suffix))
	routerURL := newDatabase(t, env.RouterURL, fmt.Sprintf("walk_router_%d", suffix))

	// The one database, migrated and in use: jobs waiting in two queues,
	// five of them running.
	conn, err := pgx.Connect(ctx, soloURL)
	require.NoError(t, err)
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	_, _, err = m.MigrateTo(ctx, migrations.Latest())
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	solo, err := client.New(ctx, pool(t, soloURL))
	require.NoError(t, err)
	const each = 50
	for i := range each {
		for _, q := range []string{"emails", "reports"} {
			_, err := solo.Enqueue(ctx, q, map[string]string{"n": fmt.Sprintf("%s-%d", q, i)})
			require.NoError(t, err)
		}
	}
	running, err := solo.Claim(ctx, "emails", 5, 10*time.Minute)
	require.NoError(t, err)
	require.Len(t, running, 5)

	// migrate up --router --shard SOLO, then shards add SECOND.
	rc, err := pgx.Connect(ctx, routerURL)
	require.NoError(t, err)
	defer rc.Close(context.Background())
	require.NoError(t, migrations.InstallRouter(ctx, rc, []string{soloURL}))
	base, err := pgx.ParseConfig(routerURL)
	require.NoError(t, err)
	k, err := migrations.AddRouterShard(ctx, rc, base, secondURL)
	require.NoError(t, err)
	require.Equal(t, 1, k)

	// The application now talks to the router: a Worker in direct mode
	// for both queues, producers through the router.
	rp := pool(t, routerURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)
	var mu sync.Mutex
	ran := map[string]int{}  // payload -> successful runs
	onShard := map[int]int{} // shard -> jobs of emails run there
	handler := func(ctx context.Context, j *client.Job) error {
		var p struct{ N string }
		if err := j.UnmarshalPayload(&p); err != nil {
			return client.Permanent(err)
		}
		mu.Lock()
		defer mu.Unlock()
		ran[p.N]++
		if j.Queue == "emails" {
			onShard[sharding.ShardOfJob(j.ID)]++
		}
		return nil
	}
	var qc []client.QueueConfig
	for _, q := range []string{"emails", "reports"} {
		qc = append(qc, client.QueueConfig{Queue: q, Handler: handler, Concurrency: 4, Lease: time.Minute})
	}
	w, err := client.NewWorker(pool(t, routerURL), client.WorkerConfig{Queues: qc, DirectShards: true},
		client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()

	// shards move emails --to 1, while the five jobs claimed before the
	// router existed still run on shard 0.
	_, err = migrations.MoveRouterQueue(ctx, rc, base, "emails", 1, migrations.MoveOptions{
		Step: func(s string) {
			if s != router.StepFlip {
				return
			}
			for _, j := range running {
				_, err := c.Complete(ctx, j.ID, j.Token)
				require.NoError(t, err, "a job claimed on the one database settles through the router")
			}
			running = nil
		},
	})
	require.NoError(t, err)
	for i := range 20 {
		id, err := c.Enqueue(ctx, "emails", map[string]string{"n": fmt.Sprintf("emails-after-%d", i)})
		require.NoError(t, err)
		require.Equal(t, 1, sharding.ShardOfJob(id), "enqueued on the new shard")
	}

	waitFor(t, 2*time.Minute, "every job ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == 2*each-5+20
	})
	stop()
	require.NoError(t, <-done)
	for n, runs := range ran {
		require.Equal(t, 1, runs, "job %s ran once", n)
	}
	require.Positive(t, onShard[1], "emails' jobs ran on shard 1")
	var left int
	require.NoError(t, rp.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE status NOT IN ('completed')`).Scan(&left))
	require.Zero(t, left, "nothing unfinished on either shard")
}

// newDatabase makes a database on the server of url, dropped when the test
// ends (the last made is dropped first: make the router's last).
func newDatabase(t *testing.T, url, name string) string {
	t.Helper()
	ctx := context.Background()
	admin := shardcluster.WithDatabase(url, "postgres")
	c, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), admin); err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	return shardcluster.WithDatabase(url, name)
}
