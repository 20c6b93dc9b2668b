package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUIRefusesOpenListenWithoutAuth: beyond loopback the UI needs
// authentication from the environment; the check comes before connecting.
func TestUIRefusesOpenListenWithoutAuth(t *testing.T) {
	t.Setenv(envUIUser, "")
	t.Setenv(envUIPassword, "")
	t.Setenv(envUIToken, "")
	code, _, stderr := run(t, "ui", "--listen", "0.0.0.0:8080", "--database-url", "postgres://nobody@127.0.0.1:1/x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `--listen "0.0.0.0:8080" is not a loopback address`)

	t.Setenv(envUIUser, "ops")
	code, _, stderr = run(t, "ui", "--listen", "0.0.0.0:8080", "--database-url", "postgres://nobody@127.0.0.1:1/x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "set both BACKOFF_UI_USER and BACKOFF_UI_PASSWORD")

	// With a token it goes on, to the database (here unreachable: exit 1).
	t.Setenv(envUIUser, "")
	t.Setenv(envUIToken, "s3cret")
	code, _, stderr = run(t, "ui", "--listen", "0.0.0.0:0", "--database-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2")
	require.Equal(t, ExitFailure, code, stderr)
	require.NotContains(t, stderr, "loopback")
}
