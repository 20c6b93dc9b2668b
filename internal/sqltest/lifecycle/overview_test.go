package lifecycle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// overviewRow is a row of backoff.overview.
type overviewRow struct {
	Queue, Policy                      string
	Paused, Configured                 bool
	Pending, Running, Expired          int64
	Retrying, Due                      int64
	OldestDueAge                       *time.Duration
	Completed, DeadLettered, Cancelled int64
	FinishedExact                      bool
	Breaker                            string
	Rate, Tokens                       *float64
	NextClaimAt                        *time.Time
	Blocked                            int64
}

func readOverview(t *testing.T, q querier, now time.Time, limit any) []overviewRow {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT * FROM backoff.overview($1, $2)`, now, limit)
	require.NoError(t, err)
	defer rows.Close()
	var out []overviewRow
	for rows.Next() {
		var r overviewRow
		require.NoError(t, rows.Scan(&r.Queue, &r.Policy, &r.Paused, &r.Configured, &r.Pending, &r.Running, &r.Expired, &r.Retrying,
			&r.Due, &r.OldestDueAge, &r.Completed, &r.DeadLettered, &r.Cancelled, &r.FinishedExact,
			&r.Breaker, &r.Rate, &r.Tokens, &r.NextClaimAt, &r.Blocked))
		if r.NextClaimAt != nil {
			*r.NextClaimAt = r.NextClaimAt.UTC()
		}
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestOverview: exact counts of the live statuses, due and the oldest due
// as backoff.stats counts them; every queue (configured without jobs, with
// only a running job, with only finished jobs); finished counts exact up to
// p_exact_limit and the planner's estimates above it.
func TestOverview(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "a") // fixed 10 s, 3 attempts
	for i := 0; i < 3; i++ {
		enqueue(t, db, "a", t0)
	}
	scalar[int64](t, db, `SELECT backoff.enqueue('a', p_run_at => $1, p_now => $2)`, at(time.Hour), t0)
	enqueue(t, db, "b", at(-time.Minute))
	c := claimOne(t, db, "a", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_now => $3)`, c.ID, c.Attempts, at(time.Minute)) // retrying
	claimOne(t, db, "a", at(time.Minute))                                                                 // running
	c3 := one(t, db, `SELECT * FROM backoff.claim('a', 'w', 1, p_now => $1)`, at(time.Minute))
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_retryable => false, p_now => $3)`, c3.ID, c3.Attempts, at(2*time.Minute))
	// c: only a running job; done: only finished jobs (two completed, one
	// cancelled); idle: configured, no job.
	enqueue(t, db, "c", t0)
	claimOne(t, db, "c", t0)
	for i := 0; i < 2; i++ {
		enqueue(t, db, "done", t0)
		d := claimOne(t, db, "done", t0)
		one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, d.ID, d.Attempts, at(time.Second))
	}
	x := enqueue(t, db, "done", t0)
	one(t, db, `SELECT * FROM backoff.cancel($1, 'no', $2)`, x, at(time.Second))
	exec(t, db, `INSERT INTO backoff.queues (name, policy, paused, rate) VALUES ('idle', 'conservative', true, 5)`)
	// brk: a breaker that one failure opens for 10 minutes; the job has one
	// attempt, so its retryable failure (the only kind the breaker counts)
	// dead-letters it.
	exec(t, db, `INSERT INTO backoff.queues (name, policy, breaker_failures, breaker_window, breaker_cooldown)
		VALUES ('brk', 'default', 1, '1 minute', '10 minutes')`)
	b := scalar[int64](t, db, `SELECT backoff.enqueue('brk', p_max_attempts => 1, p_now => $1)`, t0)
	cb := claimOne(t, db, "brk", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'down', p_now => $3)`, b, cb.Attempts, at(2*time.Minute))

	now := at(3 * time.Minute)
	got := readOverview(t, db, now, 10000)
	require.Equal(t, []overviewRow{
		{Queue: "a", Policy: "p_a", Configured: true, Pending: 1, Running: 1, Expired: 1, Retrying: 1, Due: 1,
			OldestDueAge: ptr(3*time.Minute - time.Minute - 10*time.Second), DeadLettered: 1, FinishedExact: true, Breaker: "closed"},
		{Queue: "b", Policy: "default", Pending: 1, Due: 1, OldestDueAge: ptr(4 * time.Minute), FinishedExact: true, Breaker: "closed"},
		{Queue: "brk", Policy: "default", Configured: true, DeadLettered: 1, FinishedExact: true,
			Breaker: "open", NextClaimAt: ptr(at(12 * time.Minute))},
		{Queue: "c", Policy: "default", Running: 1, Expired: 1, FinishedExact: true, Breaker: "closed"},
		{Queue: "done", Policy: "default", Completed: 2, Cancelled: 1, FinishedExact: true, Breaker: "closed"},
		{Queue: "idle", Policy: "conservative", Paused: true, Configured: true, FinishedExact: true,
			Breaker: "closed", Rate: ptr(5.0), Tokens: ptr(5.0)},
	}, got)

	// The live counts agree with backoff.stats's whole-table count.
	for _, r := range got {
		if r.Queue == "idle" {
			continue
		}
		s := scalar[[]int64](t, db, `SELECT ARRAY[pending, running, retrying, completed, dead_lettered, cancelled, due]
			FROM backoff.stats('1 hour', $1) WHERE queue = $2`, now, r.Queue)
		require.Equal(t, []int64{r.Pending, r.Running, r.Retrying, r.Completed, r.DeadLettered, r.Cancelled, r.Due}, s, r.Queue)
	}

	// Above the limit (3 finished jobs, limit 2) done's finished counts are
	// the planner's estimates; with fresh statistics on a table this small
	// (ANALYZE reads every row, statistics jobs_queue_status keeps every
	// (queue, status) pair) they match, and a pair with no job reads as 1,
	// the planner's least estimate. Live counts stay exact.
	exec(t, db, `ANALYZE backoff.jobs`)
	got = readOverview(t, db, now, 2)
	require.Equal(t, "done", got[4].Queue)
	require.False(t, got[4].FinishedExact)
	require.Equal(t, []int64{2, 1, 1}, []int64{got[4].Completed, got[4].DeadLettered, got[4].Cancelled})
	require.True(t, got[0].FinishedExact, "a has 1 finished job")
	require.Equal(t, int64(1), got[0].Pending)
	got = readOverview(t, db, now, 0)
	require.False(t, got[0].FinishedExact, "limit 0: every queue with a finished job is estimated")
	require.True(t, got[1].FinishedExact, "b has none")

	requireCode(t, execErr(db, `SELECT * FROM backoff.overview(NULL, -1)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.overview(NULL, NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.overview('infinity')`), "22023")
}

