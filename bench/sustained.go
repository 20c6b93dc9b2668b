package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

// Shape of the sustained run: the production shape of docs/benchmarks.md.
const (
	sustainedEnqueuers   = 16 // each enqueues one job per transaction, as a web request would
	sustainedQueues      = 4  // one Worker per queue
	sustainedConcurrency = 50 // handlers per Worker
)

// latencies collects enqueue -> handler start durations of one sample
// period.
type latencies struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

// take returns the period's durations, sorted, and starts a new period.
func (l *latencies) take() []time.Duration {
	l.mu.Lock()
	ds := l.ds
	l.ds = nil
	l.mu.Unlock()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// sustained runs the production shape for cfg.Sustained: 16 enqueuers (one
// job per transaction, through the Go client, round-robin over 4 queues)
// and one Worker per queue, with finished jobs pruned after 30 s. Every
// cfg.SampleEvery it prints jobs/s started and enqueued, the backlog,
// enqueue -> handler start p50/p99 (created_at, the enqueuing transaction's
// time, to the handler's start, on the same machine), the table's and
// indexes' size, live and dead tuples and autovacuum runs. The server's
// autovacuum settings, and the table's fillfactor, are left as they are: the
// run measures the settings it is given (docs/benchmarks.md recommends some).
// It ends with the last period's jobs/s as a ratio to the first's.
func (b *bench) sustained(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== sustained load (production shape): %s, %d enqueuers 1/tx over %d queues, %d Workers (Concurrency %d), prune every 10 s ==\n",
		b.cfg.Sustained, sustainedEnqueuers, sustainedQueues, sustainedQueues, sustainedConcurrency)
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	var reloptions *string
	_ = db.pool.QueryRow(ctx, `SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = 'backoff.jobs_live_1'::regclass`).Scan(&reloptions)
	fmt.Fprintf(b.out, "backoff.jobs reloptions: %s\n", deref(reloptions, "(none)"))
	runCtx, cancel := context.WithTimeout(ctx, b.cfg.Sustained)
	defer cancel()

	var (
		enqueued, started atomic.Int64
		lat               latencies
		wg                sync.WaitGroup
		errMu             sync.Mutex
		firstErr          error
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil && runCtx.Err() == nil {
			firstErr = err
		}
	}
	queueName := func(i int) string { return fmt.Sprintf("%s-%d", queue, i%sustainedQueues) }
	handler := func(_ context.Context, j *client.Job) error {
		lat.add(time.Since(j.CreatedAt))
		started.Add(1)
		return nil
	}
	for i := range sustainedQueues {
		w, err := client.NewWorker(db.pool, client.WorkerConfig{
			Queue: queueName(i), Handler: handler, Concurrency: sustainedConcurrency, HeartbeatInterval: -1,
		}, client.WithLogger(discard), client.WithWorkerID(fmt.Sprintf("sustained-%d", i)))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(runCtx); err != nil && runCtx.Err() == nil {
				fail(fmt.Errorf("worker %d: %w", i, err))
			}
		}()
	}
	c, err := client.New(ctx, db.pool)
	if err != nil {
		return err
	}
	for i := range sustainedEnqueuers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := queueName(i)
			for runCtx.Err() == nil {
				if _, err := c.Enqueue(runCtx, q, payload); err != nil {
					fail(fmt.Errorf("enqueue: %w", err))
					return
				}
				enqueued.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				_, _ = ops.New(db.pool).Prune(runCtx, 30*time.Second, 100_000)
			}
		}
	}()

	// WAL per job and the last checkpoint's time show what a checkpoint
	// does to the rate: after one, every first change of a page writes its
	// full image into the WAL.
	fmt.Fprintf(b.out, "%8s %9s %9s %9s %9s %9s %11s %11s %10s %9s %7s %9s %10s\n",
		"minute", "jobs/s", "enq/s", "backlog", "p50", "p99", "live tup", "dead tup", "table MB", "index MB", "autovac", "WAL B/job", "last ckpt")
	t := time.NewTicker(b.cfg.SampleEvery)
	defer t.Stop()
	var (
		lastStarted, lastEnq, lastWAL int64
		rates                         []float64
	)
	if err := db.pool.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0')::bigint`).Scan(&lastWAL); err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("read the WAL position: %w", err)
	}
	start := time.Now()
	lastT := start
	for final := false; !final; {
		select {
		case <-runCtx.Done():
			final = true
		case <-t.C:
		}
		if final && time.Since(lastT) < b.cfg.SampleEvery/2 { // sampled just now
			break
		}
		now := time.Now()
		s, e := started.Load(), enqueued.Load()
		ds := lat.take()
		var live, dead, heap, idx, autovac, wal int64
		var ckpt time.Time
		// Summed over the partitions of backoff.jobs (docs/adr/0061).
		err := db.pool.QueryRow(ctx, `SELECT sum(s.n_live_tup)::bigint, sum(s.n_dead_tup)::bigint, sum(pg_relation_size(s.relid))::bigint,
				sum(pg_indexes_size(s.relid))::bigint, sum(s.autovacuum_count)::bigint, (pg_current_wal_lsn() - '0/0')::bigint,
				(SELECT checkpoint_time FROM pg_control_checkpoint())
			FROM pg_stat_user_tables AS s
			WHERE s.relid IN (SELECT p.relid FROM pg_partition_tree('backoff.jobs'::regclass) AS p WHERE p.isleaf)`).Scan(&live, &dead, &heap, &idx, &autovac, &wal, &ckpt)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("sample table stats: %w", err)
		}
		secs := now.Sub(lastT).Seconds()
		rate := float64(s-lastStarted) / secs
		rates = append(rates, rate)
		lastCkpt := "before"
		if ckpt.After(start) {
			lastCkpt = fmt.Sprintf("%.1f min", ckpt.Sub(start).Minutes())
		}
		fmt.Fprintf(b.out, "%8.1f %9.0f %9.0f %9d %9s %9s %11d %11d %10.1f %9.1f %7d %9.0f %10s\n", now.Sub(start).Minutes(),
			rate, float64(e-lastEnq)/secs, e-s, ms(pct(ds, 0.5)), ms(pct(ds, 0.99)), live, dead, float64(heap)/1e6, float64(idx)/1e6, autovac,
			float64(wal-lastWAL)/float64(max(1, s-lastStarted)), lastCkpt)
		lastStarted, lastEnq, lastWAL, lastT = s, e, wal, now
	}
	cancel()
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	switch {
	case len(rates) >= 2 && rates[0] > 0:
		r := rates[len(rates)-1] / rates[0]
		fmt.Fprintf(b.out, "last period / first period (jobs/s): %.2f\n", r)
		b.target("sustained-last-vs-first", r, 0.90)
	default:
		fmt.Fprintf(b.out, "last period / first period (jobs/s): n/a (%d periods, first %.0f jobs/s)\n", len(rates), first(rates))
	}
	return nil
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func deref(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}

