package security

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/migrations"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// requireGrants switches backoff.settings.require_queue_grants in the test's
// database (the test template has it off).
func requireGrants(t *testing.T, pool *pgxpool.Pool, on bool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE backoff.settings SET require_queue_grants = $1`, on)
	require.NoError(t, err)
}

// rowsAs runs a query under SET LOCAL ROLE role and returns its first
// column as text, one element per row.
func rowsAs(t *testing.T, pool *pgxpool.Pool, role, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	rows, err := tx.Query(ctx, sql, args...)
	require.NoError(t, err, sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, sql)
	return out
}

// TestRequireQueueGrants: with require_queue_grants on, a worker or
// producer without any grant acts on no queue; revoking a role's last grant
// no longer makes it global.
//
// Reproduced the attack "scoping fails open": after revoke_queue(w1, mail,
// work), w1 claimed a billing job and read its payload.
func TestRequireQueueGrants(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	billing := makeQueueFixtures(t, pool, "billing")
	_, err := pool.Exec(ctx, `UPDATE backoff.jobs SET payload = '{"card": "4111"}' WHERE queue = 'billing'`)
	require.NoError(t, err)
	w1 := groupRole(t, worker)
	p1 := groupRole(t, producer)
	adminRole := groupRole(t, admin)
	_, err = pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail', 'work')`, w1)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.revoke_queue($1, 'mail', 'work')`, w1)
	require.NoError(t, err)
	now := t0.Add(time.Minute)

	requireGrants(t, pool, true)
	err = asRole(ctx, pool, w1, `SELECT * FROM backoff.claim('billing', 'w1', 10, NULL, $1)`, now)
	require.Equal(t, "42501", sqlState(err), "a worker without grants claimed: %v", err)
	require.Contains(t, err.Error(), `"billing"`)
	err = asRole(ctx, pool, w1, `SELECT * FROM backoff.acquire($1, 'w1', NULL, $2)`, billing.pending, now)
	require.Equal(t, "BK001", sqlState(err), "a worker without grants acquired: %v", err)
	err = asRole(ctx, pool, w1, `SELECT * FROM backoff.complete($1, 1, $2)`, billing.running, now)
	require.Equal(t, "BK001", sqlState(err), "a worker without grants completed: %v", err)
	require.Empty(t, rowsAs(t, pool, w1, `SELECT payload::text FROM backoff.job($1)`, billing.running))
	require.Equal(t, []string{"0"}, rowsAs(t, pool, w1, `SELECT backoff.reap($1)::text`, now), "a worker without grants reaped")
	err = asRole(ctx, pool, w1, `SELECT backoff.wait_for_jobs('billing', 'w1')`)
	require.Equal(t, "42501", sqlState(err), "%v", err)
	err = asRole(ctx, pool, p1, `SELECT backoff.enqueue('billing', p_now => $1)`, now)
	require.Equal(t, "42501", sqlState(err), "a producer without grants enqueued: %v", err)
	err = asRole(ctx, pool, p1, `SELECT * FROM backoff.enqueue(ARRAY['billing'], NULL, NULL, NULL, NULL, NULL, $1)`, now)
	require.Equal(t, "42501", sqlState(err), "a producer without grants enqueued in bulk: %v", err)

	// Granting gives back exactly the granted queue.
	_, err = pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'billing', 'work')`, w1)
	require.NoError(t, err)
	require.NoError(t, asRole(ctx, pool, w1, `SELECT * FROM backoff.claim('billing', 'w1', 10, NULL, $1)`, now))
	require.Equal(t, "42501", sqlState(asRole(ctx, pool, w1, `SELECT * FROM backoff.claim('mail', 'w1', 10, NULL, $1)`, now)))
	_, err = pool.Exec(ctx, `SELECT backoff.revoke_queue($1, 'billing', 'work')`, w1)
	require.NoError(t, err)

	// Admins (they write the table anyway) and superusers are not scoped.
	require.NoError(t, asRole(ctx, pool, adminRole, `SELECT * FROM backoff.claim('billing', 'a', 1, NULL, $1)`, now))
	_, err = pool.Exec(ctx, `SELECT * FROM backoff.claim('billing', 'su', 1, NULL, $1)`, now)
	require.NoError(t, err)

	// A missing settings row means the default: on.
	_, err = pool.Exec(ctx, `DELETE FROM backoff.settings`)
	require.NoError(t, err)
	// (The clock: without the row time injection is off too.)
	err = asRole(ctx, pool, w1, `SELECT * FROM backoff.claim('billing', 'w1', 10)`)
	require.Equal(t, "42501", sqlState(err), "no settings row: %v", err)
	_, err = pool.Exec(ctx, `INSERT INTO backoff.settings (time_injection, require_queue_grants) VALUES (true, false)`)
	require.NoError(t, err)

	// Off: a role without grants acts on every queue (the behaviour of
	// installs made before the setting).
	require.NoError(t, asRole(ctx, pool, w1, `SELECT * FROM backoff.claim('billing', 'w1', 10, NULL, $1)`, now))
}

