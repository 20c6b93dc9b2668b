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
