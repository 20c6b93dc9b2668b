package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// workerSetup is how the Worker side of a run is built.
type workerSetup struct {
	workers int // Workers on the queue(s), sharing the bench's pool
	queues  int // queues each Worker serves, jobs spread evenly (1: the simple form)
}

// queueName is the name of queue i of a multi-queue run (queue itself for
// a single-queue run).
func queueName(queues, i int) string {
	if queues <= 1 {
		return queue
	}
	return fmt.Sprintf("%s-%d", queue, i)
}

// seedQueues inserts n due jobs spread evenly over queues queues.
func seedQueues(ctx context.Context, db *database, n, queues int) error {
	if queues <= 1 {
		return seedDue(ctx, db, oursTable, n, 0)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, payload, policy, run_at, created_at, segment)
		SELECT $1 || '-' || (g % $3), '{}', 'default', now() - interval '1 minute', now() - interval '1 minute', `+currentSegment+`
		FROM generate_series(1, $2) AS g`, queue, n, queues)
	if err != nil {
		return fmt.Errorf("seed %d due jobs in %d queues: %w", n, queues, err)
	}
	return settle(ctx, db, oursTable)
}

// workerConfig is the configuration of one Worker of setup s: the bench's
// Concurrency and BatchSize, split evenly over its queues.
func workerConfig(cfg Config, s workerSetup, h client.Handler) client.WorkerConfig {
	if s.queues <= 1 {
		return client.WorkerConfig{Queue: queue, Handler: h, Concurrency: cfg.WorkerConcurrency, BatchSize: cfg.WorkerBatch,
			ReapInterval: -1, HeartbeatInterval: -1}
	}
	wc := client.WorkerConfig{ReapInterval: -1}
	for i := range s.queues {
		wc.Queues = append(wc.Queues, client.QueueConfig{Queue: queueName(s.queues, i), Handler: h,
			Concurrency: max(1, cfg.WorkerConcurrency/s.queues), BatchSize: max(1, cfg.WorkerBatch/s.queues),
			HeartbeatInterval: -1})
	}
	return wc
}

// startWorkers starts s.workers Workers with handler h; stop cancels them
// and returns when every Run has returned (the last completion written).
func startWorkers(ctx context.Context, cfg Config, db *database, s workerSetup, h client.Handler) (stop func() error, err error) {
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, s.workers)
	for i := range s.workers {
		w, err := client.NewWorker(db.pool, workerConfig(cfg, s, h), client.WithLogger(discard),
			client.WithWorkerID(fmt.Sprintf("bench-%d", i)))
		if err != nil {
			cancel()
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs <- w.Run(runCtx) }()
	}
	return func() error {
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			// A Worker still checking the schema when the last job ran is
			// cancelled by us: not a failure.
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
		}
		return nil
	}, nil
}

// countingHandler counts jobs and closes all once n have run.
func countingHandler(n int) (client.Handler, <-chan struct{}) {
	var done atomic.Int64
	all := make(chan struct{})
	return func(context.Context, *client.Job) error {
		if done.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}, all
}

// runWorkerSetup pre-inserts n jobs and works them with setup s (no-op
// handler); the time runs from the start to the return of every Run, after
// the last batched completion is written (burn-down mode).
func runWorkerSetup(ctx context.Context, cfg Config, db *database, s workerSetup, n int) (result, error) {
	if err := seedQueues(ctx, db, n, s.queues); err != nil {
		return result{}, err
	}
	h, all := countingHandler(n)
	start := time.Now()
	stop, err := startWorkers(ctx, cfg, db, s, h)
	if err != nil {
		return result{}, err
	}
	select {
	case <-all:
	case <-ctx.Done():
	case <-time.After(10 * time.Minute):
	}
	if err := stop(); err != nil {
		return result{}, err
	}
	return checkCompleted(ctx, db, n, time.Since(start))
}

func checkCompleted(ctx context.Context, db *database, n int, elapsed time.Duration) (result, error) {
	var completed int64
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`).Scan(&completed); err != nil {
		return result{}, err
	}
	if completed != int64(n) {
		return result{}, fmt.Errorf("worker: %d of %d jobs completed", completed, n)
	}
	return result{ops: completed, elapsed: elapsed}, nil
}

// Continuous mode measures the Worker, not the inserter (docs/benchmarks.md,
// "Side by side with River"): with the old method (insert batches of 100
// back to back while the Worker works) both sides ran as fast as their one
// inserter, and the ratio compared inserters. Now:
//
//   - runWorkerContinuous: a backlog of n jobs is pre-inserted; the Worker
//     starts and, at the same moment, an inserter adds jobs at a fixed rate
//     (batches every 10 ms through EnqueueMany) that both sides' inserters
//     sustain. The window closes when 3/4 of the backlog has run, so the
//     Worker never runs dry: its rate is a limit of the Worker under a
//     steady insert load.
//   - runWorkerLatency: no backlog; n jobs inserted at a fixed rate, each
//     timed to its handler's start from the return of the insert call
//     that committed it (the moment it became visible to a worker, give
//     or take one round trip) and, as before, from its created_at (the
//     start of the inserter's transaction, so it also counts the
//     inserter's own batch up to its commit, which no worker can see).
//
// River's side (bench/river) does exactly the same with InsertManyFast.

