package pgserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// needBinaries skips without PostgreSQL server binaries, or fails under CI.
func needBinaries(t *testing.T) Binaries {
	t.Helper()
	b, err := FindBinaries()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs PostgreSQL server binaries: %v", err)
		}
		t.Skip(err)
	}
	return b
}

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&v))
	return v
}

// TestStartLocal makes, uses and removes a temporary cluster from the
// machine's PostgreSQL binaries, with the settings it was given, and with
// the version FindBinaries reported.
func TestStartLocal(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	ctx := context.Background()
	s, err := StartLocal(ctx, "fsync=off")
	require.NoError(t, err)
	require.Equal(t, KindLocal, s.Kind)
	require.Equal(t, "a temporary local cluster from "+b.Dir, s.Describe())
	require.Equal(t, "off", query(t, s.URL, "SHOW fsync"))
	v, err := s.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, b.Version, v)
	dir := s.local.dir
	require.NoError(t, s.Stop(ctx))
	_, err = pgx.Connect(ctx, s.URL)
	require.Error(t, err, "the server must be gone after Stop")
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "the cluster's directory must be gone after Stop")
}

// TestStartLocalInMemory: with InMemory set, the cluster's directory is on
// the memory file system MemoryDir found, and Describe says so; where there
// is none (no tmpfs with room), it is where StartLocal puts it otherwise.
// Not parallel: it sets InMemory, which the other tests leave unset.
func TestStartLocalInMemory(t *testing.T) {
	b := needBinaries(t)
	ctx := context.Background()
	InMemory = true
	t.Cleanup(func() { InMemory = false })
	s, err := StartLocal(ctx, "fsync=off")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	require.Equal(t, "1", query(t, s.URL, "SELECT 1::text"))
	mem := MemoryDir()
	if mem == "" {
		require.Equal(t, filepath.Clean(os.TempDir()), filepath.Dir(s.local.dir))
		require.Equal(t, "a temporary local cluster from "+b.Dir, s.Describe())
		return
	}
	require.Equal(t, mem, filepath.Dir(s.local.dir))
	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(s.local.data, &fs))
	require.EqualValues(t, 0x01021994, fs.Type, "the data directory is on a tmpfs")
	require.Equal(t, "a temporary local cluster from "+b.Dir+", in memory ("+mem+")", s.Describe())
}

// TestLocalRestartPause: a restart keeps the URL and the data; a paused
// server answers nothing until it resumes (what the fault tests rely on).
func TestLocalRestartPause(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	ctx := context.Background()
	s, err := StartLocal(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	require.True(t, s.Controllable())
	ctxExec(t, s.URL, "CREATE TABLE kept AS SELECT 1 AS x")
	pid := query(t, s.URL, "SELECT pg_backend_pid()::text")

	require.NoError(t, s.Restart(ctx))
	require.Equal(t, "1", query(t, s.URL, "SELECT count(*)::text FROM kept"))
	require.NotEqual(t, pid, query(t, s.URL, "SELECT pg_backend_pid()::text"))

	require.NoError(t, s.Pause(ctx))
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = pgx.Connect(pctx, s.URL)
	cancel()
	require.Error(t, err, "a paused server must not answer")
	require.NoError(t, s.Resume(ctx))
	require.Equal(t, "1", query(t, s.URL, "SELECT 1::text"))
}

// TestStartOrder: a URL wins; BACKOFF_PG_SERVER=local skips Docker; with no
// binaries and no container (no engine chosen, or no Docker) the error's
// first line says what to install.
func TestStartOrder(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, "postgres://u@db.example:5433/x", "TEST_DATABASE_URL")
	require.NoError(t, err)
	require.Equal(t, KindURL, s.Kind)
	require.Equal(t, "the server at db.example:5433 (TEST_DATABASE_URL)", s.Describe())
	require.NoError(t, s.Stop(ctx), "a server given by URL is left alone")
	require.Error(t, s.Restart(ctx))

	t.Setenv(BinDirEnv, t.TempDir())
	t.Setenv("BACKOFF_PG_SERVER", "local")
	_, err = Start(ctx, "", "")
	require.ErrorContains(t, err, "BACKOFF_PG_SERVER=local: "+BinDirEnv+"=")

	t.Setenv("BACKOFF_PG_SERVER", "")
	_, err = Start(ctx, "", "")
	require.Error(t, err)
	first := strings.SplitN(err.Error(), "\n", 2)[0]
	require.Equal(t, "no PostgreSQL server: "+InstallHint, first)
	require.Contains(t, err.Error(), NoEngine, "no harness chose an engine: no containers")

	dockerAnswers = func(context.Context, ContainerEngine) bool { return false }
	t.Cleanup(func() { dockerAnswers = engineAnswers })
	_, err = StartWithEngine(ctx, DockerCommand(), "", "")
	require.Error(t, err)
	require.Contains(t, err.Error(), "no Docker engine answers")
	t.Setenv("BACKOFF_PG_SERVER", "docker")
	_, err = Start(ctx, "", "")
	require.ErrorContains(t, err, "BACKOFF_PG_SERVER=docker: "+NoEngine)
}

// TestFindBinariesOverride: BACKOFF_PG_BINDIR is taken as given, and its
// version read from the postgres binary.
func TestFindBinariesOverride(t *testing.T) {
	b := needBinaries(t)
	t.Setenv(BinDirEnv, b.Dir)
	got, err := FindBinaries()
	require.NoError(t, err)
	require.Equal(t, b, got)
	require.Equal(t, 15, majorInPath("/usr/lib/postgresql/15/bin"))
	require.Equal(t, 17, majorInPath("/opt/homebrew/opt/postgresql@17/bin"))
	require.Equal(t, 16, majorInPath("/usr/pgsql-16/bin"))
}

func ctxExec(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}
