package config

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/NAME.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

func parse(t *testing.T, src, env string) (*Config, error) {
	t.Helper()
	return Parse("backoff.toml", []byte(src), env)
}

func problemsOf(t *testing.T, src, env string) []string {
	t.Helper()
	_, err := parse(t, src, env)
	require.Error(t, err)
	var errs *Errors
	require.ErrorAs(t, err, &errs)
	out := make([]string, len(errs.Problems))
	for i, p := range errs.Problems {
		out[i] = p.String()
	}
	return out
}

const designExample = `version = 1
default_policy = "moderate"

[policies.moderate]
strategy = "exponential"   # none | fixed | linear | exponential | polynomial | schedule
base = "1s"
multiplier = 2.0
max = "60s"
jitter = "proportional"    # none | full | equal | proportional
jitter_ratio = 0.1
max_attempts = 5
lease = "30s"

[policies.square]
strategy = "polynomial"
base = "1s"
exponent = 2
max = "1h"
max_attempts = 3

[policies.stepped]
strategy = "schedule"
schedule = ["1s", "2s", "4s", "8s", "16s", "32s"]

[queues.emails]
policy = "square"

[env.test.policies.moderate]
max = "2s"
`

func TestDesignExample(t *testing.T) {
	c, err := parse(t, designExample, "")
	require.NoError(t, err)
	require.Equal(t, "moderate", c.DefaultPolicy)
	require.Equal(t, []Queue{{Name: "emails", Policy: "square", BreakerProbes: 1}}, c.Queues)
	require.Equal(t, []string{"test"}, c.Envs)

	square, ok := c.Policy("square")
	require.True(t, ok)
	want := policy.Defaults()
	want.Name, want.Strategy, want.Exponent, want.Max, want.MaxAttempts = "square", policy.StrategyPolynomial, 2, time.Hour, 3
	require.Equal(t, want, square)
	require.Equal(t, []time.Duration{time.Second, 4 * time.Second, 9 * time.Second},
		[]time.Duration{square.BaseDelay(1), square.BaseDelay(2), square.BaseDelay(3)})

	stepped, _ := c.Policy("stepped")
	require.Equal(t, policy.StrategySchedule, stepped.Strategy)
	require.Len(t, stepped.Schedule, 6)
	require.Equal(t, 32*time.Second, stepped.Schedule[5])

	moderate, _ := c.Policy("moderate")
	require.Equal(t, time.Minute, moderate.Max)
	def, _ := c.Policy(DefaultPolicyRow)
	require.Equal(t, moderate, def, "'default' resolves to default_policy")

	// The shipped profiles the file does not define are there, marked.
	require.True(t, c.Shipped["aggressive"])
	require.True(t, c.Shipped["conservative"])
	require.False(t, c.Shipped["moderate"])
	_, ok = c.Policy("default-not-a-policy")
	require.False(t, ok)

	// The overlay changes only what it names.
	tc, err := parse(t, designExample, "test")
	require.NoError(t, err)
	tm, _ := tc.Policy("moderate")
	require.Equal(t, 2*time.Second, tm.Max)
	moderate.Max = 2 * time.Second
	require.Equal(t, moderate, tm)
	require.Equal(t, "test", tc.Env)
}

func TestOmittedKeysTakeDefaults(t *testing.T) {
	c, err := parse(t, "version = 1\n[policies.bare]\n", "")
	require.NoError(t, err)
	p, _ := c.Policy("bare")
	want := policy.Defaults()
	want.Name = "bare"
	require.Equal(t, want, p)
	require.Equal(t, ImplicitDefaultPolicy, c.DefaultPolicy)
}

func TestMaxLeaseExpiries(t *testing.T) {
	c, err := parse(t, "version = 1\n[policies.oom]\nmax_lease_expiries = 3\n", "")
	require.NoError(t, err)
	p, _ := c.Policy("oom")
	require.Equal(t, 3, p.MaxLeaseExpiries)
	// config show writes it back, and the output reads back the same.
	var b strings.Builder
	writePolicy(&b, p)
	require.Contains(t, b.String(), "max_lease_expiries = 3\n")
}

