package client

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.MainWithExamples(m) }

// The worker tests run against real PostgreSQL in real time. A lease is
// longer than any stall of a busy machine (a minute) unless its running
// out is what a test checks; expiry is driven by a reaper's p_now, not by
// waiting for a short lease. No test waits for a backoff: retries are
// checked by status and run_at, never by sleeping until they come due, and
// a worker that must not see a retry come due runs on an injected clock.
// The bounds of eventually are guards against a hang, generous for a busy
// machine, not bounds under test.

func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	// A handler that ignores its context may outlive Run by design (Go cannot
	// stop it); what it logs after the test has ended is dropped, since
	// testing.T panics on a Log after completion.
	t.Cleanup(func() {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	t     *testing.T
	mu    sync.Mutex
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// eventually polls cond (a database read, typically) until it holds.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startWorker runs w until the returned stop is called; stop returns when
// Run has.
func startWorker(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(time.Minute):
				t.Fatal("worker did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func countStatus(t *testing.T, pool *pgxpool.Pool, status Status) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM backoff.jobs WHERE status = $1", string(status)).Scan(&n))
	return n
}

// requireNoneRunning is how every worker test ends: whatever happened, no
// job is left running.
func requireNoneRunning(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Zero(t, countStatus(t, pool, StatusRunning), "jobs left running")
}

func newTestClient(t *testing.T, pool *pgxpool.Pool, opts ...Option) *Client {
	t.Helper()
	c, err := New(context.Background(), pool, append([]Option{WithLogger(testLogger(t))}, opts...)...)
	require.NoError(t, err)
	return c
}

func TestWorkerRunsABacklogInBatches(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	jobs := make([]NewJob, 200)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "batch", Payload: map[string]int{"n": i}}
	}
	_, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)

	meter := newRecordingMeter()
	var ran atomic.Int64
	var maxRunning, running atomic.Int64
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "batch", Concurrency: 8, BatchSize: 8, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			ran.Add(1)
			return nil
		},
	}, WithLogger(testLogger(t)), WithMeterProvider(meter.provider()))
	require.NoError(t, err)
	start := time.Now()
	stop := startWorker(t, w)
	// PollInterval is an hour: only "a full batch refetches at once" can
	// drain the backlog in time.
	eventually(t, time.Minute, "backlog completed", func() bool { return countStatus(t, pool, StatusCompleted) == 200 })
	t.Logf("200 jobs, concurrency 8: %s", time.Since(start))
	stop()
	require.EqualValues(t, 200, ran.Load())
	require.LessOrEqual(t, maxRunning.Load(), int64(8))
	require.EqualValues(t, 200, meter.count("pgbackoff.jobs.claimed"))
	require.EqualValues(t, 200, meter.count("pgbackoff.jobs.completed"))
	require.EqualValues(t, 200, meter.samples("pgbackoff.handler.duration"))
	requireNoneRunning(t, pool)
}

