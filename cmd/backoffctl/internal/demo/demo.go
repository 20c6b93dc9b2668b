// Package demo is `backoffctl demo`: a throwaway PostgreSQL (or a
// database it creates on a given server), failing workers, retries and dead
// letters. It lives apart from the operator commands (package cli) so that
// only the demo pulls in the server tooling (ADR 0042).
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/cli"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
	"github.com/pgbackoff/pgbackoff/examples"
	"github.com/pgbackoff/pgbackoff/migrations"
	"github.com/pgbackoff/pgbackoff/pgserver"
)

// demoOptions are the demo's flags.
type demoOptions struct {
	jobs        int
	concurrency int
	timeout     time.Duration
	configFile  string // "" for the built-in examples/backoff.toml
	env         string
	progress    string // auto, live, plain
	seed        uint64
	keep        bool // keep the demo's database (a server given by URL only)
}

// NewCommand returns the demo command; cmd/backoffctl registers it with
// cli.Register.
func NewCommand() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the demo: a throwaway PostgreSQL, failing workers, retries and dead letters",
		Long: `Show pgbackoff at work in under a minute. The demo

  1. gets a PostgreSQL the way the tests and the benchmarks do: with
     --database-url, TEST_DATABASE_URL or DATABASE_URL, that server; else a
     container started with docker when an engine answers and an image
     can be had ($BACKOFF_TEST_PG_IMAGE; postgres:17-alpine; else an image
     built from the machine's Debian PostgreSQL binaries); else a temporary
     cluster made with the machine's PostgreSQL server binaries (initdb in a
     temporary directory; $BACKOFF_PG_BINDIR, PATH, pg_config, the Debian,
     PGDG and Homebrew locations). It says which it chose.
  2. creates a fresh database pgbackoff_demo_<random> there, migrates it and
     applies examples/backoff.toml with its [env.demo] overlay (millisecond
     delays);
  3. enqueues --jobs jobs across three queues whose handlers fail the way
     real ones do: transient errors (retried with backoff), poison jobs
     (client.Permanent, dead-lettered at once), and a webhook downstream
     that is down for a second and 6 calls a quarter of the way
     through, answering 503 with Retry-After (client.RetryAfter); the
     webhooks queue has a rate limit and a circuit breaker (the queue
     controls);
  4. runs one client.Worker per queue with a live progress display (redrawn
     in place on a terminal, one line a second otherwise);
  5. prints the final stats, what the queue controls did (the claims the
     rate limit refused, when the breaker opened and closed and why), one
     dead letter with its full error history and the retry timeline of
     every policy;
  6. drops the database it created and stops the server it started. A server
     given by URL keeps everything else: the demo needs the right to CREATE
     DATABASE there, and touches no other database (whatever the URL's path,
     ?dbname= or ?database= name). It revokes what migrating its database
     granted on the server: its login's membership in backoff_owner, and the
     four backoff roles when it created them and no database uses them.

It exits 1 unless every job is accounted for: completed + dead-lettered =
enqueued.`,
		Example: `  make demo
  backoffctl demo
  backoffctl demo --database-url postgres://postgres@localhost:5432/postgres
  backoffctl demo --jobs 300 --progress plain`,
		Args: cli.ExactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jsonOut, err := cli.WantJSON(cmd); err != nil {
				return err
			} else if jsonOut {
				return cli.UsageErrorf("demo writes for people only: --output json is not supported")
			}
			if o.jobs < 3 || o.jobs > 1_000_000 {
				return cli.UsageErrorf("--jobs %d: want 3 to 1000000", o.jobs)
			}
			if o.concurrency < 1 || o.concurrency > 100 {
				return cli.UsageErrorf("--concurrency %d: want 1 to 100", o.concurrency)
			}
			if o.timeout <= 0 {
				return cli.UsageErrorf("--timeout %s: want a positive duration", o.timeout)
			}
			if !slices.Contains([]string{"auto", "live", "plain"}, o.progress) {
				return cli.UsageErrorf("--progress %q: want auto, live or plain", o.progress)
			}
			u, _ := cmd.Flags().GetString("database-url")
			source := "--database-url"
			if u == "" {
				u, source = pgserver.URLFromEnv()
			}
			if o.keep && u == "" {
				return cli.UsageErrorf("--keep needs a server given by --database-url or DATABASE_URL: a throwaway server is removed when the demo ends")
			}
			d := &demo{opts: o, out: cmd.OutOrStdout(), url: u, urlSource: source, start: time.Now()}
			err := d.run(cmd.Context())
			fmt.Fprintf(d.out, "\nelapsed: %s\n", time.Since(d.start).Round(10*time.Millisecond))
			return err
		},
	}
	cmd.Flags().IntVar(&o.jobs, "jobs", 3000, "jobs to enqueue, split across the three queues")
	cmd.Flags().IntVar(&o.concurrency, "concurrency", 8, "handlers per queue")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up (exit 1) when the jobs have not all settled by then")
	cmd.Flags().StringVar(&o.configFile, "config", "", "configuration file (default: the built-in "+examples.ConfigPath+")")
	cmd.Flags().StringVar(&o.env, "env", "demo", "environment overlay of the configuration")
	cmd.Flags().StringVar(&o.progress, "progress", "auto", "progress display: live (redraw in place), plain (a line a second) or auto (live on a terminal)")
	cmd.Flags().Uint64Var(&o.seed, "seed", 1, "seed of the simulated failures")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the demo's database at the end (for backoffctl ui); needs --database-url")
	return cmd
}

