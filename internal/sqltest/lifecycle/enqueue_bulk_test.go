package lifecycle_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The bulk form of enqueue gives every element what the single-job form
// would: ids in input order, each element's own fields, the queue's
// policy, dedupe through the single-job path, and the same errors.
func TestBulkEnqueueMatchesSingleEnqueue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('slow', 'conservative')`)
	ids := scalar[[]int64](t, db, `SELECT array_agg(id) FROM backoff.enqueue(
			ARRAY['mail', 'slow', 'mail'], ARRAY['{"n": 1}', NULL, '{"n": 3}']::jsonb[],
			ARRAY[NULL, $2, NULL]::timestamptz[], ARRAY[NULL, 3, NULL]::integer[], ARRAY[0, 7, NULL]::integer[],
			NULL::text[], $1, ARRAY[NULL, NULL, 'aggressive']) AS t(id)`, t0, at(3600e9))
	require.Len(t, ids, 3)
	type row struct {
		Queue, Payload, Policy, Status string
		Priority                       int
		MaxAttempts                    *int
		Due                            bool
	}
	for i, want := range []row{
		{"mail", `{"n": 1}`, "default", "pending", 0, nil, true},
		{"slow", `{}`, "conservative", "pending", 7, ptr(3), false},
		{"mail", `{"n": 3}`, "aggressive", "pending", 0, nil, true},
	} {
		var got row
		require.NoError(t, db.QueryRow(t.Context(), `SELECT queue, payload::text, policy, status, priority, max_attempts,
				run_at <= $2 FROM backoff.jobs WHERE id = $1 AND created_at = $2`, ids[i], t0).
			Scan(&got.Queue, &got.Payload, &got.Policy, &got.Status, &got.Priority, &got.MaxAttempts, &got.Due))
		require.Equal(t, want, got, "element %d (id %d)", i, ids[i])
	}

	// A dedupe key takes the single-job path: an unfinished job with the key
	// returns its id; a key repeated in the batch is inserted once.
	dup := scalar[[]int64](t, db, `SELECT array_agg(id) FROM backoff.enqueue(ARRAY['d', 'd', 'd'], NULL, NULL, NULL, NULL,
			ARRAY['k', 'k', NULL], $1) AS t(id)`, t0)
	require.Equal(t, dup[0], dup[1])
	require.NotEqual(t, dup[0], dup[2])
	require.Equal(t, 2, scalar[int](t, db, `SELECT count(*)::int FROM backoff.jobs WHERE queue = 'd'`))

	// The policy is looked up once per distinct (queue, policy) of a batch:
	// each element still gets its own answer.
	mixed := scalar[[]int64](t, db, `SELECT array_agg(id) FROM backoff.enqueue(
			ARRAY['slow', 'mail', 'slow', 'slow', 'mail'], NULL, NULL, NULL, NULL, NULL, $1,
			ARRAY[NULL, NULL, 'aggressive', NULL, 'conservative']) AS t(id)`, t0)
	require.Equal(t, []string{"conservative", "default", "aggressive", "conservative", "conservative"},
		scalar[[]string](t, db, `SELECT array_agg(j.policy ORDER BY t.ord) FROM unnest($1::bigint[]) WITH ORDINALITY AS t(id, ord)
			JOIN backoff.jobs AS j ON j.id = t.id`, mixed))

	// Arrays of NULLs (what a client sends for fields it does not set) mean
	// what NULL arrays mean.
	nulls := scalar[[]int64](t, db, `SELECT array_agg(id) FROM backoff.enqueue(ARRAY['n', 'n'], ARRAY[NULL, NULL]::jsonb[],
			ARRAY[NULL, NULL]::timestamptz[], ARRAY[NULL, NULL]::integer[], ARRAY[NULL, NULL]::integer[],
			ARRAY[NULL, NULL]::text[], $1, ARRAY[NULL, NULL]::text[]) AS t(id)`, t0)
	require.Len(t, nulls, 2)
	require.Equal(t, 2, scalar[int](t, db, `SELECT count(*)::int FROM backoff.jobs WHERE queue = 'n' AND policy = 'default'
			AND payload = '{}' AND priority = 0 AND max_attempts IS NULL AND run_at = $1 AND dedupe_key IS NULL`, t0))

	for _, bad := range []string{
		`SELECT * FROM backoff.enqueue(NULL::text[], NULL, NULL, NULL, NULL, NULL)`,
		// A bad element among good ones and NULLs.
		`SELECT * FROM backoff.enqueue(ARRAY['a', E'b\x01c', 'a'], NULL, NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', E'b\u0085', 'a'], NULL, NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', repeat('x', 129)], NULL, NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a', 'a'], NULL, NULL, ARRAY[NULL, 0, NULL], NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a'], NULL, ARRAY[NULL, '-infinity']::timestamptz[], NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a'], NULL, ARRAY[NULL, '10000-01-01']::timestamptz[], NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a'], NULL, NULL, NULL, NULL, NULL, now(), ARRAY[NULL, 'no such policy'])`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a'], NULL, NULL, NULL, NULL, NULL, now(), ARRAY[NULL, E'p\x7f'])`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a'], NULL, NULL, NULL, NULL, ARRAY[NULL, ''])`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', ''], NULL, NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', NULL], NULL, NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], ARRAY['{}', '{}']::jsonb[], NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], NULL, NULL, ARRAY[0], NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], NULL, NULL, NULL, NULL, ARRAY['']::text[])`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], NULL, NULL, NULL, NULL, NULL, 'infinity')`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], NULL, ARRAY['infinity']::timestamptz[], NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], NULL, NULL, NULL, NULL, NULL, now(), ARRAY['no such policy'])`,
		`SELECT * FROM backoff.enqueue(ARRAY['a'], NULL, NULL, NULL, NULL, NULL, now(), ARRAY['default', 'default'])`,
		// Two dimensions: refused, not flattened into four jobs.
		`SELECT * FROM backoff.enqueue('{{a,a},{a,a}}'::text[], NULL, NULL, NULL, NULL, NULL)`,
		`SELECT * FROM backoff.enqueue(ARRAY['a', 'a'], NULL, NULL, NULL, '{{1},{2}}'::integer[], NULL)`,
	} {
		requireCode(t, execErr(db, bad), "22023")
	}
	// Atomic: the failed batches above added nothing.
	require.Equal(t, 0, scalar[int](t, db, `SELECT count(*)::int FROM backoff.jobs WHERE queue = 'a'`))
}
