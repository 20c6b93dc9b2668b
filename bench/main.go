// Command bench measures pgbackoff's throughput and claim latency as a
// ratio to the same work done by minimal hand-written SQL on a bare copy of
// the jobs table (public.raw_jobs), in the same run on the same server, and
// optionally side by side with River (bench/river, its own module).
//
//	go run ./bench -mode=quick|full [-database-url URL]
//
// docs/benchmarks.md explains the scenarios and has the results.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

func main() {
	processMain() // a worker process of the workers-4-processes line (process.go)
	var cfg Config
	flag.StringVar(&cfg.Mode, "mode", "quick", "quick (CI-sized, a few minutes) or full (for the docs; includes the 10M backlog and the 10-minute sustained run)")
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("BENCH_DATABASE_URL"), "superuser URL of the server to use (default: BENCH_DATABASE_URL, else start one)")
	flag.BoolVar(&cfg.NoDurability, "no-durability", false, "start the server with fsync=off and synchronous_commit=off (default: the server's defaults)")
	flag.StringVar(&cfg.Only, "only", "", "run only the sections whose name contains this (e.g. claim, scaling, river, mvcc)")
	flag.StringVar(&cfg.Skip, "skip", "", "skip the sections whose name contains this (e.g. mvcc: every other section, for a full-mode mvcc run of its own)")
	flag.StringVar(&cfg.RiverDir, "river", "", "directory of the River module (bench/river) to run side by side with the Worker; empty: skip")
	flag.IntVar(&cfg.WorkerConcurrency, "worker-concurrency", 1000, "Concurrency of the Go Worker (River side: MaxWorkers 10000)")
	flag.IntVar(&cfg.WorkerBatch, "worker-batch", 500, "BatchSize of the Go Worker")
	flag.IntVar(&cfg.JobsOverride, "worker-jobs", 0, "jobs per run of the Worker and River lines (0: the mode's; a small number checks that the lines run)")
	flag.IntVar(&cfg.LanguageJobsOverride, "language-jobs", 0, "no-op jobs per run of each language's worker in the per-language lines (0: the mode's, quick 10000, full 40000)")
	flag.IntVar(&cfg.RoundsOverride, "rounds", 0, "alternating rounds per line, medians reported (0: the mode's, quick 2, full 3); the River comparison and the latency target ask for at least 3")
	flag.Float64Var(&cfg.ContinuousRate, "continuous-rate", 2000, "jobs per second inserted during the continuous-mode window, the same on both sides (one both inserters sustain; docs/benchmarks.md)")
	flag.Float64Var(&cfg.LatencyRate, "latency-rate", 0, "insert rate (jobs/s) of the enqueue -> handler start line (0: half of our continuous rate in the same run); with -only=latency the River modes are skipped and this rate is required")
	flag.IntVar(&cfg.LatencyJobs, "latency-jobs", 0, "jobs per run of the enqueue -> handler start line (0: half of -worker-jobs, at least 5 s of inserts at its rate)")
	flag.StringVar(&cfg.Grants, "grants", "none", "queue grants in the database: none, or present (grants to another role exist, so every call takes the grants-present path of backoff._queue_scope; the bench's own calls stay unscoped); see docs/adr/0038")
	flag.StringVar(&cfg.JobsReloptions, "jobs-reloptions", "", "storage parameters for backoff.jobs in every database of the run, e.g. 'fillfactor=90, autovacuum_vacuum_scale_factor=0' (docs/benchmarks.md)")
	flag.Func("clients", "comma-separated client counts of the concurrent lines, e.g. 2 (default: the mode's)", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("client count must be a positive integer, got %q", f)
			}
			cfg.ClientsOverride = append(cfg.ClientsOverride, n)
		}
		return nil
	})
	flag.DurationVar(&cfg.RunForOverride, "run-for", 0, "length of one timed run, e.g. 100ms (default: the mode's)")
	flag.DurationVar(&cfg.MVCCOverride, "mvcc-duration", 0, "length of each run of the held-snapshot section (-only=mvcc), e.g. 20s for a smoke run (default: the mode's, quick 3m, full 10m)")
	flag.BoolVar(&cfg.MVCCWorkflows, "mvcc-workflows", false, "run the held-snapshot section free and held with dependencies and outputs in the mix (pairs of a parent and a child enqueued as one graph, an output recorded by every completion), in place of its usual runs")
	flag.StringVar(&cfg.MVCCRuns, "mvcc-runs", "", "the held-snapshot section's runs to make, comma-separated (free, held, held-xid, held-reader, held-cron, held-dump; free always runs): a full-mode run of some deployments")
	flag.BoolVar(&cfg.MVCCOursOnly, "mvcc-ours-only", false, "run the held-snapshot section with pgbackoff's functions only, without the same-table SQL beside them (half the time; no wal lines)")
	flag.BoolVar(&cfg.PgStatStatements, "pg-stat-statements", false, "load pg_stat_statements into the server the bench starts: the idle-cost section then lists the statements each Worker sends (every other line pays its small cost)")
	flag.DurationVar(&cfg.IdleOverride, "idle-window", 0, "measured window of the idle-cost section per Worker (default: the mode's, 60s)")
	flag.Parse()
	if err := cfg.setDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg Config, out io.Writer) error {
	var settings []string
	if cfg.NoDurability {
		settings = append(settings, "fsync=off", "synchronous_commit=off")
	}
	settings = append(settings, "max_connections=200")
	if cfg.PgStatStatements {
		settings = append(settings, "shared_preload_libraries=pg_stat_statements")
	}
	start := time.Now()
	// Never TEST_DATABASE_URL or DATABASE_URL (pgserver.URLFromEnv): a
	// shared development server runs with fsync off, which would flatter
	// every number. Only an explicit URL, else a server of our own.
	// A container through the docker command, as the demo's: the library's
	// module does not require Testcontainers (ADR 0086).
	srv, err := pgserver.StartWithEngine(ctx, pgserver.DockerCommand(), cfg.DatabaseURL, "-database-url or BENCH_DATABASE_URL", settings...)
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer func() { _ = srv.Stop(context.Background()) }()
	fmt.Fprintf(out, "server: %s (ready in %s)\n", srv.Describe(), time.Since(start).Round(time.Millisecond))
	b, err := newBench(ctx, cfg, srv.URL, out)
	if err != nil {
		return err
	}
	defer b.close()
	return b.runAll(ctx)
}
