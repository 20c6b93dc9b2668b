package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The Worker is built in parts, one file each (docs/adr/0026-worker-runner.md):
//
//   - worker.go: configuration, Run and the shutdown that ties the parts;
//   - producer.go: one producer per queue claims jobs into free slots;
//   - executor.go: runs one handler with its lease, heartbeats and panics;
//   - outcome.go: what a handler's error means, read in one place, and the
//     settle calls that record it;
//   - completer.go: completions of every queue batched into CompleteMany;
//   - notifier.go: one LISTEN connection and the idle registrations that
//     make enqueue notify only when a worker waits;
//   - reaper.go: expired leases of crashed workers.

// NotifyChannel is the channel backoff.enqueue notifies, with the queue's
// name as the payload, when a worker has registered that it waits for that
// queue (backoff.wait_for_jobs); workers LISTEN on it to wake up at once.
const NotifyChannel = "backoff_jobs"

// Errors a handler's context can be cancelled with; read them with
// context.Cause(ctx).
var (
	// ErrLeaseLost: the database refused a heartbeat because the attempt is
	// no longer the job's running attempt (reaped, re-claimed or cancelled).
	// Whatever the handler does now cannot settle the job.
	ErrLeaseLost = errors.New("pgbackoff: lease lost")
	// ErrLeaseExpired: the lease ran out without a successful heartbeat
	// (heartbeats disabled, or the database unreachable).
	ErrLeaseExpired = errors.New("pgbackoff: lease expired")
	// ErrWorkerShutdown: the worker is shutting down and the shutdown
	// timeout has passed; the handler should return now.
	ErrWorkerShutdown = errors.New("pgbackoff: worker shutdown")
)

// Handler runs one attempt of a job. Its error decides the job's fate (see
// Permanent, RetryAfter, Snooze). ctx is cancelled when the lease is lost
// or expires, or at the end of a shutdown's grace period: a handler must
// return promptly when it is.
type Handler func(ctx context.Context, job *Job) error

// QueueConfig is one queue a Worker serves: its handler and how many of its
// jobs run at once. Only Queue and Handler are required.
type QueueConfig struct {
	Queue   string
	Handler Handler
	// Concurrency is how many handlers of this queue run at once
	// (default 10).
	Concurrency int
	// BatchSize caps how many jobs one claim takes (default Concurrency).
	BatchSize int
	// Lease is the lease each claim and heartbeat asks for (0: the
	// policy's lease).
	Lease time.Duration
	// HeartbeatInterval is how often a running attempt's lease is
	// extended (default: a third of the lease; negative: never, and the
	// handler's context then has the lease as its deadline). It must be
	// shorter than Lease.
	HeartbeatInterval time.Duration
}

