package security

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// The SQLSTATEs a call of a public function may answer with, when every
// argument is a valid value of its type (docs/reliability.md):
// invalid_parameter_value and the BK codes of docs/design.md#errors.
var functionCodes = []string{"22023", "BK001", "BK002", "BK003", "BK004"}

// The SQLSTATEs PostgreSQL itself raises when the text a caller sends is
// not a valid literal of the parameter's type. Such a call never reaches
// pgbackoff; the fuzz checks the literal alone raises one of these and
// nothing else (an internal error XX000 would fail it).
var literalCodes = []string{
	"22P02", // invalid_text_representation: '{', 'abc'::bigint
	"22007", // invalid_datetime_format
	"22008", // datetime_field_overflow
	"22015", // interval_field_overflow
	"22003", // numeric_value_out_of_range
	"22P05", // untranslatable_character: "\u0000" in jsonb
	"2202E", // array_subscript_error (malformed array dimensions)
	"54001", // statement_too_complex: jsonb nested too deep
}

// tolerated are known gaps the fuzz found, allowed by function so that any
// new kind of error still fails the test (docs/reliability.md, "Known
// gaps"). Besides these, 22008 (datetime_field_overflow: "timestamp out of
// range") is accepted from every function: it comes from a p_now at the
// edge of PostgreSQL's range (year 294276) plus a valid interval, and
// changes nothing. Interval arguments beyond 876600 hours are 22023.
var tolerated = map[string][]string{
	// An explicit schedule element beyond 100 years overflows the
	// microsecond count (the policies table refuses such a schedule).
	"compute_delay": {"22003"},
	// (A dedupe key longer than about 2.7 kB no longer reaches the btree:
	// names are at most 128 bytes, ADR 0039.)
}

// fuzzFn is one public function: its name and parameter types, in order.
type fuzzFn struct {
	name  string
	types []string
}

var fuzzFns = []fuzzFn{
	{"enqueue", []string{"text", "jsonb", "timestamptz", "integer", "integer", "text", "timestamptz"}},
	{"claim", []string{"text", "text", "integer", "interval", "timestamptz"}},
	{"acquire", []string{"bigint", "text", "interval", "timestamptz"}},
	{"complete", []string{"bigint", "integer", "timestamptz"}},
	{"complete_many", []string{"bigint[]", "integer[]", "timestamptz"}},
	{"fail", []string{"bigint", "integer", "text", "interval", "boolean", "timestamptz"}},
	{"reap", []string{"timestamptz", "integer"}},
	{"heartbeat", []string{"bigint", "integer", "interval", "timestamptz"}},
	{"snooze", []string{"bigint", "integer", "interval", "timestamptz"}},
	{"cancel", []string{"bigint", "text", "timestamptz"}},
	{"replay", []string{"bigint", "timestamptz"}},
	{"prune", []string{"interval", "integer", "timestamptz"}},
	{"schedule", []string{"policy", "integer", "bigint"}},
	{"retry_delay", []string{"policy", "integer", "bigint"}},
	{"compute_delay", []string{"strategy", "interval", "double precision", "integer", "interval[]", "interval", "jitter", "double precision", "integer", "bigint"}},
	{"calculate_step_next_retry_time", []string{"integer", "timestamptz", "timestamptz", "integer", "integer", "numeric"}},
	{"stats", []string{"interval", "timestamptz"}},
	{"liveness", []string{"interval", "timestamptz"}},
	{"grant_queue", []string{"role", "text", "privilege"}},
	{"revoke_queue", []string{"role", "text", "privilege"}},
	// The operator reads, whose statements are written from their filters.
	{"list_jobs", []string{"text", "text[]", "policy", "text", "text", "timestamptz", "timestamptz", "timestamptz", "timestamptz",
		"text", "order", "bigint", "timestamptz", "integer", "boolean", "integer"}},
	{"count_jobs", []string{"text", "text[]", "policy", "text", "text", "text", "timestamptz", "timestamptz", "timestamptz",
		"timestamptz", "text", "bigint"}},
	{"job_detail", []string{"bigint", "integer"}},
	{"job_graph", []string{"bigint", "integer"}},
	{"queue_history", []string{"text", "integer"}},
	{"dead_letter_groups", []string{"text", "integer"}},
	{"dead_letter_reasons", []string{"text", "integer", "integer"}},
	{"dead_letter_sample", []string{"text", "integer", "integer", "integer"}},
	{"schedule_list", []string{"text", "timestamptz"}},
	{"upcoming_fires", []string{"text[]", "integer", "timestamptz"}},
}