// demo is one run of the demo.
type demo struct {
	opts      demoOptions
	out       io.Writer
	url       string // the user's server, or ""
	urlSource string // where url came from: --database-url, TEST_DATABASE_URL or DATABASE_URL
	start     time.Time

	queues []*demoQueue
	pool   *pgxpool.Pool
	client *client.Client // over pool
	ops    *ops.Client    // over pool
}

func (d *demo) run(ctx context.Context) (err error) {
	w := d.out
	fmt.Fprintln(w, "pgbackoff demo")
	fmt.Fprintln(w)

	// 1. A server.
	srv, err := d.server(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if srv.Kind == pgserver.KindURL {
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if stopErr := srv.Stop(sctx); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop the demo's PostgreSQL: %w", stopErr))
			return
		}
		fmt.Fprintf(w, "cleanup: stopped the %s server\n", kindName(srv.Kind))
	}()

	// 2. A fresh database, migrated and configured. The demo switches
	// databases on the parsed connection settings, never on the URL text: in
	// a URL such as postgres://host/postgres?dbname=prod the query parameter
	// names the database, whatever the path says.
	server, err := cli.ParseConnConfig(srv.URL)
	if err != nil {
		return err
	}
	before, err := readDemoRoles(ctx, server)
	if err != nil {
		return err
	}
	dbName := "pgbackoff_demo_" + randomHex(4)
	if err := adminExec(ctx, server, "CREATE DATABASE "+pgx.Identifier{dbName}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s (the demo needs the CREATEDB right): %w", dbName, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if d.pool != nil {
			d.pool.Close()
		}
		if d.opts.keep {
			fmt.Fprintf(w, "\nkept: database %s; look at it with\n  backoffctl ui --database-url %s\n", dbName, displayURL(inDatabase(server, dbName)))
			return
		}
		if dropErr := dropDemoDatabase(dctx, server, dbName); dropErr != nil {
			err = errors.Join(err, dropErr)
			return
		}
		fmt.Fprintf(w, "\ncleanup: dropped database %s\n", dbName)
		err = errors.Join(err, d.undoRoles(dctx, server, before))
	}()
	demoDB := inDatabase(server, dbName)
	version, err := migrateDemo(ctx, demoDB)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "database: %s, migrated to version %d\n", dbName, version)
	cfg, err := d.loadConfig()
	if err != nil {
		return err
	}
	if err := applyDemoConfig(ctx, demoDB, cfg); err != nil {
		return err
	}
	fmt.Fprintf(w, "config:   %s (env %s) applied: %d policies, %d queue mappings\n", cfg.File, cfg.Env, len(cfg.Policies)+1, len(cfg.Queues))

	ccfg := inDatabase(server, dbName)
	ccfg.RuntimeParams["application_name"] = "backoffctl demo"
	d.pool, err = cli.ConnectPool(ctx, ccfg, int32(min(40, 6+3*d.opts.concurrency)))
	if err != nil {
		return fmt.Errorf("demo pool: %w", err)
	}
	// Belt and braces: the workers below complete and dead-letter jobs.
	var current string
	if err := d.pool.QueryRow(ctx, "SELECT pg_catalog.current_database()").Scan(&current); err != nil {
		return fmt.Errorf("demo pool: %w", err)
	}
	if current != dbName {
		return fmt.Errorf("demo pool: connected to database %q instead of %q; refusing to run workers there", current, dbName)
	}

	// 3. Jobs.
	d.queues = newDemoQueues(d.opts.jobs, d.opts.seed)
	c, err := client.New(ctx, d.pool)
	if err != nil {
		return err
	}
	d.client = c
	d.ops = ops.New(d.pool)
	if err := d.enqueue(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(w, "enqueued: %d jobs:", d.opts.jobs)
	for i, q := range d.queues {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %d %s (%s)", sep, q.enqueued, q.name, q.what)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)

	// 4. Workers, until every job has settled.
	stats, runErr := d.work(ctx)

	// 5. The report.
	if stats != nil {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "== final stats ==")
		cli.WriteStats(w, stats, time.Hour)
		d.writeOutcomes(w)
		// Also after an interrupt or a timeout: what the controls did so far.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := d.writeControls(cctx, w, d.start); err != nil {
			return errors.Join(runErr, err)
		}
	}
	if runErr != nil {
		return runErr
	}
	if err := d.account(w, stats); err != nil {
		return err
	}
	if err := d.writeDeadLetter(ctx, w); err != nil {
		return err
	}
	return d.writeTimelines(ctx, w, cfg)
}

