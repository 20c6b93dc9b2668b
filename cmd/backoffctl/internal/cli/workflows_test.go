package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// jobs show prints a running job's progress and a blocked job's parents;
// --status blocked lists the jobs waiting for their parents.
func TestJobsShowWorkflow(t *testing.T) {
	t.Parallel()
	dbURL := testdb.NewURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var parent, child int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT min(job_id), max(job_id) FROM backoff.enqueue_graph('[
		{"ref": "a", "queue": "cli-wf"},
		{"ref": "b", "queue": "cli-wf", "depends_on": [{"ref": "a", "on_failure": "wait"}]}]')`).Scan(&parent, &child))
	var token int
	require.NoError(t, conn.QueryRow(ctx, `SELECT attempts FROM backoff.claim('cli-wf', 'w', 1, '5 minutes')`).Scan(&token))
	_, err = conn.Exec(ctx, `SELECT backoff.heartbeat($1, $2, p_progress => '{"done": 3}')`, parent, token)
	require.NoError(t, err)

	code, out, errOut := run(t, "jobs", "show", strconv.FormatInt(parent, 10), "--database-url", dbURL)
	require.Zero(t, code, errOut)
	require.Contains(t, out, `progress:`)
	require.Contains(t, out, `{"done": 3}`)
	code, out, errOut = run(t, "jobs", "show", strconv.FormatInt(child, 10), "--database-url", dbURL)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "depends on:")
	require.Contains(t, out, strconv.FormatInt(parent, 10)+" (1 unfinished, 0 failed")

	code, out, errOut = run(t, "jobs", "show", strconv.FormatInt(child, 10), "--output", "json", "--database-url", dbURL)
	require.Zero(t, code, errOut)
	var row struct {
		Status      string  `json:"status"`
		Parents     []int64 `json:"parents"`
		ParentsOpen *int    `json:"parents_open"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &row))
	require.Equal(t, "blocked", row.Status)
	require.Equal(t, []int64{parent}, row.Parents)
	require.Equal(t, 1, *row.ParentsOpen)

	code, out, errOut = run(t, "jobs", "list", "--status", "blocked", "--database-url", dbURL)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "cli-wf")
}
