package backoffmath_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

func requireSQLState(t *testing.T, err error, code, mentions string, msgAndArgs ...any) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want SQLSTATE %s, got %v %v", code, err, msgAndArgs)
	require.Equal(t, code, pgErr.Code, msgAndArgs...)
	require.Contains(t, pgErr.Message, mentions, msgAndArgs...)
}

// TestScheduleMatchesGo: backoff.schedule gives, row by row, the Go mirror's
// delays and their running sum, for every shipped profile and a few seeds.
func TestScheduleMatchesGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	for name, p := range policy.Profiles() {
		for _, seed := range []int64{0, 42, -9} {
			rows, err := pool.Query(ctx, `SELECT attempt, backoff._interval_us(delay), backoff._interval_us(cumulative)
				FROM backoff.schedule($1, $2, $3)`, name, 12, seed)
			require.NoError(t, err)
			type row struct{ Attempt, DelayUS, CumulativeUS int64 }
			got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
			require.NoError(t, err)
			require.Len(t, got, 12)
			var sum time.Duration
			for i, r := range got {
				d := p.Delay(i+1, seed)
				sum += d
				require.Equal(t, row{int64(i + 1), int64(d / time.Microsecond), int64(sum / time.Microsecond)}, r, "%s seed %d", name, seed)
			}
		}
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.schedule('moderate')`).Scan(&n))
	require.Equal(t, 10, n, "p_attempts defaults to 10")

	// 1000 rows of the largest delays stay inside interval's range.
	_, err := pool.Exec(ctx, `INSERT INTO backoff.policies (name, strategy, base, max_delay) VALUES ('huge', 'fixed', '876600 hours', '876600 hours')`)
	require.NoError(t, err)
	var lastUS int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff._interval_us(max(cumulative)) FROM backoff.schedule('huge', 1000)`).Scan(&lastUS))
	require.Equal(t, 1000*int64(policy.MaxDuration/time.Microsecond), lastUS)

	for _, tc := range []struct {
		policy   any
		attempts any
		mentions string
	}{
		{"nope", 5, `unknown policy "nope"`},
		{nil, 5, `unknown policy "NULL"`},
		{"moderate", 0, `attempts must be between 1 and 1000, got "0"`},
		{"moderate", 1001, `got "1001"`},
		{"moderate", nil, `got "NULL"`},
	} {
		_, err := pool.Exec(ctx, `SELECT * FROM backoff.schedule($1, $2)`, tc.policy, tc.attempts)
		requireSQLState(t, err, "22023", tc.mentions, tc)
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	var d time.Duration
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.retry_delay('moderate', 3)`).Scan(&d))
	require.Equal(t, policy.Profiles()["moderate"].Delay(3, 0), d, "p_seed defaults to 0")
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.retry_delay('moderate', 3, NULL)`).Scan(&d))
	require.Equal(t, policy.Profiles()["moderate"].Delay(3, 0), d, "a NULL seed is seed 0")
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.retry_delay('conservative', 2147483647, 5)`).Scan(&d))
	require.Equal(t, policy.Profiles()["conservative"].Delay(2147483647, 5), d)
	require.LessOrEqual(t, d, time.Hour)

	_, err := pool.Exec(ctx, `SELECT backoff.retry_delay('missing', 1)`)
	requireSQLState(t, err, "22023", `unknown policy "missing"`)
	_, err = pool.Exec(ctx, `SELECT backoff.retry_delay('moderate', 0)`)
	requireSQLState(t, err, "22023", `attempt must be at least 1, got "0"`)
}

// TestComputeDelayRejects: every invalid parameter is a 22023 naming it and
// quoting the value, never an overflow or a NULL.
func TestComputeDelayRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	type args struct {
		strategy   any
		base       any
		multiplier any
		exponent   any
		schedule   any
		max        any
		jitter     any
		ratio      any
		attempt    any
		mentions   string
	}
	ok := args{"exponential", "1 second", 2.0, 2, "{}", "1 minute", "proportional", 0.1, 3, ""}
	var d time.Duration
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.compute_delay($1, $2::interval, $3, $4, $5::interval[], $6::interval, $7, $8, $9)`,
		ok.strategy, ok.base, ok.multiplier, ok.exponent, ok.schedule, ok.max, ok.jitter, ok.ratio, ok.attempt).Scan(&d))
	require.Equal(t, policy.Profiles()["moderate"].Delay(3, 0), d)

	with := func(mutate func(*args), mentions string) args {
		a := ok
		mutate(&a)
		a.mentions = mentions
		return a
	}
	for _, a := range []args{
		with(func(a *args) { a.strategy = "random" }, `unknown strategy "random"`),
		with(func(a *args) { a.strategy = nil }, `unknown strategy "NULL"`),
		with(func(a *args) { a.base = "-1 second" }, `base must be between 0 and 100 years, got "-00:00:01"`),
		with(func(a *args) { a.base = nil }, `base must be between`),
		with(func(a *args) { a.base = "178000000 years" }, `base must be between 0 and 100 years`),
		with(func(a *args) { a.max = "876600:00:00.000001" }, `max must be between 0 and 100 years`),
		with(func(a *args) { a.max = "-1 day" }, `max must be between`),
		with(func(a *args) { a.multiplier = 0.5 }, `multiplier must be between 1 and 1000, got "0.5"`),
		with(func(a *args) { a.multiplier = "NaN" }, `multiplier must be between 1 and 1000, got "NaN"`),
		with(func(a *args) { a.multiplier = "Infinity" }, `got "Infinity"`),
		with(func(a *args) { a.strategy, a.exponent = "polynomial", 11 }, `exponent must be between 1 and 10, got "11"`),
		with(func(a *args) { a.strategy = "schedule" }, `schedule must not be empty`),
		with(func(a *args) { a.strategy, a.schedule = "schedule", "{1s,-1s}" }, `schedule entries must be between 0 and 100 years, got "-00:00:01"`),
		with(func(a *args) { a.strategy, a.schedule = "schedule", "{1s,NULL}" }, `schedule entries must be between 0 and 100 years, got "NULL"`),
		with(func(a *args) { a.jitter = "lots" }, `unknown jitter "lots"`),
		with(func(a *args) { a.ratio = 1e-300 }, `jitter_ratio must be 0 or between 0.000001 and 1, got "1e-300"`),
		with(func(a *args) { a.ratio = 2 }, `jitter_ratio must be 0 or between`),
		with(func(a *args) { a.attempt = 0 }, `attempt must be at least 1, got "0"`),
		with(func(a *args) { a.attempt = nil }, `attempt must be at least 1, got "NULL"`),
	} {
		_, err := pool.Exec(ctx, `SELECT backoff.compute_delay($1, $2::interval, $3::float8, $4, $5::interval[], $6::interval, $7, $8::float8, $9)`,
			a.strategy, a.base, a.multiplier, a.exponent, a.schedule, a.max, a.jitter, a.ratio, a.attempt)
		requireSQLState(t, err, "22023", a.mentions, a)
	}
}

