package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

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
	code, out := apply(testdb.LoginRole(t, dbURL, "backoff_worker"))
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "permission denied")
	code, out = apply(testdb.LoginRole(t, dbURL, "backoff_producer"))
	require.Equal(t, ExitFailure, code, out)
	code, out = apply(testdb.LoginRole(t, dbURL, "backoff_admin"))
	require.Equal(t, ExitOK, code, out)
	// The worker's attempt wrote nothing that the admin then had to
	// overwrite: the admin's apply is what the table holds now.
	pool := testdb.Pool(t, dbURL)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.queues`).Scan(&n))
	require.Positive(t, n, "admin's apply wrote the queues of examples/backoff.toml")
}
