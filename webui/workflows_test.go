package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// A blocked job's page names the jobs it depends on, a running job's its
// progress, and the jobs page filters by the blocked status.
func TestJobPageShowsWorkflow(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	var parent, child int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT min(job_id), max(job_id) FROM backoff.enqueue_graph('[
		{"ref": "a", "queue": "ui-wf"}, {"ref": "b", "queue": "ui-wf", "depends_on": ["a"]}]')`).Scan(&parent, &child))
	var token int
	require.NoError(t, admin.QueryRow(ctx, `SELECT attempts FROM backoff.claim('ui-wf', 'w', 1, '5 minutes')`).Scan(&token))
	_, err := admin.Exec(ctx, `SELECT backoff.heartbeat($1, $2, p_progress => '{"rows": 7}')`, parent, token)
	require.NoError(t, err)
	srv, _ := serve(t, dbURL, webui.Options{})

	code, body, _ := get(t, http.DefaultClient, srv.URL+"/jobs/"+strconv.FormatInt(child, 10))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<dd id="parents"><a href="/jobs/`+strconv.FormatInt(parent, 10)+`">`+strconv.FormatInt(parent, 10)+`</a>: 1 unfinished`)
	require.NotContains(t, body, "waiting for an operator")
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs/"+strconv.FormatInt(parent, 10))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<dd id="progress">{&#34;rows&#34;: 7}`)
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs?status=blocked")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `/jobs/`+strconv.FormatInt(child, 10))
	require.NotContains(t, body, `/jobs/`+strconv.FormatInt(parent, 10)+`"`)
}

// The graph page draws every job linked to the job, each linked to its
// page, with each edge's policy and state; the job page links to it; a
// blocked job that a failed parent keeps waiting gets an Unblock button,
// which releases it; the overview counts blocked jobs; bad input is a 4xx
// page that says what was wrong.
func TestGraphPageAndUnblock(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	ids := map[string]int64{}
	rows, err := admin.Query(ctx, `SELECT ref, job_id FROM backoff.enqueue_graph('[
		{"ref": "a", "queue": "ui-graph"},
		{"ref": "b", "queue": "ui-graph", "depends_on": [{"ref": "a", "on_failure": "wait"}]},
		{"ref": "c", "queue": "ui-graph-report", "depends_on": ["b", {"ref": "a", "on_failure": "run"}]}]')`)
	require.NoError(t, err)
	for rows.Next() {
		var ref string
		var id int64
		require.NoError(t, rows.Scan(&ref, &id))
		ids[ref] = id
	}
	require.NoError(t, rows.Err())
	lone, err := func() (int64, error) {
		var id int64
		return id, admin.QueryRow(ctx, `SELECT backoff.enqueue('ui-graph')`).Scan(&id)
	}()
	require.NoError(t, err)
	a, b, c := ids["a"], ids["b"], ids["c"]
	srv, _ := serve(t, dbURL, webui.Options{AllowActions: true})
	hc := noRedirect()
	itoa := func(id int64) string { return strconv.FormatInt(id, 10) }

	code, body, _ := get(t, hc, srv.URL+"/jobs/"+itoa(a))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<a href="/jobs/`+itoa(a)+`/graph" id="graph-link">`, "a root job links to its graph")
	code, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(lone))
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, "graph-link", "a job without dependencies has no graph")

	code, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(c)+"/graph")
	require.Equal(t, 200, code, body)
	require.Equal(t, 3, strings.Count(body, `<g class="node `))
	require.Contains(t, body, `<g class="node blocked focus" data-job="`+itoa(c)+`">`)
	require.Contains(t, body, `<path class="edge wait open" data-edge="`+itoa(a)+`-`+itoa(b)+`"`)
	require.Contains(t, body, `<path class="edge run open" data-edge="`+itoa(a)+`-`+itoa(c)+`"`)
	require.Contains(t, body, `<a href="/jobs/`+itoa(b)+`"><g class="node blocked"`)
	require.NotContains(t, body, "graph-operator")

	code, body, _ = get(t, hc, srv.URL+"/")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `queue=ui-graph&amp;status=blocked">1</a>`, "ui-graph: b")
	require.Contains(t, body, `queue=ui-graph-report&amp;status=blocked">1</a>`, "ui-graph-report: c")

	// a is cancelled: b waits for an operator.
	_, err = admin.Exec(ctx, `SELECT backoff.cancel($1, 'gone')`, a)
	require.NoError(t, err)
	code, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(b)+"/graph")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="graph-operator-`+itoa(b)+`"`)
	require.Contains(t, body, `<path class="edge wait waiting"`)
	code, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(b))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="unblock"`)
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	code, _ = post(t, hc, srv.URL+"/jobs/"+itoa(b)+"/unblock", url.Values{"csrf": {tok[1]}}, map[string]string{"Origin": srv.URL})
	require.Equal(t, http.StatusSeeOther, code)
	var st string
	require.NoError(t, admin.QueryRow(ctx, `SELECT status FROM backoff.jobs WHERE id = $1`, b).Scan(&st))
	require.Equal(t, "pending", st)
	code, body = post(t, hc, srv.URL+"/jobs/"+itoa(b)+"/unblock", url.Values{"csrf": {tok[1]}}, map[string]string{"Origin": srv.URL})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "cannot unblock job")

	code, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(c)+"/graph?limit=1")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="graph-truncated"`)
	require.Equal(t, 1, strings.Count(body, `<g class="node `))
	for path, want := range map[string]string{
		"/jobs/" + itoa(c) + "/graph?limit=0":    `limit &#34;0&#34;: want a number of jobs from 1 to 1000`,
		"/jobs/" + itoa(c) + "/graph?limit=1001": `limit &#34;1001&#34;`,
		"/jobs/abc/graph":                        "not a job id",
		"/jobs/99999999/graph":                   "no such job",
	} {
		code, body, _ := get(t, hc, srv.URL+path)
		require.GreaterOrEqual(t, code, 400, path)
		require.Less(t, code, 500, path)
		require.Contains(t, body, want, path)
	}
}

// A queue name with markup in a graph is text on the graph page: in the
// boxes, their tooltips and the table.
func TestGraphPageEscapesNames(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	var child int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT max(job_id) FROM backoff.enqueue_graph('[
		{"ref": "a", "queue": "<img src=x onerror=alert(1)>"},
		{"ref": "b", "queue": "ui-graph-esc", "depends_on": ["a"]}]')`).Scan(&child))
	srv, _ := serve(t, dbURL, webui.Options{})
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/jobs/"+strconv.FormatInt(child, 10)+"/graph")
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, "<img")
	require.Contains(t, body, "&lt;img src=x onerror=alert(1)&gt;")
}
