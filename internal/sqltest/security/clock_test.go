package security

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// clockDB is a fresh database with time injection switched off (the test
// harness switches it on in every other test database) and a login for
// each role.
type clockDB struct {
	url                     string
	producer, worker, admin *pgx.Conn
	super                   *pgx.Conn
}

func newClockDB(t *testing.T) clockDB {
	t.Helper()
	ctx := context.Background()
	db := clockDB{url: testdb.NewURL(t)}
	open := func(u string) *pgx.Conn {
		c, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	db.super = open(db.url)
	_, err := db.super.Exec(ctx, `UPDATE backoff.settings SET time_injection = false, max_clock_skew = '5 minutes'`)
	require.NoError(t, err)
	db.producer = open(testdb.LoginRole(t, db.url, producer))
	db.worker = open(testdb.LoginRole(t, db.url, worker))
	db.admin = open(testdb.LoginRole(t, db.url, admin))
	return db
}

// The attack: a worker login passes its own p_now to claim a job
// hours before it is due, to reap other workers' live leases, or to snooze
// a job for a century; a producer backdates created_at. Outside
// backoff_admin, a p_now further than max_clock_skew from now() is refused
// with 22023 by every function, before it touches a row.
func TestSkewedClockRefusedOutsideAdmin(t *testing.T) {
	ctx := context.Background()
	db := newClockDB(t)
	var due, running int64
	require.NoError(t, db.super.QueryRow(ctx, `SELECT backoff.enqueue('later', p_run_at => now() + interval '1 hour')`).Scan(&due))
	require.NoError(t, db.super.QueryRow(ctx, `SELECT backoff.enqueue('live')`).Scan(&running))
	require.NoError(t, db.super.QueryRow(ctx, `SELECT id FROM backoff.claim('live', 'w0', 1, '1 minute')`).Scan(&running))

	hour := time.Now().Add(time.Hour)
	century := time.Now().AddDate(100, 0, 0)
	past := time.Now().AddDate(-10, 0, 0)
	cases := []struct {
		name string
		conn *pgx.Conn
		sql  string
		args []any
	}{
		{"enqueue backdated", db.producer, `SELECT backoff.enqueue('q', p_now => $1)`, []any{past}},
		{"enqueue many backdated", db.producer, `SELECT * FROM backoff.enqueue(ARRAY['q'], NULL::jsonb[], NULL::timestamptz[], NULL::integer[], NULL::integer[], NULL::text[], $1)`, []any{past}},
		{"claim before due", db.worker, `SELECT id FROM backoff.claim('later', 'w1', 1, NULL, $1)`, []any{hour}},
		{"acquire before due", db.worker, `SELECT id FROM backoff.acquire($1, 'w1', NULL, $2)`, []any{due, hour}},
		{"reap live leases", db.worker, `SELECT backoff.reap($1)`, []any{hour}},
		{"heartbeat for a century", db.worker, `SELECT backoff.heartbeat($1, 1, NULL, $2)`, []any{running, century}},
		{"snooze for a century", db.worker, `SELECT status FROM backoff.snooze($1, 1, '1 second', $2)`, []any{running, century}},
		{"fail in the future", db.worker, `SELECT status FROM backoff.fail($1, 1, 'x', NULL, true, $2)`, []any{running, century}},
		{"complete in the past", db.worker, `SELECT status FROM backoff.complete($1, 1, $2)`, []any{running, past}},
		{"complete_many in the past", db.worker, `SELECT backoff.complete_many(ARRAY[$1::bigint], ARRAY[1], $2)`, []any{running, past}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := c.conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			rows, err := tx.Query(ctx, c.sql, c.args...)
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
			require.Error(t, err, "a skewed p_now must be refused")
			require.Equal(t, "22023", sqlState(err), "%v", err)
			require.Contains(t, err.Error(), "max_clock_skew")
		})
	}
	// Nothing moved.
	var status string
	require.NoError(t, db.super.QueryRow(ctx, `SELECT string_agg(status, ',' ORDER BY id) FROM backoff.jobs`).Scan(&status))
	require.Equal(t, "pending,running", status)
}