func TestFileRedefinesShippedProfile(t *testing.T) {
	c, err := parse(t, "version = 1\n[policies.aggressive]\nstrategy = \"fixed\"\nbase = \"5s\"\n", "")
	require.NoError(t, err)
	p, _ := c.Policy("aggressive")
	require.Equal(t, policy.StrategyFixed, p.Strategy)
	require.Equal(t, policy.Defaults().MaxAttempts, p.MaxAttempts, "a redefinition starts from the defaults, not the profile")
	require.False(t, c.Shipped["aggressive"])
}

// Every kind of mistake the issue lists, all reported at once, in line order.
func TestAllProblemsAtOnce(t *testing.T) {
	data, err := os.ReadFile("testdata/bad.toml")
	require.NoError(t, err)
	_, err = Parse("testdata/bad.toml", data, "test")
	require.Error(t, err)
	golden(t, "bad", err.Error()+"\n")
}

func TestProblems(t *testing.T) {
	cases := []struct {
		name, src, env string
		want           []string
	}{
		{"missing version", "[policies.a]\n", "", []string{
			`backoff.toml:1: version: missing: the file must start with version = 1`}},
		{"unknown version", "version = 3\n", "", []string{
			`backoff.toml:1: version: unsupported version 3: this backoffctl reads version 1`}},
		{"version as string", "version = \"1\"\n", "", []string{
			`backoff.toml:1: version: must be the integer 1, got the string "1"`}},
		{"unknown top key near miss", "version = 1\ndefault_polcy = \"moderate\"\n", "", []string{
			`backoff.toml:2: default_polcy: unknown key (did you mean "default_policy"?)`}},
		{"unknown key far", "version = 1\n[policies.a]\nwhatever = 1\n", "", []string{
			`backoff.toml:3: policies.a.whatever: unknown key`}},
		{"column name hint", "version = 1\n[policies.a]\nmax_delay = \"1s\"\n", "", []string{
			`backoff.toml:3: policies.a.max_delay: unknown key (did you mean "max"?)`}},
		{"bad duration", "version = 1\n[policies.a]\nbase = \"fast\"\n", "", []string{
			`backoff.toml:3: policies.a.base: bad duration "fast": use Go syntax such as "500ms", "30s", "1m" or "1h30m"`}},
		{"duration without unit", "version = 1\n[policies.a]\nbase = \"10\"\n", "", []string{
			`backoff.toml:3: policies.a.base: duration "10" has no unit: write e.g. "10s" or "10ms"`}},
		{"duration as number", "version = 1\n[policies.a]\nlease = 30\n", "", []string{
			`backoff.toml:3: policies.a.lease: must be a duration string such as "30s", got the integer 30`}},
		{"days", "version = 1\n[policies.a]\ndeadline = \"2d\"\n", "", []string{
			`backoff.toml:3: policies.a.deadline: bad duration "2d": there is no day unit, write hours (e.g. "48h")`}},
		{"negative", "version = 1\n[policies.a]\nmax = \"-1s\"\n", "", []string{
			`backoff.toml:3: policies.a.max: duration "-1s" must not be negative`}},
		{"sub-microsecond", "version = 1\n[policies.a]\nbase = \"1500ns\"\n", "", []string{
			`backoff.toml:3: policies.a.base: duration "1500ns" is finer than a microsecond, PostgreSQL's resolution`}},
		{"zero lease expiries", "version = 1\n[policies.a]\nmax_lease_expiries = 0\n", "", []string{
			`backoff.toml:3: policies.a.max_lease_expiries: must be between 1 and 2147483647; omit the key for no budget, got 0`}},
		{"lease expiries as string", "version = 1\n[policies.a]\nmax_lease_expiries = \"3\"\n", "", []string{
			`backoff.toml:3: policies.a.max_lease_expiries: must be an integer such as 3, got the string "3"`}},
		{"zero lease", "version = 1\n[policies.a]\nlease = \"0s\"\n", "", []string{
			`backoff.toml:3: policies.a.lease: must be positive: a job needs time to run before its lease expires`}},
		{"unknown strategy", "version = 1\n[policies.a]\nstrategy = \"exponental\"\n", "", []string{
			`backoff.toml:3: policies.a.strategy: unknown strategy "exponental" (did you mean "exponential"?); want one of none | fixed | linear | exponential | polynomial | schedule`}},
		{"unknown jitter", "version = 1\n[policies.a]\njitter = \"ful\"\n", "", []string{
			`backoff.toml:3: policies.a.jitter: unknown jitter "ful" (did you mean "full"?); want one of none | full | equal | proportional`}},
		{"empty schedule", "version = 1\n[policies.a]\nstrategy = \"schedule\"\nschedule = []\n", "", []string{
			`backoff.toml:4: policies.a.schedule: must not be empty for strategy "schedule"`}},
		{"schedule missing", "version = 1\n[policies.a]\nstrategy = \"schedule\"\n", "", []string{
			`backoff.toml:3: policies.a.strategy: strategy "schedule" needs a non-empty schedule = ["1s", ...]`}},
		{"schedule entry", "version = 1\n[policies.a]\nstrategy = \"schedule\"\nschedule = [\"1s\",\n  \"2x\"]\n", "", []string{
			`backoff.toml:5: policies.a.schedule[1]: bad duration "2x": use Go syntax such as "500ms", "30s", "1m" or "1h30m"`}},
		{"schedule above max", "version = 1\n[policies.a]\nstrategy = \"schedule\"\nschedule = [\"30s\", \"5m\"]\n", "", []string{
			`backoff.toml:4: policies.a.schedule[1]: 5m is more than max (1m, the default): raise max or shorten the schedule`}},
		{"jitter ratio high", "version = 1\n[policies.a]\njitter = \"proportional\"\njitter_ratio = 1.5\n", "", []string{
			`backoff.toml:4: policies.a.jitter_ratio: must be between 0 and 1, got 1.5`}},
		{"jitter ratio negative", "version = 1\n[policies.a]\njitter = \"proportional\"\njitter_ratio = -0.1\n", "", []string{
			`backoff.toml:4: policies.a.jitter_ratio: must be between 0 and 1, got -0.1`}},
		{"jitter ratio unused", "version = 1\n[policies.a]\njitter_ratio = 0.2\n", "", []string{
			`backoff.toml:3: policies.a.jitter_ratio: is used only by jitter "proportional", and this policy's jitter is "none"`}},
		{"multiplier range", "version = 1\n[policies.a]\nmultiplier = 0.5\n", "", []string{
			`backoff.toml:3: policies.a.multiplier: must be between 1 and 1000, got 0.5`}},
		{"multiplier nan", "version = 1\n[policies.a]\nmultiplier = nan\n", "", []string{
			`backoff.toml:3: policies.a.multiplier: must be between 1 and 1000, got NaN`}},
		{"multiplier unused", "version = 1\n[policies.a]\nstrategy = \"linear\"\nmultiplier = 3\n", "", []string{
			`backoff.toml:4: policies.a.multiplier: is used only by strategy "exponential", and this policy's strategy is "linear"`}},
		{"exponent range", "version = 1\n[policies.a]\nstrategy = \"polynomial\"\nexponent = 11\n", "", []string{
			`backoff.toml:4: policies.a.exponent: must be between 1 and 10, got 11`}},
		{"max attempts zero", "version = 1\n[policies.a]\nmax_attempts = 0\n", "", []string{
			`backoff.toml:3: policies.a.max_attempts: must be between 1 and 2147483647, got 0`}},
		{"max below base", "version = 1\n[policies.a]\nbase = \"10s\"\nmax = \"1s\"\n", "", []string{
			`backoff.toml:4: policies.a.max: max (1s) is less than base (10s): every retry would wait max`}},
		{"queue names missing policy", "version = 1\n[queues.emails]\npolicy = \"agressive\"\n", "", []string{
			`backoff.toml:3: queues.emails.policy: no policy "agressive" (did you mean "aggressive"?); defined: aggressive, conservative, moderate`}},
		{"queue without policy", "version = 1\n[queues.emails]\n", "", []string{
			`backoff.toml:2: queues.emails.policy: missing: a queue must name its policy`}},
		{"queue unknown key", "version = 1\n[queues.emails]\npolicy = \"moderate\"\npaused = true\n", "", []string{
			`backoff.toml:4: queues.emails.paused: unknown key; a queue has policy, rate, burst, breaker_failures, breaker_window, breaker_cooldown, breaker_probes`}},
		{"queue key hint", "version = 1\n[queues.emails]\npolicy = \"moderate\"\ncooldown = \"1m\"\n", "", []string{
			`backoff.toml:4: queues.emails.cooldown: unknown key (did you mean "breaker_cooldown"?); a queue has policy, rate, burst, breaker_failures, breaker_window, breaker_cooldown, breaker_probes`}},
		{"default_policy missing", "version = 1\ndefault_policy = \"fast\"\n", "", []string{
			`backoff.toml:2: default_policy: no policy "fast"; defined: aggressive, conservative, moderate`}},
		{"reserved name", "version = 1\n[policies.default]\n", "", []string{
			`backoff.toml:2: policies.default: the name "default" is reserved for the policy of unmapped queues: name the policy otherwise and set default_policy to it`}},
		{"policy not a table", "version = 1\npolicies = 3\n", "", []string{
			`backoff.toml:2: policies: must be a table of policies such as [policies.NAME], got the integer 3`}},
		{"inline table keys", "version = 1\npolicies.a = { base = \"1s\", maxx = \"1s\" }\n", "", []string{
			`backoff.toml:2: policies.a.maxx: unknown key (did you mean "max"?)`}},
		{"syntax error", "version = 1\n[policies.a\n", "", []string{
			`backoff.toml:2: expected ']' to close table name`}},
		{"unknown env", "version = 1\n[env.test.policies.a]\n", "prod", []string{
			`backoff.toml:2: env: no environment "prod" (--env); the file defines test`}},
		{"unknown env near miss", "version = 1\n[env.test.policies.a]\n", "tset", []string{
			`backoff.toml:2: env: no environment "tset" (--env) (did you mean "test"?); the file defines test`}},
		{"env overlay unknown key", "version = 1\n[env.test]\nversion = 2\npolicy = 1\n", "", []string{
			`backoff.toml:3: env.test.version: cannot be set in an environment overlay`,
			`backoff.toml:4: env.test.policy: unknown key; an overlay may set default_policy, policies, queues, settings, grants and schedules`}},
		{"settings unknown key", "version = 1\n[settings]\nmax_clock_skw = \"1m\"\n", "", []string{
			`backoff.toml:3: settings.max_clock_skw: unknown key (did you mean "max_clock_skew"?); settings has max_clock_skew, time_injection, max_payload_bytes and require_queue_grants`}},
		{"settings bad skew", "version = 1\n[settings]\nmax_clock_skew = \"-1m\"\ntime_injection = \"yes\"\n", "", []string{
			`backoff.toml:3: settings.max_clock_skew: duration "-1m" must not be negative`,
			`backoff.toml:4: settings.time_injection: must be true or false, got the string "yes"`}},
		{"settings skew as number", "version = 1\n[settings]\nmax_clock_skew = 300\n", "", []string{
			`backoff.toml:3: settings.max_clock_skew: must be a duration string such as "5m", got the integer 300`}},
		{"settings payload limit", "version = 1\n[settings]\nmax_payload_bytes = 100\n[env.a.settings]\nmax_payload_bytes = 268435456\n[env.b.settings]\nmax_payload_bytes = \"1MiB\"\n", "", []string{
			`backoff.toml:3: settings.max_payload_bytes: must be between 1024 and 268435455 bytes, got 100`,
			`backoff.toml:5: env.a.settings.max_payload_bytes: must be between 1024 and 268435455 bytes, got 268435456`,
			`backoff.toml:7: env.b.settings.max_payload_bytes: must be a number of bytes such as 1048576, got the string "1MiB"`}},
		{"settings not a table", "version = 1\nsettings = true\n", "", []string{
			`backoff.toml:2: settings: must be a table such as [settings] with max_clock_skew = "5m", got the boolean true`}},
		{"unselected env is validated", "version = 1\n[policies.a]\n[env.prod.policies.a]\nmax = \"soon\"\n", "", []string{
			`backoff.toml:4: env.prod.policies.a.max: bad duration "soon": use Go syntax such as "500ms", "30s", "1m" or "1h30m"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, problemsOf(t, tc.src, tc.env))
		})
	}
}

// Every invalid queue control the contract lists (docs/concepts.md "Queues
// as controls") is reported at its own line, in the base file and in an
// environment's overlay alike.
func TestQueueControlProblems(t *testing.T) {
	q := func(body string) string { return "version = 1\n[queues.hooks]\npolicy = \"moderate\"\n" + body }
	cases := []struct {
		name, src string
		want      []string
	}{
		{"zero rate", q("rate = 0\n"), []string{
			`backoff.toml:4: queues.hooks.rate: must be a positive number of jobs per second, got 0`}},
		{"negative rate", q("rate = -2.5\n"), []string{
			`backoff.toml:4: queues.hooks.rate: must be a positive number of jobs per second, got -2.5`}},
		{"infinite rate", q("rate = inf\n"), []string{
			`backoff.toml:4: queues.hooks.rate: must be a positive number of jobs per second, got +Inf`}},
		{"nan rate", q("rate = nan\n"), []string{
			`backoff.toml:4: queues.hooks.rate: must be a positive number of jobs per second, got NaN`}},
		{"rate as string", q("rate = \"50/s\"\n"), []string{
			`backoff.toml:4: queues.hooks.rate: must be a number of jobs per second such as 50 or 0.5, got the string "50/s"`}},
		{"zero burst", q("rate = 5\nburst = 0\n"), []string{
			`backoff.toml:5: queues.hooks.burst: must be between 1 and 2147483647, got 0`}},
		{"burst without rate", q("burst = 3\n"), []string{
			`backoff.toml:4: queues.hooks.burst: is used only with rate: set rate (jobs per second) too`}},
		{"zero failures", q("breaker_failures = 0\nbreaker_window = \"30s\"\nbreaker_cooldown = \"1m\"\n"), []string{
			`backoff.toml:4: queues.hooks.breaker_failures: must be between 1 and 2147483647, got 0`}},
		{"negative failures", q("breaker_failures = -1\nbreaker_window = \"30s\"\nbreaker_cooldown = \"1m\"\n"), []string{
			`backoff.toml:4: queues.hooks.breaker_failures: must be between 1 and 2147483647, got -1`}},
		{"zero window", q("breaker_failures = 5\nbreaker_window = \"0s\"\nbreaker_cooldown = \"1m\"\n"), []string{
			`backoff.toml:5: queues.hooks.breaker_window: must be positive, got "0s"`}},
		{"negative cooldown", q("breaker_failures = 5\nbreaker_window = \"30s\"\nbreaker_cooldown = \"-1m\"\n"), []string{
			`backoff.toml:6: queues.hooks.breaker_cooldown: duration "-1m" must not be negative`}},
		{"zero cooldown", q("breaker_failures = 5\nbreaker_window = \"30s\"\nbreaker_cooldown = \"0s\"\n"), []string{
			`backoff.toml:6: queues.hooks.breaker_cooldown: must be positive, got "0s"`}},
		{"window as number", q("breaker_failures = 5\nbreaker_window = 30\nbreaker_cooldown = \"1m\"\n"), []string{
			`backoff.toml:5: queues.hooks.breaker_window: must be a duration string such as "30s", got the integer 30`}},
		{"failures without window and cooldown", q("breaker_failures = 5\n"), []string{
			`backoff.toml:4: queues.hooks.breaker_failures: a breaker needs breaker_window and breaker_cooldown too`}},
		{"failures without cooldown", q("breaker_failures = 5\nbreaker_window = \"30s\"\n"), []string{
			`backoff.toml:4: queues.hooks.breaker_failures: a breaker needs breaker_cooldown too`}},
		{"window, cooldown and probes without failures", q("breaker_window = \"30s\"\nbreaker_cooldown = \"1m\"\nbreaker_probes = 2\n"), []string{
			`backoff.toml:4: queues.hooks.breaker_window: is used only with breaker_failures: set breaker_failures (failures that open the breaker) too`,
			`backoff.toml:5: queues.hooks.breaker_cooldown: is used only with breaker_failures: set breaker_failures (failures that open the breaker) too`,
			`backoff.toml:6: queues.hooks.breaker_probes: is used only with breaker_failures: set breaker_failures (failures that open the breaker) too`}},
		{"zero probes", q("breaker_failures = 5\nbreaker_window = \"30s\"\nbreaker_cooldown = \"1m\"\nbreaker_probes = 0\n"), []string{
			`backoff.toml:7: queues.hooks.breaker_probes: must be between 1 and 2147483647, got 0`}},
		{"probes as float", q("breaker_failures = 5\nbreaker_window = \"30s\"\nbreaker_cooldown = \"1m\"\nbreaker_probes = 1.5\n"), []string{
			`backoff.toml:7: queues.hooks.breaker_probes: must be an integer such as 1, got the number 1.5`}},
		{"overlay zero rate", q("rate = 5\n[env.prod.queues.hooks]\nrate = 0\n"), []string{
			`backoff.toml:6: env.prod.queues.hooks.rate: must be a positive number of jobs per second, got 0`}},
		{"overlay probes without failures", q("[env.prod.queues.hooks]\nbreaker_probes = 2\n"), []string{
			`backoff.toml:5: env.prod.queues.hooks.breaker_probes: is used only with breaker_failures: set breaker_failures (failures that open the breaker) too`}},
		{"overlay zero window", q("breaker_failures = 5\nbreaker_window = \"30s\"\nbreaker_cooldown = \"1m\"\n[env.prod.queues.hooks]\nbreaker_window = \"0s\"\n"), []string{
			`backoff.toml:8: env.prod.queues.hooks.breaker_window: must be positive, got "0s"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, problemsOf(t, tc.src, ""))
		})
	}
}