func TestWorkerClassifiesHandlerErrors(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	ids := map[string]int64{}
	for _, kind := range []string{"ok", "fail", "permanent", "retry-after", "snooze", "panic"} {
		id, err := c.Enqueue(ctx, "classify", map[string]string{"kind": kind})
		require.NoError(t, err)
		ids[kind] = id
	}
	meter := newRecordingMeter()
	var handled atomic.Int64
	// The worker's clock stands still: the retries (a second away under
	// the default policy) never come due while the test looks, however
	// slowly a busy machine runs it.
	now := time.Now()
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "classify", Concurrency: 6, ReapInterval: -1, PollInterval: 50 * time.Millisecond,
		Handler: func(ctx context.Context, job *Job) error {
			defer handled.Add(1)
			var p struct{ Kind string }
			require.NoError(t, job.UnmarshalPayload(&p))
			switch p.Kind {
			case "fail":
				return errors.New("downstream 500")
			case "permanent":
				return Permanent(errors.New("malformed address"))
			case "retry-after":
				return RetryAfter(errors.New("429"), 45*time.Second)
			case "snooze":
				return Snooze(time.Hour)
			case "panic":
				var jobs []int
				_ = jobs[len(p.Kind)] // index out of range: a runtime panic, as a real bug would raise
			}
			return nil
		},
	}, WithLogger(testLogger(t)), WithMeterProvider(meter.provider()), WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "six jobs handled and settled", func() bool {
		return handled.Load() >= 6 && countStatus(t, pool, StatusRunning) == 0 && countStatus(t, pool, StatusCompleted) == 1
	})
	stop()

	get := func(kind string) Job {
		j, err := c.Get(ctx, ids[kind])
		require.NoError(t, err)
		return j
	}
	require.Equal(t, StatusCompleted, get("ok").Status)

	failed := get("fail")
	require.Equal(t, StatusRetrying, failed.Status)
	require.Equal(t, "downstream 500", failed.LastError)

	perm := get("permanent")
	require.Equal(t, StatusDeadLettered, perm.Status)
	require.Equal(t, "non_retryable", perm.DeadLetterReason)
	require.Equal(t, 1, perm.Token)
	require.Equal(t, "malformed address", perm.LastError, "the handler's text, unchanged: the kind is the reason")

	ra := get("retry-after")
	require.Equal(t, StatusRetrying, ra.Status)
	require.NotNil(t, ra.LastFailedAt)
	require.Equal(t, 45*time.Second, ra.RunAt.Sub(*ra.LastFailedAt), "RetryAfter's delay, under moderate's 60s max")
	require.Equal(t, "429", ra.LastError, "the handler's text, unchanged: the delay is in run_at")

	sn := get("snooze")
	require.Equal(t, StatusPending, sn.Status)
	require.Equal(t, 1, sn.Token, "a snooze keeps the token")
	require.Equal(t, 0, sn.AttemptNumber(), "a snooze gives the attempt back")
	require.Greater(t, time.Until(sn.RunAt), 50*time.Minute)

	pan := get("panic")
	require.Equal(t, StatusRetrying, pan.Status)
	require.Contains(t, pan.LastError, "panic: runtime error: index out of range [5] with length 0")
	require.Contains(t, pan.LastError, "worker_test.go", "the stack is in the error")
	require.Len(t, pan.Errors, 1)
	require.Equal(t, "error", pan.Errors[0].Kind)

	require.EqualValues(t, 4, meter.count("pgbackoff.jobs.failed"))
	require.EqualValues(t, 3, meter.count("pgbackoff.jobs.retried"))
	require.EqualValues(t, 1, meter.count("pgbackoff.jobs.dead_lettered"))
	require.EqualValues(t, 3, meter.samples("pgbackoff.backoff.delay"))
	requireNoneRunning(t, pool)
}

func TestWorkerHeartbeatsKeepALongHandlerAlive(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "long", nil)
	require.NoError(t, err)

	// A lease of a minute, longer than any stall of a busy machine: the
	// handler runs until the heartbeats have carried its lease two seconds
	// past the one its claim gave, and a reaper whose clock is one second
	// past that first lease (the instant it would have expired without
	// heartbeats) then finds nothing to take.
	const lease = time.Minute
	var cause atomic.Value
	var handlerErr atomic.Value
	reaped := atomic.Int64{}
	reaped.Store(-1)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "long", Concurrency: 1, Lease: lease, HeartbeatInterval: 50 * time.Millisecond,
		ReapInterval: 50 * time.Millisecond, // an eager reaper: any expired lease would be taken at once
		Handler: func(ctx context.Context, job *Job) error {
			claimed := *job.LeaseUntil
			deadline := time.Now().Add(time.Minute) // a guard, not a bound under test
			for {
				var until time.Time
				if err := pool.QueryRow(ctx, "SELECT lease_until FROM backoff.jobs WHERE id = $1", job.ID).Scan(&until); err != nil {
					handlerErr.Store(err)
					return err
				}
				if until.After(claimed.Add(2 * time.Second)) {
					break
				}
				select {
				case <-ctx.Done():
					cause.Store(context.Cause(ctx))
					return ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					err := errors.New("the heartbeats did not extend the lease within a minute")
					handlerErr.Store(err)
					return err
				}
			}
			var n int
			if err := pool.QueryRow(ctx, "SELECT backoff.reap($1)", claimed.Add(time.Second)).Scan(&n); err != nil {
				handlerErr.Store(err)
				return err
			}
			reaped.Store(int64(n))
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, 2*time.Minute, "long job completed", func() bool { return countStatus(t, pool, StatusCompleted) == 1 })
	stop()
	require.Nil(t, handlerErr.Load())
	require.Nil(t, cause.Load(), "the handler's context was never cancelled")
	require.Zero(t, reaped.Load(), "a reaper past the claim's lease finds it extended")
	j, err := c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, j.Token, "one attempt: the lease never expired")
	require.Empty(t, j.Errors)
	requireNoneRunning(t, pool)
}