// WorkerConfig configures a Worker. Either Queue and Handler (one queue:
// the simple case, with Concurrency, BatchSize, Lease and
// HeartbeatInterval as in QueueConfig) or Queues (several queues, each with
// its own handler and limits) is required, not both.
type WorkerConfig struct {
	Queue             string
	Handler           Handler
	Concurrency       int
	BatchSize         int
	Lease             time.Duration
	HeartbeatInterval time.Duration

	// Queues are the queues of a Worker that serves several. They share
	// one LISTEN connection, one reaper and one batched completer.
	Queues []QueueConfig

	// PollInterval is how often the worker looks at its idle queues when no
	// notification woke them: retries coming due, jobs whose run_at has
	// come, a missed wake-up (default 1s). It bounds how late a job can
	// start. One look (backoff.next_work) covers every idle queue, the
	// schedules and the leases (docs/adr/0083); without a maintenance loop
	// (ReapInterval and ScheduleInterval negative) each idle queue polls
	// with a claim of its own.
	PollInterval time.Duration
	// ReapInterval is how often this worker reaps expired leases and
	// rotates the segments the live jobs are stored in (backoff.rotate,
	// docs/adr/0061) while jobs flow (default 5s; negative: never, when
	// something else runs backoff.reap and backoff.rotate, e.g. backoffctl
	// cron install). Idle, the look reaps when a lease has expired and
	// rotates when a segment has rows to move, and both run once every
	// 30s; the look runs at least every ReapInterval, so an expired lease
	// is reaped within it.
	ReapInterval time.Duration
	// ScheduleInterval bounds how late this worker fires a periodic job
	// that came due (backoff.fire_schedules, docs/schedules.md; default 1s;
	// negative: never, when pg_cron or another process fires them): the
	// look runs at least that often and fires when a slot is due (and once
	// every 30s, which keeps backoff.liveness's fire time fresh). Any
	// number of workers may fire: each slot is enqueued once. It shares the
	// reaper's connection.
	ScheduleInterval time.Duration
	// ShutdownTimeout is how long shutdown waits for running handlers
	// before cancelling them (default 30s). See Run.
	ShutdownTimeout time.Duration
	// DisableListen turns LISTEN/NOTIFY off: the worker only polls.
	DisableListen bool
	// DirectShards: the pool is a router's (docs/sharding.md), and the
	// Worker calls the shards directly instead of through it
	// (docs/adr/0093-workers-call-shards-directly.md). It reads the
	// router's layout and the shards' addresses (backoff.router_shards(),
	// host, port and dbname) once and opens a pool per shard it needs, with
	// the router pool's user, password, TLS and pool settings at the
	// shard's address. Claims go to each queue's shard, settling calls to
	// the shard in the job's id, and it LISTENs on its queues' shards, so
	// it wakes on enqueue; maintenance (reap, rotate, fire_schedules, the
	// idle look) stays through the router. It follows a queue moved to
	// another shard within seconds. The shards must accept the login from
	// the worker's host (pg_hba). Run fails, wrapping ErrInvalidArgument,
	// when the pool is not a router's.
	DirectShards bool
}

// Worker claims jobs of one or more queues and runs them with their
// handlers. Create it with NewWorker and run it with Run.
type Worker struct {
	pool  *pgxpool.Pool
	cfg   WorkerConfig
	opts  []Option
	queue []QueueConfig // normalised, one per producer

	c        *Client
	log      *slog.Logger
	failures *failureSummary
	// summaryEvery is failureSummaryInterval; a test sets it longer than
	// itself to see only the summary flushed when Run returns.
	summaryEvery time.Duration
	producers    []*producer
	completer    *completer
	notifier     *notifier
	direct       *direct // DirectShards: the shards' clients; nil otherwise
	handlers     sync.WaitGroup

	mu       sync.Mutex
	attempts map[int64]*attempt

	// The idle Worker's look (look.go): lookOff once the schema turned out
	// to have no backoff.next_work, lookFailed while looks fail (the
	// maintenance loop's own), claims counts the claims that found jobs
	// (busy or idle).
	lookOff    atomic.Bool
	lookFailed bool
	claims     atomic.Int64
	// newTicker makes the maintenance loop's tickers, newPollTicker the
	// producers' polls, and stepped is called
	// after each of its steps: a test drives the loop with them (nil: real
	// tickers, nothing called).
	newTicker     func(time.Duration) ticker
	newPollTicker func(time.Duration) ticker // the producers' polls
	stepped       func()
}

// ConnectionsNeeded is how many connections of its pool a Worker with this
// configuration uses at once at most: one claim per queue, the completer
// and the maintenance loop (reaping and firing schedules, one at a time). Settle calls and heartbeats share them and wait for a
// free one. The LISTEN connection is not counted: it is taken from the pool
// once and leaves it for good (the pool may open another in its place), so
// the server sees one connection more than the pool's. With DirectShards
// each shard pool (of the router pool's MaxConns) serves its part of these,
// and each shard of the Worker's queues sees one LISTEN connection more.
func ConnectionsNeeded(cfg WorkerConfig) int {
	n := len(cfg.Queues)
	if n == 0 {
		n = 1
	}
	n++ // completer
	if cfg.ReapInterval >= 0 || cfg.ScheduleInterval >= 0 {
		n++
	}
	return n
}

