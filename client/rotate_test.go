package client

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestRotateTruncatesWhateverTheDefaultIsolation: backoff.rotate truncates
// only at READ COMMITTED (docs/adr/0078); over a pool, Client.Rotate asks
// for it, so a database whose default is another level still gets its
// segments freed. In a transaction of the caller's at REPEATABLE READ it
// truncates nothing and says why.
func TestRotateTruncatesWhateverTheDefaultIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.NewURL(t)
			setup := testdb.QualifiedPool(t, url, 1)
			_, err := setup.Exec(ctx, `UPDATE backoff.settings SET segment_jobs = 2`)
			require.NoError(t, err)
			testdb.SetDefaultIsolation(t, url, level)
			pool := testdb.QualifiedPool(t, url, 4)
			var got string
			require.NoError(t, pool.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&got))
			require.Equal(t, level, got)

			c := newTestClient(t, pool)
			for range 2 {
				_, err := c.Enqueue(ctx, "q", nil)
				require.NoError(t, err)
			}
			rs, err := c.Rotate(ctx)
			require.NoError(t, err)
			require.Equal(t, []Rotation{{Segment: 2, SwitchedFrom: 1, Moved: 2}}, rs)

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			rs, err = c.With(tx).Rotate(ctx)
			require.NoError(t, err)
			require.Equal(t, []Rotation{{Segment: 2, Note: "segment 1 not truncated: rotate truncates only at READ COMMITTED, and this transaction is " +
				strings.ToUpper(level)}}, rs)
			require.NoError(t, tx.Rollback(ctx))

			rs, err = c.Rotate(ctx)
			require.NoError(t, err)
			require.Equal(t, []Rotation{{Segment: 2, Truncated: []int{1}}}, rs)
		})
	}
}

// TestIdleWorkerIsSeen: a Worker with nothing to do still counts among the
// workers backoff.liveness has seen, by the name it passes to rotate at
// each reap interval, and its reap and rotate are recorded
// (docs/adr/0079): with it running, nothing warns.
func TestIdleWorkerIsSeen(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	w, err := NewWorker(pool, WorkerConfig{Queue: "quiet", PollInterval: time.Hour,
		Handler: func(context.Context, *Job) error { return nil }}, WithWorkerID("idle-1"), WithLogger(testLogger(t)))
	require.NoError(t, err)
	startWorker(t, w)

	// The maintenance loop runs once at start.
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM backoff.maintenance_workers WHERE worker = 'idle-1'`).Scan(&n)
		return err == nil && n == 1
	}, 30*time.Second, 10*time.Millisecond)
	var seen int64
	var reaped, rotated bool
	var warning *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT workers_seen, reap_at IS NOT NULL, rotate_at IS NOT NULL, warning
		FROM backoff.liveness()`).Scan(&seen, &reaped, &rotated, &warning))
	require.EqualValues(t, 1, seen)
	require.True(t, reaped)
	require.True(t, rotated)
	require.Nil(t, warning)
}
