package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// look is one backoff.next_work answer: kind, queue ("" for the others) ->
// its time (nil: no work of that kind).
type look map[[2]string]*time.Time

func nextWork(t testing.TB, q querier, sql string, args ...any) look {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out := look{}
	for rows.Next() {
		var kind string
		var queue *string
		var at *time.Time
		require.NoError(t, rows.Scan(&kind, &queue, &at))
		k := [2]string{kind, ""}
		if queue != nil {
			k[1] = *queue
		}
		require.NotContains(t, out, k, "one row per kind and queue")
		out[k] = at
	}
	require.NoError(t, rows.Err())
	return out
}

func requireTime(t testing.TB, want time.Time, got *time.Time, what string) {
	t.Helper()
	require.NotNil(t, got, what)
	require.True(t, want.Equal(*got), "%s: want %s, got %s", what, want, *got)
}

// TestNextWorkSaysWhenEachKindOfWorkComesDue: the one look of an idle
// worker (docs/adr/0083) answers, per queue, when a claim can next return
// a job (a job due later, a retry's backoff, a snooze; a paused queue
// none; a rate-limited queue not before its next token), and when
// fire_schedules, reap and rotate next have work.
func TestNextWorkSaysWhenEachKindOfWorkComesDue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const call = `SELECT * FROM backoff.next_work($1::text[], p_now => $2)`
	queues := []string{"nw-empty", "nw-later", "nw-retry", "nw-paused", "nw-rate"}

	got := nextWork(t, db, call, queues, t0)
	require.Len(t, got, len(queues)+3)
	for _, q := range queues {
		require.Contains(t, got, [2]string{"queue", q})
		require.Nil(t, got[[2]string{"queue", q}], q)
	}
	for _, k := range []string{"schedules", "reap", "rotate"} {
		require.Contains(t, got, [2]string{k, ""})
		require.Nil(t, got[[2]string{k, ""}], k)
	}

	// A job due in a minute.
	exec(t, db, `SELECT backoff.enqueue('nw-later', '{}', p_run_at => $1, p_now => $2)`, at(time.Minute), t0)
	// A failed attempt: retrying, due after its backoff; running, it had a
	// lease first.
	enqueue(t, db, "nw-retry", t0)
	j := claimOne(t, db, "nw-retry", t0)
	got = nextWork(t, db, call, queues, t0)
	requireTime(t, at(time.Minute), got[[2]string{"queue", "nw-later"}], "a job due in a minute")
	require.Nil(t, got[[2]string{"queue", "nw-retry"}], "the running job is no claim's")
	requireTime(t, *j.LeaseUntil, got[[2]string{"reap", ""}], "reap has work when the lease runs out")
	exec(t, db, `SELECT backoff.fail($1, $2, 'boom', p_now => $3)`, j.ID, j.Attempts, t0)
	retry := get(t, db, j.ID)
	require.Equal(t, "retrying", retry.Status)
	require.True(t, retry.RunAt.After(t0))
	got = nextWork(t, db, call, queues, t0)
	requireTime(t, retry.RunAt, got[[2]string{"queue", "nw-retry"}], "the retry comes due after its backoff")
	require.Nil(t, got[[2]string{"reap", ""}], "no lease left")

	// A paused queue has no time: a pause has no end.
	enqueue(t, db, "nw-paused", t0)
	exec(t, db, `SELECT backoff.pause_queue('nw-paused', p_create => true)`)
	got = nextWork(t, db, call, queues, t0)
	require.Nil(t, got[[2]string{"queue", "nw-paused"}])
	exec(t, db, `SELECT backoff.resume_queue('nw-paused')`)
	requireTime(t, t0, nextWork(t, db, call, queues, t0)[[2]string{"queue", "nw-paused"}], "resumed: due now")

	// A rate limit out of tokens: not before the next token, as
	// queue_state says.
	usePolicy(t, db, "nw-rate")
	exec(t, db, `UPDATE backoff.queues SET rate = 0.1, burst = 1 WHERE name = 'nw-rate'`)
	enqueue(t, db, "nw-rate", t0)
	enqueue(t, db, "nw-rate", t0)
	require.Len(t, claim(t, db, "nw-rate", "w1", 2, t0), 1, "one token")
	var nextClaim time.Time
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT next_claim_at FROM backoff.queue_state('nw-rate', $1)`, t0).Scan(&nextClaim))
	require.True(t, nextClaim.After(t0))
	requireTime(t, nextClaim, nextWork(t, db, call, queues, t0)[[2]string{"queue", "nw-rate"}], "held by the rate")

	// A schedule: its next slot.
	exec(t, db, `SELECT backoff.put_schedule('nw-hourly', 'nw-sched', p_every => interval '1 hour', p_now => $1)`, t0)
	var fireAt time.Time
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT next_fire_at FROM backoff.schedules WHERE name = 'nw-hourly'`).Scan(&fireAt))
	requireTime(t, fireAt, nextWork(t, db, call, queues, t0)[[2]string{"schedules", ""}], "the schedule's next slot")
	exec(t, db, `SELECT backoff.pause_schedule('nw-hourly')`)
	require.Nil(t, nextWork(t, db, call, queues, t0)[[2]string{"schedules", ""}], "a paused schedule fires nothing")

	// A queue named twice answers once; no queue still answers the rest.
	got = nextWork(t, db, call, []string{"nw-later", "nw-later"}, t0)
	require.Len(t, got, 4)
	require.Len(t, nextWork(t, db, call, []string{}, t0), 3)
}

