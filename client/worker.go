package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyChannel is the channel backoff.enqueue notifies, with the queue's
// name as the payload; workers LISTEN on it to wake up at once.
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
	// timeout has passed; the job is failed as retryable.
	ErrWorkerShutdown = errors.New("pgbackoff: worker shutdown")
)

// Handler runs one attempt of a job. Its error decides the job's fate (see
// Permanent, RetryAfter, Snooze). ctx is cancelled when the lease is lost
// or expires, or at the end of a shutdown's grace period: a handler must
// return promptly when it is.
type Handler func(ctx context.Context, job *Job) error

// WorkerConfig configures a Worker. Only Queue and Handler are required.
type WorkerConfig struct {
	Queue   string
	Handler Handler
	// Concurrency is how many handlers run at once (default 10).
	Concurrency int
	// BatchSize caps how many jobs one claim takes (default Concurrency).
	// A batch that comes back full is followed by another claim at once.
	BatchSize int
	// Lease is the lease each claim and heartbeat asks for (0: the
	// policy's lease).
	Lease time.Duration
	// HeartbeatInterval is how often a running attempt's lease is
	// extended (default: a third of the lease; negative: never, and the
	// handler's context then has the lease as its deadline).
	HeartbeatInterval time.Duration
	// PollInterval is how often the worker looks for due jobs when no
	// notification woke it: retries coming due, missed notifications
	// (default 1s).
	PollInterval time.Duration
	// ReapInterval is how often this worker reaps expired leases (default
	// 5s; negative: never, when something else runs backoff.reap).
	ReapInterval time.Duration
	// ShutdownTimeout is how long shutdown waits for running handlers
	// before cancelling them and failing their jobs as retryable
	// (default 30s).
	ShutdownTimeout time.Duration
	// DisableListen turns LISTEN/NOTIFY off: the worker only polls.
	DisableListen bool
}

// Worker claims jobs of one queue and runs them with a handler. Create it
// with NewWorker and run it with Run.
type Worker struct {
	pool *pgxpool.Pool
	cfg  WorkerConfig
	opts []Option

	c        *Client
	log      *slog.Logger
	wake     chan struct{} // a notification or a reap: look for work now
	freed    chan struct{} // a handler slot became free
	inflight atomic.Int64
	handlers sync.WaitGroup

	mu       sync.Mutex
	attempts map[int64]*attempt

	completer *completer
}

// attempt is one claimed job being run.
type attempt struct {
	job     Job
	cancel  context.CancelCauseFunc
	settled atomic.Bool   // whoever sets it first settles the job
	done    chan struct{} // closed once the job is settled (or given up)
}

