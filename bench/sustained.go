package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// sustained runs producers and Workers together for cfg.Sustained, with
// finished jobs pruned after 30 s, and samples every cfg.SampleEvery:
// jobs/s, the backlog, live and dead tuples, the table's size and
// autovacuum's runs. The server's autovacuum settings are left as they are.
func (b *bench) sustained(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== sustained load: %s, 2 producers (EnqueueMany 100, backlog capped at 50k), 2 Workers (Concurrency 200), prune every 10 s ==\n", b.cfg.Sustained)
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	runCtx, cancel := context.WithTimeout(ctx, b.cfg.Sustained)
	defer cancel()

	var enqueued, done atomic.Int64
	var wg sync.WaitGroup
	handler := func(context.Context, *client.Job) error { done.Add(1); return nil }
	for i := range 2 {
		w, err := client.NewWorker(db.pool, client.WorkerConfig{
			Queue: queue, Handler: handler, Concurrency: 200, BatchSize: 100, HeartbeatInterval: -1,
		}, client.WithLogger(discard), client.WithWorkerID(fmt.Sprintf("sustained-%d", i)))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(runCtx) }()
	}
	jobs := make([]client.NewJob, 100)
	for i := range jobs {
		jobs[i] = client.NewJob{Queue: queue, Payload: payload}
	}
	c, err := client.New(ctx, db.pool)
	if err != nil {
		return err
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				if enqueued.Load()-done.Load() > 50_000 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				ids, err := c.EnqueueMany(runCtx, jobs)
				if err == nil {
					enqueued.Add(int64(len(ids)))
				}
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
				_, _ = c.Prune(runCtx, 30*time.Second, 100_000)
			}
		}
	}()

	fmt.Fprintf(b.out, "%8s %10s %10s %12s %12s %12s %12s %6s\n", "minute", "jobs/s", "backlog", "live tuples", "dead tuples", "table+idx MB", "index MB", "autovac")
	t := time.NewTicker(b.cfg.SampleEvery)
	defer t.Stop()
	last, start := int64(0), time.Now()
	lastT := start
	for {
		final := false
		select {
		case <-runCtx.Done():
			final = true
		case <-t.C:
		}
		if final && time.Since(lastT) < b.cfg.SampleEvery/2 { // sampled just now
			wg.Wait()
			return nil
		}
		d := done.Load()
		var live, dead, total, idx, autovac int64
		err := db.pool.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, pg_total_relation_size('backoff.jobs'),
				pg_indexes_size('backoff.jobs'), autovacuum_count
			FROM pg_stat_user_tables WHERE relid = 'backoff.jobs'::regclass`).Scan(&live, &dead, &total, &idx, &autovac)
		if err != nil {
			return fmt.Errorf("sample table stats: %w", err)
		}
		fmt.Fprintf(b.out, "%8.1f %10.0f %10d %12d %12d %12.1f %12.1f %6d\n", time.Since(start).Minutes(),
			float64(d-last)/time.Since(lastT).Seconds(), enqueued.Load()-d, live, dead, float64(total)/1e6, float64(idx)/1e6, autovac)
		last, lastT = d, time.Now()
		if final {
			wg.Wait()
			return nil
		}
	}
}
