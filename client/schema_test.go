package client

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/migrations"
)

// TestRequiredSchema keeps the client's constant equal to the embedded
// migrations: adding a migration without raising it (or the reverse) fails
// here, not in a user's production.
func TestRequiredSchema(t *testing.T) {
	t.Parallel()
	require.Equal(t, migrations.Latest(), requiredSchema,
		"client.requiredSchema must equal the number of the latest migration in sql/migrations")
}
