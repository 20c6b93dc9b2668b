package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/client"
)

// outputs measures job outputs (docs/workflows.md), kept apart from the hot
// job row:
//
//   - a 1 KiB output recorded by complete, against complete without one:
//     claim+complete one job a transaction, 4 clients, alternating rounds
//     (goal: at least 0.95, an output costs at most 5%);
//   - 1 MiB outputs recorded at 100 jobs/s while a sampler claims and
//     completes one job every 10 ms in another queue: the sampler's claim
//     p99 against the same sampler with no output load (goal: at most
//     1.10). The outputs are pruned 10 s after completion, as a retention
//     would; each document is JSON that compresses about 3 to 1;
//   - the await call (Client.WaitForOutput, LISTEN-driven, its poll set to
//     a minute so that only the notification can wake it): from the
//     return of the complete that commits the job to the return of the
//     wait, p50 and p99 (goal: p50 under 10 ms).
func (b *bench) outputs(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== job outputs ==\n")
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	const clients = 4
	small := outputDocument(1 << 10)
	if err := seedQueue(ctx, db, "out-cost", b.cfg.OutputSeed); err != nil {
		return err
	}
	withOutput := func(out []byte) func() (float64, error) {
		return func() (float64, error) {
			rate, err := completeLoop(ctx, db.pool, "out-cost", clients, b.cfg.RunFor, out)
			if err != nil {
				return 0, fmt.Errorf("outputs, claim+complete: %w", err)
			}
			return rate, nil
		}
	}
	with, without, ratios, err := alternate(b.cfg.Rounds, withOutput(nil), withOutput(small))
	if err != nil {
		return err
	}
	ratio := median(with) / median(without)
	fmt.Fprintf(b.out, "claim+complete, 1 job a transaction, %d clients: %.0f jobs/s with a 1 KiB output, %.0f without (ratio %.2f, rounds %s, goal >= 0.95)\n",
		clients, median(with), median(without), ratio, roundRatios(ratios))
	b.target("output-1kib-vs-none-4c", ratio, 0.95)

	free, err := b.claimP99(ctx, false)
	if err != nil {
		return err
	}
	loaded, err := b.claimP99(ctx, true)
	if err != nil {
		return err
	}
	p99 := ratioOf(loaded, free)
	fmt.Fprintf(b.out, "claim p99 of a sampler (one claim+complete every 10 ms) over %s: %.2f ms with 1 MiB outputs at 100 jobs/s in another queue, %.2f ms without (ratio %.2f, goal <= 1.10)\n",
		b.cfg.OutputWindow, loaded, free, p99)
	b.targetAtMost("output-1mib-claim-p99-ratio", p99, 1.10)

	wake, err := b.awaitWakeups(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "await a job's output, %d waits: woken %.2f ms p50, %.2f ms p99 after the completion's commit (goal: p50 < 10 ms)\n",
		len(wake), millis(percentile(wake, 0.5)), millis(percentile(wake, 0.99)))
	b.targetAtMost("await-wake-p50-ms", millis(percentile(wake, 0.5)), 10)
	return nil
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// awaitWakeups completes AwaitSamples jobs, each while a WaitForOutput
// waits for it (registered before the completion: its row is seen in
// backoff.job_awaiters), and returns how long after each completion's
// commit its wait returned.
func (b *bench) awaitWakeups(ctx context.Context) ([]time.Duration, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return nil, err
	}
	defer drop()
	c, err := client.New(ctx, db.pool, client.WithLogger(discard))
	if err != nil {
		return nil, err
	}
	n := b.cfg.AwaitSamples
	if err := seedQueue(ctx, db, "out-await", n); err != nil {
		return nil, err
	}
	var took []time.Duration
	for range n {
		var id int64
		var token int
		if err := db.pool.QueryRow(ctx, "SELECT id, attempts FROM backoff.claim('out-await', 'bench', 1)").Scan(&id, &token); err != nil {
			return nil, fmt.Errorf("await: claim: %w", err)
		}
		woken := make(chan error, 1)
		var at time.Time
		go func() {
			_, err := c.WaitForOutput(ctx, id, time.Minute)
			at = time.Now()
			woken <- err
		}()
		for registered := false; !registered; {
			if err := db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM backoff.job_awaiters WHERE job_id = $1)", id).Scan(&registered); err != nil {
				return nil, err
			}
		}
		if _, err := db.pool.Exec(ctx, `SELECT 1 FROM backoff.complete($1, $2, p_output => '{"done": true}')`, id, token); err != nil {
			return nil, fmt.Errorf("await: complete: %w", err)
		}
		committed := time.Now()
		if err := <-woken; err != nil {
			return nil, fmt.Errorf("await job %d: %w", id, err)
		}
		took = append(took, max(0, at.Sub(committed)))
	}
	return took, nil
}

