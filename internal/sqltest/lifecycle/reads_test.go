package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The operator's reads (docs/adr/0072): each checked against a plain
// statement over backoff.jobs that says what it should return.

// seedReads writes n jobs over queues a, b and c in every status, with
// errors, policies, times and schedules (slots, and manual fires without
// one) that the filters tell apart.
func seedReads(t *testing.T, db *pgxpool.Pool, n int) {
	t.Helper()
	exec(t, db, `INSERT INTO backoff.policies (name, max_attempts) VALUES ('seven', 7)`)
	exec(t, db, `INSERT INTO backoff.jobs (queue, payload, status, attempts, policy, run_at, lease_until, locked_by,
	        last_error, dead_letter_reason, created_at, completed_at, schedule, schedule_slot)
	SELECT (ARRAY['a', 'b', 'c'])[1 + i % 3], jsonb_build_object('n', i, 'pad', repeat('x', i % 50)), s.status,
	       CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END,
	       CASE WHEN i % 4 = 0 THEN 'seven' END,
	       $1::timestamptz + i * interval '1 second',
	       CASE WHEN s.status = 'running' THEN $1::timestamptz + interval '1 hour' END,
	       CASE WHEN s.status = 'running' THEN 'w' || (i % 2) END,
	       CASE WHEN s.status IN ('retrying', 'dead_lettered') THEN 'order ' || i || CASE WHEN i % 5 = 0 THEN ' Timed out' ELSE ' refused' END END,
	       CASE WHEN s.status = 'dead_lettered' THEN (ARRAY['max_attempts', 'non_retryable'])[1 + i % 2] END,
	       $1::timestamptz + i * interval '1 second',
	       -- Finished jobs complete out of id order, some at the same time.
	       CASE WHEN s.status IN ('completed', 'dead_lettered', 'cancelled') THEN $1::timestamptz + ((i * 7919) % 97) * interval '1 minute' END,
	       CASE WHEN i % 5 IN (1, 2) THEN 's' || (i % 5) END,
	       CASE WHEN i % 5 IN (1, 2) AND i % 4 <> 0 THEN $1::timestamptz + i * interval '1 minute' END
	FROM generate_series(1, $2::integer) AS i
	CROSS JOIN LATERAL (SELECT (ARRAY['pending', 'running', 'retrying', 'completed', 'dead_lettered', 'cancelled', 'completed'])[1 + i % 7] AS status) AS s`,
		t0, n)
}

// listFilter is one set of list_jobs arguments and the same filter as a
// plain condition over backoff.jobs AS j.
type listFilter struct {
	name string
	args string // named arguments of list_jobs and count_jobs
	cond string
}

var listFilters = []listFilter{
	{"none", "", "true"},
	{"queue", "p_queue => 'b'", "j.queue = 'b'"},
	{"statuses", "p_statuses => '{dead_lettered, cancelled}'", "j.status IN ('dead_lettered', 'cancelled')"},
	{"running", "p_queue => 'a', p_statuses => '{running}'", "j.queue = 'a' AND j.status = 'running'"},
	{"no statuses", "p_statuses => '{}'", "false"},
	{"policy", "p_policy => 'seven'", "backoff.job_policy(j.policy, j.queue) = 'seven'"},
	{"default policy", "p_policy => 'default', p_queue => 'c'", "backoff.job_policy(j.policy, j.queue) = 'default' AND j.queue = 'c'"},
	{"reason", "p_dead_letter_reason => 'non_retryable'", "j.dead_letter_reason = 'non_retryable'"},
	{"created", "p_created_from => '2026-01-01 00:01:00+00', p_created_to => '2026-01-01 00:02:00+00'",
		"j.created_at >= '2026-01-01 00:01:00+00' AND j.created_at < '2026-01-01 00:02:00+00'"},
	{"finished", "p_finished_from => '2026-01-01 00:10:00+00', p_finished_to => '2026-01-01 00:50:00+00', p_queue => 'a'",
		"j.completed_at >= '2026-01-01 00:10:00+00' AND j.completed_at < '2026-01-01 00:50:00+00' AND j.queue = 'a'"},
	{"schedule", "p_schedule => 's1'", "j.schedule = 's1'"},
	{"schedule and status", "p_schedule => 's2', p_statuses => '{completed}'", "j.schedule = 's2' AND j.status = 'completed'"},
	{"unknown schedule", "p_schedule => 'none'", "false"},
}