// wakeup measures enqueue -> handler start with an idle Worker: one job at
// a time, each enqueued after the Worker has had nothing to do for a while
// (the gap is the scenario, an idle system, not a wait for a result). The
// Worker's poll interval is left at its default (1 s), so a p50 far below
// it shows that wake-ups, not polling, start the jobs.
func (b *bench) wakeup(ctx context.Context) error {
	const gap = 20 * time.Millisecond
	fmt.Fprintf(b.out, "\n== enqueue -> handler start with an idle Worker (%d jobs, one at a time, %s apart) ==\n", b.cfg.WakeupSamples, gap)
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	startedAt := make(chan time.Time, 1)
	w, err := client.NewWorker(db.pool, client.WorkerConfig{
		Queue: queue, Handler: func(context.Context, *client.Job) error { startedAt <- time.Now(); return nil },
		Concurrency: 10, HeartbeatInterval: -1, ReapInterval: -1,
	}, client.WithLogger(discard), client.WithWorkerID("wakeup"))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	c, err := client.New(ctx, db.pool)
	if err != nil {
		return err
	}
	var ds []time.Duration
	for i := range b.cfg.WakeupSamples + 3 { // the first jobs also warm up
		time.Sleep(gap)
		t := time.Now()
		if _, err := c.Enqueue(ctx, queue, payload); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		select {
		case s := <-startedAt:
			if i >= 3 {
				ds = append(ds, s.Sub(t))
			}
		case <-time.After(10 * time.Second):
			return fmt.Errorf("wakeup: job %d did not start within 10 s", i)
		case err := <-done:
			return fmt.Errorf("wakeup: the worker stopped: %v", err)
		}
	}
	cancel()
	<-done
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	p50 := pct(ds, 0.5)
	fmt.Fprintf(b.out, "p50 %s  p99 %s  max %s\n", ms(p50), ms(pct(ds, 0.99)), ms(pct(ds, 1)))
	b.targetAtMost("enqueue-start-idle-p50-ms", float64(p50)/float64(time.Millisecond), 5)
	return nil
}

func first(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[0]
}
