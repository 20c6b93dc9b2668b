package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// outcome is what a handler's return means for its job, read from the
// error in one place (readOutcome): the Worker records it without looking
// at the error again.
type outcome struct {
	kind  outcomeKind
	err   error         // the handler's error: its text is what Fail records
	delay time.Duration // snooze delay, or the RetryAfter delay when hasDelay
	// hasDelay: RetryAfter asked for delay instead of the policy's.
	hasDelay bool
	// output: what the handler recorded with SetOutput, for a completion.
	output json.RawMessage
}

type outcomeKind int

const (
	outcomeCompleted outcomeKind = iota
	outcomeFailed                // retried after the policy's delay, or RetryAfter's
	outcomePermanent             // dead-lettered now (non_retryable)
	outcomeSnoozed               // put back without spending an attempt
	outcomePanicked              // failed like outcomeFailed; logged with the panic value
)

func (k outcomeKind) String() string {
	return [...]string{"completed", "failed", "permanent", "snoozed", "panic"}[k]
}

// readOutcome classifies a handler's error: nil completes; Snooze snoozes;
// Permanent dead-letters (even when it wraps a RetryAfter); RetryAfter
// fails with its delay; a panic or any other error fails with the policy's
// delay.
func readOutcome(err error) outcome {
	if err == nil {
		return outcome{kind: outcomeCompleted}
	}
	if d, ok := SnoozeDelay(err); ok {
		return outcome{kind: outcomeSnoozed, err: err, delay: d}
	}
	if IsPermanent(err) {
		return outcome{kind: outcomePermanent, err: err}
	}
	var pe *panicError
	if errors.As(err, &pe) {
		return outcome{kind: outcomePanicked, err: err}
	}
	o := outcome{kind: outcomeFailed, err: err}
	o.delay, o.hasDelay = RetryAfterDelay(err)
	return o
}

// settle records an outcome in the database: completions go to the
// batched completer, the rest are one fenced call each.
func (w *Worker) settle(ctx context.Context, job *Job, o outcome, elapsed time.Duration) {
	w.c.cfg.metrics.handlerRan(ctx, job.Queue, o.kind.String(), elapsed)
	// A small output rides the batch; a larger one, which its queue's limit
	// may refuse, is a call of its own (batchedOutputBytes).
	if o.kind == outcomeCompleted && len(o.output) <= batchedOutputBytes && w.completer.add(job.ID, job.Token, job.Queue, o.output) {
		return // the common case: no call, no timer of its own
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	jc := w.jobClient(job.ID) // the job's shard in direct mode
	var err error
	switch o.kind {
	case outcomeCompleted:
		calls := 0
		err = w.retryTransient(ctx, func(ctx context.Context) error {
			calls++
			var err error
			if o.output != nil {
				_, err = jc.CompleteWithOutput(ctx, job.ID, job.Token, o.output)
			} else {
				_, err = jc.Complete(ctx, job.ID, job.Token)
			}
			return err
		})
		if calls > 1 && (errors.Is(err, ErrStaleAttempt) || errors.Is(err, ErrInvalidTransition)) &&
			len(w.confirmCompletions(ctx, jc, []int64{job.ID}, []int{job.Token}, nil)) == 1 {
			err = nil // the first call, whose reply was lost, completed it
		}
		if o.output != nil && errors.Is(err, ErrInvalidArgument) {
			// The output was refused (over the queue's max_output_bytes):
			// the job stays running, and another attempt would produce the
			// same output, so it is dead-lettered with the refusal instead
			// of waiting for the reaper.
			msg := "output refused: " + err.Error()
			err = w.retryTransient(ctx, func(ctx context.Context) error {
				j, err := jc.Fail(ctx, job.ID, job.Token, msg, NonRetryable())
				if err == nil {
					w.failures.record(job.Queue, j.Status)
				}
				return err
			})
		}
	case outcomeSnoozed:
		err = w.retryTransient(ctx, func(ctx context.Context) error {
			_, err := jc.Snooze(ctx, job.ID, job.Token, o.delay)
			return err
		})
	default:
		var opts []FailOption
		switch {
		case o.kind == outcomePermanent:
			opts = append(opts, NonRetryable())
		case o.hasDelay:
			opts = append(opts, RetryIn(o.delay))
		case o.kind == outcomePanicked:
			var pe *panicError
			errors.As(o.err, &pe)
			w.log.Error("handler panicked", "job", job.ID, "token", job.Token, "panic", fmt.Sprint(pe.value))
		}
		var j Job
		err = w.retryTransient(ctx, func(ctx context.Context) error {
			var err error
			j, err = jc.Fail(ctx, job.ID, job.Token, o.err.Error(), opts...)
			return err
		})
		if err == nil {
			// One line per attempt at Debug; the Info summary counts them
			// (failures.go).
			w.log.Debug("job failed", "queue", job.Queue, "job", job.ID, "attempt", job.AttemptNumber(), "token", job.Token, "status", j.Status,
				"run_at", j.RunAt, "err", o.err)
			w.failures.record(job.Queue, j.Status)
		}
	}
	w.settleError(ctx, job, o.kind.String(), err)
}

// settleTries bounds retryTransient: waits of 100 ms doubling give the
// database about 3 s to come back (a restart, a failover, a dropped
// connection) before the job is left to the reaper.
const settleTries = 6

// retryTransient runs a settle call (complete, complete_many, fail, snooze)
// and runs it again, up to settleTries times in all, while it fails with an
// error that says nothing about the job: the connection, not a refusal
// (transient, errors.go). The calls are fenced by the attempt, whose tokens
// never repeat (snooze and replay included: docs/adr/0020), so a repeat
// after a reply that was lost takes effect once or is refused with
// BK002/BK003, and never touches a later claim of the job; without the
// repeat a blip would leave the job running until
// its lease expires and the reaper counts a finished attempt as a crash (on
// the last attempt: a dead letter).
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

func (w *Worker) settleError(ctx context.Context, job *Job, outcome string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrStaleAttempt), errors.Is(err, ErrInvalidTransition):
		w.c.cfg.metrics.leaseLost(ctx, job.Queue)
		w.log.Warn("job no longer ours; outcome dropped", "job", job.ID, "token", job.Token, "outcome", outcome, "err", err)
	default:
		// The lease will expire and the reaper will retry the job.
		w.log.Error("could not record the outcome; the reaper will retry the job", "job", job.ID, "outcome", outcome, "err", err)
	}
}
