package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

// readPolicy reads one policy row by name, as the client reads policies.
func readPolicy(ctx context.Context, db client.DB, name string) (policy.Policy, bool, error) {
	ps, err := readPolicies(ctx, db)
	if err != nil {
		return policy.Policy{}, false, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p, true, nil
		}
	}
	return policy.Policy{}, false, nil
}

// readPolicies is ops.Client.Policies over a connection or a
// transaction, after client.New's check of the schema version.
func readPolicies(ctx context.Context, db client.DB) ([]policy.Policy, error) {
	if _, err := client.New(ctx, db); err != nil {
		return nil, err
	}
	return ops.New(db).Policies(ctx)
}

// dbState is what the database holds of the configuration.
type dbState struct {
	Policies map[string]policy.Policy
	Queues   map[string]string // queue → policy
	// Controls are the queues' rows with their controls (rate, breaker;
	// ADR 0045), by name; Policy as in Queues.
	Controls map[string]config.Queue
	// Paused: the queues an operator paused (backoff.pause_queue), by name.
	Paused   map[string]bool
	Grants   map[config.Grant]bool
	Settings *config.Settings // the row of backoff.settings; nil when there is none
	// Schedules and whether each is paused (schedulesdb.go); shard and
	// shards say which shard of how many this is (shards 0: no router),
	// and layout where the router places each queue.
	Schedules      map[string]config.Schedule
	SchedulePaused map[string]bool
	shard, shards  int
	layout         *sharding.Layout
	now            *time.Time // apply's --now, for put_schedule
}

func readState(ctx context.Context, q client.DB) (*dbState, error) {
	st := &dbState{Policies: map[string]policy.Policy{}, Queues: map[string]string{}, Controls: map[string]config.Queue{},
		Paused: map[string]bool{}, Grants: map[config.Grant]bool{}}
	ps, err := readPolicies(ctx, q)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		st.Policies[p.Name] = p
	}
	rows, err := q.Query(ctx, `SELECT name, policy, coalesce(rate, 0), coalesce(burst, 0), coalesce(breaker_failures, 0),
	coalesce((extract(epoch FROM breaker_window) * 1000000)::bigint, 0),
	coalesce((extract(epoch FROM breaker_cooldown) * 1000000)::bigint, 0), breaker_probes, paused
FROM backoff.queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	for rows.Next() {
		var qu config.Queue
		var window, cooldown int64
		var paused bool
		if err := rows.Scan(&qu.Name, &qu.Policy, &qu.Rate, &qu.Burst, &qu.BreakerFailures, &window, &cooldown,
			&qu.BreakerProbes, &paused); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read queues: %w", err)
		}
		qu.BreakerWindow, qu.BreakerCooldown = time.Duration(window)*time.Microsecond, time.Duration(cooldown)*time.Microsecond
		st.Queues[qu.Name] = qu.Policy
		st.Controls[qu.Name] = qu
		st.Paused[qu.Name] = paused
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	// Queue grants (schema version 4 on; rows of dropped roles are left
	// out: they match nobody).
	rows, err = q.Query(ctx, `
SELECT r.rolname::text, g.privilege, g.queue
FROM backoff.queue_grants AS g JOIN pg_catalog.pg_roles AS r ON r.oid = g.role
WHERE pg_catalog.to_regclass('backoff.queue_grants') IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read queue grants: %w", err)
	}
	for rows.Next() {
		var g config.Grant
		if err := rows.Scan(&g.Role, &g.Privilege, &g.Queue); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read queue grants: %w", err)
		}
		st.Grants[g] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read queue grants: %w", err)
	}
	// backoff.settings exists from schema version 4 on.
	var hasSettings bool
	if err := q.QueryRow(ctx, `SELECT pg_catalog.to_regclass('backoff.settings') IS NOT NULL`).Scan(&hasSettings); err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	if hasSettings {
		var skewUS int64
		var injection, require bool
		var maxPayload int
		// max_payload_bytes and require_queue_grants exist from schema
		// version 5 on: read through the row's jsonb, with what a version 4
		// database does (1 MiB is the column's default; a role without
		// grants acted on every queue).
		err := q.QueryRow(ctx, `SELECT (extract(epoch FROM s.max_clock_skew) * 1000000)::bigint, s.time_injection,
	coalesce((pg_catalog.to_jsonb(s) ->> 'max_payload_bytes')::integer, 1048576),
	coalesce((pg_catalog.to_jsonb(s) ->> 'require_queue_grants')::boolean, false) FROM backoff.settings AS s`).
			Scan(&skewUS, &injection, &maxPayload, &require)
		switch {
		case err == pgx.ErrNoRows:
		case err != nil:
			return nil, fmt.Errorf("read settings: %w", err)
		default:
			st.Settings = &config.Settings{Set: true, MaxClockSkew: time.Duration(skewUS) * time.Microsecond,
				TimeInjection: injection, MaxPayloadBytes: maxPayload, RequireQueueGrants: require}
		}
	}
	if err := readSchedules(ctx, q, st); err != nil {
		return nil, err
	}
	return st, nil
}

