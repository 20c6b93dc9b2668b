package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// mixedFate is one kind of job of the mixed run: the steps its payload
// carries, what share of the jobs it is, and the end state its payload
// demands whatever the crashes.
type mixedFate struct {
	steps  []string
	weight int
	status string
	reason string
}

var mixedFates = []mixedFate{
	{[]string{"ok"}, 60, "completed", ""},
	{[]string{"hang:300", "ok"}, 2, "completed", ""}, // long enough to be cut off by a kill
	{[]string{"fail", "ok"}, 15, "completed", ""},
	{[]string{"throw", "fail", "ok"}, 5, "completed", ""},
	{[]string{"retry_after:10", "ok"}, 5, "completed", ""},
	{[]string{"snooze:10", "ok"}, 5, "completed", ""},
	{[]string{"fail", "permanent"}, 5, "dead_lettered", "non_retryable"},
	{[]string{"fail"}, 3, "dead_lettered", "max_attempts"},
	// The graphs' jobs (mixedGraph), never drawn for the plain ones.
	{[]string{"output"}, 0, "completed", ""},
	{[]string{"fan_in"}, 0, "completed", ""},
	{[]string{"fail", "fan_in"}, 0, "completed", ""},
	{[]string{"big_output"}, 0, "completed", ""},
}

// fateOf is the index of the mixedFates entry with these steps.
func fateIndex(steps ...string) int {
	for k, f := range mixedFates {
		if fmt.Sprint(f.steps) == fmt.Sprint(steps) {
			return k
		}
	}
	panic(fmt.Sprintf("no mixed fate %v", steps))
}

// mixedGraph is one workflow of the mixed run, enqueued by ref prefix g:
// a root fans out to four children (one that reads the root's output,
// one that fails first, one whose output is too large for the batched
// completion, one dead-lettered whose edge says run), and a sink fans in. The sink's output, built from its
// parents' outputs, proves every edge carried what its parent left.
func mixedGraph(g string, queue string) (jobs []map[string]any, sink string, sinkOutput string) {
	add := func(name string, steps []string, deps ...any) {
		payload, _ := json.Marshal(map[string]any{"steps": steps, "name": g + name, "fate": fateIndex(steps...)})
		j := map[string]any{"ref": g + name, "queue": queue, "payload": json.RawMessage(payload)}
		if len(deps) > 0 {
			j["depends_on"] = deps
		}
		jobs = append(jobs, j)
	}
	add("root", []string{"output"})
	add("read", []string{"fan_in"}, g+"root")
	add("retry", []string{"fail", "fan_in"}, g+"root")
	add("long", []string{"big_output"}, g+"root")
	add("dead", []string{"fail", "permanent"}, g+"root")
	add("sink", []string{"fan_in"}, g+"read", g+"retry", g+"long", map[string]any{"ref": g + "dead", "on_failure": "run"})
	root := fmt.Sprintf(`{"status": "completed", "output": {"parents": [{"status": "completed", "output": {"name": %q}}]}}`, g+"root")
	big := fmt.Sprintf(`{"status": "completed", "output": {"name": %q, "pad": %q}}`, g+"long", strings.Repeat("x", 300))
	return jobs, g + "sink", fmt.Sprintf(`{"parents": [%s, %s, %s, {"status": "dead_lettered", "output": null}]}`, root, root, big)
}

