package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/migrations"
)

// TestUpDownAndClient: a database migrated with the public package is one
// client.New accepts; down to 0 leaves nothing the client could use, and a
// target out of range changes nothing.
func TestUpDownAndClient(t *testing.T) {
	ctx := context.Background()
	url := testdb.NewEmptyURL(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)

	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), m.Latest())
	cur, err := m.Current(ctx)
	require.NoError(t, err)
	require.Zero(t, cur)

	_, _, err = m.MigrateTo(ctx, migrations.Latest()+1)
	require.Error(t, err)
	cur, err = m.Current(ctx)
	require.NoError(t, err)
	require.Zero(t, cur, "an out-of-range target changes nothing")

	from, to, err := m.MigrateTo(ctx, migrations.Latest())
	require.NoError(t, err)
	require.Equal(t, int32(0), from)
	require.Equal(t, migrations.Latest(), to)
	_, err = client.New(ctx, conn)
	require.NoError(t, err, "the client accepts the migrated schema")

	st, err := m.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Migrations, int(migrations.Latest()))
	for _, x := range st.Migrations {
		require.True(t, x.Applied, x.Name)
	}

	from, to, err = m.MigrateTo(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), from)
	require.Zero(t, to)
	_, err = client.New(ctx, conn)
	require.Error(t, err, "no schema left for the client")
}
