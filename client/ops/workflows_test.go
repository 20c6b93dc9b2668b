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

// Graph reads a workflow with its edges; Unblock releases a job that a
// failed "wait" edge holds; Stats and Overview count the blocked jobs.
func TestGraphUnblockAndBlockedCounts(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c, o := clientsAt(t, pool, &now)

	ids, err := c.EnqueueGraph(ctx, client.NewGraph().
		Add("a", "ops-wf", nil, nil).
		Add("b", "ops-wf", nil, []client.Dependency{client.After("a").Or(client.OnFailureWait)}))
	require.NoError(t, err)
	a, b := ids["a"], ids["b"]

	g, err := o.Graph(ctx, b, 0)
	require.NoError(t, err)
	require.Equal(t, ops.JobGraph{Jobs: []ops.GraphJob{
		{ID: b, Queue: "ops-wf", Status: client.StatusBlocked, Parents: []ops.GraphEdge{{Parent: a, OnFailure: "wait", State: "open"}},
			WaitingFor: []int64{a}},
		{ID: a, Queue: "ops-wf", Status: client.StatusPending, Distance: 1, Parents: []ops.GraphEdge{}, WaitingFor: []int64{}},
	}}, g)
	g, err = o.Graph(ctx, b, 1)
	require.NoError(t, err)
	require.True(t, g.Truncated)
	require.Len(t, g.Jobs, 1)
	_, err = o.Graph(ctx, b+1000, 0)
	require.ErrorIs(t, err, client.ErrJobNotFound)
	_, err = o.Graph(ctx, b, 10001)
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	stats, err := o.Stats(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats[0].Blocked)
	ov, err := o.Overview(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), ov[0].Blocked)

	_, err = o.Unblock(ctx, b)
	require.ErrorIs(t, err, client.ErrInvalidTransition, "a parent not finished yet is no operator's to release")
	_, err = o.Cancel(ctx, a, "source gone")
	require.NoError(t, err)
	j, err := o.Unblock(ctx, b)
	require.NoError(t, err)
	require.Equal(t, client.StatusPending, j.Status)
	_, err = o.Unblock(ctx, b+1000)
	require.ErrorIs(t, err, client.ErrJobNotFound)
}