// server finds the demo's PostgreSQL and tells which one it is.
func (d *demo) server(ctx context.Context) (*pgserver.Server, error) {
	w := d.out
	if d.url != "" {
		fmt.Fprintf(w, "server:   yours (%s) at %s; the demo works in a database of its own and drops it\n", d.urlSource, hostOf(d.url))
		return pgserver.Start(ctx, d.url, d.urlSource)
	}
	fmt.Fprintln(w, "server:   none given (--database-url, TEST_DATABASE_URL, DATABASE_URL): starting a throwaway PostgreSQL")
	t0 := time.Now()
	// A throwaway server need not survive a crash.
	srv, err := pgserver.Start(ctx, "", "", "fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=200")
	if err != nil {
		return nil, err
	}
	for _, why := range srv.Skipped {
		fmt.Fprintf(w, "          skipped: %s\n", briefError(cli.OneLine(why)))
	}
	switch srv.Kind {
	case pgserver.KindDocker:
		fmt.Fprintf(w, "server:   a Docker container, image %s, started in %s\n", srv.Source, time.Since(t0).Round(10*time.Millisecond))
	default:
		fmt.Fprintf(w, "server:   a temporary local cluster (initdb with the PostgreSQL binaries in %s), started in %s\n", srv.Source, time.Since(t0).Round(10*time.Millisecond))
	}
	return srv, nil
}

// briefError keeps the first and the last two parts of a long chain of
// wrapped errors: what was tried and the root cause.
func briefError(s string) string {
	parts := strings.Split(s, ": ")
	if len(parts) <= 4 {
		return s
	}
	return parts[0] + ": … " + strings.Join(parts[len(parts)-2:], ": ")
}

func kindName(kind string) string {
	if kind == pgserver.KindDocker {
		return "Docker"
	}
	return "temporary local"
}

// hostOf is host:port of a URL, without credentials.
func hostOf(dbURL string) string {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

func (d *demo) loadConfig() (*config.Config, error) {
	if d.opts.configFile != "" {
		return config.Load(d.opts.configFile, d.opts.env)
	}
	return config.Parse(examples.ConfigPath, examples.Config, d.opts.env)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// displayURL is a URL for the user to copy: host, port, user and database
// of cfg, never its password.
func displayURL(cfg *pgx.ConnConfig) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), Path: "/" + cfg.Database}
	if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