// Queue controls decode, an overlay changes one of them, and config show
// writes them back to a file that loads to the same queues.
func TestQueueControls(t *testing.T) {
	src := `version = 1
[policies.slow]
max_lease_expiries = 3
[queues.webhooks]
policy = "moderate"
rate = 50
burst = 10
breaker_failures = 5
breaker_window = "30s"
breaker_cooldown = "1m"
breaker_probes = 2
[queues.mail]
policy = "slow"
rate = 0.5
[queues.plain]
policy = "moderate"
[env.prod.queues.webhooks]
rate = 200.5
breaker_cooldown = "5m"
`
	want := []Queue{
		{Name: "mail", Policy: "slow", Rate: 0.5, BreakerProbes: 1},
		{Name: "plain", Policy: "moderate", BreakerProbes: 1},
		{Name: "webhooks", Policy: "moderate", Rate: 50, Burst: 10, BreakerFailures: 5,
			BreakerWindow: 30 * time.Second, BreakerCooldown: time.Minute, BreakerProbes: 2},
	}
	c, err := parse(t, src, "")
	require.NoError(t, err)
	require.Equal(t, want, c.Queues)
	slow, _ := c.Policy("slow")
	require.Equal(t, 3, slow.MaxLeaseExpiries)
	mod, _ := c.Policy("moderate")
	require.Equal(t, 0, mod.MaxLeaseExpiries, "omitted: no budget")

	prod, err := parse(t, src, "prod")
	require.NoError(t, err)
	want[2].Rate, want[2].BreakerCooldown = 200.5, 5*time.Minute
	require.Equal(t, want, prod.Queues)

	var b strings.Builder
	require.NoError(t, Write(&b, prod))
	require.Contains(t, b.String(), "\n[queues.webhooks]\npolicy = \"moderate\"\nrate = 200.5\nburst = 10\n"+
		"breaker_failures = 5\nbreaker_window = \"30s\"\nbreaker_cooldown = \"5m\"\nbreaker_probes = 2\n")
	require.Contains(t, b.String(), "\n[queues.mail]\npolicy = \"slow\"\nrate = 0.5\n\n")
	require.Contains(t, b.String(), "max_lease_expiries = 3\n")
	again, err := Parse("shown.toml", []byte(b.String()), "")
	require.NoError(t, err, b.String())
	require.Equal(t, prod.Queues, again.Queues)
	require.Equal(t, prod.Policies, again.Policies)
}

