package demo

import (
	"bytes"
	"context"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/cli"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

var (
	accountedRE = regexp.MustCompile(`every job accounted for: (\d+) enqueued = (\d+) completed \+ (\d+) dead-lettered`)
	databaseRE  = regexp.MustCompile(`database: (pgbackoff_demo_[0-9a-f]+), migrated`)
)

// The demo end to end on the test server, with a few hundred jobs: every
// job is accounted for, each section of the report is there, and the
// database it created is gone afterwards.
func TestMain(m *testing.M) {
	cli.Register(NewCommand)
	testdb.Main(m)
}

// run executes backoffctl, with the demo registered as cmd/backoffctl
// does, in-process and returns its exit code and output.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	admin := testdb.AdminURL(t)
	code, out, errOut := run(t, "demo", "--database-url", admin, "--jobs", "300", "--concurrency", "4", "--timeout", "25s")
	t.Log(out)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)

	for _, section := range []string{
		"server:   yours (--database-url)",
		"config:   examples/backoff.toml (env demo) applied",
		"enqueued: 300 jobs: 100 emails",
		"settled 300/300 (100%)", // the last progress line
		"== final stats ==",
		"RATE_LIMITED(429)",
		"breaker of webhooks: seen opening ", // its breaker (examples/backoff.toml, env demo)
		"== dead letters: ",
		"status:        dead_lettered (max_attempts)", // the longest history is a job out of attempts
		"errors (",
		"== retry timelines (examples/backoff.toml, env demo;",
		"square        queue emails    20ms, 80ms → dead letter after attempt 3",
		"conservative  queue webhooks",
		"default       queue reports",
		"cleanup: dropped database pgbackoff_demo_",
		"elapsed: ",
	} {
		require.Contains(t, out, section)
	}
	m := accountedRE.FindStringSubmatch(out)
	require.NotNil(t, m, "the accounting line")
	enq, _ := strconv.Atoi(m[1])
	completed, _ := strconv.Atoi(m[2])
	dead, _ := strconv.Atoi(m[3])
	require.Equal(t, 300, enq)
	require.Equal(t, enq, completed+dead)
	require.Positive(t, dead, "poison jobs dead-letter")
	require.Positive(t, completed)

	// The database the demo made is gone; the server's others are untouched.
	db := databaseRE.FindStringSubmatch(out)
	require.NotNil(t, db)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, db[1]).Scan(&exists))
	require.False(t, exists, "the demo drops its database")
}

// A demo whose jobs cannot all settle exits 1, and still cleans up.
func TestDemoFailsWhenJobsAreUnaccounted(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "demo", "--database-url", testdb.AdminURL(t), "--jobs", "300", "--timeout", "1ms")
	require.Equal(t, cli.ExitFailure, code, out)
	require.Contains(t, errOut, "backoffctl: not every job settled within --timeout 1ms")
	require.NotContains(t, out, "every job accounted for")
	require.Contains(t, out, "cleanup: dropped database pgbackoff_demo_")
}

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--jobs", "2"},
		{"demo", "--concurrency", "0"},
		{"demo", "--progress", "fancy"},
		{"demo", "--timeout", "0s"},
		{"demo", "--output", "json"},
	} {
		code, _, errOut := run(t, args...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", args, errOut)
	}
}

// The live display redraws in place: every frame after the first moves the
// cursor back over the previous one and erases each line it rewrites.
func TestDemoLiveProgress(t *testing.T) {
	var b bytes.Buffer
	qs := newDemoQueues(30, 1)
	p := newProgress(&b, "live", qs, time.Now())
	require.True(t, p.live)
	stats := []cli.StatsRow{{Queue: "emails", Pending: 10}, {Queue: "webhooks", Completed: 7, DeadLettered: 3}}
	p.draw(stats)
	first := b.String()
	require.NotContains(t, first, "\033[6A", "nothing to move back over yet")
	require.Contains(t, first, "[#########.....................]  33%  10/30 settled")
	b.Reset()
	p.done(stats)
	require.True(t, strings.HasPrefix(b.String(), "\033[6A"), "back up over the 6 lines of the last frame")
	require.Equal(t, 6, strings.Count(b.String(), "\r\033[2K"))

	b.Reset()
	plain := newProgress(&b, "auto", qs, time.Now())
	require.False(t, plain.live, "a buffer is not a terminal")
	plain.draw(stats)
	plain.draw(stats) // within the second: no new line
	require.Equal(t, 1, strings.Count(b.String(), "\n"))
	require.Contains(t, b.String(), "settled 10/30 (33%)")
	require.NotContains(t, b.String(), "\033[")
}

