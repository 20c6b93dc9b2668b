package client

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestWorkerServesManyQueues: one Worker, three queues, each with its own
// handler and concurrency; every job runs on its own queue's handler, and
// no queue runs more handlers at once than its Concurrency.
func TestWorkerServesManyQueues(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	var jobs []NewJob
	for _, q := range []string{"a", "b", "c"} {
		for range 30 {
			jobs = append(jobs, NewJob{Queue: q, Payload: map[string]string{"q": q}})
		}
	}
	_, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)

	var mu sync.Mutex
	ran := map[string]int{}
	running := map[string]int{}
	peak := map[string]int{}
	handler := func(name string) Handler {
		return func(ctx context.Context, job *Job) error {
			var p struct{ Q string }
			require.NoError(t, job.UnmarshalPayload(&p))
			mu.Lock()
			require.Equal(t, name, p.Q, "a job of queue %q ran on the handler of %q", p.Q, name)
			require.Equal(t, name, job.Queue)
			ran[name]++
			running[name]++
			peak[name] = max(peak[name], running[name])
			mu.Unlock()
			time.Sleep(time.Millisecond) // let handlers overlap
			mu.Lock()
			running[name]--
			mu.Unlock()
			return nil
		}
	}
	w, err := NewWorker(pool, WorkerConfig{
		Queues: []QueueConfig{
			{Queue: "a", Handler: handler("a"), Concurrency: 1},
			{Queue: "b", Handler: handler("b"), Concurrency: 4, BatchSize: 2},
			{Queue: "c", Handler: handler("c"), Concurrency: 8},
		},
		PollInterval: time.Hour, ReapInterval: -1,
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "all 90 jobs completed", func() bool { return countStatus(t, pool, StatusCompleted) == 90 })
	stop()
	require.Equal(t, map[string]int{"a": 30, "b": 30, "c": 30}, ran)
	require.Equal(t, 1, peak["a"])
	require.LessOrEqual(t, peak["b"], 4)
	require.LessOrEqual(t, peak["c"], 8)
	requireNoneRunning(t, pool)
}

func TestNewWorkerRefusesBadConfigurations(t *testing.T) {
	t.Parallel()
	h := func(context.Context, *Job) error { return nil }
	for name, cfg := range map[string]WorkerConfig{
		"heartbeat equal to the lease":  {Queue: "q", Handler: h, Lease: time.Second, HeartbeatInterval: time.Second},
		"heartbeat longer than a lease": {Queue: "q", Handler: h, Lease: time.Second, HeartbeatInterval: 2 * time.Second},
		"heartbeat of a queue":          {Queues: []QueueConfig{{Queue: "q", Handler: h, Lease: time.Second, HeartbeatInterval: time.Minute}}},
		"both forms":                    {Queue: "q", Handler: h, Queues: []QueueConfig{{Queue: "r", Handler: h}}},
		"a queue twice":                 {Queues: []QueueConfig{{Queue: "q", Handler: h}, {Queue: "q", Handler: h}}},
		"no handler":                    {Queues: []QueueConfig{{Queue: "q"}}},
		"no queue":                      {Handler: h},
		"negative lease":                {Queue: "q", Handler: h, Lease: -time.Second},
	} {
		_, err := NewWorker(nil, cfg)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	_, err := NewWorker(nil, WorkerConfig{Queue: "q", Handler: h, Lease: time.Second, HeartbeatInterval: 300 * time.Millisecond})
	require.NoError(t, err, "a heartbeat shorter than the lease")
}

// TestNewWorkerRefusesASmallPool: four queues need four claims, the
// completer and the reaper at once: six connections.
func TestNewWorkerRefusesASmallPool(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?pool_max_conns=4")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily: never here
	require.NoError(t, err)
	defer pool.Close()
	h := func(context.Context, *Job) error { return nil }
	four := WorkerConfig{Queues: []QueueConfig{{Queue: "a", Handler: h}, {Queue: "b", Handler: h}, {Queue: "c", Handler: h}, {Queue: "d", Handler: h}}}
	require.Equal(t, 6, ConnectionsNeeded(four))
	_, err = NewWorker(pool, four)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "the pool allows 4 connections, this worker needs at least 6")
	one := WorkerConfig{Queue: "a", Handler: h}
	require.Equal(t, 3, ConnectionsNeeded(one))
	_, err = NewWorker(pool, one)
	require.NoError(t, err)
}

