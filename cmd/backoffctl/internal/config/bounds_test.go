package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// TestPolicyBoundsAgreeWithValidate: at and just past every bound of
// client/policy (the one Go copy of the limits; internal/sqltest/backoffmath
// TestValidateAgreesWithTableChecks proves backoff.policies accepts the
// same), a file accepts a policy exactly when policy.Validate accepts it,
// so `config validate` never passes what `config apply` fails to store,
// nor refuses what the table takes.
func TestPolicyBoundsAgreeWithValidate(t *testing.T) {
	dur := func(d time.Duration) string { return strconv.Quote(FormatDuration(d)) }
	float := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	type edge struct {
		key, value string
		set        func(*policy.Policy)
	}
	edges := []edge{
		{"base", dur(policy.MaxDuration), func(p *policy.Policy) { p.Base = policy.MaxDuration }},
		{"base", dur(policy.MaxDuration + time.Microsecond), func(p *policy.Policy) { p.Base = policy.MaxDuration + time.Microsecond }},
		{"max", dur(policy.MaxDuration), func(p *policy.Policy) { p.Max = policy.MaxDuration }},
		{"max", dur(policy.MaxDuration + time.Microsecond), func(p *policy.Policy) { p.Max = policy.MaxDuration + time.Microsecond }},
		{"max", dur(0), func(p *policy.Policy) { p.Max = 0 }},
		{"multiplier", float(policy.MinMultiplier), func(p *policy.Policy) { p.Multiplier = policy.MinMultiplier }},
		{"multiplier", float(math.Nextafter(policy.MinMultiplier, 0)), func(p *policy.Policy) { p.Multiplier = math.Nextafter(policy.MinMultiplier, 0) }},
		{"multiplier", float(policy.MaxMultiplier), func(p *policy.Policy) { p.Multiplier = policy.MaxMultiplier }},
		{"multiplier", float(math.Nextafter(policy.MaxMultiplier, math.Inf(1))), func(p *policy.Policy) {
			p.Multiplier = math.Nextafter(policy.MaxMultiplier, math.Inf(1))
		}},
		{"exponent", fmt.Sprint(policy.MinExponent), func(p *policy.Policy) { p.Exponent = policy.MinExponent }},
		{"exponent", fmt.Sprint(policy.MinExponent - 1), func(p *policy.Policy) { p.Exponent = policy.MinExponent - 1 }},
		{"exponent", fmt.Sprint(policy.MaxExponent), func(p *policy.Policy) { p.Exponent = policy.MaxExponent }},
		{"exponent", fmt.Sprint(policy.MaxExponent + 1), func(p *policy.Policy) { p.Exponent = policy.MaxExponent + 1 }},
		{"jitter_ratio", "0.0", func(p *policy.Policy) { p.JitterRatio = 0 }},
		{"jitter_ratio", float(policy.MinJitterRatio), func(p *policy.Policy) { p.JitterRatio = policy.MinJitterRatio }},
		{"jitter_ratio", float(math.Nextafter(policy.MinJitterRatio, 0)), func(p *policy.Policy) { p.JitterRatio = math.Nextafter(policy.MinJitterRatio, 0) }},
		{"jitter_ratio", float(policy.MaxJitterRatio), func(p *policy.Policy) { p.JitterRatio = policy.MaxJitterRatio }},
		{"jitter_ratio", float(math.Nextafter(policy.MaxJitterRatio, 2)), func(p *policy.Policy) { p.JitterRatio = math.Nextafter(policy.MaxJitterRatio, 2) }},
		{"max_attempts", "1", func(p *policy.Policy) { p.MaxAttempts = 1 }},
		{"max_attempts", "0", func(p *policy.Policy) { p.MaxAttempts = 0 }},
		{"max_attempts", fmt.Sprint(policy.MaxCount), func(p *policy.Policy) { p.MaxAttempts = policy.MaxCount }},
		{"max_attempts", fmt.Sprint(policy.MaxCount + 1), func(p *policy.Policy) { p.MaxAttempts = policy.MaxCount + 1 }},
		{"max_lease_expiries", "1", func(p *policy.Policy) { p.MaxLeaseExpiries = 1 }},
		{"max_lease_expiries", fmt.Sprint(policy.MaxCount), func(p *policy.Policy) { p.MaxLeaseExpiries = policy.MaxCount }},
		{"max_lease_expiries", fmt.Sprint(policy.MaxCount + 1), func(p *policy.Policy) { p.MaxLeaseExpiries = policy.MaxCount + 1 }},
		{"lease", dur(time.Microsecond), func(p *policy.Policy) { p.Lease = time.Microsecond }},
		{"deadline", dur(time.Microsecond), func(p *policy.Policy) { p.Deadline = time.Microsecond }},
	}
	// context makes each key one the policy uses, so that the file's own
	// rules (a key its strategy ignores, max below base) stay out of the way.
	context := map[string]string{
		"base":         "max = " + dur(policy.MaxDuration),
		"max":          "base = \"0s\"",
		"exponent":     "strategy = \"polynomial\"",
		"jitter_ratio": "jitter = \"proportional\"",
	}
	for _, e := range edges {
		p := policy.Defaults()
		p.Name = "p"
		e.set(&p)
		want := p.Validate()
		src := fmt.Sprintf("version = 1\n[policies.p]\n%s = %s\n%s\n", e.key, e.value, context[e.key])
		_, got := Parse("backoff.toml", []byte(src), "")
		switch {
		case want == nil && got != nil:
			t.Errorf("%s = %s: Validate accepts it, the file refuses it: %v", e.key, e.value, got)
		case want != nil && got == nil:
			t.Errorf("%s = %s: Validate refuses it (%v), the file accepts it", e.key, e.value, want)
		case got != nil && !strings.Contains(got.Error(), "policies.p."+e.key) && !strings.Contains(got.Error(), "policies.p:"):
			t.Errorf("%s = %s: the file's problem is not about the key: %v", e.key, e.value, got)
		}
	}
}