// gen makes hostile but NUL-free argument text for one parameter type;
// nil is SQL NULL.
type gen struct {
	r   *rand.Rand
	ids []int64 // ids of jobs that exist
}

func (g *gen) pick(xs ...string) *string {
	if g.r.IntN(8) == 0 {
		return nil
	}
	s := xs[g.r.IntN(len(xs))]
	return &s
}

func (g *gen) str(s string) *string { return &s }

// text is hostile text: empty, quotes and backslashes, unicode, control
// characters, random code points ("binary-looking"), huge.
func (g *gen) text() *string {
	switch g.r.IntN(9) {
	case 0:
		return nil
	case 1:
		return g.str("")
	case 2:
		return g.str(`it's "quoted" \ back\\slash \n %s %I $$ '; DROP TABLE backoff.jobs; --`)
	case 3:
		return g.str("ünïcødé ✓ 漢字 🙂 \u202e rtl \ufeff")
	case 4:
		return g.str(strings.Repeat("x", 1+g.r.IntN(200_000)))
	case 5:
		var b strings.Builder
		for range 1 + g.r.IntN(64) {
			c := rune(1 + g.r.IntN(0x10FFFF))
			if !utf8.ValidRune(c) {
				c = 0xFFFD
			}
			b.WriteRune(c)
		}
		return g.str(b.String())
	case 6:
		return g.str(string([]byte{1, 2, 3, 0x7f, 0x1b, '\t', '\r', '\n'}))
	default:
		return g.pick("q", "mail", "default", "moderate", "w1", " ", "q\n", "q*", "*", strings.Repeat("n", 128), strings.Repeat("n", 129), "q\u009b")
	}
}

func (g *gen) value(typ string) *string {
	switch typ {
	case "text":
		return g.text()
	case "policy":
		if g.r.IntN(3) == 0 {
			return g.text()
		}
		return g.pick("moderate", "aggressive", "conservative", "default", "nope")
	case "role":
		if g.r.IntN(4) == 0 {
			return g.text()
		}
		return g.pick("backoff_worker", "backoff_producer", "no_such_role")
	case "privilege":
		return g.pick("work", "produce", "own", "")
	case "strategy":
		return g.pick("none", "fixed", "linear", "exponential", "polynomial", "schedule", "bogus", "")
	case "jitter":
		return g.pick("none", "full", "equal", "proportional", "bogus", "")
	case "bigint":
		vals := []string{"0", "-1", "1", "9223372036854775807", "-9223372036854775808", "99999999", "abc", "1e3"}
		for _, id := range g.ids {
			vals = append(vals, strconv.FormatInt(id, 10))
		}
		return g.pick(vals...)
	case "integer":
		return g.pick("0", "1", "2", "-1", "5", "100", "2147483647", "-2147483648", "2147483648", "x")
	case "double precision":
		return g.pick("NaN", "Infinity", "-Infinity", "0", "-1", "1", "2", "1e308", "1e-320", "0.5", "1.5", "nope")
	case "numeric":
		return g.pick("NaN", "Infinity", "-Infinity", "0", "-2", "2.0", "1e300", "1e-300", "1000000", "x")
	case "boolean":
		return g.pick("true", "false", "maybe")
	case "interval":
		return g.pick("0", "1 second", "-1 second", "30 seconds", "1 microsecond", "100 years", "178000000 years",
			"-178000000 years", "2147483647 days", "1 fortnight", "", "P1D", "infinity")
	case "timestamptz":
		return g.pick("2026-01-01 00:00:00+00", "2026-01-01 00:00:30+00", "2026-01-02 00:00:00+00", "2025-12-31 00:00:00+00",
			"infinity", "-infinity", "4713-01-01 00:00:00+00 BC", "294276-12-31 00:00:00+00", "epoch", "not a time", "2026-02-30",
			"9999-12-31 23:00:00+00", "10000-01-01 00:00:00+00", "0001-01-01 00:00:00+00")
	case "jsonb":
		return g.pick("{}", "[]", "null", `"s"`, `{"a": [1, 2, {"b": "\\u00e9"}]}`, "{", "not json", `"\u0000"`,
			`{"k": "`+strings.Repeat("v", 100_000)+`"}`, strings.Repeat("[", 5000)+strings.Repeat("]", 5000), "1e400")
	case "bigint[]":
		return g.pick("{}", "{1}", "{1,2,3}", "{NULL}", "{1,NULL}", "{-1}", "{9223372036854775807}", "{{1},{2}}", "{", "{x}")
	case "integer[]":
		return g.pick("{}", "{1}", "{1,1,1}", "{NULL}", "{0}", "{-1}", "{2147483647}", "{{1},{2}}", "{")
	case "text[]":
		return g.pick("{}", "{pending}", "{dead_lettered,cancelled}", "{running}", "{completed,bogus}", "{NULL}",
			`{"'); DROP TABLE backoff.jobs; --"}`, "{")
	case "order":
		if g.r.IntN(4) == 0 {
			return g.text()
		}
		return g.pick("oldest", "newest", "finished")
	case "interval[]":
		return g.pick("{}", "{1s}", "{1s,2s,4s}", "{NULL}", "{-1s}", "{\"178000000 years\"}", "{x}")
	}
	panic("no generator for " + typ)
}

