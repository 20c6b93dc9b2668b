package policy

import (
	"math"
	"time"
)

// The dead-letter reasons of the retry decision (backoff.jobs.dead_letter_reason).
const (
	ReasonNonRetryable  = "non_retryable"
	ReasonLeaseExpiries = "lease_expiries"
	ReasonMaxAttempts   = "max_attempts"
	ReasonDeadline      = "deadline"
)

// Failure is a failed attempt as the retry decision sees it: the inputs of
// backoff._retry_decision, with times counted from the job's creation.
type Failure struct {
	// Attempt is the counted attempt that failed (1 for the first).
	Attempt int
	// MaxAttempts is the job's own max_attempts; 0: the policy's.
	MaxAttempts int
	// LeaseExpiries is how many times the job's lease expired, this
	// failure included when it is one (reap passes lease_expiries + 1).
	LeaseExpiries int
	// Elapsed is when the attempt failed, since the job was created.
	Elapsed time.Duration
	// Seed is the jitter seed: the job id.
	Seed int64
	// NonRetryable: the handler said the failure is permanent.
	NonRetryable bool
	// RetryIn is the delay the worker asked for (a Retry-After), capped
	// by the policy's Max; nil: the policy's delay.
	RetryIn *time.Duration
}

// Decide is the retry decision for one failed attempt, the Go mirror of
// backoff._retry_decision (docs/adr/0008, docs/adr/0046): the wait before
// the next attempt, or the reason the job is dead-lettered (then the wait
// is 0). In order: non_retryable; lease_expiries (the count reaches
// MaxLeaseExpiries); max_attempts (the attempt reaches the job's
// max_attempts, else the policy's); deadline (the next run would come
// after creation + Deadline).
func (p Policy) Decide(f Failure) (wait time.Duration, reason string) {
	maxAttempts := f.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = p.MaxAttempts
	}
	switch {
	case f.NonRetryable:
		return 0, ReasonNonRetryable
	case p.MaxLeaseExpiries > 0 && f.LeaseExpiries >= p.MaxLeaseExpiries:
		return 0, ReasonLeaseExpiries
	case f.Attempt >= maxAttempts:
		return 0, ReasonMaxAttempts
	}
	wait = p.Delay(f.Attempt, f.Seed)
	if f.RetryIn != nil {
		wait = min(*f.RetryIn, p.Max)
	}
	if p.Deadline > 0 && addSaturated(f.Elapsed, wait) > p.Deadline {
		return 0, ReasonDeadline
	}
	return wait, ""
}

// MaxTimelineSteps bounds a Timeline that runs until the dead letter: a
// policy may allow two billion attempts.
const MaxTimelineSteps = 1000

// TimelineStart is where a retry timeline begins: a job's next attempt, or
// a new job's first.
type TimelineStart struct {
	// Seed is the jitter seed: the job id (0 for "any job" without jitter
	// spread, as backoffctl schedule defaults to).
	Seed int64
	// Attempt is the counted attempt the timeline starts with; below 1: 1.
	Attempt int
	// Elapsed is when that attempt runs, since the job was created: the
	// deadline counts from creation.
	Elapsed time.Duration
	// MaxAttempts is the job's own max_attempts; 0: the policy's.
	MaxAttempts int
	// LeaseExpiries is how many times the job's lease has expired so far.
	LeaseExpiries int
	// LeasesExpire: every attempt ends with its lease expiring (a worker
	// that crashes on the job) rather than with a reported error, so each
	// one spends the lease-expiry budget too.
	LeasesExpire bool
	// Steps is how many attempts to compute. 0: up to and including the
	// one whose failure dead-letters the job (at most MaxTimelineSteps).
	// Above 0: exactly that many, past the dead letter too: each step then
	// says what the policy's delay would be, with DeadLetter set on every
	// step whose failure the decision would not retry.
	Steps int
}

// Step is one attempt of a timeline, each attempt failing at once when it
// runs (a run takes no time on this axis).
type Step struct {
	// Attempt is the counted attempt.
	Attempt int
	// Start is when it runs and fails, since the job was created.
	Start time.Duration
	// Delay is the policy's delay after it, jittered with the seed (a
	// retry waits that long); Unjittered is the same before jitter.
	Delay, Unjittered time.Duration
	// Next is Start + Delay: when the next attempt would run.
	Next time.Duration
	// DeadLetter is the reason when its failure dead-letters the job ("":
	// it is retried at Next).
	DeadLetter string
}

// Timeline is a policy's retry timeline, every attempt failing: for each
// attempt, when it runs, the delay the decision sets after it and whether
// its failure dead-letters the job, by Decide. It is the one place the
// timeline is derived: the web UI's job page, backoffctl schedule and the
// demo all draw from it.
func Timeline(p Policy, s TimelineStart) []Step {
	n, whatIf := s.Steps, s.Steps > 0
	if !whatIf {
		n = MaxTimelineSteps
	}
	attempt := max(s.Attempt, 1)
	at, expiries := s.Elapsed, s.LeaseExpiries
	out := make([]Step, 0, min(n, 64))
	for i := 0; i < n; i++ {
		if s.LeasesExpire {
			expiries++
		}
		st := Step{Attempt: attempt, Start: at, Delay: p.Delay(attempt, s.Seed), Unjittered: p.BaseDelay(attempt)}
		_, st.DeadLetter = p.Decide(Failure{Attempt: attempt, MaxAttempts: s.MaxAttempts, LeaseExpiries: expiries,
			Elapsed: at, Seed: s.Seed})
		st.Next = addSaturated(at, st.Delay)
		out = append(out, st)
		if st.DeadLetter != "" && !whatIf {
			break
		}
		if attempt == MaxAttempt {
			break
		}
		attempt++
		at = st.Next
	}
	return out
}

// addSaturated adds two non-negative durations, stopping at the largest.
func addSaturated(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
