package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestUpcomingFiresAndScheduleJobs: the Go calls over
// backoff.upcoming_fires and backoff.list_jobs (whose rules
// internal/sqltest/lifecycle tests): the fires ahead start at a running
// schedule's next fire time when it is later than now and after now when
// it is earlier, after now for a paused one; a name list selects; the
// zero time is the client's clock; the jobs of a schedule come newest
// first with their slot (zero: a manual fire) and outcome, and List and
// CountJobs filter by schedule; bad counts are invalid arguments.
func TestUpcomingFiresAndScheduleJobs(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	c := newTestClient(t, pool, client.WithClock(func() time.Time { return clock }))
	o := ops.New(pool, ops.WithClock(func() time.Time { return clock }))
	var err error
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('hourly', 'q', p_every => '1 hour', p_now => $1)`, t0)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.put_schedule('daily', 'q', p_cron => '0 6 * * *', p_time_zone => 'Europe/Berlin', p_now => $1)`, t0)
	require.NoError(t, err)

	// Before the first slot: from the next fire time.
	clock = t0.Add(-24 * time.Hour)
	fires, err := o.UpcomingFires(ctx, nil, time.Time{}, 3)
	require.NoError(t, err)
	clock = t0
	require.Len(t, fires, 2)
	require.Equal(t, []time.Time{t0.Add(time.Hour), t0.Add(2 * time.Hour), t0.Add(3 * time.Hour)}, atOf(fires["hourly"]))
	require.Equal(t, time.Date(2030, 1, 1, 5, 0, 0, 0, time.UTC), fires["daily"][0].At.UTC())
	require.Equal(t, time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC), fires["daily"][0].Wall, "the wall time in Berlin")
	// Behind (nobody fired since): after now.
	fires, err = o.UpcomingFires(ctx, []string{"hourly"}, t0.Add(150*time.Minute), 2)
	require.NoError(t, err)
	require.Len(t, fires, 1)
	require.Equal(t, []time.Time{t0.Add(3 * time.Hour), t0.Add(4 * time.Hour)}, atOf(fires["hourly"]))
	// Paused: after now, what a resume now would bring.
	_, err = c.PauseSchedule(ctx, "hourly")
	require.NoError(t, err)
	fires, err = o.UpcomingFires(ctx, []string{"hourly", "nope"}, t0.Add(-24*time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, []time.Time{t0.Add(-23 * time.Hour)}, atOf(fires["hourly"]))
	_, err = c.ResumeSchedule(ctx, "hourly")
	require.NoError(t, err)

	// Jobs: a slot completed, a manual fire pending; newest first.
	jobs, err := o.ScheduleJobs(ctx, "hourly", 10)
	require.NoError(t, err)
	require.Empty(t, jobs)
	clock = t0.Add(61 * time.Minute)
	fired, err := c.FireSchedules(ctx, 0)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	claimed, err := c.Claim(ctx, "q", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	// A snooze gives its claim back: the token grows, the counted attempt
	// does not, and the list shows the counted one.
	_, err = c.Snooze(ctx, claimed[0].ID, claimed[0].Token, time.Second)
	require.NoError(t, err)
	clock = clock.Add(2 * time.Second)
	claimed, err = c.Claim(ctx, "q", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, 2, claimed[0].Token)
	_, err = c.Complete(ctx, claimed[0].ID, claimed[0].Token)
	require.NoError(t, err)
	manual, _, err := c.TriggerSchedule(ctx, "hourly")
	require.NoError(t, err)
	jobs, err = o.ScheduleJobs(ctx, "hourly", 10)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, manual, jobs[0].ID)
	require.True(t, jobs[0].Slot.IsZero())
	require.Equal(t, client.StatusPending, jobs[0].Status)
	require.Equal(t, fired[0].JobID, jobs[1].ID)
	require.Equal(t, t0.Add(time.Hour), jobs[1].Slot.UTC())
	require.Equal(t, client.StatusCompleted, jobs[1].Status)
	require.Equal(t, 1, jobs[1].AttemptNumber)
	require.Equal(t, clock, jobs[1].CompletedAt.UTC())
	jobs, err = o.ScheduleJobs(ctx, "hourly", 1)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, manual, jobs[0].ID)
	// The same through List and CountJobs; no other job comes.
	_, err = c.Enqueue(ctx, "q", nil)
	require.NoError(t, err)
	page, err := o.List(ctx, ops.ListParams{Schedule: "hourly", Order: ops.NewestFirst})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 2)
	require.Equal(t, "hourly", page.Jobs[0].Schedule)
	require.Nil(t, page.Jobs[0].ScheduleSlot)
	require.Equal(t, t0.Add(time.Hour), page.Jobs[1].ScheduleSlot.UTC())
	n, err := o.CountJobs(ctx, ops.ListParams{Schedule: "hourly"}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	d, err := o.Details(ctx, fired[0].JobID)
	require.NoError(t, err)
	require.Equal(t, "hourly", d.Schedule)
	require.Equal(t, t0.Add(time.Hour), d.ScheduleSlot.UTC())
	_, err = o.Bulk(ctx, ops.BulkCancel, ops.BulkFilter{ListParams: ops.ListParams{Schedule: "hourly"}}, 0)
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	_, err = o.UpcomingFires(ctx, nil, t0, 0)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	_, err = o.UpcomingFires(ctx, nil, t0, 1001)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	_, err = o.ScheduleJobs(ctx, "hourly", 0)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
}

func atOf(fires []ops.FireTime) []time.Time {
	out := make([]time.Time, len(fires))
	for i, f := range fires {
		out[i] = f.At.UTC()
	}
	return out
}
