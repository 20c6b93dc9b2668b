package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestConfigApplyGrants: [grants.ROLE] in the file become rows of
// backoff.queue_grants through grant_queue; diff shows what differs; apply
// keeps grants only in the database unless --prune, which revokes them.
func TestConfigApplyGrants(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	role := testdb.TempRole(t, "backoff_test_", "NOLOGIN IN ROLE backoff_worker")

	dir := t.TempDir()
	file := filepath.Join(dir, "backoff.toml")
	write := func(src string) {
		require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
	}
	write("version = 1\n\n[grants." + role + "]\nwork = [\"mail.*\", \"sms\"]\nproduce = [\"mail.out\"]\n")

	code, out, errOut := run(t, "config", "diff", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "+ grant "+role+" work mail.*")
	code, out, errOut = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "3 added")
	pool := testdb.Pool(t, dbURL)
	grants := func() []string {
		var g []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_agg(privilege || ' ' || queue ORDER BY privilege, queue), '{}') FROM backoff.queue_grants`).Scan(&g))
		return g
	}
	require.Equal(t, []string{"produce mail.out", "work mail.*", "work sms"}, grants())
	code, out, _ = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no change")

	write("version = 1\n\n[grants." + role + "]\nwork = [\"mail.*\"]\n")
	code, out, _ = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "grant "+role+" work sms: only in the database (kept")
	require.Len(t, grants(), 3, "kept without --prune")
	code, out, errOut = run(t, "config", "apply", "--prune", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"work mail.*"}, grants(), out)

	// A file that drops a role's last grant: diff and apply --prune warn
	// what the role may do afterwards (docs/adr/0058): every queue with
	// require_queue_grants off (this database's), none with it on.
	write("version = 1\n")
	code, out, errOut = run(t, "config", "diff", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "warning: apply --prune revokes every queue grant of role "+role+": it may then act on every queue (require_queue_grants is off)")
	write("version = 1\n[settings]\ntime_injection = true\n")
	code, out, errOut = run(t, "config", "diff", "--config", file, "--database-url", dbURL, "--output", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"unscoped": "no queue (require_queue_grants is on)"`)
	write("version = 1\n[settings]\ntime_injection = true\nrequire_queue_grants = false\n")
	code, out, errOut = run(t, "config", "apply", "--prune", "--config", file, "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "warning: role "+role+" has no queue grant left: it may now act on every queue (require_queue_grants is off)")
	require.Empty(t, grants())

	// An unknown role stops the apply, naming it; nothing is written.
	write("version = 1\n\n[grants.no_such_role_zz]\nwork = [\"x\"]\n[queues.x]\npolicy = \"moderate\"\n")
	code, _, errOut = run(t, "config", "apply", "--config", file, "--database-url", dbURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `unknown role "no_such_role_zz"`)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.queues WHERE name = 'x'`).Scan(&n))
	require.Zero(t, n)

	// Validation: FILE:LINE: key: message.
	write("version = 1\n\n[grants.r]\nwork = \"x\"\n")
	code, _, errOut = run(t, "config", "validate", "--config", file)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "backoff.toml:4: grants.r.work: must be a list of queue names")
}
