package migrations_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/migrations"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

var update = flag.Bool("update", false, "rewrite testdata/schema.golden from the migrated schema")

func TestMain(m *testing.M) { testdb.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// migratedTo returns a connection to a fresh database migrated to version,
// its migrator, and two helpers that fail the test on an error: exec runs
// a statement, id returns the bigint a query selects.
func migratedTo(t *testing.T, version int32) (
	conn *pgx.Conn, m *migrations.Migrator, exec func(sql string, args ...any), id func(sql string, args ...any) int64,
) {
	t.Helper()
	ctx := context.Background()
	conn = connect(t, testdb.NewEmptyURL(t))
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	_, _, err = m.MigrateTo(ctx, version)
	require.NoError(t, err)
	exec = func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	id = func(sql string, args ...any) int64 {
		t.Helper()
		var v int64
		require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&v), sql)
		return v
	}
	return conn, m, exec, id
}

func TestUpDownUpRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewEmptyURL(t))
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	latest := m.Latest()
	require.Positive(t, latest)

	from, to, err := m.MigrateTo(ctx, latest)
	require.NoError(t, err)
	require.Equal(t, int32(0), from)
	require.Equal(t, latest, to)
	first, err := testdb.DumpSchema(ctx, conn)
	require.NoError(t, err)

	var version int32
	require.NoError(t, conn.QueryRow(ctx, "SELECT backoff.schema_version()").Scan(&version))
	require.Equal(t, latest, version)

	_, to, err = m.MigrateTo(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int32(0), to)
	var objects int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'backoff'::regnamespace AND relname <> 'schema_migrations')
		     + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'backoff'::regnamespace)
		     + (SELECT count(*) FROM pg_type WHERE typnamespace = 'backoff'::regnamespace AND typname NOT IN ('schema_migrations', '_schema_migrations'))`).Scan(&objects))
	require.Zero(t, objects, "down to zero must remove every table, function and type but the version table")

	_, to, err = m.MigrateTo(ctx, latest)
	require.NoError(t, err)
	require.Equal(t, latest, to)
	second, err := testdb.DumpSchema(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, first, second, "up after down must recreate the same schema")
}

func TestEveryStepDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewEmptyURL(t))
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	for v := int32(1); v <= m.Latest(); v++ {
		_, _, err := m.MigrateTo(ctx, v)
		require.NoError(t, err, "up to %d", v)
		_, _, err = m.MigrateTo(ctx, v-1)
		require.NoError(t, err, "down from %d", v)
		_, _, err = m.MigrateTo(ctx, v)
		require.NoError(t, err, "up to %d again", v)
	}
}

func TestUpTwiceIsNoOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewURL(t)) // already migrated to latest
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	before, err := testdb.DumpSchema(ctx, conn)
	require.NoError(t, err)
	from, to, err := m.MigrateTo(ctx, m.Latest())
	require.NoError(t, err)
	require.Equal(t, from, to)
	after, err := testdb.DumpSchema(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestTargetOutOfRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewURL(t))
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	_, _, err = m.MigrateTo(ctx, m.Latest()+1)
	require.ErrorContains(t, err, "out of range")
	_, _, err = m.MigrateTo(ctx, -1)
	require.ErrorContains(t, err, "out of range")
}

// TestSchemaGolden fails on any change to the installed schema that the
// committed testdata/schema.golden does not also show. After an intended
// change: go test ./internal/migrations -run TestSchemaGolden -update
func TestSchemaGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewURL(t))
	got, err := testdb.DumpSchema(ctx, conn)
	require.NoError(t, err)
	golden := filepath.Join("testdata", "schema.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "schema differs from %s; if the change is intended, rerun with -update and commit the file", golden)
}

func TestLoadWithoutDatabase(t *testing.T) {
	t.Parallel()
	ms, err := migrations.Load()
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), int32(len(ms)))
	for i, m := range ms {
		require.Equal(t, int32(i+1), m.Sequence)
		require.NotEmpty(t, m.UpSQL, m.Name)
		require.NotEmpty(t, m.DownSQL, "%s must be reversible", m.Name)
	}
}

// publicFunctions lists the functions of schema backoff that PUBLIC may
// execute: no ACL at all (the default grants EXECUTE to PUBLIC) or an
// explicit grant to PUBLIC (grantee 0).
func publicFunctions(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	var fns []string
	require.NoError(t, conn.QueryRow(context.Background(), `
		SELECT coalesce(array_agg(p.oid::pg_catalog.regprocedure::text ORDER BY 1), '{}')
		FROM pg_catalog.pg_proc AS p
		WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
		  AND (p.proacl IS NULL OR EXISTS (
		        SELECT FROM pg_catalog.aclexplode(p.proacl) AS a
		        WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))`).Scan(&fns))
	return fns
}

// TestDownLeavesNothingForPublic: migrating down, to any
// version, never leaves a function of schema backoff executable by PUBLIC.
// Down to 2 used to hand migration 002's SECURITY DEFINER functions back to the
// installing (super)user with EXECUTE for PUBLIC.
func TestDownLeavesNothingForPublic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewEmptyURL(t))
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	for target := m.Latest() - 1; target >= 0; target-- {
		_, _, err := m.MigrateTo(ctx, m.Latest())
		require.NoError(t, err)
		require.Empty(t, publicFunctions(t, conn), "at the latest version")
		_, _, err = m.MigrateTo(ctx, target)
		require.NoError(t, err)
		require.Empty(t, publicFunctions(t, conn), "after migrate down to %d", target)
	}
}
