package security

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestScheduleScope: a worker confined to some queues by
// backoff.grant_queue fires the schedules of those queues only, and no
// worker creates, changes or drops a schedule (docs/adr/0063).
func TestScheduleScope(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	role := testdb.TempRole(t, "sched_worker_", "IN ROLE backoff_worker")
	_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail.*', 'work')`, role)
	require.NoError(t, err)
	for _, s := range [][2]string{{"digest", "mail.digest"}, {"texts", "sms"}} {
		_, err := pool.Exec(ctx, `SELECT backoff.put_schedule($1, $2, p_cron => '* * * * *', p_now => $3)`, s[0], s[1], t0)
		require.NoError(t, err)
	}
	// fireAs fires as role at now and commits; it returns the schedules fired.
	fireAs := func(role string, now time.Time) []string {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		if role != "" {
			_, err = tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize())
			require.NoError(t, err)
		}
		rows, err := tx.Query(ctx, `SELECT schedule FROM backoff.fire_schedules(100, $1)`, now)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		sort.Strings(names)
		return names
	}
	require.Equal(t, []string{"digest"}, fireAs(role, t0.Add(time.Minute)), "a worker scoped to mail.* fires only its queues' schedules")
	require.Equal(t, []string{"texts"}, fireAs("", t0.Add(time.Minute)), "the other schedule was left due")

	// Writing schedules is an admin's: refused for the scoped worker (and
	// for any worker), nothing changed.
	for _, sql := range []string{
		`SELECT backoff.put_schedule('texts', 'sms', p_cron => '0 * * * *')`,
		`SELECT backoff.put_schedule('evil', 'mail.digest', p_cron => '* * * * *')`,
		`SELECT backoff.pause_schedule('texts')`,
		`SELECT backoff.resume_schedule('texts')`,
		`SELECT backoff.drop_schedule('texts')`,
		`UPDATE backoff.schedules SET next_fire_at = '-infinity'`,
		`SELECT * FROM backoff.schedules`,
	} {
		err := asRole(ctx, pool, role, sql)
		require.Equal(t, "42501", sqlState(err), "%s: %v", sql, err)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.schedules WHERE cron = '* * * * *' AND NOT paused`).Scan(&n))
	require.Equal(t, 2, n)

	// Its clock is bounded like any worker's: without time injection a
	// p_now a day away is refused, and one within the skew but ahead is
	// read as the database's clock, so nothing fires early.
	_, err = pool.Exec(ctx, `UPDATE backoff.settings SET time_injection = false`)
	require.NoError(t, err)
	err = asRole(ctx, pool, role, `SELECT * FROM backoff.fire_schedules(100, now() + interval '1 day')`)
	require.Equal(t, "22023", sqlState(err), "%v", err)
	_, err = pool.Exec(ctx, `UPDATE backoff.schedules SET next_fire_at = now() + interval '2 minutes' WHERE name = 'digest'`)
	require.NoError(t, err)
	require.Empty(t, fireAs(role, time.Now().Add(3*time.Minute)), "a clock ahead fires nothing before its time")
}

// TestFireSchedulesFailsClosed: with require_queue_grants on and no queue
// grant in the database at all, a worker fires no schedule, as it may
// claim from no queue (docs/adr/0058); an admin still fires them.
func TestFireSchedulesFailsClosed(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	_, err := pool.Exec(ctx, `UPDATE backoff.settings SET require_queue_grants = true`)
	require.NoError(t, err)
	worker := testdb.TempRole(t, "sched_nogrant_", "IN ROLE backoff_worker")
	admin := testdb.TempRole(t, "sched_admin_", "IN ROLE backoff_admin")
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('texts', 'sms', p_cron => '* * * * *', p_now => $1)`, t0)
	require.NoError(t, err)
	fired := func(role string) int {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM backoff.fire_schedules(100, $1)`, t0.Add(time.Minute)).Scan(&n))
		require.NoError(t, tx.Commit(ctx))
		return n
	}
	require.Zero(t, fired(worker), "a worker without any grant fires nothing")
	var jobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs`).Scan(&jobs))
	require.Zero(t, jobs)
	require.Equal(t, 1, fired(admin))
}

// TestScheduleFiresScoped: backoff.schedule_fires(name) answers a worker
// for the schedules of queues it may work on or produce into only, as
// fire_schedules fires only those: another queue's schedule, or any for a
// worker without a grant while grants are required, reads as no schedule.
func TestScheduleFiresScoped(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	role := testdb.TempRole(t, "sched_reader_", "IN ROLE backoff_worker")
	stranger := testdb.TempRole(t, "sched_stranger_", "IN ROLE backoff_worker")
	_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail.*', 'work')`, role)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE backoff.settings SET require_queue_grants = true`)
	require.NoError(t, err)
	for _, s := range [][2]string{{"digest", "mail.digest"}, {"texts", "sms"}} {
		_, err := pool.Exec(ctx, `SELECT backoff.put_schedule($1, $2, p_cron => '0 * * * *', p_now => $3)`, s[0], s[1], t0)
		require.NoError(t, err)
	}
	fires := func(role, name string) int {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM backoff.schedule_fires($1, $2, 3)`, name, t0).Scan(&n))
		return n
	}
	require.Equal(t, 3, fires(role, "digest"), "its own queue's schedule")
	require.Zero(t, fires(role, "texts"), "another queue's schedule reads as none")
	require.Zero(t, fires(stranger, "digest"), "no grant, grants required: none")
	require.Zero(t, fires(stranger, "texts"))
}

// TestWorkerFireIsBounded: a worker's fire_schedules enqueues at most 1000
// jobs per call whatever p_limit it passes, so one call stays short; an
// admin's call takes its p_limit.
func TestWorkerFireIsBounded(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	role := testdb.TempRole(t, "sched_bulk_", "IN ROLE backoff_worker")
	_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'bulk', 'work')`, role)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('flood', 'bulk', p_every => '1 second', p_catch_up => 'all',
		p_catch_up_limit => 5000, p_now => $1)`, t0)
	require.NoError(t, err)
	fire := func(role string) int {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		if role != "" {
			_, err = tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize())
			require.NoError(t, err)
		}
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM backoff.fire_schedules(100000, $1)`, t0.Add(time.Hour)).Scan(&n))
		require.NoError(t, tx.Commit(ctx))
		return n
	}
	require.Equal(t, 1000, fire(role), "a worker's call: at most 1000 jobs")
	require.Equal(t, 1000, fire(role), "the next call goes on")
	require.Equal(t, 1600, fire(""), "an admin's call: the 1600 slots left of the hour, in one call")
}
