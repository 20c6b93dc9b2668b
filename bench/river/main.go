// Command river-bench is the River side of pgbackoff's side-by-side
// benchmark: the equivalent of `river bench` run as a library, because
// River's CLI module cannot be installed through the module proxy. It lives
// in its own module so that pgbackoff never depends on River. Two modes, as
// `river bench` has: burndown (pre-insert N jobs, then work them with a
// no-op worker) and continuous (insert N jobs in batches of 100 while the
// client works them; with -rate, about that many jobs per second, for the
// enqueue -> start latency).
//
//	go run . -database-url postgres://.../db -jobs 50000 [-mode continuous -rate 5000]
//
// It migrates River's tables into the given database, inserts the jobs
// (InsertManyFast, batches of 5,000), starts a client with the default queue
// at MaxWorkers 10,000 (as `river bench` does), and stops once every job
// has run; Stop waits for River's batched completer, so every job is
// completed in the table when the time is taken. It prints one line:
//
//	river jobs=N insert_s=… work_s=… work_jobs_per_s=…
//
// and in continuous mode also latency_p50_ms=… latency_p99_ms=… (from each
// job's created_at to the start of its Work; server and bench share a
// clock). In continuous mode work_s runs from the first insert.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
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

// NoopWorker does nothing but count and note when each job started.
type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
	done *atomic.Int64
	all  chan struct{}
	n    int64
	mu   sync.Mutex
	lats []time.Duration
}

// Work counts the job and signals when the last one ran.
func (w *NoopWorker) Work(_ context.Context, job *river.Job[NoopArgs]) error {
	d := time.Since(job.CreatedAt)
	w.mu.Lock()
	w.lats = append(w.lats, d)
	w.mu.Unlock()
	if w.done.Add(1) == w.n {
		close(w.all)
	}
	return nil
}

func main() {
	url := flag.String("database-url", os.Getenv("BENCH_DATABASE_URL"), "database to use (River's tables are created in it)")
	jobs := flag.Int("jobs", 50_000, "jobs to insert and work")
	maxWorkers := flag.Int("max-workers", 10_000, "MaxWorkers of the default queue")
	mode := flag.String("mode", "burndown", "burndown (pre-inserted jobs) or continuous (inserted while worked)")
	rate := flag.Float64("rate", 0, "continuous mode: jobs inserted per second (0: batches of 100 back to back)")
	flag.Parse()
	if *mode != "burndown" && *mode != "continuous" {
		fmt.Fprintln(os.Stderr, "river-bench: -mode must be burndown or continuous")
		os.Exit(2)
	}
	if err := run(*url, *jobs, *maxWorkers, *mode, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

func run(url string, n, maxWorkers int, mode string, rate float64) error {
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

	insertBatch := func(k int) error {
		params := make([]river.InsertManyParams, k)
		for j := range params {
			params[j] = river.InsertManyParams{Args: NoopArgs{}}
		}
		_, err := c.InsertManyFast(ctx, params)
		return err
	}
	var insert time.Duration
	start := time.Now()
	if mode == "burndown" {
		const batch = 5000
		for i := 0; i < n; i += batch {
			if err := insertBatch(min(batch, n-i)); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		insert = time.Since(start)
		start = time.Now()
		if err := c.Start(ctx); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	} else {
		if err := c.Start(ctx); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		start = time.Now()
		if err := insertPaced(n, rate, insertBatch); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		insert = time.Since(start)
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
	fmt.Printf("river jobs=%d insert_s=%.3f work_s=%.3f work_jobs_per_s=%.0f",
		n, insert.Seconds(), work.Seconds(), float64(n)/work.Seconds())
	if mode == "continuous" {
		sort.Slice(w.lats, func(i, j int) bool { return w.lats[i] < w.lats[j] })
		q := func(p float64) float64 {
			return float64(w.lats[min(len(w.lats)-1, int(p*float64(len(w.lats))))]) / float64(time.Millisecond)
		}
		fmt.Printf(" latency_p50_ms=%.3f latency_p99_ms=%.3f", q(0.5), q(0.99))
	}
	fmt.Println()
	return nil
}

// insertPaced calls insert(k) until n jobs are in: batches of 100 back to
// back, or with rate > 0 every 10 ms the batch that keeps to the rate (the
// same pacing as the pgbackoff side).
func insertPaced(n int, rate float64, insert func(k int) error) error {
	began := time.Now()
	for done := 0; done < n; {
		k := min(100, n-done)
		if rate > 0 {
			due := int(rate*time.Since(began).Seconds()) + 1
			if due <= done {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			k = min(due-done, n-done, 1000)
		}
		if err := insert(k); err != nil {
			return err
		}
		done += k
	}
	return nil
}