// The progress follows a breaker from poll to poll: it counts each time it
// is seen to open (from closed, also straight to half open between two
// polls, or again after a failed probe) and to close.
func TestDemoProgressFollowsTheBreaker(t *testing.T) {
	var b bytes.Buffer
	qs := newDemoQueues(30, 1)
	p := newProgress(&b, "plain", qs, time.Now())
	p.every = 0
	state := func(s string) []cli.StatsRow {
		return []cli.StatsRow{{Queue: "emails", Pending: 1}, {Queue: "webhooks", Pending: 1, Breaker: &s}}
	}
	for _, s := range []string{"closed", "open", "open", "half_open", "closed", "half_open", "open", "half_open", "closed"} {
		p.draw(state(s))
	}
	require.Equal(t, "-", p.breakerCell("emails"))
	require.Equal(t, "closed, opened 3×", p.breakerCell("webhooks"))
	require.Equal(t, 2, p.breakers["webhooks"].closed)
	require.Contains(t, b.String(), "webhooks breaker open, opened 1×\n")
	require.Contains(t, b.String(), "webhooks breaker half_open, opened 3×\n")

	b.Reset()
	live := newProgress(&b, "live", qs, time.Now())
	live.draw(state("open"))
	require.Contains(t, b.String(), "open, opened 1×")
}

// The simulated downstream admits its rate, tells a refused caller when its
// turn comes, and keeps that turn for it.
func TestDemoLimiter(t *testing.T) {
	l := newDemoLimiter(100, 2) // one request per 10ms, two ahead
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for id := int64(1); id <= 3; id++ {
		_, ok := l.admit(id, now)
		require.True(t, ok, "within the burst: %d", id)
	}
	wait, ok := l.admit(4, now)
	require.False(t, ok)
	require.Equal(t, 30*time.Millisecond, wait)
	wait5, ok := l.admit(5, now)
	require.False(t, ok)
	require.Equal(t, 40*time.Millisecond, wait5, "the next caller gets the next turn")
	// Too early: told again how long, turn kept.
	again, ok := l.admit(4, now.Add(10*time.Millisecond))
	require.False(t, ok)
	require.Equal(t, 20*time.Millisecond, again)
	// At its turn it is admitted even though the schedule is full.
	_, ok = l.admit(4, now.Add(30*time.Millisecond))
	require.True(t, ok)
}

// The attack: `demo --database-url 'postgres://…/postgres?dbname=prod'`
// worked in prod, because the query parameter wins over the path the demo
// rewrote. With ?dbname= and ?database=, the named database is untouched:
// its policies, its queues and a real pending job of a queue the demo also
// uses are exactly as before, and it holds no demo job.
func TestDemoLeavesTheNamedDatabaseAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prodURL := testdb.NewURL(t)
	prod, err := pgx.Connect(ctx, prodURL)
	require.NoError(t, err)
	defer prod.Close(ctx)
	var realJob int64
	require.NoError(t, prod.QueryRow(ctx, `SELECT backoff.enqueue('emails', '{"to": "customer@example.com"}')`).Scan(&realJob))
	snapshot := func() string {
		var s string
		require.NoError(t, prod.QueryRow(ctx, `SELECT concat_ws(E'\n',
			(SELECT string_agg(p::text, E'\n' ORDER BY p.name) FROM backoff.policies AS p),
			(SELECT string_agg(q::text, E'\n' ORDER BY q.name) FROM backoff.queues AS q),
			(SELECT string_agg(j::text, E'\n' ORDER BY j.id) FROM backoff.jobs AS j))`).Scan(&s))
		return s
	}
	before := snapshot()
	u, err := url.Parse(prodURL)
	require.NoError(t, err)
	prodName := strings.TrimPrefix(u.Path, "/")

	for _, param := range []string{"dbname", "database"} {
		t.Run(param, func(t *testing.T) {
			admin, err := url.Parse(testdb.AdminURL(t))
			require.NoError(t, err)
			q := admin.Query()
			q.Set(param, prodName)
			admin.RawQuery = q.Encode()
			code, out, errOut := run(t, "demo", "--database-url", admin.String(), "--jobs", "30", "--concurrency", "2", "--timeout", "25s")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "cleanup: dropped database pgbackoff_demo_")
			require.Equal(t, before, snapshot(), "the demo changed the database named by ?%s=", param)
		})
	}
}