// NULL means the database clock, for every role; a p_now within
// max_clock_skew is allowed; an admin may inject any time; so may anyone
// once time_injection is on.
func TestClockAllowed(t *testing.T) {
	ctx := context.Background()
	db := newClockDB(t)

	// NULL: the database clock.
	var id int64
	var created, dbNow time.Time
	require.NoError(t, db.producer.QueryRow(ctx, `SELECT backoff.enqueue('q', p_now => NULL)`).Scan(&id))
	require.NoError(t, db.super.QueryRow(ctx, `SELECT created_at, now() FROM backoff.jobs WHERE id = $1`, id).Scan(&created, &dbNow))
	require.WithinDuration(t, dbNow, created, time.Minute)
	var attempt int
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT attempts FROM backoff.claim('q', 'w', 1, NULL, NULL)`).Scan(&attempt))
	var lease time.Time
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT backoff.heartbeat($1, $2, '1 minute', NULL)`, id, attempt).Scan(&lease))
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT backoff.reap(NULL)`).Scan(new(int)))
	var status string
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT status FROM backoff.complete($1, $2, NULL)`, id, attempt).Scan(&status))
	require.Equal(t, "completed", status)

	// Within the skew: a client's clock a little off the server's.
	near := time.Now().Add(time.Minute)
	require.NoError(t, db.producer.QueryRow(ctx, `SELECT backoff.enqueue('q', p_now => $1)`, near).Scan(&id))
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT attempts FROM backoff.claim('q', 'w', 1, NULL, $1)`, near).Scan(&attempt))

	// An admin may inject any time.
	far := time.Now().AddDate(1, 0, 0)
	require.NoError(t, db.admin.QueryRow(ctx, `SELECT backoff.reap($1)`, far).Scan(new(int)))
	require.NoError(t, db.admin.QueryRow(ctx, `SELECT count(*) FROM backoff.stats('1 hour', $1)`, far).Scan(new(int)))

	// max_clock_skew 0 refuses even a near time; NULL still works.
	_, err := db.super.Exec(ctx, `UPDATE backoff.settings SET max_clock_skew = '0'`)
	require.NoError(t, err)
	err = db.producer.QueryRow(ctx, `SELECT backoff.enqueue('q', p_now => $1)`, near).Scan(&id)
	require.Equal(t, "22023", sqlState(err), "%v", err)
	require.NoError(t, db.producer.QueryRow(ctx, `SELECT backoff.enqueue('q', p_now => NULL)`).Scan(&id))

	// time_injection on: any finite time, for anyone.
	_, err = db.super.Exec(ctx, `UPDATE backoff.settings SET time_injection = true`)
	require.NoError(t, err)
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT backoff.reap($1)`, far).Scan(new(int)))
	require.NoError(t, db.producer.QueryRow(ctx, `SELECT backoff.enqueue('q', p_now => $1)`, far).Scan(&id))
}

// A time that is not finite or outside years 1 to 9999 is refused with
// 22023 naming it, for every role, even with time injection on.
func TestClockRange(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t) // superuser, time injection on
	for _, bad := range []string{"infinity", "-infinity", "10000-01-01 00:00:00+00", "0001-01-01 00:00:00+00 BC"} {
		for _, sql := range []string{
			`SELECT backoff.enqueue('q', p_now => $1::timestamptz)`,
			`SELECT count(*) FROM backoff.claim('q', 'w', 1, NULL, $1::timestamptz)`,
			`SELECT backoff.reap($1::timestamptz)`,
			`SELECT count(*) FROM backoff.stats('1 hour', $1::timestamptz)`,
		} {
			_, err := pool.Exec(ctx, sql, bad)
			require.Equal(t, "22023", sqlState(err), "%s with %s: %v", sql, bad, err)
			require.Contains(t, err.Error(), "now must be a finite time between years 1 and 9999")
		}
	}
	// The edges themselves are fine.
	for _, ok := range []string{"0001-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00"} {
		_, err := pool.Exec(ctx, `SELECT count(*) FROM backoff.stats('1 hour', $1::timestamptz)`, ok)
		require.NoError(t, err, ok)
	}
}

