package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestSegmentsMigrationKeepsJobs: jobs in every status, with history,
// leases and dedupe keys, written by migration 004's functions on one
// table, move to the partitioned layout of version 5 (docs/adr/0061): the
// live ones into segment 1, the finished ones stay as segment 0, and each
// behaves as before (claim, complete with its token, dedupe, replay, the
// id sequence). Down to 4 and up again keeps them all.
func TestSegmentsMigrationKeepsJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, m, exec, id := migratedTo(t, 4)

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	code := testdb.SQLState
	exec(`INSERT INTO backoff.policies (name, strategy, base, max_delay, jitter, max_attempts, lease)
		VALUES ('fixed', 'fixed', '10 seconds', '1 minute', 'none', 3, '1 minute')`)
	exec(`INSERT INTO backoff.queues (name, policy) VALUES ('q', 'fixed')`)
	pending := id(`SELECT backoff.enqueue('q', '{"n": 1}', p_dedupe_key => 'p', p_now => $1)`, t0)
	running := id(`SELECT backoff.enqueue('q', '{"n": 2}', p_dedupe_key => 'r', p_now => $1)`, t0)
	retrying := id(`SELECT backoff.enqueue('q', '{"n": 3}', p_now => $1)`, t0)
	completed := id(`SELECT backoff.enqueue('q', '{"n": 4}', p_dedupe_key => 'c', p_now => $1)`, t0)
	dead := id(`SELECT backoff.enqueue('q', '{"n": 5}', p_dedupe_key => 'd', p_now => $1)`, t0)
	cancelled := id(`SELECT backoff.enqueue('q', '{"n": 6}', p_now => $1)`, t0)
	acquire := func(job int64, now time.Time) {
		t.Helper()
		exec(`SELECT backoff.acquire($1, 'w', NULL, $2)`, job, now)
	}
	acquire(retrying, t0)
	exec(`SELECT backoff.fail($1, 1, 'boom', NULL, true, $2)`, retrying, t0)
	acquire(completed, t0)
	exec(`SELECT backoff.complete($1, 1, $2)`, completed, t0)
	acquire(dead, t0)
	exec(`SELECT backoff.fail($1, 1, 'poison', NULL, false, $2)`, dead, t0)
	exec(`SELECT backoff.cancel($1, 'no longer needed', $2)`, cancelled, t0)
	acquire(running, t0.Add(time.Second))

	type row struct {
		Status, Errors string
		Attempts       int32
		Lease          *time.Time
	}
	read := func(job int64) row {
		t.Helper()
		var r row
		require.NoError(t, conn.QueryRow(ctx, `SELECT status, errors::text, attempts, lease_until FROM backoff.jobs WHERE id = $1`, job).
			Scan(&r.Status, &r.Errors, &r.Attempts, &r.Lease))
		return r
	}
	all := []int64{pending, running, retrying, completed, dead, cancelled}
	before := map[int64]row{}
	for _, j := range all {
		before[j] = read(j)
	}
	require.Equal(t, "running", before[running].Status)
	require.NotNil(t, before[running].Lease)

	for round := 0; round < 2; round++ {
		_, _, err := m.MigrateTo(ctx, 5)
		require.NoError(t, err)
		// The row type of backoff.jobs gained segment: statements prepared
		// before return another type.
		require.NoError(t, conn.DeallocateAll(ctx))
		for _, j := range all {
			require.Equal(t, before[j], read(j), "job %d, round %d", j, round)
		}
		var seg int16
		for j, want := range map[int64]int16{pending: 1, running: 1, retrying: 1, completed: 0, dead: 0, cancelled: 0} {
			require.NoError(t, conn.QueryRow(ctx, `SELECT segment FROM backoff.jobs WHERE id = $1`, j).Scan(&seg))
			require.Equal(t, want, seg, "job %d", j)
		}
		var keys int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.dedupe_keys`).Scan(&keys))
		require.EqualValues(t, 2, keys, "the unfinished jobs' keys")
		if round == 0 {
			_, _, err = m.MigrateTo(ctx, 4)
			require.NoError(t, err)
			require.NoError(t, conn.DeallocateAll(ctx))
			for _, j := range all {
				require.Equal(t, before[j], read(j), "job %d after down", j)
			}
		}
	}

	// They behave as before: the keys of unfinished jobs hold, those of
	// finished ones are free; the running attempt's token completes it; the
	// dead letter replays; the sequence goes on after the highest id.
	now := t0.Add(time.Hour)
	require.Equal(t, pending, id(`SELECT backoff.enqueue('q', p_dedupe_key => 'p', p_now => $1)`, now))
	require.Equal(t, running, id(`SELECT backoff.enqueue('q', p_dedupe_key => 'r', p_now => $1)`, now))
	fresh := id(`SELECT backoff.enqueue('q', p_dedupe_key => 'c', p_now => $1)`, now)
	require.Greater(t, fresh, cancelled)
	exec(`SELECT backoff.complete($1, 1, $2)`, running, now)
	require.Equal(t, "completed", read(running).Status)
	_, err := conn.Exec(ctx, `SELECT backoff.replay($1, $2)`, dead, now)
	require.NoError(t, err)
	require.Equal(t, dead, id(`SELECT backoff.enqueue('q', p_dedupe_key => 'd', p_now => $1)`, now))
	_, err = conn.Exec(ctx, `SELECT backoff.complete($1, 1, $2)`, completed, now)
	require.Equal(t, "BK003", code(err), "a finished job stays finished")
	var claimed []int64
	rows, err := conn.Query(ctx, `SELECT id FROM backoff.claim('q', 'w', 10, NULL, $1) ORDER BY id`, now)
	require.NoError(t, err)
	for rows.Next() {
		var j int64
		require.NoError(t, rows.Scan(&j))
		claimed = append(claimed, j)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{pending, retrying, dead, fresh}, claimed)
}
