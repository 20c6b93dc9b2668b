package lifecycle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStrandedWorkCounted: the running jobs of a worker that stopped are
// counted as expired by overview and stats, per worker by workers(), from
// the moment their lease ends until reap settles them; the reaped attempt's
// history entry carries its start, so the stuck interval can be drawn.
func TestStrandedWorkCounted(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail") // lease 1 minute
	for i := 0; i < 3; i++ {
		enqueue(t, db, "mail", t0)
	}
	enqueue(t, db, "other", t0)
	dead := claim(t, db, "mail", "w-dead", 2, at(time.Second))
	require.Len(t, dead, 2)
	live := claim(t, db, "mail", "w-live", 1, at(2*time.Second))
	require.Len(t, live, 1)
	claim(t, db, "other", "w-live", 1, at(80*time.Second)) // default lease 30 s
	// The live worker heartbeats; the dead one does not.
	exec(t, db, `SELECT backoff.heartbeat($1, $2, '5 minutes', $3)`, live[0].ID, live[0].Attempts, at(50*time.Second))

	now := at(91 * time.Second) // dead's leases ended at 01:01, 30 s ago
	expired := func(sql string) int64 {
		return scalar[int64](t, db, sql, now)
	}
	require.Equal(t, int64(2), expired(`SELECT expired FROM backoff.overview($1) WHERE queue = 'mail'`))
	require.Equal(t, int64(3), expired(`SELECT running FROM backoff.overview($1) WHERE queue = 'mail'`))
	require.Equal(t, int64(0), expired(`SELECT expired FROM backoff.overview($1) WHERE queue = 'other'`))
	require.Equal(t, int64(2), expired(`SELECT expired FROM backoff.stats('1 hour', $1) WHERE queue = 'mail'`))
	require.Equal(t, int64(0), expired(`SELECT expired FROM backoff.overview($1::timestamptz - interval '31 seconds') WHERE queue = 'mail'`),
		"a lease that has not ended is no expired lease")

	type workerRow struct {
		Worker                   string
		Queues                   []string
		Jobs, Expired            int64
		OldestStarted            time.Time
		OldestLease, LatestLease time.Time
	}
	rows, err := db.Query(t.Context(), `SELECT * FROM backoff.workers($1)`, now)
	require.NoError(t, err)
	var ws []workerRow
	for rows.Next() {
		var w workerRow
		require.NoError(t, rows.Scan(&w.Worker, &w.Queues, &w.Jobs, &w.Expired, &w.OldestStarted, &w.OldestLease, &w.LatestLease))
		ws = append(ws, w)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ws, 2)
	require.Equal(t, "w-dead", ws[0].Worker)
	require.Equal(t, []string{"mail"}, ws[0].Queues)
	require.Equal(t, []int64{2, 2}, []int64{ws[0].Jobs, ws[0].Expired})
	require.True(t, ws[0].OldestStarted.Equal(at(time.Second)))
	require.True(t, ws[0].LatestLease.Equal(at(61*time.Second)), "its newest lease ended: it renews nothing")
	require.Equal(t, "w-live", ws[1].Worker)
	require.Equal(t, []string{"mail", "other"}, ws[1].Queues)
	require.Equal(t, []int64{2, 0}, []int64{ws[1].Jobs, ws[1].Expired})
	require.True(t, ws[1].LatestLease.Equal(at(350*time.Second)), "the heartbeat moved its newest lease")

	// reap settles them: nothing expired any more, and each history entry
	// has the attempt's start and the worker that held it.
	require.Equal(t, 2, scalar[int](t, db, `SELECT backoff.reap($1)`, now))
	require.Equal(t, int64(0), expired(`SELECT expired FROM backoff.overview($1) WHERE queue = 'mail'`))
	for _, d := range dead {
		h := get(t, db, d.ID).Errors
		require.Len(t, h, 1)
		require.Equal(t, "lease_expired", h[0].Kind)
		require.Equal(t, ptr("2026-01-01T00:00:01.000000Z"), h[0].Started)
		require.Equal(t, ptr("w-dead"), h[0].Worker)
		require.Nil(t, h[0].Role)
	}
	// fail records the start too.
	c := claimOne(t, db, "mail", at(5*time.Minute))
	h := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, c.ID, c.Attempts, at(6*time.Minute)).Errors
	require.Equal(t, ptr("2026-01-01T00:05:00.000000Z"), h[len(h)-1].Started)
}