// invariants lists jobs that break a rule of the data model; each check is
// a condition that must hold for every row.
const invariants = `
SELECT id, rule FROM (
  SELECT j.id, r.rule, r.ok
  FROM backoff.jobs AS j
  CROSS JOIN LATERAL (VALUES
    ('status known', j.status IN ('pending', 'running', 'retrying', 'completed', 'dead_lettered', 'cancelled')),
    ('lease iff running', (j.status = 'running') = (j.lease_until IS NOT NULL)),
    ('locked_by iff running', (j.status = 'running') = (j.locked_by IS NOT NULL)),
    ('running has an attempt', j.status <> 'running' OR j.attempts >= 1),
    ('attempts not negative', j.attempts >= 0),
    ('finished has completed_at', (j.status IN ('completed', 'dead_lettered', 'cancelled')) = (j.completed_at IS NOT NULL)),
    ('reason iff dead', (j.status = 'dead_lettered') = (j.dead_letter_reason IS NOT NULL)),
    ('errors an array', jsonb_typeof(j.errors) = 'array'),
    ('errors bounded', jsonb_array_length(j.errors) <= 20),
    ('queue non-empty', j.queue <> ''),
    ('run_at finite', isfinite(j.run_at)),
    ('created_at finite', isfinite(j.created_at)),
    ('lease finite', j.lease_until IS NULL OR isfinite(j.lease_until)),
    -- Bounded input (ADR 0039).
    ('queue a name', octet_length(j.queue) BETWEEN 1 AND 128 AND j.queue !~ backoff._bad_name_chars()),
    ('worker a name', j.locked_by IS NULL OR (octet_length(j.locked_by) BETWEEN 1 AND 128 AND j.locked_by !~ backoff._bad_name_chars())),
    ('dedupe key a name', j.dedupe_key IS NULL OR (octet_length(j.dedupe_key) BETWEEN 1 AND 128 AND j.dedupe_key !~ backoff._bad_name_chars())),
    ('last_error at most 8 KiB', j.last_error IS NULL OR octet_length(j.last_error) <= 8192),
    ('history entries at most 8 KiB', NOT EXISTS (SELECT FROM jsonb_array_elements(j.errors) AS e WHERE octet_length(e ->> 'error') > 8192)),
    ('run_at in years 1-9999', j.run_at >= '0001-01-01 00:00:00+00' AND j.run_at < '10000-01-01 00:00:00+00'),
    ('lease in years 1-9999', j.lease_until IS NULL OR j.lease_until < '10000-01-01 00:00:00+00')
  ) AS r(rule, ok)
) AS v WHERE ok IS NOT TRUE ORDER BY id`

