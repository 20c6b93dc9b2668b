package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// TestScheduleIsPolicyTimeline: backoffctl schedule prints policy.Timeline
// (the timeline the web UI draws and the demo prints): row for row the
// same delays and times, and the attempt a deadline dead-letters is marked
// and named as such.
func TestScheduleIsPolicyTimeline(t *testing.T) {
	t.Parallel()
	p := policy.Profiles()["moderate"]
	p.Name = "moderate"
	p.Deadline = 12 * time.Second
	rows := timeline(p, 6, 42, 10)
	tl := policy.Timeline(p, policy.TimelineStart{Seed: 42, Steps: 6})
	require.Len(t, rows, len(tl))
	for i, st := range tl {
		require.Equal(t, timelineRow{Attempt: st.Attempt, Delay: st.Delay, Cumulative: st.Next, Unjittered: st.Unjittered,
			SpreadMin: rows[i].SpreadMin, SpreadMax: rows[i].SpreadMax, DeadLettered: st.DeadLetter != "", Reason: st.DeadLetter}, rows[i])
	}
	// 1s, 2s, 4s, 8s (±10%): attempt 4 fails at about 7s and would run
	// again at about 15s, after the deadline.
	require.Equal(t, policy.ReasonDeadline, rows[3].Reason)
	require.Empty(t, rows[2].Reason)
	var out bytes.Buffer
	writeTimeline(&out, p, "test", rows, 42, 10)
	require.Contains(t, out.String(), "\n4*  ")
	require.Contains(t, out.String(), "* attempt 4 is the last (deadline 12s)")
}
