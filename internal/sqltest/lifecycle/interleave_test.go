package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// twoConns returns a pool for setup and two dedicated connections whose
// explicit transactions interleave.
func twoConns(t *testing.T) (querier, *pgx.Conn, *pgx.Conn) {
	t.Helper()
	url := testdbURL(t)
	return poolOn(t, url), connOn(t, url), connOn(t, url)
}

func begin(t *testing.T, c *pgx.Conn) pgx.Tx {
	t.Helper()
	tx, err := c.Begin(context.Background())
	require.NoError(t, err)
	return tx
}

// blocked runs f in a goroutine and returns once the backend of conn waits
// for a lock; the returned function waits for f's error.
func blocked(t *testing.T, setup querier, conn *pgx.Conn, f func() error) func() error {
	t.Helper()
	pid := conn.PgConn().PID()
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Add(1)
	go func() { defer wg.Done(); err = f() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		waiting := scalar[bool](t, setup, `SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_catalog.pg_stat_activity WHERE pid = $1`, pid)
		if waiting {
			break
		}
		require.True(t, time.Now().Before(deadline), "the second call never waited for the row lock")
		time.Sleep(5 * time.Millisecond) // polling for the lock wait, not for a backoff
	}
	return func() error { wg.Wait(); return err }
}

func TestClaimVsClaim(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	a := enqueue(t, setup, "q", t0)
	b := enqueue(t, setup, "q", t0)

	tx1, tx2 := begin(t, c1), begin(t, c2)
	got1 := claim(t, tx1, "q", "w1", 1, t0)
	got2 := claim(t, tx2, "q", "w2", 1, t0) // does not wait: SKIP LOCKED
	require.Len(t, got1, 1)
	require.Len(t, got2, 1)
	require.ElementsMatch(t, []int64{a, b}, []int64{got1[0].ID, got2[0].ID})
	require.Empty(t, claim(t, tx2, "q", "w2", 5, t0), "the other's job stays invisible")
	require.NoError(t, tx1.Commit(ctx))
	require.NoError(t, tx2.Commit(ctx))
	require.Equal(t, "w1", *get(t, setup, got1[0].ID).LockedBy)
	require.Equal(t, "w2", *get(t, setup, got2[0].ID).LockedBy)

	// A rolled-back claim gives the job back.
	c := enqueue(t, setup, "q", t0)
	tx1 = begin(t, c1)
	require.Equal(t, c, claimOne(t, tx1, "q", t0).ID)
	require.NoError(t, tx1.Rollback(ctx))
	again := claimOne(t, c2, "q", t0)
	require.Equal(t, c, again.ID)
	require.Equal(t, int32(1), again.Attempts)
}

// expiredJob returns a job claimed at t0 whose lease (30 s) has expired at
// at(time.Minute).
func expiredJob(t *testing.T, setup querier) job {
	t.Helper()
	enqueue(t, setup, "q", t0)
	return claimOne(t, setup, "q", t0)
}

func TestFailVsReap(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	now := at(time.Minute)

	// fail first: the reaper skips the locked row; one settle, kind error.
	j := expiredJob(t, setup)
	tx1, tx2 := begin(t, c1), begin(t, c2)
	one(t, tx1, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, j.ID, j.Attempts, now)
	require.Equal(t, 0, scalar[int](t, tx2, `SELECT backoff.reap($1)`, now))
	require.NoError(t, tx1.Commit(ctx))
	require.NoError(t, tx2.Commit(ctx))
	got := get(t, setup, j.ID)
	require.Equal(t, "retrying", got.Status)
	require.Len(t, got.Errors, 1)
	require.Equal(t, "error", got.Errors[0].Kind)

	// reap first: fail waits for the row, then finds the attempt reaped.
	j = expiredJob(t, setup)
	tx1, tx2 = begin(t, c1), begin(t, c2)
	require.Equal(t, 1, scalar[int](t, tx1, `SELECT backoff.reap($1)`, now))
	wait := blocked(t, setup, c2, func() error {
		return execErr(tx2, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, j.ID, j.Attempts, now)
	})
	require.NoError(t, tx1.Commit(ctx))
	requireCode(t, wait(), "BK002")
	require.NoError(t, tx2.Rollback(ctx))
	got = get(t, setup, j.ID)
	require.Equal(t, "retrying", got.Status)
	require.Len(t, got.Errors, 1, "settled once")
	require.Equal(t, "lease_expired", got.Errors[0].Kind)
}