// TestComputeDelayIsImmutable: the pure function can serve in an index.
func TestComputeDelayIsImmutable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	var vol string
	require.NoError(t, pool.QueryRow(ctx, `SELECT provolatile::text FROM pg_catalog.pg_proc WHERE oid = 'backoff.compute_delay(text, interval, float8, integer, interval[], interval, text, float8, integer, bigint)'::regprocedure`).Scan(&vol))
	require.Equal(t, "i", vol)
	_, err := pool.Exec(ctx, `CREATE TEMP TABLE t (attempt integer);
		CREATE INDEX ON t (backoff.compute_delay('linear', '1 second', 1, 1, '{}', '1 hour', 'full', 0, attempt, 7))`)
	require.NoError(t, err)
}

// TestPublicFunctionsHaveComments fails when a public function of the
// backoff schema has no COMMENT, or one without a psql example.
func TestPublicFunctionsHaveComments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	rows, err := pool.Query(ctx, `
		SELECT p.oid::regprocedure::text, coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), ''),
		       CASE WHEN p.prokind = 'p' THEN 'CALL ' ELSE 'SELECT ' END
		FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'backoff'::regnamespace AND p.proname NOT LIKE '\_%'
		ORDER BY 1`)
	require.NoError(t, err)
	type fn struct{ Signature, Comment, Example string } // Example: how its example starts
	fns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fn])
	require.NoError(t, err)
	require.NotEmpty(t, fns)
	for _, f := range fns {
		require.NotEmpty(t, f.Comment, "%s has no COMMENT ON FUNCTION", f.Signature)
		if f.Signature != "backoff.schema_version()" {
			require.Contains(t, f.Comment, f.Example, "%s: its COMMENT needs a psql example", f.Signature)
		}
	}
}