// NewWorker prepares a worker on pool. The pool serves the calls and, for
// LISTEN, lends the worker one dedicated connection while it runs. opts are
// the Client's options (clock, logger, meter provider, worker id).
func NewWorker(pool *pgxpool.Pool, cfg WorkerConfig, opts ...Option) (*Worker, error) {
	if cfg.Queue == "" {
		return nil, fmt.Errorf("new worker: %w: empty queue", ErrInvalidArgument)
	}
	if cfg.Handler == nil {
		return nil, fmt.Errorf("new worker for %q: %w: nil handler", cfg.Queue, ErrInvalidArgument)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	if cfg.BatchSize <= 0 || cfg.BatchSize > cfg.Concurrency {
		cfg.BatchSize = cfg.Concurrency
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = 5 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Lease < 0 {
		return nil, fmt.Errorf("new worker for %q: %w: negative lease %s", cfg.Queue, ErrInvalidArgument, cfg.Lease)
	}
	return &Worker{
		pool:     pool,
		cfg:      cfg,
		opts:     opts,
		wake:     make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		attempts: map[int64]*attempt{},
	}, nil
}

// Run checks the schema, then claims and runs jobs until ctx is cancelled.
// It then stops claiming, waits up to ShutdownTimeout for running handlers,
// cancels those still running (context.Cause: ErrWorkerShutdown) and fails
// their jobs as retryable with the error "worker shutdown", so no job is
// left running; then it returns nil. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	c, err := New(ctx, w.pool, w.opts...)
	if err != nil {
		return fmt.Errorf("run worker for %q: %w", w.cfg.Queue, err)
	}
	w.c = c
	w.log = c.cfg.logger.With("queue", w.cfg.Queue, "worker", c.cfg.workerID)
	w.completer = newCompleter(w)

	bg, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	background.Add(1)
	go func() { defer background.Done(); w.completer.run() }()
	if !w.cfg.DisableListen {
		background.Add(1)
		go func() { defer background.Done(); w.listen(bg) }()
	}
	if w.cfg.ReapInterval > 0 {
		background.Add(1)
		go func() { defer background.Done(); w.reapLoop(bg) }()
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "batch", w.cfg.BatchSize)

	w.claimLoop(ctx)

	w.shutdown(context.WithoutCancel(ctx))
	stopBackground()
	w.completer.stop()
	background.Wait()
	w.log.Info("worker stopped")
	return nil
}

// signal sends on a one-slot channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *Worker) claimLoop(ctx context.Context) {
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	more := true // look at once on start
	for ctx.Err() == nil {
		free := w.cfg.Concurrency - int(w.inflight.Load())
		if free > 0 && more {
			n := min(free, w.cfg.BatchSize)
			// Claim on a context that a shutdown does not cut: a claim
			// committed but never read would leave its jobs running until
			// the reaper comes.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			jobs, err := w.c.Claim(cctx, w.cfg.Queue, n, w.cfg.Lease)
			cancel()
			if err != nil {
				w.log.Error("claim failed", "err", err)
				more = false
			} else {
				for i := range jobs {
					w.start(ctx, jobs[i])
				}
				more = len(jobs) == n // a full batch: there may be more
				if more {
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-w.wake:
			more = true
		case <-poll.C:
			more = true
		case <-w.freed:
		}
	}
}

// start runs one claimed job in its own goroutine.
func (w *Worker) start(runCtx context.Context, job Job) {
	// The handler's context keeps runCtx's values but not its
	// cancellation: a shutdown lets running handlers finish first.
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(runCtx))
	a := &attempt{job: job, cancel: cancel, done: make(chan struct{})}
	w.mu.Lock()
	w.attempts[job.ID] = a
	w.mu.Unlock()
	w.inflight.Add(1)
	w.handlers.Add(1)
	go func() {
		defer func() {
			w.mu.Lock()
			delete(w.attempts, job.ID)
			w.mu.Unlock()
			w.inflight.Add(-1)
			w.handlers.Done()
			signal(w.freed)
		}()
		w.runAttempt(hctx, a)
	}()
}

func (w *Worker) runAttempt(hctx context.Context, a *attempt) {
	defer close(a.done)
	defer a.cancel(nil)
	job := &a.job
	lease := time.Duration(0)
	if job.LeaseUntil != nil {
		lease = job.LeaseUntil.Sub(w.c.clock())
	}
	if lease <= 0 {
		lease = w.cfg.Lease
	}
	if lease <= 0 {
		lease = 30 * time.Second
	}

	ctx := hctx
	stopHeartbeat := func() {}
	if w.cfg.HeartbeatInterval < 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(hctx, lease, ErrLeaseExpired)
		defer cancel()
	} else {
		every := w.cfg.HeartbeatInterval
		if every == 0 {
			every = lease / 3
		}
		stopHeartbeat = w.heartbeat(hctx, a, lease, every)
	}

	start := time.Now()
	err := w.callHandler(ctx, job)
	elapsed := time.Since(start)
	stopHeartbeat()

	if errors.Is(context.Cause(hctx), ErrLeaseLost) {
		w.c.cfg.metrics.handlerRan(hctx, job.Queue, "lease_lost", elapsed)
		w.log.Warn("handler finished after its lease was lost; result dropped",
			"job", job.ID, "attempt", job.Attempts, "err", err)
		a.settled.Store(true)
		return
	}
	if !a.settled.CompareAndSwap(false, true) {
		return // the shutdown has failed this job already
	}
	if err != nil && errors.Is(context.Cause(hctx), ErrWorkerShutdown) {
		// Cancelled by the shutdown: not the job's fault, so it is retried
		// at once elsewhere (the attempt, counted at claim, stays spent).
		err = RetryAfter(fmt.Errorf("worker shutdown: %w", err), 0)
	}
	w.settle(context.WithoutCancel(hctx), job, err, elapsed)
}

// callHandler runs the handler, turning a panic into an error that
// carries the panic value and the stack.
func (w *Worker) callHandler(ctx context.Context, job *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return w.cfg.Handler(ctx, job)
}

type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.value, e.stack)
}

