package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFencingMigrationKeepsFates: jobs written by migration 002's functions
// (version 3) in every state migrate to uncounted_attempts (version 4,
// docs/adr/0020) without a change of fate: the same budget left, the same
// token for a running attempt, the same dead letter at the same failure.
// Going back to version 3 gives the budget back to attempts.
func TestFencingMigrationKeepsFates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, m, exec, id := migratedTo(t, 3)

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exec(`INSERT INTO backoff.policies (name, strategy, base, max_delay, jitter, max_attempts, lease)
		VALUES ('fixed', 'fixed', '10 seconds', '1 minute', 'none', 3, '1 minute')`)
	exec(`INSERT INTO backoff.queues (name, policy) VALUES ('a', 'fixed'), ('b', 'fixed'), ('c', 'fixed'), ('d', 'fixed')`)
	// a: failed twice, retrying: its third attempt is its last.
	a := id(`SELECT backoff.enqueue('a', p_now => $1)`, t0)
	for n := 1; n <= 2; n++ {
		now := t0.Add(time.Duration(n) * time.Minute)
		exec(`SELECT backoff.claim('a', 'w', 1, NULL, $1)`, now)
		exec(`SELECT backoff.fail($1, $2, 'boom', NULL, true, $3)`, a, n, now)
	}
	// b: running attempt 2 (its first was snoozed, which version 3 gave back,
	// then one failure).
	b := id(`SELECT backoff.enqueue('b', p_now => $1)`, t0)
	exec(`SELECT backoff.claim('b', 'w', 1, NULL, $1)`, t0)
	exec(`SELECT backoff.snooze($1, 1, '0 seconds', $2)`, b, t0)
	exec(`SELECT backoff.claim('b', 'w', 1, NULL, $1)`, t0)
	exec(`SELECT backoff.fail($1, 1, 'boom', NULL, true, $2)`, b, t0)
	exec(`SELECT backoff.claim('b', 'w', 1, NULL, $1)`, t0.Add(time.Minute))
	// c: dead-lettered, then replayed by version 3 (attempts back to 0).
	c := id(`SELECT backoff.enqueue('c', p_now => $1)`, t0)
	exec(`SELECT backoff.claim('c', 'w', 1, NULL, $1)`, t0)
	exec(`SELECT backoff.fail($1, 1, 'poison', NULL, false, $2)`, c, t0)
	exec(`SELECT backoff.replay($1, $2)`, c, t0)
	// d: never claimed.
	d := id(`SELECT backoff.enqueue('d', p_now => $1)`, t0)

	type state struct {
		Status   string
		Attempts int32
		RunAt    time.Time
	}
	read := func(id int64) state {
		t.Helper()
		var s state
		require.NoError(t, conn.QueryRow(ctx, `SELECT status, attempts, run_at FROM backoff.jobs WHERE id = $1`, id).
			Scan(&s.Status, &s.Attempts, &s.RunAt))
		s.RunAt = s.RunAt.UTC()
		return s
	}
	before := map[int64]state{a: read(a), b: read(b), c: read(c), d: read(d)}
	require.Equal(t, state{"retrying", 2, t0.Add(2*time.Minute + 10*time.Second)}, before[a])
	require.Equal(t, "running", before[b].Status)
	require.Equal(t, int32(2), before[b].Attempts)
	require.Equal(t, int32(0), before[c].Attempts)

	_, _, err := m.MigrateTo(ctx, 4)
	require.NoError(t, err)
	for _, j := range []int64{a, b, c, d} {
		require.Equal(t, before[j], read(j), "job %d unchanged by the migration", j)
		var uncounted int32
		require.NoError(t, conn.QueryRow(ctx, `SELECT uncounted_attempts FROM backoff.jobs WHERE id = $1`, j).Scan(&uncounted))
		require.Zero(t, uncounted)
	}

	// a: its third attempt is still its last.
	now := t0.Add(3 * time.Minute)
	exec(`SELECT backoff.claim('a', 'w', 1, NULL, $1)`, now)
	var status, reason string
	require.NoError(t, conn.QueryRow(ctx, `SELECT status, dead_letter_reason FROM backoff.fail($1, 3, 'boom', NULL, true, $2)`, a, now).
		Scan(&status, &reason))
	require.Equal(t, "dead_lettered", status)
	require.Equal(t, "max_attempts", reason)
	// b: the running attempt keeps its token, and its failure is its
	// second counted one: retrying after the fixed 10 s.
	var runAt time.Time
	var counted int32
	require.NoError(t, conn.QueryRow(ctx,
		`SELECT status, run_at, (errors -> -1 ->> 'counted')::int FROM backoff.fail($1, 2, 'boom', NULL, true, $2)`, b, now).
		Scan(&status, &runAt, &counted))
	require.Equal(t, "retrying", status)
	require.True(t, now.Add(10*time.Second).Equal(runAt), "run_at %v", runAt)
	require.Equal(t, int32(2), counted)
	// c: the replayed job has its whole budget; its next claim has token 1
	// (version 3 restarted the numbers; from now on they only grow).
	var token int32
	require.NoError(t, conn.QueryRow(ctx, `SELECT attempts FROM backoff.claim('c', 'w', 1, NULL, $1)`, now).Scan(&token))
	require.Equal(t, int32(1), token)
	exec(`SELECT backoff.snooze($1, 1, '0 seconds', $2)`, c, now)
	require.NoError(t, conn.QueryRow(ctx, `SELECT attempts FROM backoff.claim('c', 'w', 1, NULL, $1)`, now).Scan(&token))
	require.Equal(t, int32(2), token, "a snooze no longer gives the token back")

	// Down to version 3: attempts is the counted attempt again (c has been
	// snoozed once: 2 claims, 1 counted).
	_, _, err = m.MigrateTo(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, int32(1), read(c).Attempts)
	require.Equal(t, int32(2), read(b).Attempts)
}