// settingsFields renders settings as (TOML key, value) pairs.
func settingsFields(s config.Settings) [][2]string {
	return [][2]string{
		{"max_clock_skew", config.FormatDuration(s.MaxClockSkew)},
		{"time_injection", strconv.FormatBool(s.TimeInjection)},
		{"max_payload_bytes", strconv.Itoa(s.MaxPayloadBytes)},
		{"require_queue_grants", strconv.FormatBool(s.RequireQueueGrants)},
	}
}

// Change kinds.
const (
	changeAdd    = "add"    // in the file, not in the database
	changeUpdate = "update" // in both, some fields differ
	changeExtra  = "extra"  // only in the database: kept, or removed with --prune
)

// fieldChange is one differing field, values rendered as in the file.
type fieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new,omitempty"`
}

// change is what apply does (or would do) to one policy or queue row.
type change struct {
	Kind   string        `json:"kind"`
	Object string        `json:"object"` // policy, queue, settings or grant
	Name   string        `json:"name"`
	Note   string        `json:"note,omitempty"`
	Fields []fieldChange `json:"fields,omitempty"`
	// Paused: a queue row an operator paused (shown by diff and apply).
	Paused bool `json:"paused,omitempty"`
	// Kept: why apply --prune keeps this row that only the database has
	// (docs/adr/0054): a paused queue, or the policy such a queue uses.
	// Deleting a paused queue's row would silently un-pause it.
	Kept string `json:"kept,omitempty"`
	// Unscoped: on the first grant only in the database of a role that
	// the file grants nothing, what the role may do once apply --prune
	// revoked its last grant (docs/adr/0058): every queue, unless
	// require_queue_grants is on.
	Unscoped string `json:"unscoped,omitempty"`

	policy   policy.Policy   // desired row, for add/update of a policy
	queue    config.Queue    // desired row, for add/update of a queue
	settings config.Settings // desired row, for add/update of the settings
	grant    config.Grant    // the grant, for add/extra of a grant
	schedule config.Schedule // desired schedule, for add/update of a schedule
	at       *time.Time      // apply's --now for put_schedule (nil: the database's clock)
	keptFor  []string        // the paused queues that keep an extra policy
}

// keptPaused is the reason apply --prune gives for a paused queue it keeps.
const keptPaused = "paused; resume it first or add it to the config"

// deletable counts the rows only in the database that apply --prune
// deletes: the extras it does not keep.
func deletable(changes []change) int {
	n := 0
	for _, ch := range changes {
		if ch.Kind == changeExtra && ch.Kept == "" {
			n++
		}
	}
	return n
}

// quoteAll renders names as a comma-separated list of quoted names.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// grantName renders a grant as a change's name: "ROLE PRIVILEGE QUEUE".
func grantName(g config.Grant) string {
	return g.Role + " " + g.Privilege + " " + g.Queue
}

// policyFields renders a policy's columns as (TOML key, value) pairs in the
// file's order.
func policyFields(p policy.Policy) [][2]string {
	sched := make([]string, len(p.Schedule))
	for i, d := range p.Schedule {
		sched[i] = strconv.Quote(config.FormatDuration(d))
	}
	deadline := "none"
	if p.Deadline > 0 {
		deadline = config.FormatDuration(p.Deadline)
	}
	leaseExpiries := "none"
	if p.MaxLeaseExpiries > 0 {
		leaseExpiries = strconv.Itoa(p.MaxLeaseExpiries)
	}
	return [][2]string{
		{"strategy", string(p.Strategy)},
		{"base", config.FormatDuration(p.Base)},
		{"multiplier", config.FormatFloat(p.Multiplier)},
		{"exponent", strconv.Itoa(p.Exponent)},
		{"schedule", "[" + strings.Join(sched, ", ") + "]"},
		{"max", config.FormatDuration(p.Max)},
		{"jitter", string(p.Jitter)},
		{"jitter_ratio", config.FormatFloat(p.JitterRatio)},
		{"max_attempts", strconv.Itoa(p.MaxAttempts)},
		{"lease", config.FormatDuration(p.Lease)},
		{"deadline", deadline},
		{"max_lease_expiries", leaseExpiries},
	}
}

