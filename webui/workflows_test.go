package webui_test

import (
	"context"
	"net/http"
	"strconv"
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