// TestNewInstallRequiresQueueGrants: a new install starts with
// require_queue_grants on; an install upgraded with jobs keeps the
// behaviour it had (off).
func TestNewInstallRequiresQueueGrants(t *testing.T) {
	ctx := context.Background()
	migrateTo := func(conn *pgx.Conn, v int32) {
		m, err := migrations.New(ctx, conn)
		require.NoError(t, err)
		_, _, err = m.MigrateTo(ctx, v)
		require.NoError(t, err)
	}
	setting := func(conn *pgx.Conn) (on bool) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT require_queue_grants FROM backoff.settings`).Scan(&on))
		return on
	}

	fresh, err := pgx.Connect(ctx, testdb.NewEmptyURL(t))
	require.NoError(t, err)
	defer fresh.Close(ctx)
	migrateTo(fresh, migrations.Latest())
	require.True(t, setting(fresh), "a new install must require queue grants")

	old, err := pgx.Connect(ctx, testdb.NewEmptyURL(t))
	require.NoError(t, err)
	defer old.Close(ctx)
	migrateTo(old, 4)
	_, err = old.Exec(ctx, `SELECT backoff.enqueue('mail')`)
	require.NoError(t, err)
	migrateTo(old, migrations.Latest())
	require.False(t, setting(old), "an upgraded install in use keeps acting as before")
	// The column default is what a settings row written without it gets.
	_, err = old.Exec(ctx, `DELETE FROM backoff.settings; INSERT INTO backoff.settings DEFAULT VALUES`)
	require.NoError(t, err)
	require.True(t, setting(old))
}

// TestWaitingWorkersScope: wake-up registrations follow the queue scope and
// the name rules, and workers cannot read other workers' registrations.
//
// Reproduced the attack: w1 (mail only) deleted billing's registration,
// registered itself for billing (so that enqueue notified billing's jobs on
// its behalf), read backoff.waiting_workers, and registered 2,000-byte
// worker names with escape characters.
func TestWaitingWorkersScope(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	w1 := groupRole(t, worker)
	_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail', 'work')`, w1)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.wait_for_jobs('billing', 'billing-1')`)
	require.NoError(t, err)
	registered := func(queue, who string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.waiting_workers WHERE queue = $1 AND worker = $2`, queue, who).Scan(&n))
		return n
	}

	err = asRole(ctx, pool, w1, `SELECT backoff.stop_waiting('billing', 'billing-1')`)
	require.Equal(t, "42501", sqlState(err), "ended another queue's registration: %v", err)
	require.Contains(t, err.Error(), `"billing"`)
	require.Equal(t, 1, registered("billing", "billing-1"))
	err = asRole(ctx, pool, w1, `SELECT backoff.wait_for_jobs('billing', 'w1')`)
	require.Equal(t, "42501", sqlState(err), "registered for another queue: %v", err)
	err = asRole(ctx, pool, w1, `SELECT * FROM backoff.waiting_workers`)
	require.Equal(t, "42501", sqlState(err), "read the registrations: %v", err)

	long := strings.Repeat("w", 2000)
	for _, c := range []struct{ sql, queue, who string }{
		{`SELECT backoff.wait_for_jobs($1, $2)`, "mail", long},
		{`SELECT backoff.wait_for_jobs($1, $2)`, "mail", "w\x1b[2J"},
		{`SELECT backoff.wait_for_jobs($1, $2)`, "mail", ""},
		{`SELECT backoff.wait_for_jobs($1, $2)`, "mail\n", "w1"},
		{`SELECT backoff.stop_waiting($1, $2)`, "mail", long},
		{`SELECT backoff.stop_waiting($1, $2)`, long, "w1"},
	} {
		err := asRole(ctx, pool, w1, c.sql, c.queue, c.who)
		require.Equal(t, "22023", sqlState(err), "%q %q: %v", c.queue, c.who, err)
	}

	require.NoError(t, asRole(ctx, pool, w1, `SELECT backoff.wait_for_jobs('mail', 'w1')`))
	require.NoError(t, asRole(ctx, pool, w1, `SELECT backoff.stop_waiting('mail', 'w1')`))
}

