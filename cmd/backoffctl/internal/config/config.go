// Package config loads backoff.toml, the single source of truth for retry
// policies and queue mappings (docs/design.md#configuration, docs/adr/0011).
//
// A file is decoded strictly: every key must be known, every value must have
// the right type and range, and every problem is reported at once as
// FILE:LINE: key: message. Omitted policy keys take the values of
// policy.Defaults(). The shipped profiles (aggressive, moderate,
// conservative) exist even when the file does not define them; a
// [policies.NAME] of the same name replaces one entirely. [env.NAME]
// overlays are merged over the file when selected, and every environment is
// validated whether selected or not.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// Version is the only configuration format version this package reads.
const Version = 1

// DefaultFile is the file read when no --config is given.
const DefaultFile = "backoff.toml"

// DefaultPolicyRow is the reserved policy name that jobs of unmapped queues
// use; `config apply` writes it as a copy of default_policy.
const DefaultPolicyRow = "default"

// ImplicitDefaultPolicy is default_policy when the file does not set it.
const ImplicitDefaultPolicy = "moderate"

// Settings are the database-wide settings of table backoff.settings
// (docs/adr/0035-time-is-not-a-privilege.md), from the
// [settings] table. Set is false when the file (with its overlay) has no
// [settings]: apply then leaves the database's row as it is.
type Settings struct {
	Set bool
	// MaxClockSkew is how far from the database clock a p_now may be for a
	// caller outside backoff_admin (default 5 minutes).
	MaxClockSkew time.Duration
	// TimeInjection lets every caller pass any p_now (tests, simulations).
	TimeInjection bool
	// MaxPayloadBytes is the largest payload enqueue takes, in bytes of
	// jsonb (docs/adr/0059; default 1 MiB, MinPayloadLimit to
	// MaxPayloadLimit).
	MaxPayloadBytes int
	// RequireQueueGrants makes a worker or producer without any queue grant
	// act on no queue instead of every queue (default true;
	// docs/adr/0058-queue-scope-fails-closed.md).
	RequireQueueGrants bool
}

// The range of max_payload_bytes: the smallest limit enqueue checks
// against (it reads the setting only for larger payloads) and the largest
// jsonb PostgreSQL builds; the CHECK of backoff.settings says the same.
const (
	MinPayloadLimit = 1024
	MaxPayloadLimit = 268435455
)

// DefaultSettings are the values of omitted [settings] keys, and the
// columns' defaults in backoff.settings.
func DefaultSettings() Settings {
	return Settings{MaxClockSkew: 5 * time.Minute, MaxPayloadBytes: 1 << 20, RequireQueueGrants: true}
}

// settingsKeys are the keys of [settings], in the order `config show`
// prints them.
var settingsKeys = []string{"max_clock_skew", "time_injection", "max_payload_bytes", "require_queue_grants"}

// Queue maps a queue to the policy its jobs use, and carries the queue's
// controls (docs/adr/0047-worker-learns-when-to-claim.md):
// a rate limit and a circuit breaker, the columns of backoff.queues that
// `config apply` writes. A zero value means the control is off.
type Queue struct {
	Name   string
	Policy string
	// Rate is the most jobs per second claimed from the queue; 0 = no limit.
	Rate float64
	// Burst is the token bucket's size; 0 = the database's default,
	// greatest(1, ceil(rate)). Set only with Rate.
	Burst int
	// BreakerFailures is how many failed attempts within BreakerWindow open
	// the queue's breaker; 0 = no breaker.
	BreakerFailures int
	// BreakerWindow is the window failures are counted in (with
	// BreakerFailures).
	BreakerWindow time.Duration
	// BreakerCooldown is how long an open breaker claims nothing (with
	// BreakerFailures).
	BreakerCooldown time.Duration
	// BreakerProbes is how many jobs a half-open breaker hands out before a
	// result closes or reopens it; 1 when omitted.
	BreakerProbes int
}

// queueKeys are the keys of a [queues.NAME] table, in the order `config
// show` prints them.
var queueKeys = []string{"policy", "rate", "burst", "breaker_failures", "breaker_window", "breaker_cooldown", "breaker_probes"}