func TestOverlay(t *testing.T) {
	src := `version = 1
default_policy = "a"
[policies.a]
base = "2s"
max = "1m"
[queues.q]
policy = "a"
[env.prod]
default_policy = "b"
[env.prod.policies.b]
strategy = "fixed"
[env.prod.queues.q]
policy = "b"
`
	c, err := parse(t, src, "prod")
	require.NoError(t, err)
	require.Equal(t, "b", c.DefaultPolicy)
	require.Equal(t, []Queue{{Name: "q", Policy: "b", BreakerProbes: 1}}, c.Queues)
	a, _ := c.Policy("a")
	require.Equal(t, 2*time.Second, a.Base, "base policies stay")
	c, err = parse(t, src, "")
	require.NoError(t, err)
	require.Equal(t, "a", c.DefaultPolicy)
	_, ok := c.Policy("b")
	require.False(t, ok)
}

// [settings]: omitted keys take the defaults, an overlay can switch time
// injection on, and a file without [settings] leaves them unset (apply
// then does not touch the database's row).
func TestSettings(t *testing.T) {
	c, err := parse(t, "version = 1\n", "")
	require.NoError(t, err)
	require.Equal(t, Settings{MaxClockSkew: 5 * time.Minute, MaxPayloadBytes: 1 << 20, RequireQueueGrants: true}, c.Settings)
	src := `version = 1
[settings]
max_clock_skew = "30s"
[env.test.settings]
time_injection = true
max_payload_bytes = 65536
`
	c, err = parse(t, src, "")
	require.NoError(t, err)
	require.Equal(t, Settings{Set: true, MaxClockSkew: 30 * time.Second, MaxPayloadBytes: 1 << 20, RequireQueueGrants: true}, c.Settings)
	c, err = parse(t, src, "test")
	require.NoError(t, err)
	require.Equal(t, Settings{Set: true, MaxClockSkew: 30 * time.Second, TimeInjection: true, MaxPayloadBytes: 65536, RequireQueueGrants: true}, c.Settings)
	c, err = parse(t, "version = 1\n[env.dev.settings]\ntime_injection = true\nrequire_queue_grants = false\n", "dev")
	require.NoError(t, err)
	require.Equal(t, Settings{Set: true, MaxClockSkew: 5 * time.Minute, TimeInjection: true, MaxPayloadBytes: 1 << 20}, c.Settings)

	var b strings.Builder
	require.NoError(t, Write(&b, c))
	require.Contains(t, b.String(), "\n[settings]\nmax_clock_skew = \"5m\"\ntime_injection = true\nmax_payload_bytes = 1048576\nrequire_queue_grants = false\n")
	again, err := Parse("shown.toml", []byte(b.String()), "")
	require.NoError(t, err)
	require.Equal(t, c.Settings, again.Settings)
}