type email struct {
	To string `json:"to"`
}

// TestHandlerFor: a typed handler gets the decoded payload; a payload that
// does not decode into the type is dead-lettered at once (non-retryable),
// with an error naming the job and the type.
func TestHandlerFor(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	good, err := c.Enqueue(ctx, "typed", email{To: "ada@example.com"})
	require.NoError(t, err)
	bad, err := c.Enqueue(ctx, "typed", map[string]int{"to": 42})
	require.NoError(t, err)
	var got atomic.Value
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "typed", ReapInterval: -1,
		Handler: HandlerFor(func(ctx context.Context, job *Job, e email) error {
			got.Store(e.To)
			return nil
		}),
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "both settled", func() bool {
		return countStatus(t, pool, StatusCompleted) == 1 && countStatus(t, pool, StatusDeadLettered) == 1
	})
	stop()
	require.Equal(t, "ada@example.com", got.Load())
	j, err := c.Get(ctx, good)
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, j.Status)
	j, err = c.Get(ctx, bad)
	require.NoError(t, err)
	require.Equal(t, StatusDeadLettered, j.Status)
	require.Equal(t, "non_retryable", j.DeadLetterReason)
	require.Contains(t, j.LastError, "decode payload of job")
	require.Contains(t, j.LastError, "client.email")
}

// TestClaimBatchSurvivesAnUndecodableHistory: a history timestamp past year
// 9999 (jsonb holds any text) cannot be a Go time.Time from JSON; the job
// still comes back in its claim batch, with that entry's At left zero, and
// the rest of the batch is unharmed.
func TestClaimBatchSurvivesAnUndecodableHistory(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	var ids []int64
	for range 3 {
		id, err := c.Enqueue(ctx, "odd", nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	_, err := pool.Exec(ctx, `UPDATE backoff.jobs SET errors = '[{"attempt": 1, "at": "10000-01-01T00:00:00Z", "error": "from the far future", "kind": "error"}]' WHERE id = $1`, ids[1])
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "odd", 10, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	for _, j := range jobs {
		if j.ID == ids[1] {
			require.Len(t, j.Errors, 1)
			require.Equal(t, "from the far future", j.Errors[0].Error)
			require.Equal(t, 1, j.Errors[0].Token)
			require.True(t, j.Errors[0].At.IsZero())
		}
	}
}

// TestHandlerErrorWithNULAndInvalidUTF8: PostgreSQL refuses NUL and
// invalid UTF-8 in text; the worker records the error cleaned, and a
// Permanent one still dead-letters instead of leaving the job running.
func TestHandlerErrorWithNULAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	perm, err := c.Enqueue(ctx, "dirty", map[string]bool{"permanent": true})
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "dirty", map[string]bool{"permanent": false})
	require.NoError(t, err)
	now := time.Now()
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "dirty", ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			var p struct{ Permanent bool }
			_ = job.UnmarshalPayload(&p)
			e := errors.New("bad\x00byte and \xff\xfe invalid")
			if p.Permanent {
				return Permanent(e)
			}
			return e
		},
	}, WithLogger(testLogger(t)), WithClock(func() time.Time { return now })) // still: the retry never comes due
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "both failed", func() bool {
		return countStatus(t, pool, StatusDeadLettered) == 1 && countStatus(t, pool, StatusRetrying) == 1
	})
	stop()
	for id, status := range map[int64]Status{perm: StatusDeadLettered, plain: StatusRetrying} {
		j, err := c.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, status, j.Status)
		require.Contains(t, j.LastError, "bad\uFFFDbyte and \uFFFD")
		require.NotContains(t, j.LastError, "\x00")
	}
	requireNoneRunning(t, pool)
}

func TestCleanErrorText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "plain", CleanErrorText("plain"))
	require.Equal(t, "a\uFFFDb\uFFFDc", CleanErrorText("a\x00b\xffc"))
	long := strings.Repeat("é", 1<<16)
	cut := CleanErrorText(long)
	require.LessOrEqual(t, len(cut), sqlapi.MaxErrorText, "capped as the database caps it")
	require.True(t, strings.HasSuffix(cut, " [truncated: 131072 bytes]"), cut[len(cut)-40:])
	require.True(t, utf8.ValidString(cut), "cut at a character boundary")
}

