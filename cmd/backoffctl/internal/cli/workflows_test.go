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

// jobs show prints a running job's progress, the jobs that need it and,
// once it completed, its output, and a blocked job's parents; --status
// blocked lists the jobs waiting for their parents.
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
	require.Regexp(t, `needed by: +`+strconv.FormatInt(child, 10)+`\n`, out)
	require.NotContains(t, out, "output:", "no output before it completes")

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

	// Completed with an output: jobs show prints it, and the child it needs.
	_, err = conn.Exec(ctx, `SELECT backoff.complete($1, $2, p_output => '{"rows": 7}')`, parent, token)
	require.NoError(t, err)
	code, out, errOut = run(t, "jobs", "show", strconv.FormatInt(parent, 10), "--database-url", dbURL)
	require.Zero(t, code, errOut)
	require.Regexp(t, `output: +\{"rows": 7\}\n`, out)
	code, out, errOut = run(t, "jobs", "show", strconv.FormatInt(parent, 10), "--output", "json", "--database-url", dbURL)
	require.Zero(t, code, errOut)
	var done struct {
		Children []int64         `json:"children"`
		Output   json.RawMessage `json:"output"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &done))
	require.Equal(t, []int64{child}, done.Children)
	require.JSONEq(t, `{"rows": 7}`, string(done.Output))
}

// jobs graph shows a workflow from any of its jobs, with each edge's
// policy and state; jobs unblock releases a job that a failed parent keeps
// waiting under a wait edge; stats counts the blocked jobs; bad input is
// one line and a non-zero exit.
func TestGoldenWorkflows(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	s := newTranscript(t, url)
	// The install made segment 1 current at the real time: the
	// transcript's clock is fixed.
	sqlExec(t, url, `UPDATE backoff.segments SET switched_at = '2029-12-31T12:00:00Z'`)
	// 1 extract; 2, 3 load (3's edge waits for an operator when 1 fails);
	// 4 report after both loads (3's failure lets it run); 5 alone.
	sqlExec(t, url, `
SELECT * FROM backoff.enqueue_graph('[
  {"ref": "extract", "queue": "etl"},
  {"ref": "load-eu", "queue": "etl", "depends_on": ["extract"]},
  {"ref": "load-us", "queue": "etl", "depends_on": [{"ref": "extract", "on_failure": "wait"}]},
  {"ref": "report", "queue": "reports", "depends_on": ["load-eu", {"ref": "load-us", "on_failure": "run"}]}]',
  '2030-01-01T00:00:00Z');
SELECT backoff.enqueue('etl', p_now => '2030-01-01T00:00:00Z');`)
	s.run("jobs", "graph", "4")
	s.run("stats")
	s.run("jobs", "unblock", "3")
	s.run("jobs", "graph", "5")

	// extract is cancelled: load-eu is cancelled with it (a cancel edge),
	// load-us waits for an operator.
	sqlExec(t, url, `SELECT backoff.cancel(1, 'source gone', '2030-01-01T00:00:01Z')`)
	s.run("jobs", "graph", "1")
	s.run("jobs", "graph", "1", "--limit", "2")
	s.run("jobs", "graph", "3", "--output", "json")
	s.run("jobs", "unblock", "3")
	s.run("jobs", "graph", "3")
	s.run("jobs", "unblock", "3")

	// 6 and 7, and 8 after both, waiting on 6's failure: released from
	// 6, it still waits for 7.
	sqlExec(t, url, `
SELECT * FROM backoff.enqueue_graph('[
  {"ref": "a", "queue": "etl"}, {"ref": "b", "queue": "etl"},
  {"ref": "c", "queue": "etl", "depends_on": [{"ref": "a", "on_failure": "wait"}, "b"]}]',
  '2030-01-01T00:00:00Z');
SELECT backoff.cancel(6, 'gone', '2030-01-01T00:00:01Z');`)
	s.run("jobs", "unblock", "8")
	s.run("jobs", "graph", "8")
	s.run("jobs", "unblock", "8", "--output", "json")

	s.run("jobs", "graph", "99")
	s.run("jobs", "unblock", "99")
	s.run("jobs", "graph", "abc")
	s.run("jobs", "graph")
	s.run("jobs", "graph", "1", "--limit", "0")
	s.run("jobs", "graph", "1", "--limit", "10001")
	s.run("jobs", "unblock", "0")
	s.check("workflows")
}
