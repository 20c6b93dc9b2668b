package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/migrations"
)

// Config selects what a run measures and how long it takes.
type Config struct {
	Mode         string
	DatabaseURL  string
	NoDurability bool
	Only         string
	Skip         string // sections whose name contains it are not run (-skip)
	RiverDir     string
	Grants       string // "none" or "present" (queue grants of another role exist)
	// JobsReloptions, when set, is applied to backoff.jobs (and the limit's
	// copy) with ALTER TABLE ... SET (...) in the template.
	JobsReloptions string

	// The Go Worker's settings in the end-to-end and River lines.
	WorkerConcurrency int
	WorkerBatch       int
	// JobsOverride, when positive, replaces the mode's WorkerJobs (a quick
	// check of the worker lines with a tiny size: -worker-jobs).
	JobsOverride int
	// RoundsOverride, when positive, replaces the mode's Rounds for every
	// line (-rounds; the River targets ask for at least 3).
	RoundsOverride int
	// ContinuousRate is the insert rate (jobs/s) of the continuous mode's
	// window, the same for our Worker and River.
	ContinuousRate float64
	// LatencyRate and LatencyJobs, when positive, replace the latency
	// line's insert rate (half of our continuous rate) and job count (half
	// of WorkerJobs): -latency-rate, -latency-jobs.
	LatencyRate float64
	LatencyJobs int
	// ClientsOverride and RunForOverride, when set, replace the mode's
	// Clients and RunFor (-clients, -run-for: a tiny run that checks a
	// section runs, or a longer one to profile it).
	ClientsOverride []int
	RunForOverride  time.Duration
	// LanguageJobsOverride, when positive, replaces the mode's LanguageJobs
	// (-language-jobs).
	LanguageJobsOverride int
	// MVCCOverride, when positive, replaces the mode's MVCC run length
	// (-mvcc-duration: a short smoke run of the held-snapshot section).
	MVCCOverride time.Duration
	// MVCCOursOnly runs the held-snapshot section with pgbackoff's driver
	// only (-mvcc-ours-only): half the runs, and every target line but the
	// WAL comparison.
	MVCCOursOnly bool
	// MVCCRuns, when set, is the held-snapshot section's runs to make, by
	// name (comma-separated: held, held-reader, ...); free always runs
	// first, the others compare with it.
	MVCCRuns string
	// MVCCWorkflows runs the held-snapshot section free and held with
	// dependencies and outputs in the mix (-mvcc-workflows), in place of
	// its usual runs.
	MVCCWorkflows bool

	// Filled by setDefaults from Mode.
	Clients     []int         // client counts of the concurrent scenarios
	Rounds      int           // A/B rounds per line (medians are reported)
	UIRefresh   time.Duration // the overview's refresh in the UI cost line (the page's default, 5 s)
	RunFor      time.Duration // length of one timed run
	ReapJobs    int           // expired leases per reap run
	WorkerJobs  int           // jobs per Worker / River run
	Backlogs    []int         // due backlogs for the latency scaling
	Finished    int           // finished rows lying in the table for the last scaling line
	Samples     int           // claim latency samples per backlog
	Sustained   time.Duration // 0: no sustained run
	SampleEvery time.Duration // sustained-run sampling period
	MVCC        time.Duration // length of each held-snapshot run (mvcc.go); 0: none
	MVCCEvery   time.Duration // held-snapshot sampling interval
	// LanguageJobs is the no-op jobs per run of each language's worker in
	// the per-language lines (languages.go; -language-jobs).
	LanguageJobs int
	// IdleWarmup and IdleWindow: the idle-cost section's wait after a
	// Worker starts and its measured window (idle.go).
	IdleWarmup, IdleWindow time.Duration
	// PgStatStatements loads pg_stat_statements into a server the bench
	// starts, so the idle-cost section lists what each Worker sends; off by
	// default, since it costs every other line a little.
	PgStatStatements bool
	IdleOverride     time.Duration // -idle-window
	// WorkflowJobs is the jobs of each graph of the workflows section.
	WorkflowJobs int
	// OutputSeed is the jobs seeded for the output-cost line, and
	// OutputWindow the length of each run of the 1 MiB outputs line
	// (outputs.go).
	OutputSeed   int
	OutputWindow time.Duration
	// AwaitSamples is how many waits the await line times.
	AwaitSamples int
	// WakeupSamples is how many jobs the idle-Worker latency line times.
	WakeupSamples int
	// LatencyWindow is the shortest insert time of the enqueue -> handler
	// start line (its jobs: at least its rate times this).
	LatencyWindow time.Duration
	// Trim: lines without a target run only at the fewest and the most
	// clients, and reap only with one (quick mode's time budget).
	Trim bool
}

