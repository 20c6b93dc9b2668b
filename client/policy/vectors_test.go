package policy_test

import (
	"crypto/md5"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
	vectors "github.com/pgbackoff/pgbackoff/internal/policyvectors"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json and docs/policies.md from the reference derivations")

const vectorsPath = "testdata/vectors.json"

// TestVectorsFileUpToDate derives every expected value of the shared vectors
// with exact rational arithmetic (math/big) from the formulas of docs/design.md#backoff-math,
// independently of both implementations, and fails when the committed file
// differs. Values copied from the seeds' design records are checked against
// the derivation as literals.
func TestVectorsFileUpToDate(t *testing.T) {
	t.Parallel()
	file := buildVectors(t)
	got, err := file.Marshal()
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(vectorsPath, got, 0o644))
	}
	want, err := os.ReadFile(vectorsPath)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%s is stale; rerun with -update", vectorsPath)
}

// TestVectors checks the Go mirror against every vector of the shared file.
func TestVectors(t *testing.T) {
	t.Parallel()
	file, err := vectors.Load(vectorsPath)
	require.NoError(t, err)
	require.NotEmpty(t, file.Cases)
	for _, c := range file.Cases {
		p := c.Policy.Policy()
		require.NoError(t, p.Validate(), c.Name)
		got := p.Delay(c.Attempt, c.Seed)
		require.Equal(t, time.Duration(c.ExpectedUS)*time.Microsecond, got, "%s (attempt %d, seed %d)", c.Name, c.Attempt, c.Seed)
		if c.Profile != "" {
			require.Equal(t, got, policy.Profiles()[c.Profile].Delay(c.Attempt, c.Seed), c.Name)
		}
	}
	for _, u := range file.Units {
		require.Equal(t, float64(u.Expected)/4294967296.0, policy.JitterUnit(u.Seed, u.Attempt), "seed %d attempt %d", u.Seed, u.Attempt)
	}
}

// ---- the reference derivation -------------------------------------------

// hand are values written down from the seeds' design records, not derived:
// the derivation must reproduce them.
type hand struct {
	attempt int
	us      int64
}

