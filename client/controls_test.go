package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pashagolub/pgxmock/v3"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// Queues as controls (ADR 0045) from the client's side: the settings
// in the queue listing, QueueState, and a Worker that respects an open
// breaker and a rate limit without polling hot
// (docs/adr/0047-worker-learns-when-to-claim.md).

const queueStateSQL = "SELECT queue, state, opened_at, failures, probes_left, rate, burst, tokens, next_claim_at, " +
	"coalesce($2::timestamptz, now()) FROM backoff.queue_state(p_queue => $1::text, p_now => $2::timestamptz)"

var queueStateNames = []string{"queue", "state", "opened_at", "failures", "probes_left", "rate", "burst", "tokens", "next_claim_at", "coalesce"}

// The SQL text, the arguments and the mapping of NULLs and errors.
func TestQueueStateMapping(t *testing.T) {
	c, mock := newMock(t, WithClock(func() time.Time { return mockNow }))
	ctx := context.Background()
	opened, next := mockNow.Add(-time.Minute), mockNow.Add(30*time.Second)
	mock.ExpectQuery(queueStateSQL).WithArgs("hooks", mockNow).WillReturnRows(pgxmock.NewRows(queueStateNames).
		AddRow("hooks", "open", &opened, int64(5), (*int32)(nil), ptr(2.5), ptr(int32(3)), ptr(0.25), &next, mockNow))
	st, wait, err := c.queueState(ctx, "hooks")
	require.NoError(t, err)
	require.Equal(t, QueueState{Queue: "hooks", State: "open", OpenedAt: opened, Failures: 5,
		Rate: ptr(2.5), Burst: ptr(int32(3)), Tokens: ptr(0.25), NextClaimAt: next}, st)
	require.Equal(t, 30*time.Second, wait)

	// Nothing holds claims back: zero times, no wait; a next_claim_at in
	// the past (read late) is no wait either.
	past := mockNow.Add(-time.Second)
	mock.ExpectQuery(queueStateSQL).WithArgs("idle", mockNow).WillReturnRows(pgxmock.NewRows(queueStateNames).
		AddRow("idle", "closed", (*time.Time)(nil), int64(0), (*int32)(nil), (*float64)(nil), (*int32)(nil), (*float64)(nil), (*time.Time)(nil), mockNow))
	st, err = c.QueueState(ctx, "idle")
	require.NoError(t, err)
	require.Equal(t, QueueState{Queue: "idle", State: "closed"}, st)

	mock.ExpectQuery(queueStateSQL).WithArgs("x", mockNow).WillReturnRows(pgxmock.NewRows(queueStateNames).
		AddRow("x", "half_open", &opened, int64(0), ptr(int32(1)), (*float64)(nil), (*int32)(nil), (*float64)(nil), &past, mockNow))
	st, wait, err = c.queueState(ctx, "x")
	require.NoError(t, err)
	require.Zero(t, wait)
	require.Equal(t, ptr(int32(1)), st.ProbesLeft)

	mock.ExpectQuery(queueStateSQL).WithArgs("secret", mockNow).
		WillReturnError(&pgconn.PgError{Code: "42501", Message: `permission denied for queue "secret"`})
	_, err = c.QueueState(ctx, "secret")
	require.ErrorIs(t, err, ErrPermissionDenied)
	require.Contains(t, err.Error(), `read state of queue "secret"`)

	mock.ExpectQuery(queueStateSQL).WithArgs("", mockNow).
		WillReturnError(&pgconn.PgError{Code: "22023", Message: `invalid queue name ""`})
	_, err = c.QueueState(ctx, "")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// setControls writes a queue's controls as config apply does.
func setControls(t *testing.T, pool *pgxpool.Pool, queue, set string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "INSERT INTO backoff.queues (name, policy) VALUES ($1, 'default') "+
		"ON CONFLICT (name) DO NOTHING", queue)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), "UPDATE backoff.queues SET "+set+" WHERE name = $1", queue)
	require.NoError(t, err)
}

