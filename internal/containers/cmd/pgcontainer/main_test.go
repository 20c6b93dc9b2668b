package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/containers"
	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

// envProbe makes TestProbe, run by pgcontainer as its COMMAND, write what
// it found on the server to the file it names.
const envProbe = "PGCONTAINER_TEST_PROBE"

// TestCommandOnAContainer: pgcontainer -- COMMAND gives COMMAND a server in
// a Testcontainers container as TEST_DATABASE_URL, with the tests' settings
// and the extension's files, exits with COMMAND's status, and removes the
// container after. Without a Docker engine it skips, and fails when CI is
// set; a run that chose local clusters skips it.
func TestCommandOnAContainer(t *testing.T) {
	if os.Getenv("BACKOFF_PG_SERVER") == "local" {
		t.Skip("BACKOFF_PG_SERVER=local: this run starts no containers")
	}
	containers.Use()
	if !pgserver.DockerAvailable(context.Background()) {
		if os.Getenv("CI") != "" {
			t.Fatal("no Docker engine answers Testcontainers, and CI is set")
		}
		t.Skip("no Docker engine answers Testcontainers")
	}
	t.Setenv("TEST_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "")
	probe := filepath.Join(t.TempDir(), "probe")
	t.Setenv(envProbe, probe)
	var stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"--", os.Args[0], "-test.run=^TestProbe$"}, &bytes.Buffer{}, &stderr), stderr.String())
	got, err := os.ReadFile(probe)
	require.NoError(t, err, stderr.String())
	lines := bytes.SplitN(got, []byte("\n"), 2)
	require.Equal(t, "300 off backoff", string(lines[1]), "the tests' settings and the extension's files")
	require.Contains(t, stderr.String(), "(Testcontainers)")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pgx.Connect(ctx, string(lines[0]))
	require.Error(t, err, "the container is gone once the command ended")
}

// TestProbe is the COMMAND of TestCommandOnAContainer: it writes the URL it
// was given, and what the server says, to the file envProbe names.
func TestProbe(t *testing.T) {
	out := os.Getenv(envProbe)
	if out == "" {
		t.Skip("run by TestCommandOnAContainer")
	}
	u := os.Getenv("TEST_DATABASE_URL")
	require.NotEmpty(t, u)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var got string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('max_connections') || ' ' || current_setting('fsync') || ' ' ||
		(SELECT name FROM pg_catalog.pg_available_extensions WHERE name = 'backoff')`).Scan(&got))
	require.NoError(t, os.WriteFile(out, []byte(u+"\n"+got), 0o644))
}

// TestCommandWithoutContainer: with a server given, or local clusters
// chosen, COMMAND runs as it is, and pgcontainer exits with its status.
func TestCommandWithoutContainer(t *testing.T) {
	t.Setenv("TEST_DATABASE_URL", "postgres://u@db.example:5433/x")
	var stderr bytes.Buffer
	require.Equal(t, 7, run([]string{"--", "sh", "-c", `test "$TEST_DATABASE_URL" = postgres://u@db.example:5433/x && exit 7`}, &bytes.Buffer{}, &stderr))
	require.Equal(t, "pgcontainer: no container: the tests use the server of TEST_DATABASE_URL\n", stderr.String())

	t.Setenv("TEST_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("BACKOFF_PG_SERVER", "local")
	stderr.Reset()
	require.Equal(t, 0, run([]string{"--", "sh", "-c", `test -z "$TEST_DATABASE_URL"`}, &bytes.Buffer{}, &stderr))
	require.Empty(t, stderr.String())

	require.Equal(t, 2, run([]string{"sh"}, &bytes.Buffer{}, &stderr), "a command comes after --")
}
