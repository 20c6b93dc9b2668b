package cli

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestConfigApplyQueueControls: apply writes a queue's controls and a
// policy's lease-expiry budget, diff shows a changed control field by field,
// a control the file drops is written NULL (off), paused is left as the
// operator set it, and a bad value never reaches the database: validation
// names FILE:LINE: key.
func TestConfigApplyQueueControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	file := filepath.Join(t.TempDir(), "backoff.toml")
	write := func(src string) { require.NoError(t, os.WriteFile(file, []byte("version = 1\n"+src), 0o600)) }
	pool := testdb.Pool(t, dbURL)
	row := func() string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT concat_ws(' ', policy, rate, burst, breaker_failures, breaker_window,
			breaker_cooldown, breaker_probes, paused) FROM backoff.queues WHERE name = 'hooks'`).Scan(&s))
		return s
	}

	write(`[policies.p]
max_lease_expiries = 3
[queues.hooks]
policy = "p"
rate = 2.5
breaker_failures = 5
breaker_window = "30s"
breaker_cooldown = "1m"
breaker_probes = 2
`)
	code, out, errOut := run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "+ queue hooks\n    policy = p\n    rate = 2.5\n    breaker_failures = 5\n"+
		"    breaker_window = 30s\n    breaker_cooldown = 1m\n    breaker_probes = 2\n")
	require.Equal(t, "p 2.5 5 00:00:30 00:01:00 2 f", row())
	var budget int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max_lease_expiries FROM backoff.policies WHERE name = 'p'`).Scan(&budget))
	require.Equal(t, 3, budget)
	code, out, _ = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no change")

	// The operator pauses it; the file then drops the breaker and sets a burst.
	code, _, errOut = run(t, "queue", "pause", "hooks", "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	write(`[policies.p]
[queues.hooks]
policy = "p"
rate = 2.5
burst = 4
`)
	code, out, errOut = run(t, "config", "diff", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "~ queue hooks (paused)\n    burst: none -> 4\n    breaker_failures: 5 -> none\n"+
		"    breaker_window: 30s -> none\n    breaker_cooldown: 1m -> none\n    breaker_probes: 2 -> -\n")
	require.Contains(t, out, "    max_lease_expiries: 3 -> none\n")
	code, _, errOut = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "p 2.5 4 1 t", row(), "breaker off (NULL, probes back to 1), still paused")

	// Invalid settings are the file's problems, reported before connecting.
	write(`[queues.hooks]
policy = "moderate"
rate = 0
breaker_failures = 5
breaker_window = "0s"
`)
	code, _, errOut = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, file+":4: queues.hooks.rate: must be a positive number of jobs per second, got 0")
	require.Contains(t, errOut, file+":6: queues.hooks.breaker_window: must be positive, got \"0s\"")
	require.Equal(t, "p 2.5 4 1 t", row(), "nothing written")
}

// A role scoped to some queues lists every queue but reads the live state
// only of those it may work on: the others show no state instead of the
// whole command failing with 42501.
func TestQueueListForAScopedRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	role := testdb.TempRole(t, "backoff_test_", "LOGIN PASSWORD 'pw' IN ROLE backoff_worker")
	t.Cleanup(func() { // before the role's drop
		c, err := pgx.Connect(ctx, testdb.AdminURL(t))
		if err == nil {
			_, _ = c.Exec(ctx, "DROP OWNED BY "+role)
			c.Close(ctx)
		}
	})
	file := filepath.Join(t.TempDir(), "backoff.toml")
	require.NoError(t, os.WriteFile(file, []byte(`version = 1
[queues.mine]
policy = "moderate"
rate = 5
[queues.theirs]
policy = "moderate"
breaker_failures = 3
breaker_window = "1m"
breaker_cooldown = "1m"
[grants.`+role+`]
work = ["mine"]
`), 0o600))
	code, _, errOut := run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)

	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(role, "pw")
	code, out, errOut := run(t, "queue", "list", "--database-url", u.String())
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^mine +moderate +no +yes +5/s +- +-$`, out)
	require.Regexp(t, `(?m)^theirs +moderate +no +yes +- +3 in 1m, cooldown 1m +-$`, out)
	code, out, errOut = run(t, "queue", "show", "theirs", "--database-url", u.String())
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, errOut, "permission denied")
}
