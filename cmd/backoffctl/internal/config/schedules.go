package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// Schedule is one [schedules.NAME] table: a periodic job that `config
// apply` writes with backoff.put_schedule (docs/schedules.md,
// docs/adr/0063). Exactly one of Cron and Every is set.
type Schedule struct {
	Name  string
	Queue string
	// Payload is the job's payload as canonical JSON (keys sorted, no
	// spaces): "{}" when omitted.
	Payload  string
	Cron     string
	Every    time.Duration
	TimeZone string // "UTC" when omitted
	Policy   string // "": the queue's
	Priority int
	// MaxAttempts is 0 when the policy decides.
	MaxAttempts int
	// CatchUp is what happens to missed slots: "latest" (default) or "all".
	CatchUp       string
	CatchUpWindow time.Duration // 0: none
	CatchUpLimit  int           // 100 when omitted
	SkipIfRunning bool
	// Enabled is nil when the file does not say: the schedule's pause is
	// then the operator's (`backoffctl schedules pause`), and apply keeps
	// it; true or false makes apply resume or pause it.
	Enabled *bool
}

// scheduleKeys are the keys of a [schedules.NAME] table, in the order
// `config show` prints them.
var scheduleKeys = []string{"queue", "cron", "every", "time_zone", "payload", "policy", "priority", "max_attempts",
	"catch_up", "catch_up_window", "catch_up_limit", "skip_if_running", "enabled"}

// scheduleKeyHints catches names people write for a schedule key.
var scheduleKeyHints = map[string]string{
	"schedule": "cron", "crontab": "cron", "expression": "cron", "interval": "every", "period": "every",
	"tz": "time_zone", "timezone": "time_zone", "zone": "time_zone", "args": "payload", "data": "payload",
	"missed": "catch_up", "misfire": "catch_up", "catchup": "catch_up", "backfill": "catch_up",
	"unique": "skip_if_running", "skip_running": "skip_if_running", "paused": "enabled", "disabled": "enabled",
	"attempts": "max_attempts", "retries": "max_attempts", "max_retries": "max_attempts",
}

