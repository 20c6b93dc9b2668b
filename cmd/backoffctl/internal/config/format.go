package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// Write prints c as a TOML file that Parse reads back to the same
// configuration: every policy with every key (defaults made explicit), the
// shipped profiles marked as such, [settings] with both keys when the file
// has it, no overlays.
func Write(w io.Writer, c *Config) error {
	var b strings.Builder
	env := c.Env
	if env == "" {
		env = "none"
	}
	fmt.Fprintf(&b, "# effective configuration of %s (env: %s)\n", c.File, env)
	fmt.Fprintf(&b, "version = %d\n", Version)
	fmt.Fprintf(&b, "default_policy = %s\n", strconv.Quote(c.DefaultPolicy))
	for _, p := range c.Policies {
		b.WriteString("\n")
		if c.Shipped[p.Name] {
			b.WriteString("# shipped profile (not defined in the file)\n")
		}
		fmt.Fprintf(&b, "[policies.%s]\n", displayPart(p.Name))
		writePolicy(&b, p)
	}
	for _, q := range c.Queues {
		fmt.Fprintf(&b, "\n[queues.%s]\npolicy = %s\n", displayPart(q.Name), strconv.Quote(q.Policy))
		writeQueueControls(&b, q)
	}
	if c.Settings.Set {
		fmt.Fprintf(&b, "\n[settings]\nmax_clock_skew = %q\ntime_injection = %t\nmax_payload_bytes = %d\nrequire_queue_grants = %t\n",
			FormatDuration(c.Settings.MaxClockSkew), c.Settings.TimeInjection, c.Settings.MaxPayloadBytes,
			c.Settings.RequireQueueGrants)
	}
	for i, g := range c.Grants {
		if i == 0 || c.Grants[i-1].Role != g.Role {
			fmt.Fprintf(&b, "\n[grants.%s]\n", displayPart(g.Role))
		}
		if i == 0 || c.Grants[i-1].Role != g.Role || c.Grants[i-1].Privilege != g.Privilege {
			var qs []string
			for _, h := range c.Grants[i:] {
				if h.Role != g.Role || h.Privilege != g.Privilege {
					break
				}
				qs = append(qs, strconv.Quote(h.Queue))
			}
			fmt.Fprintf(&b, "%s = [%s]\n", g.Privilege, strings.Join(qs, ", "))
		}
	}
	writeSchedules(&b, c.Schedules)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeQueueControls prints the controls q sets, in the order of
// queueKeys; a control that is off is omitted (that is how a file turns it
// off).
func writeQueueControls(b *strings.Builder, q Queue) {
	if q.Rate > 0 {
		fmt.Fprintf(b, "rate = %s\n", FormatFloat(q.Rate))
		if q.Burst > 0 {
			fmt.Fprintf(b, "burst = %d\n", q.Burst)
		}
	}
	if q.BreakerFailures > 0 {
		fmt.Fprintf(b, "breaker_failures = %d\n", q.BreakerFailures)
		fmt.Fprintf(b, "breaker_window = %q\n", FormatDuration(q.BreakerWindow))
		fmt.Fprintf(b, "breaker_cooldown = %q\n", FormatDuration(q.BreakerCooldown))
		fmt.Fprintf(b, "breaker_probes = %d\n", q.BreakerProbes)
	}
}

// writePolicy prints the keys of p that its strategy and jitter use, so the
// output passes the same strict checks as a hand-written file.
func writePolicy(b *strings.Builder, p policy.Policy) {
	fmt.Fprintf(b, "strategy = %q\n", p.Strategy)
	fmt.Fprintf(b, "base = %q\n", FormatDuration(p.Base))
	switch p.Strategy {
	case policy.StrategyExponential:
		fmt.Fprintf(b, "multiplier = %s\n", FormatFloat(p.Multiplier))
	case policy.StrategyPolynomial:
		fmt.Fprintf(b, "exponent = %d\n", p.Exponent)
	case policy.StrategySchedule:
		parts := make([]string, len(p.Schedule))
		for i, d := range p.Schedule {
			parts[i] = strconv.Quote(FormatDuration(d))
		}
		fmt.Fprintf(b, "schedule = [%s]\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(b, "max = %q\n", FormatDuration(p.Max))
	fmt.Fprintf(b, "jitter = %q\n", p.Jitter)
	if p.Jitter == policy.JitterProportional {
		fmt.Fprintf(b, "jitter_ratio = %s\n", FormatFloat(p.JitterRatio))
	}
	fmt.Fprintf(b, "max_attempts = %d\n", p.MaxAttempts)
	fmt.Fprintf(b, "lease = %q\n", FormatDuration(p.Lease))
	if p.Deadline > 0 {
		fmt.Fprintf(b, "deadline = %q\n", FormatDuration(p.Deadline))
	} else {
		b.WriteString("# deadline: none\n")
	}
	if p.MaxLeaseExpiries > 0 {
		fmt.Fprintf(b, "max_lease_expiries = %d\n", p.MaxLeaseExpiries)
	}
}

// FormatFloat renders f as a TOML float that reads back exactly ("2.0",
// "0.1", "1.5").
func FormatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}
