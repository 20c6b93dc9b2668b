package backoffmath_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// readPolicy reads one row of backoff.policies as a policy.Policy.
func readPolicy(t *testing.T, ctx context.Context, pool *pgxpool.Pool, name string) policy.Policy {
	t.Helper()
	var (
		p                       policy.Policy
		strategy, jitter        string
		baseUS, maxUS, leaseUS  int64
		deadlineUS              *int64
		scheduleUS              []int64
		exponent, maxAttempts   int32
		leaseExpiries           int32
		multiplier, jitterRatio float64
	)
	err := pool.QueryRow(ctx, `
		SELECT name, strategy, backoff._interval_us(base), multiplier, exponent,
		       ARRAY(SELECT backoff._interval_us(s) FROM unnest(schedule) AS s),
		       backoff._interval_us(max_delay), jitter, jitter_ratio, max_attempts,
		       backoff._interval_us(lease), backoff._interval_us(deadline),
		       coalesce(max_lease_expiries, 0)
		FROM backoff.policies WHERE name = $1`, name).Scan(
		&p.Name, &strategy, &baseUS, &multiplier, &exponent, &scheduleUS, &maxUS, &jitter, &jitterRatio, &maxAttempts, &leaseUS, &deadlineUS, &leaseExpiries)
	require.NoError(t, err, name)
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	p.Strategy, p.Jitter = policy.Strategy(strategy), policy.Jitter(jitter)
	p.Base, p.Max, p.Lease = us(baseUS), us(maxUS), us(leaseUS)
	p.Multiplier, p.JitterRatio = multiplier, jitterRatio
	p.Exponent, p.MaxAttempts = int(exponent), int(maxAttempts)
	p.MaxLeaseExpiries = int(leaseExpiries)
	for _, s := range scheduleUS {
		p.Schedule = append(p.Schedule, us(s))
	}
	if deadlineUS != nil {
		p.Deadline = us(*deadlineUS)
	}
	return p
}

func TestProfilesEqualSeededRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	var names []string
	rows, err := pool.Query(ctx, `SELECT name FROM backoff.policies ORDER BY name`)
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.ElementsMatch(t, policy.ProfileNames(), names)
	for name, want := range policy.Profiles() {
		require.Equal(t, want, readPolicy(t, ctx, pool, name), name)
	}
}

func TestDefaultsEqualColumnDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO backoff.policies (name) VALUES ('only_a_name')`)
	require.NoError(t, err)
	want := policy.Defaults()
	want.Name = "only_a_name"
	require.Equal(t, want, readPolicy(t, ctx, pool, "only_a_name"))
}

// TestValidateAgreesWithTableChecks writes policies at and beyond every
// limit into backoff.policies: the table accepts exactly what Validate
// accepts.
func TestValidateAgreesWithTableChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	cases := map[string]func(*policy.Policy){
		"defaults":             func(*policy.Policy) {},
		"base at limit":        func(p *policy.Policy) { p.Base = policy.MaxDuration },
		"base above limit":     func(p *policy.Policy) { p.Base = policy.MaxDuration + time.Microsecond },
		"base negative":        func(p *policy.Policy) { p.Base = -time.Microsecond },
		"max at limit":         func(p *policy.Policy) { p.Max = policy.MaxDuration },
		"max above limit":      func(p *policy.Policy) { p.Max = policy.MaxDuration + time.Microsecond },
		"max zero":             func(p *policy.Policy) { p.Max = 0 },
		"max negative":         func(p *policy.Policy) { p.Max = -time.Second },
		"multiplier min":       func(p *policy.Policy) { p.Multiplier = policy.MinMultiplier },
		"multiplier below min": func(p *policy.Policy) { p.Multiplier = math.Nextafter(policy.MinMultiplier, 0) },
		"multiplier max":       func(p *policy.Policy) { p.Multiplier = policy.MaxMultiplier },
		"multiplier above max": func(p *policy.Policy) { p.Multiplier = math.Nextafter(policy.MaxMultiplier, math.Inf(1)) },
		"multiplier NaN":       func(p *policy.Policy) { p.Multiplier = math.NaN() },
		"multiplier +Inf":      func(p *policy.Policy) { p.Multiplier = math.Inf(1) },
		"exponent min":         func(p *policy.Policy) { p.Exponent = policy.MinExponent },
		"exponent below min":   func(p *policy.Policy) { p.Exponent = policy.MinExponent - 1 },
		"exponent max":         func(p *policy.Policy) { p.Exponent = policy.MaxExponent },
		"exponent above max":   func(p *policy.Policy) { p.Exponent = policy.MaxExponent + 1 },
		"schedule empty":       func(p *policy.Policy) { p.Strategy, p.Schedule = policy.StrategySchedule, nil },
		"schedule ok": func(p *policy.Policy) {
			p.Strategy, p.Schedule = policy.StrategySchedule, []time.Duration{0, policy.MaxDuration}
		},
		"schedule negative":      func(p *policy.Policy) { p.Schedule = []time.Duration{time.Second, -time.Second} },
		"schedule above limit":   func(p *policy.Policy) { p.Schedule = []time.Duration{policy.MaxDuration + time.Microsecond} },
		"jitter_ratio 0":         func(p *policy.Policy) { p.JitterRatio = 0 },
		"jitter_ratio min":       func(p *policy.Policy) { p.JitterRatio = policy.MinJitterRatio },
		"jitter_ratio below min": func(p *policy.Policy) { p.JitterRatio = math.Nextafter(policy.MinJitterRatio, 0) },
		"jitter_ratio max":       func(p *policy.Policy) { p.JitterRatio = policy.MaxJitterRatio },
		"jitter_ratio above max": func(p *policy.Policy) { p.JitterRatio = math.Nextafter(policy.MaxJitterRatio, 2) },
		"jitter_ratio negative":  func(p *policy.Policy) { p.JitterRatio = -0.5 },
		"jitter_ratio NaN":       func(p *policy.Policy) { p.JitterRatio = math.NaN() },
		"strategy unknown":       func(p *policy.Policy) { p.Strategy = "sometimes" },
		"jitter unknown":         func(p *policy.Policy) { p.Jitter = "lots" },
		"max_attempts 0":         func(p *policy.Policy) { p.MaxAttempts = 0 },
		"max_attempts max":       func(p *policy.Policy) { p.MaxAttempts = policy.MaxCount },
		"lease expiries 1":       func(p *policy.Policy) { p.MaxLeaseExpiries = 1 },
		"lease expiries max":     func(p *policy.Policy) { p.MaxLeaseExpiries = policy.MaxCount },
		"lease expiries -1":      func(p *policy.Policy) { p.MaxLeaseExpiries = -1 },
		"lease 0":                func(p *policy.Policy) { p.Lease = 0 },
		"lease 1µs":              func(p *policy.Policy) { p.Lease = time.Microsecond },
		"deadline 1µs":           func(p *policy.Policy) { p.Deadline = time.Microsecond },
		"deadline negative":      func(p *policy.Policy) { p.Deadline = -time.Second },
	}
	i := 0
	for name, mutate := range cases {
		i++
		p := policy.Defaults()
		p.Name = name
		mutate(&p)
		goErr := p.Validate()
		var deadline *time.Duration
		if p.Deadline != 0 {
			deadline = &p.Deadline
		}
		schedule := p.Schedule
		if schedule == nil {
			schedule = []time.Duration{}
		}
		_, sqlErr := pool.Exec(ctx, `
			INSERT INTO backoff.policies (name, strategy, base, multiplier, exponent, schedule, max_delay, jitter, jitter_ratio, max_attempts, lease, deadline, max_lease_expiries)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULLIF($13, 0))`,
			p.Name, string(p.Strategy), p.Base, p.Multiplier, p.Exponent, schedule, p.Max, string(p.Jitter), p.JitterRatio, p.MaxAttempts, p.Lease, deadline, p.MaxLeaseExpiries)
		if goErr == nil {
			require.NoError(t, sqlErr, "%s: Validate accepts, the table must too", name)
			// And what the table stored is what Go holds.
			require.Equal(t, p, readPolicy(t, ctx, pool, name), name)
			continue
		}
		var pgErr *pgconn.PgError
		require.True(t, errors.As(sqlErr, &pgErr), "%s: Validate rejects (%v), the table must too, got %v", name, goErr, sqlErr)
		require.Equal(t, "23514", pgErr.Code, "%s: a CHECK must reject it: %v", name, pgErr)
	}
	require.Greater(t, i, 30)
}