// runWorkerContinuous returns the jobs run per second in the window, and
// how many jobs the inserter added meanwhile.
func runWorkerContinuous(ctx context.Context, cfg Config, db *database, n int, rate float64) (result, int, error) {
	if err := seedQueues(ctx, db, n, 1); err != nil {
		return result{}, 0, err
	}
	var ran atomic.Int64
	window := int64(n) * 3 / 4
	closed := make(chan struct{})
	h := func(context.Context, *client.Job) error {
		if ran.Add(1) == window {
			close(closed)
		}
		return nil
	}
	c, err := client.New(ctx, db.pool, client.WithLogger(discard))
	if err != nil {
		return result{}, 0, err
	}
	start := time.Now()
	stopWorkers, err := startWorkers(ctx, cfg, db, workerSetup{workers: 1, queues: 1}, h)
	if err != nil {
		return result{}, 0, err
	}
	stopInsert := make(chan struct{})
	type insertResult struct {
		n   int
		err error
	}
	ins := make(chan insertResult, 1)
	go func() {
		k, err := insertPaced(ctx, -1, rate, stopInsert, enqueueBatch(ctx, c))
		ins <- insertResult{k, err}
	}()
	var elapsed time.Duration
	select {
	case <-closed:
		elapsed = time.Since(start)
	case <-ctx.Done():
	case <-time.After(10 * time.Minute):
	}
	close(stopInsert)
	ir := <-ins
	if err := stopWorkers(); err != nil {
		return result{}, 0, err
	}
	if ir.err != nil {
		return result{}, 0, fmt.Errorf("continuous insert: %w", ir.err)
	}
	if elapsed == 0 {
		return result{}, 0, fmt.Errorf("continuous: %d of %d jobs of the window ran", ran.Load(), window)
	}
	return result{ops: window, elapsed: elapsed}, ir.n, nil
}

// startLatencies are the enqueue -> handler start latencies of one latency
// run: from the commit of each job's insert (the return of the EnqueueMany
// that inserted it; the target's measure, docs/benchmarks.md) and from its
// created_at (the start of the inserter's transaction: the insert's own
// time up to its commit counts too).
type startLatencies struct {
	fromCommit, fromCreated []time.Duration
	insertRate              float64 // jobs/s the inserter reached
}

// runWorkerLatency inserts n jobs at rate jobs per second while one Worker
// works them, and returns every job's latencies (the server and the bench
// share a clock) and the insert rate reached.
func runWorkerLatency(ctx context.Context, cfg Config, db *database, n int, rate float64) (startLatencies, error) {
	type start struct {
		id      int64
		at      time.Time
		created time.Time
	}
	var (
		mu        sync.Mutex
		starts    = make([]start, 0, n)
		committed = make(map[int64]time.Time, n) // job id -> its EnqueueMany's return
	)
	count, all := countingHandler(n)
	h := func(ctx context.Context, job *client.Job) error {
		at := time.Now()
		mu.Lock()
		starts = append(starts, start{job.ID, at, job.CreatedAt})
		mu.Unlock()
		return count(ctx, job)
	}
	c, err := client.New(ctx, db.pool, client.WithLogger(discard))
	if err != nil {
		return startLatencies{}, err
	}
	stop, err := startWorkers(ctx, cfg, db, workerSetup{workers: 1, queues: 1}, h)
	if err != nil {
		return startLatencies{}, err
	}
	began := time.Now()
	_, insertErr := insertPaced(ctx, n, rate, nil, func(k int) error {
		jobs := make([]client.NewJob, k)
		for i := range jobs {
			jobs[i] = client.NewJob{Queue: queue, Payload: payload}
		}
		ids, err := c.EnqueueMany(ctx, jobs)
		at := time.Now()
		mu.Lock()
		for _, id := range ids {
			committed[id] = at
		}
		mu.Unlock()
		return err
	})
	res := startLatencies{insertRate: float64(n) / time.Since(began).Seconds()}
	if insertErr == nil {
		select {
		case <-all:
		case <-ctx.Done():
		case <-time.After(10 * time.Minute):
		}
	}
	if err := stop(); err != nil {
		return startLatencies{}, err
	}
	if insertErr != nil {
		return startLatencies{}, fmt.Errorf("latency insert: %w", insertErr)
	}
	if _, err := checkCompleted(ctx, db, n, 0); err != nil {
		return startLatencies{}, err
	}
	for _, s := range starts {
		// A handler may start before the inserter has read its commit's
		// reply: a latency below zero, kept as measured.
		res.fromCommit = append(res.fromCommit, s.at.Sub(committed[s.id]))
		res.fromCreated = append(res.fromCreated, s.at.Sub(s.created))
	}
	return res, nil
}

// enqueueBatch inserts k jobs with one EnqueueMany.
func enqueueBatch(ctx context.Context, c *client.Client) func(k int) error {
	return func(k int) error {
		jobs := make([]client.NewJob, k)
		for i := range jobs {
			jobs[i] = client.NewJob{Queue: queue, Payload: payload}
		}
		_, err := c.EnqueueMany(ctx, jobs)
		return err
	}
}

// insertPaced inserts about rate jobs per second: every 10 ms the batch
// that keeps to the rate (at most 1,000), until n are in (n >= 0) or stop
// is closed. It returns how many it inserted. River's side paces the same.
func insertPaced(ctx context.Context, n int, rate float64, stop <-chan struct{}, insert func(k int) error) (int, error) {
	const tick = 10 * time.Millisecond
	began := time.Now()
	done := 0
	for n < 0 || done < n {
		select {
		case <-stop:
			return done, nil
		case <-ctx.Done():
			return done, ctx.Err()
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

// pctDur returns the p-quantile of ds (sorted in place).
func pctDur(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}
