package policy_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// FuzzDelay checks, for any policy, attempt and seed (valid or not): no
// panic, never negative, never above Max (nor above the cap when Max is out
// of range), and non-decreasing in the attempt before jitter (schedules
// given in non-decreasing order). The seed corpus runs with every go test;
// go test ./client/policy -run '^$' -fuzz FuzzDelay -fuzztime 30s explores.
func FuzzDelay(f *testing.F) {
	add := func(strategy, jitter uint8, base int64, mult float64, exp int, maxD int64, ratio float64, attempt int, seed int64, s0, s1 int64) {
		f.Add(strategy, jitter, base, mult, exp, maxD, ratio, attempt, seed, s0, s1)
	}
	for st := uint8(0); st < 6; st++ {
		for j := uint8(0); j < 4; j++ {
			add(st, j, int64(time.Second), 2.0, 2, int64(time.Minute), 0.1, 3, 42, int64(time.Second), int64(2*time.Second))
			add(st, j, int64(100*time.Millisecond), 1000, 10, int64(policy.MaxDuration), 1, math.MaxInt32, math.MinInt64, 0, int64(policy.MaxDuration))
		}
	}
	add(3, 3, math.MaxInt64, math.NaN(), -5, math.MaxInt64, math.NaN(), math.MaxInt, math.MaxInt64, math.MinInt64, math.MaxInt64)
	add(3, 1, -1, math.Inf(1), 99, -1, math.Inf(-1), math.MinInt, -1, -1, -1)
	add(3, 0, 1, 1+1e-15, 2, int64(policy.MaxDuration), 1e-300, 1<<30, 0, 0, 0)
	add(4, 2, 1, 2, 10, int64(policy.MaxDuration), 0.5, 100000, 5, 0, 0)
	add(9, 9, 1, 2, 2, 1, 0.5, 0, 0, 0, 0)

	f.Fuzz(func(t *testing.T, strategy, jitter uint8, base int64, mult float64, exp int, maxD int64, ratio float64, attempt int, seed int64, s0, s1 int64) {
		strategies, jitters := policy.Strategies(), policy.Jitters()
		p := policy.Policy{
			Strategy:    policy.Strategy("bogus"),
			Jitter:      policy.Jitter("bogus"),
			Base:        time.Duration(base),
			Multiplier:  mult,
			Exponent:    exp,
			Max:         time.Duration(maxD),
			JitterRatio: ratio,
		}
		if int(strategy) < len(strategies) {
			p.Strategy = strategies[strategy]
		}
		if int(jitter) < len(jitters) {
			p.Jitter = jitters[jitter]
		}
		sched := []time.Duration{time.Duration(s0), time.Duration(s1)}
		slices.Sort(sched)
		p.Schedule = sched

		// The effective cap: Max, within 0..MaxDuration.
		limit := min(max(p.Max, 0), policy.MaxDuration)
		d := p.Delay(attempt, seed)
		if d < 0 || d > limit || (p.Max >= 0 && d > p.Max) {
			t.Fatalf("Delay(%d, %d) = %v outside [0, %v] for %+v", attempt, seed, d, limit, p)
		}
		if d%time.Microsecond != 0 {
			t.Fatalf("Delay(%d, %d) = %v is not whole microseconds", attempt, seed, d)
		}
		lo, hi := p.DelayRange(attempt)
		if d < lo || d > hi {
			t.Fatalf("Delay(%d, %d) = %v outside DelayRange [%v, %v] for %+v", attempt, seed, d, lo, hi, p)
		}
		b := p.BaseDelay(attempt)
		if b < 0 || b > limit {
			t.Fatalf("BaseDelay(%d) = %v outside [0, %v] for %+v", attempt, b, limit, p)
		}
		if attempt < math.MaxInt {
			if next := p.BaseDelay(attempt + 1); next < b {
				t.Fatalf("BaseDelay decreases: attempt %d → %v, attempt %d → %v for %+v", attempt, b, attempt+1, next, p)
			}
		}
		if u := policy.JitterUnit(seed, attempt); !(u >= 0 && u < 1) {
			t.Fatalf("JitterUnit(%d, %d) = %v outside [0, 1)", seed, attempt, u)
		}
	})
}