// NewWorker prepares a worker on pool. The pool serves the calls and, for
// LISTEN, lends the worker one dedicated connection while it runs. A pool
// whose MaxConns is below ConnectionsNeeded is refused. opts are the
// Client's options (clock, logger, meter provider, worker id).
func NewWorker(pool *pgxpool.Pool, cfg WorkerConfig, opts ...Option) (*Worker, error) {
	queues := cfg.Queues
	if len(queues) == 0 {
		queues = []QueueConfig{{Queue: cfg.Queue, Handler: cfg.Handler, Concurrency: cfg.Concurrency,
			BatchSize: cfg.BatchSize, Lease: cfg.Lease, HeartbeatInterval: cfg.HeartbeatInterval}}
	} else if cfg.Queue != "" || cfg.Handler != nil {
		return nil, fmt.Errorf("new worker: %w: set Queue and Handler, or Queues, not both", ErrInvalidArgument)
	}
	seen := map[string]bool{}
	norm := make([]QueueConfig, len(queues))
	for i, q := range queues {
		if q.Queue == "" {
			return nil, fmt.Errorf("new worker: %w: empty queue", ErrInvalidArgument)
		}
		if seen[q.Queue] {
			return nil, fmt.Errorf("new worker: %w: queue %q given twice", ErrInvalidArgument, q.Queue)
		}
		seen[q.Queue] = true
		if q.Handler == nil {
			return nil, fmt.Errorf("new worker for %q: %w: nil handler", q.Queue, ErrInvalidArgument)
		}
		if q.Concurrency <= 0 {
			q.Concurrency = 10
		}
		if q.BatchSize <= 0 || q.BatchSize > q.Concurrency {
			q.BatchSize = q.Concurrency
		}
		if q.Lease < 0 {
			return nil, fmt.Errorf("new worker for %q: %w: negative lease %s", q.Queue, ErrInvalidArgument, q.Lease)
		}
		if q.Lease > 0 && q.HeartbeatInterval >= q.Lease {
			return nil, fmt.Errorf("new worker for %q: %w: heartbeat interval %s must be shorter than the lease %s",
				q.Queue, ErrInvalidArgument, q.HeartbeatInterval, q.Lease)
		}
		norm[i] = q
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = 5 * time.Second
	}
	if cfg.ScheduleInterval == 0 {
		cfg.ScheduleInterval = time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if pool != nil {
		if need, have := ConnectionsNeeded(cfg), int(pool.Config().MaxConns); have < need {
			return nil, fmt.Errorf("new worker: %w: the pool allows %d connections, this worker needs at least %d "+
				"(%d queues' claims, the completer%s); raise MaxConns (pool_max_conns)",
				ErrInvalidArgument, have, need, len(norm),
				map[bool]string{true: ", the reaper"}[cfg.ReapInterval > 0 || cfg.ScheduleInterval > 0])
		}
	}
	return &Worker{pool: pool, cfg: cfg, opts: opts, queue: norm, attempts: map[int64]*attempt{},
		summaryEvery: failureSummaryInterval}, nil
}

// Run checks the schema, then claims and runs jobs until ctx is cancelled.
// It then stops claiming and waits up to ShutdownTimeout for running
// handlers; it cancels those still running (context.Cause:
// ErrWorkerShutdown), and a handler that returns then has its job failed
// as retryable, due at once. A handler that ignores its context keeps its
// job: the worker goes on extending its lease and Run does not return until
// that handler has returned and its outcome is recorded, so the job never
// runs elsewhere while it still runs here. (A process that exits earlier
// takes the handler with it; its lease then expires and the reaper retries
// the job.) Run returns nil after a shutdown. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	c, err := New(ctx, w.pool, w.opts...)
	if err != nil {
		return fmt.Errorf("run worker for %s: %w", w.names(), err)
	}
	w.c = c
	if w.cfg.DirectShards {
		if w.direct, err = newDirect(ctx, w); err != nil {
			return err
		}
		defer w.direct.close()
	}
	w.log = c.cfg.logger.With("worker", c.cfg.workerID)
	w.failures = newFailureSummary(time.Now())
	w.completer = newCompleter(w)
	w.notifier = newNotifier(w)
	for i := range w.queue {
		w.producers = append(w.producers, newProducer(w, w.queue[i]))
	}

	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	background.Add(1)
	go func() { defer background.Done(); w.completer.run() }()
	if !w.cfg.DisableListen {
		background.Add(1)
		go func() { defer background.Done(); w.notifier.listen(bg) }()
	}
	if w.cfg.ReapInterval > 0 || w.cfg.ScheduleInterval > 0 {
		background.Add(1)
		go func() { defer background.Done(); w.maintain(bg) }()
	}
	background.Add(1)
	go func() { defer background.Done(); w.summarizeFailures(bg) }()
	if w.direct != nil {
		background.Add(1)
		go func() { defer background.Done(); w.direct.follow(bg) }()
	}
	w.log.Info("worker started", "queues", w.queueNames())

	var producing sync.WaitGroup
	for _, p := range w.producers {
		producing.Add(1)
		go func() { defer producing.Done(); p.run(ctx) }()
	}
	producing.Wait()

	w.shutdown()
	w.notifier.unregisterAll(context.WithoutCancel(ctx))
	stopBackground()
	w.completer.stop()
	background.Wait()
	w.failures.flush(w.log, time.Now()) // the failures since the last summary
	w.log.Info("worker stopped")
	return nil
}

