// Package testdb hands each test a fresh PostgreSQL database with the
// pgbackoff schema installed.
//
// The server comes from pgserver.Start, the one place that finds a
// PostgreSQL: TEST_DATABASE_URL or DATABASE_URL (testdb creates and drops its
// own databases there and never touches others; make test sets
// TEST_DATABASE_URL to the container it starts with Testcontainers when
// Docker answers); else one container per test package, in the test modules
// whose harness chose Testcontainers (pgserver.SetContainerEngine); else
// one temporary local cluster per test package from the machine's
// PostgreSQL binaries. Servers testdb starts run with fsync off and keep
// their data in memory where they can (a tmpfs). Each package prints which
// server it uses, once, on stderr.
//
// With none, tests skip on a developer's machine and fail when CI is set,
// so a missing server can never pass as green in CI.
//
// Each package installs one template database once, from the install file
// dist/backoff.sql (package dist); every test gets a copy of it (CREATE
// DATABASE … TEMPLATE), which takes milliseconds. The file, not the
// migrator, because package client's tests use testdb and a program that
// imports client resolves those tests' imports: the migrator would bring
// tern and its template libraries to every such program (ADR 0085). The
// file is the migrations' result: internal/distribution fails when it is
// stale (run make generate) and when it installs another schema than
// migrate up.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/dist"
	"github.com/pgbackoff/pgbackoff/internal/pgserver"
	sqlfiles "github.com/pgbackoff/pgbackoff/sql"
)

// InstallFileMayBeStale lets the template be installed from a
// dist/backoff.sql generated from other sources than sql/ holds now. Only
// the generator's tests set it (before Main): they rewrite the file
// (make generate) and compare it with the migrations themselves. Every
// other package fails at once instead, rather than testing SQL that is not
// in sql/.
var InstallFileMayBeStale bool

var server struct {
	once     sync.Once
	adminURL string // a superuser connection to the maintenance database
	template string // name of the migrated template database
	srv      *pgserver.Server
	major    int // server_version's major
	err      error
}

// Main runs a package's tests, then drops the template database, stops
// the server the package started and runs cleanups. Call it from TestMain.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	shutdown()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// MainWithExamples is Main for a package whose runnable examples need the
// server: examples cannot skip, so without a server (and CI unset) they are
// left out of the run (-test.skip) instead of failing; under CI the run
// fails.
func MainWithExamples(m *testing.M) {
	flag.Parse()
	server.once.Do(func() { server.err = startServer() })
	if server.err != nil {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "testdb: no PostgreSQL for tests (CI is set, so this fails): %v\n", server.err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "testdb: no PostgreSQL: the examples are skipped: %v\n", server.err)
		skip := "^Example"
		if cur := flag.Lookup("test.skip").Value.String(); cur != "" {
			skip = cur + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
	}
	Main(m)
}

// New returns a pool on a fresh database migrated to the latest version,
// with time injection switched on (backoff.settings), so that any role may
// pass any p_now.
// The pool is closed and the database dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Pool(t, NewURL(t))
}

// NewURL returns the URL of a fresh database migrated to the latest version,
// for tests that open their own connections (several workers, the CLI).
func NewURL(t testing.TB) string {
	t.Helper()
	ensureServer(t)
	return createDatabase(t, server.template)
}

// NewEmptyURL returns the URL of a fresh database with nothing installed,
// for migration tests.
func NewEmptyURL(t testing.TB) string {
	t.Helper()
	ensureServer(t)
	return createDatabase(t, "template0")
}

// AdminURL is a superuser URL of the server under test, for tests that need
// roles or server-wide settings.
func AdminURL(t testing.TB) string {
	t.Helper()
	ensureServer(t)
	return server.adminURL
}

// Pool opens a pool on url that is closed when the test ends.
func Pool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	return openPool(t, dbURL, 20, false)
}

