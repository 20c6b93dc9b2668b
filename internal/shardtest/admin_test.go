package shardtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestPauseQueueThroughRouter: pause_queue and resume_queue write every
// shard's backoff.queues (the configuration stays equal everywhere) and the
// queue's shard stops and restarts handing out its jobs. A queue whose
// jobs live on one shard is paused without p_create; one that no shard
// knows is refused.
func TestPauseQueueThroughRouter(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var has bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regproc('backoff.pause_queue') IS NOT NULL`).Scan(&has))
	if !has {
		t.Skip("backoff.pause_queue is not in this schema yet")
	}
	q := queuesOnEveryShard(t, "pause")[2]
	_, err = conn.Exec(ctx, `SELECT backoff.enqueue($1)`, q)
	require.NoError(t, err)

	// The queue's jobs live on one shard, which knows the queue: the
	// router pauses it there and creates its row on the other shards, so
	// no --create is needed. A queue no shard knows is refused, naming it.
	var changed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT backoff.pause_queue($1)`, q).Scan(&changed))
	require.True(t, changed)
	require.NoError(t, conn.QueryRow(ctx, `SELECT backoff.pause_queue($1)`, q).Scan(&changed))
	require.False(t, changed, "already paused on every shard")
	unknown := q + "-unknown"
	_, err = conn.Exec(ctx, `SELECT backoff.pause_queue($1)`, unknown)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22023", pgErr.Code)
	require.Contains(t, pgErr.Message, `cannot pause queue "`+unknown+`": no such queue`)
	for k := range NShards {
		sc, err := pgx.Connect(ctx, env.ShardURLs[k])
		require.NoError(t, err)
		var rows int
		err = sc.QueryRow(ctx, `SELECT count(*) FROM backoff.queues WHERE name = $1`, unknown).Scan(&rows)
		sc.Close(ctx)
		require.NoError(t, err)
		require.Zero(t, rows, "a refused pause leaves no row on shard %d", k)
	}
	for k := range NShards {
		sc, err := pgx.Connect(ctx, env.ShardURLs[k])
		require.NoError(t, err)
		var paused bool
		err = sc.QueryRow(ctx, `SELECT paused FROM backoff.queues WHERE name = $1`, q).Scan(&paused)
		sc.Close(ctx)
		require.NoError(t, err, "shard %d has the queue's row", k)
		require.True(t, paused, "shard %d", k)
	}
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.claim($1, 'w')`, q).Scan(&n))
	require.Zero(t, n, "a paused queue hands out nothing")

	require.NoError(t, conn.QueryRow(ctx, `SELECT backoff.resume_queue($1)`, q).Scan(&changed))
	require.True(t, changed)
	var id int64
	var attempt int
	require.NoError(t, conn.QueryRow(ctx, `SELECT id, attempts FROM backoff.claim($1, 'w')`, q).Scan(&id, &attempt))
	// Leave nothing behind for the other tests, which share the shards: the
	// job settled (no lease for their reap to find) and the queue rows gone
	// (their config diff would report them).
	_, err = conn.Exec(ctx, `SELECT backoff.complete($1, $2)`, id, attempt)
	require.NoError(t, err)
	for k := range NShards {
		sc, err := pgx.Connect(ctx, env.ShardURLs[k])
		require.NoError(t, err)
		_, err = sc.Exec(ctx, `DELETE FROM backoff.queues WHERE name = $1`, q)
		sc.Close(ctx)
		require.NoError(t, err, "shard %d", k)
	}
}