// heartbeat extends the lease every interval until stopped. A refused
// heartbeat cancels the handler with ErrLeaseLost; a lease that runs out
// without a successful heartbeat cancels it with ErrLeaseExpired.
func (w *Worker) heartbeat(hctx context.Context, a *attempt, lease, every time.Duration) (stop func()) {
	watchdog := time.AfterFunc(lease, func() { a.cancel(ErrLeaseExpired) })
	quit := make(chan struct{})
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-hctx.Done():
				return
			case <-t.C:
			}
			// A heartbeat may take as long as a lease: later than that it
			// is useless anyway, and the watchdog will have fired.
			cctx, cancel := context.WithTimeout(hctx, lease)
			until, err := w.c.Heartbeat(cctx, a.job.ID, a.job.Attempts, w.cfg.Lease)
			cancel()
			switch {
			case err == nil:
				if left := until.Sub(w.c.clock()); left > 0 {
					watchdog.Reset(left)
				}
			case errors.Is(err, ErrStaleAttempt), errors.Is(err, ErrInvalidTransition), errors.Is(err, ErrJobNotFound):
				w.c.cfg.metrics.leaseLost(hctx, a.job.Queue)
				w.log.Warn("lease lost; cancelling the handler", "job", a.job.ID, "attempt", a.job.Attempts, "err", err)
				a.cancel(ErrLeaseLost)
				return
			default:
				if hctx.Err() == nil {
					w.log.Error("heartbeat failed; will retry", "job", a.job.ID, "err", err)
				}
			}
		}
	}()
	return func() {
		watchdog.Stop()
		close(quit)
		done.Wait()
	}
}

// settle records a handler's outcome in the database.
func (w *Worker) settle(ctx context.Context, job *Job, herr error, elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var (
		outcome string
		err     error
	)
	var pe *panicError
	switch {
	case herr == nil:
		outcome = "completed"
		w.c.cfg.metrics.handlerRan(ctx, job.Queue, outcome, elapsed)
		if w.completer.add(job.ID, job.Attempts) {
			return
		}
		err = w.retryTransient(ctx, func(ctx context.Context) error {
			_, err := w.c.Complete(ctx, job.ID, job.Attempts)
			return err
		})
	case errors.As(herr, &pe):
		outcome = "panic"
		w.log.Error("handler panicked", "job", job.ID, "attempt", job.Attempts, "panic", fmt.Sprint(pe.value))
		err = w.retryTransient(ctx, func(ctx context.Context) error {
			_, err := w.c.Fail(ctx, job.ID, job.Attempts, herr.Error())
			return err
		})
	default:
		if d, ok := SnoozeDelay(herr); ok {
			outcome = "snoozed"
			err = w.retryTransient(ctx, func(ctx context.Context) error {
				_, err := w.c.Snooze(ctx, job.ID, job.Attempts, d)
				return err
			})
			break
		}
		var opts []FailOption
		outcome = "failed"
		if IsPermanent(herr) {
			outcome = "permanent"
			opts = append(opts, NonRetryable())
		} else if d, ok := RetryAfterDelay(herr); ok {
			opts = append(opts, WithRetryIn(d))
		}
		var j Job
		err = w.retryTransient(ctx, func(ctx context.Context) error {
			var err error
			j, err = w.c.Fail(ctx, job.ID, job.Attempts, herr.Error(), opts...)
			return err
		})
		if err == nil {
			w.log.Info("job failed", "job", job.ID, "attempt", job.Attempts, "status", j.Status,
				"run_at", j.RunAt, "err", herr)
		}
	}
	if outcome != "completed" {
		w.c.cfg.metrics.handlerRan(ctx, job.Queue, outcome, elapsed)
	}
	w.settleError(ctx, job, outcome, err)
}

// settleTries bounds retryTransient: waits of 100 ms doubling give the
// database about 3 s to come back (a restart, a failover, a dropped
// connection) before the job is left to the reaper.
const settleTries = 6

// retryTransient runs a settle call (complete, complete_many, fail, snooze)
// and runs it again, up to settleTries times in all, while it fails with an
// error that says nothing about the job: the connection, not a refusal. The
// calls are fenced by the attempt, whose tokens never repeat (snooze and
// replay included: docs/adr/0020), so a repeat after a reply that was lost
// takes effect once or is refused with BK002/BK003, and never touches a
// later claim of the job; without the repeat a
// blip would leave the job running until its lease expires and the reaper
// counts a finished attempt as a crash (on the last attempt: a dead letter).
func (w *Worker) retryTransient(ctx context.Context, call func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := call(ctx)
		if err == nil || try == settleTries || !transient(err) || ctx.Err() != nil {
			return err
		}
		w.log.Warn("settle call failed; retrying", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// transient reports whether err may go away by itself: anything but an
// answer of the database about the call (its SQLSTATE), except the classes
// that mean the connection or the transaction, not the call, failed:
// 08 connection exception, 40 transaction rollback (deadlock,
// serialization), 53 insufficient resources, 57 operator intervention
// (server shutting down or starting).
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, context.DeadlineExceeded)
	}
	switch pgErr.Code[:2] {
	case "08", "40", "53", "57":
		return true
	}
	return false
}