// adminExec runs one statement on the server the user gave (its own
// database), for CREATE and DROP DATABASE and the roles.
func adminExec(ctx context.Context, server *pgx.ConnConfig, sql string, args ...any) error {
	conn, err := pgx.ConnectConfig(ctx, server.Copy())
	if err != nil {
		return fmt.Errorf("connect to %s:%d: %w", server.Host, server.Port, cli.RootCause(err))
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// dropDemoDatabase drops the demo's database once the demo has closed every
// connection it opened (its pool, and the Workers' LISTEN connections, which
// Worker.Run closes before it returns).
//
// A plain DROP DATABASE first: PostgreSQL itself tells an autovacuum worker
// busy in the database to exit, and waits a few seconds for sessions that
// are still closing. WITH (FORCE) is no good as the first try for a login
// that is not a superuser: it checks the right to terminate every process
// in the database, an autovacuum worker has no role, and PostgreSQL 15
// refuses ("must be a member of the role whose process is being terminated
// or member of pg_signal_backend", 42501) whenever one is vacuuming the
// freshly churned demo tables. FORCE only follows when sessions are still
// there (55006): the user's own, left by an interrupted demo.
func dropDemoDatabase(ctx context.Context, server *pgx.ConnConfig, name string) error {
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize()
	err := adminExec(ctx, server, drop)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
		// Sessions of the login itself are left (an interrupted demo). End
		// them, then drop again. Not WITH (FORCE): it must also be allowed
		// to end autovacuum workers, which a login that is not a superuser
		// never is (42501), while a plain DROP asks them to leave.
		if err = adminExec(ctx, server, `SELECT pg_catalog.pg_terminate_backend(a.pid, 5000)
			FROM pg_catalog.pg_stat_activity AS a
			WHERE a.datname = $1 AND a.usename = current_user AND a.pid <> pg_catalog.pg_backend_pid()`, name); err == nil {
			err = adminExec(ctx, server, drop)
		}
	}
	if err != nil {
		return fmt.Errorf("drop database %s: %w%s", name, err, sessionsIn(ctx, server, name))
	}
	return nil
}

// sessionsIn describes the sessions still connected to database name, for
// the error of a DROP DATABASE that they made fail.
func sessionsIn(ctx context.Context, server *pgx.ConnConfig, name string) string {
	conn, err := pgx.ConnectConfig(ctx, server.Copy())
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, `
		SELECT coalesce(string_agg(pg_catalog.format('pid %s %s (role %s, application %L, state %s)',
		           a.pid, a.backend_type, coalesce(a.usename::text, 'none'), a.application_name, coalesce(a.state, 'none')), '; ' ORDER BY a.pid), '')
		FROM pg_catalog.pg_stat_activity AS a WHERE a.datname = $1`, name).Scan(&s)
	if err != nil || s == "" {
		return ""
	}
	return "; still connected: " + s
}

// inDatabase is a copy of server's settings for database name. The
// database is a field of the parsed settings, so no spelling of the URL
// (path, ?dbname=, ?database=, dbname=…) can make it another one.
func inDatabase(server *pgx.ConnConfig, name string) *pgx.ConnConfig {
	cfg := server.Copy()
	cfg.Database = name
	return cfg
}

// demoRoles is what the demo may change on the server outside its own
// database: migrating it creates the four backoff roles when they do not
// exist yet, and makes a login that is not a superuser a member of
// backoff_owner (migration 003).
type demoRoles struct {
	user     string
	existing map[string]bool // backoff_* roles that exist
	owner    bool            // user is directly a member of backoff_owner
}

var backoffRoles = []string{"backoff_admin", "backoff_worker", "backoff_producer", "backoff_owner"}

