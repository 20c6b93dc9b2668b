package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// loginAs creates a LOGIN role that is a member of group, dropped when the
// test ends, and returns dbURL rewritten to log in as it.
func loginAs(t *testing.T, dbURL, group string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := "backoff_test_" + hex.EncodeToString(b) // roles are server-wide
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN PASSWORD 'pw' IN ROLE "+pgx.Identifier{group}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, testdb.AdminURL(t))
		if err != nil {
			t.Errorf("drop role %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		// Sessions of the role may still be closing.
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		if _, err := c.Exec(ctx, "DROP ROLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	u, err := url.Parse(dbURL)
	require.NoError(t, err, "testdb URLs are postgres:// URLs")
	u.User = url.UserPassword(name, "pw")
	return u.String()
}

// TestConfigApplyByRole runs `backoffctl config apply` logged in as a
// worker and as a producer (refused, nothing written) and as an admin
// (applied).
func TestConfigApplyByRole(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	apply := func(u string) (int, string) {
		code, out, errOut := run(t, "config", "apply", "--config", "../../../../examples/backoff.toml", "--database-url", u)
		return code, out + errOut
	}
	code, out := apply(loginAs(t, dbURL, "backoff_worker"))
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "permission denied")
	code, out = apply(loginAs(t, dbURL, "backoff_producer"))
	require.Equal(t, ExitFailure, code, out)
	code, out = apply(loginAs(t, dbURL, "backoff_admin"))
	require.Equal(t, ExitOK, code, out)
	// The worker's attempt wrote nothing that the admin then had to
	// overwrite: the admin's apply is what the table holds now.
	pool := testdb.Pool(t, dbURL)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.queues`).Scan(&n))
	require.Positive(t, n, "admin's apply wrote the queues of examples/backoff.toml")
}
