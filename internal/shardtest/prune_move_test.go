package shardtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// TestPruneForgetsMovedJobs: prune deletes the old ids of the moved jobs
// it deletes (backoff.moved_jobs), but not while the queue's move to the
// shard is under way, when the mover still reads them: a copy completed
// and pruned on the new shard whose original is still on the old one (the
// mover killed between a batch's copy and its delete) is not copied
// again when the move goes on.
func TestPruneForgetsMovedJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, from := moveQueueName(t, "prune-moved")
	to := (from + 1) % NShards
	c, err := client.New(ctx, pool(t, env.RouterURL))
	require.NoError(t, err)
	const jobs = 20
	for range jobs {
		_, err := c.Enqueue(ctx, q, nil)
		require.NoError(t, err)
	}
	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	// Killed after its first batch is copied, before it is deleted.
	rctx, stop := context.WithCancel(ctx)
	_, err = router.MoveQueue(rctx, conn, base, q, to, router.MoveOptions{Batch: 10, Step: func(s string) {
		if s == router.StepCopy {
			stop()
		}
	}})
	stop()
	require.Error(t, err)
	dest, err := pgx.Connect(ctx, env.ShardURLs[to])
	require.NoError(t, err)
	defer dest.Close(context.Background())
	movedIDs := func() int {
		var n int
		require.NoError(t, dest.QueryRow(ctx, `SELECT count(*) FROM backoff.moved_jobs WHERE queue = $1`, q).Scan(&n))
		return n
	}
	require.Equal(t, 10, movedIDs())

	// The copies run on the new shard and are pruned there: their old
	// ids stay while the move is under way.
	// runTen claims and completes the queue's ten due jobs.
	runTen := func() {
		for done := 0; done < 10; {
			claimed, err := c.Claim(ctx, q, 10, time.Minute)
			require.NoError(t, err)
			require.NotEmpty(t, claimed)
			for _, j := range claimed {
				_, err := c.Complete(ctx, j.ID, j.Token)
				require.NoError(t, err)
				done++
			}
		}
	}
	runTen()
	// Prune every finished job of the shard (other tests' too), then
	// count the queue's.
	prune := func() int {
		for {
			var n int
			require.NoError(t, dest.QueryRow(ctx, `SELECT backoff.prune(interval '0', 1000, now() + interval '1 minute')`).Scan(&n))
			if n < 1000 {
				return shardCount(t, to, "queue = $1 AND status = 'completed'", q)
			}
		}
	}
	require.Zero(t, prune())
	require.Equal(t, 10, movedIDs(), "kept while the move is under way")

	// The move goes on: the pruned copies' originals are deleted, not
	// copied again; the other ten move.
	_, err = router.MoveQueue(ctx, conn, base, q, to, router.MoveOptions{})
	require.NoError(t, err)
	require.Zero(t, shardCount(t, from, "queue = $1", q))
	require.Equal(t, 10, shardCount(t, to, "queue = $1", q), "the ten pruned copies were not copied again")

	// Done: prune deletes the old ids with their jobs.
	runTen()
	require.Zero(t, prune())
	require.Equal(t, 10, movedIDs(), "the old ids of the jobs pruned during the move stay")
}