// QualifiedPool opens a pool on url whose sessions have an empty
// search_path, so that a function which works through it is proven to
// reference everything schema-qualified (STYLE.md). It checks that the
// setting took.
func QualifiedPool(t testing.TB, dbURL string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool := openPool(t, dbURL, maxConns, true)
	var sp string
	if err := pool.QueryRow(context.Background(), "SHOW search_path").Scan(&sp); err != nil {
		t.Fatalf("testdb: show search_path: %v", err)
	}
	if sp != `""` && sp != "" {
		t.Fatalf("testdb: search_path is %q, want empty", sp)
	}
	return pool
}

func openPool(t testing.TB, dbURL string, maxConns int32, emptySearchPath bool) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("testdb: parse url: %v", err)
	}
	cfg.MaxConns = maxConns
	if emptySearchPath {
		cfg.ConnConfig.RuntimeParams["search_path"] = ""
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Server is the server the package's tests use. Fault tests restart and
// pause it (see pgserver.Server.Controllable); after a restart they call
// Restarted.
func Server(t testing.TB) *pgserver.Server {
	t.Helper()
	ensureServer(t)
	return server.srv
}

// ReachedThroughForwardedPort reports whether the tests reach the server
// under test through a forwarded port, as a container's port published on
// the host: its URL names a loopback address, where the server sees the
// connection arrive on another. Such a server cannot connect to itself at
// the tests' URLs (a PL/Proxy router to shards on it).
func ReachedThroughForwardedPort(t testing.TB) bool {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(AdminURL(t))
	if err != nil {
		t.Fatalf("testdb: parse the server's URL: %v", err)
	}
	if !isLoopback(cfg.Host) {
		return false
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testdb: connect to ask the server's address: %v", err)
	}
	defer conn.Close(ctx)
	var addr *string // NULL over a Unix socket
	if err := conn.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&addr); err != nil {
		t.Fatalf("testdb: ask the server's address: %v", err)
	}
	return addr != nil && !isLoopback(*addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Major is the major version of the server under test (e.g. 15).
func Major(t testing.TB) int {
	t.Helper()
	ensureServer(t)
	return server.major
}

// Restarted tells testdb that the package's server was restarted: a
// container's published port may have changed, so the superuser URL is
// read again.
func Restarted(context.Context) error {
	if server.srv == nil {
		return nil
	}
	server.adminURL = server.srv.URL
	return nil
}

func ensureServer(t testing.TB) {
	t.Helper()
	server.once.Do(func() { server.err = startServer() })
	if server.err == nil {
		return
	}
	var setup *setupError
	if errors.As(server.err, &setup) {
		// A server answered but the schema could not be installed: a broken
		// migration must fail every test, never pass as skipped.
		t.Fatalf("testdb: %v", server.err)
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("testdb: no PostgreSQL for tests (CI is set, so this fails instead of skipping): %v", server.err)
	}
	t.Skipf("testdb: no PostgreSQL for tests: %v", server.err)
}

// setupError is a failure after a server was found: creating or migrating
// the template database.
type setupError struct{ err error }

func (e *setupError) Error() string { return "set up the template database: " + e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

func startServer() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u, source := pgserver.URLFromEnv()
	// A test server is thrown away with its package: its data needs no
	// disk, and every test copies a database, which costs ten times less
	// in memory (pgserver.InMemory).
	pgserver.InMemory = true
	srv, err := pgserver.Start(ctx, u, source, pgserver.TestSettings...)
	if err != nil {
		return err
	}
	server.srv = srv
	server.adminURL = srv.URL
	version, err := srv.Version(ctx)
	if err != nil {
		return err
	}
	server.major, _ = strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	line := fmt.Sprintf("testdb: server: PostgreSQL %s, %s", version, srv.Describe())
	if len(srv.Skipped) > 0 {
		line += " (skipped: " + strings.Join(srv.Skipped, "; ") + ")"
	}
	fmt.Fprintln(os.Stderr, line)
	if err := createTemplate(ctx); err != nil {
		return &setupError{err}
	}
	return nil
}

// createTemplate makes the template database every test copies.
func createTemplate(ctx context.Context) error {
	if !InstallFileMayBeStale && dist.SourcesDigest() != sqlfiles.Digest() {
		return errors.New("dist/backoff.sql was generated from other files than sql/ holds now: run `make generate`")
	}
	tmpl := "backoff_tmpl_" + randomSuffix()
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	server.template = tmpl
	conn, err := pgx.Connect(ctx, withDatabase(server.adminURL, tmpl))
	if err != nil {
		return fmt.Errorf("connect to template database: %w", err)
	}
	defer conn.Close(ctx)
	// One transaction, as psql -1 runs the file.
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("install dist/backoff.sql in the template database: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, dist.BackoffSQL); err != nil {
		return fmt.Errorf("install dist/backoff.sql in the template database: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("install dist/backoff.sql in the template database: %w", err)
	}
	// Tests drive time through p_now, as workers and producers too: switch
	// time injection on in every test database (ADR 0035). The tests
	// of the clock check switch it off in their own database. Tests act as
	// worker and producer roles without queue grants, which a new install
	// refuses (require_queue_grants, docs/adr/0058): switched off here, on
	// again by the tests of queue scope in their own database.
	if _, err := conn.Exec(ctx, "UPDATE backoff.settings SET time_injection = true, require_queue_grants = false"); err != nil {
		return fmt.Errorf("switch time injection on in the template database: %w", err)
	}
	return nil
}

func shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if server.template != "" && server.err == nil {
		_ = adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{server.template}.Sanitize()+" WITH (FORCE)")
	}
	if err := server.srv.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
	}
}