// TestOperatorActionsRecorded: replay and cancel append an entry with the
// role to the job's history, which neither the budget, the retry count of
// stats nor the failures of activity count; the history keeps its bound.
func TestOperatorActionsRecorded(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail") // fixed 10 s, 3 attempts
	role := scalar[string](t, db, `SELECT session_user::text`)
	id := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_max_attempts => 1, p_now => $1)`, t0)
	c := claimOne(t, db, "mail", t0)
	require.Equal(t, "dead_lettered", one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, id, c.Attempts, at(time.Second)).Status)

	retries := func(now time.Time) int64 {
		return scalar[int64](t, db, `SELECT retries FROM backoff.stats('1 hour', $1) WHERE queue = 'mail'`, now)
	}
	failed := func(now time.Time) int64 {
		return scalar[int64](t, db, `SELECT coalesce(sum(failed), 0)::bigint FROM backoff.activity($1, '1 hour', $2) WHERE queue = 'mail'`, t0, now)
	}
	require.Equal(t, int64(0), retries(at(time.Minute)), "the failure dead-lettered its job: no retry")

	r := one(t, db, `SELECT * FROM backoff.replay($1, $2)`, id, at(2*time.Second))
	require.Equal(t, int32(0), r.counted(), "a replay gives a fresh budget")
	require.Len(t, r.Errors, 2)
	e := r.Errors[1]
	require.Equal(t, "replayed", e.Kind)
	require.Equal(t, ptr(role), e.Role)
	require.Equal(t, "2026-01-01T00:00:02.000000Z", e.At)
	require.Equal(t, 1, e.Attempt)
	require.Equal(t, int64(0), retries(at(time.Minute)), "a replay is no retry, nor is the failure before it")
	require.Equal(t, int64(1), failed(at(time.Minute)), "one failed attempt; the replay is none")

	// The replayed job runs its budget again: one counted attempt.
	c = claimOne(t, db, "mail", at(3*time.Second))
	require.Equal(t, int32(1), c.counted())
	cx := one(t, db, `SELECT * FROM backoff.cancel($1, 'customer gone', $2)`, id, at(4*time.Second))
	e = cx.Errors[len(cx.Errors)-1]
	require.Equal(t, "cancelled", e.Kind)
	require.Equal(t, ptr(role), e.Role)
	require.Equal(t, "customer gone", e.Error)
	require.Equal(t, ptr("w1"), e.Worker, "a running job's cancel names the attempt it stopped")
	require.Equal(t, ptr("2026-01-01T00:00:03.000000Z"), e.Started)
	require.Equal(t, int64(1), failed(at(time.Minute)))

	// The bound of 20 holds with operator entries, and the budget is the
	// columns', not the history's.
	for i := 0; i < 12; i++ {
		exec(t, db, `SELECT backoff.replay($1, $2)`, id, at(5*time.Second))
		exec(t, db, `SELECT backoff.cancel($1, NULL, $2)`, id, at(5*time.Second))
	}
	j := get(t, db, id)
	require.Len(t, j.Errors, 20)
	require.Equal(t, "cancelled", j.Errors[19].Kind)
	r = one(t, db, `SELECT * FROM backoff.replay($1, $2)`, id, at(6*time.Second))
	require.Equal(t, int32(0), r.counted())
	c = claimOne(t, db, "mail", at(7*time.Second))
	require.Equal(t, "dead_lettered", one(t, db, `SELECT * FROM backoff.fail($1, $2, 'again', p_now => $3)`, id, c.Attempts, at(8*time.Second)).Status,
		"max_attempts 1 still applies: operator entries take no budget")

	// The bulk replay records its replays too.
	require.Len(t, jobs(t, db, `SELECT j.* FROM backoff.replay_dead_letters('mail', $1) AS r JOIN backoff.jobs AS j ON j.id = r.job_id`, at(9*time.Second)), 1)
	j = get(t, db, id)
	require.Equal(t, "replayed", j.Errors[len(j.Errors)-1].Kind)
	require.Equal(t, ptr(role), j.Errors[len(j.Errors)-1].Role)
	require.Equal(t, int64(0), retries(at(time.Minute)))
}

// TestPauseUnknownQueueRefused: pause and resume of a name that is no
// queue (no configuration, no job) are refused with 22023 and leave
// nothing behind, unless p_create; every change is recorded in
// queue_events with the role and time, and prune drops old events.
func TestPauseUnknownQueueRefused(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	role := scalar[string](t, db, `SELECT session_user::text`)
	enqueue(t, db, "mail", t0)

	for _, sql := range []string{`SELECT backoff.pause_queue('nosuchqueue')`, `SELECT backoff.resume_queue('nosuchqueue')`} {
		pgErr := requireCode(t, execErr(db, sql), "22023")
		require.Contains(t, pgErr.Message, `queue "nosuchqueue": no such queue`)
	}
	require.Zero(t, scalar[int](t, db, `SELECT count(*)::int FROM backoff.queues`), "no phantom queue")
	requireCode(t, execErr(db, `SELECT backoff.pause_queue('mail', NULL)`), "22023")

	// A queue known from its jobs only, a queue configured without jobs,
	// and a new queue asked for.
	require.True(t, scalar[bool](t, db, `SELECT backoff.pause_queue('mail', p_now => $1)`, at(time.Minute)))
	require.False(t, scalar[bool](t, db, `SELECT backoff.pause_queue('mail', p_now => $1)`, at(2*time.Minute)), "no change, no event")
	require.True(t, scalar[bool](t, db, `SELECT backoff.pause_queue('later', true, $1)`, at(3*time.Minute)))
	require.True(t, scalar[bool](t, db, `SELECT backoff.resume_queue('later', p_now => $1)`, at(4*time.Minute)))
	require.False(t, scalar[bool](t, db, `SELECT backoff.resume_queue('later', p_now => $1)`, at(5*time.Minute)), "configured: known")
	require.False(t, scalar[bool](t, db, `SELECT backoff.resume_queue('fresh', true, $1)`, at(5*time.Minute)))
	require.False(t, scalar[bool](t, db, `SELECT paused FROM backoff.queues WHERE name = 'fresh'`))
	require.True(t, scalar[bool](t, db, `SELECT paused FROM backoff.stats('1 hour', $1) WHERE queue = 'mail'`, at(time.Hour)))

	type event struct {
		Queue, Action, Role string
		At                  time.Time
	}
	rows, err := db.Query(t.Context(), `SELECT queue, action, role, at FROM backoff.queue_events ORDER BY id`)
	require.NoError(t, err)
	var evs []event
	for rows.Next() {
		var e event
		require.NoError(t, rows.Scan(&e.Queue, &e.Action, &e.Role, &e.At))
		e.At = e.At.UTC()
		evs = append(evs, e)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []event{
		{"mail", "pause", role, at(time.Minute)},
		{"later", "pause", role, at(3 * time.Minute)},
		{"later", "resume", role, at(4 * time.Minute)},
	}, evs)

	// prune keeps the events of the retention and drops older ones.
	exec(t, db, `SELECT backoff.prune('1 day', 10000, $1)`, at(24*time.Hour+150*time.Second))
	require.Equal(t, 2, scalar[int](t, db, `SELECT count(*)::int FROM backoff.queue_events`))
}