func buildVectors(t *testing.T) vectors.File {
	t.Helper()
	const s, ms = int64(1_000_000), int64(1_000)
	hundredYears := int64(policy.MaxDuration / time.Microsecond)
	file := vectors.File{
		Comment: "Shared test vectors of the backoff math (docs/design.md#backoff-math): policy, seed, attempt → expected microseconds. " +
			"Derived with exact rational arithmetic by client/policy/vectors_test.go (go test ./client/policy -run TestVectorsFileUpToDate -update); " +
			"checked against the Go mirror (client/policy) and PostgreSQL (internal/sqltest/backoffmath).",
	}
	add := func(name, source, profile string, p vectors.Policy, seeds []int64, attempts []int, hands ...hand) {
		handUS := map[int]int64{}
		for _, h := range hands {
			handUS[h.attempt] = h.us
		}
		for _, seed := range seeds {
			for _, a := range attempts {
				exp, ok := exactDelay(t, p, a, seed)
				if h, isHand := handUS[a]; isHand {
					require.True(t, ok, "%s attempt %d: a record's value must be derivable", name, a)
					require.Equal(t, h, exp, "%s attempt %d: the derivation disagrees with the record", name, a)
				}
				if !ok {
					file.LeftOut++
					continue
				}
				file.Cases = append(file.Cases, vectors.Case{
					Name: fmt.Sprintf("%s #%d seed %d", name, a, seed), Source: source, Profile: profile,
					Policy: p, Seed: seed, Attempt: a, ExpectedUS: exp,
				})
			}
		}
	}
	pol := func(strategy string, base, maxUS int64, jitter string) vectors.Policy {
		return vectors.Policy{Strategy: strategy, BaseUS: base, Multiplier: 2, Exponent: 2, MaxUS: maxUS, Jitter: jitter, JitterRatio: 0.1}
	}

	// pulse ADR-0006: next_run_at = now() + attempts² seconds (1s, 4s, 9s).
	pulse := pol("polynomial", s, 3600*s, "none")
	add("pulse attempts²", "pulse ADR-0006: attempts² seconds: 1s, 4s, 9s", "", pulse, []int64{0, 42},
		[]int{1, 2, 3, 4}, hand{1, 1 * s}, hand{2, 4 * s}, hand{3, 9 * s}, hand{4, 16 * s})

	// duroxide: Exponential { base 100ms, multiplier 2.0, max 30s } is the default.
	dx := pol("exponential", 100*ms, 30*s, "none")
	add("duroxide default exponential", "duroxide RetryPolicy: base 100ms × 2^(attempt−1), capped at 30s", "", dx, []int64{0},
		[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 64, 1000, math.MaxInt32},
		hand{1, 100 * ms}, hand{2, 200 * ms}, hand{3, 400 * ms}, hand{4, 800 * ms}, hand{5, 1600 * ms},
		hand{6, 3200 * ms}, hand{7, 6400 * ms}, hand{8, 12800 * ms}, hand{9, 25600 * ms}, hand{10, 30 * s},
		hand{math.MaxInt32, 30 * s})
	dxFixed := pol("fixed", 500*ms, 30*s, "none")
	add("duroxide fixed", "duroxide BackoffStrategy::Fixed { delay 500ms }", "", dxFixed, []int64{0}, []int{1, 2, 50},
		hand{1, 500 * ms}, hand{2, 500 * ms}, hand{50, 500 * ms})
	dxLinear := pol("linear", s, 5*s, "none")
	add("duroxide linear", "duroxide BackoffStrategy::Linear { base 1s, max 5s }: base × attempt, capped", "", dxLinear, []int64{0},
		[]int{1, 2, 3, 5, 6, math.MaxInt32}, hand{1, s}, hand{2, 2 * s}, hand{3, 3 * s}, hand{5, 5 * s}, hand{6, 5 * s})
	add("duroxide none", "duroxide BackoffStrategy::None: no delay", "", pol("none", s, 30*s, "none"), []int64{0}, []int{1, 7}, hand{1, 0}, hand{7, 0})

	// workflow ADR-003: FIXED baseDelay, LINEAR baseDelay × attempt,
	// EXPONENTIAL baseDelay × 2^(attempt−1), maxDelayMs cap; jitter
	// multiplies by [0.5, 1.5) then clamps: proportional with r = 0.5.
	wfLinear := pol("linear", 1000*ms, 60000*ms, "none")
	add("workflow LINEAR", "workflow ADR-003: delay = baseDelay × attempt", "", wfLinear, []int64{0}, []int{1, 2, 3, 60, 61},
		hand{1, 1000 * ms}, hand{2, 2000 * ms}, hand{3, 3000 * ms}, hand{60, 60000 * ms}, hand{61, 60000 * ms})
	wfExp := pol("exponential", 1000*ms, 60000*ms, "none")
	add("workflow EXPONENTIAL", "workflow ADR-003: delay = baseDelay × 2^(attempt−1), capped at maxDelayMs", "", wfExp, []int64{0},
		[]int{1, 2, 3, 4, 5, 6, 7, 100},
		hand{1, 1000 * ms}, hand{2, 2000 * ms}, hand{3, 4000 * ms}, hand{4, 8000 * ms}, hand{5, 16000 * ms},
		hand{6, 32000 * ms}, hand{7, 60000 * ms}, hand{100, 60000 * ms})
	add("workflow FIXED", "workflow ADR-003: delay = baseDelay", "", pol("fixed", 1000*ms, 60000*ms, "none"), []int64{0}, []int{1, 9},
		hand{1, 1000 * ms}, hand{9, 1000 * ms})
	wfJitter := wfExp
	wfJitter.Jitter, wfJitter.JitterRatio = "proportional", 0.5
	add("workflow EXPONENTIAL with jitter", "workflow ADR-003: × factor in [0.5, 1.5), then clamped to maxDelayMs", "", wfJitter,
		[]int64{0, 1, 42, 1001}, []int{1, 3, 6, 7})

	// tasker-core TAS-57: Rust path default_backoff_seconds [1,2,4,8,16,32],
	// max 60s, jitter 10%; SQL fallback multiplier^attempts seconds capped
	// at 60 (= exponential with base 2s).
	tkSchedule := pol("schedule", 0, 60*s, "none")
	tkSchedule.ScheduleUS = []int64{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s}
	add("tasker-core default_backoff_seconds", "tasker-core TAS-57: default_backoff_seconds = [1, 2, 4, 8, 16, 32], last repeats", "", tkSchedule,
		[]int64{0}, []int{1, 2, 3, 4, 5, 6, 7, 100},
		hand{1, s}, hand{2, 2 * s}, hand{3, 4 * s}, hand{4, 8 * s}, hand{5, 16 * s}, hand{6, 32 * s}, hand{7, 32 * s}, hand{100, 32 * s})
	tkJitter := tkSchedule
	tkJitter.Jitter = "proportional"
	add("tasker-core default_backoff_seconds with 10% jitter", "tasker-core TAS-57: jitter_max_percentage = 0.1", "", tkJitter,
		[]int64{0, 42, -3}, []int{1, 6, 7})
	tkFallback := pol("exponential", 2*s, 60*s, "none")
	add("tasker-core SQL fallback", "tasker-core TAS-57: LEAST(2^attempts s, 60 s) = exponential base 2s", "", tkFallback,
		[]int64{0}, []int{1, 2, 3, 4, 5, 6, 20, math.MaxInt32},
		hand{1, 2 * s}, hand{2, 4 * s}, hand{3, 8 * s}, hand{4, 16 * s}, hand{5, 32 * s}, hand{6, 60 * s}, hand{20, 60 * s}, hand{math.MaxInt32, 60 * s})

	// The shipped profiles, every attempt they allow, a few seeds.
	for _, name := range policy.ProfileNames() {
		p := policy.Profiles()[name]
		var attempts []int
		for a := 1; a <= p.MaxAttempts+1; a++ {
			attempts = append(attempts, a)
		}
		add("profile "+name, "shipped profile (sql/migrations/001_schema.sql)", name, vectors.FromPolicy(p),
			[]int64{0, 42, 12345, -1, math.MaxInt64}, attempts)
	}

	// Every strategy × every jitter.
	seeds := []int64{0, 1, 42, -42, 987654321, math.MinInt64, math.MaxInt64}
	for _, st := range policy.Strategies() {
		for _, j := range policy.Jitters() {
			p := vectors.Policy{Strategy: string(st), BaseUS: 1500 * ms, Multiplier: 1.5, Exponent: 3,
				ScheduleUS: []int64{250 * ms, 0, 7 * s, 3 * s}, MaxUS: 120 * s, Jitter: string(j), JitterRatio: 0.25}
			add(fmt.Sprintf("matrix %s/%s", st, j), "every strategy × every jitter", "", p, seeds, []int{1, 2, 3, 4, 5, 13, 5000, math.MaxInt32})
		}
	}

	// Caps, zeros, limits and huge attempts.
	edge := []struct {
		name string
		p    vectors.Policy
	}{
		{"max 0", vectors.Policy{Strategy: "exponential", BaseUS: s, Multiplier: 2, Exponent: 2, MaxUS: 0, Jitter: "proportional", JitterRatio: 1}},
		{"base 0", vectors.Policy{Strategy: "exponential", BaseUS: 0, Multiplier: 1000, Exponent: 2, MaxUS: 60 * s, Jitter: "full", JitterRatio: 0.1}},
		{"multiplier 1000 to 100 years", vectors.Policy{Strategy: "exponential", BaseUS: 1, Multiplier: 1000, Exponent: 2, MaxUS: hundredYears, Jitter: "equal", JitterRatio: 0.1}},
		{"multiplier 1", vectors.Policy{Strategy: "exponential", BaseUS: 3 * s, Multiplier: 1, Exponent: 2, MaxUS: 60 * s, Jitter: "none", JitterRatio: 0.1}},
		{"multiplier 1.1", vectors.Policy{Strategy: "exponential", BaseUS: s, Multiplier: 1.1, Exponent: 2, MaxUS: 3600 * s, Jitter: "none", JitterRatio: 0.1}},
		{"multiplier 3.7 proportional", vectors.Policy{Strategy: "exponential", BaseUS: 123457, Multiplier: 3.7, Exponent: 2, MaxUS: 86400 * s, Jitter: "proportional", JitterRatio: 0.3}},
		{"polynomial exponent 10", vectors.Policy{Strategy: "polynomial", BaseUS: 1, Multiplier: 2, Exponent: 10, MaxUS: hundredYears, Jitter: "none", JitterRatio: 0.1}},
		{"linear 1s to 100 years", vectors.Policy{Strategy: "linear", BaseUS: s, Multiplier: 2, Exponent: 2, MaxUS: hundredYears, Jitter: "full", JitterRatio: 0.1}},
		{"fixed 100 years proportional 1", vectors.Policy{Strategy: "fixed", BaseUS: hundredYears, Multiplier: 2, Exponent: 2, MaxUS: hundredYears, Jitter: "proportional", JitterRatio: 1}},
		{"proportional smallest ratio", vectors.Policy{Strategy: "fixed", BaseUS: hundredYears, Multiplier: 2, Exponent: 2, MaxUS: hundredYears, Jitter: "proportional", JitterRatio: policy.MinJitterRatio}},
		{"proportional ratio 0", vectors.Policy{Strategy: "linear", BaseUS: 333333, Multiplier: 2, Exponent: 2, MaxUS: 10 * s, Jitter: "proportional", JitterRatio: 0}},
		{"schedule of one", vectors.Policy{Strategy: "schedule", ScheduleUS: []int64{2500 * ms}, Multiplier: 2, Exponent: 2, MaxUS: 2 * s, Jitter: "equal", JitterRatio: 0.1}},
	}
	for _, e := range edge {
		add(e.name, "caps, zeros, limits, huge attempts", "", e.p, []int64{0, 77}, []int{1, 2, 10, 31, 32, 33, 1000, 65536, math.MaxInt32 - 1, math.MaxInt32})
	}

	// u for a few (seed, attempt), hand-computed with `printf 'SEED:ATTEMPT' | md5sum | cut -c1-8`.
	for _, u := range []struct {
		seed    int64
		attempt int
		hex     string
	}{
		{42, 3, "3f473d2e"}, {0, 1, "81c99680"}, {0, 2, "d04d9344"}, {-7, 1, "b0b581e8"},
		{math.MaxInt64, math.MaxInt32, "b7f14612"}, {math.MinInt64, 1, "7865c224"},
	} {
		v, err := strconv.ParseUint(u.hex, 16, 32)
		require.NoError(t, err)
		require.Equal(t, v, referenceUnit(u.seed, u.attempt).Num().Uint64()*(1<<32)/referenceUnit(u.seed, u.attempt).Denom().Uint64())
		file.Units = append(file.Units, vectors.Unit{Seed: u.seed, Attempt: u.attempt, Expected: uint32(v)})
	}

	file.StepRetry = stepRetryVectors()
	return file
}

