package shardtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/router"
)

// The load of BenchmarkMoveUnderLoad: jobs/s offered through the router to
// the queue that moves and to one other queue on each of the two shards the
// move touches; waiting jobs (due in an hour) the move copies.
const (
	moveBenchMovedRate = 500
	moveBenchOtherRate = 250
	moveBenchWaiting   = 20_000
	moveBenchBaseline  = 6 * time.Second
	moveBenchAfter     = 2 * time.Second
)

// BenchmarkMoveUnderLoad is not timed: it moves a queue to another shard
// while 1,000 jobs/s are offered through the router (half to the moving
// queue, a quarter to another queue on each shard the move touches) and
// workers claim and complete through the router, after a baseline of the
// same load without a move. It prints, once, as target lines: jobs lost
// and settled twice, how long enqueues of the moving queue were refused,
// the longest gap between two claims of its jobs, and the other queues'
// claim p99 during the move over the baseline's
// (docs/adr/0092-moving-a-live-queue.md).
func BenchmarkMoveUnderLoad(b *testing.B) {
	moveBenchOnce.Do(func() {
		r, err := moveUnderLoad(context.Background())
		if err != nil {
			moveBenchErr = err
			return
		}
		fmt.Printf("move under load: %d waiting jobs copied in %.1f s, %d jobs offered at %d/s\n",
			r.copied, r.took.Seconds(), r.offered, moveBenchMovedRate+2*moveBenchOtherRate)
		fmt.Printf("other queues' claim p99: %.2f ms without the move, %.2f ms during it\n", ms(r.p99Before), ms(r.p99During))
		printTarget("shard-move-lost", float64(r.lost), "<=", 0, "%.0f")
		printTarget("shard-move-settled-twice", float64(r.twice), "<=", 0, "%.0f")
		printTarget("shard-move-enqueue-unavailable-s", r.unavailable.Seconds(), "<=", 1, "%.2f")
		printTarget("shard-move-claims-paused-s", r.paused.Seconds(), "<=", 5, "%.2f")
		printTarget("shard-move-other-claim-p99-ratio", float64(r.p99During)/float64(r.p99Before), "<=", 1.10, "%.2f")
	})
	if moveBenchErr != nil {
		b.Fatal(moveBenchErr)
	}
	// Computed, not timed: no ns/op.
	b.ReportMetric(0, "ns/op")
}

