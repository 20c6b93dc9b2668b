package client

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/dist"
)

// TestRequiredSchema keeps the client's constant equal to the version the
// install file records, which internal/distribution keeps equal to the
// latest migration: adding a migration without raising it (or the reverse)
// fails here, not in a user's production. Read from the file rather than
// the migrator, which would bring tern to every importer's go mod tidy
// (ADR 0085).
func TestRequiredSchema(t *testing.T) {
	t.Parallel()
	require.Equal(t, dist.SchemaVersion(), requiredSchema,
		"client.requiredSchema must equal the number of the latest migration in sql/migrations")
}