// TestEnqueueManyRefusesValuesOutsideInt32, as Enqueue does, instead of
// wrapping them into another priority or attempt limit.
func TestEnqueueManyRefusesValuesOutsideInt32(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	for _, j := range []NewJob{
		{Queue: "q", Priority: math.MaxInt32 + 1},
		{Queue: "q", Priority: math.MinInt32 - 1},
		{Queue: "q", MaxAttempts: math.MaxInt32 + 1},
		{Queue: "q", MaxAttempts: 1 << 32}, // wraps to 0, which would mean "the policy's"
	} {
		_, err := c.EnqueueMany(ctx, []NewJob{{Queue: "q"}, j})
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", j)
		_, err = c.Enqueue(ctx, j.Queue, nil, Priority(j.Priority), MaxAttempts(j.MaxAttempts))
		require.Error(t, err, "Enqueue refuses it too: %+v", j)
	}
	require.Zero(t, countStatus(t, pool, StatusPending), "nothing was added")
}

// TestEnqueueRefusesPriorityOutsideRange: the database refuses a priority
// outside MinPriority..MaxPriority, and the client says ErrInvalidArgument.
func TestEnqueueRefusesPriorityOutsideRange(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	for _, p := range []int{MaxPriority + 1, MinPriority - 1} {
		_, err := c.Enqueue(ctx, "q", nil, Priority(p))
		require.ErrorIs(t, err, ErrInvalidArgument, "priority %d", p)
		_, err = c.EnqueueMany(ctx, []NewJob{{Queue: "q"}, {Queue: "q", Priority: p}})
		require.ErrorIs(t, err, ErrInvalidArgument, "priority %d", p)
	}
	for _, p := range []int{MaxPriority, MinPriority} {
		_, err := c.Enqueue(ctx, "q", nil, Priority(p))
		require.NoError(t, err, "priority %d", p)
	}
}

// TestBusyWorkerSendsNoNotify: a worker whose queue has a backlog never
// registers as waiting, so enqueues send no notification (ADR 0027);
// once it has drained the queue it registers, and the next enqueue wakes
// it although polling is an hour away.
func TestBusyWorkerSendsNoNotify(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	pool := testdb.Pool(t, url)
	c := newTestClient(t, pool)
	ctx := context.Background()
	for range 4 {
		_, err := c.Enqueue(ctx, "busy", nil)
		require.NoError(t, err)
	}
	listener, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, "LISTEN "+NotifyChannel)
	require.NoError(t, err)

	release := make(chan struct{})
	var started atomic.Int64
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "busy", Concurrency: 2, PollInterval: time.Hour, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			started.Add(1)
			<-release
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		stop()
	}()
	eventually(t, time.Minute, "both slots busy", func() bool { return started.Load() == 2 })
	for range 10 {
		_, err := c.Enqueue(ctx, "busy", nil)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, "SELECT pg_notify($1, 'sentinel')", NotifyChannel)
	require.NoError(t, err)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	n, err := listener.WaitForNotification(waitCtx)
	cancel()
	require.NoError(t, err)
	require.Equal(t, "sentinel", n.Payload, "a busy worker's queue sent a notification")
	var waiting int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.waiting_workers").Scan(&waiting))
	require.Zero(t, waiting)

	close(release)
	eventually(t, time.Minute, "backlog drained", func() bool { return countStatus(t, pool, StatusCompleted) == 14 })
	eventually(t, time.Minute, "registered as waiting once idle", func() bool {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'busy'").Scan(&waiting))
		return waiting == 1
	})
	_, err = c.Enqueue(ctx, "busy", nil)
	require.NoError(t, err)
	waitCtx, cancel = context.WithTimeout(ctx, 10*time.Second)
	n, err = listener.WaitForNotification(waitCtx)
	cancel()
	require.NoError(t, err)
	require.Equal(t, "busy", n.Payload, "an idle worker's queue is notified")
	eventually(t, time.Minute, "the new job ran without waiting for the hourly poll", func() bool {
		return countStatus(t, pool, StatusCompleted) == 15
	})
}
