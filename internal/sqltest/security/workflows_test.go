package security

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// Workflows under queue scopes (docs/adr/0058, docs/adr/0087): a scoped
// producer cannot make a job depend on another queue's job (the id looks
// missing), nor enqueue a graph job into a queue it may not produce into;
// a scoped worker reads neither the output nor the parents of another
// queue's job, and gets for them exactly what a missing id gets.
func TestWorkflowScopes(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	theirs := makeQueueFixtures(t, pool, "billing")
	var missing int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) + 1000 FROM backoff.jobs`).Scan(&missing))
	p1, w1 := groupRole(t, producer), groupRole(t, worker)
	_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail', 'produce')`, p1)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mail', 'work')`, w1)
	require.NoError(t, err)
	now := t0.Add(time.Minute)

	answer := func(role, sql string, id int64) string {
		err := asRole(ctx, pool, role, sql, id, now)
		require.Error(t, err, "%s %d", sql, id)
		return sqlState(err) + " " + strings.ReplaceAll(err.Error(), `"`+strconv.FormatInt(id, 10)+`"`, `"ID"`)
	}
	graph := `SELECT * FROM backoff.enqueue_graph(jsonb_build_array(jsonb_build_object('ref', 'a', 'queue', 'mail', 'depends_on', jsonb_build_array($1::bigint))), $2)`
	got := answer(p1, graph, theirs.pending)
	require.Equal(t, answer(p1, graph, missing), got)
	require.True(t, strings.HasPrefix(got, "22023 "), got)
	require.NotContains(t, got, "billing")

	err = asRole(ctx, pool, p1, `SELECT * FROM backoff.enqueue_graph('[{"ref": "a", "queue": "billing"}]', $1)`, now)
	require.Equal(t, "42501", sqlState(err), "%v", err)

	for _, sql := range []string{
		`SELECT backoff.job_output($1) WHERE $2::timestamptz IS NOT NULL`,
		`SELECT * FROM backoff.parent_outputs($1) WHERE $2::timestamptz IS NOT NULL`,
		`SELECT backoff.await_job($1, 'web-1') WHERE $2::timestamptz IS NOT NULL`,
	} {
		got := answer(w1, sql, theirs.pending)
		require.Equal(t, answer(w1, sql, missing), got, sql)
		require.True(t, strings.HasPrefix(got, "BK001 "), "%s: %s", sql, got)
	}
}
