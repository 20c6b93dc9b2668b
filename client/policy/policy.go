package policy

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Strategy is how the delay grows with the attempt number.
type Strategy string

// The strategies, with the delay before jitter and cap for failed attempt n.
const (
	StrategyNone        Strategy = "none"        // 0
	StrategyFixed       Strategy = "fixed"       // base
	StrategyLinear      Strategy = "linear"      // base × n
	StrategyExponential Strategy = "exponential" // base × multiplier^(n−1)
	StrategyPolynomial  Strategy = "polynomial"  // base × n^exponent
	StrategySchedule    Strategy = "schedule"    // schedule[min(n, len)−1]
)

// Strategies lists every strategy in documentation order.
func Strategies() []Strategy {
	return []Strategy{StrategyNone, StrategyFixed, StrategyLinear, StrategyExponential, StrategyPolynomial, StrategySchedule}
}

// Jitter is how a capped delay d is spread, with u in [0, 1) from JitterUnit.
type Jitter string

// The jitter kinds.
const (
	JitterNone         Jitter = "none"         // d
	JitterFull         Jitter = "full"         // d × u
	JitterEqual        Jitter = "equal"        // d/2 + d/2 × u
	JitterProportional Jitter = "proportional" // d × (1 − r + 2r × u), capped at max
)

// Jitters lists every jitter kind in documentation order.
func Jitters() []Jitter {
	return []Jitter{JitterNone, JitterFull, JitterEqual, JitterProportional}
}

// Limits shared with the SQL (backoff._delay_us and the CHECKs of
// backoff.policies). They are the one Go copy of the bounds: Validate and
// backoffctl's config check with them, and a test writes policies at and
// past each of them into backoff.policies to prove the table agrees.
const (
	// MaxDuration bounds Base, Max and every Schedule entry: 100 years of
	// 365.25 days (PostgreSQL's interval '100 years'). Every microsecond
	// count up to it is exact in a float64.
	MaxDuration = 876600 * time.Hour
	// MinMultiplier and MaxMultiplier bound Multiplier.
	MinMultiplier = 1.0
	MaxMultiplier = 1000.0
	// MinExponent and MaxExponent bound Exponent.
	MinExponent = 1
	MaxExponent = 10
	// MinJitterRatio is the smallest non-zero JitterRatio: a smaller one
	// underflows float8 in 2·r·u, which PostgreSQL raises as an error.
	MinJitterRatio = 0.000001
	// MaxJitterRatio is the largest JitterRatio.
	MaxJitterRatio = 1.0
	// MaxCount bounds MaxAttempts and MaxLeaseExpiries (their minimum is
	// 1; 0 for MaxLeaseExpiries means no budget): PostgreSQL's integer.
	MaxCount = math.MaxInt32
	// MaxAttempt is the largest attempt number: PostgreSQL's integer.
	// Larger attempts are computed as MaxAttempt.
	MaxAttempt = math.MaxInt32
)

// Policy is one named retry policy: a row of backoff.policies, a
// [policies.NAME] table of backoff.toml.
type Policy struct {
	// Name is the policy's name (the table's primary key).
	Name string
	// Strategy is how the delay grows with the attempt.
	Strategy Strategy
	// Base is the unit of fixed, linear, exponential and polynomial.
	Base time.Duration
	// Multiplier is the growth factor of exponential, 1..1000.
	Multiplier float64
	// Exponent is the power of polynomial, 1..10.
	Exponent int
	// Schedule is the explicit list of delays of strategy schedule; its last
	// entry repeats.
	Schedule []time.Duration
	// Max caps every delay, jitter included (column max_delay).
	Max time.Duration
	// Jitter spreads delays across jobs.
	Jitter Jitter
	// JitterRatio is r of proportional jitter: 0, or MinJitterRatio..1.
	JitterRatio float64
	// MaxAttempts is how many attempts a job gets before it is dead-lettered.
	MaxAttempts int
	// Lease is how long a claim lasts without a heartbeat.
	Lease time.Duration
	// Deadline bounds a job's life from its creation; 0 = no deadline.
	Deadline time.Duration
	// MaxLeaseExpiries dead-letters a job (reason lease_expiries) whose
	// lease expired that many times, a worker that died on it each time;
	// 0 = no such budget (column max_lease_expiries NULL). Only the
	// database uses it: reap decides (docs/adr/0046).
	MaxLeaseExpiries int
}

// Defaults returns the value of every key a policy omits: the column
// DEFAULTs of backoff.policies. Jitter defaults to none, so that a policy
// written as a formula gives that formula's numbers (polynomial, base 1s,
// exponent 2: 1s, 4s, 9s); the shipped profiles all use jitter.
func Defaults() Policy {
	return Policy{
		Strategy:    StrategyExponential,
		Base:        time.Second,
		Multiplier:  2.0,
		Exponent:    2,
		Schedule:    nil,
		Max:         time.Minute,
		Jitter:      JitterNone,
		JitterRatio: 0.1,
		MaxAttempts: 5,
		Lease:       30 * time.Second,
		Deadline:    0,
	}
}