// queueNames lists the worker's queues for its log lines: a list
// attribute, queues=[alpha beta].
func (w *Worker) queueNames() []string {
	names := make([]string, len(w.queue))
	for i, q := range w.queue {
		names[i] = q.Queue
	}
	return names
}

// summarizeFailures logs the failed attempts of each queue every
// failureSummaryInterval (failures.go) until ctx ends.
func (w *Worker) summarizeFailures(ctx context.Context) {
	t := time.NewTicker(w.summaryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			w.failures.flush(w.log, now)
		}
	}
}

// names names the worker's queues in its errors.
func (w *Worker) names() string {
	if len(w.queue) == 1 {
		return fmt.Sprintf("%q", w.queue[0].Queue)
	}
	s := ""
	for i, q := range w.queue {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", q.Queue)
	}
	return "queues " + s
}

// signal sends on a one-slot channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// shutdown waits for running handlers, cancels those left after the grace
// period, and then waits for every one of them to return: a job whose
// handler still runs stays leased to this worker (its heartbeats go on).
func (w *Worker) shutdown() {
	if w.waitHandlers(w.cfg.ShutdownTimeout) {
		return
	}
	w.mu.Lock()
	left := make([]*attempt, 0, len(w.attempts))
	for _, a := range w.attempts {
		left = append(left, a)
	}
	w.mu.Unlock()
	w.log.Warn("shutdown timeout: cancelling running handlers", "running", len(left))
	for _, a := range left {
		a.cancel(ErrWorkerShutdown)
	}
	for !w.waitHandlers(10 * time.Second) {
		w.mu.Lock()
		ids := make([]int64, 0, len(w.attempts))
		for id := range w.attempts {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		w.log.Error("handlers ignore their cancelled context; their jobs stay leased to this worker until they return",
			"jobs", ids)
	}
}

// waitHandlers waits up to d for every handler goroutine to end.
func (w *Worker) waitHandlers(d time.Duration) bool {
	done := make(chan struct{})
	go func() { w.handlers.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
