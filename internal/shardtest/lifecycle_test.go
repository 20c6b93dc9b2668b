package shardtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/router"
	"github.com/pgbackoff/pgbackoff/internal/shardcluster"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// queuesOnEveryShard returns, for each shard k, a queue name with prefix
// that the router places on shard k.
func queuesOnEveryShard(t *testing.T, prefix string) []string {
	t.Helper()
	return shardcluster.QueuesOnEveryShard(prefix)
}

func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// shardCount counts rows of backoff.jobs on shard k directly.
func shardCount(t *testing.T, k int, where string, args ...any) int {
	t.Helper()
	return shardRowsWhere(t, k, "SELECT count(*) FROM backoff.jobs WHERE "+where, args...)
}

// TestLifecycle drives jobs of a queue on every shard through the Go client
// connected to the router: enqueue (single and bulk across shards), claim,
// fail and retry by the policy's delays, dead letter, replay, complete,
// cancel, heartbeat, snooze, complete_many across shards, stats, reap and
// prune; each job lives on its queue's shard and every call on its id
// reaches it there.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	now := t0
	clock := func() time.Time { return now }
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp, client.WithClock(clock), client.WithWorkerID("w1"))
	require.NoError(t, err)
	o := ops.New(rp, ops.WithClock(clock))
	queues := queuesOnEveryShard(t, "life")

	for k, q := range queues {
		now = t0
		id, err := c.Enqueue(ctx, q, map[string]int{"n": k}, client.MaxAttempts(3))
		require.NoError(t, err)
		require.Equal(t, k, router.ShardOfJob(id), "queue %s's job on its shard", q)
		require.Equal(t, 1, shardCount(t, k, "id = $1 AND queue = $2", id, q))

		for attempt := 1; attempt <= 3; attempt++ {
			jobs, err := c.Claim(ctx, q, 1, time.Minute)
			require.NoError(t, err)
			require.Len(t, jobs, 1, "attempt %d claimable at %v", attempt, now)
			require.Equal(t, id, jobs[0].ID)
			require.Equal(t, attempt, jobs[0].Token)
			if attempt == 1 {
				until, err := c.Heartbeat(ctx, id, attempt, 2*time.Minute)
				require.NoError(t, err)
				require.True(t, until.Equal(now.Add(2*time.Minute)))
			}
			f, err := c.Fail(ctx, id, attempt, "boom")
			require.NoError(t, err)
			if attempt < 3 {
				require.Equal(t, client.StatusRetrying, f.Status)
				require.True(t, f.RunAt.After(now))
				early, err := c.Claim(ctx, q, 1, time.Minute)
				require.NoError(t, err)
				require.Empty(t, early, "not due before run_at")
				now = f.RunAt
				continue
			}
			require.Equal(t, client.StatusDeadLettered, f.Status)
			require.Equal(t, "max_attempts", f.DeadLetterReason)
		}
		dead, err := o.List(ctx, ops.ListParams{Queue: q, Statuses: []client.Status{client.StatusDeadLettered}})
		require.NoError(t, err)
		require.Len(t, dead.Jobs, 1)
		require.Len(t, dead.Jobs[0].Errors, 3)

		r, err := o.Replay(ctx, id)
		require.NoError(t, err)
		require.Equal(t, client.StatusPending, r.Status)
		jobs, err := c.Claim(ctx, q, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		s, err := c.Snooze(ctx, id, jobs[0].Token, time.Hour)
		require.NoError(t, err)
		require.True(t, s.RunAt.Equal(now.Add(time.Hour)))
		now = now.Add(time.Hour)
		jobs, err = c.Claim(ctx, q, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		done, err := c.Complete(ctx, id, jobs[0].Token)
		require.NoError(t, err)
		require.Equal(t, client.StatusCompleted, done.Status)
		got, err := c.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, client.StatusCompleted, got.Status)

		// A stale attempt is fenced off by the shard, and the error maps as
		// it does on one database.
		_, err = c.Complete(ctx, id, 1)
		require.True(t, errors.Is(err, client.ErrInvalidTransition) || errors.Is(err, client.ErrStaleAttempt), "err %v", err)
		_, err = c.Complete(ctx, int64(k)<<router.ShardBits+999_999, 1)
		require.ErrorIs(t, err, client.ErrJobNotFound)

		cid, err := c.Enqueue(ctx, q, nil)
		require.NoError(t, err)
		cj, err := o.Cancel(ctx, cid, "not needed")
		require.NoError(t, err)
		require.Equal(t, client.StatusCancelled, cj.Status)
	}

	// Bulk enqueue across every shard: ids in input order, each on its
	// queue's shard.
	var batch []client.NewJob
	for i := range 30 {
		batch = append(batch, client.NewJob{Queue: queues[(i*7)%NShards], Payload: map[string]int{"i": i}})
	}
	ids, err := c.EnqueueMany(ctx, batch)
	require.NoError(t, err)
	require.Len(t, ids, len(batch))
	for i, id := range ids {
		require.Equal(t, router.QueueShard(batch[i].Queue, NShards), router.ShardOfJob(id), "element %d", i)
		j, err := c.Get(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"i": %d}`, i), string(j.Payload), "element %d's id is its own job", i)
	}
	// A batch the shard refuses gets the shard's own error, not PL/Proxy's.
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT backoff.enqueue($1::text[], ARRAY['{}']::jsonb[], NULL, NULL, NULL, NULL)`, queues)
	require.Equal(t, "22023", sqlstate(err), "arrays of other lengths: %v", err)
	var none int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.enqueue('{}'::text[], NULL, NULL, NULL, NULL, NULL)`).Scan(&none))
	require.Zero(t, none)

	// Claim them all and complete them with one call spanning the shards.
	var claimedIDs []int64
	var attempts []int
	for _, q := range queues {
		jobs, err := c.Claim(ctx, q, 100, time.Minute)
		require.NoError(t, err)
		for _, j := range jobs {
			claimedIDs = append(claimedIDs, j.ID)
			attempts = append(attempts, j.Token)
		}
	}
	require.Len(t, claimedIDs, 30)
	completed, err := c.CompleteMany(ctx, claimedIDs, attempts)
	require.NoError(t, err)
	require.ElementsMatch(t, claimedIDs, completed)

	// Stats merge one row per queue from every shard.
	stats, err := o.Stats(ctx, 0)
	require.NoError(t, err)
	byQueue := map[string]ops.QueueStats{}
	for _, s := range stats {
		byQueue[s.Queue] = s
	}
	for _, q := range queues {
		require.Equal(t, int64(11), byQueue[q].Completed, "queue %s", q)
		require.Equal(t, int64(1), byQueue[q].Cancelled, "queue %s", q)
	}

	// Reap sums the expired leases of every shard.
	for _, q := range queues {
		_, err := c.Enqueue(ctx, q, nil)
		require.NoError(t, err)
		jobs, err := c.Claim(ctx, q, 1, time.Second)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
	}
	now = now.Add(time.Minute)
	n, err := c.Reap(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, NShards, n, "one expired lease per shard")

	// Prune sums too: everything finished is older than a day by now.
	now = now.Add(48 * time.Hour)
	pruned, err := o.Prune(ctx, 24*time.Hour, 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, pruned, NShards*(1+1+10), "every shard's finished jobs (and other tests')")
	for k := range NShards {
		require.Equal(t, 1, shardCount(t, k, "queue LIKE 'life-%'"), "shard %d keeps only its reaped job", k)
	}
}

// TestCompleteManyWithOutputsAcrossShards: one complete_many through the
// router with outputs, for jobs of every shard (a Worker's batched
// completion): each shard gets its own jobs' outputs, and each job keeps
// its own; a batch without outputs completes as well.
func TestCompleteManyWithOutputsAcrossShards(t *testing.T) {
	ctx := context.Background()
	rp := pool(t, env.RouterURL)
	c, err := client.New(ctx, rp)
	require.NoError(t, err)
	var ids []int64
	var attempts []int
	var outputs []*string
	for round := range 2 {
		ids, attempts, outputs = ids[:0], attempts[:0], outputs[:0]
		for _, q := range queuesOnEveryShard(t, fmt.Sprintf("outputs%d", round)) {
			for range 2 {
				_, err := c.Enqueue(ctx, q, nil)
				require.NoError(t, err)
			}
			jobs, err := c.Claim(ctx, q, 2, time.Minute)
			require.NoError(t, err)
			require.Len(t, jobs, 2)
			for i, j := range jobs {
				ids, attempts = append(ids, j.ID), append(attempts, j.Token)
				out := fmt.Sprintf(`{"job": %d}`, j.ID)
				if i == 1 {
					outputs = append(outputs, nil) // a job without an output in the batch
				} else {
					outputs = append(outputs, &out)
				}
			}
		}
		var done []int64
		if round == 0 {
			err = pgx.BeginFunc(ctx, rp, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, `SELECT backoff.complete_many(p_job_ids => $1, p_attempts => $2, p_outputs => $3::jsonb[])`, ids, attempts, outputs)
				if err != nil {
					return err
				}
				done, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			})
		} else {
			rows, qerr := rp.Query(ctx, `SELECT backoff.complete_many(p_job_ids => $1, p_attempts => $2)`, ids, attempts)
			require.NoError(t, qerr)
			done, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		require.NoError(t, err, "round %d", round)
		require.ElementsMatch(t, ids, done, "round %d", round)
		for i, id := range ids {
			var got *string
			require.NoError(t, rp.QueryRow(ctx, `SELECT backoff.job_output($1)::text`, id).Scan(&got))
			if round == 0 && outputs[i] != nil {
				require.NotNil(t, got, "job %d", id)
				require.JSONEq(t, *outputs[i], *got, "job %d", id)
			} else {
				require.Nil(t, got, "job %d", id)
			}
		}
	}
}