// exactDelay is docs/design.md#backoff-math in exact rational arithmetic: the reference the
// vectors come from. Floats enter only as the exact values of the policy's
// float64 parameters.
func exactDelay(t *testing.T, p vectors.Policy, attempt int, seed int64) (int64, bool) {
	t.Helper()
	n := big.NewRat(int64(attempt), 1)
	base := big.NewRat(p.BaseUS, 1)
	maxUS := big.NewRat(p.MaxUS, 1)
	var d *big.Rat
	switch p.Strategy {
	case "none":
		d = new(big.Rat)
	case "fixed":
		d = base
	case "linear":
		d = new(big.Rat).Mul(base, n)
	case "exponential":
		d = new(big.Rat).Set(base)
		m := new(big.Rat).SetFloat64(p.Multiplier)
		if m.Cmp(big.NewRat(1, 1)) != 0 && base.Sign() != 0 {
			for k := 1; k < attempt && d.Cmp(maxUS) <= 0; k++ {
				d.Mul(d, m)
			}
		}
	case "polynomial":
		d = new(big.Rat).Set(base)
		for k := 0; k < p.Exponent; k++ {
			d.Mul(d, n)
		}
	case "schedule":
		d = big.NewRat(p.ScheduleUS[min(attempt, len(p.ScheduleUS))-1], 1)
	default:
		t.Fatalf("unknown strategy %q", p.Strategy)
	}
	if d.Cmp(maxUS) > 0 {
		d = maxUS
	}
	u := referenceUnit(seed, attempt)
	half := new(big.Rat).Quo(d, big.NewRat(2, 1))
	switch p.Jitter {
	case "none":
	case "full":
		d = new(big.Rat).Mul(d, u)
	case "equal":
		d = new(big.Rat).Add(half, new(big.Rat).Mul(half, u))
	case "proportional":
		r := new(big.Rat).SetFloat64(p.JitterRatio)
		f := new(big.Rat).Sub(big.NewRat(1, 1), r)
		f.Add(f, new(big.Rat).Mul(new(big.Rat).Mul(big.NewRat(2, 1), r), u))
		d = new(big.Rat).Mul(d, f)
		if d.Cmp(maxUS) > 0 {
			d = maxUS
		}
	default:
		t.Fatalf("unknown jitter %q", p.Jitter)
	}
	floor := new(big.Int).Quo(d.Num(), d.Denom()) // d >= 0: truncation is floor
	// A value within float64 rounding (a few ulps of each of some 60
	// operations) of an integer depends on the rounding, not on the formula:
	// such a vector says nothing independent, so it is left out. Exact
	// integers stay: they come from exact integer arithmetic.
	frac, _ := new(big.Rat).Sub(d, new(big.Rat).SetInt(floor)).Float64()
	val, _ := d.Float64()
	if frac != 0 && (frac < val*1e-14 || 1-frac < val*1e-14) {
		return -1, false
	}
	return floor.Int64(), true
}

