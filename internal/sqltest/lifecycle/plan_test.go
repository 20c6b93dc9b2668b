package lifecycle_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestHotStatementPlansAtAMillionRows fills backoff.jobs with 1,000,000
// finished rows and checks, through auto_explain, the generic plans that
// PL/pgSQL caches for the statements inside claim, reap, acquire, complete,
// complete_many and fail: index scans, never a sequential scan of jobs
// (docs/design.md#plans).
func TestHotStatementPlansAtAMillionRows(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills a million rows")
	}
	url := testdbURL(t)
	setup := poolOn(t, url)
	start := time.Now()
	// Finished rows where finishing puts them, segment 0 (docs/adr/0061).
	exec(t, setup, `INSERT INTO backoff.jobs (queue, status, policy, attempts, run_at, created_at, completed_at, segment)
		SELECT 'q' || (g % 8), 'completed', 'default', 1, $1, $1, $1, 0 FROM generate_series(1, 1000000) AS g`, t0)
	exec(t, setup, `ANALYZE backoff.jobs`)
	for i := 0; i < 20; i++ {
		enqueue(t, setup, "q1", t0)
	}
	t.Logf("1,000,000 rows in %v", time.Since(start).Round(time.Millisecond))
	checkHotPlans(t, url, setup)
}

// TestHotStatementPlansOnATinyTable: the same plans when they are made
// while backoff.jobs holds a few rows on one page, with statistics that say
// so. The planner then prefers a sequential scan, and a cached plan is kept
// until the table's statistics change: a worker that connected to a new
// install went on scanning the whole table at every claim and completion
// as it grew (the continuous benchmark's start latency went from 2 ms to
// seconds within a run; docs/adr/0053). The functions turn sequential scans
// off, so their plans do not depend on the table's size.
func TestHotStatementPlansOnATinyTable(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	setup := poolOn(t, url)
	for i := 0; i < 20; i++ {
		enqueue(t, setup, "q1", t0)
	}
	exec(t, setup, `VACUUM ANALYZE backoff.jobs`)
	// The rows live in the current segment (docs/adr/0061).
	require.EqualValues(t, 1, scalar[int64](t, setup, `SELECT relpages::bigint FROM pg_class WHERE oid = 'backoff.jobs_live_1'::regclass`))
	checkHotPlans(t, url, setup)
}

// checkHotPlans checks the generic plans of the hot statements on q1's 20
// due jobs (see TestHotStatementPlansAtAMillionRows).
func checkHotPlans(t *testing.T, url string, setup *pgxpool.Pool) {
	t.Helper()
	ec := explaining(t, url, "SET plan_cache_mode = force_generic_plan")
	planOf := func(call string, args ...any) string {
		t.Helper()
		plans := ec.plansOf(t, call, args...)
		for _, p := range plans {
			// Sequential scans off price a table without a usable index at
			// disable_cost (1e10 before PostgreSQL 18): far above
			// jit_above_cost, so such a statement was JIT-compiled at every
			// call, or failed where the server has no LLVM (ADR 0053).
			require.NotContains(t, p, "JIT:", "%s compiled a statement:\n%s", call, p)
		}
		for _, p := range plans {
			if strings.Contains(p, "Update on jobs") || strings.Contains(p, "Delete on jobs") {
				return p
			}
		}
		t.Fatalf("no plan of an UPDATE on jobs logged for %s; got %q", call, plans)
		return ""
	}
	// The partitions' indexes (docs/adr/0061): each segment's, by its name.
	claimScan := `Index Scan using jobs_\w*claimable_idx on jobs\w* c`
	idScan := `Index Scan using jobs_\w*pkey on jobs\w* j`
	noSeqScan := func(name, plan string) {
		t.Helper()
		require.NotContains(t, plan, "Seq Scan on jobs", "%s:\n%s", name, plan)
		require.NotContains(t, plan, "Bitmap Heap Scan on jobs", "%s:\n%s", name, plan)
	}

	for _, limit := range []int{1, 10} {
		p := planOf(`SELECT * FROM backoff.claim('q1', 'w', $1, p_now => $2)`, limit, t0)
		noSeqScan("claim", p)
		require.Regexp(t, claimScan, p, "claim:\n%s", p)
		require.Regexp(t, idScan, p, "claim:\n%s", p)
	}
	p := planOf(`SELECT backoff.reap($1, 5)`, t0.Add(time.Hour))
	noSeqScan("reap", p)
	require.Regexp(t, `Index Scan using jobs_\w*lease_idx on jobs\w* r`, p, "reap:\n%s", p)
	require.Regexp(t, idScan, p, "reap:\n%s", p)
	// The rows are found one primary-key probe each: an index condition
	// that also holds an array of the whole batch is sorted again at every
	// probe (quadratic in the batch).
	require.NotRegexp(t, `Index Cond: \(.*= ANY`, p, "reap probes the primary key with the batch's array:\n%s", p)

	later := t0.Add(24 * time.Hour)
	ids := scalar[[]int64](t, setup, `SELECT array_agg(id ORDER BY id) FROM backoff.jobs WHERE queue = 'q1' AND status IN ('pending', 'retrying')`)
	a := one(t, setup, `SELECT * FROM backoff.acquire($1, 'w', p_now => $2)`, ids[0], later)
	p = planOf(`SELECT * FROM backoff.acquire($1, 'w', p_now => $2)`, ids[1], later)
	noSeqScan("acquire", p)
	require.Regexp(t, idScan, p, "acquire:\n%s", p)
	p = planOf(`SELECT * FROM backoff.complete($1, $2)`, a.ID, a.Attempts)
	noSeqScan("complete", p)
	require.Regexp(t, idScan, p, "complete:\n%s", p)
	p = planOf(`SELECT * FROM backoff.fail($1, $2, 'x')`, ids[1], get(t, setup, ids[1]).Attempts)
	noSeqScan("fail", p)
	require.Regexp(t, idScan, p, "fail:\n%s", p)
	cs := claim(t, setup, "q1", "w", 3, later)
	p = planOf(`SELECT * FROM backoff.complete_many($1, $2)`,
		[]int64{cs[0].ID, cs[1].ID, cs[2].ID}, []int32{cs[0].Attempts, cs[1].Attempts, cs[2].Attempts})
	noSeqScan("complete_many", p)
	require.Regexp(t, `jobs_\w*pkey`, p, "complete_many:\n%s", p)

	// Queue controls (docs/adr/0045): a rate-limited queue's fast statement
	// claims nothing, and the controlled path's statement walks the claim
	// index like the fast one.
	exec(t, setup, `INSERT INTO backoff.queues (name, policy, rate) VALUES ('q1', 'default', 1e9)
		ON CONFLICT (name) DO UPDATE SET rate = 1e9`)
	ec.logged()
	require.Len(t, claim(t, ec.conn, "q1", "w", 2, later), 2)
	plans := ec.logged()
	var updates []string
	for _, p := range plans {
		if strings.Contains(p, "Update on jobs") {
			updates = append(updates, p)
		}
	}
	require.Len(t, updates, 2, "the fast statement, then the controlled one: %q", plans)
	for _, u := range updates {
		noSeqScan("claim of a rate-limited queue", u)
	}
	require.Contains(t, updates[0], "One-Time Filter", "the controls probe reads no job:\n%s", updates[0])
	require.Regexp(t, claimScan, updates[1], "controlled claim:\n%s", updates[1])
}

