package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQueueControlsMigration: version 4's queue controls (
// docs/adr/0045, 0046) come with every existing queue and policy off, and
// going back to version 3 keeps a job dead-lettered for its lease expiries
// as a dead letter whose budget is spent (max_attempts), with the controls'
// columns and state tables gone.
func TestQueueControlsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, m, exec, _ := migratedTo(t, 3)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exec(`INSERT INTO backoff.queues (name, policy) VALUES ('a', 'default')`)
	exec(`SELECT backoff.enqueue('a', p_now => $1)`, t0)

	_, _, err := m.MigrateTo(ctx, 4)
	require.NoError(t, err)
	var off bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT rate IS NULL AND burst IS NULL AND breaker_failures IS NULL
		AND breaker_window IS NULL AND breaker_cooldown IS NULL AND breaker_probes = 1 FROM backoff.queues WHERE name = 'a'`).Scan(&off))
	require.True(t, off, "an existing queue has no controls")
	require.NoError(t, conn.QueryRow(ctx, `SELECT bool_and(max_lease_expiries IS NULL) FROM backoff.policies`).Scan(&off))
	require.True(t, off, "an existing policy has no lease-expiry budget")
	require.NoError(t, conn.QueryRow(ctx, `SELECT bool_and(lease_expiries = 0) FROM backoff.jobs`).Scan(&off))
	require.True(t, off)

	// A job dead-lettered for its lease expiries, and a breaker that opened.
	exec(`UPDATE backoff.policies SET max_lease_expiries = 1 WHERE name = 'default'`)
	exec(`UPDATE backoff.queues SET rate = 10, breaker_failures = 1, breaker_window = '1 minute', breaker_cooldown = '1 minute'`)
	exec(`SELECT backoff.claim('a', 'w', 1, NULL, $1)`, t0)
	exec(`SELECT backoff.reap($1)`, t0.Add(time.Hour))
	var reason string
	require.NoError(t, conn.QueryRow(ctx, `SELECT dead_letter_reason FROM backoff.jobs`).Scan(&reason))
	require.Equal(t, "lease_expiries", reason)
	exec(`SELECT backoff.enqueue('a', p_now => $1)`, t0)
	var id, attempt int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id, attempts FROM backoff.claim('a', 'w', 1, NULL, $1)`, t0.Add(time.Hour)).Scan(&id, &attempt))
	exec(`SELECT backoff.fail($1, $2::int, 'boom', NULL, true, $3)`, id, attempt, t0.Add(time.Hour))

	_, _, err = m.MigrateTo(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT dead_letter_reason FROM backoff.jobs WHERE status = 'dead_lettered'`).Scan(&reason))
	require.Equal(t, "max_attempts", reason)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class
		WHERE relnamespace = 'backoff'::regnamespace AND relname IN ('queue_failures', 'queue_breakers', 'queue_tokens')`).Scan(&n))
	require.Zero(t, n)
	_, _, err = m.MigrateTo(ctx, 4)
	require.NoError(t, err)
}
