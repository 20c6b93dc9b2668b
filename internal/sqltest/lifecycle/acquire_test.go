package lifecycle_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestAcquire(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "steps") // fixed 10 s, lease 1 min
	id := enqueue(t, db, "steps", t0)

	j := one(t, db, `SELECT * FROM backoff.acquire($1, 'orchestrator', p_now => $2)`, id, t0)
	require.Equal(t, "running", j.Status)
	require.Equal(t, int32(1), j.Attempts)
	require.Equal(t, ptr("orchestrator"), j.LockedBy)
	require.True(t, j.LeaseUntil.Equal(at(time.Minute)))
	require.True(t, j.LastAttemptedAt.Equal(t0))

	pgErr := requireCode(t, execErr(db, `SELECT * FROM backoff.acquire($1, 'other', p_now => $2)`, id, t0), "BK002")
	require.Contains(t, pgErr.Message, `"1"`)

	one(t, db, `SELECT * FROM backoff.fail($1, 1, 'step failed', p_now => $2)`, id, at(time.Second))
	pgErr = requireCode(t, execErr(db, `SELECT * FROM backoff.acquire($1, 'o', p_now => $2)`, id, at(5*time.Second)), "BK004")
	require.Equal(t, `job "`+strconv.FormatInt(id, 10)+`" is not ready until "2026-01-01T00:00:11.000000Z" (attempts "1")`, pgErr.Message)
	retryAt, err := time.Parse(time.RFC3339Nano, pgErr.Detail)
	require.NoError(t, err, "DETAIL is ISO 8601: %q", pgErr.Detail)
	require.True(t, retryAt.Equal(at(11*time.Second)))
	require.Equal(t, "attempts=1", pgErr.Hint)

	j = one(t, db, `SELECT * FROM backoff.acquire($1, 'o', '2 minutes', $2)`, id, retryAt)
	require.Equal(t, int32(2), j.Attempts)
	require.True(t, j.LeaseUntil.Equal(retryAt.Add(2*time.Minute)))
	one(t, db, `SELECT * FROM backoff.complete($1, 2)`, id)
	requireCode(t, execErr(db, `SELECT * FROM backoff.acquire($1, 'o')`, id), "BK003")
	requireCode(t, execErr(db, `SELECT * FROM backoff.acquire(999999, 'o')`), "BK001")
	requireCode(t, execErr(db, `SELECT * FROM backoff.acquire(NULL, 'o')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.acquire($1, NULL)`, id), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.acquire($1, 'o', '-1 second')`, id), "22023")
}

// TestAcquireRace: two connections acquire the same due job at the same
// moment, each in its own transaction, 1,000 times: exactly one wins every
// time and the other gets BK002.
func TestAcquireRace(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	const races = 1000
	ids := scalar[[]int64](t, setup, `SELECT array_agg(backoff.enqueue('wf', p_now => $1)) FROM generate_series(1, $2)`, t0, races)
	wins := [2]int{}
	for _, id := range ids {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  [2]error
		)
		for i, c := range []*pgx.Conn{c1, c2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tx, err := c.Begin(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				<-start
				_, errs[i] = oneErr(tx, `SELECT * FROM backoff.acquire($1, $2, p_now => $3)`, id, "w"+strconv.Itoa(i), t0)
				if errs[i] != nil {
					_ = tx.Rollback(ctx)
					return
				}
				errs[i] = tx.Commit(ctx)
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			if err == nil {
				won++
				wins[i]++
				continue
			}
			require.Equal(t, "BK002", pgCode(err), "race for job %d: %v", id, err)
		}
		require.Equal(t, 1, won, "race for job %d", id)
	}
	require.Equal(t, races, scalar[int](t, setup, `SELECT count(*)::int FROM backoff.jobs WHERE status = 'running' AND attempts = 1`))
	t.Logf("acquire races: %d, won by connection 1: %d, by connection 2: %d", races, wins[0], wins[1])
}
