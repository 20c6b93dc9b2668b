package shardtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// The benchmarks compare one shard reached straight with the same shard
// reached through the router (make bench-sharded; the numbers mean
// something only on a quiet machine). Each op is a whole call, so
// ns/op is the latency of a call from one connection and, in the Parallel
// variants (8 connections), the inverse of the throughput.

func benchTargets(b *testing.B) map[string]*pgxpool.Pool {
	b.Helper()
	out := map[string]*pgxpool.Pool{}
	for name, u := range map[string]string{"direct": env.ShardURLs[0], "router": env.RouterURL} {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxConns = 8
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		out[name] = p
	}
	return out
}

// benchQueue is a queue that the router places on shard 0.
func benchQueue(b *testing.B, name string) string {
	for i := 0; ; i++ {
		q := name + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if queueShard(q) == 0 {
			return q
		}
	}
}

func BenchmarkEnqueue(b *testing.B) {
	for _, name := range []string{"direct", "router"} {
		b.Run(name, func(b *testing.B) {
			p := benchTargets(b)[name]
			q := benchQueue(b, "bench-enq")
			ctx := context.Background()
			for b.Loop() {
				if _, err := p.Exec(ctx, `SELECT backoff.enqueue($1)`, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCycle is one job's whole life: enqueue, claim, complete (three
// calls).
func BenchmarkCycle(b *testing.B) {
	for _, name := range []string{"direct", "router"} {
		b.Run(name, func(b *testing.B) {
			p := benchTargets(b)[name]
			q := benchQueue(b, "bench-cycle-"+name)
			ctx := context.Background()
			for b.Loop() {
				cycle(b, ctx, p, q)
			}
		})
	}
}

func BenchmarkCycleParallel(b *testing.B) {
	for _, name := range []string{"direct", "router"} {
		b.Run(name, func(b *testing.B) {
			p := benchTargets(b)[name]
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				// A queue of its own: a claim takes this goroutine's job.
				q := benchQueue(b, fmt.Sprintf("bench-par-%s-%d", name, n.Add(1)))
				for pb.Next() {
					cycle(b, ctx, p, q)
				}
			})
		})
	}
}

func cycle(b *testing.B, ctx context.Context, p *pgxpool.Pool, q string) {
	if _, err := p.Exec(ctx, `SELECT backoff.enqueue($1)`, q); err != nil {
		b.Fatal(err)
	}
	var id int64
	var attempt int
	err := p.QueryRow(ctx, `SELECT id, attempts FROM backoff.claim($1, 'bench') LIMIT 1`, q).Scan(&id, &attempt)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Exec(ctx, `SELECT backoff.complete($1, $2)`, id, attempt); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkShardAddMovedShare is not timed: it prints the share of 1,000
// queue names whose shard changed when a fifth shard was added to a router
// over four (the goal is none: docs/adr/0091-placement-table.md), once,
// as a target line.
func BenchmarkShardAddMovedShare(b *testing.B) {
	movedShareOnce.Do(func() {
		share, err := shardAddMovedShare(context.Background())
		if err != nil {
			movedShareErr = err
			return
		}
		movedShare = share
		printTarget("shard-add-moved-share", share, "<=", 0, "%.2f")
	})
	if movedShareErr != nil {
		b.Fatal(movedShareErr)
	}
	// Computed, not timed: no ns/op.
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(movedShare, "moved-share")
}

var (
	movedShareOnce sync.Once
	movedShare     float64
	movedShareErr  error
)

// printTarget prints one target line: lower is better for "<=", higher for
// ">=".
func printTarget(name string, v float64, op string, goal float64, format string) {
	met := v <= goal
	if op == ">=" {
		met = v >= goal
	}
	verdict := "MISS"
	if met {
		verdict = "met"
	}
	fmt.Printf("target %s: "+format+" (goal %s %.2f) %s\n", name, v, op, goal, verdict)
}

func queueShard(q string) int { return router.QueueShard(q, NShards) }

// BenchmarkWorkerCycle is a Worker's cycle per job (claim, run a handler
// that does nothing, complete): "single" is a Worker on shard 0's
// database itself, "shard-direct" a Worker in direct mode given the
// router's pool, with the queue on shard 0 (client.WorkerConfig.DirectShards,
// docs/adr/0093-workers-call-shards-directly.md). The jobs are enqueued
// into shard 0 in bulk, clock stopped, with the Worker's reap and rotate
// off; ns/job is the time from the first job's handler to the last one's
// (how soon the Worker wakes up is left out), and the target line
// prints the ratio of the two: direct mode should cost no more than one
// database.
func BenchmarkWorkerCycle(b *testing.B) {
	perJob := map[string]float64{}
	for _, name := range []string{"single", "shard-direct"} {
		b.Run(name, func(b *testing.B) { perJob[name] = workerCycle(b, name == "shard-direct") })
	}
	if perJob["single"] > 0 && perJob["shard-direct"] > 0 {
		printTarget("shard-direct-cycle-vs-single", perJob["shard-direct"]/perJob["single"], "<=", 1.05, "%.2f")
	}
}

// workerCycle runs b.N jobs through a Worker and returns the time per job
// from the first handler to the last (also reported as ns/job).
func workerCycle(b *testing.B, direct bool) float64 {
	ctx := context.Background()
	url := env.ShardURLs[0]
	if direct {
		url = env.RouterURL
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 8
	wp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer wp.Close()
	sp, err := pgxpool.New(ctx, env.ShardURLs[0])
	if err != nil {
		b.Fatal(err)
	}
	defer sp.Close()
	shard, err := client.New(ctx, sp)
	if err != nil {
		b.Fatal(err)
	}
	benchRuns++
	q := benchQueue(b, fmt.Sprintf("bench-worker-%d", benchRuns))
	var handled atomic.Int64
	var first, last time.Time
	warm, all := make(chan struct{}), make(chan struct{})
	w, err := client.NewWorker(wp, client.WorkerConfig{
		Queue: q, Concurrency: 8, DirectShards: direct,
		// No reap and rotate: a rotate that switches segments while the
		// jobs are enqueued leaves those of the statement in flight in the
		// old segment until the next rotate (docs/adr/0061), a stall of
		// seconds that would swamp the cycle measured here. The look
		// (schedules) still runs.
		ReapInterval: -1,
		Handler: func(context.Context, *client.Job) error {
			switch handled.Add(1) {
			case 1:
				close(warm)
			case 2:
				first = time.Now()
			}
			if handled.Load() == int64(b.N)+1 {
				last = time.Now()
				close(all)
			}
			return nil
		},
	}, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	// One job first: the Worker is connected (in direct mode: has read
	// the layout and opened its shard's pool) before the clock starts.
	if _, err := shard.Enqueue(ctx, q, nil); err != nil {
		b.Fatal(err)
	}
	select {
	case <-warm:
	case err := <-done:
		b.Fatalf("the worker stopped: %v", err)
	}
	b.StopTimer()
	for left := b.N; left > 0; {
		n := min(left, 1000)
		if _, err := shard.EnqueueMany(ctx, slices.Repeat([]client.NewJob{{Queue: q}}, n)); err != nil {
			b.Fatal(err)
		}
		left -= n
	}
	b.StartTimer()
	<-all
	b.StopTimer()
	if b.N < 2 {
		return 0
	}
	perJob := float64(last.Sub(first).Nanoseconds()) / float64(b.N-1)
	b.ReportMetric(perJob, "ns/job")
	return perJob
}

// benchRuns numbers the Worker benchmarks' runs: a queue of its own each.
var benchRuns int