// orderBy is each order of list_jobs as an ORDER BY, and the cursor it
// continues after.
var orderBy = map[string]string{
	"oldest":   "j.id",
	"newest":   "j.id DESC",
	"finished": "j.completed_at DESC, j.id DESC",
}

type listed struct {
	ID          int64
	CompletedAt *time.Time
	ScanEnd     bool
}

func listPage(t *testing.T, db *pgxpool.Pool, args string, order string, after *listed, limit int, extra string) []listed {
	t.Helper()
	call := fmt.Sprintf("p_order => '%s', p_limit => %d", order, limit)
	if args != "" {
		call = args + ", " + call
	}
	if extra != "" {
		call += ", " + extra
	}
	var cursor []any
	if after != nil {
		call += ", p_after_id => $1, p_after_completed_at => $2"
		at := after.CompletedAt
		if order != "finished" {
			at = nil
		}
		cursor = []any{after.ID, at}
	}
	rows, err := db.Query(context.Background(), "SELECT id, completed_at, scan_end FROM backoff.list_jobs("+call+")", cursor...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[listed])
	require.NoError(t, err, call)
	return out
}

// walk lists every page of a listing and returns the ids in order.
func walk(t *testing.T, db *pgxpool.Pool, args, order string, limit int, extra string) []int64 {
	t.Helper()
	var ids []int64
	var after *listed
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the pages do not end")
		page := listPage(t, db, args, order, after, limit, extra)
		for _, j := range page {
			if !j.ScanEnd {
				ids = append(ids, j.ID)
			}
		}
		if len(page) == 0 {
			return ids
		}
		last := page[len(page)-1]
		if !last.ScanEnd && len(page) < limit {
			return ids
		}
		after = &last
	}
}

func TestListJobsKeysetPages(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	seedReads(t, db, 300)
	for _, f := range listFilters {
		for order, by := range orderBy {
			t.Run(f.name+"/"+order, func(t *testing.T) {
				cond := f.cond
				if order == "finished" {
					cond += " AND j.completed_at IS NOT NULL"
				}
				want := scalar[[]int64](t, db, "SELECT coalesce(array_agg(j.id ORDER BY "+by+"), '{}') FROM backoff.jobs AS j WHERE "+cond)
				got := walk(t, db, f.args, order, 7, "")
				require.Equal(t, want, append([]int64{}, got...))
				require.Equal(t, scalar[int64](t, db, "SELECT count(*) FROM backoff.jobs AS j WHERE "+f.cond),
					scalar[int64](t, db, "SELECT backoff.count_jobs("+f.args+")"))
			})
		}
	}
}

// TestListJobsErrorSearch: text in the last error has no index, so a page
// examines at most p_scan_limit jobs and says where it stopped; going on
// from there finds every match once.
func TestListJobsErrorSearch(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	seedReads(t, db, 300)
	for order, by := range orderBy {
		for _, args := range []string{"p_error_contains => 'timed OUT'", "p_error_contains => 'timed out', p_queue => 'a'"} {
			cond := "strpos(lower(j.last_error), 'timed out') > 0"
			if strings.Contains(args, "p_queue") {
				cond += " AND j.queue = 'a'"
			}
			if order == "finished" {
				cond += " AND j.completed_at IS NOT NULL"
			}
			want := scalar[[]int64](t, db, "SELECT array_agg(j.id ORDER BY "+by+") FROM backoff.jobs AS j WHERE "+cond)
			require.NotEmpty(t, want)
			require.Equal(t, want, walk(t, db, args, order, 4, "p_scan_limit => 10"), "%s %s", order, args)
			require.Equal(t, want, walk(t, db, args, order, 4, ""), "%s %s", order, args)
		}
	}
	// A page that stopped at its bound ends with the last job examined.
	page := listPage(t, db, "p_error_contains => 'no such text'", "oldest", nil, 5, "p_scan_limit => 10")
	require.Len(t, page, 1)
	require.True(t, page[0].ScanEnd)
	require.Equal(t, scalar[int64](t, db, "SELECT id FROM backoff.jobs ORDER BY id OFFSET 9 LIMIT 1"), page[0].ID)
	require.Empty(t, listPage(t, db, "p_error_contains => 'no such text'", "oldest", nil, 5, ""),
		"fewer jobs than the bound: the search is complete")
}