// TestCompleteManyNeverNestsRunningRows: statistics taken while nothing ran
// say status = 'running' matches about one row. complete_many then joined
// the arrays to the running rows with a nested loop, comparing every
// running row with every id (4.9 s for 1,000 ids among 30,000 running
// jobs: 17 s on a loaded machine), which is what made several Workers on one pool collapse
// (docs/adr/0026-worker-runner.md). The plan must join by hash on ids
// found through the primary key, whatever the statistics say.
func TestCompleteManyNeverNestsRunningRows(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	setup := poolOn(t, url)
	exec(t, setup, `INSERT INTO backoff.jobs (queue, policy, run_at, created_at)
		SELECT 'q', 'default', $1, $1 FROM generate_series(1, 40000)`, t0)
	exec(t, setup, `VACUUM ANALYZE backoff.jobs`) // nothing runs: 'running' looks rare
	running := claim(t, setup, "q", "w", 30000, t0)
	ids, att := make([]int64, 1000), make([]int32, 1000)
	for i := range ids {
		ids[i], att[i] = running[i].ID, running[i].Attempts
	}

	ec := explaining(t, url)
	done := scalar[int64](t, ec.conn, `SELECT count(*) FROM backoff.complete_many($1, $2)`, ids, att)
	require.EqualValues(t, 1000, done)
	plans := ec.logged()
	var update string
	for _, p := range plans {
		// The live rows are deleted and the finished ones inserted
		// (docs/adr/0061).
		if strings.Contains(p, "Delete on jobs") {
			update = p
		}
	}
	require.NotEmpty(t, update, "no plan of complete_many's UPDATE logged: %q", plans)
	require.NotContains(t, update, "Nested Loop", "complete_many:\n%s", update)
	require.Contains(t, update, "Hash Join", "complete_many:\n%s", update)
}

// explainConn is a connection (empty search_path) on which auto_explain
// logs the plan of every statement, nested ones too, as a notice, and the
// notices it got.
type explainConn struct {
	conn  *pgx.Conn
	mu    sync.Mutex
	plans []string
}

// explaining opens an explainConn to url, closed when the test ends, and
// runs settings on it after auto_explain's.
func explaining(t *testing.T, url string, settings ...string) *explainConn {
	t.Helper()
	ctx := context.Background()
	ec := &explainConn{}
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = ""
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		ec.mu.Lock()
		defer ec.mu.Unlock()
		ec.plans = append(ec.plans, n.Message+"\n"+n.Detail)
	}
	ec.conn, err = pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ec.conn.Close(ctx) })
	for _, s := range append([]string{
		"LOAD 'auto_explain'",
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_level = notice",
	}, settings...) {
		exec(t, ec.conn, s)
	}
	return ec
}

// logged returns the plans logged so far and forgets them.
func (ec *explainConn) logged() []string {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	plans := ec.plans
	ec.plans = nil
	return plans
}

// plansOf runs call and returns the plans it logged.
func (ec *explainConn) plansOf(t *testing.T, call string, args ...any) []string {
	t.Helper()
	ec.logged()
	require.NoError(t, execErr(ec.conn, call, args...))
	return ec.logged()
}
