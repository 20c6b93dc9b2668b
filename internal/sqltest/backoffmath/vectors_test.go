package backoffmath_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	vectors "github.com/pgbackoff/pgbackoff/internal/policyvectors"
)

func loadVectors(t *testing.T) vectors.File {
	t.Helper()
	f, err := vectors.Load(vectors.Path())
	require.NoError(t, err)
	require.NotEmpty(t, f.Cases)
	return f
}

// int8ArrayLiteral renders a bigint[] literal, so that per-row arrays can
// travel as one text[] parameter and be unnested.
func int8ArrayLiteral(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// delayArgs are the columns of many _delay_us calls, sent as arrays in one
// round trip.
type delayArgs struct {
	strategy, schedule, jitter []string
	base, maxUS, seed          []int64
	multiplier, ratio          []float64
	exponent, attempt          []int32
}

func (a *delayArgs) add(p vectors.Policy, attempt int, seed int64) {
	a.strategy = append(a.strategy, p.Strategy)
	a.base = append(a.base, p.BaseUS)
	a.multiplier = append(a.multiplier, p.Multiplier)
	a.exponent = append(a.exponent, int32(p.Exponent))
	a.schedule = append(a.schedule, int8ArrayLiteral(p.ScheduleUS))
	a.maxUS = append(a.maxUS, p.MaxUS)
	a.jitter = append(a.jitter, p.Jitter)
	a.ratio = append(a.ratio, p.JitterRatio)
	a.attempt = append(a.attempt, int32(attempt))
	a.seed = append(a.seed, seed)
}

const unnestArgs = `unnest($1::text[], $2::int8[], $3::float8[], $4::int4[], $5::text[], $6::int8[], $7::text[], $8::float8[], $9::int4[], $10::int8[])
	WITH ORDINALITY AS t(strategy, base, multiplier, exponent, schedule, max_us, jitter, ratio, attempt, seed, i)`

func (a *delayArgs) params() []any {
	return []any{a.strategy, a.base, a.multiplier, a.exponent, a.schedule, a.maxUS, a.jitter, a.ratio, a.attempt, a.seed}
}

// sqlDelays runs query (which selects one bigint per row of unnestArgs, in
// order) and returns the results.
func sqlDelays(t *testing.T, ctx context.Context, q *pgxpool.Pool, query string, a *delayArgs) []int64 {
	t.Helper()
	rows, err := q.Query(ctx, query, a.params()...)
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	require.Len(t, out, len(a.attempt))
	return out
}

// TestVectorsInPostgres checks every shared vector against the SQL, through
// the private _delay_us, the public compute_delay (intervals), and, for the
// shipped profiles, retry_delay by name.
func TestVectorsInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	file := loadVectors(t)
	var a delayArgs
	for _, c := range file.Cases {
		a.add(c.Policy, c.Attempt, c.Seed)
	}

	queries := map[string]string{
		"_delay_us": `SELECT backoff._delay_us(strategy, base, multiplier, exponent, schedule::int8[], max_us, jitter, ratio, attempt, seed)
			FROM ` + unnestArgs + ` ORDER BY i`,
		"compute_delay": `SELECT backoff._interval_us(backoff.compute_delay(strategy, base * interval '1 microsecond', multiplier, exponent,
				ARRAY(SELECT s * interval '1 microsecond' FROM unnest(schedule::int8[]) AS s), max_us * interval '1 microsecond',
				jitter, ratio, attempt, seed))
			FROM ` + unnestArgs + ` ORDER BY i`,
	}
	for name, query := range queries {
		got := sqlDelays(t, ctx, pool, query, &a)
		for i, c := range file.Cases {
			require.Equal(t, c.ExpectedUS, got[i], "%s: %s (attempt %d, seed %d)", name, c.Name, c.Attempt, c.Seed)
		}
	}

	profiles := 0
	for _, c := range file.Cases {
		if c.Profile == "" {
			continue
		}
		profiles++
		var got int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff._interval_us(backoff.retry_delay($1, $2, $3))`,
			c.Profile, c.Attempt, c.Seed).Scan(&got))
		require.Equal(t, c.ExpectedUS, got, "retry_delay: %s", c.Name)
	}
	require.Positive(t, profiles)
	t.Logf("vectors: %d cases checked through _delay_us and compute_delay, %d through retry_delay", len(file.Cases), profiles)
}

func TestJitterUnitsInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	for _, u := range loadVectors(t).Units {
		var got float64
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff._jitter_unit($1, $2)`, u.Seed, u.Attempt).Scan(&got))
		require.Equal(t, float64(u.Expected)/4294967296.0, got, "seed %d attempt %d", u.Seed, u.Attempt)
	}
}

// TestStepRetryVectors checks calculate_step_next_retry_time, both
// overloads, against the hand-worked cases of the vectors file.
func TestStepRetryVectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	for _, c := range loadVectors(t).StepRetry {
		for _, typ := range []string{"timestamptz", "timestamp"} {
			query := fmt.Sprintf(`SELECT backoff.calculate_step_next_retry_time($1::int4, $2::%[1]s, $3::%[1]s, $4::int4, $5::int4, $6::numeric)::text`, typ)
			var got *string
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `SET LOCAL TimeZone = 'UTC'`)
			require.NoError(t, err)
			err = tx.QueryRow(ctx, query, c.Request, c.LastAttemptedAt, c.FailureTime, c.Attempts, c.MaxSeconds, c.Multiplier).Scan(&got)
			require.NoError(t, tx.Rollback(ctx))
			if c.SQLState != "" {
				var pgErr *pgconn.PgError
				require.True(t, errors.As(err, &pgErr), "%s (%s): want SQLSTATE %s, got %v", c.Name, typ, c.SQLState, err)
				require.Equal(t, c.SQLState, pgErr.Code, c.Name)
				require.Contains(t, pgErr.Message, c.ErrorMentions, c.Name)
				continue
			}
			require.NoError(t, err, "%s (%s)", c.Name, typ)
			if c.Expected == nil {
				require.Nil(t, got, "%s (%s)", c.Name, typ)
				continue
			}
			require.NotNil(t, got, "%s (%s)", c.Name, typ)
			want, err := time.Parse(time.RFC3339Nano, *c.Expected)
			require.NoError(t, err)
			layout := "2006-01-02 15:04:05.999999-07"
			if typ == "timestamp" {
				layout = "2006-01-02 15:04:05.999999"
			}
			gotTime, err := time.Parse(layout, *got)
			require.NoError(t, err, "%s (%s): %q", c.Name, typ, *got)
			require.True(t, want.Equal(gotTime), "%s (%s): got %s, want %s", c.Name, typ, *got, *c.Expected)
		}
	}
}
