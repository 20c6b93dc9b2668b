//lint:file-ignore SA1019 this file is the test of the deprecated forwarding itself

package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// oldOperatorCode is code written against the client before the operator
// API moved to client/ops: every moved call and type, spelled as before.
// That it compiles is half of the test.
func oldOperatorCode(ctx context.Context, c *client.Client) error {
	var (
		p    client.ListParams = client.ListParams{Statuses: []client.Status{client.StatusDeadLettered}, Order: client.NewestFirst}
		f    client.BulkFilter = client.BulkFilter{ListParams: p}
		page client.JobPage
		d    client.JobDetail
		pre  client.PayloadPreview
		err  error
	)
	page, err = c.List(ctx, p)
	if err != nil {
		return err
	}
	for _, d = range page.Jobs {
		if d, err = c.Details(ctx, d.ID); err != nil {
			return err
		}
		if _, pre, err = c.Preview(ctx, d.ID, 100); err != nil || pre.Bytes < 0 {
			return err
		}
	}
	var (
		stats    []client.QueueStats
		queues   []client.QueueInfo
		events   []client.QueueEvent
		overview []client.QueueOverview
		acts     []client.Activity
		workers  []client.WorkerInfo
		health   client.Health
		sum      client.DeadLetterSummary
		groups   []client.DeadLetterGroup
		outcomes []client.BulkOutcome
		replays  []client.ReplayOutcome
		job      client.Job
	)
	_, _ = c.CountJobs(ctx, p, 10)
	_, _ = c.CountBulk(ctx, f, 10)
	outcomes, _ = c.Bulk(ctx, client.BulkAction("replay"), f, 10)
	sum, _ = c.DeadLetters(ctx, client.DeadLetterOptions{Sample: client.DefaultDeadLetterSample})
	groups, _ = c.DeadLetterGroups(ctx, "", 10)
	replays, _ = c.ReplayDeadLetters(ctx, "mail")
	job, _ = c.Cancel(ctx, 1, "")
	job, _ = c.Replay(ctx, job.ID)
	_, _ = c.Prune(ctx, time.Hour, 0)
	queues, _ = c.Queues(ctx)
	_, _, _ = c.QueueNames(ctx, 10)
	events, _ = c.QueueEvents(ctx, "", 0)
	_, _ = c.PauseQueue(ctx, "mail")
	_, _ = c.ResumeQueue(ctx, "mail")
	_, _ = c.SwitchQueue(ctx, "mail", true, false)
	_, _ = c.Policies(ctx)
	overview, _ = c.Overview(ctx, 0)
	stats, _ = c.Stats(ctx, 0)
	acts, _ = c.Activity(ctx, time.Hour, time.Minute)
	acts, _ = c.ActivitySince(ctx, time.Time{}, time.Minute)
	workers, _ = c.Workers(ctx)
	health, _ = c.Health(ctx, client.DefaultHealthMaxAge)
	_ = []any{stats, queues, events, overview, acts, workers, health, sum, groups, outcomes, replays}
	return nil
}

// TestMovedOperatorCallsStillWork: the old spelling compiles
// (oldOperatorCode), names the same types as client/ops (an old value is
// an ops value), and its calls run the operator's calls with the client's
// clock, against the database.
func TestMovedOperatorCallsStillWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	now := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	c, err := client.New(ctx, pool, client.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	require.NoError(t, oldOperatorCode(ctx, c))

	var p ops.ListParams = client.ListParams{Queue: "mail"}
	id, err := c.Enqueue(ctx, "mail", map[string]int{"n": 1})
	require.NoError(t, err)
	page, err := c.List(ctx, p)
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, id, page.Jobs[0].ID)

	cancelled, err := c.Cancel(ctx, id, "old code")
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, cancelled.Status)
	require.NotNil(t, cancelled.CompletedAt)
	require.True(t, cancelled.CompletedAt.Equal(now), "the forwarded call passes the client's clock: %v", cancelled.CompletedAt)

	viaOps, err := ops.New(pool).Details(ctx, id)
	require.NoError(t, err)
	viaClient, err := c.Details(ctx, id)
	require.NoError(t, err)
	require.Equal(t, viaOps, viaClient)
}
