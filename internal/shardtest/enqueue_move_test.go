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

// TestEnqueueWaitsOutAMove: between the old shard's mark and the router's
// flip, an enqueue of the moving queue through the router is refused
// (55006); the Go client on a pool tries again until the flip and returns
// the new shard's job, or, when its context ends first, returns both
// causes. In the caller's transaction it returns ErrQueueMoving at once.
func TestEnqueueWaitsOutAMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, from := moveQueueName(t, "enqueue-waits")
	to := (from + 1) % NShards
	c, err := client.New(ctx, pool(t, env.RouterURL))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, q, nil)
	require.NoError(t, err)

	var during int64
	var duringErr error
	done := make(chan struct{})
	opts := router.MoveOptions{Step: func(s string) {
		if s != router.StepMarkSource {
			return
		}
		// The mover waits here: the old shard refuses the queue, and
		// the router still sends it there.
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := c.Enqueue(short, q, nil)
		cancel()
		require.ErrorIs(t, err, client.ErrQueueMoving)
		require.ErrorIs(t, err, context.DeadlineExceeded, "tried again until the deadline")

		shard, err := pgx.Connect(ctx, env.ShardURLs[from])
		require.NoError(t, err)
		defer shard.Close(ctx)
		tx, err := shard.Begin(ctx)
		require.NoError(t, err)
		_, err = c.With(tx).Enqueue(ctx, q, nil)
		require.ErrorIs(t, err, client.ErrQueueMoving)
		require.NoError(t, tx.Rollback(ctx))

		go func() {
			defer close(done)
			during, duringErr = c.Enqueue(ctx, q, nil)
		}()
	}}
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	_, err = router.MoveQueue(ctx, conn, base, q, to, opts)
	require.NoError(t, err)
	<-done
	require.NoError(t, duringErr)
	require.Equal(t, to, router.ShardOfJob(during), "enqueued on the new shard")
}
