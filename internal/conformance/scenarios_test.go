package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/conformance"
)

// registry is conformance/scenarios.json.
type registry struct {
	Steps     map[string]string `json:"steps"`
	Scenarios []scenario        `json:"scenarios"`
}

type scenario struct {
	Name   string         `json:"name"`
	About  string         `json:"about"`
	Policy policy         `json:"policy"`
	Worker map[string]int `json:"worker"`
	Jobs   []struct {
		Name  string   `json:"name"`
		Steps []string `json:"steps"`
		// Schedule: the job is not enqueued but left to a schedule whose
		// slot is due when the worker starts; the worker must fire it.
		Schedule bool `json:"schedule"`
		// DependsOn: the jobs of the scenario it depends on, as
		// backoff.enqueue_graph takes them (a name, or {"ref": name,
		// "on_failure": policy}); a scenario with any is enqueued as one
		// graph (docs/workflows.md).
		DependsOn []json.RawMessage `json:"depends_on"`
	} `json:"jobs"`
	// StopWhenRunning: the worker is told to stop as soon as every job's
	// handler runs its step (its side effect recorded), instead of when
	// every job is finished.
	StopWhenRunning bool `json:"stop_when_running"`
	// ExpireWhenRunning: as soon as every job's handler runs its step, the
	// runner ends the leases of those attempts (lease_until = now), as a
	// lease running out would, and the worker's reaper takes them: expiry
	// without waiting out a short lease in real time.
	ExpireWhenRunning bool                `json:"expire_when_running"`
	Expect            map[string]endState `json:"expect"`
	// NotThroughRouter: why the scenario cannot work through a PL/Proxy
	// router (docs/sharding.md); the sharded run skips it, saying so.
	NotThroughRouter string `json:"not_through_router"`
}

type policy struct {
	Strategy         string `json:"strategy"`
	BaseMS           int    `json:"base_ms"`
	MaxDelayMS       int    `json:"max_delay_ms"`
	MaxAttempts      int    `json:"max_attempts"`
	LeaseMS          int    `json:"lease_ms"`
	MaxLeaseExpiries *int   `json:"max_lease_expiries"`
}

// endState is what a job must look like when the worker has stopped.
// Pointers are checked only when the scenario gives them.
type endState struct {
	Status        string  `json:"status"`
	Reason        *string `json:"reason,omitempty"`
	Attempts      int     `json:"attempts"`
	Counted       int     `json:"counted"`
	Errors        int     `json:"errors"`
	LeaseExpiries *int    `json:"lease_expiries,omitempty"`
	// LastError must be contained in the job's last_error: each language
	// words an error its own way around the handler's message.
	LastError string `json:"last_error,omitempty"`
	// DueNow: the job's run_at is not in the future.
	DueNow bool `json:"due_now,omitempty"`
	// LeaseExtendedMS: heartbeats of the job's last attempt carried its
	// lease at least this far past the lease its claim gave.
	LeaseExtendedMS *int `json:"lease_extended_ms,omitempty"`
	// Output: the job's output (backoff.job_output), as jsonb equals it.
	Output json.RawMessage `json:"output,omitempty"`
}

func loadRegistry(t *testing.T) registry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "conformance", "scenarios.json"))
	require.NoError(t, err)
	var r registry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "conformance/scenarios.json")
	return r
}

// TestRegistryIsWellFormed: names are unique, every job has an expected
// end state and every step is one the adapters know.
func TestRegistryIsWellFormed(t *testing.T) {
	r := loadRegistry(t)
	require.NotEmpty(t, r.Scenarios)
	seen := map[string]bool{}
	for _, s := range r.Scenarios {
		require.False(t, seen[s.Name], "scenario %q twice", s.Name)
		seen[s.Name] = true
		require.NotEmpty(t, s.About, s.Name)
		require.Len(t, s.Expect, len(s.Jobs), "scenario %q: one expected end state per job", s.Name)
		for _, j := range s.Jobs {
			_, ok := s.Expect[j.Name]
			require.True(t, ok, "scenario %q: job %q has no expected end state", s.Name, j.Name)
			require.NotEmpty(t, j.Steps, "scenario %q: job %q", s.Name, j.Name)
			for _, st := range j.Steps {
				kind, _, hasArg := strings.Cut(st, ":")
				key := kind
				if hasArg {
					key += ":MS"
				}
				_, ok := r.Steps[key]
				require.True(t, ok, "scenario %q: unknown step %q", s.Name, st)
			}
		}
	}
}