func readDemoRoles(ctx context.Context, server *pgx.ConnConfig) (demoRoles, error) {
	r := demoRoles{existing: map[string]bool{}}
	conn, err := pgx.ConnectConfig(ctx, server.Copy())
	if err != nil {
		return r, fmt.Errorf("connect to %s:%d: %w", server.Host, server.Port, cli.RootCause(err))
	}
	defer conn.Close(ctx)
	var existing []string
	err = conn.QueryRow(ctx, `
		SELECT current_user::text,
		       coalesce((SELECT array_agg(r.rolname::text) FROM pg_catalog.pg_roles AS r WHERE r.rolname = ANY ($1::text[])), '{}'),
		       EXISTS (SELECT FROM pg_catalog.pg_auth_members AS m
		               JOIN pg_catalog.pg_roles AS g ON g.oid = m.roleid
		               JOIN pg_catalog.pg_roles AS u ON u.oid = m.member
		               WHERE g.rolname = 'backoff_owner' AND u.rolname = current_user)`, backoffRoles).
		Scan(&r.user, &existing, &r.owner)
	if err != nil {
		return r, fmt.Errorf("read the backoff roles: %w", err)
	}
	for _, name := range existing {
		r.existing[name] = true
	}
	return r, nil
}

// undoRoles revokes what migrating the demo database granted: the user's
// membership in backoff_owner, and the backoff roles the demo created
// (dropped only when no database uses them any more; PostgreSQL refuses
// otherwise, and the demo says so and keeps them).
func (d *demo) undoRoles(ctx context.Context, server *pgx.ConnConfig, before demoRoles) error {
	after, err := readDemoRoles(ctx, server)
	if err != nil {
		return err
	}
	if after.owner && !before.owner {
		if err := adminExec(ctx, server, "REVOKE backoff_owner FROM "+pgx.Identifier{after.user}.Sanitize()); err != nil {
			return fmt.Errorf("revoke backoff_owner from %s: %w", after.user, err)
		}
		fmt.Fprintf(d.out, "cleanup: revoked backoff_owner from %s\n", after.user)
	}
	var dropped []string
	for _, name := range backoffRoles {
		if before.existing[name] || !after.existing[name] {
			continue
		}
		if err := adminExec(ctx, server, "DROP ROLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			fmt.Fprintf(d.out, "cleanup: kept role %s, which the demo created: %s\n", name, cli.OneLine(cli.RootCause(err).Error()))
			continue
		}
		dropped = append(dropped, name)
	}
	if len(dropped) > 0 {
		fmt.Fprintf(d.out, "cleanup: dropped roles %s (the demo created them)\n", strings.Join(dropped, ", "))
	}
	return nil
}

func migrateDemo(ctx context.Context, db *pgx.ConnConfig) (int32, error) {
	conn, err := pgx.ConnectConfig(ctx, db.Copy())
	if err != nil {
		return 0, fmt.Errorf("connect to the demo database: %w", cli.RootCause(err))
	}
	defer conn.Close(ctx)
	m, err := migrations.New(ctx, conn)
	if err != nil {
		return 0, err
	}
	_, to, err := m.MigrateTo(ctx, m.Latest())
	if err != nil {
		return 0, fmt.Errorf("migrate the demo database: %w", err)
	}
	return to, nil
}

// applyDemoConfig is `config apply` on the demo database.
func applyDemoConfig(ctx context.Context, db *pgx.ConnConfig, cfg *config.Config) error {
	conn, err := pgx.ConnectConfig(ctx, db.Copy())
	if err != nil {
		return fmt.Errorf("connect to the demo database: %w", cli.RootCause(err))
	}
	defer conn.Close(ctx)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return cli.ApplyConfig(ctx, tx, cfg)
	})
	if err != nil {
		return fmt.Errorf("apply %s: %w", cfg.File, err)
	}
	return nil
}

func (d *demo) enqueue(ctx context.Context, c *client.Client) error {
	const batch = 1000
	for _, q := range d.queues {
		for start := 0; start < len(q.payloads); start += batch {
			end := min(start+batch, len(q.payloads))
			jobs := make([]client.NewJob, 0, end-start)
			for _, p := range q.payloads[start:end] {
				jobs = append(jobs, client.NewJob{Queue: q.name, Payload: p})
			}
			if _, err := c.EnqueueMany(ctx, jobs); err != nil {
				return err
			}
		}
	}
	return nil
}