// Grant is one queue grant of a [grants.ROLE] table: Role may act on Queue
// (a name, or a prefix ending in "*") with Privilege "work" or "produce"
// (backoff.grant_queue, docs/adr/0038-queue-scoped-privileges.md).
type Grant struct {
	Role      string
	Privilege string
	Queue     string
}

// Config is an effective configuration: the file with the selected
// environment's overlay applied, and the shipped profiles it did not
// redefine.
type Config struct {
	File          string
	Env           string // selected environment, "" for none
	Version       int
	DefaultPolicy string          // always set; ImplicitDefaultPolicy when the file is silent
	Policies      []policy.Policy // sorted by name; never contains DefaultPolicyRow
	Queues        []Queue         // sorted by name
	Grants        []Grant         // sorted by role, privilege, queue
	Schedules     []Schedule      // sorted by name (schedules.go)
	Settings      Settings        // Settings.Set when the file has [settings]
	Shipped       map[string]bool // names in Policies that come from the shipped profiles, not the file
	Envs          []string        // environments the file defines, sorted
}

// Policy returns the named policy. DefaultPolicyRow resolves to the policy
// default_policy names.
func (c *Config) Policy(name string) (policy.Policy, bool) {
	if name == DefaultPolicyRow {
		name = c.DefaultPolicy
	}
	for _, p := range c.Policies {
		if p.Name == name {
			return p, true
		}
	}
	return policy.Policy{}, false
}

// Load reads and decodes the file at path with the overlay of env ("" for
// none). A file that is not valid gives an *Errors listing every problem.
func Load(path, env string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read config: %s does not exist (pass --config FILE)", path)
		}
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data, env)
}

