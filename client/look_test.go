package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// callCounter counts the backoff functions a pool calls, by name, alone
// or in a batch.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

var calledFn = regexp.MustCompile(`backoff\.([a-z_]+)\(`)

func (cc *callCounter) count(sql string) {
	m := calledFn.FindStringSubmatch(sql)
	if m == nil {
		return
	}
	cc.mu.Lock()
	cc.calls[m[1]]++
	cc.mu.Unlock()
}

func (cc *callCounter) snapshot() map[string]int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := make(map[string]int, len(cc.calls))
	for k, v := range cc.calls {
		out[k] = v
	}
	return out
}

// since is what was called after the snapshot before.
func (cc *callCounter) since(before map[string]int) (map[string]int, int) {
	out := map[string]int{}
	total := 0
	for k, v := range cc.snapshot() {
		if d := v - before[k]; d > 0 {
			out[k] = d
			total += d
		}
	}
	return out, total
}

func (cc *callCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	cc.count(d.SQL)
	return ctx
}
func (*callCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (*callCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (cc *callCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	cc.count(d.SQL)
}
func (*callCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// simClock is a clock and tickers the test moves: the Worker's WithClock
// and its tickers. The maintenance loop's ticks are handed over one at a
// time (each send waits for the loop to take it) and the loop reports each
// step done, so the test knows what the Worker did at each simulated
// second without waiting for time. The producers' polls are sent as a
// time.Ticker sends: dropped when nobody reads.
type simClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*simTicker
	steps   chan struct{}
}

type simTicker struct {
	every   time.Duration
	next    time.Time
	ch      chan time.Time
	blocks  bool
	stopped atomic.Bool
}

func newSimClock(start time.Time) *simClock {
	return &simClock{now: start, steps: make(chan struct{}, 1024)}
}

func (s *simClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *simClock) ticker(blocks bool) func(time.Duration) ticker {
	return func(d time.Duration) ticker {
		s.mu.Lock()
		defer s.mu.Unlock()
		t := &simTicker{every: d, next: s.now.Add(d), blocks: blocks}
		if blocks {
			t.ch = make(chan time.Time)
		} else {
			t.ch = make(chan time.Time, 1)
		}
		s.tickers = append(s.tickers, t)
		return ticker{C: t.ch, Stop: func() { t.stopped.Store(true) }}
	}
}

// advance moves the clock by d and fires the tickers that came due, the
// maintenance loop's one tick at a time, each followed by its step.
func (s *simClock) advance(t *testing.T, d time.Duration) {
	t.Helper()
	s.mu.Lock()
	s.now = s.now.Add(d)
	now := s.now
	tickers := append([]*simTicker(nil), s.tickers...)
	s.mu.Unlock()
	for _, tk := range tickers {
		for !tk.next.After(now) && !tk.stopped.Load() {
			tk.next = tk.next.Add(tk.every)
			if !tk.blocks {
				select {
				case tk.ch <- now:
				default:
				}
				continue
			}
			select {
			case tk.ch <- now:
			case <-time.After(time.Minute):
				t.Fatal("the maintenance loop took no tick within a minute")
			}
			select {
			case <-s.steps:
			case <-time.After(time.Minute):
				t.Fatal("the maintenance loop did not finish its step within a minute")
			}
		}
	}
}

// idleWorker starts a Worker on queues whose clock and tickers are sim's,
// with the default intervals, and waits until every producer has parked.
func idleWorker(t *testing.T, pool *pgxpool.Pool, sim *simClock, queues []string, handler Handler) *Worker {
	t.Helper()
	qs := make([]QueueConfig, len(queues))
	for i, q := range queues {
		qs[i] = QueueConfig{Queue: q, Handler: handler, Concurrency: 1, Lease: time.Minute}
	}
	w, err := NewWorker(pool, WorkerConfig{Queues: qs}, WithLogger(testLogger(t)), WithClock(sim.Now))
	require.NoError(t, err)
	w.newTicker = sim.ticker(true)
	w.newPollTicker = sim.ticker(false)
	w.stepped = func() { sim.steps <- struct{}{} }
	startWorker(t, w)
	select {
	case <-sim.steps: // the maintenance loop is ready: its tickers exist
	case <-time.After(time.Minute):
		t.Fatal("the maintenance loop did not start within a minute")
	}
	eventually(t, time.Minute, "every producer parked, listening", func() bool {
		if w.notifier == nil || !w.notifier.listening() || len(w.producers) != len(queues) {
			return false
		}
		for _, p := range w.producers {
			if !p.parked.Load() || len(p.wake) > 0 {
				return false
			}
		}
		return true
	})
	return w
}

// TestIdleWorkerStaysWithinItsBudget: a Worker on ten empty queues, with
// schedules none of which is due, sends at most 2 statements a simulated
// second (docs/adr/0083): one look a second, and reap, rotate and
// fire_schedules once in 30 s; no claim and no queue_state.
func TestIdleWorkerStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cc := &callCounter{calls: map[string]int{}}
	cfg.ConnConfig.Tracer = cc
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := context.Background()
	start := time.Now().Truncate(time.Second)
	sim := newSimClock(start)
	queues := make([]string, 10)
	for i := range queues {
		queues[i] = fmt.Sprintf("budget-%d", i)
		// Anchored at the start: the first slot is an hour later (an
		// every-hour schedule is otherwise on the hour, which a run that
		// starts a minute before one would reach).
		_, err := pool.Exec(ctx, `SELECT backoff.put_schedule($1, $2, p_every => interval '1 hour', p_anchor => $3, p_now => $3)`,
			"budget-hourly-"+queues[i], queues[i], start)
		require.NoError(t, err)
	}
	idleWorker(t, pool, sim, queues, func(context.Context, *Job) error { return nil })
	sim.advance(t, time.Second) // settled: the producers' start-up claims are over

	before := cc.snapshot()
	const seconds = 60
	for range seconds {
		sim.advance(t, time.Second)
	}
	calls, total := cc.since(before)
	t.Logf("an idle Worker on %d queues, %d simulated seconds: %d statements %v", len(queues), seconds, total, calls)
	require.LessOrEqual(t, total, 2*seconds, "over the budget of 2 statements a second: %v", calls)
	require.Equal(t, seconds, calls["next_work"], "one look a second")
	require.Zero(t, calls["claim"], "no producer claims an empty queue")
	require.Zero(t, calls["queue_state"])
	require.Zero(t, calls["wait_for_jobs"], "the look renews the registrations")
	for _, fn := range []string{"reap", "rotate", "fire_schedules"} {
		require.Equal(t, seconds/30, calls[fn], "%s once in 30 s", fn)
	}
	var registered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.waiting_workers WHERE expires_at > now()`).Scan(&registered))
	require.Equal(t, len(queues), registered, "every idle queue still wakes on a notification")
}

// TestIdleWorkerStillStartsWorkInTime: an idle Worker, its producers
// parked, still starts a job enqueued due now at once (the notification),
// a job due later and a retry within a second of being due (the look), and
// fires a schedule's slot and reaps an expired lease within a second of
// theirs, all on the simulated clock.
func TestIdleWorkerStillStartsWorkInTime(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	start := time.Now().Truncate(time.Second)
	sim := newSimClock(start)
	c := newTestClient(t, pool, WithClock(sim.Now))
	queues := []string{"intime-now", "intime-later", "intime-retry", "intime-sched", "intime-reap"}
	var mu sync.Mutex
	started := map[int64][]time.Time{} // job -> the simulated times its attempts started
	handler := func(_ context.Context, job *Job) error {
		mu.Lock()
		started[job.ID] = append(started[job.ID], sim.Now())
		n := len(started[job.ID])
		mu.Unlock()
		if job.Queue == "intime-retry" && n == 1 {
			return RetryAfter(errors.New("downstream 503"), 10*time.Second)
		}
		return nil
	}
	attempts := func(id int64) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), started[id]...)
	}
	idleWorker(t, pool, sim, queues, handler)

	// Due now: the notification wakes the parked producer, no tick needed.
	now, err := c.Enqueue(ctx, "intime-now", nil)
	require.NoError(t, err)
	eventually(t, time.Minute, "the job due now ran", func() bool { return countStatus(t, pool, StatusCompleted) == 1 })
	require.Equal(t, []time.Time{start}, attempts(now))

	// Due in 2.5 s: nothing claims it before, the look after it does.
	later, err := c.Enqueue(ctx, "intime-later", nil, RunAt(start.Add(2500*time.Millisecond)))
	require.NoError(t, err)
	sim.advance(t, time.Second)
	sim.advance(t, time.Second)
	require.Empty(t, attempts(later), "not due yet")
	sim.advance(t, time.Second)
	eventually(t, time.Minute, "the later job ran", func() bool { return len(attempts(later)) == 1 })
	require.Equal(t, start.Add(3*time.Second), attempts(later)[0], "started at the first look after it was due")

	// A retry 10 s after its failed attempt: the look after its backoff.
	retry, err := c.Enqueue(ctx, "intime-retry", nil)
	require.NoError(t, err)
	eventually(t, time.Minute, "the first attempt failed", func() bool {
		var st string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM backoff.jobs WHERE id = $1`, retry).Scan(&st))
		return st == "retrying"
	})
	failedAt := attempts(retry)[0]
	for range 9 {
		sim.advance(t, time.Second)
	}
	require.Len(t, attempts(retry), 1, "the retry is not due yet")
	sim.advance(t, time.Second)
	eventually(t, time.Minute, "the retry ran", func() bool { return len(attempts(retry)) == 2 })
	require.Equal(t, failedAt.Add(10*time.Second), attempts(retry)[1])

	// A schedule's slot 3 s from now: fired by the look at that second.
	slot := sim.Now().Add(3 * time.Second)
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('intime-hourly', 'intime-sched', p_every => interval '1 hour', p_anchor => $1, p_now => $1)`, sim.Now())
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE backoff.schedules SET next_fire_at = $1 WHERE name = 'intime-hourly'`, slot)
	require.NoError(t, err)
	fired := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE schedule = 'intime-hourly'`).Scan(&n))
		return n
	}
	sim.advance(t, time.Second)
	sim.advance(t, time.Second)
	require.Zero(t, fired(), "the slot is not due yet")
	sim.advance(t, time.Second)
	require.Equal(t, 1, fired(), "fired at the look of its second")
	eventually(t, time.Minute, "the slot's job ran", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE schedule = 'intime-hourly' AND status = 'completed'`).Scan(&n))
		return n == 1
	})

	// A lease of a worker that died (a claim of a minute on a queue this
	// Worker does not serve, never settled): reaped at the first look
	// after it ran out.
	dead, err := c.Enqueue(ctx, "intime-elsewhere", nil)
	require.NoError(t, err)
	other := newTestClient(t, pool, WithClock(sim.Now), WithWorkerID("died"))
	claimed, err := other.Claim(ctx, "intime-elsewhere", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	status := func() string {
		var st string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM backoff.jobs WHERE id = $1`, dead).Scan(&st))
		return st
	}
	leaseEnd := *claimed[0].LeaseUntil
	for sim.Now().Add(time.Second).Before(leaseEnd) {
		sim.advance(t, time.Second)
	}
	require.Equal(t, "running", status(), "the lease has not run out")
	sim.advance(t, time.Second) // past the lease's end (a lease ends after its last microsecond)
	sim.advance(t, time.Second)
	require.NotEqual(t, "running", status(), "reaped within a look of its lease's end")
}