// TestNextWorkSaysRotateHasRowsToMove: a switch that left a row behind (a
// claimer held it) leaves it where no claim looks; the look says rotate
// has work until rotate has moved it.
func TestNextWorkSaysRotateHasRowsToMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	db := poolOn(t, url)
	segmentJobs(t, db, 2)
	id := enqueue(t, db, "nw-seg", t0)
	enqueue(t, db, "nw-seg", t0)
	holder := connOn(t, url)
	exec(t, holder, `BEGIN`)
	exec(t, holder, `SELECT FROM backoff.jobs WHERE id = $1 FOR UPDATE`, id)
	require.EqualValues(t, 1, scalar[int16](t, db, `SELECT switched_from FROM backoff.rotate()`))
	exec(t, holder, `COMMIT`)

	const call = `SELECT * FROM backoff.next_work(ARRAY['nw-seg'], p_now => $1)`
	got := nextWork(t, db, call, t0)
	requireTime(t, t0, got[[2]string{"rotate", ""}], "a row left in the segment switched from")
	requireTime(t, t0, got[[2]string{"queue", "nw-seg"}], "the moved row is due")
	_, err := db.Exec(ctx, `SELECT backoff.rotate()`)
	require.NoError(t, err)
	require.Nil(t, nextWork(t, db, call, t0)[[2]string{"rotate", ""}])
	require.Len(t, claim(t, db, "nw-seg", "w1", 2, t0), 2)
}

// TestNextWorkRenewsRegistrationsOnlyWhenDue: the look renews the
// worker's wake-up registrations when they are missing or within a third
// of the ttl of expiring, and otherwise writes nothing: no transaction id,
// so a look every second leaves no dead row under a held snapshot.
func TestNextWorkRenewsRegistrationsOnlyWhenDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	db := poolOn(t, url)
	conn := connOn(t, url)
	const call = `SELECT count(*) FROM backoff.next_work(ARRAY['nw-r1', 'nw-r2'], 'w-renew', interval '30 seconds')`
	wrote := func() bool {
		t.Helper()
		exec(t, conn, `BEGIN`)
		defer exec(t, conn, `COMMIT`)
		exec(t, conn, call)
		return scalar[*int64](t, conn, `SELECT pg_current_xact_id_if_assigned()::text::bigint`) != nil
	}
	require.True(t, wrote(), "no registration yet: written")
	require.EqualValues(t, 2, scalar[int64](t, db,
		`SELECT count(*) FROM backoff.waiting_workers WHERE worker = 'w-renew' AND expires_at > now() + interval '25 seconds'`))
	require.False(t, wrote(), "fresh registrations: nothing written")
	require.False(t, wrote())

	// One within a third of the ttl of expiring: renewed, the other kept.
	_, err := db.Exec(ctx, `UPDATE backoff.waiting_workers SET expires_at = now() + interval '5 seconds' WHERE queue = 'nw-r2'`)
	require.NoError(t, err)
	require.True(t, wrote())
	require.EqualValues(t, 2, scalar[int64](t, db,
		`SELECT count(*) FROM backoff.waiting_workers WHERE worker = 'w-renew' AND expires_at > now() + interval '25 seconds'`))
	require.False(t, wrote())

	// Without a worker, nothing is registered.
	exec(t, conn, `SELECT count(*) FROM backoff.next_work(ARRAY['nw-r3'])`)
	require.EqualValues(t, 0, scalar[int64](t, db, `SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'nw-r3'`))
}

