// Package soaktest holds the soak test: a long mixed load against a real
// PostgreSQL that must keep a flat throughput and not grow in goroutines,
// connections or memory. It runs only when BACKOFF_SOAK names a duration
// (`make soak`, 30 minutes by default), never in the default test run.
package soaktest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// sample is one reporting window.
type sample struct {
	completed, enqueued, failed, replayed int64
	goroutines                            int
	conns                                 int
	heapMB                                float64
	backlog, reaped                       int
}

// TestSoak enqueues at a fixed rate (BACKOFF_SOAK_RATE jobs/s, default
// 100) into two queues for BACKOFF_SOAK; handlers fail 10% of attempts
// (retried), 2% permanently (dead-lettered, then replayed by an operator
// loop) and hang past their lease 1% of the time (reaped). Every window
// (a minute, or a tenth of a short run) it reports throughput, goroutines,
// connections and heap; at the end it asserts a flat throughput and no
// growth.
func TestSoak(t *testing.T) {
	total, err := time.ParseDuration(os.Getenv("BACKOFF_SOAK"))
	if err != nil || total <= 0 {
		t.Skip("soak runs only with BACKOFF_SOAK=<duration> (make soak)")
	}
	rate := 100
	if v, err := strconv.Atoi(os.Getenv("BACKOFF_SOAK_RATE")); err == nil && v >= 10 {
		rate = v
	}
	window := min(time.Minute, total/10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	_, err = admin.Exec(ctx, `
INSERT INTO backoff.policies (name, strategy, base, max_delay, max_attempts, lease)
VALUES ('soak', 'fixed', '200 milliseconds', '1 second', 10, '1 second');
INSERT INTO backoff.queues (name, policy) VALUES ('soak-a', 'soak'), ('soak-b', 'soak');`)
	require.NoError(t, err)

	var completed, enqueued, failed, replayed atomic.Int64
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	pool := testdb.Pool(t, dbURL)
	var wg sync.WaitGroup
	for _, q := range []string{"soak-a", "soak-b"} {
		for i := range 2 {
			w, err := client.NewWorker(pool, client.WorkerConfig{
				Queue: q, Concurrency: 8, Lease: time.Second, HeartbeatInterval: -1,
				PollInterval: 200 * time.Millisecond, ReapInterval: time.Second, ShutdownTimeout: 3 * time.Second,
				Handler: func(ctx context.Context, j *client.Job) error {
					switch x := rand.IntN(100); {
					case x < 10:
						failed.Add(1)
						return errors.New("transient")
					case x < 12:
						failed.Add(1)
						return client.Permanent(errors.New("poison"))
					case x < 13:
						time.Sleep(1500 * time.Millisecond) // past the lease: reaped
						return nil
					}
					time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
					completed.Add(1)
					return nil
				},
			}, client.WithLogger(quiet), client.WithWorkerID(fmt.Sprintf("%s-%d", q, i)))
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = w.Run(ctx)
			}()
		}
	}

	// Producer: a fixed rate, in batches of rate/10 every 100ms.
	prod, err := client.New(ctx, pool)
	require.NoError(t, err)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			batch := make([]client.NewJob, rate/10)
			for i := range batch {
				batch[i] = client.NewJob{Queue: []string{"soak-a", "soak-b"}[n%2], Payload: map[string]int{"n": n}}
				n++
			}
			if ids, err := prod.EnqueueMany(ctx, batch); err == nil {
				enqueued.Add(int64(len(ids)))
			}
		}
	}()
	// Operator: replay dead letters every 5s, prune finished jobs older
	// than a minute, so that the table stays the size of the load.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var n int64
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs AS j, backoff.replay(j.id)
				WHERE j.status = 'dead_lettered'`).Scan(&n); err == nil {
				replayed.Add(n)
			}
			_, _ = admin.Exec(ctx, `SELECT backoff.prune('1 minute', 100000)`)
		}
	}()

	var samples []sample
	var prev sample
	deadline := time.Now().Add(total)
	for time.Now().Before(deadline) {
		time.Sleep(window)
		s := measure(t, admin, dbURL)
		s.completed, s.enqueued, s.failed, s.replayed = completed.Load(), enqueued.Load(), failed.Load(), replayed.Load()
		d := s
		d.completed -= prev.completed
		d.enqueued -= prev.enqueued
		d.failed -= prev.failed
		d.replayed -= prev.replayed
		t.Logf("window %2d: completed %6d (%6.1f/s)  enqueued %6d  failed %5d  replayed %4d  backlog %5d  reaped(total) %5d  goroutines %4d  conns %3d  heap %6.1f MB",
			len(samples)+1, d.completed, float64(d.completed)/window.Seconds(), d.enqueued, d.failed, d.replayed,
			s.backlog, s.reaped, s.goroutines, s.conns, s.heapMB)
		samples = append(samples, d)
		prev = s
	}
	cancel()
	wg.Wait()

	require.GreaterOrEqual(t, len(samples), 3, "too short to judge: run at least three windows")
	// Flat throughput: after the first (warm-up) window, every window
	// within 25% of the median.
	var rates []int64
	for _, s := range samples[1:] {
		rates = append(rates, s.completed)
	}
	med := slices.Clone(rates)
	slices.Sort(med)
	m := float64(med[len(med)/2])
	require.Positive(t, m)
	for i, r := range rates {
		require.InDelta(t, m, float64(r), 0.25*m, "window %d throughput %d vs median %.0f", i+2, r, m)
	}
	// No growth: the last window against the second (after warm-up).
	first, last := samples[1], samples[len(samples)-1]
	require.LessOrEqual(t, last.goroutines, first.goroutines+20, "goroutines grew")
	require.LessOrEqual(t, last.conns, first.conns+2, "connections grew")
	require.LessOrEqual(t, last.heapMB, 2*first.heapMB+16, "heap grew")
	require.Less(t, last.backlog, rate*10, "the backlog grew beyond ten seconds of load")
}

func measure(t *testing.T, admin *pgxpool.Pool, dbURL string) sample {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := sample{goroutines: runtime.NumGoroutine(), heapMB: float64(ms.HeapAlloc) / (1 << 20)}
	ctx := context.Background()
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&s.conns))
	require.NoError(t, admin.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status IN ('pending', 'retrying') AND run_at <= now()),
       coalesce(sum((SELECT count(*) FROM jsonb_array_elements(errors) AS e WHERE e ->> 'kind' = 'lease_expired')), 0)
FROM backoff.jobs`).Scan(&s.backlog, &s.reaped))
	return s
}
