package shardtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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
		verdict := "met"
		if share > 0 {
			verdict = "MISS"
		}
		fmt.Printf("target shard-add-moved-share: %.2f (goal <= 0.00) %s\n", share, verdict)
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

func queueShard(q string) int { return router.QueueShard(q, NShards) }
