package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// TestStrandedWorkAndReap: a job whose worker was killed shows as expired
// on the overview, with its worker and "lease expired" on the jobs list
// and its page; the Reap action (a POST with the CSRF token) retries it,
// and the job's history then has the stuck attempt with its start. Pausing
// an unknown queue is refused; a pause shows in the queue's history.
func TestStrandedWorkAndReap(t *testing.T) {
	dbURL := testdb.NewURL(t)
	srv, c := serve(t, dbURL, webui.Options{AllowActions: true})
	pool := testdb.Pool(t, dbURL)
	ctx := context.Background()
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('hooks', p_run_at => now() - interval '1 hour')`).Scan(&id))
	_, err := pool.Exec(ctx, `SELECT * FROM backoff.claim('hooks', 'worker-killed', 1, '1 minute', now() - interval '5 minutes')`)
	require.NoError(t, err)

	hc := noRedirect()
	code, body, _ := get(t, hc, srv.URL+"/")
	require.Equal(t, 200, code)
	i := strings.Index(body, `<tr data-queue="hooks">`)
	require.GreaterOrEqual(t, i, 0, body)
	require.Contains(t, body[i:], `<td class="n expired" title="leases expired`)
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	require.Contains(t, body, `id="reap"`)

	_, body, _ = get(t, hc, srv.URL+"/jobs?queue=hooks")
	require.Contains(t, body, "worker-killed")
	require.Regexp(t, `lease expired 4m\d*s? ago`, body)
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(id))
	require.Contains(t, body, `id="lease-expired"`)
	require.Contains(t, body, "a reap retries the job")
	require.Contains(t, body, `class="seg stuck"`, "the timeline draws the stranded interval")

	code, _ = post(t, hc, srv.URL+"/reap", url.Values{}, nil)
	require.Equal(t, 403, code, "no token, no reap")
	j, err := c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.StatusRunning, j.Status)
	code, _ = post(t, hc, srv.URL+"/reap", url.Values{"csrf": {tok[1]}}, nil)
	require.Equal(t, http.StatusSeeOther, code)
	j, err = c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.StatusRetrying, j.Status)
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(id))
	require.Contains(t, body, "lease_expired")
	require.Contains(t, body, "started ", "the failed attempt's start is on the timeline")
	require.Contains(t, body, `class="seg stuck"`)

	code, body = post(t, hc, srv.URL+"/queues/pause", url.Values{"csrf": {tok[1]}, "queue": {"hokks"}}, nil)
	require.GreaterOrEqual(t, code, 400)
	require.Less(t, code, 500)
	require.Contains(t, body, "no such queue")
	code, _ = post(t, hc, srv.URL+"/queues/pause", url.Values{"csrf": {tok[1]}, "queue": {"hooks"}}, nil)
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, hc, srv.URL+"/jobs?queue=hooks")
	i = strings.Index(body, `id="queue-events"`)
	require.GreaterOrEqual(t, i, 0, body)
	require.Contains(t, body[i:], "<td>pause</td>")
	// A cancel is drawn as an operator's action, with the role.
	_, err = opsOf(c).Cancel(ctx, id, "from the test")
	require.NoError(t, err)
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+itoa(id))
	require.Contains(t, body, `class="pt operator"`)
	require.Contains(t, body, "cancelled by ")
}
