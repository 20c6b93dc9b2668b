package cli

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// cronServer starts a temporary local cluster with pg_cron preloaded, and
// returns the URL of a migrated database on it. pg_cron needs
// shared_preload_libraries, which neither the shared test server nor the
// test container has, so this test brings its own server. pg_cron is
// packaged by Debian for PostgreSQL 15: .ci/run installs it; elsewhere, or on
// another version, the test skips and says why (testdb.LocalServerWith).
func cronServer(t *testing.T) (admin, app string) {
	t.Helper()
	admin = testdb.LocalServerWith(t, "pg_cron", "postgresql-15-cron", "shared_preload_libraries=pg_cron", "cron.database_name=postgres")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE app")
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, err)
	u, err := url.Parse(admin)
	require.NoError(t, err, "local clusters have postgres:// URLs")
	u.Path = "/app"
	code, _, errOut := run(t, "migrate", "up", "--database-url", u.String())
	require.Equal(t, ExitOK, code, errOut)
	return admin, u.String()
}

func TestCronInstallStatusUninstall(t *testing.T) {
	t.Parallel()
	admin, app := cronServer(t)
	ctx := context.Background()

	code, out, errOut := run(t, "cron", "status", "--database-url", app)
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, errOut, `the pg_cron extension is not created in database "postgres"`)

	code, out, errOut = run(t, "cron", "install", "--database-url", app)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^scheduled pg_cron job \d+ \(backoff-reap:app\): "CALL backoff.maintain\(p_limit => 1000\)" on "\* \* \* \* \*" in database app\n`, out)
	require.Contains(t, out, "pg_cron keeps its jobs in database postgres")

	code, out, _ = run(t, "cron", "install", "--database-url", app)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no change: pg_cron job")

	code, out, errOut = run(t, "cron", "install", "--database-url", app, "--schedule", "*/5 * * * *", "--limit", "50")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `updated pg_cron job`)

	// What pg_cron holds: one job, to run in app, as the installing user.
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	var schedule, command, database, user string
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) OVER (), schedule, command, database, username
		FROM cron.job WHERE jobname = 'backoff-reap:app'`).Scan(&n, &schedule, &command, &database, &user))
	require.Equal(t, 1, n)
	require.Equal(t, "*/5 * * * *", schedule)
	require.Equal(t, "CALL backoff.maintain(p_limit => 50)", command)
	require.Equal(t, "app", database)

	// The command pg_cron will run, run the way it runs it (in the job's
	// database as the job's user), reaps an expired lease.
	appConn, err := pgx.Connect(ctx, app)
	require.NoError(t, err)
	defer appConn.Close(ctx)
	var id int64
	require.NoError(t, appConn.QueryRow(ctx, `SELECT backoff.enqueue('emails', p_now => now() - interval '2 hours')`).Scan(&id))
	_, err = appConn.Exec(ctx, `SELECT FROM backoff.claim('emails', 'crashed', 1, '1 minute', now() - interval '1 hour')`)
	require.NoError(t, err)
	// One round (p_for 0) instead of 55 seconds of them; a procedure that
	// commits runs alone, outside any transaction block, as pg_cron runs it.
	_, err = appConn.Exec(ctx, "SET ROLE "+pgx.Identifier{user}.Sanitize())
	require.NoError(t, err)
	_, err = appConn.Exec(ctx, strings.TrimSuffix(command, ")")+", p_for => '0 seconds')")
	require.NoError(t, err)
	_, err = appConn.Exec(ctx, "RESET ROLE")
	require.NoError(t, err)
	var status string
	require.NoError(t, appConn.QueryRow(ctx, `SELECT status FROM backoff.jobs WHERE id = $1`, id).Scan(&status))
	require.Equal(t, "retrying", status, "the expired lease was reaped")

	// Optionally watch pg_cron itself run it (its finest schedule is a
	// minute in pg_cron 1.4, and a run lasts 55 s, so this waits up to two
	// minutes).
	if os.Getenv("BACKOFF_TEST_CRON_RUN") != "" {
		require.Equal(t, 0, code)
		code, _, errOut = run(t, "cron", "install", "--database-url", app)
		require.Equal(t, 0, code, errOut)
		require.Eventually(t, func() bool {
			var ok bool
			_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM cron.job_run_details d JOIN cron.job j USING (jobid)
				WHERE j.jobname = 'backoff-reap:app' AND d.status = 'succeeded')`).Scan(&ok)
			return ok
		}, 150*time.Second, time.Second, "pg_cron ran the maintenance")
		code, out, _ = run(t, "cron", "status", "--database-url", app)
		require.Equal(t, 0, code)
		require.Contains(t, out, "succeeded")
		t.Log(out)
	}

	code, out, _ = run(t, "cron", "status", "--database-url", app)
	require.Equal(t, 0, code)
	require.Contains(t, out, `(backoff-reap:app): "CALL backoff.maintain(p_limit => `)

	code, out, _ = run(t, "cron", "uninstall", "--database-url", app)
	require.Equal(t, 0, code)
	require.Regexp(t, `^unscheduled pg_cron job \d+ \(backoff-reap:app\)\n$`, out)
	code, out, _ = run(t, "cron", "uninstall", "--database-url", app)
	require.Equal(t, 0, code)
	require.Equal(t, "no change: no pg_cron job backoff-reap:app\n", out)
}

// Where pg_cron is not loaded (the shared test server, the test container),
// install says what to do in one line and exits 1.
func TestCronWithoutPgCron(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	var preload string
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&preload))
	conn.Close(ctx)
	if preload != "" {
		t.Skipf("this server preloads %q", preload)
	}
	code, _, errOut := run(t, "cron", "install", "--database-url", url)
	require.Equal(t, ExitFailure, code)
	require.Regexp(t, `^backoffctl: pg_cron is (not installed on this server|installed but not loaded): .*restart PostgreSQL\n$`, errOut)
}