func TestCompleteVsReap(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	now := at(time.Minute)

	j := expiredJob(t, setup)
	tx1, tx2 := begin(t, c1), begin(t, c2)
	one(t, tx1, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, now)
	require.Equal(t, 0, scalar[int](t, tx2, `SELECT backoff.reap($1)`, now))
	require.NoError(t, tx1.Commit(ctx))
	require.NoError(t, tx2.Commit(ctx))
	require.Equal(t, "completed", get(t, setup, j.ID).Status)
	require.Empty(t, get(t, setup, j.ID).Errors)

	j = expiredJob(t, setup)
	tx1, tx2 = begin(t, c1), begin(t, c2)
	require.Equal(t, 1, scalar[int](t, tx1, `SELECT backoff.reap($1)`, now))
	wait := blocked(t, setup, c2, func() error {
		return execErr(tx2, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, now)
	})
	require.NoError(t, tx1.Commit(ctx))
	requireCode(t, wait(), "BK002")
	require.NoError(t, tx2.Rollback(ctx))
	require.Equal(t, "retrying", get(t, setup, j.ID).Status)
}

func TestHeartbeatVsReap(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	now := at(time.Minute)

	// The heartbeat commits first: the reaper skipped the row and, after
	// the commit, the lease is no longer expired at now.
	j := expiredJob(t, setup)
	tx1, tx2 := begin(t, c1), begin(t, c2)
	scalar[time.Time](t, tx1, `SELECT backoff.heartbeat($1, $2, '1 minute', $3)`, j.ID, j.Attempts, now)
	require.Equal(t, 0, scalar[int](t, tx2, `SELECT backoff.reap($1)`, now))
	require.NoError(t, tx1.Commit(ctx))
	require.NoError(t, tx2.Commit(ctx))
	require.Equal(t, 0, scalar[int](t, setup, `SELECT backoff.reap($1)`, now))
	require.Equal(t, "running", get(t, setup, j.ID).Status)
	one(t, setup, `SELECT * FROM backoff.complete($1, $2)`, j.ID, j.Attempts)

	// The reaper first: the heartbeat waits, then learns it lost the job.
	j = expiredJob(t, setup)
	tx1, tx2 = begin(t, c1), begin(t, c2)
	require.Equal(t, 1, scalar[int](t, tx1, `SELECT backoff.reap($1)`, now))
	wait := blocked(t, setup, c2, func() error {
		return execErr(tx2, `SELECT backoff.heartbeat($1, $2, '1 minute', $3)`, j.ID, j.Attempts, now)
	})
	require.NoError(t, tx1.Commit(ctx))
	requireCode(t, wait(), "BK002")
	require.NoError(t, tx2.Rollback(ctx))
}

func TestReapVsReap(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		enqueue(t, setup, "q", t0)
	}
	claim(t, setup, "q", "w", 10, t0)
	tx1, tx2 := begin(t, c1), begin(t, c2)
	n1 := scalar[int](t, tx1, `SELECT backoff.reap($1, 6)`, at(time.Minute))
	n2 := scalar[int](t, tx2, `SELECT backoff.reap($1, 6)`, at(time.Minute)) // skips the first reaper's rows
	require.Equal(t, 6, n1)
	require.Equal(t, 4, n2)
	require.NoError(t, tx1.Commit(ctx))
	require.NoError(t, tx2.Commit(ctx))
	require.Equal(t, 10, scalar[int](t, setup, `SELECT count(*)::int FROM backoff.jobs WHERE status = 'retrying' AND jsonb_array_length(errors) = 1`))
}