// TestFuzzFunctionArguments calls the public functions with random
// hostile arguments (BACKOFF_FUZZ_CALLS, default 1500, seed
// BACKOFF_FUZZ_SEED): a valid literal may only get a result or a documented
// SQLSTATE, an invalid literal only PostgreSQL's own input errors, never an
// internal error; afterwards no row breaks an invariant.
func TestFuzzFunctionArguments(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	calls := envInt("BACKOFF_FUZZ_CALLS", 1500)
	seed := uint64(envInt("BACKOFF_FUZZ_SEED", int(rand.Uint64()>>1)))
	t.Logf("seed %d (rerun with BACKOFF_FUZZ_SEED=%d), %d calls", seed, seed, calls)
	g := &gen{r: rand.New(rand.NewPCG(seed, 17))}

	// Jobs in every state, so ids hit real rows.
	f := makeFixtures(t, pool)
	g.ids = []int64{f.pending, f.running, f.expired, f.dead}

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	c := conn.Conn()

	type tally struct{ calls, ok, literal int }
	stats := map[string]*tally{}
	codes := map[string]int{}
	for i := range calls {
		fn := fuzzFns[g.r.IntN(len(fuzzFns))]
		args := make([]any, len(fn.types))
		casts := make([]string, len(fn.types))
		for k, typ := range fn.types {
			v := g.value(typ)
			if v != nil {
				args[k] = *v
			}
			sqlType := typ
			if typ == "policy" || typ == "strategy" || typ == "jitter" || typ == "role" || typ == "privilege" || typ == "order" {
				sqlType = "text"
			}
			casts[k] = fmt.Sprintf("$%d::%s", k+1, sqlType)
		}
		st := stats[fn.name]
		if st == nil {
			st = &tally{}
			stats[fn.name] = st
		}
		st.calls++
		describe := func() string {
			var b strings.Builder
			for k, a := range args {
				s := fmt.Sprint(a)
				if a == nil {
					s = "NULL"
				}
				if len(s) > 60 {
					s = s[:60] + fmt.Sprintf("…(%d bytes)", len(s))
				}
				fmt.Fprintf(&b, " %s=%q", fn.types[k], s)
			}
			return fmt.Sprintf("call %d backoff.%s:%s", i, fn.name, b.String())
		}
		// The literals alone first: PostgreSQL's input functions.
		if _, err := c.Exec(ctx, "SELECT "+strings.Join(casts, ", "), args...); err != nil {
			code := sqlState(err)
			require.Contains(t, literalCodes, code, "%s: literal refused with %v", describe(), err)
			st.literal++
			codes["literal "+code]++
			continue
		}
		sql := fmt.Sprintf("SELECT * FROM backoff.%s(%s)", fn.name, strings.Join(casts, ", "))
		rows, err := c.Query(ctx, sql, args...)
		if err == nil {
			for rows.Next() {
				if fn.name == "enqueue" {
					var id int64
					if rows.Scan(&id) == nil {
						g.ids = append(g.ids, id)
					}
				}
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			code := sqlState(err)
			if slices.Contains(tolerated[fn.name], code) || code == "22008" {
				codes["tolerated "+fn.name+" "+code]++
				continue
			}
			require.Contains(t, functionCodes, code, "%s: %v", describe(), err)
			codes[code]++
			continue
		}
		st.ok++
		codes["ok"]++
	}

	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := stats[n]
		t.Logf("%-32s calls %4d  ok %4d  refused literal %4d  refused by function %4d", n, s.calls, s.ok, s.literal, s.calls-s.ok-s.literal)
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("outcome %-14s %5d", k, codes[k])
	}
	require.Positive(t, codes["ok"], "no call succeeded: the generator is broken")
	require.Positive(t, codes["22023"], "no call was refused as invalid: the generator is broken")

	rows, err := pool.Query(ctx, invariants)
	require.NoError(t, err)
	bad, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id int64
		var rule string
		err := r.Scan(&id, &rule)
		return fmt.Sprintf("job %d: %s", id, rule), err
	})
	require.NoError(t, err)
	var jobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs`).Scan(&jobs))
	t.Logf("%d jobs after the fuzz, %d invariant violations", jobs, len(bad))
	require.Empty(t, bad)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