// show's output is a valid file that loads back to the same configuration.
func TestWriteRoundTrip(t *testing.T) {
	for _, env := range []string{"", "test", "demo"} {
		c, err := Load("../../../../examples/backoff.toml", env)
		require.NoError(t, err)
		var b strings.Builder
		require.NoError(t, Write(&b, c))
		again, err := Parse("shown.toml", []byte(b.String()), "")
		require.NoError(t, err, b.String())
		require.Equal(t, c.Policies, again.Policies)
		require.Equal(t, c.Queues, again.Queues)
		require.Equal(t, c.DefaultPolicy, again.DefaultPolicy)
		require.Equal(t, c.Settings, again.Settings)
	}
}

func TestExampleFileIsValid(t *testing.T) {
	c, err := Load("../../../../examples/backoff.toml", "")
	require.NoError(t, err)
	for _, name := range []string{"aggressive", "moderate", "conservative"} {
		p, ok := c.Policy(name)
		require.True(t, ok, name)
		require.False(t, c.Shipped[name], "%s is defined in the example", name)
		shipped := policy.Profiles()[name]
		shipped.Name = name
		require.Equal(t, shipped, p, "the example's %s equals the shipped profile", name)
	}
	for _, env := range []string{"test", "demo"} {
		_, err = Load("../../../../examples/backoff.toml", env)
		require.NoError(t, err, env)
	}
}

func TestDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"500ms": 500 * time.Millisecond, "1m": time.Minute, "1h30m": 90 * time.Minute, "1.5s": 1500 * time.Millisecond,
		"0": 0, "0s": 0, "250us": 250 * time.Microsecond, "250µs": 250 * time.Microsecond, "48h": 48 * time.Hour,
	} {
		got, err := ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		back, err := ParseDuration(FormatDuration(got))
		require.NoError(t, err)
		require.Equal(t, got, back)
	}
	for _, in := range []string{"", "1", "2d", "1w", "-1s", "1ns", "1000000h", "soon"} {
		_, err := ParseDuration(in)
		require.Error(t, err, in)
	}
	require.Equal(t, "1h1s500ms", FormatDuration(time.Hour+1500*time.Millisecond))
	require.Equal(t, "1m", FormatDuration(time.Minute))
}

func TestSuggest(t *testing.T) {
	require.Equal(t, 2, levenshtein("kitten", "kitxen")+1)
	require.Equal(t, 3, levenshtein("kitten", "sitting"))
	require.Equal(t, ` (did you mean "max"?)`, suggest("maxx", policyKeys))
	require.Equal(t, "", suggest("completely_different", policyKeys))
}

var lineRE = regexp.MustCompile(`^[^\n]+:[0-9]+: `)