// TestNextWorkAtEachIsolationLevel: the look reads at the caller's level.
// Inside a transaction at REPEATABLE READ or SERIALIZABLE it answers from
// the transaction's snapshot (a job committed since is not seen: the
// Workers call it on its own, never inside a transaction); at READ
// COMMITTED each call sees what committed before it. Its registration
// write commits at each level.
func TestNextWorkAtEachIsolationLevel(t *testing.T) {
	t.Parallel()
	for _, level := range isolationLevels {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.NewURL(t)
			db := poolOn(t, url)
			looker := connOn(t, url)
			queue := "nw-iso"
			call := `SELECT * FROM backoff.next_work(ARRAY['` + queue + `'], 'w-iso', interval '30 seconds', $1)`
			exec(t, looker, `BEGIN ISOLATION LEVEL `+level)
			require.Nil(t, nextWork(t, looker, call, t0)[[2]string{"queue", queue}])
			enqueue(t, db, queue, t0)
			seen := nextWork(t, looker, call, t0)[[2]string{"queue", queue}]
			if level == "read committed" {
				requireTime(t, t0, seen, "read committed sees the commit")
			} else {
				require.Nil(t, seen, "the transaction's snapshot predates the job")
			}
			_, err := looker.Exec(ctx, `COMMIT`)
			require.NoError(t, err)
			requireTime(t, t0, nextWork(t, looker, call, t0)[[2]string{"queue", queue}], "a new look sees the job")
			require.EqualValues(t, 1, scalar[int64](t, db,
				`SELECT count(*) FROM backoff.waiting_workers WHERE queue = $1 AND worker = 'w-iso'`, queue))
		})
	}
}

// TestNextWorkRefusals: bad arguments are 22023, and a login scoped to
// some queues may not look at others (42501), as claim.
func TestNextWorkRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	db := poolOn(t, url)
	for _, c := range []struct {
		sql  string
		args []any
	}{
		{`SELECT * FROM backoff.next_work(NULL)`, nil},
		{`SELECT * FROM backoff.next_work(ARRAY[''])`, nil},
		{`SELECT * FROM backoff.next_work(ARRAY[NULL::text])`, nil},
		{`SELECT * FROM backoff.next_work(array_fill('q'::text, ARRAY[1001]))`, nil},
		{`SELECT * FROM backoff.next_work(ARRAY['q'], 'w', interval '0')`, nil},
		{`SELECT * FROM backoff.next_work(ARRAY['q'], 'w', NULL)`, nil},
		{`SELECT * FROM backoff.next_work(ARRAY['q'], 'w', interval '2 days')`, nil},
		{`SELECT * FROM backoff.next_work(ARRAY['q'], p_now => 'infinity')`, nil},
	} {
		requireCode(t, execErr(db, c.sql, c.args...), "22023")
	}

	login := testdb.LoginRole(t, url, "backoff_worker")
	conn, err := pgx.Connect(ctx, login)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	var name string
	require.NoError(t, conn.QueryRow(ctx, `SELECT session_user`).Scan(&name))
	exec(t, db, `SELECT backoff.grant_queue($1, 'nw-mine', 'work')`, name)
	requireCode(t, execErr(conn, `SELECT * FROM backoff.next_work(ARRAY['nw-mine', 'nw-theirs'], 'w')`), "42501")
	got := nextWork(t, conn, `SELECT * FROM backoff.next_work(ARRAY['nw-mine'], 'w')`)
	require.Contains(t, got, [2]string{"queue", "nw-mine"})
}
