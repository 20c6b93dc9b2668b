package pgserver

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestStartLocal makes, uses and removes a temporary cluster from the
// machine's PostgreSQL binaries (the demo's fallback without Docker).
func TestStartLocal(t *testing.T) {
	if _, err := findBinaries(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs PostgreSQL server binaries: %v", err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	s, err := StartLocal(ctx, "fsync=off")
	require.NoError(t, err)
	require.Equal(t, "local", s.Kind)
	conn, err := pgx.Connect(ctx, s.URL)
	require.NoError(t, err)
	var fsync string
	require.NoError(t, conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync))
	require.Equal(t, "off", fsync)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, s.Stop(ctx))
	_, err = pgx.Connect(ctx, s.URL)
	require.Error(t, err, "the server must be gone after Stop")
}