// demoLogin creates a login that is not a superuser, with CREATEDB and the
// given extra attributes, dropped at the end of the test, and returns its
// name and its URL on the test server.
func demoLogin(t *testing.T, admin *pgx.Conn, attrs string) (string, string) {
	t.Helper()
	ctx := context.Background()
	name := "backoff_test_demo_" + randomHex(5)
	_, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN PASSWORD 'pw' CREATEDB "+attrs)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), testdb.AdminURL(t))
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		_, err = c.Exec(context.Background(), "DROP ROLE "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
	})
	u, err := url.Parse(testdb.AdminURL(t))
	require.NoError(t, err)
	u.User = url.UserPassword(name, "pw")
	return name, u.String()
}

func serverVersion(t *testing.T, conn *pgx.Conn) int {
	var v int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT pg_catalog.current_setting('server_version_num')::int`).Scan(&v))
	return v
}

// The demo revokes what it granted, and leaves nothing: run by a login that
// is not a superuser (CREATEDB, CREATEROLE), its role memberships are
// exactly as before and none of its sessions is left on the server.
//
// The backoff roles already exist (the test databases use them). Before
// PostgreSQL 16, CREATEROLE lets the login grant itself backoff_owner, and
// migrating the demo's database does so: the demo must revoke it. From 16 on
// it may not (that takes ADMIN OPTION on the role), so the test does what
// the README asks of a DBA there: GRANT backoff_owner TO the login
// beforehand. The demo then grants nothing, and must not revoke the DBA's
// grant either.
func TestDemoRevokesWhatItGranted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	name, loginURL := demoLogin(t, admin, "CREATEROLE")
	pg16 := serverVersion(t, admin) >= 160000
	if pg16 {
		_, err = admin.Exec(ctx, "GRANT backoff_owner TO "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
	}
	memberships := func() string {
		var s string
		require.NoError(t, admin.QueryRow(ctx, `
			SELECT coalesce(string_agg(g.rolname || ' admin=' || m.admin_option, ', ' ORDER BY g.rolname), '')
			FROM pg_catalog.pg_auth_members AS m
			JOIN pg_catalog.pg_roles AS g ON g.oid = m.roleid
			JOIN pg_catalog.pg_roles AS u ON u.oid = m.member
			WHERE u.rolname = $1`, name).Scan(&s))
		return s
	}
	before := memberships()
	if pg16 {
		require.Equal(t, "backoff_owner admin=false", before)
	} else {
		require.Empty(t, before)
	}

	code, out, errOut := run(t, "demo", "--database-url", loginURL, "--jobs", "30", "--concurrency", "2", "--timeout", "25s")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Equal(t, before, memberships(), "the demo changed the role memberships of %s", name)
	if pg16 {
		require.NotContains(t, out, "cleanup: revoked", "the DBA's grant is not the demo's to revoke")
	} else {
		require.Contains(t, out, "cleanup: revoked backoff_owner from "+name)
	}
	require.Contains(t, out, "cleanup: dropped database pgbackoff_demo_")
	// Every connection the demo opened is closed (a backend exits a moment
	// after its client said goodbye).
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE usename = $1`, name).Scan(&n))
		return n == 0
	}, 5*time.Second, 20*time.Millisecond, "sessions of %s are left on the server", name)
}