// TestForeignJobLooksMissing: to a scoped worker, another queue's job is
// indistinguishable from an id that does not exist: the by-id functions
// answer BK001 with the same message, complete_many skips both, and
// backoff.job (the client's Get) returns no row for either.
//
// Reproduced the attack: the by-id functions answered 42501 naming the
// queue for a foreign job but BK001 for a missing one.
func TestForeignJobLooksMissing(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	mine := makeQueueFixtures(t, pool, "mail")
	theirs := makeQueueFixtures(t, pool, "billing")
	var missing int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) + 1000 FROM backoff.jobs`).Scan(&missing))
	w1 := groupRole(t, worker)
	_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail', 'work')`, w1)
	require.NoError(t, err)
	now := t0.Add(time.Minute)

	// The same answer for a foreign job and a missing id, the id aside.
	answer := func(sql string, id int64) string {
		err := asRole(ctx, pool, w1, sql, id, now)
		require.Error(t, err, "%s %d", sql, id)
		return sqlState(err) + " " + strings.ReplaceAll(err.Error(), strconv.FormatInt(id, 10), "ID")
	}
	for _, c := range []struct {
		sql     string
		foreign int64
	}{
		{`SELECT * FROM backoff.complete($1, 1, $2)`, theirs.running},
		{`SELECT * FROM backoff.complete($1, 7, $2)`, theirs.running},
		{`SELECT * FROM backoff.fail($1, 1, 'boom', NULL, true, $2)`, theirs.running},
		{`SELECT * FROM backoff.fail($1, 7, 'boom', NULL, true, $2)`, theirs.running},
		{`SELECT backoff.heartbeat($1, 1, NULL, $2)`, theirs.running},
		{`SELECT * FROM backoff.snooze($1, 1, '1 minute', $2)`, theirs.running},
		{`SELECT * FROM backoff.acquire($1, 'w1', NULL, $2)`, theirs.pending},
		{`SELECT * FROM backoff.acquire($1, 'w1', NULL, $2)`, theirs.running},
	} {
		got := answer(c.sql, c.foreign)
		require.Equal(t, answer(c.sql, missing), got, c.sql)
		require.True(t, strings.HasPrefix(got, "BK001 "), "%s: %s", c.sql, got)
		require.NotContains(t, got, "billing", c.sql)
	}
	// complete_many: a foreign job is skipped like an unknown id, not refused.
	done := rowsAs(t, pool, w1, `SELECT t::text FROM backoff.complete_many(ARRAY[$1, $2, $3]::bigint[], ARRAY[1, 1, 1], $4) AS t`,
		theirs.running, missing, mine.running, now)
	require.Equal(t, []string{strconv.FormatInt(mine.running, 10)}, done)
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM backoff.jobs WHERE id = $1`, theirs.running).Scan(&status))
	require.Equal(t, "running", status)

	// backoff.unfinished_job: its own queues' unfinished jobs, never a
	// foreign queue's (a scoped WaitIdle waits for its queues only).
	require.Empty(t, rowsAs(t, pool, w1, `SELECT queue FROM backoff.unfinished_job(ARRAY['billing'])`))
	require.Equal(t, []string{"mail"}, rowsAs(t, pool, w1, `SELECT queue FROM backoff.unfinished_job()`))
	require.Equal(t, []string{"billing"}, rowsAs(t, pool, groupRole(t, admin), `SELECT queue FROM backoff.unfinished_job(ARRAY['billing'])`))
	// backoff.job: its own job, never a foreign one.
	require.Equal(t, []string{"mail"}, rowsAs(t, pool, w1, `SELECT queue FROM backoff.job($1)`, mine.pending))
	require.Empty(t, rowsAs(t, pool, w1, `SELECT queue FROM backoff.job($1)`, theirs.pending))
	require.Empty(t, rowsAs(t, pool, w1, `SELECT queue FROM backoff.job($1)`, missing))
	// An unscoped worker reads every job by id; no worker reads the table,
	// so EXPLAIN cannot count the rows the scope would hide.
	plain := groupRole(t, worker)
	for _, role := range []string{w1, plain} {
		err := asRole(ctx, pool, role, `EXPLAIN ANALYZE SELECT 1 FROM backoff.jobs WHERE id = $1`, theirs.pending)
		require.Equal(t, "42501", sqlState(err), "%s explained a read of the jobs table: %v", role, err)
	}
	require.Equal(t, []string{"billing"}, rowsAs(t, pool, plain, `SELECT queue FROM backoff.job($1)`, theirs.pending))

	// The Go client of a scoped login: Get reads its own jobs, and a
	// foreign one is not found.
	loginURL := testdb.LoginRole(t, dbURL, worker)
	c, err := client.New(ctx, testdb.Pool(t, loginURL))
	require.NoError(t, err)
	var login string
	require.NoError(t, testdb.Pool(t, loginURL).QueryRow(ctx, `SELECT session_user`).Scan(&login))
	_, err = pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail', 'work')`, login)
	require.NoError(t, err)
	j, err := c.Get(ctx, mine.pending)
	require.NoError(t, err)
	require.Equal(t, "mail", j.Queue)
	_, err = c.Get(ctx, theirs.pending)
	require.ErrorIs(t, err, client.ErrJobNotFound)
}
