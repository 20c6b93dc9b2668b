package client

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// attempt is one claimed job being run.
type attempt struct {
	job    Job
	queue  *producer
	cancel context.CancelCauseFunc
	// slot: what the handler records for the job (SetOutput,
	// ReportProgress); the heartbeat sends its progress.
	slot *outputSlot
}

// start runs one claimed job in its own goroutine.
func (w *Worker) start(runCtx context.Context, p *producer, job Job) {
	// The handler's context keeps runCtx's values but not its
	// cancellation: a shutdown lets running handlers finish first.
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(runCtx))
	a := &attempt{job: job, queue: p, cancel: cancel, slot: &outputSlot{}}
	w.mu.Lock()
	w.attempts[job.ID] = a
	w.mu.Unlock()
	p.inflight.Add(1)
	w.handlers.Add(1)
	go func() {
		defer func() {
			w.mu.Lock()
			delete(w.attempts, job.ID)
			w.mu.Unlock()
			w.handlers.Done()
			p.done()
		}()
		w.runAttempt(hctx, a)
	}()
}

// runAttempt runs the handler under the attempt's lease and records its
// outcome.
func (w *Worker) runAttempt(hctx context.Context, a *attempt) {
	defer a.cancel(nil)
	job := &a.job
	q := &a.queue.cfg
	lease := time.Duration(0)
	if job.LeaseUntil != nil {
		lease = job.LeaseUntil.Sub(w.c.clock())
	}
	if lease <= 0 {
		lease = q.Lease
	}
	if lease <= 0 {
		lease = 30 * time.Second
	}

	var stopHeartbeat func()
	if q.HeartbeatInterval < 0 {
		// No heartbeats: the lease ends the handler. A timer on the
		// attempt's own context, not a second context per job (a context
		// with a deadline costs a Worker noticeably more CPU per job; see
		// docs/adr/0049).
		t := time.AfterFunc(lease, func() { a.cancel(ErrLeaseExpired) })
		stopHeartbeat = func() { t.Stop() }
	} else {
		every := q.HeartbeatInterval
		if every == 0 || every >= lease {
			// The policy's lease is known only now: an interval not
			// shorter than it would let the lease lapse between beats.
			every = lease / 3
		}
		stopHeartbeat = w.heartbeat(a, lease, every)
	}

	start := time.Now()
	// The handler may record an output (SetOutput) for its completion,
	// and progress (ReportProgress) for its heartbeats.
	out := a.slot
	err := callHandler(context.WithValue(hctx, outputKey{}, out), q.Handler, job)
	elapsed := time.Since(start)
	stopHeartbeat()

	if errors.Is(context.Cause(hctx), ErrLeaseLost) {
		w.c.cfg.metrics.handlerRan(hctx, job.Queue, "lease_lost", elapsed)
		w.log.Warn("handler finished after its lease was lost; result dropped",
			"job", job.ID, "token", job.Token, "err", err)
		return
	}
	if err != nil && errors.Is(context.Cause(hctx), ErrWorkerShutdown) {
		// Cancelled by the shutdown: not the job's fault, so it is retried
		// at once elsewhere (the attempt, counted at claim, stays spent).
		err = RetryAfter(fmt.Errorf("worker shutdown: %w", err), 0)
	}
	o := readOutcome(err)
	o.output = out.body
	w.settle(context.WithoutCancel(hctx), job, o, elapsed)
}

// callHandler runs the handler, turning a panic into an error that
// carries the panic value and the stack.
func callHandler(ctx context.Context, h Handler, job *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h(ctx, job)
}

type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.value, e.stack)
}

// heartbeat extends the lease every interval until stopped, that is until
// the handler has returned: a handler cancelled by a shutdown but still
// running keeps its lease, so its job is not run elsewhere meanwhile. A
// refused heartbeat cancels the handler with ErrLeaseLost; a lease that
// runs out without a successful heartbeat cancels it with ErrLeaseExpired.
func (w *Worker) heartbeat(a *attempt, lease, every time.Duration) (stop func()) {
	watchdog := time.AfterFunc(lease, func() { a.cancel(ErrLeaseExpired) })
	quit := make(chan struct{})
	var done sync.WaitGroup
	done.Add(1)
	jc := w.jobClient(a.job.ID) // the job's shard in direct mode
	go func() {
		defer done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			// A heartbeat may take as long as a lease: later than that it
			// is useless anyway, and the watchdog will have fired.
			cctx, cancel := context.WithTimeout(context.Background(), lease)
			var until time.Time
			var err error
			if progress := a.slot.takeProgress(); progress != nil {
				until, err = jc.HeartbeatProgress(cctx, a.job.ID, a.job.Token, a.queue.cfg.Lease, progress)
			} else {
				until, err = jc.Heartbeat(cctx, a.job.ID, a.job.Token, a.queue.cfg.Lease)
			}
			cancel()
			switch {
			case err == nil:
				if left := until.Sub(w.c.clock()); left > 0 {
					watchdog.Reset(left)
				}
			case errors.Is(err, ErrStaleAttempt), errors.Is(err, ErrInvalidTransition), errors.Is(err, ErrJobNotFound):
				w.c.cfg.metrics.leaseLost(context.Background(), a.job.Queue)
				w.log.Warn("lease lost; cancelling the handler", "job", a.job.ID, "token", a.job.Token, "err", err)
				a.cancel(ErrLeaseLost)
				return
			default:
				w.log.Error("heartbeat failed; will retry", "job", a.job.ID, "err", err)
			}
		}
	}()
	return func() {
		watchdog.Stop()
		close(quit)
		done.Wait()
	}
}
