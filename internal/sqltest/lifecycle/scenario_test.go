package lifecycle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTimeTravel drives one job from enqueue through every retry of the
// shipped 'moderate' policy to its dead letter, then replays it, moving the
// clock with p_now only: each retry is claimable exactly at the run_at that
// retry_delay predicts and not a microsecond before.
func TestTimeTravel(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('reports', 'moderate')`)
	maxAttempts := scalar[int](t, db, `SELECT max_attempts FROM backoff.policies WHERE name = 'moderate'`)
	id := enqueue(t, db, "reports", t0)

	now := t0
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		require.Empty(t, claim(t, db, "reports", "w", 1, now.Add(-time.Microsecond)), "attempt %d: not due yet", attempt)
		c := claimOne(t, db, "reports", now)
		require.Equal(t, id, c.ID)
		require.Equal(t, int32(attempt), c.Attempts)
		failedAt := now.Add(500 * time.Millisecond)
		f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'report service down', p_now => $3)`, id, c.Attempts, failedAt)
		require.Len(t, f.Errors, attempt)
		if attempt < maxAttempts {
			delay := scalar[time.Duration](t, db, `SELECT backoff.retry_delay('moderate', $1, $2)`, attempt, id)
			require.Equal(t, "retrying", f.Status)
			require.True(t, f.RunAt.Equal(failedAt.Add(delay)), "attempt %d: run_at %v, want %v", attempt, f.RunAt, failedAt.Add(delay))
			now = f.RunAt
			continue
		}
		require.Equal(t, "dead_lettered", f.Status)
		require.Equal(t, ptr("max_attempts"), f.DeadLetterReason)
		require.True(t, f.CompletedAt.Equal(failedAt))
		now = failedAt
	}
	require.Empty(t, claim(t, db, "reports", "w", 1, now.Add(24*time.Hour)), "a dead letter is never claimed")

	r := one(t, db, `SELECT * FROM backoff.replay($1, $2)`, id, now.Add(time.Hour))
	require.Equal(t, "pending", r.Status)
	require.Len(t, failures(r.Errors), maxAttempts, "the history survives the replay")
	c := claimOne(t, db, "reports", now.Add(time.Hour))
	require.Equal(t, int32(maxAttempts+1), c.Attempts, "a new token")
	require.Equal(t, int32(1), c.counted(), "a fresh attempt budget")
	done := one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, id, c.Attempts, now.Add(time.Hour+time.Second))
	require.Equal(t, "completed", done.Status)
	require.Len(t, failures(done.Errors), maxAttempts)
}