func TestWorkerLeaseLossCancelsTheHandler(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "lost", nil)
	require.NoError(t, err)

	causes := make(chan error, 2)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "lost", Concurrency: 1, Lease: time.Second, HeartbeatInterval: 50 * time.Millisecond, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			if job.Token > 1 {
				return nil
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "job running", func() bool { return countStatus(t, pool, StatusRunning) == 1 })

	// Another party decides the lease is gone: a reaper whose clock is two
	// seconds ahead (past any lease a heartbeat can have given), as after
	// a network partition. The reaper skips a row that a heartbeat has
	// locked at that instant (SKIP LOCKED), so it may take a second pass;
	// and where the database's default is serializable, a heartbeat that
	// committed first makes this statement (run as it is, not through the
	// client) fail with 40001: the next pass reaps it.
	eventually(t, time.Minute, "the lease reaped", func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT backoff.reap(now() + interval '2 seconds')").Scan(&n)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "40001" {
			return false
		}
		require.NoError(t, err)
		return n == 1
	})

	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, ErrLeaseLost)
	case <-time.After(time.Minute):
		t.Fatal("the handler was not cancelled after its lease was lost")
	}
	stop()
	j, err := c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StatusRetrying, j.Status, "the reaper's decision stands; the stale worker did not settle")
	require.Equal(t, "lease_expired", j.Errors[len(j.Errors)-1].Kind)
	require.Len(t, j.Errors, 1)
	requireNoneRunning(t, pool)
}

func TestWorkerShutdown(t *testing.T) {
	t.Parallel()
	t.Run("drains running handlers", func(t *testing.T) {
		t.Parallel()
		pool := testdb.New(t)
		c := newTestClient(t, pool)
		for range 3 {
			_, err := c.Enqueue(context.Background(), "drain", nil)
			require.NoError(t, err)
		}
		var started atomic.Int64
		w, err := NewWorker(pool, WorkerConfig{
			Queue: "drain", Concurrency: 3, ShutdownTimeout: 10 * time.Second, ReapInterval: -1,
			Handler: func(ctx context.Context, job *Job) error {
				started.Add(1)
				time.Sleep(300 * time.Millisecond) // ignores ctx: the drain must wait for it
				return nil
			},
		}, WithLogger(testLogger(t)))
		require.NoError(t, err)
		stop := startWorker(t, w)
		eventually(t, time.Minute, "three handlers started", func() bool { return started.Load() == 3 })
		stop()
		require.Equal(t, 3, countStatus(t, pool, StatusCompleted))
		requireNoneRunning(t, pool)
	})
	t.Run("keeps holding what outlives the timeout", func(t *testing.T) {
		// A handler that ignores its cancelled context still runs: its
		// job must not run elsewhere meanwhile. The worker keeps its lease
		// alive past several lease lengths, while a second worker reaps
		// every 20 ms; Run returns only once the handler has returned.
		t.Parallel()
		pool := testdb.New(t)
		c := newTestClient(t, pool)
		polite, err := c.Enqueue(context.Background(), "stuck", map[string]bool{"polite": true})
		require.NoError(t, err)
		stubborn, err := c.Enqueue(context.Background(), "stuck", map[string]bool{"polite": false})
		require.NoError(t, err)
		release := make(chan struct{})
		var started atomic.Int64
		// A lease of a minute, longer than any stall of a busy machine;
		// heartbeats every 50 ms. That the worker goes on extending it
		// after the shutdown timeout is seen in lease_until, and by a
		// reaper whose clock is past the lease held when the shutdown
		// began.
		const lease = time.Minute
		w, err := NewWorker(pool, WorkerConfig{
			Queue: "stuck", Concurrency: 2, Lease: lease, HeartbeatInterval: 50 * time.Millisecond,
			ShutdownTimeout: 100 * time.Millisecond, ReapInterval: -1,
			Handler: func(ctx context.Context, job *Job) error {
				started.Add(1)
				var p struct{ Polite bool }
				_ = job.UnmarshalPayload(&p)
				if p.Polite {
					<-ctx.Done()
					return ctx.Err()
				}
				<-release // ignores its context
				return nil
			},
		}, WithLogger(testLogger(t)), WithWorkerID("first"))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		eventually(t, time.Minute, "both handlers started", func() bool { return started.Load() == 2 })

		var ranElsewhere atomic.Int64
		other, err := NewWorker(pool, WorkerConfig{
			Queue: "stuck", Concurrency: 2, ReapInterval: 20 * time.Millisecond, PollInterval: 20 * time.Millisecond,
			Handler: func(ctx context.Context, job *Job) error {
				if job.ID == stubborn {
					ranElsewhere.Add(1)
				}
				return Snooze(time.Hour)
			},
		}, WithLogger(testLogger(t)), WithWorkerID("second"))
		require.NoError(t, err)
		stopOther := startWorker(t, other)

		cancel()
		stoppedAt := time.Now()
		eventually(t, time.Minute, "the polite job failed as retryable", func() bool {
			j, err := c.Get(context.Background(), polite)
			return err == nil && j.Status != StatusRunning
		})
		// Two seconds after the shutdown began (twenty shutdown timeouts),
		// the stubborn job is still running its first attempt, on a lease
		// extended since: a heartbeat ran after that.
		eventually(t, time.Minute, "lease extended by a heartbeat two seconds into the shutdown", func() bool {
			j, err := c.Get(context.Background(), stubborn)
			require.NoError(t, err)
			require.Equal(t, StatusRunning, j.Status, "the stubborn job left this worker while its handler ran")
			require.Equal(t, 1, j.Token)
			require.Equal(t, "first", j.LockedBy)
			return j.LeaseUntil.After(stoppedAt.Add(lease + 2*time.Second))
		})
		// A reaper whose clock is past the lease held when the shutdown
		// began (where it would have expired had the heartbeats stopped)
		// takes nothing.
		var reaped int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT backoff.reap($1)", stoppedAt.Add(lease+time.Second)).Scan(&reaped))
		require.Zero(t, reaped, "the stubborn job's lease was not extended")
		select {
		case <-done:
			t.Fatal("Run returned while a handler still ran")
		default:
		}
		close(release)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("worker did not stop after the handler returned")
		}
		stopOther()
		require.Zero(t, ranElsewhere.Load(), "the stubborn job ran elsewhere")
		j, err := c.Get(context.Background(), stubborn)
		require.NoError(t, err)
		require.Equal(t, StatusCompleted, j.Status, "its handler returned nil")
		j, err = c.Get(context.Background(), polite)
		require.NoError(t, err)
		require.Contains(t, j.Errors[0].Error, "worker shutdown")
		requireNoneRunning(t, pool)
	})
}