func (c *Config) setDefaults() error {
	if c.WorkerConcurrency <= 0 {
		c.WorkerConcurrency = 1000
	}
	if c.WorkerBatch <= 0 {
		c.WorkerBatch = 500
	}
	if c.ContinuousRate <= 0 {
		c.ContinuousRate = 2000
	}
	switch c.Mode {
	case "quick":
		c.Clients = []int{1, 4, 8, 16}
		c.Rounds = 2
		c.RunFor = time.Second
		c.ReapJobs = 100_000
		c.WorkerJobs = 40_000
		c.Backlogs = []int{10_000, 1_000_000}
		c.Finished = 1_000_000
		c.Samples = 1000
		c.Sustained = time.Minute
		c.SampleEvery = 10 * time.Second
		c.MVCC, c.MVCCEvery = 3*time.Minute, 30*time.Second
		c.WakeupSamples = 100
		c.LanguageJobs = 10_000
		c.WorkflowJobs = 10_000
		c.OutputSeed, c.OutputWindow, c.AwaitSamples = 100_000, time.Minute, 200
		c.IdleWarmup, c.IdleWindow = idleWarmup, time.Minute
		c.LatencyWindow = 5 * time.Second
		c.UIRefresh = 5 * time.Second
		c.Trim = true
	case "full":
		c.Clients = []int{1, 4, 8, 16}
		c.Rounds = 3
		c.RunFor = 2 * time.Second
		c.ReapJobs = 100_000
		c.WorkerJobs = 100_000
		c.Backlogs = []int{10_000, 1_000_000, 10_000_000}
		c.Finished = 1_000_000
		c.Samples = 3000
		c.Sustained = 10 * time.Minute
		c.SampleEvery = time.Minute
		c.MVCC, c.MVCCEvery = 10*time.Minute, time.Minute
		c.WakeupSamples = 300
		c.LanguageJobs = 40_000
		c.WorkflowJobs = 10_000
		c.OutputSeed, c.OutputWindow, c.AwaitSamples = 200_000, 10*time.Minute, 1000
		c.IdleWarmup, c.IdleWindow = idleWarmup, time.Minute
		c.LatencyWindow = 10 * time.Second
		c.UIRefresh = 5 * time.Second
	case "test":
		// Tiny counts for the package test: every code path, no numbers.
		c.Clients = []int{2}
		c.Rounds = 2
		c.RunFor = 100 * time.Millisecond
		c.ReapJobs = 300
		c.WorkerJobs = 200
		c.Backlogs = []int{100, 1000}
		c.Finished = 1000
		c.Samples = 20
		c.Sustained = time.Second
		c.SampleEvery = 300 * time.Millisecond
		c.MVCC, c.MVCCEvery = 900*time.Millisecond, 300*time.Millisecond
		c.WakeupSamples = 5
		c.LanguageJobs = 200
		c.WorkflowJobs = 60
		c.OutputSeed, c.OutputWindow, c.AwaitSamples = 5000, 500*time.Millisecond, 5
		c.IdleWarmup, c.IdleWindow = time.Second, 2*time.Second
		c.UIRefresh = 50 * time.Millisecond
	default:
		return fmt.Errorf("unknown mode %q: want quick or full", c.Mode)
	}
	if c.IdleOverride > 0 {
		c.IdleWindow = c.IdleOverride
	}
	if c.RoundsOverride < 0 {
		return fmt.Errorf("-rounds %d: want 0 (the mode's) or more", c.RoundsOverride)
	}
	if c.RoundsOverride > 0 {
		c.Rounds = c.RoundsOverride
	}
	if c.JobsOverride > 0 {
		c.WorkerJobs = c.JobsOverride
	}
	if c.LanguageJobsOverride > 0 {
		c.LanguageJobs = c.LanguageJobsOverride
	}
	if len(c.ClientsOverride) > 0 {
		c.Clients = c.ClientsOverride
	}
	if c.RunForOverride > 0 {
		c.RunFor = c.RunForOverride
	}
	if c.MVCCOverride < 0 {
		return fmt.Errorf("-mvcc-duration %s: want 0 (the mode's) or more", c.MVCCOverride)
	}
	if c.MVCCOverride > 0 {
		c.MVCC, c.MVCCEvery = c.MVCCOverride, mvccEvery(c.MVCCEvery, c.MVCCOverride)
	}
	return nil
}

