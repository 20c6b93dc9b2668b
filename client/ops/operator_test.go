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

// TestOperatorUICalls: Policies, DeadLetterGroups (by error signature),
// CountJobs and Bulk against the real functions.
func TestOperatorUICalls(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c, o := clientsAt(t, pool, &now)

	ps, err := o.Policies(ctx)
	require.NoError(t, err)
	names := []string{}
	for _, p := range ps {
		names = append(names, p.Name)
		if p.Name == "conservative" {
			require.Equal(t, 30*time.Second, p.Base)
			require.Equal(t, 8, p.MaxAttempts)
		}
	}
	require.Equal(t, []string{"aggressive", "conservative", "default", "moderate"}, names)

	// Four dead letters in mail: three "order N failed" (one id a UUID) and
	// one other; one pending job.
	var dead []int64
	for i, msg := range []string{"order 12 failed: 503", "order 977 failed: 502",
		"order 5 failed: 500 (req 3f2a9c1e-0b4d-4e6f-8a7b-1c2d3e4f5a6b)", "smtp down"} {
		id, err := c.Enqueue(ctx, "mail", map[string]any{"i": i})
		require.NoError(t, err)
		j, err := c.Acquire(ctx, id, time.Minute)
		require.NoError(t, err)
		_, err = c.Fail(ctx, id, j.Token, msg, client.NonRetryable())
		require.NoError(t, err)
		dead = append(dead, id)
	}
	pending, err := c.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)

	act, err := o.Activity(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []ops.Activity{{Queue: "mail", Start: now, Failed: 4, DeadLettered: 4}}, normalize(act))
	_, err = o.Activity(ctx, time.Minute, time.Hour)
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	gs, err := o.DeadLetterGroups(ctx, "mail", 0)
	require.NoError(t, err)
	require.Len(t, gs, 3)
	require.Equal(t, "order N failed: N", gs[0].Signature)
	require.EqualValues(t, 2, gs[0].Count)
	sigs := map[string]int64{}
	for _, g := range gs {
		sigs[g.Signature] = g.Count
		require.Equal(t, "non_retryable", g.Reason)
	}
	require.Equal(t, map[string]int64{"order N failed: N": 2, "order N failed: N (req <id>)": 1, "smtp down": 1}, sigs)

	n, err := o.CountJobs(ctx, ops.ListParams{Queue: "mail", Statuses: []client.Status{client.StatusDeadLettered}}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	n, err = o.CountJobs(ctx, ops.ListParams{Queue: "mail"}, 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "bounded by limit")

	// Replay one group by its signature: exactly its two jobs.
	out, err := o.Bulk(ctx, ops.BulkReplay, ops.BulkFilter{ListParams: ops.ListParams{Queue: "mail"}, ErrorSignature: "order N failed: N"}, 0)
	require.NoError(t, err)
	require.Equal(t, []ops.BulkOutcome{{JobID: dead[0], Done: true}, {JobID: dead[1], Done: true}}, out)
	// Cancel everything in mail: the pending ones are cancelled, the dead
	// letters are reported, not cancelled.
	out, err = o.Bulk(ctx, ops.BulkCancel, ops.BulkFilter{ListParams: ops.ListParams{Queue: "mail"}}, 0)
	require.NoError(t, err)
	require.Len(t, out, 5)
	done := map[int64]bool{}
	for _, o := range out {
		done[o.JobID] = o.Done
		if !o.Done {
			require.Contains(t, o.Reason, "cannot cancel job")
		}
	}
	require.Equal(t, map[int64]bool{dead[0]: true, dead[1]: true, dead[2]: false, dead[3]: false, pending: true}, done)

	_, err = o.Bulk(ctx, ops.BulkAction("delete"), ops.BulkFilter{}, 0)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	_, err = o.Bulk(ctx, ops.BulkReplay, ops.BulkFilter{ListParams: ops.ListParams{Cursor: "5"}}, 0)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
}

func normalize(as []ops.Activity) []ops.Activity {
	for i := range as {
		as[i].Start = as[i].Start.UTC()
	}
	return as
}