// TestWorkerWakesOnNotify measures the time from Enqueue to the handler
// starting while polling is an hour away: only LISTEN/NOTIFY can wake it.
func TestWorkerWakesOnNotify(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	started := make(chan time.Time, 1)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "notify", Concurrency: 1, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			started <- time.Now()
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	ctx := context.Background()
	// Waiting means registered: enqueue notifies only a queue with a
	// registered worker (backoff.wait_for_jobs), so an enqueue that raced
	// the registration would be found by the poll alone (an hour here).
	// The wake-up is promised to a registered worker: an enqueue that races
	// the registration is found by the poll (docs/adr/0027), so every
	// enqueue below waits for the registration first.
	waiting := func() {
		eventually(t, time.Minute, "worker listening and registered as waiting", func() bool {
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = $1)
				+ (SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'notify' AND expires_at > now())`,
				"LISTEN "+NotifyChannel).Scan(&n))
			return n == 2
		})
	}
	waiting()
	// An unrelated queue's notification must not make it claim ours.
	_, err = c.Enqueue(ctx, "other", nil)
	require.NoError(t, err)

	var lat []time.Duration
	for range 5 {
		waiting()
		t0 := time.Now()
		_, err := c.Enqueue(ctx, "notify", nil)
		require.NoError(t, err)
		select {
		case t1 := <-started:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(time.Minute): // a guard: the poll is an hour away
			t.Fatal("no wake-up within a minute: NOTIFY did not reach the worker")
		}
	}
	slices.Sort(lat)
	t.Logf("NOTIFY wake-up latency over %d enqueues: min %s, median %s, max %s", len(lat), lat[0], lat[len(lat)/2], lat[len(lat)-1])
	stop()
	require.Equal(t, 5, countStatus(t, pool, StatusCompleted))
	requireNoneRunning(t, pool)
}

// recordingMeter counts what the client records, through the OTel API only.
type recordingMeter struct {
	noop.Meter
	mu     sync.Mutex
	counts map[string]int64
	hists  map[string]int
}

func newRecordingMeter() *recordingMeter {
	return &recordingMeter{counts: map[string]int64{}, hists: map[string]int{}}
}

type recordingProvider struct {
	noop.MeterProvider
	m *recordingMeter
}

func (p recordingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

func (m *recordingMeter) provider() metric.MeterProvider { return recordingProvider{m: m} }

func (m *recordingMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return &recordingCounter{m: m, name: name}, nil
}

func (m *recordingMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return &recordingHistogram{m: m, name: name}, nil
}

func (m *recordingMeter) count(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name]
}

func (m *recordingMeter) samples(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hists[name]
}

type recordingCounter struct {
	noop.Int64Counter
	m    *recordingMeter
	name string
}

func (c *recordingCounter) Add(_ context.Context, v int64, _ ...metric.AddOption) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.counts[c.name] += v
}

type recordingHistogram struct {
	noop.Float64Histogram
	m    *recordingMeter
	name string
}

func (h *recordingHistogram) Record(_ context.Context, _ float64, _ ...metric.RecordOption) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.hists[h.name]++
}

// TestWorkerRetriesASettleCutByATransientError: the database is unreachable
// for a moment right when a handler succeeds. The completion must still be
// recorded once the database is back, not left running for the reaper, which
// would run the job again (and dead-letter it as max_attempts on its last
// attempt, although it succeeded).
func TestWorkerRetriesASettleCutByATransientError(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	check := testdb.Pool(t, url) // the test's own reads, outside the outage
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	var outageUntil atomic.Int64 // unix nanoseconds; acquiring a connection fails before it
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if time.Now().UnixNano() < outageUntil.Load() {
			return true, errors.New("injected: connection refused")
		}
		return true, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	c := newTestClient(t, check)
	ctx := context.Background()
	var ids []int64
	for _, kind := range []string{"ok", "fail"} {
		id, err := c.Enqueue(ctx, "blip", map[string]string{"kind": kind}, MaxAttempts(1))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	var handled atomic.Int64
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "blip", Concurrency: 2, Lease: time.Minute, HeartbeatInterval: -1,
		PollInterval: time.Hour, ReapInterval: -1, DisableListen: true,
		Handler: func(ctx context.Context, job *Job) error {
			defer handled.Add(1)
			var p struct{ Kind string }
			require.NoError(t, job.UnmarshalPayload(&p))
			// The outage starts as the handler returns and lasts 300 ms:
			// the settle call that follows meets it.
			outageUntil.Store(time.Now().Add(300 * time.Millisecond).UnixNano())
			if p.Kind == "fail" {
				return Permanent(errors.New("bad input"))
			}
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "both jobs handled", func() bool { return handled.Load() == 2 })
	// The lease is a minute and nothing reaps: only the worker's own retry
	// can settle the jobs within these seconds.
	eventually(t, time.Minute, "both jobs settled after the outage", func() bool {
		return countStatus(t, check, StatusRunning) == 0
	})
	stop()
	ok, err := c.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, ok.Status)
	require.Equal(t, 1, ok.Token)
	bad, err := c.Get(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, StatusDeadLettered, bad.Status)
	require.Equal(t, "non_retryable", bad.DeadLetterReason)
	require.Len(t, bad.Errors, 1)
}

// Without heartbeats the lease bounds the handler: its context ends when
// the lease runs out, with cause ErrLeaseExpired, and the failure is
// recorded for the attempt (the lease timer sits on the attempt's own
// context, not on a second context per job).
func TestWorkerWithoutHeartbeatsEndsTheHandlerAtTheLease(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	id, err := c.Enqueue(context.Background(), "short", nil, MaxAttempts(1))
	require.NoError(t, err)

	const lease = 300 * time.Millisecond
	causes := make(chan error, 1)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "short", Concurrency: 1, Lease: lease, HeartbeatInterval: -1, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			select {
			case <-time.After(20 * lease):
				causes <- nil
				return nil
			case <-ctx.Done():
				causes <- context.Cause(ctx)
				return ctx.Err()
			}
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	began := time.Now()
	cause := <-causes
	took := time.Since(began)
	stop()
	require.ErrorIs(t, cause, ErrLeaseExpired)
	require.Less(t, took, 10*lease, "the handler ran far past its lease")
	j, err := c.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, StatusDeadLettered, j.Status)
	require.Len(t, j.Errors, 1)
}
