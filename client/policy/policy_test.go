package policy_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

func TestDefaultsAndProfilesAreValid(t *testing.T) {
	t.Parallel()
	d := policy.Defaults()
	d.Name = "defaults"
	require.NoError(t, d.Validate())
	profiles := policy.Profiles()
	require.Len(t, profiles, len(policy.ProfileNames()))
	for _, name := range policy.ProfileNames() {
		p, ok := profiles[name]
		require.True(t, ok, name)
		require.Equal(t, name, p.Name)
		require.NoError(t, p.Validate(), name)
	}
	def, mod := profiles["default"], profiles["moderate"]
	def.Name = mod.Name
	require.Equal(t, mod, def, "default starts as a copy of moderate")
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field  string
		mutate func(*policy.Policy)
	}{
		{"strategy", func(p *policy.Policy) { p.Strategy = "random" }},
		{"base", func(p *policy.Policy) { p.Base = -time.Second }},
		{"base", func(p *policy.Policy) { p.Base = policy.MaxDuration + time.Microsecond }},
		{"multiplier", func(p *policy.Policy) { p.Multiplier = 0.5 }},
		{"multiplier", func(p *policy.Policy) { p.Multiplier = math.NaN() }},
		{"multiplier", func(p *policy.Policy) { p.Multiplier = math.Inf(1) }},
		{"multiplier", func(p *policy.Policy) { p.Multiplier = 1000.5 }},
		{"exponent", func(p *policy.Policy) { p.Exponent = 0 }},
		{"exponent", func(p *policy.Policy) { p.Exponent = 11 }},
		{"schedule", func(p *policy.Policy) { p.Strategy = policy.StrategySchedule; p.Schedule = nil }},
		{"schedule", func(p *policy.Policy) { p.Schedule = []time.Duration{time.Second, -time.Second} }},
		{"max", func(p *policy.Policy) { p.Max = -1 }},
		{"max", func(p *policy.Policy) { p.Max = policy.MaxDuration + time.Microsecond }},
		{"jitter", func(p *policy.Policy) { p.Jitter = "some" }},
		{"jitter_ratio", func(p *policy.Policy) { p.JitterRatio = -0.1 }},
		{"jitter_ratio", func(p *policy.Policy) { p.JitterRatio = 1.01 }},
		{"jitter_ratio", func(p *policy.Policy) { p.JitterRatio = 1e-300 }},
		{"jitter_ratio", func(p *policy.Policy) { p.JitterRatio = math.NaN() }},
		{"max_attempts", func(p *policy.Policy) { p.MaxAttempts = 0 }},
		{"lease", func(p *policy.Policy) { p.Lease = 0 }},
		{"deadline", func(p *policy.Policy) { p.Deadline = -time.Hour }},
	} {
		p := policy.Defaults()
		p.Name = "x"
		tc.mutate(&p)
		err := p.Validate()
		require.Error(t, err, tc.field)
		require.ErrorIs(t, err, policy.ErrInvalidPolicy)
		var fe *policy.FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, tc.field, fe.Field)
		require.Contains(t, err.Error(), `policy "x": `+tc.field)
	}
	// The edges of every limit are valid.
	p := policy.Defaults()
	p.Name = "edges"
	p.Base, p.Max, p.Multiplier, p.Exponent, p.JitterRatio = policy.MaxDuration, policy.MaxDuration, 1000, 10, policy.MinJitterRatio
	p.Schedule = []time.Duration{0, policy.MaxDuration}
	require.NoError(t, p.Validate())
	p.Base, p.Max, p.Multiplier, p.Exponent, p.JitterRatio, p.Deadline = 0, 0, 1, 1, 0, time.Microsecond
	require.NoError(t, p.Validate())
	p.JitterRatio = 1
	require.NoError(t, p.Validate())
}

// The formulas of docs/design.md#backoff-math, written out for one policy of each strategy.
func TestStrategiesFollowTheFormulas(t *testing.T) {
	t.Parallel()
	p := policy.Defaults()
	p.Base, p.Max, p.Multiplier, p.Exponent = 2*time.Second, time.Hour, 3, 3
	p.Schedule = []time.Duration{5 * time.Second, time.Second}
	for n := 1; n <= 6; n++ {
		want := map[policy.Strategy]time.Duration{
			policy.StrategyNone:        0,
			policy.StrategyFixed:       2 * time.Second,
			policy.StrategyLinear:      time.Duration(n) * 2 * time.Second,
			policy.StrategyExponential: min(time.Duration(math.Pow(3, float64(n-1)))*2*time.Second, time.Hour),
			policy.StrategyPolynomial:  min(time.Duration(n*n*n)*2*time.Second, time.Hour),
			policy.StrategySchedule:    map[bool]time.Duration{true: 5 * time.Second, false: time.Second}[n == 1],
		}
		for _, s := range policy.Strategies() {
			p.Strategy = s
			require.Equal(t, want[s], p.BaseDelay(n), "%s attempt %d", s, n)
			require.Equal(t, want[s], p.Delay(n, 99), "%s attempt %d without jitter", s, n)
		}
	}
}