var (
	moveBenchOnce sync.Once
	moveBenchErr  error
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type moveBenchResult struct {
	offered, copied, lost, twice int
	took, unavailable, paused    time.Duration
	p99Before, p99During         time.Duration
}

// moveLoad is the producers' and workers' record of one run.
type moveLoad struct {
	mu        sync.Mutex
	enqueued  map[int64]bool // payload sequence numbers
	completed map[int64]int  // sequence -> completions that settled
	refused   []time.Time    // 55006 from an enqueue of the moving queue
	claimedAt []time.Time    // claims that gave jobs of the moving queue
	otherLat  []timedLatency // claims of the other queues
}

type timedLatency struct {
	at  time.Time
	lat time.Duration
}

func moveUnderLoad(ctx context.Context) (moveBenchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var r moveBenchResult
	moved := fmt.Sprintf("bench-move-%d", rand.IntN(1_000_000_000))
	from := queueShard(moved)
	to := (from + 1) % NShards
	others := []string{queueOn(from, "bench-move-other-a"), queueOn(to, "bench-move-other-b")}

	// Waiting jobs for the mover to copy, enqueued on the shard directly.
	shard, err := pgx.Connect(ctx, env.ShardURLs[from])
	if err != nil {
		return r, err
	}
	_, err = shard.Exec(ctx, `SELECT count(backoff.enqueue($1, jsonb_build_object('waiting', g), now() + interval '1 hour'))
FROM generate_series(1, $2) AS g`, moved, moveBenchWaiting)
	shard.Close(ctx)
	if err != nil {
		return r, fmt.Errorf("seed the waiting jobs: %w", err)
	}

	cfg, err := pgxpool.ParseConfig(env.RouterURL)
	if err != nil {
		return r, err
	}
	cfg.MaxConns = 16
	rp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer rp.Close()

	load := &moveLoad{enqueued: map[int64]bool{}, completed: map[int64]int{}}
	var seq int64
	var seqMu sync.Mutex
	next := func() int64 { seqMu.Lock(); defer seqMu.Unlock(); seq++; return seq }

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var producers, workers sync.WaitGroup
	rates := map[string]int{moved: moveBenchMovedRate, others[0]: moveBenchOtherRate, others[1]: moveBenchOtherRate}
	for q, rate := range rates {
		producers.Add(1)
		go func() { defer producers.Done(); load.produce(runCtx, rp, q, q == moved, rate, next) }()
	}
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	for q := range rates {
		for range 2 {
			workers.Add(1)
			go func() { defer workers.Done(); load.work(workCtx, rp, q, q == moved) }()
		}
	}

	// The baseline, then the move, then a little more of the same load.
	start := time.Now()
	if err := pause(ctx, moveBenchBaseline); err != nil {
		return r, err
	}
	moveStart := time.Now()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	if err != nil {
		return r, err
	}
	base, err := pgx.ParseConfig(env.RouterURL)
	if err != nil {
		return r, err
	}
	res, err := router.MoveQueue(ctx, conn, base, moved, to, router.MoveOptions{Poll: 20 * time.Millisecond})
	conn.Close(ctx)
	if err != nil {
		return r, fmt.Errorf("move %s: %w", moved, err)
	}
	moveEnd := time.Now()
	r.took, r.copied = moveEnd.Sub(moveStart), res.Jobs
	if err := pause(ctx, moveBenchAfter); err != nil {
		return r, err
	}
	stopRun()
	producers.Wait()

	// Drain what was enqueued (a minute at most: what is left then is
	// counted lost), then stop the workers.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		load.mu.Lock()
		left := len(load.enqueued) - len(load.completed)
		load.mu.Unlock()
		if left <= 0 {
			break
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return r, err
		}
	}
	stopWork()
	workers.Wait()

	load.mu.Lock()
	defer load.mu.Unlock()
	r.offered = len(load.enqueued)
	for s := range load.enqueued {
		switch n := load.completed[s]; {
		case n == 0:
			r.lost++
		case n > 1:
			r.twice++
		}
	}
	if n := len(load.refused); n > 0 {
		r.unavailable = load.refused[n-1].Sub(load.refused[0]) + moveBenchRetry
	}
	slices.SortFunc(load.claimedAt, func(a, b time.Time) int { return a.Compare(b) })
	last := moveStart
	for _, at := range load.claimedAt {
		if at.After(moveStart) && at.Sub(last) > r.paused {
			r.paused = at.Sub(last)
		}
		if at.After(moveStart) {
			last = at
		}
		if at.After(moveEnd) {
			break
		}
	}
	var before, during []time.Duration
	for _, l := range load.otherLat {
		switch {
		case l.at.After(start.Add(time.Second)) && l.at.Before(moveStart):
			before = append(before, l.lat)
		case l.at.After(moveStart) && l.at.Before(moveEnd):
			during = append(during, l.lat)
		}
	}
	if len(before) == 0 || len(during) == 0 {
		return r, errors.New("no claim of the other queues timed before or during the move")
	}
	r.p99Before, r.p99During = p99(before), p99(during)

	// The waiting jobs arrived, still waiting.
	dest, err := pgx.Connect(ctx, env.ShardURLs[to])
	if err != nil {
		return r, err
	}
	defer dest.Close(ctx)
	var waiting int
	if err := dest.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = $1 AND payload ? 'waiting' AND status = 'pending'`, moved).Scan(&waiting); err != nil {
		return r, err
	}
	if waiting != moveBenchWaiting {
		return r, fmt.Errorf("%d of the %d waiting jobs are on shard %d", waiting, moveBenchWaiting, to)
	}
	return r, nil
}

// moveBenchRetry is how long a producer waits before enqueueing again
// after a refusal.
const moveBenchRetry = 5 * time.Millisecond

// produce enqueues into queue at rate jobs/s until ctx ends, each job's
// payload a new sequence number; an enqueue of the moving queue that is
// refused (55006) is retried with the same number.
func (l *moveLoad) produce(ctx context.Context, p *pgxpool.Pool, queue string, moving bool, rate int, next func() int64) {
	every := time.Second / time.Duration(rate)
	due := time.Now()
	for ctx.Err() == nil {
		s := next()
		for {
			_, err := p.Exec(ctx, `SELECT backoff.enqueue($1, jsonb_build_object('s', $2::bigint))`, queue, s)
			var pgErr *pgconn.PgError
			if moving && errors.As(err, &pgErr) && pgErr.Code == "55006" {
				l.mu.Lock()
				l.refused = append(l.refused, time.Now())
				l.mu.Unlock()
				if pause(ctx, moveBenchRetry) != nil {
					return
				}
				continue
			}
			if err != nil {
				return // the run's end cancelled it: not enqueued
			}
			break
		}
		l.mu.Lock()
		l.enqueued[s] = true
		l.mu.Unlock()
		due = due.Add(every)
		if d := time.Until(due); d > 0 && pause(ctx, d) != nil {
			return
		}
	}
}

// work claims (up to 10) and completes jobs of queue until ctx ends.
func (l *moveLoad) work(ctx context.Context, p *pgxpool.Pool, queue string, moving bool) {
	type claimed struct {
		id       int64
		attempts int
		seq      *int64
	}
	for ctx.Err() == nil {
		t0 := time.Now()
		rows, err := p.Query(ctx, `SELECT id, attempts, (payload ->> 's')::bigint FROM backoff.claim($1, 'bench', 10, interval '5 minutes')`, queue)
		if err != nil {
			continue
		}
		jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
			var c claimed
			return c, row.Scan(&c.id, &c.attempts, &c.seq)
		})
		lat := time.Since(t0)
		if err != nil {
			continue
		}
		l.mu.Lock()
		if moving && len(jobs) > 0 {
			l.claimedAt = append(l.claimedAt, t0)
		}
		if !moving {
			l.otherLat = append(l.otherLat, timedLatency{at: t0, lat: lat})
		}
		l.mu.Unlock()
		for _, j := range jobs {
			// complete returns the job, or no row when the attempt no
			// longer holds it.
			var id int64
			err := p.QueryRow(ctx, `SELECT c.id FROM backoff.complete($1, $2) AS c WHERE c.id IS NOT NULL`, j.id, j.attempts).Scan(&id)
			if err != nil || j.seq == nil {
				continue
			}
			l.mu.Lock()
			l.completed[*j.seq]++
			l.mu.Unlock()
		}
		if len(jobs) == 0 && pause(ctx, 5*time.Millisecond) != nil {
			return
		}
	}
}

// queueOn is a queue name with prefix that the hash rule puts on shard k.
func queueOn(k int, prefix string) string {
	for {
		q := fmt.Sprintf("%s-%d", prefix, rand.IntN(1_000_000_000))
		if queueShard(q) == k {
			return q
		}
	}
}

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}
