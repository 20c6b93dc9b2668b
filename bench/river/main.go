// Command river-bench is the River side of pgbackoff's side-by-side
// benchmark: the equivalent of `river bench` (pre-insert N jobs, then work
// them with a no-op worker) run as a library, because River's CLI module
// cannot be installed through the module proxy. It lives in its own module
// so that pgbackoff never depends on River.
//
//	go run . -database-url postgres://.../db -jobs 50000
//
// It migrates River's tables into the given database, inserts the jobs
// (InsertManyFast, batches of 5,000), starts a client with the default queue
// at MaxWorkers 10,000 (as `river bench` does), and stops once every job
// has run; Stop waits for River's batched completer, so every job is
// completed in the table when the time is taken. It prints one line:
//
//	river jobs=N insert_s=… work_s=… work_jobs_per_s=…
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// NoopArgs is the benchmark's job kind.
type NoopArgs struct{}

// Kind names the job kind.
func (NoopArgs) Kind() string { return "bench_noop" }

// NoopWorker does nothing and counts.
type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
	done *atomic.Int64
	all  chan struct{}
	n    int64
}

// Work counts the job and signals when the last one ran.
func (w *NoopWorker) Work(context.Context, *river.Job[NoopArgs]) error {
	if w.done.Add(1) == w.n {
		close(w.all)
	}
	return nil
}

func main() {
	url := flag.String("database-url", os.Getenv("BENCH_DATABASE_URL"), "database to use (River's tables are created in it)")
	jobs := flag.Int("jobs", 50_000, "jobs to insert and work")
	maxWorkers := flag.Int("max-workers", 10_000, "MaxWorkers of the default queue")
	flag.Parse()
	if err := run(*url, *jobs, *maxWorkers); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

func run(url string, n, maxWorkers int) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fmt.Errorf("migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	w := &NoopWorker{done: &atomic.Int64{}, all: make(chan struct{}), n: int64(n)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	c, err := river.NewClient(driver, &river.Config{
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
	})
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}

	start := time.Now()
	const batch = 5000
	for i := 0; i < n; i += batch {
		params := make([]river.InsertManyParams, min(batch, n-i))
		for j := range params {
			params[j] = river.InsertManyParams{Args: NoopArgs{}}
		}
		if _, err := c.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	insert := time.Since(start)

	start = time.Now()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	select {
	case <-w.all:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("timed out after %d of %d jobs", w.done.Load(), n)
	}
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	work := time.Since(start)
	var completed int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return fmt.Errorf("count completed: %w", err)
	}
	if completed != int64(n) {
		return fmt.Errorf("%d of %d jobs completed", completed, n)
	}
	fmt.Printf("river jobs=%d insert_s=%.3f work_s=%.3f work_jobs_per_s=%.0f\n",
		n, insert.Seconds(), work.Seconds(), float64(n)/work.Seconds())
	return nil
}