// TestMixedRun: Go, Python and TypeScript workers on one queue at once; a
// worker of each language is killed (SIGKILL) mid-run and started again.
// Among the plain jobs are workflows (mixedGraph) that the three languages
// run together. At the end every job is in the state its payload demands
// (none lost), none was done twice (checkFencing), every child of a graph
// left blocked once and each fan-in read its parents' outputs. make conformance runs it
// (BACKOFF_CONFORMANCE_MIXED=1, BACKOFF_MIXED_JOBS, default 2000); make
// test does not.
func TestMixedRun(t *testing.T) {
	if os.Getenv("BACKOFF_CONFORMANCE_MIXED") == "" {
		t.Skip("the mixed run is part of make conformance (BACKOFF_CONFORMANCE_MIXED=1)")
	}
	n := 2000
	if s := os.Getenv("BACKOFF_MIXED_JOBS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "BACKOFF_MIXED_JOBS")
	}
	langs := languages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	setUpRecording(ctx, t, pool)
	const queue = "mixed"
	// Ten attempts: three kills cannot use up a job's budget. A short
	// lease brings a killed worker's jobs back quickly.
	setUpPolicy(ctx, t, pool, queue, policy{Strategy: "fixed", BaseMS: 1, MaxAttempts: 10, LeaseMS: 1500})

	total := 0
	for _, f := range mixedFates {
		total += f.weight
	}
	queues, payloads := make([]string, n), make([]string, n)
	fateOf := make([]int, n)
	for i := range n {
		// Spread the kinds evenly over the queue's order.
		k, acc := 0, 0
		for k = range mixedFates {
			acc += mixedFates[k].weight
			if (i*37)%total < acc {
				break
			}
		}
		b, err := json.Marshal(map[string]any{"steps": mixedFates[k].steps, "fate": k})
		require.NoError(t, err)
		queues[i], payloads[i], fateOf[i] = queue, string(b), k
	}
	_, err := pool.Exec(ctx, `SELECT backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[], p_run_ats => NULL::timestamptz[], p_max_attempts => NULL::integer[], p_priorities => NULL::integer[], p_dedupe_keys => NULL::text[])`, queues, payloads)
	require.NoError(t, err)
	// Workflows among them: one graph per 20 plain jobs, enqueued in one
	// call, run by the same workers of every language.
	var graphJobs []map[string]any
	sinks := map[string]string{}
	for g := range max(1, n/20) {
		jobs, sink, out := mixedGraph(fmt.Sprintf("g%d-", g), queue)
		graphJobs = append(graphJobs, jobs...)
		sinks[sink] = out
	}
	doc, err := json.Marshal(graphJobs)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.enqueue_graph(p_jobs => $1::jsonb)`, string(doc))
	require.NoError(t, err)
	n += len(graphJobs)

	settings := func(name string) map[string]any {
		return map[string]any{"queue": queue, "language": name, "concurrency": 8, "poll_ms": 100, "reap_ms": 200, "shutdown_ms": 5000}
	}
	workers := map[string]*worker{}
	for _, l := range langs {
		workers[l.Language] = startWorker(t, l, dbURL, settings(l.Language+"#1"))
	}
	start := time.Now()
	finished := `SELECT count(*) FILTER (WHERE status IN ('completed', 'dead_lettered')) >= $1 FROM backoff.jobs WHERE queue = 'mixed'`
	for i, l := range langs {
		// Kill each language's worker once, at a fifth, two fifths and
		// three fifths of the run, while it runs a handler.
		waitFor(ctx, t, pool, finished, n*(i+1)/5)
		waitFor(ctx, t, pool, `SELECT EXISTS (SELECT FROM public.conformance_effects AS e JOIN backoff.jobs AS j
			ON j.id = e.job_id AND j.attempts = e.attempt AND j.status = 'running' WHERE e.language = $1)`, l.Language+"#1")
		workers[l.Language].kill(t)
		workers[l.Language] = startWorker(t, l, dbURL, settings(l.Language+"#2"))
	}
	waitFor(ctx, t, pool, finished, n)
	elapsed := time.Since(start)
	for _, l := range langs {
		workers[l.Language].stop(t)
	}

	// Lost: a job not in the state its payload demands.
	rows, err := pool.Query(ctx, `SELECT id, (payload->>'fate')::int, status, coalesce(dead_letter_reason, '') FROM backoff.jobs WHERE queue = 'mixed' ORDER BY id`)
	require.NoError(t, err)
	lost, seen := []string{}, 0
	for rows.Next() {
		var id int64
		var k int
		var status, reason string
		require.NoError(t, rows.Scan(&id, &k, &status, &reason))
		seen++
		if f := mixedFates[k]; status != f.status || reason != f.reason {
			lost = append(lost, fmt.Sprintf("job %d %v: %s %s, want %s %s", id, f.steps, status, reason, f.status, f.reason))
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, n, seen)
	require.Empty(t, lost, "lost jobs")
	checkFencing(ctx, t, pool)

	// Every child left blocked once (its last parent completed, or failed
	// with an edge that runs it), and each sink read what its parents left.
	var unblocked []string
	rows, err = pool.Query(ctx, `SELECT 'job ' || d.child_id || ' left blocked ' || count(u.job_id) || ' times'
		FROM (SELECT DISTINCT child_id FROM backoff.job_dependencies) AS d
		LEFT JOIN public.conformance_unblocks AS u ON u.job_id = d.child_id
		GROUP BY d.child_id HAVING count(u.job_id) <> 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		unblocked = append(unblocked, s)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, unblocked, "children not unblocked exactly once")
	var children int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT child_id) FROM backoff.job_dependencies`).Scan(&children))
	require.Equal(t, len(graphJobs)-len(sinks), children, "every job of a graph but its root has parents")
	for sink, want := range sinks {
		var got []byte
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.job_output(id) FROM backoff.jobs WHERE payload->>'name' = $1`, sink).Scan(&got))
		require.JSONEq(t, want, string(got), "the output of %s", sink)
	}

	// The kills cut attempts off: their jobs came back through the reaper.
	var expiries int
	var byWorker []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(lease_expiries), 0) FROM backoff.jobs WHERE queue = 'mixed'),
		(SELECT jsonb_object_agg(language, n) FROM (SELECT language, count(*) AS n FROM public.conformance_effects GROUP BY language) AS c)`).
		Scan(&expiries, &byWorker))
	t.Logf("mixed run: %d jobs in %v (%.0f jobs/s); attempts by worker %s; %d leases expired after the kills", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), byWorker, expiries)
	require.Positive(t, expiries, "the kills cut no attempt off: nothing was proven")
}