// TestScenarios runs every scenario against every language, each on a
// fresh database; a language fails a scenario when a job's end state
// differs from the expectation or a fencing invariant breaks.
func TestScenarios(t *testing.T) {
	r := loadRegistry(t)
	langs := languages(t)
	for _, s := range r.Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for _, l := range langs {
				t.Run(l.Language, func(t *testing.T) {
					t.Parallel()
					runScenario(t, s, l)
				})
			}
		})
	}
}

func runScenario(t *testing.T, s scenario, l conformance.Adapter) {
	if sharded != nil && s.NotThroughRouter != "" {
		t.Skipf("not through a router: %s", s.NotThroughRouter)
	}
	// A guard against a hang, generous for a busy machine: every scenario
	// runs at once, each language's worker in a process of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tg := newTarget(ctx, t)
	// A queue of its own: the sharded run's scenarios share one install.
	queue := "conformance_" + s.Name + "_" + l.Language
	setUpPolicy(ctx, t, tg, queue, s.Policy)
	// The runner enqueues as a producer does (through the router in the
	// sharded run) and reads where the queue's jobs are.
	pool, db := tg.pool, tg.queueHome(queue)

	ids := map[string]int64{}
	var schedules []string // of the jobs left to a schedule, by job name
	// A schedule's name is unique where it lives: qualified by the queue,
	// since the sharded run's scenarios share their shards.
	scheduleName := func(job string) string { return queue + "." + job }
	var graph []map[string]any
	for _, j := range s.Jobs {
		if len(j.DependsOn) > 0 {
			graph = []map[string]any{}
		}
	}
	for _, j := range s.Jobs {
		p, err := json.Marshal(map[string]any{"steps": j.Steps, "name": j.Name})
		require.NoError(t, err)
		if j.Schedule {
			// Daily slots at now + 12 h + k days, written as of 13 h ago:
			// the first slot, 12 h ago, is due now (catch_up latest fires
			// it once) and the next is 12 h away, past any run.
			_, err := pool.Exec(ctx, `SELECT backoff.put_schedule(p_name => $1, p_queue => $2, p_every => '24 hours',
				p_payload => $3::jsonb, p_anchor => now() + interval '12 hours', p_now => now() - interval '13 hours')`,
				scheduleName(j.Name), queue, string(p))
			require.NoError(t, err)
			schedules = append(schedules, j.Name)
			continue
		}
		if graph != nil {
			graph = append(graph, map[string]any{"ref": j.Name, "queue": queue, "payload": json.RawMessage(p), "depends_on": j.DependsOn})
			continue
		}
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue(p_queue => $1, p_payload => $2::jsonb)`, queue, string(p)).Scan(&id))
		ids[j.Name] = id
	}
	if graph != nil {
		doc, err := json.Marshal(graph)
		require.NoError(t, err)
		rows, err := pool.Query(ctx, `SELECT ref, job_id FROM backoff.enqueue_graph(p_jobs => $1::jsonb)`, string(doc))
		require.NoError(t, err)
		for rows.Next() {
			var ref string
			var id int64
			require.NoError(t, rows.Scan(&ref, &id))
			ids[ref] = id
		}
		require.NoError(t, rows.Err())
	}
	// A job expected blocked (a failed parent's wait edge) is settled once
	// it is blocked and every other job is finished.
	blocked := []int64{}
	for name, e := range s.Expect {
		if e.Status == "blocked" {
			blocked = append(blocked, ids[name])
		}
	}

	settings := map[string]any{"queue": queue, "language": l.Language}
	for k, v := range s.Worker {
		settings[k] = v
	}
	w := startWorker(t, l, tg.url, settings)

	// A job runs once its attempt is claimed and its handler has recorded
	// its side effect: the handler is in its step, not still starting.
	running := `status = 'running' AND EXISTS (SELECT FROM public.conformance_effects AS e
		WHERE e.job_id = backoff.jobs.id AND e.attempt = backoff.jobs.attempts)`
	if s.ExpireWhenRunning {
		waitFor(ctx, t, db, fmt.Sprintf(`SELECT count(*) FILTER (WHERE NOT (%s)) = 0 FROM backoff.jobs WHERE queue = $1`, running), queue)
		require.EqualValues(t, len(s.Jobs), endLeases(ctx, t, tg, queue), "leases ended")
	}
	want, args := "status IN ('completed', 'dead_lettered', 'cancelled') OR (status = 'blocked' AND id = ANY ($3::bigint[]))",
		[]any{queue, len(schedules), blocked}
	if s.StopWhenRunning {
		want, args = running, args[:2]
	}
	waitFor(ctx, t, db, fmt.Sprintf(`SELECT count(*) FILTER (WHERE NOT (%s)) = 0
		AND count(*) FILTER (WHERE schedule IS NOT NULL) = $2 FROM backoff.jobs WHERE queue = $1`, want), args...)
	w.stop(t)
	for _, name := range schedules {
		var id int64
		require.NoError(t, db.QueryRow(ctx, `SELECT id FROM backoff.jobs WHERE schedule = $1 AND schedule_slot IS NOT NULL`, scheduleName(name)).Scan(&id),
			"the job of schedule %q", name)
		ids[name] = id
	}

	for name, id := range ids {
		checkEndState(ctx, t, db, name, id, s.Expect[name])
	}
	checkFencing(ctx, t, db, queue)
}

// waitFor polls a condition (a query returning one boolean) every 20 ms.
// It waits for the workers, not for a backoff: the policies' delays are
// milliseconds.
func waitFor(ctx context.Context, t *testing.T, pool *pgxpool.Pool, query string, args ...any) {
	t.Helper()
	waitUntil(ctx, t, query, func() bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, query, args...).Scan(&ok), "waiting for %s", query)
		return ok
	})
}

// waitUntil polls cond every 20 ms until it holds or ctx ends.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// worker is a running adapter process.
type worker struct {
	lang   string
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan error
}

// startWorker starts the adapter with env added to its environment.
func startWorker(t *testing.T, l conformance.Adapter, dbURL string, settings map[string]any, env ...string) *worker {
	t.Helper()
	b, err := json.Marshal(settings)
	require.NoError(t, err)
	cmd := l.Command(dbURL, string(b))
	if len(env) > 0 {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, env...)
	}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start(), "start the %s worker", l.Language)
	w := &worker{lang: l.Language, cmd: cmd, out: out, exited: make(chan error, 1)}
	go func() { w.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			t.Logf("%s worker's output:\n%s", l.Language, out.String())
		}
		w.exited <- nil
	})
	return w
}

// stop asks for the graceful shutdown (SIGTERM) and requires exit 0.
func (w *worker) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-w.exited:
		w.exited <- err // for the cleanup
		require.NoError(t, err, "the %s worker's exit after SIGTERM:\n%s", w.lang, w.out.String())
	case <-time.After(2 * time.Minute): // a guard, generous for a busy machine
		t.Fatalf("the %s worker did not stop within 2 minutes of SIGTERM:\n%s", w.lang, w.out.String())
	}
}

// kill ends the worker with SIGKILL: no shutdown, no settle call.
func (w *worker) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Kill())
	err := <-w.exited
	w.exited <- err
}

func checkEndState(ctx context.Context, t *testing.T, pool *pgxpool.Pool, name string, id int64, want endState) {
	t.Helper()
	var (
		got       endState
		reason    *string
		expiries  int
		lastError *string
		dueNow    bool
		extended  int
	)
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT status, dead_letter_reason, attempts, attempts - uncounted_attempts,
		       jsonb_array_length(errors), lease_expiries, last_error, run_at <= now(),
		       (SELECT coalesce(floor(extract(epoch FROM max(l.lease_until) - min(l.lease_until)) * 1000), 0)::int
		        FROM public.conformance_leases AS l WHERE l.job_id = j.id AND l.attempt = j.attempts)
		FROM backoff.jobs AS j WHERE id = $1`, id).
		Scan(&got.Status, &reason, &got.Attempts, &got.Counted, &got.Errors, &expiries, &lastError, &dueNow, &extended))
	got.Reason, got.LeaseExpiries, got.DueNow = reason, &expiries, dueNow
	if lastError != nil {
		got.LastError = *lastError
	}
	desc := func(e endState) string {
		s := fmt.Sprintf("status=%s attempts=%d counted=%d errors=%d", e.Status, e.Attempts, e.Counted, e.Errors)
		if e.Reason != nil {
			s += " reason=" + *e.Reason
		}
		if e.LeaseExpiries != nil {
			s += fmt.Sprintf(" lease_expiries=%d", *e.LeaseExpiries)
		}
		return s
	}
	compare := got
	if want.Reason == nil {
		compare.Reason = nil
	}
	if want.LeaseExpiries == nil {
		compare.LeaseExpiries = nil
	}
	require.Equal(t, desc(want), desc(compare), "job %q (id %d): end state", name, id)
	if want.LastError != "" {
		require.Contains(t, got.LastError, want.LastError, "job %q (id %d): last_error", name, id)
	}
	if want.DueNow {
		require.True(t, got.DueNow, "job %q (id %d): due at once", name, id)
	}
	if want.Output != nil {
		var got []byte
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.job_output($1)`, id).Scan(&got))
		require.JSONEq(t, string(want.Output), string(got), "job %q (id %d): output", name, id)
	}
	if want.LeaseExtendedMS != nil {
		require.GreaterOrEqual(t, extended, *want.LeaseExtendedMS,
			"job %q (id %d): how far (ms) heartbeats carried its last attempt's lease past its claim's", name, id)
	}
}

// checkFencing finds what counts as done twice (docs/adr/0069) among the
// jobs of the queues: a token whose handler ran twice, a job completed
// twice, a completion by a token that never ran or that was not the job's
// last claim, and an attempt whose handler started after another attempt
// had completed the job. A handler that ran again after its attempt was
// lost (a crash, an expired lease) before the job was completed is
// at-least-once delivery, not a double. A completed job without its
// recorded completion means the evidence is incomplete (a trigger missing
// where the job lives, a view that reads no shard): the check would prove
// nothing, so that fails too.
func checkFencing(ctx context.Context, t *testing.T, pool *pgxpool.Pool, queues ...string) {
	t.Helper()
	require.Empty(t, fencingViolations(ctx, t, pool, queues), "done twice")
}

func fencingViolations(ctx context.Context, t *testing.T, pool *pgxpool.Pool, queues []string) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `
		WITH jobs AS MATERIALIZED (SELECT id, attempts, status FROM backoff.jobs WHERE queue = ANY ($1::text[])),
		effects AS MATERIALIZED (SELECT * FROM public.conformance_effects WHERE job_id IN (SELECT id FROM jobs)),
		completions AS MATERIALIZED (SELECT * FROM public.conformance_completions WHERE queue = ANY ($1::text[]))
		SELECT 'token ' || job_id || '/' || attempt || ' ran ' || count(*) || ' times'
		FROM effects GROUP BY job_id, attempt HAVING count(*) > 1
		UNION ALL
		SELECT 'job ' || job_id || ' completed ' || count(*) || ' times'
		FROM completions GROUP BY job_id HAVING count(*) > 1
		UNION ALL
		SELECT 'job ' || c.job_id || ' completed by attempt ' || c.attempt || ', which never ran'
		FROM completions AS c
		WHERE NOT EXISTS (SELECT FROM effects AS e WHERE e.job_id = c.job_id AND e.attempt = c.attempt)
		UNION ALL
		SELECT 'job ' || c.job_id || ' completed by attempt ' || c.attempt || ', not by its last claim ' || j.attempts
		FROM completions AS c JOIN jobs AS j ON j.id = c.job_id
		WHERE j.attempts <> c.attempt
		UNION ALL
		SELECT 'job ' || c.job_id || ': attempt ' || e.attempt || ' ran after attempt ' || c.attempt || ' completed it'
		FROM completions AS c
		JOIN effects AS e ON e.job_id = c.job_id AND e.attempt <> c.attempt AND e.at > c.at
		UNION ALL
		SELECT 'job ' || j.id || ' completed, with no completion recorded'
		FROM jobs AS j WHERE j.status = 'completed' AND NOT EXISTS (SELECT FROM completions AS c WHERE c.job_id = j.id)`, queues)
	require.NoError(t, err)
	var broken []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		broken = append(broken, s)
	}
	require.NoError(t, rows.Err())
	sort.Strings(broken)
	return broken
}

// TestFencingViolationsAreFound: the check of "done twice" finds each kind
// in recorded evidence, and nothing in a clean record; in the sharded run,
// in the evidence the router passed on to the shard.
func TestFencingViolationsAreFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg := newTarget(ctx, t)
	const queue = "fencing"
	// Calls as a worker's and records as a handler's, through the router
	// in the sharded run; the evidence is read where the jobs are.
	pool, db := tg.pool, tg.queueHome(queue)
	var ids []int64
	for range 6 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue(p_queue => $1)`, queue).Scan(&id))
		ids = append(ids, id)
	}
	// Claimed, failed and claimed again: every job's last claim is token 2.
	_, err := pool.Exec(ctx, `SELECT backoff.claim(p_queue => $1, p_worker => 'w', p_limit => 6)`, queue)
	require.NoError(t, err)
	for _, id := range ids {
		_, err = pool.Exec(ctx, `SELECT backoff.fail(p_job_id => $1, p_attempt => 1, p_error => 'crash')`, id)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `SELECT backoff.claim(p_queue => $1, p_worker => 'w', p_limit => 6, p_now => now() + interval '1 hour')`, queue)
	require.NoError(t, err)
	// A clean record: job 0's token 1 crashed, token 2 completed it.
	effect := func(id int64, attempt int, at string) {
		_, err := pool.Exec(ctx, `INSERT INTO public.conformance_effects (job_id, attempt, language, step, at) VALUES ($1, $2, 'test', 'ok', now() + $3::interval)`, id, attempt, at)
		require.NoError(t, err)
	}
	complete := func(id int64, attempt int) {
		_, err := pool.Exec(ctx, `SELECT backoff.complete(p_job_id => $1, p_attempt => $2, p_now => now() + interval '1 hour')`, id, attempt)
		require.NoError(t, err)
	}
	effect(ids[0], 1, "-2 seconds")
	effect(ids[0], 2, "-1 second")
	complete(ids[0], 2)
	require.Empty(t, fencingViolations(ctx, t, db, []string{queue}))

	effect(ids[1], 2, "0")
	effect(ids[1], 2, "0") // token 2 ran twice
	complete(ids[1], 2)
	complete(ids[2], 2) // token 2 never ran
	effect(ids[3], 2, "-1 second")
	complete(ids[3], 2)
	effect(ids[3], 1, "1 minute") // a stale attempt ran after the completion
	effect(ids[4], 2, "-1 second")
	complete(ids[4], 2)
	// Completed again, by a token that was not the last (recorded where
	// the job lives).
	_, err = db.Exec(ctx, `INSERT INTO public.conformance_completions (job_id, attempt, queue) VALUES ($1, 1, $2)`, ids[4], queue)
	require.NoError(t, err)
	effect(ids[5], 2, "-1 second")
	complete(ids[5], 2)
	_, err = db.Exec(ctx, `DELETE FROM public.conformance_completions WHERE job_id = $1`, ids[5]) // the evidence lost
	require.NoError(t, err)

	got := strings.Join(fencingViolations(ctx, t, db, []string{queue}), "\n")
	for _, want := range []string{
		fmt.Sprintf("token %d/2 ran 2 times", ids[1]),
		fmt.Sprintf("job %d completed by attempt 2, which never ran", ids[2]),
		fmt.Sprintf("job %d: attempt 1 ran after attempt 2 completed it", ids[3]),
		fmt.Sprintf("job %d completed 2 times", ids[4]),
		fmt.Sprintf("job %d completed by attempt 1, not by its last claim 2", ids[4]),
		fmt.Sprintf("job %d completed, with no completion recorded", ids[5]),
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, fmt.Sprintf("job %d ", ids[0]))
}