func (c Config) wants(section string) bool {
	return (c.Only == "" || strings.Contains(section, c.Only)) &&
		(c.Skip == "" || !strings.Contains(section, c.Skip))
}

// bench holds the server connection and the migrated template every
// scenario's fresh database is copied from.
type bench struct {
	cfg      Config
	adminURL string
	admin    *pgx.Conn
	template string
	out      io.Writer
	noise    []float64 // per-round ratio spreads, for the noise summary
	targets  []target  // printed machine-readably at the end (targets.go)
	walLines []string  // WAL bytes per job of each scenario line
}

const queue = "bench"

// rawTableSQL makes the limit's table: the same columns, defaults,
// constraints and indexes as backoff.jobs, with no functions around it.
// backoff.jobs is partitioned (docs/adr/0061): its copy is one table, and
// the primary key on id that each partition has is declared here.
const rawTableSQL = `CREATE TABLE public.raw_jobs (LIKE backoff.jobs INCLUDING ALL);
ALTER TABLE public.raw_jobs ADD PRIMARY KEY (id)`

func newBench(ctx context.Context, cfg Config, adminURL string, out io.Writer) (*bench, error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	b := &bench{cfg: cfg, adminURL: adminURL, admin: admin, out: out}
	if err := b.printServer(ctx); err != nil {
		b.close()
		return nil, err
	}
	b.template = "bench_tpl_" + randomSuffix()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+b.template); err != nil {
		b.close()
		return nil, fmt.Errorf("create template database: %w", err)
	}
	conn, err := pgx.Connect(ctx, withDatabase(adminURL, b.template))
	if err != nil {
		b.close()
		return nil, fmt.Errorf("connect to the template: %w", err)
	}
	defer conn.Close(context.Background())
	m, err := migrations.New(ctx, conn)
	if err == nil {
		_, _, err = m.MigrateTo(ctx, m.Latest())
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("migrate the template: %w", err)
	}
	if _, err := conn.Exec(ctx, rawTableSQL); err != nil {
		b.close()
		return nil, fmt.Errorf("create raw_jobs: %w", err)
	}
	if cfg.JobsReloptions != "" {
		// On every partition of backoff.jobs (a partitioned table has no
		// storage of its own to set).
		rows, err := conn.Query(ctx, `SELECT p.relid::regclass::text FROM pg_catalog.pg_partition_tree($1::regclass) AS p
			WHERE p.isleaf UNION ALL SELECT $2`, oursTable, rawTable)
		if err != nil {
			b.close()
			return nil, fmt.Errorf("list the job tables: %w", err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.close()
			return nil, fmt.Errorf("list the job tables: %w", err)
		}
		for _, table := range tables {
			if _, err := conn.Exec(ctx, "ALTER TABLE "+table+" SET ("+cfg.JobsReloptions+")"); err != nil {
				b.close()
				return nil, fmt.Errorf("set %s (%s): %w", table, cfg.JobsReloptions, err)
			}
		}
		fmt.Fprintf(out, "backoff.jobs and public.raw_jobs: SET (%s)\n", cfg.JobsReloptions)
	}
	switch cfg.Grants {
	case "", "none":
	case "present":
		// Queue grants exist (to a role the bench never uses), so every
		// call of ours pays the grants-present check of _queue_scope; the
		// bench's own calls stay unscoped (docs/adr/0038).
		if _, err := conn.Exec(ctx, benchGrantsSQL); err != nil {
			b.close()
			return nil, fmt.Errorf("create the queue grants (-grants present): %w", err)
		}
	default:
		b.close()
		return nil, fmt.Errorf("-grants %q: want none or present", cfg.Grants)
	}
	fmt.Fprintf(b.out, "queue grants: %s\n", map[bool]string{true: "present (to another role; the bench's calls are unscoped)", false: "none"}[cfg.Grants == "present"])
	return b, nil
}

// benchGrantsSQL makes a NOLOGIN role (server-wide, kept: roles outlive
// the bench's databases) and grants it two queues the bench never uses.
const benchGrantsSQL = `
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'backoff_bench_scoped') THEN
        CREATE ROLE backoff_bench_scoped NOLOGIN IN ROLE backoff_worker, backoff_producer;
    END IF;
END
$$;
SELECT backoff.grant_queue('backoff_bench_scoped', 'elsewhere.*', 'work'),
       backoff.grant_queue('backoff_bench_scoped', 'elsewhere.*', 'produce');`