// decodeSchedules reads [schedules.NAME] tables; defined and names are the
// policies a schedule may name.
func decodeSchedules(n *node, defined map[string]bool, names []string, ps *problems) []Schedule {
	t, ok := n.table()
	if !ok {
		ps.add(n.line, n.key, "must be a table of schedules such as [schedules.NAME], got %s", describeValue(n.val))
		return nil
	}
	var out []Schedule
	for _, name := range sortedKeys(t) {
		sn := t[name]
		if strings.TrimSpace(name) == "" || !client.ValidName(name) {
			ps.add(sn.line, sn.key, "a schedule name must be 1 to 128 bytes without control or format characters")
			continue
		}
		st, ok := sn.table()
		if !ok {
			ps.add(sn.line, sn.key, "must be a table such as [%s] with queue = \"NAME\" and cron = \"0 3 * * *\", got %s",
				sn.key, describeValue(sn.val))
			continue
		}
		if s, ok := decodeSchedule(name, sn, st, defined, names, ps); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func decodeSchedule(name string, sn *node, st map[string]*node, defined map[string]bool, names []string, ps *problems) (Schedule, bool) {
	s := Schedule{Name: name, Payload: "{}", TimeZone: "UTC", CatchUp: "latest", CatchUpLimit: 100}
	before := ps.adds
	fail := func(n *node, format string, args ...any) { ps.add(n.line, n.key, format, args...) }
	duration := func(n *node, lo, hi time.Duration, example string) (time.Duration, bool) {
		str, ok := n.val.(string)
		if !ok {
			fail(n, "must be a duration string such as %q, got %s", example, describeValue(n.val))
			return 0, false
		}
		d, err := ParseDuration(str)
		switch {
		case err != nil:
			fail(n, "%v", err)
		case d < lo || d > hi:
			fail(n, "must be %s to %s, got %q", FormatDuration(lo), FormatDuration(hi), str)
		default:
			return d, true
		}
		return 0, false
	}
	for _, k := range sortedKeys(st) {
		v := st[k]
		switch k {
		case "queue":
			q, ok := v.val.(string)
			switch {
			case !ok:
				fail(v, "must be a queue name (a string), got %s", describeValue(v.val))
			case !client.ValidName(q):
				fail(v, "a queue name must be 1 to 128 bytes without control or format characters")
			default:
				s.Queue = q
			}
		case "cron":
			c, ok := v.val.(string)
			if !ok {
				fail(v, "must be a cron expression (a string) such as \"30 2 * * *\", got %s", describeValue(v.val))
				continue
			}
			if err := CheckCron(c); err != nil {
				fail(v, "%v", err)
				continue
			}
			s.Cron = c
		case "every":
			// put_schedule's range: 1 second to 876600 hours (100 years),
			// here within the file's own limit on durations.
			s.Every, _ = duration(v, time.Second, maxDuration, "1h")
		case "time_zone":
			z, ok := v.val.(string)
			switch {
			case !ok:
				fail(v, "must be an IANA time zone name (a string) such as \"Europe/Berlin\", got %s", describeValue(v.val))
			case z == "" || len(z) > 64 || !client.ValidName(z):
				fail(v, "must be an IANA time zone name such as \"Europe/Berlin\", got %q", z)
			default:
				// The database decides which names it knows (apply); a
				// name Go cannot load either is surely wrong.
				if _, err := time.LoadLocation(z); err != nil {
					fail(v, "%q is not a name of the IANA time zone database (such as UTC or Europe/Berlin)", z)
					continue
				}
				s.TimeZone = z
			}
		case "payload":
			p, ok := payloadJSON(v)
			if !ok {
				fail(v, "must be an inline table such as { report = \"daily\" } or a JSON object string such as '{\"report\": \"daily\"}'")
				continue
			}
			s.Payload = p
		case "policy":
			p, ok := v.val.(string)
			switch {
			case !ok:
				fail(v, "must be a policy name (a string), got %s", describeValue(v.val))
			case p != DefaultPolicyRow && !defined[p]:
				fail(v, "no policy %q%s; defined: %s", p, suggest(p, names), listNames(names))
			default:
				s.Policy = p
			}
		case "priority":
			s.Priority, _ = integer(v, math.MinInt16, math.MaxInt16, "0", fail)
		case "max_attempts":
			s.MaxAttempts, _ = integer(v, 1, math.MaxInt32, "5", fail)
		case "catch_up":
			s.CatchUp, _ = enumValue(v, []string{"latest", "all"}, "missed-slot policy", fail)
		case "catch_up_window":
			s.CatchUpWindow, _ = duration(v, time.Microsecond, maxDuration, "10m")
		case "catch_up_limit":
			s.CatchUpLimit, _ = integer(v, 1, 10000, "100", fail)
		case "skip_if_running", "enabled":
			b, ok := v.val.(bool)
			if !ok {
				fail(v, "must be true or false, got %s", describeValue(v.val))
				continue
			}
			if k == "enabled" {
				s.Enabled = &b
			} else {
				s.SkipIfRunning = b
			}
		default:
			hint := keyHint(k, scheduleKeys, scheduleKeyHints)
			ps.add(v.line, v.key, "unknown key%s; a schedule has %s", hint, strings.Join(scheduleKeys, ", "))
		}
	}
	if _, ok := st["queue"]; !ok {
		ps.add(sn.line, sn.key+".queue", "missing: a schedule must name the queue its jobs go to")
	}
	_, hasCron := st["cron"]
	_, hasEvery := st["every"]
	switch {
	case hasCron && hasEvery:
		ps.add(st["every"].line, st["every"].key, "a schedule has cron or every, not both")
	case !hasCron && !hasEvery:
		ps.add(sn.line, sn.key, "a schedule needs cron = \"MIN HOUR DAY MONTH WEEKDAY\" or every = \"DURATION\"")
	}
	if w, ok := st["catch_up_limit"]; ok && s.CatchUp != "all" {
		fail(w, "is used only with catch_up = \"all\" (\"latest\" fires one slot)")
	}
	return s, ps.adds == before
}

// payloadJSON renders a payload value, an inline table or a JSON object
// string, as canonical JSON (CanonicalJSON).
func payloadJSON(n *node) (string, bool) {
	switch v := n.val.(type) {
	case map[string]*node:
		b, err := json.Marshal(plain(n))
		if err != nil {
			return "", false
		}
		return CanonicalJSON(b)
	case string:
		return CanonicalJSON([]byte(v))
	}
	return "", false
}

// plain turns a node back into the Go value it was read as.
func plain(n *node) any {
	switch v := n.val.(type) {
	case map[string]*node:
		m := make(map[string]any, len(v))
		for k, c := range v {
			m[k] = plain(c)
		}
		return m
	case []*node:
		a := make([]any, len(v))
		for i, c := range v {
			a[i] = plain(c)
		}
		return a
	default:
		return v
	}
}

// CanonicalJSON renders a JSON object with its keys sorted and no spaces,
// numbers as written, so that a payload from the file and the one the
// database holds (jsonb's own layout) compare equal when they mean the
// same. It reports false for anything but a JSON object.
func CanonicalJSON(b []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return "", false
	}
	if _, ok := v.(map[string]any); !ok {
		return "", false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// writeSchedules prints [schedules.NAME] tables for `config show`, every
// key explicit except those that are off (policy, max_attempts,
// catch_up_window, enabled when the file does not say).
func writeSchedules(b *strings.Builder, schedules []Schedule) {
	for _, s := range schedules {
		fmt.Fprintf(b, "\n[schedules.%s]\nqueue = %s\n", displayPart(s.Name), strconv.Quote(s.Queue))
		if s.Cron != "" {
			fmt.Fprintf(b, "cron = %s\n", strconv.Quote(s.Cron))
		} else {
			fmt.Fprintf(b, "every = %q\n", FormatDuration(s.Every))
		}
		fmt.Fprintf(b, "time_zone = %s\npayload = %s\n", strconv.Quote(s.TimeZone), strconv.Quote(s.Payload))
		if s.Policy != "" {
			fmt.Fprintf(b, "policy = %s\n", strconv.Quote(s.Policy))
		}
		fmt.Fprintf(b, "priority = %d\n", s.Priority)
		if s.MaxAttempts > 0 {
			fmt.Fprintf(b, "max_attempts = %d\n", s.MaxAttempts)
		}
		fmt.Fprintf(b, "catch_up = %q\n", s.CatchUp)
		if s.CatchUpWindow > 0 {
			fmt.Fprintf(b, "catch_up_window = %q\n", FormatDuration(s.CatchUpWindow))
		}
		if s.CatchUp == "all" {
			fmt.Fprintf(b, "catch_up_limit = %d\n", s.CatchUpLimit)
		}
		fmt.Fprintf(b, "skip_if_running = %t\n", s.SkipIfRunning)
		if s.Enabled != nil {
			fmt.Fprintf(b, "enabled = %t\n", *s.Enabled)
		}
	}
}