// outputDocument is a JSON document of at most size bytes as text that
// compresses about 3 to 1 (numbers that vary, keys that repeat).
func outputDocument(size int) []byte {
	type row struct {
		I int    `json:"i"`
		V string `json:"v"`
	}
	var rows []row
	x := uint64(0x9e3779b97f4a7c15)
	for n := 2; ; {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		r := row{I: len(rows), V: fmt.Sprintf("%016x", x)}
		line, _ := json.Marshal(r)
		if n+len(line)+1 > size {
			break
		}
		rows = append(rows, r)
		n += len(line) + 1
	}
	doc, _ := json.Marshal(rows)
	return doc
}

// seedQueue inserts n due jobs into queue.
func seedQueue(ctx context.Context, db *database, queue string, n int) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, payload, policy, run_at, created_at, segment)
		SELECT $1, '{}', 'default', now() - interval '1 minute', now() - interval '1 minute', `+currentSegment+`
		FROM generate_series(1, $2)`, queue, n)
	if err != nil {
		return fmt.Errorf("seed %d jobs in %s: %w", n, queue, err)
	}
	return settle(ctx, db, oursTable)
}

// completeLoop runs clients loops of claim one job, complete it (with
// output when not nil) for d, and returns the jobs completed per second.
func completeLoop(ctx context.Context, pool *pgxpool.Pool, queue string, clients int, d time.Duration, output []byte) (float64, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	stop := time.Now().Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := claimAndComplete(ctx, pool, queue, output); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	began := time.Now()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(done.Load()) / time.Since(began).Seconds(), nil
}

// claimAndComplete claims one job of queue and completes it, recording
// output when it is not nil; it fails when the queue is empty.
func claimAndComplete(ctx context.Context, pool *pgxpool.Pool, queue string, output []byte) error {
	var id int64
	var token int
	if err := pool.QueryRow(ctx, "SELECT id, attempts FROM backoff.claim($1, 'bench', 1)", queue).Scan(&id, &token); err != nil {
		return fmt.Errorf("claim in %s: %w", queue, err)
	}
	var err error
	if output == nil {
		_, err = pool.Exec(ctx, "SELECT 1 FROM backoff.complete($1, $2)", id, token)
	} else {
		_, err = pool.Exec(ctx, "SELECT 1 FROM backoff.complete($1, $2, p_output => $3::jsonb)", id, token, string(output))
	}
	return err
}

// claimP99 runs the sampler for OutputWindow in a fresh database, with the
// 1 MiB output load beside it when loaded, and returns its claim p99 in ms.
func (b *bench) claimP99(ctx context.Context, loaded bool) (float64, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return 0, err
	}
	defer drop()
	window := b.cfg.OutputWindow
	samples := int(window/(10*time.Millisecond)) + 100
	if err := seedQueue(ctx, db, "out-sampler", samples); err != nil {
		return 0, err
	}
	if loaded {
		if err := seedQueue(ctx, db, "out-big", samples+100); err != nil {
			return 0, err
		}
		// Stored as jsonb, 1 MiB of JSON text takes more than the default
		// limit of 1 MiB.
		if _, err := db.pool.Exec(ctx, `INSERT INTO backoff.queues (name, policy, max_output_bytes) VALUES ('out-big', 'default', 4194304)
			ON CONFLICT (name) DO UPDATE SET max_output_bytes = excluded.max_output_bytes`); err != nil {
			return 0, err
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	loadErr := make(chan error, 1)
	if loaded {
		big := outputDocument(1 << 20)
		go func() { loadErr <- bigOutputs(runCtx, db.pool, big) }()
	} else {
		close(loadErr)
	}
	var took []time.Duration
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for runCtx.Err() == nil {
		select {
		case <-tick.C:
		case <-runCtx.Done():
			continue
		}
		began := time.Now()
		var id int64
		var token int
		if err := db.pool.QueryRow(ctx, "SELECT id, attempts FROM backoff.claim('out-sampler', 'sampler', 1)").Scan(&id, &token); err != nil {
			return 0, fmt.Errorf("sampler claim: %w", err)
		}
		took = append(took, time.Since(began))
		if _, err := db.pool.Exec(ctx, "SELECT 1 FROM backoff.complete($1, $2)", id, token); err != nil {
			return 0, fmt.Errorf("sampler complete: %w", err)
		}
	}
	if err := <-loadErr; err != nil {
		return 0, err
	}
	return float64(percentile(took, 0.99).Microseconds()) / 1000, nil
}

// bigOutputs completes a job of queue out-big with output every 10 ms and
// prunes what finished more than 10 s ago every second, until ctx ends.
func bigOutputs(ctx context.Context, pool *pgxpool.Pool, output []byte) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	lastPrune := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := claimAndComplete(ctx, pool, "out-big", output); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("1 MiB outputs: %w", err)
		}
		if time.Since(lastPrune) >= time.Second {
			lastPrune = time.Now()
			if _, err := pool.Exec(ctx, "SELECT backoff.prune(interval '10 seconds')"); err != nil && ctx.Err() == nil {
				return fmt.Errorf("prune: %w", err)
			}
		}
	}
}