// The check costs nothing when p_now is NULL or now(): the clock does not
// read backoff.settings then; a p_now off the clock reads it once per call.
// (The queue scope probes the row once per call either way, docs/adr/0058:
// counted by reap(NULL) and subtracted.)
func TestClockCheckReadsSettingsOnlyOffTheClock(t *testing.T) {
	ctx := context.Background()
	db := newClockDB(t)
	tx, err := db.worker.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	scans := func() int64 {
		var n int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans('backoff.settings'::regclass)`).Scan(&n))
		return n
	}
	for _, sql := range []string{
		`SELECT count(*) FROM backoff.claim('q', 'w', 1, NULL, NULL)`,
		`SELECT count(*) FROM backoff.claim('q', 'w', 1, NULL, now())`,
		`SELECT count(*) FROM backoff.claim('q', 'w')`,
		`SELECT backoff.reap(NULL)`,
	} {
		_, err := tx.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	base := scans()
	_, err = tx.Exec(ctx, `SELECT backoff.reap(NULL)`)
	require.NoError(t, err)
	scope := scans() - base
	require.LessOrEqual(t, scope, int64(1), "the scope reads backoff.settings once at most")
	_, err = tx.Exec(ctx, `SELECT backoff.reap(now() + interval '1 second')`)
	require.NoError(t, err)
	require.Equal(t, base+scope+scope+1, scans(), "a p_now off the clock reads backoff.settings once more")
}

// A clock ahead of the database's, within max_clock_skew, is no licence to
// act early: the default skew (5 minutes) is ten times the default lease
// (30 s). A worker's reap one second inside the skew leaves live leases
// alone, its claim and acquire do not take a job before it is due, and an
// open breaker stays open for it until its cooldown ends on the database
// clock. Its forward clock is read as the database's (docs/adr/0057).
func TestForwardSkewIsNotAPrivilege(t *testing.T) {
	ctx := context.Background()
	db := newClockDB(t)
	const ahead = `now() + interval '5 minutes' - interval '1 second'`

	// Three live leases in two queues, taken on the database clock.
	for _, q := range []string{"a", "a", "b"} {
		_, err := db.super.Exec(ctx, `SELECT backoff.enqueue($1)`, q)
		require.NoError(t, err)
	}
	for _, q := range []string{"a", "b"} {
		_, err := db.super.Exec(ctx, `SELECT count(*) FROM backoff.claim($1, 'honest', 10, '30 seconds')`, q)
		require.NoError(t, err)
	}
	var reaped int
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT backoff.reap(`+ahead+`)`).Scan(&reaped))
	require.Zero(t, reaped, "a forward clock within the skew must not reap live leases")
	var running int
	require.NoError(t, db.super.QueryRow(ctx,
		`SELECT count(*) FROM backoff.jobs WHERE status = 'running' AND locked_by = 'honest' AND attempts = 1`).Scan(&running))
	require.Equal(t, 3, running)

	// A job due in four minutes is not claimed, nor acquired, now.
	var later int64
	require.NoError(t, db.super.QueryRow(ctx,
		`SELECT backoff.enqueue('later', p_run_at => now() + interval '4 minutes')`).Scan(&later))
	var claimed int
	require.NoError(t, db.worker.QueryRow(ctx,
		`SELECT count(*) FROM backoff.claim('later', 'early', 10, NULL, `+ahead+`)`).Scan(&claimed))
	require.Zero(t, claimed, "a job four minutes from due must not be claimed")
	_, err := db.worker.Exec(ctx, `SELECT backoff.acquire($1, 'early', NULL, `+ahead+`)`, later)
	require.Equal(t, "BK004", sqlState(err), "acquire before due: %v", err)

	// A breaker opened on the database clock, with a one-minute cooldown,
	// hands out no probe to a clock four minutes ahead.
	_, err = db.super.Exec(ctx, `INSERT INTO backoff.queues (name, policy, breaker_failures, breaker_window, breaker_cooldown)
		VALUES ('cb', 'default', 1, '1 minute', '1 minute')`)
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		_, err = db.super.Exec(ctx, `SELECT backoff.enqueue('cb')`)
		require.NoError(t, err)
	}
	_, err = db.super.Exec(ctx, `SELECT backoff.fail(c.id, c.attempts, 'downstream 503') FROM backoff.claim('cb', 'honest') AS c`)
	require.NoError(t, err)
	var state string
	require.NoError(t, db.worker.QueryRow(ctx, `SELECT state FROM backoff.queue_state('cb', `+ahead+`)`).Scan(&state))
	require.Equal(t, "open", state)
	require.NoError(t, db.worker.QueryRow(ctx,
		`SELECT count(*) FROM backoff.claim('cb', 'early', 10, NULL, `+ahead+`)`).Scan(&claimed))
	require.Zero(t, claimed, "an open breaker must not hand out probes to a clock ahead")

	// An admin's clock is still its own (operators, backoffctl --now).
	require.NoError(t, db.admin.QueryRow(ctx, `SELECT backoff.reap(`+ahead+`)`).Scan(&reaped))
	require.Equal(t, 3, reaped)
}