// Parse decodes data, named file in messages, with the overlay of env.
func Parse(file string, data []byte, env string) (*Config, error) {
	ps := &problems{file: file}
	root, ok := parseTree(file, data, ps)
	if !ok {
		return nil, ps.err()
	}
	top, _ := root.table()

	base := map[string]*node{}
	envs := map[string]*node{}
	version := 0
	for _, k := range sortedKeys(top) {
		n := top[k]
		switch k {
		case "version":
			v, ok := n.val.(int64)
			switch {
			case !ok:
				ps.add(n.line, n.key, "must be the integer %d, got %s", Version, describeValue(n.val))
			case v != Version:
				ps.add(n.line, n.key, "unsupported version %d: this backoffctl reads version %d", v, Version)
			default:
				version = int(v)
			}
		case "default_policy", "policies", "queues", "settings", "grants", "schedules":
			base[k] = n
		case "env":
			t, ok := n.table()
			if !ok {
				ps.add(n.line, n.key, "must be a table of environments such as [env.test], got %s", describeValue(n.val))
				continue
			}
			for _, name := range sortedKeys(t) {
				e := t[name]
				et, ok := e.table()
				if !ok {
					ps.add(e.line, e.key, "must be a table such as [%s.policies.NAME], got %s", e.key, describeValue(e.val))
					continue
				}
				for _, ek := range sortedKeys(et) {
					switch ek {
					case "default_policy", "policies", "queues", "settings", "grants", "schedules":
					case "version", "env":
						ps.add(et[ek].line, et[ek].key, "cannot be set in an environment overlay")
						delete(et, ek)
					default:
						ps.add(et[ek].line, et[ek].key, "unknown key%s; an overlay may set default_policy, policies, queues, settings, grants and schedules",
							suggest(ek, []string{"default_policy", "policies", "queues", "settings", "grants", "schedules"}))
						delete(et, ek)
					}
				}
				envs[name] = e
			}
		default:
			ps.add(n.line, n.key, "unknown key%s", suggest(k, []string{"version", "default_policy", "policies", "queues", "settings", "grants", "schedules", "env"}))
		}
	}
	if _, ok := top["version"]; !ok {
		ps.add(1, "version", "missing: the file must start with version = %d", Version)
	}

	envNames := make([]string, 0, len(envs))
	for name := range envs {
		envNames = append(envNames, name)
	}
	slices.Sort(envNames)

	baseNode := &node{key: "", line: 1, val: base}
	selected := decode(baseNode, ps)
	for _, name := range envNames {
		c := decode(merge(baseNode, &node{key: envs[name].key, line: envs[name].line, val: mustTable(envs[name])}), ps)
		if name == env {
			selected = c
		}
	}
	if env != "" {
		if _, ok := envs[env]; !ok {
			known := "the file defines no environments"
			if len(envNames) > 0 {
				known = "the file defines " + strings.Join(envNames, ", ")
			}
			line := 1
			if e, ok := top["env"]; ok {
				line = e.line
			}
			ps.add(line, "env", "no environment %q (--env)%s; %s", env, suggest(env, envNames), known)
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	selected.File = file
	selected.Env = env
	selected.Version = version
	selected.Envs = envNames
	return selected, nil
}

func mustTable(n *node) map[string]*node {
	t, _ := n.table()
	return t
}

// decode validates one effective tree (base, or base with an overlay) and
// returns its configuration; problems go to ps.
func decode(root *node, ps *problems) *Config {
	top := mustTable(root)
	c := &Config{DefaultPolicy: ImplicitDefaultPolicy, Shipped: map[string]bool{}}
	defined := map[string]bool{}

	if n, ok := top["policies"]; ok {
		t, ok := n.table()
		if !ok {
			ps.add(n.line, n.key, "must be a table of policies such as [policies.NAME], got %s", describeValue(n.val))
		}
		for _, name := range sortedKeys(t) {
			pn := t[name]
			switch {
			case name == DefaultPolicyRow:
				ps.add(pn.line, pn.key, "the name %q is reserved for the policy of unmapped queues: name the policy otherwise and set default_policy to it", DefaultPolicyRow)
				continue
			case strings.TrimSpace(name) == "":
				ps.add(pn.line, pn.key, "a policy needs a non-empty name")
				continue
			case !client.ValidName(name):
				ps.add(pn.line, pn.key, "a policy name must be 1 to 128 bytes without control or format characters")
				continue
			}
			defined[name] = true
			if p, ok := decodePolicy(name, pn, ps); ok {
				c.Policies = append(c.Policies, p)
			}
		}
	}
	for name, p := range policy.Profiles() {
		if name != DefaultPolicyRow && !defined[name] {
			p.Name = name
			c.Policies = append(c.Policies, p)
			c.Shipped[name] = true
			defined[name] = true
		}
	}
	slices.SortFunc(c.Policies, func(a, b policy.Policy) int { return strings.Compare(a.Name, b.Name) })
	names := make([]string, 0, len(defined))
	for name := range defined {
		names = append(names, name)
	}

	if n, ok := top["default_policy"]; ok {
		s, ok := n.val.(string)
		switch {
		case !ok:
			ps.add(n.line, n.key, "must be a policy name (a string), got %s", describeValue(n.val))
		case s == DefaultPolicyRow:
			ps.add(n.line, n.key, "must name a policy, not %q itself", DefaultPolicyRow)
		case !defined[s]:
			ps.add(n.line, n.key, "no policy %q%s; defined: %s", s, suggest(s, names), listNames(names))
		default:
			c.DefaultPolicy = s
		}
	}

	if n, ok := top["queues"]; ok {
		t, ok := n.table()
		if !ok {
			ps.add(n.line, n.key, "must be a table of queues such as [queues.NAME], got %s", describeValue(n.val))
		}
		for _, name := range sortedKeys(t) {
			qn := t[name]
			if strings.TrimSpace(name) == "" {
				ps.add(qn.line, qn.key, "a queue needs a non-empty name")
				continue
			}
			if !client.ValidName(name) {
				ps.add(qn.line, qn.key, "a queue name must be 1 to 128 bytes without control or format characters")
				continue
			}
			qt, ok := qn.table()
			if !ok {
				ps.add(qn.line, qn.key, "must be a table such as [%s] with policy = \"NAME\", got %s", qn.key, describeValue(qn.val))
				continue
			}
			q, ok := decodeQueue(name, qn, qt, defined, names, ps)
			if !ok {
				continue
			}
			c.Queues = append(c.Queues, q)
		}
		slices.SortFunc(c.Queues, func(a, b Queue) int { return strings.Compare(a.Name, b.Name) })
	}
	c.Settings = decodeSettings(top["settings"], ps)
	if n, ok := top["grants"]; ok {
		c.Grants = decodeGrants(n, ps)
	}
	if n, ok := top["schedules"]; ok {
		c.Schedules = decodeSchedules(n, defined, names, ps)
	}

	return c
}

// decodeQueue reads one [queues.NAME] table: its policy and its controls.
// It reports false when anything in the table is wrong.
func decodeQueue(name string, qn *node, qt map[string]*node, defined map[string]bool, names []string, ps *problems) (Queue, bool) {
	q := Queue{Name: name, BreakerProbes: 1}
	before := ps.adds
	bad := map[string]bool{}
	fail := func(n *node, format string, args ...any) {
		bad[lastPart(n.key)] = true
		ps.add(n.line, n.key, format, args...)
	}
	positive := func(n *node, example string) (int, bool) { return integer(n, 1, math.MaxInt32, example, fail) }
	for _, k := range sortedKeys(qt) {
		v := qt[k]
		switch k {
		case "policy":
			s, ok := v.val.(string)
			switch {
			case !ok:
				fail(v, "must be a policy name (a string), got %s", describeValue(v.val))
			case s != DefaultPolicyRow && !defined[s]:
				fail(v, "no policy %q%s; defined: %s", s, suggest(s, names), listNames(names))
			default:
				q.Policy = s
			}
		case "rate":
			f, ok := number(v.val)
			switch {
			case !ok:
				fail(v, "must be a number of jobs per second such as 50 or 0.5, got %s", describeValue(v.val))
			case math.IsNaN(f) || math.IsInf(f, 0) || f <= 0:
				fail(v, "must be a positive number of jobs per second, got %v", f)
			default:
				q.Rate = f
			}
		case "burst":
			q.Burst, _ = positive(v, "10")
		case "breaker_failures":
			q.BreakerFailures, _ = positive(v, "5")
		case "breaker_probes":
			q.BreakerProbes, _ = positive(v, "1")
		case "breaker_window", "breaker_cooldown":
			s, ok := v.val.(string)
			if !ok {
				fail(v, "must be a duration string such as \"30s\", got %s", describeValue(v.val))
				continue
			}
			d, err := ParseDuration(s)
			switch {
			case err != nil:
				fail(v, "%v", err)
			case d == 0:
				fail(v, "must be positive, got %q", s)
			case k == "breaker_window":
				q.BreakerWindow = d
			default:
				q.BreakerCooldown = d
			}
		default:
			hint := keyHint(k, queueKeys, queueKeyHints)
			ps.add(v.line, v.key, "unknown key%s; a queue has %s", hint, strings.Join(queueKeys, ", "))
		}
	}
	if _, ok := qt["policy"]; !ok {
		ps.add(qn.line, qn.key+".policy", "missing: a queue must name its policy")
	}
	// Cross-field checks: a key that only means something with another.
	written := func(key string) bool { _, ok := qt[key]; return ok }
	if written("burst") && !written("rate") {
		fail(qt["burst"], "is used only with rate: set rate (jobs per second) too")
	}
	if written("breaker_failures") && !bad["breaker_failures"] {
		var missing []string
		for _, k := range []string{"breaker_window", "breaker_cooldown"} {
			if !written(k) {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			fail(qt["breaker_failures"], "a breaker needs %s too", strings.Join(missing, " and "))
		}
	} else if !written("breaker_failures") {
		for _, k := range []string{"breaker_window", "breaker_cooldown", "breaker_probes"} {
			if written(k) {
				fail(qt[k], "is used only with breaker_failures: set breaker_failures (failures that open the breaker) too")
			}
		}
	}
	return q, ps.adds == before
}

// queueKeyHints catches names people write for a queue key.
var queueKeyHints = map[string]string{
	"rate_limit": "rate", "limit": "rate", "per_second": "rate", "bucket": "burst",
	"threshold": "breaker_failures", "failures": "breaker_failures", "max_failures": "breaker_failures",
	"cooldown": "breaker_cooldown", "window": "breaker_window", "probes": "breaker_probes",
}

// decodeSettings reads [settings]; omitted keys take DefaultSettings.
func decodeSettings(n *node, ps *problems) Settings {
	st := DefaultSettings()
	if n == nil {
		return st
	}
	t, ok := n.table()
	if !ok {
		ps.add(n.line, n.key, "must be a table such as [settings] with max_clock_skew = \"5m\", got %s", describeValue(n.val))
		return st
	}
	st.Set = true
	for _, k := range sortedKeys(t) {
		v := t[k]
		switch k {
		case "max_clock_skew":
			s, ok := v.val.(string)
			if !ok {
				ps.add(v.line, v.key, "must be a duration string such as \"5m\", got %s", describeValue(v.val))
				continue
			}
			d, err := ParseDuration(s)
			if err != nil {
				ps.add(v.line, v.key, "%v", err)
				continue
			}
			st.MaxClockSkew = d
		case "time_injection":
			b, ok := v.val.(bool)
			if !ok {
				ps.add(v.line, v.key, "must be true or false, got %s", describeValue(v.val))
				continue
			}
			st.TimeInjection = b
		case "max_payload_bytes":
			i, ok := v.val.(int64)
			switch {
			case !ok:
				ps.add(v.line, v.key, "must be a number of bytes such as 1048576, got %s", describeValue(v.val))
			case i < MinPayloadLimit || i > MaxPayloadLimit:
				ps.add(v.line, v.key, "must be between %d and %d bytes, got %d", MinPayloadLimit, MaxPayloadLimit, i)
			default:
				st.MaxPayloadBytes = int(i)
			}
		case "require_queue_grants":
			b, ok := v.val.(bool)
			if !ok {
				ps.add(v.line, v.key, "must be true or false, got %s", describeValue(v.val))
				continue
			}
			st.RequireQueueGrants = b
		default:
			ps.add(v.line, v.key, "unknown key%s; settings has %s and %s", suggest(k, settingsKeys),
				strings.Join(settingsKeys[:len(settingsKeys)-1], ", "), settingsKeys[len(settingsKeys)-1])
		}
	}
	return st
}

// decodeGrants reads [grants.ROLE] tables: work = [...] and produce =
// [...], lists of queue names or prefixes ending in "*".
func decodeGrants(n *node, ps *problems) []Grant {
	t, ok := n.table()
	if !ok {
		ps.add(n.line, n.key, "must be a table of roles such as [grants.ROLE] with work = [\"QUEUE\"], got %s", describeValue(n.val))
		return nil
	}
	var out []Grant
	for _, role := range sortedKeys(t) {
		rn := t[role]
		// PostgreSQL role names are at most 63 bytes.
		if len(role) > 63 || !client.ValidName(role) {
			ps.add(rn.line, rn.key, "a role name must be 1 to 63 bytes without control or format characters")
			continue
		}
		rt, ok := rn.table()
		if !ok {
			ps.add(rn.line, rn.key, "must be a table such as [%s] with work = [\"QUEUE\"], got %s", rn.key, describeValue(rn.val))
			continue
		}
		if len(rt) == 0 {
			ps.add(rn.line, rn.key, "a grant needs work = [...] or produce = [...]")
			continue
		}
		for _, k := range sortedKeys(rt) {
			v := rt[k]
			if k != "work" && k != "produce" {
				ps.add(v.line, v.key, "unknown key%s; a grant has work and produce", suggest(k, []string{"work", "produce"}))
				continue
			}
			arr, ok := v.val.([]*node)
			if !ok {
				ps.add(v.line, v.key, "must be a list of queue names such as [\"mail.*\"], got %s", describeValue(v.val))
				continue
			}
			for _, el := range arr {
				q, ok := el.val.(string)
				switch {
				case !ok:
					ps.add(el.line, v.key, "must be a queue name (a string), got %s", describeValue(el.val))
				case !client.ValidName(q):
					ps.add(el.line, v.key, "%s: a queue name or prefix must be 1 to 128 bytes without control or format characters", strconv.Quote(q))
				default:
					g := Grant{Role: role, Privilege: k, Queue: q}
					if !slices.Contains(out, g) {
						out = append(out, g)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(strings.Compare(a.Role, b.Role), strings.Compare(a.Privilege, b.Privilege), strings.Compare(a.Queue, b.Queue))
	})
	return out
}

func listNames(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// Policy keys, in the order `config show` prints them.
var policyKeys = []string{"strategy", "base", "multiplier", "exponent", "schedule", "max", "jitter", "jitter_ratio", "max_attempts", "lease", "deadline", "max_lease_expiries"}

// keyHints catches names people write for a key that has another name here.
var keyHints = map[string]string{
	"max_delay": "max", "max_backoff": "max", "cap": "max", "ratio": "jitter_ratio",
	"retries": "max_attempts", "max_retries": "max_attempts", "attempts": "max_attempts",
	"factor": "multiplier", "backoff": "strategy", "type": "strategy", "delays": "schedule",
	"timeout": "lease", "visibility_timeout": "lease", "ttl": "deadline",
	"max_lease_expired": "max_lease_expiries", "max_reaps": "max_lease_expiries", "lease_expiries": "max_lease_expiries",
}

var strategies = []string{"none", "fixed", "linear", "exponential", "polynomial", "schedule"}
var jitters = []string{"none", "full", "equal", "proportional"}

func decodePolicy(name string, pn *node, ps *problems) (policy.Policy, bool) {
	t, ok := pn.table()
	if !ok {
		ps.add(pn.line, pn.key, "must be a table such as [%s], got %s", pn.key, describeValue(pn.val))
		return policy.Policy{}, false
	}
	p := policy.Defaults()
	p.Name = name
	before := ps.adds
	bad := map[string]bool{} // keys whose value was rejected
	fail := func(n *node, format string, args ...any) {
		bad[lastPart(n.key)] = true
		ps.add(n.line, n.key, format, args...)
	}
	for _, k := range sortedKeys(t) {
		n := t[k]
		switch k {
		case "strategy":
			if s, ok := enumValue(n, strategies, "strategy", fail); ok {
				p.Strategy = policy.Strategy(s)
			}
		case "jitter":
			if s, ok := enumValue(n, jitters, "jitter", fail); ok {
				p.Jitter = policy.Jitter(s)
			}
		case "base", "max", "lease", "deadline":
			s, ok := n.val.(string)
			if !ok {
				fail(n, "must be a duration string such as \"30s\", got %s", describeValue(n.val))
				continue
			}
			d, err := ParseDuration(s)
			if err != nil {
				fail(n, "%v", err)
				continue
			}
			switch k {
			case "base":
				p.Base = d
			case "max":
				p.Max = d
			case "lease":
				if d == 0 {
					fail(n, "must be positive: a job needs time to run before its lease expires")
					continue
				}
				p.Lease = d
			case "deadline":
				if d == 0 {
					fail(n, "must be positive; omit the key for no deadline")
					continue
				}
				p.Deadline = d
			}
		case "multiplier":
			f, ok := number(n.val)
			switch {
			case !ok:
				fail(n, "must be a number such as 2.0, got %s", describeValue(n.val))
			case math.IsNaN(f) || math.IsInf(f, 0) || f < policy.MinMultiplier || f > policy.MaxMultiplier:
				fail(n, "must be between %g and %g, got %v", policy.MinMultiplier, policy.MaxMultiplier, f)
			default:
				p.Multiplier = f
			}
		case "exponent":
			if i, ok := integer(n, policy.MinExponent, policy.MaxExponent, "2", fail); ok {
				p.Exponent = i
			}
		case "jitter_ratio":
			f, ok := number(n.val)
			switch {
			case !ok:
				fail(n, "must be a number between 0 and 1, got %s", describeValue(n.val))
			case math.IsNaN(f) || f < 0 || f > policy.MaxJitterRatio:
				fail(n, "must be between 0 and %g, got %v", policy.MaxJitterRatio, f)
			case f > 0 && f < policy.MinJitterRatio:
				fail(n, "must be 0 or at least %v (a smaller ratio underflows in PostgreSQL), got %v", policy.MinJitterRatio, f)
			default:
				p.JitterRatio = f
			}
		case "max_attempts":
			if i, ok := integer(n, 1, policy.MaxCount, "5", fail); ok {
				p.MaxAttempts = i
			}
		case "max_lease_expiries":
			i, ok := n.val.(int64)
			switch {
			case !ok:
				fail(n, "must be an integer such as 3, got %s", describeValue(n.val))
			case i < 1 || i > policy.MaxCount:
				fail(n, "must be between 1 and %d; omit the key for no budget, got %d", policy.MaxCount, i)
			default:
				p.MaxLeaseExpiries = int(i)
			}
		case "schedule":
			arr, ok := n.val.([]*node)
			if !ok {
				fail(n, "must be a list of durations such as [\"1s\", \"5s\", \"30s\"], got %s", describeValue(n.val))
				continue
			}
			sched := make([]time.Duration, 0, len(arr))
			okAll := true
			for _, el := range arr {
				s, ok := el.val.(string)
				if !ok {
					fail(el, "must be a duration string such as \"30s\", got %s", describeValue(el.val))
					okAll = false
					continue
				}
				d, err := ParseDuration(s)
				if err != nil {
					fail(el, "%v", err)
					okAll = false
					continue
				}
				sched = append(sched, d)
			}
			if okAll {
				p.Schedule = sched
			} else {
				bad["schedule"] = true
			}
		default:
			hint := keyHint(k, policyKeys, keyHints)
			ps.add(n.line, n.key, "unknown key%s", hint)
		}
	}

	// Cross-field checks, on the keys whose own values were fine.
	at := func(key string) (int, string) {
		if n, ok := t[key]; ok {
			return n.line, n.key
		}
		return pn.line, pn.key
	}
	check := func(key string, format string, args ...any) {
		line, k := at(key)
		ps.add(line, k, format, args...)
	}
	written := func(key string) bool { _, ok := t[key]; return ok && !bad[key] }
	strategyOK := !bad["strategy"]
	if strategyOK {
		if p.Strategy == policy.StrategySchedule && len(p.Schedule) == 0 && !bad["schedule"] {
			if written("schedule") {
				check("schedule", "must not be empty for strategy \"schedule\"")
			} else {
				check("strategy", "strategy \"schedule\" needs a non-empty schedule = [\"1s\", ...]")
			}
		}
		for key, want := range map[string]policy.Strategy{"multiplier": policy.StrategyExponential, "exponent": policy.StrategyPolynomial, "schedule": policy.StrategySchedule} {
			if written(key) && p.Strategy != want {
				check(key, "is used only by strategy %q, and this policy's strategy is %q", want, p.Strategy)
			}
		}
		usesBase := p.Strategy != policy.StrategyNone && p.Strategy != policy.StrategySchedule
		if usesBase && !bad["base"] && !bad["max"] && p.Max < p.Base {
			key := "max"
			if !written("max") {
				key = "base"
			}
			check(key, "max (%s%s) is less than base (%s): every retry would wait max", FormatDuration(p.Max), defaultNote(written("max")), FormatDuration(p.Base))
		}
		if p.Strategy == policy.StrategySchedule && !bad["schedule"] && !bad["max"] {
			for i, d := range p.Schedule {
				if d > p.Max {
					el := t["schedule"].val.([]*node)[i]
					ps.add(el.line, el.key, "%s is more than max (%s%s): raise max or shorten the schedule", FormatDuration(d), FormatDuration(p.Max), defaultNote(written("max")))
					break
				}
			}
		}
	}
	if !bad["jitter"] && written("jitter_ratio") && p.Jitter != policy.JitterProportional {
		check("jitter_ratio", "is used only by jitter \"proportional\", and this policy's jitter is %q", p.Jitter)
	}
	if ps.adds > before {
		return p, false
	}
	if err := p.Validate(); err != nil {
		// The Go mirror's own limits, for anything the checks above let by.
		line, key, msg := pn.line, pn.key, err.Error()
		var fe *policy.FieldError
		if errors.As(err, &fe) {
			line, key = at(fe.Field)
			msg = fmt.Sprintf("%s, got %v", fe.Reason, fe.Value)
		}
		ps.add(line, key, "%s", msg)
		return p, false
	}
	return p, true
}

func defaultNote(written bool) string {
	if written {
		return ""
	}
	return ", the default"
}

func lastPart(key string) string {
	key = strings.TrimRight(key, "]0123456789[")
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[i+1:]
	}
	return key
}

func enumValue(n *node, allowed []string, what string, fail func(*node, string, ...any)) (string, bool) {
	s, ok := n.val.(string)
	if !ok {
		fail(n, "must be one of %s, got %s", strings.Join(allowed, " | "), describeValue(n.val))
		return "", false
	}
	if !slices.Contains(allowed, s) {
		fail(n, "unknown %s %q%s; want one of %s", what, s, suggest(s, allowed), strings.Join(allowed, " | "))
		return "", false
	}
	return s, true
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	}
	return 0, false
}

// describeValue names a TOML value's type for messages, with the value when
// it is short.
func describeValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the number %v", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case []*node:
		return "an array"
	case map[string]*node:
		return "a table"
	default:
		return fmt.Sprintf("a %T", v)
	}
}
