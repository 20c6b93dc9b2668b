package shardtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// TestEnqueueInOwnTransactionOnTheShard: through the router an enqueue
// commits on the shard whatever the caller's transaction does; on the
// queue's shard, found with client/sharding, it commits or rolls back with
// the caller's writes.
func TestEnqueueInOwnTransactionOnTheShard(t *testing.T) {
	ctx := context.Background()
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)
	base, err := pgxpool.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	pools := sharding.NewPools(rp, base)
	defer pools.Close()

	for k, q := range queuesOnEveryShard(t, "tx") {
		s, err := sharding.Lookup(ctx, rp, q)
		require.NoError(t, err)
		require.Equal(t, k, s.Number)
		shard, err := pools.ForQueue(ctx, q)
		require.NoError(t, err)

		// Rolled back with the caller's transaction: no job.
		tx, err := shard.Begin(ctx)
		require.NoError(t, err)
		id, err := c.With(tx).Enqueue(ctx, q, nil)
		require.NoError(t, err)
		require.Equal(t, k, router.ShardOfJob(id))
		require.NoError(t, tx.Rollback(ctx))
		_, err = c.Get(ctx, id)
		require.ErrorIs(t, err, client.ErrJobNotFound)

		// Committed with it: the router sees the job.
		err = pgx.BeginFunc(ctx, shard, func(tx pgx.Tx) error {
			id, err = c.With(tx).Enqueue(ctx, q, nil)
			return err
		})
		require.NoError(t, err)
		j, err := c.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, q, j.Queue)

		// Through the router, a rollback does not undo the enqueue.
		rtx, err := rp.Begin(ctx)
		require.NoError(t, err)
		id, err = c.With(rtx).Enqueue(ctx, q, nil)
		require.NoError(t, err)
		require.NoError(t, rtx.Rollback(ctx))
		_, err = c.Get(ctx, id)
		require.NoError(t, err, "the router's enqueue committed on the shard")
	}
}