func TestJitterStaysInItsRange(t *testing.T) {
	t.Parallel()
	p := policy.Defaults()
	p.Strategy, p.Base, p.Max, p.JitterRatio = policy.StrategyFixed, 10*time.Second, 10500*time.Millisecond, 0.1
	ranges := map[policy.Jitter][2]time.Duration{
		policy.JitterNone:         {10 * time.Second, 10 * time.Second},
		policy.JitterFull:         {0, 10 * time.Second},
		policy.JitterEqual:        {5 * time.Second, 10 * time.Second},
		policy.JitterProportional: {9 * time.Second, 10500 * time.Millisecond}, // 11s clamped to max
	}
	for j, r := range ranges {
		p.Jitter = j
		lo, hi := p.DelayRange(1)
		require.GreaterOrEqual(t, lo, r[0], j)
		require.LessOrEqual(t, hi, r[1], j)
		seen := map[time.Duration]bool{}
		for seed := int64(0); seed < 2000; seed++ {
			d := p.Delay(1, seed)
			require.GreaterOrEqual(t, d, lo, "%s seed %d", j, seed)
			require.LessOrEqual(t, d, hi, "%s seed %d", j, seed)
			seen[d] = true
		}
		if j == policy.JitterNone {
			require.Len(t, seen, 1)
		} else {
			require.Greater(t, len(seen), 1000, "%s must spread seeds", j)
		}
	}
}

func TestJitterUnitMatchesDesignExample(t *testing.T) {
	t.Parallel()
	// md5("42:3") = 3f473d2e…; 0x3f473d2e / 2^32.
	require.Equal(t, float64(0x3f473d2e)/4294967296.0, policy.JitterUnit(42, 3))
	for seed := int64(-50); seed < 50; seed++ {
		u := policy.JitterUnit(seed, 1)
		require.True(t, u >= 0 && u < 1, "u=%v", u)
	}
}

func TestAttemptOutsideRangeIsClamped(t *testing.T) {
	t.Parallel()
	p := policy.Profiles()["aggressive"]
	require.Equal(t, p.Delay(1, 7), p.Delay(0, 7))
	require.Equal(t, p.Delay(1, 7), p.Delay(-100, 7))
	require.Equal(t, p.Delay(policy.MaxAttempt, 7), p.Delay(math.MaxInt, 7))
	require.Equal(t, p.Max, p.BaseDelay(math.MaxInt))
}

func TestInvalidPolicyStillGivesABoundedDelay(t *testing.T) {
	t.Parallel()
	p := policy.Policy{Strategy: "nope", Base: -time.Hour, Multiplier: math.NaN(), Max: -time.Second, Jitter: "what", JitterRatio: math.Inf(1)}
	require.Equal(t, time.Duration(0), p.Delay(3, 1))
	p = policy.Policy{Strategy: policy.StrategyExponential, Base: time.Second, Multiplier: math.Inf(1), Max: time.Minute, Jitter: policy.JitterProportional, JitterRatio: 7}
	require.LessOrEqual(t, p.Delay(5, 1), time.Minute)
	p.Strategy, p.Schedule = policy.StrategySchedule, nil
	require.Equal(t, time.Duration(0), p.Delay(5, 1))
}

func TestDelayDoesNotAllocate(t *testing.T) {
	p := policy.Profiles()["moderate"]
	allocs := testing.AllocsPerRun(1000, func() { _ = p.Delay(4, 123456789) })
	require.Zero(t, allocs)
}

// BenchmarkDelay is the mirror's cost per delay (target: under 1 µs, no
// allocation): go test ./client/policy -run '^$' -bench Delay -benchtime 200ms
func BenchmarkDelay(b *testing.B) {
	profiles := policy.Profiles()
	for _, name := range []string{"moderate", "conservative"} {
		p := profiles[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var sink time.Duration
			for i := 0; b.Loop(); i++ {
				sink += p.Delay(i%p.MaxAttempts+1, int64(i))
			}
			_ = sink
		})
	}
}

// The delays job 42 gets under the moderate profile: the same numbers as
// SELECT * FROM backoff.schedule('moderate', 5, 42).
func ExamplePolicy_Delay() {
	p := policy.Profiles()["moderate"] // 1s × 2^(n−1), max 60s, ±10% jitter
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Println(attempt, p.Delay(attempt, 42))
	}
	// Output:
	// 1 969.573ms
	// 2 1.98724s
	// 3 3.797744s
	// 4 8.193734s
	// 5 15.148857s
}

// pulse's attempts² seconds as a policy: 1s, 4s, 9s.
func ExamplePolicy_BaseDelay() {
	square := policy.Defaults()
	square.Strategy, square.Exponent, square.Max = policy.StrategyPolynomial, 2, time.Hour
	for attempt := 1; attempt <= 3; attempt++ {
		fmt.Println(square.BaseDelay(attempt))
	}
	// Output:
	// 1s
	// 4s
	// 9s
}