// A login that is not a member of backoff_owner and may not grant itself
// the role (no CREATEROLE; or, from PostgreSQL 16 on, CREATEROLE without
// ADMIN OPTION on it) cannot install: the demo says which grant is missing,
// exits 1, and still drops its database.
func TestDemoNamesTheMissingOwnerGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	cases := map[string]string{"without CREATEROLE": ""}
	if serverVersion(t, admin) >= 160000 {
		cases["CREATEROLE on PostgreSQL 16+"] = "CREATEROLE"
	}
	for what, attrs := range cases {
		t.Run(what, func(t *testing.T) {
			name, loginURL := demoLogin(t, admin, attrs)
			code, out, errOut := run(t, "demo", "--database-url", loginURL, "--jobs", "30", "--timeout", "25s")
			require.Equal(t, cli.ExitFailure, code, "%s\n%s", out, errOut)
			require.Contains(t, errOut, "have a superuser run GRANT backoff_owner TO "+pgx.Identifier{name}.Sanitize())
			require.Contains(t, out, "cleanup: dropped database pgbackoff_demo_")
		})
	}
}

// A session the demo's login left in its database (an interrupted demo)
// does not keep the database: the plain DROP DATABASE gives up on it
// (55006) and WITH (FORCE) ends it. (The plain DROP comes first because
// FORCE fails for a login that is not a superuser while an autovacuum
// worker, which has no role, is in the database: see dropDemoDatabase.)
func TestDemoDropsItsDatabaseDespiteALeftoverSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, loginURL := demoLogin(t, admin, "")
	server, err := cli.ParseConnConfig(loginURL)
	require.NoError(t, err)
	name := "pgbackoff_demo_" + randomHex(4)
	require.NoError(t, adminExec(ctx, server, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()))
	left, err := pgx.ConnectConfig(ctx, inDatabase(server, name))
	require.NoError(t, err)
	defer left.Close(ctx)

	require.NoError(t, dropDemoDatabase(ctx, server, name))
	var exists bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	require.False(t, exists)
	require.Error(t, left.Ping(ctx), "the leftover session was ended")
}

// TestDemoKeep: with --keep the demo's database outlives the demo, with its
// jobs, and the demo prints the backoffctl ui command that shows it.
func TestDemoKeep(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "demo", "--database-url", testdb.AdminURL(t), "--jobs", "30", "--concurrency", "2", "--timeout", "25s", "--keep")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.NotContains(t, out, "cleanup: dropped database")
	m := regexp.MustCompile(`kept: database (pgbackoff_demo_[0-9a-f]+); look at it with\n  backoffctl ui --database-url (\S+)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	t.Cleanup(func() {
		// Its own connection: admin is closed when the test function returns,
		// before cleanups run (the kept databases used to pile up).
		c, err := pgx.Connect(context.Background(), testdb.AdminURL(t))
		if err != nil {
			t.Logf("drop the kept database %s: %v", m[1], err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{m[1]}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop the kept database %s: %v", m[1], err)
		}
	})
	// The printed URL names the server, the user and the kept database, and
	// never the password: connect with the test's own credentials.
	printed, err := pgx.ParseConfig(m[2])
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(testdb.AdminURL(t))
	require.NoError(t, err)
	require.Equal(t, []any{cfg.Host, cfg.Port, cfg.User, m[1]}, []any{printed.Host, printed.Port, printed.User, printed.Database})
	u, err := url.Parse(m[2])
	require.NoError(t, err)
	_, hasPassword := u.User.Password()
	require.False(t, hasPassword, "no password in the printed URL")
	cfg.Database = m[1]
	kept, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer kept.Close(ctx)
	var jobs int
	require.NoError(t, kept.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs`).Scan(&jobs))
	require.Equal(t, 30, jobs)
}

// TestDemoKeepNeedsAURL: a throwaway server is removed when the demo ends,
// so --keep without a server given by URL is a usage error.
func TestDemoKeepNeedsAURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("TEST_DATABASE_URL", "")
	code, _, errOut := run(t, "demo", "--keep")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errOut, "--keep needs a server given by --database-url")
}
