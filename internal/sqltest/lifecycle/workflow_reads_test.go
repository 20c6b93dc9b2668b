package lifecycle_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// graphRow is a row of backoff.job_graph.
type graphRow struct {
	ID             int64
	Queue, Status  string
	Distance       int
	ParentIDs      []int64
	ParentPolicies []string
	ParentStates   []string
	WaitingFor     []int64
	Truncated      bool
}

func readGraph(t *testing.T, q querier, id int64, limit int) []graphRow {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT * FROM backoff.job_graph($1, $2)`, id, limit)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (graphRow, error) {
		var g graphRow
		err := r.Scan(&g.ID, &g.Queue, &g.Status, &g.Distance, &g.ParentIDs, &g.ParentPolicies, &g.ParentStates,
			&g.WaitingFor, &g.Truncated)
		return g, err
	})
	require.NoError(t, err)
	return out
}

// graphIDs enqueues a graph and returns its ids by ref.
func graphIDs(t *testing.T, q querier, graph string, now time.Time) map[string]int64 {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT ref, job_id FROM backoff.enqueue_graph($1, $2)`, graph, now)
	require.NoError(t, err)
	ids := map[string]int64{}
	for rows.Next() {
		var ref string
		var id int64
		require.NoError(t, rows.Scan(&ref, &id))
		ids[ref] = id
	}
	require.NoError(t, rows.Err())
	return ids
}

// backoff.job_graph: from any job of a graph, every job reachable both
// ways, nearest first, with each edge's policy and state and the parents
// a job still waits for; the limit keeps the nearest and says so; a job
// without dependencies is a graph of one; bad input is refused.
func TestJobGraph(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// a -> b (wait), a -> c, b + c -> d (c: run); x is unrelated.
	ids := graphIDs(t, db, `[
		{"ref": "a", "queue": "jg-etl"},
		{"ref": "b", "queue": "jg-etl", "depends_on": [{"ref": "a", "on_failure": "wait"}]},
		{"ref": "c", "queue": "jg-etl", "depends_on": ["a"]},
		{"ref": "d", "queue": "jg-report", "depends_on": ["b", {"ref": "c", "on_failure": "run"}]}]`, t0)
	x := enqueue(t, db, "jg-etl", t0)
	a, b, c, d := ids["a"], ids["b"], ids["c"], ids["d"]

	want := []graphRow{
		{ID: a, Queue: "jg-etl", Status: "pending", Distance: 1, ParentIDs: []int64{}, ParentPolicies: []string{},
			ParentStates: []string{}, WaitingFor: []int64{}},
		{ID: b, Queue: "jg-etl", Status: "blocked", Distance: 0, ParentIDs: []int64{a}, ParentPolicies: []string{"wait"},
			ParentStates: []string{"open"}, WaitingFor: []int64{a}},
		{ID: d, Queue: "jg-report", Status: "blocked", Distance: 1, ParentIDs: []int64{b, c},
			ParentPolicies: []string{"cancel", "run"}, ParentStates: []string{"open", "open"}, WaitingFor: []int64{b, c}},
		{ID: c, Queue: "jg-etl", Status: "blocked", Distance: 2, ParentIDs: []int64{a}, ParentPolicies: []string{"cancel"},
			ParentStates: []string{"open"}, WaitingFor: []int64{a}},
	}
	got := readGraph(t, db, b, 1000)
	require.Equal(t, []graphRow{want[1], want[0], want[2], want[3]}, got, "from b: b, then a and d, then c")
	require.Len(t, readGraph(t, db, d, 1000), 4, "from the last job too")

	// a is cancelled: b waits for an operator (its edge says wait), c is
	// cancelled with it, and d's edge from c, a run edge, counts as
	// satisfied: d still waits for b.
	exec(t, db, `SELECT backoff.cancel($1, 'gone', $2)`, a, at(time.Second))
	got = readGraph(t, db, a, 1000)
	byID := map[int64]graphRow{}
	for _, r := range got {
		byID[r.ID] = r
	}
	require.Equal(t, "cancelled", byID[a].Status)
	require.Equal(t, []string{"waiting"}, byID[b].ParentStates)
	require.Equal(t, []int64{a}, byID[b].WaitingFor, "b still waits for a, for an operator")
	require.Equal(t, "cancelled", byID[c].Status)
	require.Equal(t, []string{"open", "satisfied"}, byID[d].ParentStates)
	require.Equal(t, []int64{b}, byID[d].WaitingFor)

	// unblock releases b's edge: b is pending and waits for nothing.
	exec(t, db, `SELECT backoff.unblock($1, $2)`, b, at(2*time.Second))
	got = readGraph(t, db, b, 1000)
	require.Equal(t, "pending", got[0].Status)
	require.Equal(t, []string{"released"}, got[0].ParentStates)
	require.Empty(t, got[0].WaitingFor)

	// The limit keeps the nearest and marks every row truncated.
	got = readGraph(t, db, b, 2)
	require.Len(t, got, 2)
	require.Equal(t, []int64{b, a}, []int64{got[0].ID, got[1].ID})
	require.True(t, got[0].Truncated)
	require.True(t, got[1].Truncated)
	got = readGraph(t, db, b, 4)
	require.Len(t, got, 4)
	require.False(t, got[0].Truncated, "exactly the limit is the whole graph")

	// A job without dependencies is a graph of one.
	require.Equal(t, []graphRow{{ID: x, Queue: "jg-etl", Status: "pending", ParentIDs: []int64{}, ParentPolicies: []string{},
		ParentStates: []string{}, WaitingFor: []int64{}}}, readGraph(t, db, x, 1))

	for _, tc := range []struct {
		sql  string
		args []any
		code string
	}{
		{`SELECT * FROM backoff.job_graph($1)`, []any{x + 1000}, "BK001"},
		{`SELECT * FROM backoff.job_graph(NULL)`, nil, "BK001"},
		{`SELECT * FROM backoff.job_graph($1, 0)`, []any{x}, "22023"},
		{`SELECT * FROM backoff.job_graph($1, 10001)`, []any{x}, "22023"},
		{`SELECT * FROM backoff.job_graph($1, NULL)`, []any{x}, "22023"},
	} {
		requireCode(t, execErr(db, tc.sql, tc.args...), tc.code)
	}
}