func createDatabase(t testing.TB, template string) string {
	t.Helper()
	ctx := context.Background()
	name := "backoff_test_" + randomSuffix()
	stmt := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{template}.Sanitize())
	var err error
	for try := 0; try < 50; try++ {
		err = adminExec(ctx, stmt)
		// 55006: the template is briefly in use by a concurrent CREATE DATABASE.
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	// A whole run at a user's database default (CI runs the queue's
	// suites once at serializable): the setting belongs to the database,
	// which a copy of the template does not inherit.
	if level := os.Getenv("BACKOFF_TEST_DEFAULT_ISOLATION"); level != "" {
		if err := adminExec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+
			" SET default_transaction_isolation = '"+strings.ReplaceAll(level, "'", "''")+"'"); err != nil {
			t.Fatalf("testdb: BACKOFF_TEST_DEFAULT_ISOLATION=%s: %v", level, err)
		}
	}
	t.Cleanup(func() {
		if err := adminExec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	return withDatabase(server.adminURL, name)
}

func adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dbURL with its database replaced by name. It accepts
// URLs (postgres://…) and keyword/value strings (host=… dbname=…).
func withDatabase(dbURL, name string) string {
	if u, err := url.Parse(dbURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	var kept []string
	for _, f := range strings.Fields(dbURL) {
		if !strings.HasPrefix(f, "dbname=") {
			kept = append(kept, f)
		}
	}
	return strings.Join(append(kept, "dbname="+name), " ")
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SetDefaultIsolation sets the database's default_transaction_isolation
// ("read committed", "repeatable read" or "serializable"), as a user's
// ALTER DATABASE does: sessions opened after it start their transactions
// at that level.
func SetDefaultIsolation(t testing.TB, dbURL, level string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("testdb: set default isolation: %v", err)
	}
	defer c.Close(ctx)
	var db string
	if err := c.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatalf("testdb: set default isolation: %v", err)
	}
	if _, err := c.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+
		" SET default_transaction_isolation = '"+strings.ReplaceAll(level, "'", "''")+"'"); err != nil {
		t.Fatalf("testdb: set default isolation %q: %v", level, err)
	}
}