// referenceUnit is u as an exact fraction, via fmt and hex rather than the
// code path of policy.JitterUnit.
func referenceUnit(seed int64, attempt int) *big.Rat {
	sum := md5.Sum([]byte(fmt.Sprintf("%d:%d", seed, attempt)))
	v, err := strconv.ParseUint(hex.EncodeToString(sum[:])[:8], 16, 64)
	if err != nil {
		panic(err)
	}
	return new(big.Rat).SetFrac(new(big.Int).SetUint64(v), new(big.Int).Lsh(big.NewInt(1), 32))
}

// stepRetryVectors are cases of backoff.calculate_step_next_retry_time,
// worked out by hand from tasker-core's rule; the SQL tests check them
// against both overloads.
func stepRetryVectors() []vectors.StepRetry {
	i := func(v int) *int { return &v }
	ts := func(v string) *string { return &v }
	t0 := "2025-01-01T00:00:00Z"
	return []vectors.StepRetry{
		{Name: "explicit request wins", Request: i(30), LastAttemptedAt: ts("2025-01-01T00:05:00Z"), FailureTime: ts(t0), Attempts: i(3),
			MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:05:30Z")},
		{Name: "explicit request of 0", Request: i(0), LastAttemptedAt: ts(t0), FailureTime: ts(t0), Attempts: i(9),
			MaxSeconds: 60, Multiplier: "2.0", Expected: ts(t0)},
		{Name: "request without last_attempted_at falls back", Request: i(30), FailureTime: ts(t0), Attempts: i(3),
			MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:00:08Z")},
		{Name: "fallback 2^0", FailureTime: ts(t0), Attempts: i(0), MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:00:01Z")},
		{Name: "fallback 2^1", FailureTime: ts(t0), Attempts: i(1), MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:00:02Z")},
		{Name: "fallback 2^5", FailureTime: ts(t0), Attempts: i(5), MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:00:32Z")},
		{Name: "fallback capped at the default 60", FailureTime: ts(t0), Attempts: i(6), MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:01:00Z")},
		{Name: "fallback at the edge of the log test", FailureTime: ts(t0), Attempts: i(7), MaxSeconds: 128, Multiplier: "2.0", Expected: ts("2025-01-01T00:02:08Z")},
		{Name: "fallback huge attempts", FailureTime: ts(t0), Attempts: i(math.MaxInt32), MaxSeconds: 60, Multiplier: "2.0", Expected: ts("2025-01-01T00:01:00Z")},
		{Name: "fallback huge attempts, multiplier 1", FailureTime: ts(t0), Attempts: i(math.MaxInt32), MaxSeconds: 60, Multiplier: "1", Expected: ts("2025-01-01T00:00:01Z")},
		{Name: "fallback huge attempts, multiplier 1.0000000001", FailureTime: ts(t0), Attempts: i(math.MaxInt32), MaxSeconds: 60, Multiplier: "1.0000000001",
			Expected: ts("2025-01-01T00:00:01.23955Z")}, // e^(2147483647·1e-10) = 1.2395499… s, to the µs
		{Name: "fallback huge multiplier", FailureTime: ts(t0), Attempts: i(2), MaxSeconds: 60, Multiplier: "1e400", Expected: ts("2025-01-01T00:01:00Z")},
		{Name: "fallback fractional 1.1^3 = 1.331 s", FailureTime: ts(t0), Attempts: i(3), MaxSeconds: 60, Multiplier: "1.1", Expected: ts("2025-01-01T00:00:01.331Z")},
		{Name: "fallback fractional 1.5^3 = 3.375 s", FailureTime: ts(t0), Attempts: i(3), MaxSeconds: 60, Multiplier: "1.5", Expected: ts("2025-01-01T00:00:03.375Z")},
		{Name: "fallback attempts NULL is max, as LEAST ignores NULL", FailureTime: ts(t0), MaxSeconds: 45, Multiplier: "2.0", Expected: ts("2025-01-01T00:00:45Z")},
		{Name: "nothing known", Attempts: i(3), MaxSeconds: 60, Multiplier: "2.0"},
		{Name: "negative attempts", FailureTime: ts(t0), Attempts: i(-1), MaxSeconds: 60, Multiplier: "2.0", SQLState: "22023", ErrorMentions: "attempts"},
		{Name: "negative attempts on the explicit path", Request: i(5), LastAttemptedAt: ts(t0), Attempts: i(-1), MaxSeconds: 60, Multiplier: "2.0", SQLState: "22023", ErrorMentions: "attempts"},
		{Name: "max 0", FailureTime: ts(t0), Attempts: i(1), MaxSeconds: 0, Multiplier: "2.0", SQLState: "22023", ErrorMentions: "p_max_backoff_seconds"},
		{Name: "max negative", FailureTime: ts(t0), Attempts: i(1), MaxSeconds: -5, Multiplier: "2.0", SQLState: "22023", ErrorMentions: "p_max_backoff_seconds"},
		{Name: "multiplier below 1", FailureTime: ts(t0), Attempts: i(1), MaxSeconds: 60, Multiplier: "0.5", SQLState: "22023", ErrorMentions: "p_backoff_multiplier"},
		{Name: "multiplier NaN", FailureTime: ts(t0), Attempts: i(1), MaxSeconds: 60, Multiplier: "NaN", SQLState: "22023", ErrorMentions: "p_backoff_multiplier"},
		{Name: "multiplier Infinity", FailureTime: ts(t0), Attempts: i(1), MaxSeconds: 60, Multiplier: "Infinity", SQLState: "22023", ErrorMentions: "p_backoff_multiplier"},
		{Name: "negative request", Request: i(-1), LastAttemptedAt: ts(t0), Attempts: i(1), MaxSeconds: 60, Multiplier: "2.0", SQLState: "22023", ErrorMentions: "backoff_request_seconds"},
	}
}
