package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
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

// Not in parallel with the package's other demos: the fewer claims
// compete for the server, the more surely the webhooks queue's claims
// outpace its rate limit.
func TestDemoEndToEnd(t *testing.T) {
	admin := testdb.AdminURL(t)
	// 1200 jobs: 12 on webhooks; its downstream goes down after 3 calls
	// for a second and 6 calls, enough to open the breaker.
	code, out, errOut := run(t, "demo", "--database-url", admin, "--jobs", "1200", "--timeout", "60s")
	t.Log(out)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)

	for _, section := range []string{
		"server:   yours (--database-url)",
		"config:   examples/backoff.toml (env demo) applied",
		"enqueued: 1200 jobs: 587 emails",
		"settled 1200/1200 (100%)", // the last progress line
		"webhooks: rate limit refused ",
		"== final stats ==",
		"DOWN(503)",
		"== queue controls (times since the demo started) ==",
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
	require.NotContains(t, out, "SQLSTATE", "every error is a simulated downstream's")
	checkControls(t, out)
	m := accountedRE.FindStringSubmatch(out)
	require.NotNil(t, m, "the accounting line")
	enq, _ := strconv.Atoi(m[1])
	completed, _ := strconv.Atoi(m[2])
	dead, _ := strconv.Atoi(m[3])
	require.Equal(t, 1200, enq)
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

var (
	rateLimitRE = regexp.MustCompile(`webhooks rate limit 10/s \(burst 3\): refused (\d+) claims? \(no token left: the Worker waited for the next\), so at most (\d+) calls a second reached hooks\.example\.com`)
	outageRE    = regexp.MustCompile(`webhooks downstream hooks\.example\.com: down from (\S+) to (\S+), answering 503 to every call`)
	openedRE    = regexp.MustCompile(`\n +(\S+)  opened: 3 failed calls within 5s, the last: POST https://hooks\.example\.com/in/\d+: 503 Service Unavailable`)
	closedRE    = regexp.MustCompile(`\n +(\S+)  closed: a probe succeeded`)
)

// checkControls: the summary shows the webhooks queue's controls at work,
// on a busy machine as on an idle one. Its rate limit refused claims and
// held the calls to its rate (and burst): its rate (10/s) is below what a
// Worker whose claims take up to 100ms asks for, and its bucket (3) is
// smaller than the Worker's handlers (8). Its breaker opened
// during the downstream's outage (fixed in calls and time), on 503s, and
// closed once the outage was over (the times are the handler's and the
// Worker's: compared only for their order).
func checkControls(t *testing.T, out string) {
	t.Helper()
	r := rateLimitRE.FindStringSubmatch(out)
	require.NotNil(t, r, "the rate limit's line")
	refused, _ := strconv.Atoi(r[1])
	busiest, _ := strconv.Atoi(r[2])
	require.Positive(t, refused, "the rate limit refused claims")
	require.LessOrEqual(t, busiest, 10+3, "at most rate + burst calls in a second")

	o := outageRE.FindStringSubmatch(out)
	require.NotNil(t, o, "the downstream's outage")
	down, up := parseSeconds(t, o[1]), parseSeconds(t, o[2])
	opened := openedRE.FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, opened, "the breaker opened on the outage's 503s")
	closed := closedRE.FindAllStringSubmatch(out, -1)
	require.Len(t, closed, len(opened), "and closed each time")
	first, last := parseSeconds(t, opened[0][1]), parseSeconds(t, closed[len(closed)-1][1])
	require.LessOrEqual(t, down, first, "opened after the downstream went down")
	require.Less(t, first, last)
	require.LessOrEqual(t, up, last, "closed after the downstream came back")
}

func parseSeconds(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
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
		rate := 50.0
		return []cli.StatsRow{{Queue: "emails", Pending: 1}, {Queue: "webhooks", Pending: 1, Breaker: &s, Rate: &rate}}
	}
	qs[1].nRefused.Store(7)
	for _, s := range []string{"closed", "open", "open", "half_open", "closed", "half_open", "open", "half_open", "closed"} {
		p.draw(state(s))
	}
	require.Equal(t, "-", p.breakerCell("emails"))
	require.Equal(t, "closed, opened 3×", p.breakerCell("webhooks"))
	require.Equal(t, 2, p.breakers["webhooks"].closed)
	require.Contains(t, b.String(), "webhooks: rate limit refused 7 claims, breaker open, opened 1×\n")
	require.Contains(t, b.String(), "webhooks: rate limit refused 7 claims, breaker half_open, opened 3×\n")
	require.NotContains(t, b.String(), "emails:")

	b.Reset()
	live := newProgress(&b, "live", qs, time.Now())
	live.draw(state("open"))
	require.Contains(t, b.String(), "open, opened 1×")
	require.Regexp(t, `webhooks +1 +0 +0 +0 +0 +0 +7  open, opened 1×`, b.String())
}

