package demo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// TestCompactTimelineIsPolicyTimeline: the demo's timeline line says what
// policy.Timeline says (the timeline backoffctl schedule prints and the web
// UI draws): the same delays, the same attempt that dead-letters and its
// reason, a deadline and a lease-expiry budget included.
func TestCompactTimelineIsPolicyTimeline(t *testing.T) {
	t.Parallel()
	p := policy.Defaults() // 1s ×2, 5 attempts, no jitter
	require.Equal(t, "1s, 2s, 4s, 8s → dead letter after attempt 5 (15s in all; jitter none)", compactTimeline(p))

	d := p
	d.Deadline = 5 * time.Second // attempt 3 fails at 3s, its retry would run at 7s
	require.Equal(t, "1s, 2s → dead letter (deadline) after attempt 3 (3s in all; jitter none)", compactTimeline(d))
	tl := policy.Timeline(d, policy.TimelineStart{})
	require.Equal(t, 3, tl[len(tl)-1].Attempt)

	one := p
	one.MaxAttempts = 1
	require.Equal(t, "no retry: dead letter after attempt 1", compactTimeline(one))

	many := policy.Profiles()["aggressive"]
	require.Equal(t, "100ms, 200ms, 400ms, 800ms, 1.6s, 3.2s, 6.4s, 10s, … (1 more) → dead letter after attempt 10 (32.7s in all; jitter equal)",
		compactTimeline(many))
}