func (w *Worker) settleError(ctx context.Context, job *Job, outcome string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrStaleAttempt), errors.Is(err, ErrInvalidTransition):
		w.c.cfg.metrics.leaseLost(ctx, job.Queue)
		w.log.Warn("job no longer ours; outcome dropped", "job", job.ID, "attempt", job.Attempts, "outcome", outcome, "err", err)
	default:
		// The lease will expire and the reaper will retry the job.
		w.log.Error("could not record the outcome; the reaper will retry the job", "job", job.ID, "outcome", outcome, "err", err)
	}
}

// shutdown waits for running handlers, then cancels and fails the rest.
func (w *Worker) shutdown(ctx context.Context) {
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
	// Handlers that honour their context return now and settle their own
	// job (a cancelled handler's error fails it as retryable); give them a
	// moment, then fail whatever is still running.
	w.waitHandlers(min(time.Second, w.cfg.ShutdownTimeout))
	for _, a := range left {
		if !a.settled.CompareAndSwap(false, true) {
			select {
			case <-a.done:
			case <-time.After(5 * time.Second):
			}
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := w.retryTransient(fctx, func(ctx context.Context) error {
			_, err := w.c.Fail(ctx, a.job.ID, a.job.Attempts, "worker shutdown", WithRetryIn(0))
			return err
		})
		cancel()
		w.settleError(ctx, &a.job, "shutdown", err)
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

// listen wakes the claim loop when backoff.enqueue notifies this queue. It
// holds one connection of the pool, and reconnects after an error; polling
// covers the gap.
func (w *Worker) listen(ctx context.Context) {
	retry := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := w.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("listen failed; polling until it reconnects", "err", err, "retry_in", retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(retry*2, 30*time.Second)
	}
}

func (w *Worker) listenOnce(ctx context.Context) error {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection to listen: %w", err)
	}
	// The connection leaves the pool for good: returned after LISTEN, it
	// would carry the subscription to its next user.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("listen %s: %w", NotifyChannel, err)
	}
	signal(w.wake) // anything enqueued before LISTEN took effect
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if n.Payload == w.cfg.Queue || n.Payload == "" {
			signal(w.wake)
		}
	}
}

func (w *Worker) reapLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := w.c.Reap(ctx, 0)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Error("reap failed", "err", err)
		case n > 0:
			w.log.Info("reaped expired leases", "jobs", n)
			signal(w.wake)
		}
	}
}

// completer batches completions into CompleteMany calls: under load the
// completions of many handlers share one statement; when idle a completion
// is written at once.
type completer struct {
	w       *Worker
	mu      sync.Mutex
	ids     []int64
	att     []int
	stopped bool
	kick    chan struct{}
	quit    chan struct{}
	exited  chan struct{}
}

func newCompleter(w *Worker) *completer {
	return &completer{w: w, kick: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
}

// add queues a completion; false when the completer has stopped and the
// caller must complete the job itself.
func (c *completer) add(id int64, attempt int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.ids = append(c.ids, id)
	c.att = append(c.att, attempt)
	signal(c.kick)
	return true
}

func (c *completer) take(stop bool) ([]int64, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, att := c.ids, c.att
	c.ids, c.att = nil, nil
	if stop {
		c.stopped = true
	}
	return ids, att
}

func (c *completer) run() {
	defer close(c.exited)
	for {
		stop := false
		select {
		case <-c.kick:
		case <-c.quit:
			stop = true
		}
		if ids, att := c.take(stop); len(ids) > 0 {
			c.flush(ids, att)
		}
		if stop {
			return
		}
	}
}

func (c *completer) stop() {
	close(c.quit)
	<-c.exited
}

func (c *completer) flush(ids []int64, att []int) {
	w := c.w
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var done []int64
	err := w.retryTransient(ctx, func(ctx context.Context) error {
		var err error
		done, err = w.c.completeMany(ctx, w.cfg.Queue, ids, att)
		return err
	})
	if err != nil {
		w.log.Error("could not record completions; the reaper will retry the jobs", "jobs", len(ids), "err", err)
		return
	}
	if len(done) == len(ids) {
		return
	}
	got := make(map[int64]bool, len(done))
	for _, id := range done {
		got[id] = true
	}
	for i, id := range ids {
		if !got[id] {
			w.c.cfg.metrics.leaseLost(ctx, w.cfg.Queue)
			w.log.Warn("completion refused: the attempt no longer holds the job", "job", id, "attempt", att[i])
		}
	}
}
