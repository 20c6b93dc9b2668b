// Command river-bench is the River side of pgbackoff's side-by-side
// benchmark: the equivalent of `river bench` run as a library, because
// River's CLI module cannot be installed through the module proxy. It lives
// in its own module so that pgbackoff never depends on River. Three modes,
// each run the same way as on the pgbackoff side (bench/workers.go):
//
//   - burndown: pre-insert N jobs, then work them with a no-op worker; the
//     time runs from Start until every job is completed.
//
//   - continuous: pre-insert N jobs, start the client and, at the same
//     moment, insert more jobs at a fixed -rate (batches every 10 ms, with
//     InsertManyFast) while the client works. The measuring window closes
//     when 3/4 of N have run, so the backlog never runs dry: the rate is
//     the jobs run in the window over its length, a limit of the worker
//     under a steady insert load, never of the inserter (the same -rate on
//     both sides, one both inserters sustain).
//
//   - latency: no backlog; insert N jobs at -rate (batches every 10 ms) and
//     time each job to the start of its Work from the return of the
//     InsertManyFast that committed it (each batch's jobs carry its number)
//     and from its created_at (server and bench share a clock), as the
//     pgbackoff side does.
//
//     go run . -database-url postgres://.../db -jobs 50000 [-mode continuous -rate 2000]
//
// It migrates River's tables into the given database, pre-inserts with
// InsertManyFast in batches of 5,000, starts a client with the default
// queue at MaxWorkers 10,000 (as `river bench` does), and stops it at the
// end (Stop waits for River's batched completer). It prints one line:
//
//	river jobs=N insert_s=… work_s=… work_jobs_per_s=…
//
// with inserted=… (jobs inserted in the window) in continuous mode and
// insert_jobs_per_s=… latency_p50_ms=… latency_p99_ms=… (from the commit)
// created_p50_ms=… created_p99_ms=… (from created_at) in latency mode.
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

// NoopArgs is the benchmark's job kind. B is the number of the insert
// batch (latency mode only; omitted, {} as before, in the other modes).
type NoopArgs struct {
	B int `json:"b,omitempty"`
}

// Kind names the job kind.
func (NoopArgs) Kind() string { return "bench_noop" }

// NoopWorker does nothing but count and note when each job started.
type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
	done *atomic.Int64
	all  chan struct{}
	n    int64 // close all when this many have run
	// window, when set instead of n, closes all when that many have run
	// (continuous mode's measuring window).
	window int64
	mu     sync.Mutex
	starts []start
}

// start is when one job's Work began, with its insert batch and created_at.
type start struct {
	batch   int
	at      time.Time
	created time.Time
}

// Work counts the job and signals when the last one ran.
func (w *NoopWorker) Work(_ context.Context, job *river.Job[NoopArgs]) error {
	at := time.Now()
	w.mu.Lock()
	w.starts = append(w.starts, start{job.Args.B, at, job.CreatedAt})
	w.mu.Unlock()
	if d := w.done.Add(1); d == w.n || d == w.window {
		close(w.all)
	}
	return nil
}