func TestListJobsRowsAndErrors(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	seedReads(t, db, 30)
	// Effective policy and attempts as backoff.job_policy says.
	rows, err := db.Query(context.Background(), `SELECT l.id, l.effective_policy, l.effective_max_attempts, l.payload IS NULL, l.errors IS NULL
		FROM backoff.list_jobs(p_limit => 100) AS l`)
	require.NoError(t, err)
	type row struct {
		ID          int64
		Policy      string
		MaxAttempts int32
		NoPayload   bool
		NoErrors    bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	rows, err = db.Query(context.Background(), `SELECT j.id, backoff.job_policy(j.policy, j.queue),
		coalesce(j.max_attempts, (SELECT p.max_attempts FROM backoff.policies AS p WHERE p.name = backoff.job_policy(j.policy, j.queue)), 0),
		false, false FROM backoff.jobs AS j ORDER BY j.id`)
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Contains(t, scalar[[]string](t, db, `SELECT array_agg(DISTINCT effective_policy) FROM backoff.list_jobs()`), "seven")
	require.True(t, scalar[bool](t, db, `SELECT bool_and(payload IS NULL AND errors IS NULL) FROM backoff.list_jobs(p_payloads => false)`))

	for call, msg := range map[string]string{
		"p_order => 'sideways'":                  `order must be oldest, newest or finished, got "sideways"`,
		"p_statuses => '{pending,lost}'":         `unknown status "lost"`,
		"p_statuses => '{NULL}'":                 `unknown status "NULL"`,
		"p_limit => 0":                           `limit must be at least 1, got "0"`,
		"p_scan_limit => -1":                     `scan limit must be at least 1, got "-1"`,
		"p_order => 'finished', p_after_id => 5": `the order finished continues after an id and a completion time, got "5" and "NULL"`,
	} {
		err := execErr(db, "SELECT * FROM backoff.list_jobs("+call+")")
		require.Contains(t, requireCode(t, err, "22023").Message, msg, call)
	}
	requireCode(t, execErr(db, "SELECT backoff.count_jobs(p_statuses => '{gone}')"), "22023")
	requireCode(t, execErr(db, "SELECT backoff.count_jobs(p_limit => -1)"), "22023")
	// A status is a literal in the statement: quoted, whatever it holds.
	requireCode(t, execErr(db, `SELECT * FROM backoff.list_jobs(p_statuses => ARRAY['pending'') OR true OR (''x'])`), "22023")
}

func TestCountJobsBoundAndSignature(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	seedReads(t, db, 200)
	all := scalar[int64](t, db, "SELECT count(*) FROM backoff.jobs WHERE status = 'dead_lettered'")
	require.Greater(t, all, int64(10))
	require.EqualValues(t, 10, scalar[int64](t, db, "SELECT backoff.count_jobs(p_statuses => '{dead_lettered}', p_limit => 10)"))
	require.Equal(t, all, scalar[int64](t, db, "SELECT backoff.count_jobs(p_statuses => '{dead_lettered}', p_limit => 0)"))
	require.Equal(t,
		scalar[int64](t, db, "SELECT count(*) FROM backoff.jobs WHERE backoff.error_signature(last_error) = 'order N Timed out'"),
		scalar[int64](t, db, "SELECT backoff.count_jobs(p_error_signature => 'order N Timed out')"))
	require.Equal(t,
		scalar[int64](t, db, "SELECT count(*) FROM backoff.jobs WHERE queue = 'a' AND last_error ILIKE '%REFUSED%'"),
		scalar[int64](t, db, "SELECT backoff.count_jobs(p_queue => 'a', p_error_contains => 'REFUSED')"))
}

func TestJobDetail(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	id := scalar[int64](t, db, `SELECT backoff.enqueue('emails', '{"to": "someone@example.com"}', p_policy => 'moderate', p_now => $1)`, t0)
	type detail struct {
		Policy      string
		MaxAttempts int32
		Payload     *string
		Text        *string
		Bytes       *int64
		Truncated   *bool
	}
	read := func(chars any) []detail {
		rows, err := db.Query(context.Background(), `SELECT effective_policy, effective_max_attempts, payload::text,
			payload_text, payload_bytes, payload_truncated FROM backoff.job_detail($1, $2)`, id, chars)
		require.NoError(t, err)
		d, err := pgx.CollectRows(rows, pgx.RowToStructByPos[detail])
		require.NoError(t, err)
		return d
	}
	whole := `{"to": "someone@example.com"}`
	maxAttempts := scalar[int32](t, db, `SELECT max_attempts FROM backoff.policies WHERE name = 'moderate'`)
	require.Equal(t, []detail{{Policy: "moderate", MaxAttempts: maxAttempts, Payload: &whole}}, read(nil))
	require.Equal(t, []detail{{Policy: "moderate", MaxAttempts: maxAttempts, Text: ptr(`{"to": "so`),
		Bytes: ptr(int64(len(whole))), Truncated: ptr(true)}}, read(10))
	require.Equal(t, []detail{{Policy: "moderate", MaxAttempts: maxAttempts, Text: &whole,
		Bytes: ptr(int64(len(whole))), Truncated: ptr(false)}}, read(len(whole)))
	require.Empty(t, scalar[int64](t, db, `SELECT count(*) FROM backoff.job_detail($1)`, id+1))
	requireCode(t, execErr(db, `SELECT * FROM backoff.job_detail($1, 0)`, id), "22023")
}

func TestQueueHistoryAndPolicyList(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	exec(t, db, `SELECT backoff.pause_queue('a', p_create => true)`)
	exec(t, db, `SELECT backoff.pause_queue('b', p_create => true)`)
	exec(t, db, `SELECT backoff.resume_queue('a')`)
	got := scalar[[]string](t, db, `SELECT array_agg(queue || ' ' || action) FROM backoff.queue_history()`)
	require.Equal(t, scalar[[]string](t, db, `SELECT array_agg(queue || ' ' || action ORDER BY at DESC, id DESC) FROM backoff.queue_events`), got)
	require.Equal(t, []string{"a resume", "a pause"}, scalar[[]string](t, db, `SELECT array_agg(queue || ' ' || action) FROM backoff.queue_history('a')`))
	require.Equal(t, []string{"a resume"}, scalar[[]string](t, db, `SELECT array_agg(queue || ' ' || action) FROM backoff.queue_history(NULL, 1)`))
	requireCode(t, execErr(db, `SELECT * FROM backoff.queue_history('a', 0)`), "22023")

	exec(t, db, `INSERT INTO backoff.policies (name, strategy, base, schedule, max_delay, deadline, max_lease_expiries)
		VALUES ('odd', 'schedule', '1.5 seconds', '{1s, 250ms, 1 day}', '2 hours', '3 days', 4)`)
	require.Equal(t,
		scalar[string](t, db, `SELECT string_agg(concat_ws(' ', name, strategy, (extract(epoch FROM base) * 1e6)::bigint,
			(SELECT coalesce(array_agg((extract(epoch FROM s) * 1e6)::bigint), '{}') FROM unnest(schedule) AS s), (extract(epoch FROM max_delay) * 1e6)::bigint,
			(extract(epoch FROM lease) * 1e6)::bigint, (extract(epoch FROM deadline) * 1e6)::bigint, max_lease_expiries), '; ' ORDER BY name)
			FROM backoff.policies`),
		scalar[string](t, db, `SELECT string_agg(concat_ws(' ', name, strategy, base_us, schedule_us, max_delay_us, lease_us,
			deadline_us, max_lease_expiries), '; ' ORDER BY name) FROM backoff.policy_list()`))
	require.Contains(t, scalar[string](t, db, `SELECT string_agg(name || ' ' || schedule_us::text, ';') FROM backoff.policy_list()`),
		"odd {1000000,250000,86400000000}")
}

// TestDeadLetterReads: the groups, the counts per reason (exact up to
// their bound) and the sample, against plain aggregates.
func TestDeadLetterReads(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	seedReads(t, db, 700)
	// A dead letter without a reason (written by hand) and without a
	// completion time. It names no segment, so it lands in the current live
	// one, where the sample's by-id look-up finds it after the finished
	// segment did not.
	exec(t, db, `INSERT INTO backoff.jobs (queue, status, run_at, created_at, last_error) VALUES ('b', 'dead_lettered', $1, $1, 'by hand 42')`, t0)
	require.NotZero(t, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE last_error = 'by hand 42'`))

	groups := `SELECT string_agg(concat_ws(' ', queue, reason, signature, count, first_seen, last_seen, example), '; ' ORDER BY count DESC, queue, reason, signature)`
	plain := ` FROM (SELECT j.queue, coalesce(j.dead_letter_reason, '') AS reason, backoff.error_signature(j.last_error) AS signature, count(*) AS count,
			min(coalesce(j.completed_at, j.created_at)) AS first_seen, max(coalesce(j.completed_at, j.created_at)) AS last_seen,
			(array_agg(j.last_error ORDER BY j.id DESC))[1] AS example
		FROM backoff.jobs AS j WHERE j.status = 'dead_lettered' %s GROUP BY 1, 2, 3) AS g`
	require.Equal(t, scalar[string](t, db, groups+fmt.Sprintf(plain, "")), scalar[string](t, db, groups+" FROM backoff.dead_letter_groups()"))
	require.Equal(t, scalar[string](t, db, groups+fmt.Sprintf(plain, "AND j.queue = 'b'")), scalar[string](t, db, groups+" FROM backoff.dead_letter_groups('b')"))
	require.EqualValues(t, 2, scalar[int64](t, db, "SELECT count(*) FROM backoff.dead_letter_groups(NULL, 2)"))

	reasons := `SELECT string_agg(concat_ws(' ', queue, coalesce(reason, '-'), count, count_exact, first_seen, last_seen), '; ' ORDER BY queue, reason)`
	want := func(limit int, queue any) string {
		return scalar[string](t, db, reasons+fmt.Sprintf(` FROM (SELECT queue, dead_letter_reason AS reason, least(count(*), %d) AS count,
			count(*) <= %d AS count_exact, min(completed_at) AS first_seen, max(completed_at) AS last_seen
			FROM backoff.jobs WHERE status = 'dead_lettered' AND ($1::text IS NULL OR queue = $1) GROUP BY 1, 2) AS r`, limit, limit), queue)
	}
	require.Equal(t, want(100000, nil), scalar[string](t, db, reasons+" FROM backoff.dead_letter_reasons()"))
	require.Equal(t, want(10, nil), scalar[string](t, db, reasons+" FROM backoff.dead_letter_reasons(p_count_limit => 10)"))
	require.Contains(t, want(10, nil), " f ", "some counts pass the bound")
	require.Equal(t, want(100000, "b"), scalar[string](t, db, reasons+" FROM backoff.dead_letter_reasons('b')"))
	require.Equal(t, []string{"a max_attempts", "a non_retryable", "b max_attempts"},
		scalar[[]string](t, db, `SELECT array_agg(queue || ' ' || reason) FROM backoff.dead_letter_reasons(p_pairs => 3)`))

	// The whole sample is every dead letter: the groups are whole. A group's
	// example is its most recently dead-lettered job's error (one without a
	// completion time first, as the index read backward has it).
	plain = strings.Replace(plain, "ORDER BY j.id DESC", "ORDER BY j.completed_at DESC, j.id DESC", 1)
	sample := `SELECT string_agg(concat_ws(' ', queue, reason, signature, count, first_seen, last_seen, example), '; ' ORDER BY count DESC, queue, reason, signature)`
	require.Equal(t, scalar[string](t, db, groups+fmt.Sprintf(plain, "")), scalar[string](t, db, sample+" FROM backoff.dead_letter_sample()"))
	total := scalar[int64](t, db, `SELECT count(*) FROM backoff.jobs WHERE status = 'dead_lettered'`)
	require.Equal(t, total, scalar[int64](t, db, `SELECT max(sampled) FROM backoff.dead_letter_sample()`))
	// A sample of 20: the 20 most recently dead-lettered.
	recent := `(SELECT id FROM backoff.jobs WHERE status = 'dead_lettered' ORDER BY completed_at DESC, id DESC LIMIT 20)`
	require.Equal(t, scalar[string](t, db, groups+fmt.Sprintf(plain, "AND j.id IN "+recent)),
		scalar[string](t, db, sample+" FROM backoff.dead_letter_sample(p_sample => 20)"))
	require.Equal(t, []int64{20}, scalar[[]int64](t, db, `SELECT array_agg(DISTINCT sampled) FROM backoff.dead_letter_sample(p_sample => 20)`))
	require.EqualValues(t, 3, scalar[int64](t, db, `SELECT count(*) FROM backoff.dead_letter_sample(p_groups => 3)`))
	for _, call := range []string{"dead_letter_sample(p_sample => 0)", "dead_letter_sample(p_pairs => 0)", "dead_letter_reasons(p_count_limit => 0)",
		"dead_letter_groups(NULL, 0)"} {
		requireCode(t, execErr(db, "SELECT * FROM backoff."+call), "22023")
	}
}

// TestOperatorReadPlans: the statements the reads run, as auto_explain logs
// them from inside the functions, read the index each filter needs, sort
// no table and are not JIT-compiled even where the session compiles
// everything above a cost of 20. At 200,000 jobs with fresh statistics
// the planner has a choice; bench/ui*.go measures the same reads at a
// million.
func TestOperatorReadPlans(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills 200,000 rows")
	}
	url := testdbURL(t)
	setup := poolOn(t, url)
	// Finished jobs where finishing puts them (segment 0), live ones where
	// enqueue does (the current segment, docs/adr/0061).
	exec(t, setup, `INSERT INTO backoff.jobs (segment, queue, status, attempts, run_at, lease_until, locked_by, created_at, completed_at, last_error, dead_letter_reason)
		SELECT CASE WHEN s.status IN ('pending', 'running') THEN (SELECT backoff._current_segment()) ELSE 0 END,
		       'q' || (i / 10 % 8), s.status, 1, $1::timestamptz, CASE WHEN s.status = 'running' THEN $1::timestamptz END,
		       CASE WHEN s.status = 'running' THEN 'w' END, $1::timestamptz - i * interval '1 second',
		       CASE WHEN s.status IN ('completed', 'dead_lettered') THEN $1::timestamptz - i * interval '1 second' END,
		       CASE WHEN s.status = 'dead_lettered' THEN 'order ' || i || ' failed' END,
		       CASE WHEN s.status = 'dead_lettered' THEN (ARRAY['max_attempts', 'deadline'])[1 + i / 80 % 2] END
		FROM generate_series(1, 200000) AS i
		CROSS JOIN LATERAL (SELECT CASE WHEN i % 10 = 0 THEN 'dead_lettered' WHEN i % 1000 = 1 THEN 'running'
		                                WHEN i % 1000 = 2 THEN 'pending' ELSE 'completed' END AS status) AS s`, t0)
	exec(t, setup, `VACUUM (FREEZE, ANALYZE) backoff.jobs`)

	ec := explaining(t, url,
		"SET jit = on",
		// Above the cost of the call itself (a function scan: about 10),
		// which this session plans and would compile (and which fails where
		// llvmjit cannot load, as on CI's PostgreSQL 15 image); below the
		// statements the functions run.
		"SET jit_above_cost = 20",
	)
	// planOf calls the read and returns the plans of the statements on
	// backoff.jobs it ran.
	planOf := func(call string) string {
		t.Helper()
		plans := ec.plansOf(t, call)
		var onJobs []string
		for _, p := range plans {
			if strings.Contains(p, "Query Text: "+call+"\n") {
				continue // the session's own call, not a statement of the function
			}
			require.NotContains(t, p, "JIT:", "%s compiled a statement:\n%s", call, p)
			if strings.Contains(p, " on jobs") {
				onJobs = append(onJobs, p)
			}
		}
		require.NotEmpty(t, onJobs, "no plan on jobs logged for %s: %q", call, plans)
		all := strings.Join(onJobs, "\n")
		// The finished jobs are read through an index (which one is the
		// planner's choice, by version and statistics); a live segment is
		// small by design (docs/adr/0061), where a scan may be the cheapest.
		require.NotContains(t, all, "Seq Scan on jobs_finished", "%s:\n%s", call, all)
		return all
	}
	for call, index := range map[string]string{
		"backoff.list_jobs()": "_pkey on jobs_",
		"backoff.list_jobs(p_order => 'newest', p_after_id => 150000)":                                                                   "Index Scan Backward using jobs_finished_pkey on jobs_finished",
		"backoff.list_jobs(p_queue => 'q3', p_statuses => '{dead_lettered}')":                                                            "jobs_finished_",
		"backoff.list_jobs(p_queue => 'q2', p_dead_letter_reason => 'deadline')":                                                         "jobs_finished_",
		"backoff.list_jobs(p_statuses => '{running}')":                                                                                   "jobs_finished_",
		"backoff.list_jobs(p_statuses => '{pending, retrying}', p_queue => 'q2')":                                                        "jobs_finished_",
		"backoff.list_jobs(p_order => 'finished')":                                                                                       "Index Scan Backward using jobs_finished_finished_idx on jobs_finished",
		"backoff.list_jobs(p_order => 'finished', p_queue => 'q1', p_after_id => 100, p_after_completed_at => '2025-12-31 23:00:00+00')": "Index Scan Backward using jobs_finished_finished_idx on jobs_finished",
		"backoff.list_jobs(p_queue => 'q3', p_statuses => '{dead_lettered}', p_error_contains => 'order 1')":                             "jobs_finished_",
		"backoff.count_jobs(p_statuses => '{dead_lettered, cancelled}', p_queue => 'q5')":                                                "jobs_finished_",
		"backoff.job_detail(777, 100)":                                                                                                   "_pkey on jobs_",
	} {
		p := planOf("SELECT * FROM " + call)
		require.Contains(t, p, index, "%s:\n%s", call, p)
		// A sort of what an index read, bounded by the page, is fine; a
		// sort of the table is not: every Sort here sits under a Limit.
		require.NotContains(t, p, "Sort Method: external", "%s:\n%s", call, p)
	}
	p := planOf("SELECT * FROM backoff.dead_letter_reasons()")
	require.Contains(t, p, "Index Only Scan using jobs_finished_dead_letters_idx", p)
	require.NotContains(t, p, "Index Scan using", "the counts and bounds read the index only:\n"+p)
	// A sample of 100 of each pair's 1,250 dead letters: at a sample near a
	// pair's whole count the planner rightly sorts the pair's rows instead.
	p = planOf("SELECT * FROM backoff.dead_letter_sample(p_sample => 100)")
	require.Contains(t, p, "Merge Append", p)
	require.Equal(t, 16, strings.Count(p, "Index Only Scan Backward using jobs_finished_dead_letters_idx"), "one per (queue, reason):\n"+p)
}
