package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// brief is a step as (attempt, start, next, reason) for comparing whole
// timelines at a glance.
type brief struct {
	Attempt     int
	Start, Next time.Duration
	Reason      string
}

func briefs(tl []policy.Step) []brief {
	out := make([]brief, len(tl))
	for i, s := range tl {
		out[i] = brief{s.Attempt, s.Start, s.Next, s.DeadLetter}
	}
	return out
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	p := policy.Defaults() // exponential 1s ×2, max 1m, no jitter, 5 attempts
	s := time.Second
	require.Equal(t, []brief{
		{1, 0, 1 * s, ""}, {2, 1 * s, 3 * s, ""}, {3, 3 * s, 7 * s, ""}, {4, 7 * s, 15 * s, ""},
		{5, 15 * s, 31 * s, policy.ReasonMaxAttempts},
	}, briefs(policy.Timeline(p, policy.TimelineStart{})), "up to and including the attempt that dead-letters")

	// A job on its third attempt, 10 s after creation, with its own limit.
	require.Equal(t, []brief{{3, 10 * s, 14 * s, ""}, {4, 14 * s, 22 * s, policy.ReasonMaxAttempts}},
		briefs(policy.Timeline(p, policy.TimelineStart{Attempt: 3, Elapsed: 10 * s, MaxAttempts: 4})))

	// A deadline: the failure whose next run would come after it
	// dead-letters; a next run exactly at the deadline is still retried.
	d := p
	d.Deadline = 7 * s
	require.Equal(t, []brief{{1, 0, 1 * s, ""}, {2, 1 * s, 3 * s, ""}, {3, 3 * s, 7 * s, ""}, {4, 7 * s, 15 * s, policy.ReasonDeadline}},
		briefs(policy.Timeline(d, policy.TimelineStart{})))

	// A lease-expiry budget of 3, one spent: a job that crashes its worker
	// every time is dead-lettered on the second expiry from here, before
	// max_attempts; failures that are errors do not spend it.
	l := p
	l.MaxLeaseExpiries = 3
	require.Equal(t, []brief{{1, 0, 1 * s, ""}, {2, 1 * s, 3 * s, policy.ReasonLeaseExpiries}},
		briefs(policy.Timeline(l, policy.TimelineStart{LeaseExpiries: 1, LeasesExpire: true})))
	require.Len(t, policy.Timeline(l, policy.TimelineStart{LeaseExpiries: 1}), 5)

	// Steps: exactly that many, past the dead letter (what if), each one
	// that would not be retried marked.
	tl := policy.Timeline(p, policy.TimelineStart{Steps: 7})
	require.Len(t, tl, 7)
	require.Equal(t, []string{"", "", "", "", "max_attempts", "max_attempts", "max_attempts"},
		[]string{tl[0].DeadLetter, tl[1].DeadLetter, tl[2].DeadLetter, tl[3].DeadLetter, tl[4].DeadLetter, tl[5].DeadLetter, tl[6].DeadLetter})
	require.Equal(t, 60*s, tl[6].Delay, "capped at max")
	require.Equal(t, (1+2+4+8+16+32+60)*s, tl[6].Next, "the delays add up past the dead letter")

	// Jitter: the seed's delay, and the unjittered one beside it.
	j := policy.Profiles()["moderate"]
	for _, st := range policy.Timeline(j, policy.TimelineStart{Seed: 99}) {
		require.Equal(t, j.Delay(st.Attempt, 99), st.Delay)
		require.Equal(t, j.BaseDelay(st.Attempt), st.Unjittered)
		require.Equal(t, st.Start+st.Delay, st.Next)
	}

	// A policy that allows two billion attempts stops at the bound.
	big := p
	big.MaxAttempts = policy.MaxAttempt
	require.Len(t, policy.Timeline(big, policy.TimelineStart{}), policy.MaxTimelineSteps)
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := policy.Defaults()
	p.Deadline, p.MaxLeaseExpiries = time.Minute, 2
	retryIn := 5 * time.Minute
	for _, tc := range []struct {
		f      policy.Failure
		wait   time.Duration
		reason string
	}{
		{policy.Failure{Attempt: 1}, time.Second, ""},
		{policy.Failure{Attempt: 1, NonRetryable: true, LeaseExpiries: 9}, 0, policy.ReasonNonRetryable},
		{policy.Failure{Attempt: 5, LeaseExpiries: 2}, 0, policy.ReasonLeaseExpiries}, // the crash is named first
		{policy.Failure{Attempt: 5, LeaseExpiries: 1}, 0, policy.ReasonMaxAttempts},
		{policy.Failure{Attempt: 5, MaxAttempts: 9}, 16 * time.Second, ""},
		{policy.Failure{Attempt: 2, MaxAttempts: 2}, 0, policy.ReasonMaxAttempts},
		{policy.Failure{Attempt: 1, Elapsed: 59 * time.Second}, time.Second, ""},
		{policy.Failure{Attempt: 1, Elapsed: 59*time.Second + 1}, 0, policy.ReasonDeadline},
		{policy.Failure{Attempt: 1, RetryIn: &retryIn}, time.Minute, ""}, // capped at 1m: exactly at the deadline
		{policy.Failure{Attempt: 1, Elapsed: 1, RetryIn: &retryIn}, 0, policy.ReasonDeadline},
	} {
		wait, reason := p.Decide(tc.f)
		require.Equal(t, tc.reason, reason, "%+v", tc.f)
		require.Equal(t, tc.wait, wait, "%+v", tc.f)
	}
	p.Deadline = 0
	wait, reason := p.Decide(policy.Failure{Attempt: 1, RetryIn: &retryIn})
	require.Equal(t, "", reason)
	require.Equal(t, time.Minute, wait, "a requested delay is capped at max")
}