// Profiles returns the shipped profiles, equal to the rows that migration
// 001 seeds: aggressive, moderate, conservative, and default (a copy of
// moderate, the policy of a queue with no mapping).
func Profiles() map[string]Policy {
	aggressive := Defaults()
	aggressive.Name = "aggressive"
	aggressive.Base = 100 * time.Millisecond
	aggressive.Max = 10 * time.Second
	aggressive.Jitter = JitterEqual
	aggressive.MaxAttempts = 10

	moderate := Defaults()
	moderate.Name = "moderate"
	moderate.Max = 60 * time.Second
	moderate.Jitter = JitterProportional
	moderate.JitterRatio = 0.1

	conservative := Defaults()
	conservative.Name = "conservative"
	conservative.Base = 30 * time.Second
	conservative.Max = time.Hour
	conservative.Jitter = JitterFull
	conservative.MaxAttempts = 8
	conservative.Lease = 5 * time.Minute

	def := moderate
	def.Name = "default"

	return map[string]Policy{
		aggressive.Name:   aggressive,
		moderate.Name:     moderate,
		conservative.Name: conservative,
		def.Name:          def,
	}
}

// ProfileNames lists the shipped profiles in documentation order.
func ProfileNames() []string {
	return []string{"aggressive", "moderate", "conservative", "default"}
}

// ErrInvalidPolicy is the sentinel every Validate error matches with
// errors.Is.
var ErrInvalidPolicy = errors.New("policy: invalid")

// FieldError is a Validate error: one field (named as its backoff.toml key)
// and the value that breaks a limit.
type FieldError struct {
	Policy string // the policy's name, may be empty
	Field  string // the TOML key: strategy, base, multiplier, …
	Value  any    // the offending value
	Reason string // what the value must be
}

// Error reads like `policy "x": multiplier must be between 1 and 1000, got "0.5"`.
func (e *FieldError) Error() string {
	return fmt.Sprintf("policy %q: %s %s, got \"%v\"", e.Policy, e.Field, e.Reason, e.Value)
}

// Is makes errors.Is(err, ErrInvalidPolicy) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidPolicy }

// Validate checks the policy against the limits of the SQL: the CHECK
// constraints of backoff.policies and the checks of backoff._delay_us. A
// policy that passes is stored and computed by PostgreSQL exactly as here.
// The error is a *FieldError naming the first bad field.
func (p Policy) Validate() error {
	bad := func(field string, value any, reason string) error {
		return &FieldError{Policy: p.Name, Field: field, Value: value, Reason: reason}
	}
	switch p.Strategy {
	case StrategyNone, StrategyFixed, StrategyLinear, StrategyExponential, StrategyPolynomial, StrategySchedule:
	default:
		return bad("strategy", p.Strategy, "must be none, fixed, linear, exponential, polynomial or schedule")
	}
	if p.Base < 0 || p.Base > MaxDuration {
		return bad("base", p.Base, "must be between 0 and 100 years")
	}
	if !(p.Multiplier >= MinMultiplier && p.Multiplier <= MaxMultiplier) {
		return bad("multiplier", p.Multiplier, fmt.Sprintf("must be between %g and %g", MinMultiplier, MaxMultiplier))
	}
	if p.Exponent < MinExponent || p.Exponent > MaxExponent {
		return bad("exponent", p.Exponent, fmt.Sprintf("must be between %d and %d", MinExponent, MaxExponent))
	}
	for _, s := range p.Schedule {
		if s < 0 || s > MaxDuration {
			return bad("schedule", s, "entries must be between 0 and 100 years")
		}
	}
	if p.Strategy == StrategySchedule && len(p.Schedule) == 0 {
		return bad("schedule", "[]", "must not be empty for strategy \"schedule\"")
	}
	if p.Max < 0 || p.Max > MaxDuration {
		return bad("max", p.Max, "must be between 0 and 100 years")
	}
	switch p.Jitter {
	case JitterNone, JitterFull, JitterEqual, JitterProportional:
	default:
		return bad("jitter", p.Jitter, "must be none, full, equal or proportional")
	}
	if !(p.JitterRatio == 0 || (p.JitterRatio >= MinJitterRatio && p.JitterRatio <= MaxJitterRatio)) {
		return bad("jitter_ratio", p.JitterRatio, fmt.Sprintf("must be 0 or between %f and %g", MinJitterRatio, MaxJitterRatio))
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxCount {
		return bad("max_attempts", p.MaxAttempts, fmt.Sprintf("must be between 1 and %d", MaxCount))
	}
	if p.Lease < time.Microsecond {
		return bad("lease", p.Lease, "must be at least 1µs")
	}
	if p.Deadline != 0 && p.Deadline < time.Microsecond {
		return bad("deadline", p.Deadline, "must be at least 1µs, or 0 for no deadline")
	}
	if p.MaxLeaseExpiries < 0 || p.MaxLeaseExpiries > MaxCount {
		return bad("max_lease_expiries", p.MaxLeaseExpiries, fmt.Sprintf("must be between 1 and %d, or 0 for no budget", MaxCount))
	}
	return nil
}