// A chain longer than the limit: the walk stops at the limit, nearest
// first, from the middle both ways.
func TestJobGraphLongChain(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ids := graphIDs(t, db, `[{"ref": "0", "queue": "jg-chain"}]`, t0)
	prev := ids["0"]
	chain := []int64{prev}
	for range 20 {
		prev = scalar[int64](t, db, `SELECT job_id FROM backoff.enqueue_graph(
			jsonb_build_array(jsonb_build_object('ref', 'n', 'queue', 'jg-chain', 'depends_on', jsonb_build_array($1::bigint))), $2)`,
			prev, t0)
		chain = append(chain, prev)
	}
	got := readGraph(t, db, chain[10], 5)
	require.Len(t, got, 5)
	require.Equal(t, []int64{chain[10], chain[9], chain[11], chain[8], chain[12]},
		[]int64{got[0].ID, got[1].ID, got[2].ID, got[3].ID, got[4].ID})
	require.Equal(t, []int{0, 1, 1, 2, 2}, []int{got[0].Distance, got[1].Distance, got[2].Distance, got[3].Distance, got[4].Distance})
	require.True(t, got[0].Truncated)
	require.Len(t, readGraph(t, db, chain[10], 10000), 21)
}

// stats and overview count the blocked jobs of each queue, and a queue
// that holds only blocked jobs is listed by overview.
func TestStatsAndOverviewCountBlocked(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	graphIDs(t, db, `[
		{"ref": "a", "queue": "jgc-parents"},
		{"ref": "b", "queue": "jgc-children", "depends_on": ["a"]},
		{"ref": "c", "queue": "jgc-children", "depends_on": ["a"]},
		{"ref": "d", "queue": "jgc-parents", "depends_on": ["b"]}]`, t0)
	blocked := map[string]int64{}
	for _, r := range readOverview(t, db, at(time.Minute), 10000) {
		blocked[r.Queue] = r.Blocked
		if r.Queue == "jgc-children" {
			require.Zero(t, r.Pending)
		}
	}
	require.Equal(t, map[string]int64{"jgc-parents": 1, "jgc-children": 2}, blocked)
	s := scalar[[]int64](t, db, `SELECT array_agg(blocked ORDER BY queue) FROM backoff.stats('1 hour', $1)`, at(time.Minute))
	require.Equal(t, []int64{2, 1}, s, "jgc-children, jgc-parents")
}
