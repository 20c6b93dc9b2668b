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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/conformance"
	"github.com/pgbackoff/pgbackoff/internal/router"
	"github.com/pgbackoff/pgbackoff/internal/shardcluster"
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

// TestMixedRun: Go, Python and TypeScript workers on the same queues at
// once; a worker of each language is killed (SIGKILL) mid-run and started
// again. Among the plain jobs are workflows (mixedGraph) that the three
// languages run together. At the end every job is in the state its payload
// demands (none lost), none was done twice (fencingViolations), every child of a
// graph left blocked once and each fan-in read its parents' outputs. make
// conformance runs it on one database and one queue
// (BACKOFF_CONFORMANCE_MIXED=1, BACKOFF_MIXED_JOBS, default 2000); make
// test does not. The sharded run (make test-sharded) runs it through the
// router on a queue of each shard, once per way in shardedWays (default
// 600 jobs), and checks too that every shard ran its queue's jobs, each
// language some of them.
func TestMixedRun(t *testing.T) {
	if os.Getenv("BACKOFF_CONFORMANCE_MIXED") == "" && sharded == nil {
		t.Skip("the mixed run is part of make conformance (BACKOFF_CONFORMANCE_MIXED=1)")
	}
	n := 2000
	if sharded != nil {
		n = 600 // the sharded run is short: CI runs it beside the rest
	}
	if s := os.Getenv("BACKOFF_MIXED_JOBS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "BACKOFF_MIXED_JOBS")
	}
	if sharded == nil {
		ctx := context.Background()
		// A short lease brings a killed worker's jobs back quickly.
		runMixed(t, newTarget(ctx, t), []string{"mixed"}, n, 1500)
		return
	}
	for _, way := range shardedWays {
		t.Run(way.name, func(t *testing.T) {
			var env []string
			if way.direct {
				env = append(env, directShardsEnv+"=1")
			}
			// Every heartbeat crosses the router, on a machine the run
			// shares; the last kill's jobs come back while the rest of
			// the run goes on.
			runMixed(t, sharded.target, shardcluster.QueuesOnEveryShard("mixed-"+way.name), n, keptLeaseMS, env...)
		})
	}
}

// keptLeaseMS is a lease long enough to outlast a stall of a busy machine:
// with it, the mixed run requires too that a worker never killed loses no
// lease. The one-database run keeps a short lease, which brings a killed
// worker's jobs back quickly, and leaves that check out.
const keptLeaseMS = 10000

// directShardsEnv=1 asks a worker program to give its Worker the direct
// shard mode: the Worker reads the router's layout and calls each queue's
// shard itself (each program's directShards function).
const directShardsEnv = "BACKOFF_DIRECT_SHARDS"

// shardedWays are the ways the sharded mixed run's workers reach the jobs,
// each a run of its own on queues of its own. Every worker's DATABASE_URL
// is the router's.
var shardedWays = []struct {
	name   string
	direct bool // directShardsEnv=1
}{
	{"router", false},
	{"direct", true},
}