// policyUses reports whether key means anything for p: multiplier,
// exponent and schedule belong to one strategy each, jitter_ratio to
// proportional jitter (the keys config show writes and config validate
// accepts). A diff lists only these, so that adding a polynomial policy
// does not read as if it had a multiplier.
func policyUses(p policy.Policy, key string) bool {
	switch key {
	case "multiplier":
		return p.Strategy == policy.StrategyExponential
	case "exponent":
		return p.Strategy == policy.StrategyPolynomial
	case "schedule":
		return p.Strategy == policy.StrategySchedule
	case "jitter_ratio":
		return p.Jitter == policy.JitterProportional
	}
	return true
}

// optInt renders a setting where 0 means off as "none".
func optInt(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// optDuration renders a duration where 0 means off as "none".
func optDuration(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return config.FormatDuration(d)
}

// queueFields renders a queue row's columns as (TOML key, value) pairs in
// the file's order; a control that is off reads "none". breaker_probes is
// shown only with a breaker (alone it changes nothing).
func queueFields(q config.Queue) [][2]string {
	rate, probes := "none", "-"
	if q.Rate > 0 {
		rate = config.FormatFloat(q.Rate)
	}
	if q.BreakerFailures > 0 {
		probes = strconv.Itoa(q.BreakerProbes)
	}
	return [][2]string{
		{"policy", q.Policy},
		{"rate", rate},
		{"burst", optInt(q.Burst)},
		{"breaker_failures", optInt(q.BreakerFailures)},
		{"breaker_window", optDuration(q.BreakerWindow)},
		{"breaker_cooldown", optDuration(q.BreakerCooldown)},
		{"breaker_probes", probes},
	}
}

// desiredPolicies is the rows the configuration asks for: every policy, and
// the 'default' row as a copy of default_policy.
func desiredPolicies(c *config.Config) []policy.Policy {
	out := slices.Clone(c.Policies)
	def, _ := c.Policy(c.DefaultPolicy)
	def.Name = config.DefaultPolicyRow
	return append(out, def)
}

// planChanges compares the configuration with the database. Changes come
// policies first, then queues, each by name.
func planChanges(c *config.Config, st *dbState) []change {
	var out []change
	want := desiredPolicies(c)
	slices.SortFunc(want, func(a, b policy.Policy) int { return strings.Compare(a.Name, b.Name) })
	wanted := map[string]bool{}
	for _, p := range want {
		wanted[p.Name] = true
		note := ""
		if p.Name == config.DefaultPolicyRow {
			note = "copy of default_policy " + strconv.Quote(c.DefaultPolicy)
		} else if c.Shipped[p.Name] {
			note = "shipped profile"
		}
		newF := policyFields(p)
		cur, ok := st.Policies[p.Name]
		if !ok {
			ch := change{Kind: changeAdd, Object: "policy", Name: p.Name, Note: note, policy: p}
			for _, f := range newF {
				if policyUses(p, f[0]) {
					ch.Fields = append(ch.Fields, fieldChange{Field: f[0], New: f[1]})
				}
			}
			out = append(out, ch)
			continue
		}
		oldF := policyFields(cur)
		ch := change{Kind: changeUpdate, Object: "policy", Name: p.Name, Note: note, policy: p}
		for i := range newF {
			// A key neither the row's strategy nor the file's uses changes
			// nothing about the delays.
			if oldF[i][1] != newF[i][1] && (policyUses(p, newF[i][0]) || policyUses(cur, newF[i][0])) {
				ch.Fields = append(ch.Fields, fieldChange{Field: newF[i][0], Old: oldF[i][1], New: newF[i][1]})
			}
		}
		if len(ch.Fields) > 0 {
			out = append(out, ch)
		}
	}
	wantQ := map[string]bool{}
	for _, q := range c.Queues {
		wantQ[q.Name] = true
	}
	// A paused queue only in the database is kept by apply --prune, and
	// with it the policy it uses (docs/adr/0054).
	keptFor := map[string][]string{}
	for _, name := range sortedNames(st.Queues) {
		if !wantQ[name] && st.Paused[name] {
			keptFor[st.Queues[name]] = append(keptFor[st.Queues[name]], name)
		}
	}
	for _, name := range sortedNames(st.Policies) {
		if !wanted[name] {
			ch := change{Kind: changeExtra, Object: "policy", Name: name, Note: "only in the database", keptFor: keptFor[name]}
			if len(ch.keptFor) == 1 {
				ch.Kept = "used by paused queue " + quoteAll(ch.keptFor)
			} else if len(ch.keptFor) > 1 {
				ch.Kept = "used by paused queues " + quoteAll(ch.keptFor)
			}
			out = append(out, ch)
		}
	}
	for _, q := range c.Queues {
		newF := queueFields(q)
		cur, ok := st.Controls[q.Name]
		if !ok {
			// An added queue lists its policy and the controls it sets.
			ch := change{Kind: changeAdd, Object: "queue", Name: q.Name, queue: q}
			for _, f := range newF {
				if f[0] == "policy" || (f[1] != "none" && f[1] != "-") {
					ch.Fields = append(ch.Fields, fieldChange{Field: f[0], New: f[1]})
				}
			}
			out = append(out, ch)
			continue
		}
		oldF := queueFields(cur)
		ch := change{Kind: changeUpdate, Object: "queue", Name: q.Name, queue: q, Paused: st.Paused[q.Name]}
		for i := range newF {
			if oldF[i][1] != newF[i][1] {
				ch.Fields = append(ch.Fields, fieldChange{Field: newF[i][0], Old: oldF[i][1], New: newF[i][1]})
			}
		}
		if len(ch.Fields) > 0 {
			out = append(out, ch)
		}
	}
	for _, name := range sortedNames(st.Queues) {
		if !wantQ[name] {
			ch := change{Kind: changeExtra, Object: "queue", Name: name, Note: "only in the database", Paused: st.Paused[name]}
			if ch.Paused {
				ch.Kept = keptPaused
			}
			out = append(out, ch)
		}
	}
	wantG := map[config.Grant]bool{}
	for _, g := range c.Grants {
		wantG[g] = true
		if !st.Grants[g] {
			out = append(out, change{Kind: changeAdd, Object: "grant", Name: grantName(g), grant: g})
		}
	}
	var extraG []config.Grant
	for g := range st.Grants {
		if !wantG[g] {
			extraG = append(extraG, g)
		}
	}
	slices.SortFunc(extraG, func(a, b config.Grant) int { return strings.Compare(grantName(a), grantName(b)) })
	fileRoles := map[string]bool{}
	for _, g := range c.Grants {
		fileRoles[g.Role] = true
	}
	warned := map[string]bool{}
	for _, g := range extraG {
		ch := change{Kind: changeExtra, Object: "grant", Name: grantName(g), Note: "only in the database", grant: g}
		if !fileRoles[g.Role] && !warned[g.Role] {
			warned[g.Role] = true
			ch.Unscoped = unscopedEffect(c, st)
		}
		out = append(out, ch)
	}
	// Settings: only when the file has [settings]; otherwise the database's
	// row is left as it is.
	if c.Settings.Set {
		newF := settingsFields(c.Settings)
		if st.Settings == nil {
			ch := change{Kind: changeAdd, Object: "settings", Name: "backoff.settings", settings: c.Settings}
			for _, f := range newF {
				ch.Fields = append(ch.Fields, fieldChange{Field: f[0], New: f[1]})
			}
			out = append(out, ch)
		} else {
			oldF := settingsFields(*st.Settings)
			ch := change{Kind: changeUpdate, Object: "settings", Name: "backoff.settings", settings: c.Settings}
			for i := range newF {
				if oldF[i][1] != newF[i][1] {
					ch.Fields = append(ch.Fields, fieldChange{Field: newF[i][0], Old: oldF[i][1], New: newF[i][1]})
				}
			}
			if len(ch.Fields) > 0 {
				out = append(out, ch)
			}
		}
	}
	return append(out, planSchedules(c, st)...)
}

// unscopedEffect says what a worker or producer role without any queue
// grant may do once the configuration is applied: nothing with
// require_queue_grants on (the file's, else the database's; a missing row
// means on), every queue otherwise.
func unscopedEffect(c *config.Config, st *dbState) string {
	require := true
	switch {
	case c.Settings.Set:
		require = c.Settings.RequireQueueGrants
	case st.Settings != nil:
		require = st.Settings.RequireQueueGrants
	}
	if require {
		return "no queue (require_queue_grants is on)"
	}
	return "every queue (require_queue_grants is off)"
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// applyChanges writes the changes inside tx. Extra rows are deleted only
// when prune is set, and never those it keeps (Kept: a paused queue and its
// policy); a policy still used by a queue or by jobs that may run again is
// never deleted.
func applyChanges(ctx context.Context, tx pgx.Tx, changes []change, prune bool) error {
	for _, ch := range changes {
		if ch.Object != "policy" || ch.Kind == changeExtra {
			continue
		}
		p := ch.policy
		sched := make([]int64, len(p.Schedule))
		for i, d := range p.Schedule {
			sched[i] = d.Microseconds()
		}
		var deadline *int64
		if p.Deadline > 0 {
			v := p.Deadline.Microseconds()
			deadline = &v
		}
		var leaseExpiries *int
		if p.MaxLeaseExpiries > 0 {
			leaseExpiries = &p.MaxLeaseExpiries
		}
		_, err := tx.Exec(ctx, `
INSERT INTO backoff.policies AS p
    (name, strategy, base, multiplier, exponent, schedule, max_delay, jitter, jitter_ratio, max_attempts, lease, deadline,
     max_lease_expiries, updated_at)
VALUES ($1, $2, $3::bigint * interval '1 microsecond', $4, $5,
        ARRAY(SELECT s * interval '1 microsecond' FROM unnest($6::bigint[]) WITH ORDINALITY AS u(s, i) ORDER BY i),
        $7::bigint * interval '1 microsecond', $8, $9, $10, $11::bigint * interval '1 microsecond',
        $12::bigint * interval '1 microsecond', $13, now())
ON CONFLICT (name) DO UPDATE SET
    strategy = excluded.strategy, base = excluded.base, multiplier = excluded.multiplier,
    exponent = excluded.exponent, schedule = excluded.schedule, max_delay = excluded.max_delay,
    jitter = excluded.jitter, jitter_ratio = excluded.jitter_ratio, max_attempts = excluded.max_attempts,
    lease = excluded.lease, deadline = excluded.deadline, max_lease_expiries = excluded.max_lease_expiries,
    updated_at = now()`,
			p.Name, string(p.Strategy), p.Base.Microseconds(), p.Multiplier, p.Exponent, sched,
			p.Max.Microseconds(), string(p.Jitter), p.JitterRatio, p.MaxAttempts, p.Lease.Microseconds(), deadline,
			leaseExpiries)
		if err != nil {
			return fmt.Errorf("write policy %q: %w", p.Name, err)
		}
	}
	for _, ch := range changes {
		if ch.Object != "queue" || ch.Kind == changeExtra {
			continue
		}
		// A control the file omits is written NULL (off); paused is the
		// operator's and stays as it is.
		q := ch.queue
		nullable := func(v, off any) any {
			if v == off {
				return nil
			}
			return v
		}
		_, err := tx.Exec(ctx, `
INSERT INTO backoff.queues AS q
    (name, policy, rate, burst, breaker_failures, breaker_window, breaker_cooldown, breaker_probes, updated_at)
VALUES ($1, $2, $3::float8, $4::integer, $5::integer, $6::bigint * interval '1 microsecond',
        $7::bigint * interval '1 microsecond', $8::integer, now())
ON CONFLICT (name) DO UPDATE SET
    policy = excluded.policy, rate = excluded.rate, burst = excluded.burst,
    breaker_failures = excluded.breaker_failures, breaker_window = excluded.breaker_window,
    breaker_cooldown = excluded.breaker_cooldown, breaker_probes = excluded.breaker_probes, updated_at = now()`,
			ch.Name, q.Policy, nullable(q.Rate, 0.0), nullable(q.Burst, 0), nullable(q.BreakerFailures, 0),
			nullable(q.BreakerWindow.Microseconds(), int64(0)), nullable(q.BreakerCooldown.Microseconds(), int64(0)),
			max(q.BreakerProbes, 1))
		if err != nil {
			return fmt.Errorf("write queue %q: %w", ch.Name, err)
		}
	}
	for _, ch := range changes {
		if ch.Object != "settings" || ch.Kind == changeExtra {
			continue
		}
		_, err := tx.Exec(ctx, `
INSERT INTO backoff.settings (singleton, max_clock_skew, time_injection, max_payload_bytes, require_queue_grants, updated_at)
VALUES (true, $1::bigint * interval '1 microsecond', $2, $3::integer, $4, now())
ON CONFLICT (singleton) DO UPDATE SET
    max_clock_skew = excluded.max_clock_skew, time_injection = excluded.time_injection,
    max_payload_bytes = excluded.max_payload_bytes, require_queue_grants = excluded.require_queue_grants,
    updated_at = now()`,
			ch.settings.MaxClockSkew.Microseconds(), ch.settings.TimeInjection, ch.settings.MaxPayloadBytes,
			ch.settings.RequireQueueGrants)
		if err != nil {
			return fmt.Errorf("write settings: %w", err)
		}
	}
	for _, ch := range changes {
		if ch.Object != "grant" || ch.Kind != changeAdd {
			continue
		}
		if _, err := tx.Exec(ctx, `SELECT backoff.grant_queue($1, $2, $3)`, ch.grant.Role, ch.grant.Queue, ch.grant.Privilege); err != nil {
			return fmt.Errorf("grant %s: %w", ch.Name, err)
		}
	}
	if err := applySchedules(ctx, tx, changes, prune); err != nil {
		return err
	}
	if !prune {
		return nil
	}
	// A pruned grant widens its role again when it was the role's last
	// (docs/adr/0038): apply --prune is how a file takes grants away.
	for _, ch := range changes {
		if ch.Object == "grant" && ch.Kind == changeExtra {
			if _, err := tx.Exec(ctx, `SELECT backoff.revoke_queue($1, $2, $3)`, ch.grant.Role, ch.grant.Queue, ch.grant.Privilege); err != nil {
				return fmt.Errorf("revoke %s: %w", ch.Name, err)
			}
		}
	}
	for _, ch := range changes {
		if ch.Object == "queue" && ch.Kind == changeExtra && ch.Kept == "" {
			if _, err := tx.Exec(ctx, `DELETE FROM backoff.queues WHERE name = $1`, ch.Name); err != nil {
				return fmt.Errorf("delete queue %q: %w", ch.Name, err)
			}
		}
	}
	for _, ch := range changes {
		if ch.Object != "policy" || ch.Kind != changeExtra || ch.Kept != "" {
			continue
		}
		var queues []string
		err := tx.QueryRow(ctx, `SELECT ARRAY(SELECT name FROM backoff.queues WHERE policy = $1 ORDER BY name)`,
			ch.Name).Scan(&queues)
		if err != nil {
			return fmt.Errorf("check uses of policy %q: %w", ch.Name, err)
		}
		jobs, err := jobsThatMayRunAgain(ctx, tx, ch.Name)
		if err != nil {
			return fmt.Errorf("check uses of policy %q: %w", ch.Name, err)
		}
		if len(queues) > 0 {
			return fmt.Errorf("cannot delete policy %q: queue %s still uses it", ch.Name, strings.Join(queues, ", "))
		}
		if jobs > 0 {
			return fmt.Errorf("cannot delete policy %q: %d job(s) that may run again name it", ch.Name, jobs)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM backoff.policies WHERE name = $1`, ch.Name); err != nil {
			return fmt.Errorf("delete policy %q: %w", ch.Name, err)
		}
	}
	return nil
}

// jobsThatMayRunAgain counts the jobs governed by policy that are
// unfinished or dead-lettered (a replay runs them again), through the
// client.
func jobsThatMayRunAgain(ctx context.Context, tx pgx.Tx, policy string) (int, error) {
	if _, err := client.New(ctx, tx); err != nil {
		return 0, err
	}
	o := ops.New(tx)
	params := ops.ListParams{Policy: policy, Limit: 1000, Statuses: []client.Status{
		client.StatusPending, client.StatusRunning, client.StatusRetrying, client.StatusDeadLettered}}
	n := 0
	for {
		page, err := o.List(ctx, params)
		if err != nil {
			return 0, err
		}
		n += len(page.Jobs)
		if page.Next == "" {
			return n, nil
		}
		params.Cursor = page.Next
	}
}