// The webhook downstream goes down after a fixed number of calls and comes
// back after a fixed time and number of calls, whatever the rate of calls.
func TestDemoOutage(t *testing.T) {
	o := &demoOutage{after: 3, length: time.Second}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		require.False(t, o.down(now.Add(time.Duration(i)*time.Hour)), "call %d: up", i+1)
	}
	from, _ := o.window()
	require.True(t, from.IsZero(), "not down yet")
	start := now.Add(5 * time.Hour)
	require.True(t, o.down(start), "the 4th call: down")
	require.True(t, o.down(start.Add(999*time.Millisecond)))
	require.False(t, o.down(start.Add(time.Second)), "back after a second")
	require.False(t, o.down(start.Add(time.Hour)), "and stays up")
	from, until := o.window()
	require.Equal(t, []time.Time{start, start.Add(time.Second)}, []time.Time{from, until})

	// Few calls: down until it refused three, however long that takes.
	few := &demoOutage{after: 0, length: time.Second, atLeast: 3}
	require.True(t, few.down(start))
	require.True(t, few.down(start.Add(time.Minute)))
	require.True(t, few.down(start.Add(2*time.Minute)))
	require.False(t, few.down(start.Add(3*time.Minute)))
	from, until = few.window()
	require.Equal(t, []time.Time{start, start.Add(2 * time.Minute)}, []time.Time{from, until})
}

// Every error a handler returns reads as its simulated downstream's (an
// SMTP reply, an HTTP status, a storage service's message, a timeout),
// never as one of PostgreSQL: the demo's database does not fail, and a
// dead letter saying "deadlock detected (SQLSTATE 40P01)" would read as a
// bug of pgbackoff.
func TestDemoErrorsAreTheDownstreams(t *testing.T) {
	qs := newDemoQueues(3000, 1)
	hosts := map[string]string{"emails": "example", "webhooks": "https://hooks.example.com/", "reports": "s3://reports/"}
	for _, q := range qs {
		if q.outage != nil {
			q.outage = &demoOutage{after: 10, length: time.Hour} // its 503s
		}
		// Three attempts of every job, 64 at a time (a call sleeps 1-3ms).
		var mu sync.Mutex
		seen := map[string]bool{}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		for i, p := range q.payloads {
			for attempt := 1; attempt <= 3; attempt++ {
				job := &client.Job{ID: int64(i + 1), Token: attempt, Queue: q.name, Payload: mustJSON(t, p)}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if err := q.handle(context.Background(), job); err != nil {
						mu.Lock()
						seen[err.Error()] = true
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		for msg := range seen {
			require.NotRegexp(t, `SQLSTATE|^ERROR:|deadlock|statement timeout`, msg)
			require.Contains(t, msg, hosts[q.name], "%s: %s names its downstream", q.name, msg)
		}
		if q.outage == nil {
			require.GreaterOrEqual(t, len(seen), 3, "%s: a variety of errors", q.name)
		} else {
			require.NotEmpty(t, seen)
		}
	}
	require.Equal(t, 31, qs[1].enqueued, "the webhooks queue gets a 96th")
	require.Equal(t, 3000, qs[0].enqueued+qs[1].enqueued+qs[2].enqueued)
	for _, n := range []int{3, 4, 30} {
		qs := newDemoQueues(n, 1)
		require.Equal(t, n, qs[0].enqueued+qs[1].enqueued+qs[2].enqueued)
		for _, q := range qs {
			require.Positive(t, q.enqueued, "--jobs %d: every queue has jobs", n)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// The Workers' logger counts the claims a rate limit refused (the Worker
// holds the queue until its next token), and notes when the Worker found
// the breaker open: an opening, with the failure before it (finding it
// open again is the same opening); the next call that succeeds closed it.
func TestDemoHoldCounter(t *testing.T) {
	qs := newDemoQueues(30, 1)
	q := qs[1]
	log := newHoldCounter(qs)
	log.Debug(heldMessage, "queue", "webhooks", "breaker", "closed", "wait", 20*time.Millisecond)
	log.With("worker", "demo-webhooks").Debug(heldMessage, "queue", "webhooks", "breaker", "half_open", "wait", 20*time.Millisecond)
	log.Error("claim failed", "queue", "webhooks")
	require.EqualValues(t, 2, q.nRefused.Load())
	require.Zero(t, qs[0].nRefused.Load())
	require.Empty(t, q.breaker.list())

	_ = q.failed("POST https://hooks.example.com/in/1: 503 Service Unavailable (Retry-After: 1)")
	before := time.Now()
	log.Debug(heldMessage, "queue", "webhooks", "breaker", "open", "wait", 250*time.Millisecond)
	log.Debug(heldMessage, "queue", "webhooks", "breaker", "open", "wait", 250*time.Millisecond)
	require.EqualValues(t, 2, q.nRefused.Load(), "an open breaker is not the rate limit")
	closedAt := time.Now()
	q.breaker.succeeded(closedAt)
	q.breaker.succeeded(closedAt.Add(time.Second)) // closed already
	eps := q.breaker.list()
	require.Len(t, eps, 1)
	require.False(t, eps[0].opened.Before(before))
	require.Equal(t, "POST https://hooks.example.com/in/1: 503 Service Unavailable (Retry-After: 1)", eps[0].cause)
	require.Equal(t, closedAt, eps[0].closed)
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
	// Every error recorded, of the dead letters too, is a simulated
	// downstream's, none reads as PostgreSQL's.
	var errs, sqlstates int
	require.NoError(t, kept.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE e->>'error' ~ 'SQLSTATE|^ERROR:')
		FROM backoff.jobs AS j, jsonb_array_elements(j.errors) AS e`).Scan(&errs, &sqlstates))
	require.Positive(t, errs)
	require.Zero(t, sqlstates)
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
