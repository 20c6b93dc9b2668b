package webui

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestJobTimelineIsPolicyTimeline: the job page draws ahead exactly what
// policy.Timeline gives (the timeline backoffctl schedule prints and the
// demo shows), from the job's next attempt, its lease expiries counted:
// with a lease-expiry budget nearly spent, the projection ends where reap
// would dead-letter the job, not at max_attempts.
func TestJobTimelineIsPolicyTimeline(t *testing.T) {
	p := policy.Profiles()["moderate"]
	p.Name, p.MaxAttempts = "moderate", 8
	created := at("2026-01-01T00:00:00Z")
	s1 := created.Add(time.Second)
	j := ops.JobDetail{Job: client.Job{ID: 77, Queue: "q", Status: client.StatusRetrying, Token: 2, CreatedAt: created,
		RunAt: created.Add(5 * time.Second),
		Errors: []client.AttemptError{
			{Token: 1, AttemptNumber: 1, At: created.Add(2 * time.Second), Kind: "error", Error: "boom", Started: &s1},
			{Token: 2, AttemptNumber: 2, At: created.Add(4 * time.Second), Kind: "lease_expired", Error: "lease expired"},
		}}, EffectivePolicy: "moderate", EffectiveMaxAttempts: 8}
	now := created.Add(3 * time.Second)

	check := func(p policy.Policy, expiries int) []tlRow {
		t.Helper()
		tl := buildTimeline(j, &p, now)
		var ahead []tlRow
		for _, r := range tl.Rows {
			if r.Planned && r.Event != "deadline" {
				ahead = append(ahead, r)
			}
		}
		want := policy.Timeline(p, policy.TimelineStart{Seed: 77, Attempt: 3, Elapsed: 5 * time.Second, LeaseExpiries: expiries})
		require.Len(t, ahead, len(want))
		for i, st := range want {
			require.Equal(t, created.Add(st.Start), ahead[i].At, "attempt %d", st.Attempt)
			require.Contains(t, ahead[i].Detail, "attempt "+strconv.Itoa(st.Attempt))
		}
		last := ahead[len(ahead)-1].Detail
		require.Contains(t, last, "dead-lettered ("+reasonText(want[len(want)-1].DeadLetter)+")")
		return ahead
	}
	ahead := check(p, 1)
	require.Len(t, ahead, 6, "attempts 3 to 8")

	// A budget of two lease expiries, one spent: the projection assumes
	// errors, so it still runs to max_attempts, and the note says where
	// the budget stands.
	b := p
	b.MaxLeaseExpiries = 2
	check(b, 1)
	tl := buildTimeline(j, &b, now)
	require.Contains(t, tl.Note, "Lease expiries: 1 of the 2")
	// Budget already spent (the policy was lowered): the next failure
	// dead-letters the job, as backoff.fail would decide.
	b.MaxLeaseExpiries = 1
	ahead = check(b, 1)
	require.Len(t, ahead, 1)

	// The lease expiry is its own mark; the failed attempt with a recorded
	// start is drawn from it.
	require.Equal(t, "lease expired", eventNames["expired"])
	var kinds []string
	for _, pt := range tl.Points {
		kinds = append(kinds, pt.Kind)
	}
	require.Contains(t, kinds, "expired")
	require.Contains(t, kinds, "now")
	require.Equal(t, "run", tl.Segs[0].Kind)
	require.NotEmpty(t, tl.Axis)
	require.True(t, strings.HasPrefix(tl.Ticks[0].Label, "00:00:00"), tl.Ticks[0].Label)
}

// TestRunningStrandedJobIsDrawnFromItsStart: a running job whose lease
// expired is drawn stranded from the attempt's recorded start to now, with
// the lease's end marked on it.
func TestRunningStrandedJobIsDrawnFromItsStart(t *testing.T) {
	created := at("2026-01-01T00:00:00Z")
	started, until := created.Add(time.Minute), created.Add(2*time.Minute)
	j := ops.JobDetail{Job: client.Job{ID: 5, Queue: "q", Status: client.StatusRunning, Token: 1, CreatedAt: created,
		RunAt: created, LastAttemptedAt: &started, LeaseUntil: &until, LockedBy: "w1"}, EffectivePolicy: "default", EffectiveMaxAttempts: 5}
	p := policy.Profiles()["default"]
	tl := buildTimeline(j, &p, created.Add(10*time.Minute))
	var stuck []tlSeg
	for _, s := range tl.Segs {
		if s.Kind == "stuck" {
			stuck = append(stuck, s)
		}
	}
	require.Len(t, stuck, 1)
	x := func(t time.Time) float64 {
		return tlPad + float64(t.Sub(created))/float64(10*time.Minute)*float64(tlWidth-2*tlPad)
	}
	require.InDelta(t, x(started), stuck[0].X1, 0.001)
	require.InDelta(t, x(created.Add(10*time.Minute)), stuck[0].X2, 0.001)
	var expired []tlPoint
	for _, pt := range tl.Points {
		if pt.Kind == "expired" {
			expired = append(expired, pt)
		}
	}
	require.Len(t, expired, 1)
	require.InDelta(t, x(until), expired[0].X, 0.001)
}