func main() {
	url := flag.String("database-url", os.Getenv("BENCH_DATABASE_URL"), "database to use (River's tables are created in it)")
	jobs := flag.Int("jobs", 50_000, "jobs to insert and work")
	maxWorkers := flag.Int("max-workers", 10_000, "MaxWorkers of the default queue")
	mode := flag.String("mode", "burndown", "burndown (pre-inserted jobs), continuous (a backlog, worked while more are inserted at -rate) or latency (inserted at -rate, no backlog)")
	rate := flag.Float64("rate", 2000, "continuous and latency modes: jobs inserted per second")
	flag.Parse()
	if *mode != "burndown" && *mode != "continuous" && *mode != "latency" {
		fmt.Fprintln(os.Stderr, "river-bench: -mode must be burndown, continuous or latency")
		os.Exit(2)
	}
	if *mode != "burndown" && *rate <= 0 {
		fmt.Fprintln(os.Stderr, "river-bench: -rate must be positive")
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
	if mode == "continuous" {
		w.n, w.window = -1, int64(n)*3/4
	}
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

	var (
		commitMu  sync.Mutex
		committed []time.Time // latency mode: batch b's InsertManyFast returned at committed[b-1]
	)
	insertBatch := func(k int) error {
		b := 0
		if mode == "latency" {
			b = len(committed) + 1 // one inserter: no concurrent batches
		}
		params := make([]river.InsertManyParams, k)
		for j := range params {
			params[j] = river.InsertManyParams{Args: NoopArgs{B: b}}
		}
		_, err := c.InsertManyFast(ctx, params)
		if b > 0 {
			at := time.Now()
			commitMu.Lock()
			committed = append(committed, at)
			commitMu.Unlock()
		}
		return err
	}
	var (
		insert   time.Duration
		inserted int
		windowN  int64
	)
	start := time.Now()
	if mode != "latency" {
		const batch = 5000
		for i := 0; i < n; i += batch {
			if err := insertBatch(min(batch, n-i)); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		insert = time.Since(start)
	}
	start = time.Now() // as on the pgbackoff side: the client's start-up counts
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	stop := make(chan struct{})
	insErr := make(chan error, 1)
	switch mode {
	case "continuous":
		go func() {
			var err error
			inserted, err = insertPaced(-1, rate, stop, insertBatch)
			insErr <- err
		}()
	case "latency":
		if _, err := insertPaced(n, rate, nil, insertBatch); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		insert = time.Since(start)
	}
	select {
	case <-w.all:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("timed out after %d of %d jobs", w.done.Load(), n)
	}
	if mode == "continuous" {
		windowN = w.done.Load()
		insert = time.Since(start)
		close(stop)
		if err := <-insErr; err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	work := time.Since(start)
	if mode == "continuous" {
		work = insert // the window: from Start until 3/4 of the backlog had run
		fmt.Printf("river jobs=%d inserted=%d work_s=%.3f work_jobs_per_s=%.0f\n",
			windowN, inserted, work.Seconds(), float64(windowN)/work.Seconds())
		return nil
	}
	var completed int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return fmt.Errorf("count completed: %w", err)
	}
	if completed != int64(n) {
		return fmt.Errorf("%d of %d jobs completed", completed, n)
	}
	fmt.Printf("river jobs=%d insert_s=%.3f work_s=%.3f work_jobs_per_s=%.0f",
		n, insert.Seconds(), work.Seconds(), float64(n)/work.Seconds())
	if mode == "latency" {
		var fromCommit, fromCreated []time.Duration
		w.mu.Lock()
		commitMu.Lock()
		for _, st := range w.starts {
			if st.batch < 1 || st.batch > len(committed) {
				return fmt.Errorf("a job of insert batch %d, of %d", st.batch, len(committed))
			}
			fromCommit = append(fromCommit, st.at.Sub(committed[st.batch-1]))
			fromCreated = append(fromCreated, st.at.Sub(st.created))
		}
		commitMu.Unlock()
		w.mu.Unlock()
		fmt.Printf(" insert_jobs_per_s=%.0f latency_p50_ms=%.3f latency_p99_ms=%.3f created_p50_ms=%.3f created_p99_ms=%.3f",
			float64(n)/insert.Seconds(), q(fromCommit, 0.5), q(fromCommit, 0.99), q(fromCreated, 0.5), q(fromCreated, 0.99))
	}
	fmt.Println()
	return nil
}

// q returns the p-quantile of ds (sorted in place), in milliseconds.
func q(ds []time.Duration, p float64) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / float64(time.Millisecond)
}

// insertPaced inserts about rate jobs per second: every 10 ms the batch
// that keeps to the rate (at most 1,000), until n are in (n >= 0) or stop
// is closed. It returns how many it inserted. The same pacing as the
// pgbackoff side (bench/workers.go).
func insertPaced(n int, rate float64, stop <-chan struct{}, insert func(k int) error) (int, error) {
	const tick = 10 * time.Millisecond
	began := time.Now()
	done := 0
	for n < 0 || done < n {
		select {
		case <-stop:
			return done, nil
		default:
		}
		due := int(rate*time.Since(began).Seconds()) + 1
		if n >= 0 {
			due = min(due, n)
		}
		if due <= done {
			time.Sleep(tick)
			continue
		}
		k := min(due-done, 1000)
		if err := insert(k); err != nil {
			return done, err
		}
		done += k
	}
	return done, nil
}
