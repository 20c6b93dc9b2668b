package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestRotate: Client.Rotate reports what backoff.rotate did (docs/adr/0061):
// the switch to the next segment once the current one has taken enough
// jobs, the rows moved, and the truncate at the next call.
func TestRotate(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE backoff.settings SET segment_jobs = 2`)
	require.NoError(t, err)
	rs, err := c.Rotate(ctx)
	require.NoError(t, err)
	require.Equal(t, []Rotation{{Segment: 1}}, rs)

	for range 2 {
		_, err := c.Enqueue(ctx, "q", nil)
		require.NoError(t, err)
	}
	rs, err = c.Rotate(ctx)
	require.NoError(t, err)
	require.Equal(t, []Rotation{{Segment: 2, SwitchedFrom: 1, Moved: 2}}, rs)
	rs, err = c.Rotate(ctx)
	require.NoError(t, err)
	require.Equal(t, []Rotation{{Segment: 2, Truncated: []int{1}}}, rs)
}
