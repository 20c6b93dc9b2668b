package testdb

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

// DebianOnlyMajor is the PostgreSQL major for which the tests expect
// Debian's extension packages (pg_cron, plproxy): .ci/run installs them for
// 15, the version Debian 12 ships.
const DebianOnlyMajor = 15

// LocalServerWith starts a temporary local cluster of the test's own with
// settings ("name=value", e.g. shared_preload_libraries), from the
// machine's PostgreSQL server binaries (pgserver.FindBinaries) when they
// have the extension name, packaged by Debian as debianPackage (e.g.
// "pg_cron", "postgresql-15-cron"). It returns the cluster's superuser
// URL; the cluster stops when the test ends.
//
// When the extension is not installed for those binaries the test skips,
// saying why: on a run of another major (CI's 14, 16, 17 and 18 runs use
// builds without Debian's extensions), or on a developer's machine. Under
// CI on PostgreSQL 15 it fails instead: there the extension must be
// installed (.ci/run installs it), so the test must run.
func LocalServerWith(t testing.TB, name, debianPackage string, settings ...string) string {
	t.Helper()
	bin := localBinariesWith(t, name, debianPackage)
	srv, err := pgserver.StartLocalWith(context.Background(), bin, settings...)
	if err != nil {
		t.Fatalf("testdb: start a local cluster with %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("testdb: stop the local cluster with %s: %v", name, err)
		}
	})
	return srv.URL
}

func localBinariesWith(t testing.TB, name, debianPackage string) pgserver.Binaries {
	t.Helper()
	b, err := pgserver.FindBinaries()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("testdb: %s needs a local cluster (CI is set): %v", name, err)
		}
		t.Skipf("testdb: %s needs a local cluster: %v", name, err)
	}
	if b.HasExtension(name) {
		return b
	}
	if b.Major != DebianOnlyMajor {
		t.Skipf("testdb: %s runs on PostgreSQL %d only (Debian's %s); this run's PostgreSQL is %s",
			name, DebianOnlyMajor, debianPackage, b)
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("testdb: %s is not installed for %s (CI is set; .ci/run installs %s)", name, b, debianPackage)
	}
	t.Skipf("testdb: %s is not installed for %s: apt-get install %s to run this test", name, b, debianPackage)
	return b
}

// RequireServerExtension skips unless the server under test (not a cluster
// of the test's own) can create the extension name, packaged by Debian as
// debianPackage (e.g. "plproxy", "postgresql-15-plproxy"). Under CI on
// PostgreSQL 15 it fails instead, as LocalServerWith does.
func RequireServerExtension(t testing.TB, name, debianPackage string) {
	t.Helper()
	if serverHasExtension(t, name) {
		return
	}
	if major := Major(t); major == DebianOnlyMajor && os.Getenv("CI") != "" {
		t.Fatalf("testdb: %s is not installed on the PostgreSQL %d server (CI is set; .ci/run installs %s)", name, major, debianPackage)
	}
	t.Skipf("testdb: %s is not installed on the server under test (apt-get install %s)", name, debianPackage)
}

// RequireExtensionFiles is for a server given by URL, whose extension
// directory is not the tests' to write: it skips unless the files of the
// extension name are installed there (make install-extension; the
// container make test starts has them), and fails instead when CI is set,
// where the server under test is one CI started.
func RequireExtensionFiles(t testing.TB, name string) {
	t.Helper()
	if serverHasExtension(t, name) {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("testdb: the files of extension %s are not installed on %s (CI is set)", name, Server(t).Describe())
	}
	t.Skipf("testdb: the files of extension %s are not installed on %s; run `make install-extension` there", name, Server(t).Describe())
}

// serverHasExtension is whether the server under test can create the
// extension name (its files are installed there).
func serverHasExtension(t testing.TB, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, AdminURL(t))
	if err != nil {
		t.Fatalf("testdb: connect to look for extension %s: %v", name, err)
	}
	defer conn.Close(ctx)
	var available bool
	if err := conn.QueryRow(ctx,
		`SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extensions WHERE name = $1)`, name).Scan(&available); err != nil {
		t.Fatalf("testdb: look for extension %s: %v", name, err)
	}
	return available
}