// FuzzLoad: whatever the input, Parse never panics, and every problem it
// reports has the file name and a line number within the input.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(designExample), "")
	f.Add([]byte(designExample), "test")
	if data, err := os.ReadFile("testdata/bad.toml"); err == nil {
		f.Add(data, "test")
	}
	if data, err := os.ReadFile("../../../../examples/backoff.toml"); err == nil {
		f.Add(data, "test")
	}
	f.Add([]byte("version = 1\n[policies.a]\nschedule = [1, \"2s\", [3]]\n"), "")
	f.Add([]byte("version = 1\npolicies.a = { base = \"1s\" }\n[[queues]]\npolicy = 1\n"), "x")
	f.Add([]byte("\xff\x00 = \"\""), "")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		c, err := Parse("fuzz.toml", data, env)
		if err == nil {
			require.NotNil(t, c)
			for _, p := range c.Policies {
				require.NoError(t, p.Validate())
			}
			return
		}
		var errs *Errors
		require.ErrorAs(t, err, &errs)
		require.NotEmpty(t, errs.Problems)
		lines := strings.Count(string(data), "\n") + 1
		for _, p := range errs.Problems {
			require.Equal(t, "fuzz.toml", p.File)
			require.GreaterOrEqual(t, p.Line, 1)
			require.LessOrEqual(t, p.Line, lines, p.String())
			require.Regexp(t, lineRE, p.String())
		}
	})
}

// The example of docs/concepts.md "Queues as controls" is a valid file.
func TestConceptsQueueExample(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/concepts.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "## Queues as controls")
	require.True(t, ok)
	_, rest, ok = strings.Cut(rest, "```toml\n")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	c, err := parse(t, "version = 1\n"+block, "")
	require.NoError(t, err)
	require.Equal(t, []Queue{{Name: "webhooks", Policy: "moderate", Rate: 50, Burst: 10, BreakerFailures: 5,
		BreakerWindow: 30 * time.Second, BreakerCooldown: time.Minute, BreakerProbes: 1}}, c.Queues)
}
