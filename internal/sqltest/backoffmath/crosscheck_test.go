package backoffmath_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
	vectors "github.com/pgbackoff/pgbackoff/internal/policyvectors"
)

// crossCheckCases is how many random cases TestCrossCheck compares.
const crossCheckCases = 12000

// randomPolicy draws a valid policy of any strategy and jitter, its values
// spread over small, typical and extreme magnitudes.
func randomPolicy(r *rand.Rand) policy.Policy {
	us := func(limit int64) time.Duration { return time.Duration(r.Int64N(limit+1)) * time.Microsecond }
	duration := func() time.Duration {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return us(1_000_000) // up to 1s
		case 2:
			return us(3_600_000_000) // up to 1h
		case 3:
			return us(int64(policy.MaxDuration / time.Microsecond))
		default:
			return time.Duration(1+r.IntN(120)) * 100 * time.Millisecond
		}
	}
	p := policy.Defaults()
	p.Name = "random"
	p.Strategy = policy.Strategies()[r.IntN(6)]
	p.Jitter = policy.Jitters()[r.IntN(4)]
	p.Base = duration()
	p.Max = duration()
	if r.IntN(4) == 0 {
		p.Max = policy.MaxDuration
	}
	switch r.IntN(6) {
	case 0:
		p.Multiplier = 1
	case 1:
		p.Multiplier = []float64{1.5, 2, 3, 10, 1000}[r.IntN(5)]
	case 2:
		p.Multiplier = 1 + r.Float64()*1e-9
	case 3:
		p.Multiplier = 1 + r.Float64()*999
	default:
		p.Multiplier = 1 + r.Float64()*4
	}
	p.Exponent = 1 + r.IntN(policy.MaxExponent)
	p.Schedule = nil
	for range 1 + r.IntN(8) {
		p.Schedule = append(p.Schedule, duration())
	}
	switch r.IntN(5) {
	case 0:
		p.JitterRatio = 0
	case 1:
		p.JitterRatio = []float64{policy.MinJitterRatio, 1, 0.5, 0.1}[r.IntN(4)]
	default:
		p.JitterRatio = policy.MinJitterRatio + r.Float64()*(1-policy.MinJitterRatio)
	}
	return p
}

// TestCrossCheck compares the Go mirror with PostgreSQL on random policies,
// attempts and seeds, all in one round trip: zero differences allowed, to
// the microsecond. BACKOFF_CROSSCHECK_SEED replays a run.
func TestCrossCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)

	r := crossCheckRand(t, "cross-check", 0x9e3779b97f4a7c15)

	cases := make([]delayCase, 0, crossCheckCases)
	var args delayArgs
	for len(cases) < crossCheckCases {
		p := randomPolicy(r)
		require.NoError(t, p.Validate())
		attempt := 1 + r.IntN(1000)
		if r.IntN(50) == 0 {
			attempt = 1 + r.IntN(math.MaxInt32)
		}
		c := delayCase{p: p, attempt: attempt, seed: int64(r.Uint64())}
		cases = append(cases, c)
		args.add(vectors.FromPolicy(p), c.attempt, c.seed)
	}

	got := sqlDelays(t, ctx, pool, `SELECT backoff._delay_us(strategy, base, multiplier, exponent, schedule::int8[], max_us, jitter, ratio, attempt, seed)
		FROM `+unnestArgs+` ORDER BY i`, &args)

	mismatches := countMismatches(t, "", cases, got)
	t.Logf("cross-check: %d cases, %d mismatches", len(cases), mismatches)
	require.Zero(t, mismatches)
}

// crossCheckRand is the random source of a cross-check: a new seed every
// run, logged under label, or BACKOFF_CROSSCHECK_SEED's to replay a run;
// salt makes each check's stream its own.
func crossCheckRand(t *testing.T, label string, salt uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BACKOFF_CROSSCHECK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("%s: BACKOFF_CROSSCHECK_SEED=%d", label, seed)
	return rand.New(rand.NewPCG(seed, seed^salt))
}

// delayCase is one policy, counted attempt and jitter seed of a
// cross-check.
type delayCase struct {
	p       policy.Policy
	attempt int
	seed    int64
}

// countMismatches compares PostgreSQL's delays (got, in microseconds, in
// the order of cases) with the Go mirror's, and reports the first ten
// differences, each prefixed with prefix.
func countMismatches(t *testing.T, prefix string, cases []delayCase, got []int64) int {
	t.Helper()
	mismatches := 0
	for i, c := range cases {
		want := int64(c.p.Delay(c.attempt, c.seed) / time.Microsecond)
		if got[i] != want {
			mismatches++
			if mismatches <= 10 {
				t.Errorf("%scase %d: %+v attempt %d seed %d: PostgreSQL %d µs, Go %d µs", prefix, i, c.p, c.attempt, c.seed, got[i], want)
			}
		}
	}
	return mismatches
}