// work runs the workers until every job has settled (or the timeout), with
// the progress display, and returns the stats read after the workers have
// drained.
func (d *demo) work(ctx context.Context) ([]cli.StatsRow, error) {
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	logger := newHoldCounter(d.queues)
	var wg sync.WaitGroup
	errs := make(chan error, len(d.queues))
	for _, q := range d.queues {
		wk, err := client.NewWorker(d.pool, client.WorkerConfig{
			Queue:           q.name,
			Handler:         q.handle,
			Concurrency:     d.opts.concurrency,
			PollInterval:    50 * time.Millisecond, // retries come due within milliseconds here
			ReapInterval:    time.Second,
			ShutdownTimeout: 5 * time.Second,
		}, client.WithLogger(logger), client.WithWorkerID("demo-"+q.name))
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := wk.Run(wctx); err != nil {
				errs <- err
			}
		}()
	}

	p := newProgress(d.out, d.opts.progress, d.queues, d.start)
	tick := p.interval
	deadline := time.After(d.opts.timeout)
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			runErr = fmt.Errorf("demo interrupted: %w", context.Cause(ctx))
			break loop
		case err := <-errs:
			runErr = err
			break loop
		case <-deadline:
			runErr = fmt.Errorf("not every job settled within --timeout %s", d.opts.timeout)
			break loop
		case <-time.After(tick):
		}
		stats, err := cli.ReadStats(ctx, d.client, d.ops, time.Hour)
		if err != nil {
			runErr = err
			if ctx.Err() != nil {
				runErr = fmt.Errorf("demo interrupted: %w", context.Cause(ctx))
			}
			break
		}
		p.draw(stats)
		if settled(stats) == d.enqueued() {
			break
		}
	}
	stopWorkers()
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stats, err := cli.ReadStats(sctx, d.client, d.ops, time.Hour)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	p.done(stats)
	return stats, runErr
}

func (d *demo) enqueued() int64 {
	var n int64
	for _, q := range d.queues {
		n += int64(q.enqueued)
	}
	return n
}

func settled(stats []cli.StatsRow) int64 {
	var n int64
	for _, s := range stats {
		n += s.Completed + s.DeadLettered
	}
	return n
}