// The listing shows the settings; QueueState follows the breaker from
// closed to open to half open to closed, and the bucket's tokens, on a
// simulated clock.
func TestQueueControlsAgainstPostgres(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	c := newTestClient(t, pool, WithClock(clock), WithWorkerID("it"))
	o := ops.New(pool, ops.WithClock(clock))
	ctx := context.Background()

	setControls(t, pool, "hooks", "rate = 2, burst = 3, breaker_failures = 2, breaker_window = '1 minute', "+
		"breaker_cooldown = '30 seconds', breaker_probes = 1")
	setControls(t, pool, "plain", "policy = 'default'")
	_, err := c.Enqueue(ctx, "seen", nil)
	require.NoError(t, err)
	queues, err := o.Queues(ctx)
	require.NoError(t, err)
	d := func(v time.Duration) *time.Duration { return &v }
	require.Equal(t, []ops.QueueInfo{
		{Name: "hooks", Policy: "default", Configured: true, Rate: ptr(2.0), Burst: ptr(int32(3)),
			BreakerFailures: ptr(int32(2)), BreakerWindow: d(time.Minute), BreakerCooldown: d(30 * time.Second), BreakerProbes: 1},
		{Name: "plain", Policy: "default", Configured: true, BreakerProbes: 1},
		{Name: "seen", Policy: "default", BreakerProbes: 1},
	}, queues)

	// The policies carry their lease-expiry budget (0: none).
	_, err = pool.Exec(ctx, "UPDATE backoff.policies SET max_lease_expiries = 3 WHERE name = 'moderate'")
	require.NoError(t, err)
	policies, err := o.Policies(ctx)
	require.NoError(t, err)
	for _, p := range policies {
		require.Equal(t, map[bool]int{true: 3}[p.Name == "moderate"], p.MaxLeaseExpiries, p.Name)
	}

	// A queue with no row and one without controls: all off.
	for _, q := range []string{"nowhere", "plain"} {
		st, err := c.QueueState(ctx, q)
		require.NoError(t, err)
		require.Equal(t, QueueState{Queue: q, State: "closed"}, st)
	}

	// Tokens: a full bucket, then three claimed, then one more after half
	// a second at 2 per second.
	st, err := c.QueueState(ctx, "hooks")
	require.NoError(t, err)
	require.Equal(t, "closed", st.State)
	require.InDelta(t, 3, *st.Tokens, 1e-9)
	require.True(t, st.NextClaimAt.IsZero())
	for range 5 {
		_, err := c.Enqueue(ctx, "hooks", nil)
		require.NoError(t, err)
	}
	jobs, err := c.Claim(ctx, "hooks", 10, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 3, "the burst")
	st, err = c.QueueState(ctx, "hooks")
	require.NoError(t, err)
	require.InDelta(t, 0, *st.Tokens, 1e-9)
	require.True(t, st.NextClaimAt.Equal(now.Add(500*time.Millisecond)), "next token at %s", st.NextClaimAt)

	// A failure is counted; the second opens the breaker until the
	// cooldown ends.
	_, err = c.Fail(ctx, jobs[0].ID, jobs[0].Token, "downstream 503")
	require.NoError(t, err)
	st, err = c.QueueState(ctx, "hooks")
	require.NoError(t, err)
	require.Equal(t, "closed", st.State)
	require.EqualValues(t, 1, st.Failures)
	_, err = c.Fail(ctx, jobs[1].ID, jobs[1].Token, "downstream 503")
	require.NoError(t, err)
	opened := now
	st, err = c.QueueState(ctx, "hooks")
	require.NoError(t, err)
	require.Equal(t, "open", st.State)
	require.True(t, st.OpenedAt.Equal(opened))
	require.True(t, st.NextClaimAt.Equal(opened.Add(30*time.Second)), "cooldown ends at %s", st.NextClaimAt)
	now = now.Add(10 * time.Second)
	jobs, err = c.Claim(ctx, "hooks", 10, 0)
	require.NoError(t, err)
	require.Empty(t, jobs, "open: nothing claimed")

	// After the cooldown: half open, one probe; its success closes it.
	now = opened.Add(30 * time.Second)
	st, err = c.QueueState(ctx, "hooks")
	require.NoError(t, err)
	require.Equal(t, "half_open", st.State)
	require.Equal(t, ptr(int32(1)), st.ProbesLeft)
	jobs, err = c.Claim(ctx, "hooks", 10, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one probe")
	_, err = c.Complete(ctx, jobs[0].ID, jobs[0].Token)
	require.NoError(t, err)
	st, err = c.QueueState(ctx, "hooks")
	require.NoError(t, err)
	require.Equal(t, "closed", st.State)
	require.True(t, st.OpenedAt.IsZero())
}

// claimCounter counts the claim and queue_state statements a pool sends,
// alone or in a batch (the client's READ COMMITTED batches in a database
// whose default is another level, docs/adr/0080).
type claimCounter struct{ claims, states atomic.Int64 }

func (cc *claimCounter) count(sql string) {
	switch {
	case strings.Contains(sql, "backoff.claim("):
		cc.claims.Add(1)
	case strings.Contains(sql, "backoff.queue_state("):
		cc.states.Add(1)
	}
}

func (cc *claimCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	cc.count(d.SQL)
	return ctx
}

func (*claimCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (cc *claimCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (cc *claimCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	cc.count(d.SQL)
}

func (*claimCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func countingPool(t *testing.T, url string) (*pgxpool.Pool, *claimCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cc := &claimCounter{}
	cfg.ConnConfig.Tracer = cc
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, cc
}

// notifyEvery sends a wake-up for queue every period until the test ends:
// a worker that claimed on every wake-up would claim that often.
func notifyEvery(t *testing.T, pool *pgxpool.Pool, queue string, period time.Duration) *atomic.Int64 {
	t.Helper()
	var sent atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", NotifyChannel, queue); err == nil {
					sent.Add(1)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &sent
}

// A rate-limited queue is worked at about its rate, and the worker waits
// for the next token instead of claiming on every wake-up: notifications
// arrive every 5 ms and the poll interval is an hour, so only the timer
// the queue's state set can pace it, and the claims stay about two per
// token (the one that takes it and the one that finds the bucket empty).
func TestWorkerHonoursARateLimit(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	pool, cc := countingPool(t, url)
	c := newTestClient(t, pool)
	ctx := context.Background()
	const n, rate = 15, 10.0
	setControls(t, pool, "paced", "rate = 10, burst = 1")
	jobs := make([]NewJob, n)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "paced"}
	}
	_, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)

	var mu sync.Mutex
	var started []time.Time
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "paced", Concurrency: 4, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			mu.Lock()
			started = append(started, *job.LastAttemptedAt) // the claim's time, on the database's clock
			mu.Unlock()
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	sent := notifyEvery(t, pool, "paced", 5*time.Millisecond)
	before := cc.claims.Load()
	start := time.Now()
	stop := startWorker(t, w)
	eventually(t, time.Minute, "every job completed", func() bool { return countStatus(t, pool, StatusCompleted) == n })
	took := time.Since(start)
	stop()
	claims, states := cc.claims.Load()-before, cc.states.Load()
	t.Logf("%d jobs at %v/s: %s, %d claims, %d queue_state calls, %d notifications", n, rate, took, claims, states, sent.Load())

	// The first job takes the full bucket; the other n-1 wait a token each.
	minimum := time.Duration(float64(n-1) / rate * float64(time.Second))
	require.GreaterOrEqual(t, took, minimum-50*time.Millisecond, "faster than the rate")
	require.Less(t, took, 2*minimum+time.Second, "much slower than the rate")
	mu.Lock()
	slices.SortFunc(started, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(started); i++ {
		require.GreaterOrEqual(t, started[i].Sub(started[0]), time.Duration(float64(i)/rate*float64(time.Second))-time.Millisecond,
			"job %d claimed ahead of its token", i)
	}
	mu.Unlock()
	// About two claims a job (one that waits for its token, one that takes
	// it), with room for a wake-up that races a token on a loaded machine;
	// a loop that claimed on every notification would make hundreds.
	require.LessOrEqual(t, claims, int64(3*n), "claims in a tight loop (notifications sent: %d)", sent.Load())
	require.Greater(t, sent.Load(), 2*claims, "the notifications were not frequent enough to tell")
	requireNoneRunning(t, pool)
}

// An open breaker stops claims until its cooldown ends, on an injected
// clock: the worker polls every 20 ms and is notified every 5 ms, yet
// claims nothing while the breaker is open; when the clock passes the
// cooldown the next poll claims the probe, whose success closes the
// breaker, and the rest of the queue runs.
func TestWorkerWaitsOutAnOpenBreaker(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	pool, cc := countingPool(t, url)
	var clock atomic.Int64
	clock.Store(time.Now().UnixMicro())
	now := func() time.Time { return time.UnixMicro(clock.Load()) }
	c := newTestClient(t, pool, WithClock(now))
	ctx := context.Background()
	setControls(t, pool, "fragile", "breaker_failures = 2, breaker_window = '1 minute', breaker_cooldown = '1 hour', breaker_probes = 1")
	for range 6 {
		_, err := c.Enqueue(ctx, "fragile", nil)
		require.NoError(t, err)
	}

	var down atomic.Bool
	down.Store(true)
	var ran, failed atomic.Int64
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "fragile", Concurrency: 1, PollInterval: 20 * time.Millisecond, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			ran.Add(1)
			if down.Load() {
				failed.Add(1)
				return errors.New("downstream 503")
			}
			return nil
		},
	}, WithLogger(testLogger(t)), WithClock(now))
	require.NoError(t, err)
	notifyEvery(t, pool, "fragile", 5*time.Millisecond)
	stop := startWorker(t, w)

	eventually(t, time.Minute, "the breaker opened", func() bool {
		st, err := c.QueueState(ctx, "fragile")
		require.NoError(t, err)
		return st.State == "open"
	})
	// Let the worker see the open breaker, then count: nothing may be
	// claimed for a while although wake-ups keep coming.
	eventually(t, time.Minute, "the worker read the open state", func() bool { return cc.states.Load() > 0 })
	time.Sleep(100 * time.Millisecond)
	claims := cc.claims.Load()
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, claims, cc.claims.Load(), "claims while the breaker is open")
	require.EqualValues(t, 2, failed.Load(), "attempts ran while the breaker was open")

	// The cooldown passes on the injected clock (the two failed jobs come
	// due too); the downstream is back.
	down.Store(false)
	clock.Add((time.Hour + time.Second).Microseconds())
	eventually(t, time.Minute, "the queue ran after the cooldown", func() bool {
		return countStatus(t, pool, StatusCompleted) == 6
	})
	st, err := c.QueueState(ctx, "fragile")
	require.NoError(t, err)
	require.Equal(t, "closed", st.State)
	stop()
	require.EqualValues(t, 8, ran.Load())
	requireNoneRunning(t, pool)
}

