package policy

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"strconv"
	"time"
)

// The arithmetic below mirrors sql/functions/_delay_us.sql operation for
// operation (docs/adr/0004-identical-math-in-sql-and-go.md): microseconds as
// float64, one rounding per operator. Go may fuse x*y+z into one FMA
// instruction on some architectures; an explicit float64(...) conversion
// forbids that, and is written wherever a product meets a sum.

// powerLimit is where clampedPower saturates: 2^60.
const powerLimit = 1152921504606846976.0

// maxUnit is the largest u JitterUnit returns: (2^32 − 1) / 2^32.
const maxUnit = 4294967295.0 / 4294967296.0

// Delay is the delay before the retry that follows failed attempt attempt
// (1-based), jitter included and deterministic from seed (normally the job
// id): backoff.retry_delay(policy, attempt, seed) to the microsecond.
// An attempt below 1 counts as 1, above MaxAttempt as MaxAttempt. The result
// is a whole number of microseconds in [0, Max].
func (p Policy) Delay(attempt int, seed int64) time.Duration {
	n := clampAttempt(attempt)
	c := p.computable()
	d := c.capped(n)
	if c.jitter != JitterNone {
		d = c.jittered(d, JitterUnit(seed, n))
	}
	return microseconds(d)
}

// BaseDelay is the delay for failed attempt attempt after the cap and before
// jitter: what every seed spreads around. Non-decreasing in attempt for every
// strategy but schedule, which follows its list as written.
func (p Policy) BaseDelay(attempt int) time.Duration {
	return microseconds(p.computable().capped(clampAttempt(attempt)))
}

// DelayRange is the least and the greatest Delay that any seed gives for
// attempt: the spread jitter puts on BaseDelay.
func (p Policy) DelayRange(attempt int) (lo, hi time.Duration) {
	c := p.computable()
	d := c.capped(clampAttempt(attempt))
	if c.jitter == JitterNone {
		return microseconds(d), microseconds(d)
	}
	return microseconds(c.jittered(d, 0)), microseconds(c.jittered(d, maxUnit))
}

// JitterUnit is the u in [0, 1) that jitter uses for seed and attempt: the
// first 8 hex digits of md5 of the text "SEED:ATTEMPT" (for seed 42 and
// attempt 3, md5("42:3")) read as an unsigned 32-bit integer, divided by
// 2^32. It is exactly backoff._jitter_unit in SQL.
func JitterUnit(seed int64, attempt int) float64 {
	var buf [48]byte
	b := strconv.AppendInt(buf[:0], seed, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(attempt), 10)
	sum := md5.Sum(b)
	return float64(binary.BigEndian.Uint32(sum[:4])) / 4294967296.0
}

// computable is a policy reduced to what the math needs, in microseconds,
// with every value brought inside the limits Validate enforces, so that no
// input can make the arithmetic panic, go negative or pass the cap.
type computable struct {
	strategy   Strategy
	base       int64
	multiplier float64
	exponent   int
	schedule   []time.Duration
	max        float64
	jitter     Jitter
	ratio      float64
}

func (p Policy) computable() computable {
	c := computable{
		strategy:   p.Strategy,
		base:       durationUS(p.Base),
		multiplier: p.Multiplier,
		exponent:   p.Exponent,
		schedule:   p.Schedule,
		max:        float64(durationUS(p.Max)),
		jitter:     p.Jitter,
		ratio:      p.JitterRatio,
	}
	switch {
	case !(c.multiplier >= 1): // also NaN
		c.multiplier = 1
	case c.multiplier > MaxMultiplier:
		c.multiplier = MaxMultiplier
	}
	c.exponent = min(max(c.exponent, 1), MaxExponent)
	switch c.jitter {
	case JitterNone, JitterFull, JitterEqual:
	case JitterProportional:
		switch {
		case !(c.ratio >= MinJitterRatio): // also NaN
			c.ratio = 0
		case c.ratio > 1:
			c.ratio = 1
		}
	default:
		c.jitter = JitterNone
	}
	return c
}

// capped is the delay in microseconds for attempt n (1..MaxAttempt) after
// the cap, before jitter.
func (c computable) capped(n int) float64 {
	var d float64
	switch c.strategy {
	case StrategyFixed:
		d = float64(c.base)
	case StrategyLinear:
		d = float64(c.base) * float64(n)
	case StrategyExponential:
		d = float64(c.base) * clampedPower(c.multiplier, n-1)
	case StrategyPolynomial:
		d = float64(c.base) * clampedPower(float64(n), c.exponent)
	case StrategySchedule:
		if len(c.schedule) > 0 {
			d = float64(durationUS(c.schedule[min(n, len(c.schedule))-1]))
		}
	}
	if d > c.max {
		d = c.max
	}
	return d
}

// jittered applies the jitter to a capped delay d with unit u.
func (c computable) jittered(d, u float64) float64 {
	switch c.jitter {
	case JitterFull:
		d = d * u
	case JitterEqual:
		d = d/2 + float64(d/2*u)
	case JitterProportional:
		d = d * (1 - c.ratio + float64(2*c.ratio*u))
		if d > c.max {
			d = c.max
		}
	}
	return d
}

// clampedPower is x^k for x >= 1 and k >= 0 by binary exponentiation, every
// product clamped at 2^60: backoff._clamped_power. math.Pow rounds
// differently from C's pow(); the same sequence of IEEE multiplications does
// not.
func clampedPower(x float64, k int) float64 {
	result, square := 1.0, x
	for k > 0 {
		if k%2 == 1 {
			result = min(result*square, powerLimit)
		}
		k /= 2
		if k > 0 {
			square = min(square*square, powerLimit)
		}
	}
	return result
}

// clampAttempt brings an attempt number into 1..MaxAttempt.
func clampAttempt(attempt int) int {
	return min(max(attempt, 1), MaxAttempt)
}

// durationUS is d in whole microseconds (truncated, as pgx stores a Go
// duration into an interval), within 0..MaxDuration.
func durationUS(d time.Duration) int64 {
	return int64(min(max(d, 0), MaxDuration) / time.Microsecond)
}

// microseconds rounds a non-negative float64 count of microseconds down to
// a duration, as floor(v_delay)::bigint does.
func microseconds(us float64) time.Duration {
	return time.Duration(math.Floor(us)) * time.Microsecond
}