func (b *bench) close() {
	ctx := context.Background()
	if b.template != "" {
		_, _ = b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+b.template+" WITH (FORCE)")
	}
	_ = b.admin.Close(ctx)
}

// settingNames are the server settings that matter for these numbers.
var settingNames = []string{
	"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
	"wal_level", "wal_buffers", "commit_delay", "max_wal_size", "checkpoint_timeout",
	"shared_buffers", "work_mem", "max_connections", "autovacuum", "autovacuum_naptime",
	"autovacuum_vacuum_scale_factor", "autovacuum_vacuum_cost_limit", "jit",
}

func (b *bench) printServer(ctx context.Context) error {
	fmt.Fprintf(b.out, "mode: %s, rounds per line: %d (alternating A/B, B/A), run: %s\n", b.cfg.Mode, b.cfg.Rounds, b.cfg.RunFor)
	fmt.Fprintf(b.out, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(b.out, "load average at start: %s\n", strings.TrimSpace(string(la)))
	}
	rows, err := b.admin.Query(ctx, "SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings WHERE name = ANY($1) ORDER BY array_position($1, name)", settingNames)
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	kv, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var k, v string
		err := r.Scan(&k, &v)
		return k + "=" + v, err
	})
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	fmt.Fprintf(b.out, "server settings: %s\n", strings.Join(kv, " "))
	return nil
}

// database is one scenario's fresh database, copied from the template.
type database struct {
	name string
	url  string
	pool *pgxpool.Pool
}

func (b *bench) freshDatabase(ctx context.Context) (*database, func(), error) {
	name := "bench_" + randomSuffix()
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+b.template); err != nil {
		return nil, nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u := withDatabase(b.adminURL, name)
	pc, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, nil, err
	}
	pc.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	db := &database{name: name, url: u, pool: pool}
	return db, func() {
		pool.Close()
		_, _ = b.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}, nil
}

// result is one timed run: ops operations (jobs) in elapsed, and the WAL
// the server wrote meanwhile.
type result struct {
	ops      int64
	elapsed  time.Duration
	walBytes float64
}

// walPerJob is the server's WAL written per job of a run (0 when unknown).
func (r result) walPerJob() float64 {
	if r.ops == 0 {
		return 0
	}
	return r.walBytes / float64(r.ops)
}

// walPosition reads the server's current WAL insert position.
func (b *bench) walPosition(ctx context.Context) (string, error) {
	var lsn string
	if err := b.admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return "", fmt.Errorf("read the WAL position: %w", err)
	}
	return lsn, nil
}

// walSince is the number of WAL bytes written since the position from.
func (b *bench) walSince(ctx context.Context, from string) (float64, error) {
	var n float64
	if err := b.admin.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", from).Scan(&n); err != nil {
		return 0, fmt.Errorf("measure WAL written: %w", err)
	}
	return n, nil
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// step does one unit of work on a client's connection and says how many
// jobs it handled; 0 means there is nothing left.
type step func(ctx context.Context, conn *pgxpool.Conn) (int, error)

// makeStep prepares a client (e.g. a client.Client on its connection) and
// returns its step.
type makeStep func(ctx context.Context, conn *pgxpool.Conn) (step, error)

// runClients runs n clients, each on its own connection, until the time is
// up, maxOps jobs are done (0: no cap) or a step says there is nothing left.
func runClients(ctx context.Context, pool *pgxpool.Pool, n int, d time.Duration, maxOps int64, mk makeStep) (result, error) {
	conns := make([]*pgxpool.Conn, n)
	steps := make([]step, n)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return result{}, fmt.Errorf("acquire client connection: %w", err)
		}
		defer c.Release()
		conns[i] = c
		s, err := mk(ctx, c)
		if err != nil {
			return result{}, err
		}
		steps[i] = s
	}
	var (
		ops      atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	deadline := start.Add(d)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && (maxOps == 0 || ops.Load() < maxOps) && ctx.Err() == nil {
				k, err := steps[i](ctx, conns[i])
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if k == 0 {
					return
				}
				ops.Add(int64(k))
			}
		}()
	}
	wg.Wait()
	return result{ops: ops.Load(), elapsed: time.Since(start)}, firstErr
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func withDatabase(dbURL, name string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	u.Path = "/" + name
	return u.String()
}

func redact(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "the database"
	}
	return u.Redacted()
}