// A held queue ends its idle registration: enqueuers need not notify a
// queue whose wake-ups are ignored. The worker registers on an empty
// rate-limited queue, a backlog arrives, and once the bucket is empty the
// registration is gone while jobs still wait; when the backlog is done the
// worker registers again.
func TestWorkerHeldQueueStopsWaiting(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	setControls(t, pool, "slow", "rate = 5, burst = 1")
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "slow", Concurrency: 2, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error { return nil },
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	startWorker(t, w)
	waiting := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'slow'").Scan(&n))
		return n
	}
	eventually(t, time.Minute, "registered as waiting on the empty queue", func() bool { return waiting() == 1 })
	jobs := make([]NewJob, 6)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "slow"}
	}
	_, err = c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)
	eventually(t, time.Minute, "held with a backlog and not registered", func() bool {
		return waiting() == 0 && countStatus(t, pool, StatusPending) > 0
	})
	eventually(t, time.Minute, "backlog done", func() bool { return countStatus(t, pool, StatusCompleted) == 6 })
	eventually(t, time.Minute, "registered again once idle", func() bool { return waiting() == 1 })
	requireNoneRunning(t, pool)
}

// A half-open breaker with its probe out has no end time: the worker waits
// for the probe's result, not for wake-ups. Notifications every 5 ms and an
// hour's poll: while the probe runs, the worker claims nothing; the
// probe's success closes the breaker and its freed slot claims the rest.
func TestWorkerWaitsForTheProbe(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	pool, cc := countingPool(t, url)
	var clock atomic.Int64
	clock.Store(time.Now().UnixMicro())
	now := func() time.Time { return time.UnixMicro(clock.Load()) }
	c := newTestClient(t, pool, WithClock(now))
	ctx := context.Background()
	setControls(t, pool, "probed", "breaker_failures = 1, breaker_window = '1 minute', breaker_cooldown = '1 hour'")
	_, err := c.Enqueue(ctx, "probed", nil)
	require.NoError(t, err)
	var calls atomic.Int64
	probing := make(chan struct{})
	release := make(chan struct{})
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "probed", Concurrency: 3, BatchSize: 1, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			switch calls.Add(1) {
			case 1:
				return errors.New("downstream 503")
			case 2:
				close(probing)
				<-release
			}
			return nil
		},
	}, WithLogger(testLogger(t)), WithClock(now))
	require.NoError(t, err)
	notifyEvery(t, pool, "probed", 5*time.Millisecond)
	stop := startWorker(t, w)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		stop()
	}()
	eventually(t, time.Minute, "the breaker opened", func() bool {
		st, err := c.QueueState(ctx, "probed")
		require.NoError(t, err)
		return st.State == "open"
	})
	// Three more jobs wait while the breaker is open.
	for range 3 {
		_, err := c.Enqueue(ctx, "probed", nil)
		require.NoError(t, err)
	}
	clock.Add((time.Hour + time.Second).Microseconds())
	select {
	case <-probing:
	case <-time.After(time.Minute):
		t.Fatal("no probe after the cooldown")
	}
	time.Sleep(100 * time.Millisecond) // the claims that find the probe out
	st, err := c.QueueState(ctx, "probed")
	require.NoError(t, err)
	require.Equal(t, "half_open", st.State)
	require.Equal(t, ptr(int32(0)), st.ProbesLeft)
	claims := cc.claims.Load()
	time.Sleep(300 * time.Millisecond)
	require.LessOrEqual(t, cc.claims.Load()-claims, int64(1), "claims while the probe runs")
	close(release)
	eventually(t, time.Minute, "the rest ran after the probe", func() bool { return countStatus(t, pool, StatusCompleted) == 4 })
	require.EqualValues(t, 5, calls.Load())
	requireNoneRunning(t, pool)
}
