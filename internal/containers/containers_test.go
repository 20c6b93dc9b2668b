package containers_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/pgbackoff/pgbackoff/internal/containers"
	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

// TestServerInATestcontainersContainer drives a server through everything
// the tests ask of a container: start from the local image, SQL, a file
// copied in, a restart with a fast shutdown, a pause and a resume, removal.
// Without a Docker engine it skips, and fails when CI is set; a run that
// chose local clusters (BACKOFF_PG_SERVER=local, as .ci/run does without
// Docker and for the other PostgreSQL versions) skips it.
func TestServerInATestcontainersContainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Getenv("BACKOFF_PG_SERVER") == "local" {
		t.Skip("BACKOFF_PG_SERVER=local: this run starts no containers")
	}
	containers.Use()
	if !pgserver.DockerAvailable(ctx) {
		if os.Getenv("CI") != "" {
			t.Fatal("no Docker engine answers Testcontainers, and CI is set")
		}
		t.Skip("no Docker engine answers Testcontainers")
	}
	image, err := pgserver.ChooseImage(ctx)
	require.NoError(t, err)
	srv, err := pgserver.StartContainer(ctx, image, "max_connections=20")
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop(context.Background())
		}
	})
	require.Contains(t, srv.Describe(), "(Testcontainers)")

	query := func(ctx context.Context, sql string) (string, error) {
		conn, err := pgx.Connect(ctx, srv.URL)
		if err != nil {
			return "", err
		}
		defer conn.Close(context.Background())
		var v string
		return v, conn.QueryRow(ctx, sql).Scan(&v)
	}
	got, err := query(ctx, "SHOW max_connections")
	require.NoError(t, err)
	require.Equal(t, "20", got, "the settings reach the server")

	require.NoError(t, srv.InstallExtensionFiles(ctx, map[string][]byte{"pgbackoff_probe.control": []byte("comment = 'probe'\n")}))
	got, err = query(ctx, "SELECT pg_read_file((SELECT setting FROM pg_config WHERE name = 'SHAREDIR') || '/extension/pgbackoff_probe.control')")
	require.NoError(t, err)
	require.Equal(t, "comment = 'probe'\n", got)

	before, err := query(ctx, "SELECT pg_postmaster_start_time()::text")
	require.NoError(t, err)
	require.NoError(t, srv.Restart(ctx))
	after, err := query(ctx, "SELECT pg_postmaster_start_time()::text")
	require.NoError(t, err)
	require.NotEqual(t, before, after, "a new postmaster after the restart")

	require.NoError(t, srv.Pause(ctx))
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = query(short, "SELECT 1::text")
	cancelShort()
	require.Error(t, err, "a paused server answers nothing")
	require.NoError(t, srv.Resume(ctx))
	got, err = query(ctx, "SELECT 1::text")
	require.NoError(t, err)
	require.Equal(t, "1", got)

	require.NoError(t, srv.Stop(ctx))
	stopped = true
	_, err = query(ctx, "SELECT 1::text")
	require.Error(t, err, "the container is gone")
}

// TestLocalImageThroughTheDockerAPI: the local image, built from this
// machine's PostgreSQL binaries, is imported through Testcontainers' Docker
// client (no docker command), and a server starts from it. It builds under
// a tag of its own and removes it after. Without Debian's PostgreSQL
// binaries it skips; without a Docker engine as above.
func TestLocalImageThroughTheDockerAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Getenv("BACKOFF_PG_SERVER") == "local" {
		t.Skip("BACKOFF_PG_SERVER=local: this run starts no containers")
	}
	containers.Use()
	if !pgserver.DockerAvailable(ctx) {
		if os.Getenv("CI") != "" {
			t.Fatal("no Docker engine answers Testcontainers, and CI is set")
		}
		t.Skip("no Docker engine answers Testcontainers")
	}
	major := pgserver.DebianMajor()
	if major == "" {
		t.Skip("no Debian PostgreSQL binaries (/usr/lib/postgresql/*/bin) to build an image from")
	}
	tag := "pgbackoff/postgres:" + major + "-import-test"
	p, err := testcontainers.NewDockerProvider()
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = p.Client().ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})
	// A build that fails before the root filesystem is whole leaves no
	// image behind, which a later run would take for one built before.
	err = pgserver.BuildImage(ctx, tag, "99")
	require.ErrorContains(t, err, "/usr/lib/postgresql/99/bin/postgres not found")
	_, err = p.Client().ImageInspect(ctx, tag)
	require.Error(t, err, "no image after a failed build")

	require.NoError(t, pgserver.BuildImage(ctx, tag, major))
	srv, err := pgserver.StartContainer(ctx, tag)
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Stop(context.Background())) }()
	conn, err := pgx.Connect(ctx, srv.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var version string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('server_version_num')").Scan(&version))
	require.Equal(t, major, version[:len(version)-4], "the server of the machine's binaries")
}
