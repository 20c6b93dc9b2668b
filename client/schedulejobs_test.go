package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestUpcomingFiresAndScheduleJobs: the fires ahead start at a running
// schedule's next fire time when it is later than now and after now when
// it is earlier (a slot due now fires at the next call, not in the
// preview), after now for a paused one; a name list selects; the jobs of a
// schedule come newest first with their slot (zero: a manual fire) and
// outcome; bad counts are invalid arguments.
func TestUpcomingFiresAndScheduleJobs(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	c, err := New(ctx, pool, WithClock(func() time.Time { return clock }))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('hourly', 'q', p_every => '1 hour', p_now => $1)`, t0)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('daily', 'q', p_cron => '0 6 * * *', p_time_zone => 'Europe/Berlin', p_now => $1)`, t0)
	require.NoError(t, err)

	// Before the first slot: from the next fire time.
	fires, err := c.UpcomingFires(ctx, nil, t0.Add(-24*time.Hour), 3)
	require.NoError(t, err)
	require.Len(t, fires, 2)
	require.Equal(t, []time.Time{t0.Add(time.Hour), t0.Add(2 * time.Hour), t0.Add(3 * time.Hour)}, atOf(fires["hourly"]))
	require.Equal(t, time.Date(2030, 1, 1, 5, 0, 0, 0, time.UTC), fires["daily"][0].At.UTC())
	require.Equal(t, time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC), fires["daily"][0].Wall, "the wall time in Berlin")
	// Behind (nobody fired since): after now.
	fires, err = c.UpcomingFires(ctx, []string{"hourly"}, t0.Add(150*time.Minute), 2)
	require.NoError(t, err)
	require.Len(t, fires, 1)
	require.Equal(t, []time.Time{t0.Add(3 * time.Hour), t0.Add(4 * time.Hour)}, atOf(fires["hourly"]))
	// Paused: after now, what a resume now would bring.
	_, err = c.PauseSchedule(ctx, "hourly")
	require.NoError(t, err)
	fires, err = c.UpcomingFires(ctx, []string{"hourly", "nope"}, t0.Add(-24*time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, []time.Time{t0.Add(-23 * time.Hour)}, atOf(fires["hourly"]))
	_, err = c.ResumeSchedule(ctx, "hourly")
	require.NoError(t, err)

	// Jobs: a slot completed, a manual fire pending; newest first.
	jobs, err := c.ScheduleJobs(ctx, "hourly", 10)
	require.NoError(t, err)
	require.Empty(t, jobs)
	clock = t0.Add(61 * time.Minute)
	fired, err := c.FireSchedules(ctx, 0)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	claimed, err := c.Claim(ctx, "q", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = c.Complete(ctx, claimed[0].ID, claimed[0].Token)
	require.NoError(t, err)
	manual, _, err := c.TriggerSchedule(ctx, "hourly")
	require.NoError(t, err)
	jobs, err = c.ScheduleJobs(ctx, "hourly", 10)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, manual, jobs[0].ID)
	require.True(t, jobs[0].Slot.IsZero())
	require.Equal(t, StatusPending, jobs[0].Status)
	require.Equal(t, fired[0].JobID, jobs[1].ID)
	require.Equal(t, t0.Add(time.Hour), jobs[1].Slot.UTC())
	require.Equal(t, StatusCompleted, jobs[1].Status)
	require.Equal(t, 1, jobs[1].Attempts)
	require.Equal(t, clock, jobs[1].CompletedAt.UTC())
	jobs, err = c.ScheduleJobs(ctx, "hourly", 1)
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	_, err = c.UpcomingFires(ctx, nil, t0, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = c.ScheduleJobs(ctx, "hourly", 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func atOf(fires []FireTime) []time.Time {
	out := make([]time.Time, len(fires))
	for i, f := range fires {
		out[i] = f.At.UTC()
	}
	return out
}
