package backoffmath_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	vectors "github.com/pgbackoff/pgbackoff/internal/policyvectors"
)

// TestStoredPolicyPathMatchesGo: the path from a stored policy row, which
// skips _delay_us's validation (the table's CHECKs did it) and splits the
// delay into the job-independent capped part (_policy_capped_us, computed
// once per policy and counted attempt by reap) and the job's jitter
// (docs/adr/0052), gives the Go mirror's delay to the microsecond: through
// _policy_delay_us, through the decision with the capped part passed in as
// reap and fail pass it, and through retry_delay by name. Cases: every
// shared vector whose policy is valid, plus random policies, attempts and
// seeds (BACKOFF_CROSSCHECK_SEED replays a run).
func TestStoredPolicyPathMatchesGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)

	r := crossCheckRand(t, "stored-policy check", 0x51afd7ed558ccd)

	var cases []delayCase
	var args delayArgs
	add := func(c delayCase) {
		cases = append(cases, c)
		args.add(vectors.FromPolicy(c.p), c.attempt, c.seed)
	}
	for _, c := range loadVectors(t).Cases {
		if p := c.Policy.Policy(); p.Validate() == nil && c.Attempt >= 1 && c.Attempt < math.MaxInt32 {
			add(delayCase{p: p, attempt: c.Attempt, seed: c.Seed})
		}
	}
	vectorCases := len(cases)
	for len(cases) < vectorCases+6000 {
		p := randomPolicy(r)
		require.NoError(t, p.Validate())
		attempt := 1 + r.IntN(40)
		switch r.IntN(20) {
		case 0:
			attempt = 1 + r.IntN(math.MaxInt32-1) // below max_attempts
		case 1:
			attempt = 1 + r.IntN(1000)
		}
		add(delayCase{p: p, attempt: attempt, seed: int64(r.Uint64())})
	}

	// One stored policy per case (named by the case's index); their CHECKs
	// accept every valid policy. No deadline and no attempt bound, so that
	// the decision retries every case.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO backoff.policies (name, strategy, base, multiplier, exponent, schedule, max_delay, jitter, jitter_ratio, max_attempts)
		SELECT 'sp' || i, strategy, base * interval '1 microsecond', multiplier, exponent,
			ARRAY(SELECT s * interval '1 microsecond' FROM unnest(schedule::int8[]) AS s), max_us * interval '1 microsecond',
			jitter, ratio, 2147483647
		FROM `+unnestArgs, args.params()...)
	require.NoError(t, err)

	queries := map[string]string{
		"_policy_delay_us": `SELECT backoff._policy_delay_us(p, t.attempt, t.seed)
			FROM ` + unnestArgs + ` JOIN backoff.policies AS p ON p.name = 'sp' || t.i ORDER BY t.i`,
		"_retry_decision": `SELECT backoff._interval_us(d.run_at - '2026-01-02 03:04:05.006+00'::timestamptz)
			FROM ` + unnestArgs + ` JOIN backoff.policies AS p ON p.name = 'sp' || t.i
			CROSS JOIN LATERAL (SELECT backoff._policy_capped_us(p, t.attempt) AS capped_us OFFSET 0) AS c
			CROSS JOIN LATERAL backoff._retry_decision(p, c.capped_us, t.seed, t.attempt, NULL, 0,
				'2026-01-01'::timestamptz, '2026-01-01'::timestamptz, NULL, true, '2026-01-02 03:04:05.006+00'::timestamptz) AS d
			ORDER BY t.i`,
		"retry_delay": `SELECT backoff._interval_us(backoff.retry_delay('sp' || t.i, t.attempt, t.seed))
			FROM ` + unnestArgs + ` ORDER BY t.i`,
	}
	for name, query := range queries {
		rows, err := tx.Query(ctx, query, args.params()...)
		require.NoError(t, err)
		var got []int64
		for rows.Next() {
			var v int64
			require.NoError(t, rows.Scan(&v), name)
			got = append(got, v)
		}
		require.NoError(t, rows.Err(), name)
		require.Len(t, got, len(cases), name)
		mismatches := countMismatches(t, name+": ", cases, got)
		t.Logf("%s: %d cases (%d shared vectors), %d mismatches", name, len(cases), vectorCases, mismatches)
		require.Zero(t, mismatches, name)
	}
}
