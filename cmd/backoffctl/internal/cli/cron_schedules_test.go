package cli

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestCronInstallSchedules: --schedules installs a second pg_cron job,
// beside the reaper's, that fires the periodic jobs every minute; the
// command it holds, run as pg_cron runs it, enqueues a due slot once.
func TestCronInstallSchedules(t *testing.T) {
	t.Parallel()
	admin, app := cronServer(t)
	ctx := context.Background()

	code, _, errOut := run(t, "cron", "install", "--database-url", app)
	require.Equal(t, 0, code, errOut)
	code, out, errOut := run(t, "cron", "install", "--schedules", "--database-url", app)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^scheduled pg_cron job \d+ \(backoff-fire-schedules:app\): "SELECT count\(\*\) FROM backoff.fire_schedules\(p_limit => 1000\)" on "\* \* \* \* \*" in database app\n`, out)
	code, out, _ = run(t, "cron", "install", "--schedules", "--database-url", app)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no change: pg_cron job")
	code, _, errOut = run(t, "cron", "install", "--schedules", "--limit", "100001", "--database-url", app)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "--limit 100001: want at least 1 and at most 100000")

	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var jobs int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM cron.job WHERE jobname LIKE 'backoff-%:app'`).Scan(&jobs))
	require.Equal(t, 2, jobs, "the reaper's job and the schedules' job")
	var command, user string
	require.NoError(t, conn.QueryRow(ctx, `SELECT command, username FROM cron.job WHERE jobname = 'backoff-fire-schedules:app'`).
		Scan(&command, &user))

	appConn, err := pgx.Connect(ctx, app)
	require.NoError(t, err)
	defer appConn.Close(ctx)
	// Anchored 90 minutes back: the slot 30 minutes ago is due and 'latest'
	// fires it; the one before ended 30 minutes ago, more than
	// max_clock_skew, and is passed over, whatever the hour now.
	_, err = appConn.Exec(ctx, `SELECT backoff.put_schedule('hourly', 'reports', p_every => '1 hour',
		p_anchor => now() - interval '90 minutes', p_now => now() - interval '90 minutes')`)
	require.NoError(t, err)
	for range 2 {
		_, err = appConn.Exec(ctx, "SET ROLE "+pgx.Identifier{user}.Sanitize()+"; "+command+"; RESET ROLE")
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, appConn.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE schedule = 'hourly'`).Scan(&n))
	require.Equal(t, 1, n, "the latest missed slot, once")

	code, out, _ = run(t, "cron", "status", "--schedules", "--database-url", app)
	require.Equal(t, 0, code)
	require.Contains(t, out, `(backoff-fire-schedules:app): "SELECT count(*) FROM backoff.fire_schedules(p_limit => 1000)"`)
	code, out, _ = run(t, "cron", "uninstall", "--schedules", "--database-url", app)
	require.Equal(t, 0, code)
	require.Regexp(t, `^unscheduled pg_cron job \d+ \(backoff-fire-schedules:app\)\n$`, out)
	code, out, _ = run(t, "cron", "status", "--database-url", app)
	require.Equal(t, 0, code)
	require.Contains(t, out, "(backoff-reap:app)", "the reaper's job stays")
}