// TestActivity: per-minute buckets aligned to whole minutes, both ends of
// [p_since, p_now] included, failed attempts from the history, and what a
// display that keeps ended buckets gets by asking only from the first open
// one.
func TestActivity(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "a") // fixed 10 s, 3 attempts
	// 00:00:30 fail (retry), 00:00:45 complete; 00:01:00 complete;
	// 00:01:20 fail non-retryable (dead letter: one failure, one dead
	// letter); 00:02:05 cancel.
	id := enqueue(t, db, "a", t0)
	c := claimOne(t, db, "a", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_now => $3)`, id, c.Attempts, at(30*time.Second))
	c = claimOne(t, db, "a", at(40*time.Second))
	one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, id, c.Attempts, at(45*time.Second))
	id = enqueue(t, db, "a", t0)
	c = claimOne(t, db, "a", t0)
	one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, id, c.Attempts, at(time.Minute))
	id = enqueue(t, db, "b", t0)
	c = claimOne(t, db, "b", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'y', p_retryable => false, p_now => $3)`, id, c.Attempts, at(80*time.Second))
	id = enqueue(t, db, "b", t0)
	one(t, db, `SELECT * FROM backoff.cancel($1, 'no', $2)`, id, at(125*time.Second))

	type bucket struct {
		Queue                                   string
		Start                                   time.Time
		Completed, Failed, DeadLettered, Cancel int64
	}
	read := func(since, now time.Time) []bucket {
		rows, err := db.Query(t.Context(), `SELECT * FROM backoff.activity($1, '1 minute', $2)`, since, now)
		require.NoError(t, err)
		defer rows.Close()
		var out []bucket
		for rows.Next() {
			var b bucket
			require.NoError(t, rows.Scan(&b.Queue, &b.Start, &b.Completed, &b.Failed, &b.DeadLettered, &b.Cancel))
			b.Start = b.Start.UTC()
			out = append(out, b)
		}
		require.NoError(t, rows.Err())
		return out
	}
	all := []bucket{
		{Queue: "a", Start: t0, Completed: 1, Failed: 1},
		{Queue: "a", Start: at(time.Minute), Completed: 1},
		{Queue: "b", Start: at(time.Minute), Failed: 1, DeadLettered: 1},
		{Queue: "b", Start: at(2 * time.Minute), Cancel: 1},
	}
	require.Equal(t, all, read(at(-time.Hour), at(3*time.Minute)))
	// Both ends included: since = the completion at 00:01:00, now = the
	// cancel at 00:02:05.
	require.Equal(t, all[1:], read(at(time.Minute), at(125*time.Second)))
	require.Equal(t, all[:1], read(at(-time.Hour), at(59*time.Second)), "a bucket counts only what lies in the range")
	// Kept buckets before 00:01 plus a call from 00:01 on give the whole.
	require.Equal(t, all, append(read(at(-time.Hour), at(time.Minute-time.Microsecond)), read(at(time.Minute), at(3*time.Minute))...))
	require.Empty(t, read(at(4*time.Minute), at(3*time.Minute)), "since after now: nothing")

	requireCode(t, execErr(db, `SELECT * FROM backoff.activity(NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.activity('-infinity')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.activity($1, '0.5 seconds', $2)`, t0, at(time.Minute)), "22023")
	err := requireCode(t, execErr(db, `SELECT * FROM backoff.activity($1, '1 second', $2)`, t0, at(48*time.Hour)), "22023")
	require.Contains(t, err.Message, "at most 100000 buckets")
}
