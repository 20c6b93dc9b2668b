package ops_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestOperatorHistoryAndStrandedWork: Overview, Stats and Workers count
// the expired leases; SwitchQueue refuses an unknown queue unless create,
// and records its changes (QueueEvents); a replay's history entry has its
// role and is decoded.
func TestOperatorHistoryAndStrandedWork(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	o := ops.New(pool)
	ctx := context.Background()
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('mail', p_run_at => now() - interval '1 hour')`).Scan(&id))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.claim('mail', 'w-dead', 1, '1 second', now() - interval '1 minute')`).Scan(&n))
	require.Equal(t, 1, n)

	ov, err := o.Overview(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), ov[0].Expired)
	st, err := o.Stats(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), st[0].Expired)
	ws, err := o.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "w-dead", ws[0].Name)
	require.Equal(t, []string{"mail"}, ws[0].Queues)
	require.Equal(t, int64(1), ws[0].Expired)

	_, err = o.PauseQueue(ctx, "nosuchqueue")
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	changed, err := o.SwitchQueue(ctx, "nosuchqueue", true, true)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = o.PauseQueue(ctx, "mail")
	require.NoError(t, err)
	require.True(t, changed)
	st, err = o.Stats(ctx, 0)
	require.NoError(t, err)
	require.True(t, st[0].Paused)
	evs, err := o.QueueEvents(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "mail", evs[0].Queue)
	require.Equal(t, "pause", evs[0].Action)
	require.NotEmpty(t, evs[0].Role)

	_, err = o.Cancel(ctx, id, "stuck")
	require.NoError(t, err)
	_, err = o.Replay(ctx, id)
	require.NoError(t, err)
	d, err := o.Details(ctx, id)
	require.NoError(t, err)
	require.Len(t, d.Errors, 2)
	require.Equal(t, "cancelled", d.Errors[0].Kind)
	require.Equal(t, "w-dead", d.Errors[0].Worker)
	require.NotNil(t, d.Errors[0].Started)
	require.Equal(t, "replayed", d.Errors[1].Kind)
	require.Equal(t, evs[0].Role, d.Errors[1].Role)
}
