package distribution_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/dist"
	"github.com/pgbackoff/pgbackoff/internal/distribution"
	"github.com/pgbackoff/pgbackoff/internal/migrations"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	sqlfiles "github.com/pgbackoff/pgbackoff/sql"
)

var update = flag.Bool("update", false, "rewrite the generated files dist/backoff.sql and extension/backoff.control")

// The generator's tests run while dist/backoff.sql is stale, to rewrite it
// (make generate); testdb's template is then installed from the old file,
// which no test here takes for the migrations.
func TestMain(m *testing.M) {
	testdb.InstallFileMayBeStale = true
	testdb.Main(m)
}

// generated are the committed generated files. The extension script is
// not among them: `make install-extension` derives it from dist/backoff.sql
// (docs/adr/0031-one-install-file.md).
var generated = map[string]func() (string, error){
	"dist/backoff.sql":          func() (string, error) { return distribution.Render(distribution.Standalone) },
	"extension/backoff.control": func() (string, error) { return distribution.Control(), nil },
}

// TestExtensionScriptFromDist: scripts/extension-script.sh, which `make
// install-extension` runs on the committed dist/backoff.sql, prints exactly
// the extension script the migrations render.
func TestExtensionScriptFromDist(t *testing.T) {
	t.Parallel()
	want, err := distribution.Render(distribution.Extension)
	require.NoError(t, err)
	cmd := exec.Command("sh", filepath.Join("..", "..", "scripts", "extension-script.sh"), filepath.Join("..", "..", "dist", "backoff.sql"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	require.Equal(t, want, string(got), "scripts/extension-script.sh dist/backoff.sql must print distribution.Render(Extension)")
}

// TestGeneratedFilesAreCurrent fails when a committed generated file differs
// from what the migrations render today; `make generate` rewrites them.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for rel, render := range generated {
		want, err := render()
		require.NoError(t, err)
		path := filepath.Join("..", "..", rel)
		if *update {
			require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, want, string(got), "%s is stale: run `make generate`", rel)
	}
}

// TestStandaloneMatchesMigrations installs dist/backoff.sql into an empty
// database and compares its schema with one built by the migrations, in
// another empty database: testdb's template is itself installed from
// dist/backoff.sql (ADR 0085), so it cannot stand for the migrations here.
func TestStandaloneMatchesMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sql, err := distribution.Render(distribution.Standalone)
	require.NoError(t, err)

	fromDist := connect(t, testdb.NewEmptyURL(t))
	tx, err := fromDist.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, sql)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	fromMigrations := connect(t, testdb.NewEmptyURL(t))
	m, err := migrations.New(ctx, fromMigrations)
	require.NoError(t, err)
	_, _, err = m.MigrateTo(ctx, m.Latest())
	require.NoError(t, err)
	requireSameSchema(t, fromMigrations, fromDist)

	// What the tests of package client read instead of the migrator
	// (package dist embeds the file as it was when this test was built,
	// before -update rewrote it).
	if !*update {
		require.Equal(t, m.Latest(), dist.SchemaVersion())
		require.Equal(t, sqlfiles.Digest(), dist.SourcesDigest())
	}
}

// TestCreateExtension installs the extension files into the test server and
// runs CREATE EXTENSION backoff. It needs write access to the server's
// extension directory: a server testdb started gives it (a container, or a
// local cluster whose files are put back when it stops); against
// TEST_DATABASE_URL it runs only when the extension was installed there
// (`make install-extension`; make test's container has them), and fails
// without them when CI is set.
func TestCreateExtension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, testdb.NewEmptyURL(t))
	if srv := testdb.Server(t); srv.Controllable() {
		files, err := distribution.ExtensionFiles()
		require.NoError(t, err)
		require.NoError(t, srv.InstallExtensionFiles(ctx, files))
	} else {
		testdb.RequireExtensionFiles(t, "backoff")
	}
	_, err := conn.Exec(ctx, "CREATE EXTENSION backoff")
	require.NoError(t, err)
	var version string
	require.NoError(t, conn.QueryRow(ctx, "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'backoff'").Scan(&version))
	require.Equal(t, distribution.ExtensionVersion, version)

	requireSameSchema(t, connect(t, testdb.NewURL(t)), conn)

	_, err = conn.Exec(ctx, "DROP EXTENSION backoff")
	require.NoError(t, err)
	var left int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = 'backoff'::regnamespace)
		     + (SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'backoff'::regnamespace)`).Scan(&left))
	require.Zero(t, left, "DROP EXTENSION must remove every table and function it created")
}

func requireSameSchema(t *testing.T, want, got *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	w, err := testdb.DumpSchema(ctx, want)
	require.NoError(t, err)
	g, err := testdb.DumpSchema(ctx, got)
	require.NoError(t, err)
	require.Equal(t, w, g)
	var wv, gv int
	require.NoError(t, want.QueryRow(ctx, "SELECT backoff.schema_version()").Scan(&wv))
	require.NoError(t, got.QueryRow(ctx, "SELECT backoff.schema_version()").Scan(&gv))
	require.Equal(t, wv, gv)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