// runMixed is the mixed run of n plain jobs, spread over the queues, and
// the workflows among them, with the given lease (ms); env is added to
// the workers' environment.
func runMixed(t *testing.T, tg target, queues []string, n, leaseMS int, env ...string) {
	langs := languages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := tg.pool // the producer's: the router in the sharded run
	// Ten attempts: three kills cannot use up a job's budget.
	for _, q := range queues {
		setUpPolicy(ctx, t, tg, q, policy{Strategy: "fixed", BaseMS: 1, MaxAttempts: 10, LeaseMS: leaseMS})
	}

	total := 0
	for _, f := range mixedFates {
		total += f.weight
	}
	onQueue := map[string]int{} // jobs enqueued on each queue
	jobQueues, payloads := make([]string, n), make([]string, n)
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
		jobQueues[i], payloads[i] = queues[i%len(queues)], string(b)
		onQueue[jobQueues[i]]++
	}
	_, err := pool.Exec(ctx, `SELECT backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[], p_run_ats => NULL::timestamptz[], p_max_attempts => NULL::integer[], p_priorities => NULL::integer[], p_dedupe_keys => NULL::text[])`, jobQueues, payloads)
	require.NoError(t, err)
	// Workflows among them: one graph per 20 plain jobs, enqueued in one
	// call per queue (a workflow lives on one shard), run by the same
	// workers of every language.
	graphJobs := map[string][]map[string]any{}
	sinks := map[string]string{}
	sinkQueue := map[string]string{}
	nGraphJobs := 0
	for g := range max(1, n/20) {
		q := queues[g%len(queues)]
		jobs, sink, out := mixedGraph(fmt.Sprintf("g%d-", g), q)
		graphJobs[q] = append(graphJobs[q], jobs...)
		onQueue[q] += len(jobs)
		nGraphJobs += len(jobs)
		sinks[sink], sinkQueue[sink] = out, q
	}
	for _, q := range queues {
		doc, err := json.Marshal(graphJobs[q])
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `SELECT backoff.enqueue_graph(p_jobs => $1::jsonb)`, string(doc))
		require.NoError(t, err)
	}
	n += nGraphJobs

	settings := func(name string) map[string]any {
		return map[string]any{"queue": queues[0], "queues": queues[1:], "language": name,
			"concurrency": 8, "poll_ms": 100, "reap_ms": 200, "shutdown_ms": 5000}
	}
	workers := map[string]*worker{}
	for _, l := range langs {
		workers[l.Language] = startWorker(t, l, tg.url, settings(l.Language+"#1"), env...)
	}
	start := time.Now()
	// Each home answers for its own jobs, with their evidence beside them.
	finished := func(want int) func() bool {
		return func() bool {
			return sumOnHomes(ctx, t, tg, `SELECT count(*) FILTER (WHERE status IN ('completed', 'dead_lettered'))
				FROM backoff.jobs WHERE queue = ANY ($1::text[])`, queues) >= want
		}
	}
	for i, l := range langs {
		// Kill each language's worker once, at a fifth, two fifths and
		// three fifths of the run, while it runs a handler.
		waitUntil(ctx, t, fmt.Sprintf("%d jobs finished", n*(i+1)/5), finished(n*(i+1)/5))
		waitUntil(ctx, t, l.Language+"#1 running a handler", func() bool {
			return len(rowsOnHomes(ctx, t, tg, `SELECT 'running' FROM public.conformance_effects AS e JOIN backoff.jobs AS j
				ON j.id = e.job_id AND j.attempts = e.attempt AND j.status = 'running' WHERE e.language = $1 AND j.queue = ANY ($2::text[]) LIMIT 1`,
				l.Language+"#1", queues)) > 0
		})
		workers[l.Language].kill(t)
		workers[l.Language] = startWorker(t, l, tg.url, settings(l.Language+"#2"), env...)
	}
	waitUntil(ctx, t, fmt.Sprintf("all %d jobs finished", n), finished(n))
	elapsed := time.Since(start)
	for _, l := range langs {
		workers[l.Language].stop(t)
	}

	// Lost: a job not in the state its payload demands.
	lost, seen := []string{}, 0
	for _, home := range tg.homes {
		rows, err := home.Query(ctx, `SELECT id, (payload->>'fate')::int, status, coalesce(dead_letter_reason, '') FROM backoff.jobs WHERE queue = ANY ($1::text[]) ORDER BY id`, queues)
		require.NoError(t, err)
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
	}
	require.Equal(t, n, seen)
	require.Empty(t, lost, "lost jobs")
	var doubled []string
	for _, home := range tg.homes {
		doubled = append(doubled, fencingViolations(ctx, t, home, queues)...)
	}
	require.Empty(t, doubled, "done twice")
	if leaseMS >= keptLeaseMS {
		// A worker that was never killed (each language's second) settles
		// every attempt it took: none ends by its lease running out,
		// which is what a settle call refused or lost looks like.
		expired := rowsOnHomes(ctx, t, tg, `SELECT 'job ' || j.id || ': attempt ' || e.attempt || ' of ' || e.language || ' lost its lease'
			FROM backoff.jobs AS j CROSS JOIN LATERAL jsonb_array_elements(j.errors) AS x
			JOIN public.conformance_effects AS e ON e.job_id = j.id AND e.attempt = (x->>'attempt')::int
			WHERE j.queue = ANY ($1::text[]) AND x->>'kind' = 'lease_expired' AND e.language LIKE '%#2'`, queues)
		require.Empty(t, expired, "attempts of live workers that ended by expiry")
	}

	// Every child left blocked once (its last parent completed, or failed
	// with an edge that runs it), and each sink read what its parents left.
	unblocked := rowsOnHomes(ctx, t, tg, `SELECT 'job ' || d.child_id || ' left blocked ' || count(u.job_id) || ' times'
		FROM (SELECT DISTINCT child_id FROM backoff.job_dependencies
		      WHERE child_id IN (SELECT id FROM backoff.jobs WHERE queue = ANY ($1::text[]))) AS d
		LEFT JOIN public.conformance_unblocks AS u ON u.job_id = d.child_id
		GROUP BY d.child_id HAVING count(u.job_id) <> 1`, queues)
	require.Empty(t, unblocked, "children not unblocked exactly once")
	children := sumOnHomes(ctx, t, tg, `SELECT count(DISTINCT child_id) FROM backoff.job_dependencies
		WHERE child_id IN (SELECT id FROM backoff.jobs WHERE queue = ANY ($1::text[]))`, queues)
	require.Equal(t, nGraphJobs-len(sinks), children, "every job of a graph but its root has parents")
	for sink, want := range sinks {
		var got []byte
		require.NoError(t, tg.queueHome(sinkQueue[sink]).QueryRow(ctx, `SELECT backoff.job_output(id) FROM backoff.jobs WHERE payload->>'name' = $1 AND queue = $2`,
			sink, sinkQueue[sink]).Scan(&got))
		require.JSONEq(t, want, string(got), "the output of %s", sink)
	}

	// The kills cut attempts off: their jobs came back through the reaper.
	expiries := sumOnHomes(ctx, t, tg, `SELECT coalesce(sum(lease_expiries), 0) FROM backoff.jobs WHERE queue = ANY ($1::text[])`, queues)
	byWorker := map[string]int{}
	for _, home := range tg.homes {
		for lang, count := range effectsByLanguage(ctx, t, home, queues, "language") {
			byWorker[lang] += count
		}
	}
	t.Logf("mixed run: %d jobs on %d queue(s) in %v (%.0f jobs/s); attempts by worker %v; %d leases expired after the kills",
		n, len(queues), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), byWorker, expiries)
	require.Positive(t, expiries, "the kills cut no attempt off: nothing was proven")
	if len(tg.homes) > 1 {
		checkShards(ctx, t, tg, queues, onQueue, langs)
	}
}

