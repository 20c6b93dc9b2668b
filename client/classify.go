package client

import (
	"errors"
	"fmt"
	"time"
)

// A handler's error decides what happens to its job:
//
//   - nil: the job is completed;
//   - Permanent(err): dead-lettered now (reason non_retryable), whatever
//     attempts remain;
//   - RetryAfter(err, d): retried after d (clamped to the policy's max)
//     instead of the policy's delay, e.g. a downstream's HTTP Retry-After;
//   - Snooze(d): put back, due after d, without spending an attempt;
//   - any other error: retried after the policy's delay, or dead-lettered
//     when attempts or the policy's deadline are exhausted.
//
// The wrappers keep the original error: errors.Is and errors.As see through
// them, and its text, unchanged, is their text and what the job's history,
// last_error and error signatures record. What the wrapper asks for is
// recorded apart (the dead-letter reason non_retryable, the run_at of the
// retry), so a prefix such as "permanent: " would only split one failure
// into two signatures.

type permanentError struct{ err error }

func (e *permanentError) Error() string { return errText(e.err) }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the job is dead-lettered at
// once, and Retry stops. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or an error it wraps) was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return errText(e.err) }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter fails the attempt but asks for the next one after d instead of
// the policy's delay (the database clamps d to the policy's max). The
// attempt is spent as with any failure. A negative d counts as 0.
func RetryAfter(err error, d time.Duration) error {
	if d < 0 {
		d = 0
	}
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{err: err, delay: d}
}

// RetryAfterDelay returns the delay requested with RetryAfter, if err
// carries one.
func RetryAfterDelay(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.delay, true
	}
	return 0, false
}

type snoozeError struct{ delay time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.delay) }

// Snooze returns from a handler to put the job back, due after d, without
// spending an attempt (the next claim has a new Job.Token and the same
// Job.AttemptNumber()). Use it
// for "not yet" rather than "failed"; a job that snoozes forever runs
// forever, so bound it in the handler. A negative d counts as 0.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &snoozeError{delay: d}
}

// SnoozeDelay returns the delay of a Snooze error.
func SnoozeDelay(err error) (time.Duration, bool) {
	var s *snoozeError
	if errors.As(err, &s) {
		return s.delay, true
	}
	return 0, false
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