// account checks that every job is accounted for, per queue and in total.
func (d *demo) account(w io.Writer, stats []cli.StatsRow) error {
	byQueue := map[string]cli.StatsRow{}
	for _, s := range stats {
		byQueue[s.Queue] = s
	}
	var completed, dead int64
	var problems []string
	for _, q := range d.queues {
		s := byQueue[q.name]
		completed += s.Completed
		dead += s.DeadLettered
		if s.Completed+s.DeadLettered != int64(q.enqueued) {
			problems = append(problems, fmt.Sprintf("%s: %d enqueued, %d completed + %d dead-lettered (pending %d, running %d, retrying %d, cancelled %d)",
				q.name, q.enqueued, s.Completed, s.DeadLettered, s.Pending, s.Running, s.Retrying, s.Cancelled))
		}
	}
	if len(byQueue) != len(d.queues) {
		problems = append(problems, fmt.Sprintf("%d queues have jobs, want %d", len(byQueue), len(d.queues)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("not every job is accounted for: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintf(w, "\nevery job accounted for: %d enqueued = %d completed + %d dead-lettered\n", d.enqueued(), completed, dead)
	return nil
}

// writeOutcomes prints what the handlers saw: successes, transient
// failures, calls a downstream refused while down (503), poison jobs.
func (d *demo) writeOutcomes(w io.Writer) {
	fmt.Fprintln(w)
	tw := cli.NewTable(w)
	cli.Row(tw, "QUEUE", "ATTEMPTS", "OK", "TRANSIENT", "DOWN(503)", "POISON")
	for _, q := range d.queues {
		c := q.counts()
		cli.Row(tw, q.name, strconv.FormatInt(c.attempts, 10), strconv.FormatInt(c.ok, 10), strconv.FormatInt(c.transient, 10),
			strconv.FormatInt(c.down, 10), strconv.FormatInt(c.poison, 10))
	}
	_ = tw.Flush()
}

// writeDeadLetter counts the dead letters by reason and shows the one
// with the longest history, reading them through the client.
func (d *demo) writeDeadLetter(ctx context.Context, w io.Writer) error {
	counts := map[string]int64{}
	var longest *ops.JobDetail
	params := ops.ListParams{Statuses: []client.Status{client.StatusDeadLettered}, Limit: 1000}
	for {
		page, err := d.ops.List(ctx, params)
		if err != nil {
			return fmt.Errorf("count dead letters: %w", err)
		}
		for i, j := range page.Jobs {
			counts[j.DeadLetterReason]++
			if longest == nil || len(j.Errors) > len(longest.Errors) {
				longest = &page.Jobs[i]
			}
		}
		if page.Next == "" {
			break
		}
		params.Cursor = page.Next
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, k int) bool {
		if counts[reasons[i]] != counts[reasons[k]] {
			return counts[reasons[i]] > counts[reasons[k]]
		}
		return reasons[i] < reasons[k]
	})
	var parts []string
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	fmt.Fprintln(w)
	if len(parts) == 0 {
		fmt.Fprintln(w, "== dead letters: none ==")
		return nil
	}
	fmt.Fprintf(w, "== dead letters: %s ==\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "the one with the longest history (backoffctl jobs show %d):\n\n", longest.ID)
	cli.WriteJobDetail(w, *longest, time.Now())
	return nil
}

// writeTimelines prints each policy's retry timeline as the database holds
// it: the delay after each failed attempt before jitter, and where the job
// is dead-lettered.
func (d *demo) writeTimelines(ctx context.Context, w io.Writer, cfg *config.Config) error {
	policies, queuePolicy, err := cli.ReadPolicies(ctx, d.pool)
	if err != nil {
		return err
	}
	users := map[string][]string{}
	for _, q := range d.queues {
		pol, ok := queuePolicy[q.name]
		if !ok {
			pol = config.DefaultPolicyRow
		}
		users[pol] = append(users[pol], q.name)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== retry timelines (%s, env %s; delay after each failed attempt, before jitter) ==\n", cfg.File, cfg.Env)
	tw := cli.NewTable(w)
	for _, name := range cli.SortedNames(policies) {
		p := policies[name]
		used := "-"
		if qs := users[name]; len(qs) > 0 {
			used = "queue " + strings.Join(qs, ", ")
		}
		cli.Row(tw, name, used, compactTimeline(p))
	}
	return tw.Flush()
}

// compactTimeline renders a policy on one line from policy.Timeline (the
// timeline of backoffctl schedule and of the web UI's job page), delays
// before jitter: "20ms, 80ms → dead letter after attempt 3 (jitter none)".
func compactTimeline(p policy.Policy) string {
	const show = 8
	tl := policy.Timeline(p, policy.TimelineStart{})
	last := tl[len(tl)-1]
	var delays []string
	var total time.Duration
	for _, st := range tl[:len(tl)-1] {
		total += st.Unjittered
		if len(delays) < show {
			delays = append(delays, cli.FormatDelay(st.Unjittered))
		}
	}
	if n := len(tl) - 1; n > show {
		delays = append(delays, fmt.Sprintf("… (%d more)", n-show))
	}
	jitter := string(p.Jitter)
	if p.Jitter == policy.JitterProportional {
		jitter += " ±" + config.FormatFloat(p.JitterRatio)
	}
	dead := "dead letter"
	if last.DeadLetter != policy.ReasonMaxAttempts {
		dead += " (" + last.DeadLetter + ")"
	}
	if len(delays) == 0 {
		return fmt.Sprintf("no retry: %s after attempt %d", dead, last.Attempt)
	}
	return fmt.Sprintf("%s → %s after attempt %d (%s in all; jitter %s)",
		strings.Join(delays, ", "), dead, last.Attempt, cli.FormatDelay(total), jitter)
}