// effectsByLanguage counts the attempts that ran on jobs of the queues
// held by home, by the given expression of the handler's language.
func effectsByLanguage(ctx context.Context, t *testing.T, home *pgxpool.Pool, queues []string, expr string) map[string]int {
	t.Helper()
	rows, err := home.Query(ctx, `SELECT `+expr+`, count(*) FROM public.conformance_effects
		WHERE job_id IN (SELECT id FROM backoff.jobs WHERE queue = ANY ($1::text[])) GROUP BY 1`, queues)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var lang string
		var count int
		require.NoError(t, rows.Scan(&lang, &count))
		out[lang] = count
	}
	require.NoError(t, rows.Err())
	return out
}

// checkShards: each shard holds its queue's jobs, all of them finished,
// their ids in its range; and every language's handlers ran jobs of every
// shard (their side effects recorded beside the jobs).
func checkShards(ctx context.Context, t *testing.T, tg target, queues []string, onQueue map[string]int, langs []conformance.Adapter) {
	t.Helper()
	ran := map[string]int{}
	for k, home := range tg.homes {
		var here, finished, elsewhere int
		require.NoError(t, home.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status IN ('completed', 'dead_lettered')),
			count(*) FILTER (WHERE id >> $2 <> $3)
			FROM backoff.jobs WHERE queue = ANY ($1::text[])`, queues, router.ShardBits, k).Scan(&here, &finished, &elsewhere))
		want := 0
		for _, q := range queues {
			if tg.queueHome(q) == home {
				want += onQueue[q]
			}
		}
		require.Positive(t, want, "shard %d holds none of the queues %v", k, queues)
		require.Equal(t, want, here, "jobs on shard %d", k)
		require.Equal(t, want, finished, "finished jobs on shard %d", k)
		require.Zero(t, elsewhere, "jobs on shard %d with another shard's id", k)
		for lang, count := range effectsByLanguage(ctx, t, home, queues, "split_part(language, '#', 1)") {
			ran[fmt.Sprintf("%s on shard %d", lang, k)] = count
		}
	}
	t.Logf("attempts by language and shard: %v", ran)
	for _, l := range langs {
		for k := range tg.homes {
			require.Positive(t, ran[fmt.Sprintf("%s on shard %d", l.Language, k)], "%s ran no job of shard %d", l.Language, k)
		}
	}
}