// One forward-skewed claim must not freeze a rate-limited queue: it once
// stored every slot's refilled_at at its own clock, minutes ahead, and the
// bucket refilled nothing for anyone until the database clock got there,
// while queue_state said the next token was milliseconds away. The skewed
// claim takes what the bucket holds, as any claim; one second later on the
// database clock a concurrent claimer gets a full bucket.
func TestSkewedClaimDoesNotFreezeTheBucket(t *testing.T) {
	ctx := context.Background()
	db := newClockDB(t)
	_, err := db.super.Exec(ctx, `INSERT INTO backoff.queues (name, policy, rate, burst) VALUES ('api', 'default', 16, 16)`)
	require.NoError(t, err)
	_, err = db.super.Exec(ctx, `SELECT backoff.enqueue('api') FROM generate_series(1, 48)`)
	require.NoError(t, err)

	var claimed int
	require.NoError(t, db.worker.QueryRow(ctx,
		`SELECT count(*) FROM backoff.claim('api', 'evil', 16, NULL, now() + interval '290 seconds')`).Scan(&claimed))
	require.Equal(t, 16, claimed, "the skewed claim takes the bucket's tokens, as any claim")

	var ahead bool
	require.NoError(t, db.super.QueryRow(ctx,
		`SELECT coalesce(bool_or(refilled_at > now()), false) FROM backoff.queue_tokens WHERE queue = 'api'`).Scan(&ahead))
	require.False(t, ahead, "no slot's refilled_at may lie beyond the database clock")

	// One second later, on the database clock (an admin may say so).
	var tokens float64
	var next *time.Time
	require.NoError(t, db.admin.QueryRow(ctx,
		`SELECT tokens, next_claim_at FROM backoff.queue_state('api', now() + interval '1 second')`).Scan(&tokens, &next))
	require.InDelta(t, 16, tokens, 1e-6, "the bucket refilled")
	require.Nil(t, next)
	require.NoError(t, db.admin.QueryRow(ctx,
		`SELECT count(*) FROM backoff.claim('api', 'legit', 16, NULL, now() + interval '1 second')`).Scan(&claimed))
	require.Equal(t, 16, claimed, "the skewed claim must not lower a concurrent claimer's allowance")
}
