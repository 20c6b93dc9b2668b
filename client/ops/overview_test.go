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

// TestOverviewAndIndexedListing: Overview and ActivitySince read the SQL
// functions; List's status and reason filters find few jobs among many
// (through the partial indexes), and the error-text filter stops after
// ops.ErrorScanLimit jobs with a cursor that searches on.
func TestOverviewAndIndexedListing(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c, o := clientsAt(t, pool, &now)

	// One dead letter (the oldest job), one cancelled job, then many
	// completed jobs, and one pending.
	dead, err := c.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)
	j, err := c.Acquire(ctx, dead, 0)
	require.NoError(t, err)
	_, err = c.Fail(ctx, dead, j.Token, "needle in the haystack", client.NonRetryable())
	require.NoError(t, err)
	gone, err := c.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)
	_, err = o.Cancel(ctx, gone, "no")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error)
		SELECT 'mail', 'completed', 1, $1, $1, $1, 'hay' FROM generate_series(1, $2)`, now, ops.ErrorScanLimit+10)
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)

	ov, err := o.Overview(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, []ops.QueueOverview{{Queue: "mail", Policy: "default", Pending: 1, Due: 1,
		Completed: ov[0].Completed, DeadLettered: ov[0].DeadLettered, Cancelled: ov[0].Cancelled, Breaker: "closed"}}, ov,
		"over 1000 finished jobs: estimated")
	ov, err = o.Overview(ctx, 0) // the default, 10000
	require.NoError(t, err)
	require.Equal(t, ops.QueueOverview{Queue: "mail", Policy: "default", Pending: 1, Due: 1,
		Completed: ops.ErrorScanLimit + 10, DeadLettered: 1, Cancelled: 1, FinishedExact: true, Breaker: "closed"}, ov[0])

	act, err := o.ActivitySince(ctx, now.Add(-time.Minute), 0)
	require.NoError(t, err)
	require.Equal(t, []ops.Activity{{Queue: "mail", Start: now, Completed: ops.ErrorScanLimit + 10, Failed: 1,
		DeadLettered: 1, Cancelled: 1}}, normalize(act))

	for _, p := range []ops.ListParams{
		{Statuses: []client.Status{client.StatusDeadLettered}},
		{Queue: "mail", DeadLetterReason: "non_retryable", Order: ops.OldestFirst},
		{Statuses: []client.Status{client.StatusCancelled, client.StatusDeadLettered}, Order: ops.RecentlyFinishedFirst},
	} {
		page, err := o.List(ctx, p)
		require.NoError(t, err)
		var ids []int64
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if len(p.Statuses) == 2 {
			require.ElementsMatch(t, []int64{dead, gone}, ids, "%+v", p)
		} else {
			require.Equal(t, []int64{dead}, ids, "%+v", p)
		}
		require.Empty(t, page.Next)
	}

	// The needle is the oldest job: the first page examines the newest
	// ops.ErrorScanLimit jobs, finds nothing and says so; the next finds it.
	p := ops.ListParams{ErrorContains: "NEEDLE", Order: ops.NewestFirst, Limit: 10}
	page, err := o.List(ctx, p)
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	require.True(t, page.Searched)
	require.NotEmpty(t, page.Next)
	p.Cursor = page.Next
	page, err = o.List(ctx, p)
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, dead, page.Jobs[0].ID)
	require.False(t, page.Searched, "fewer than ops.ErrorScanLimit jobs left")
	require.Empty(t, page.Next)
}
