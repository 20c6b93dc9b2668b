package webui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// between is the text of body between the first from and the next to.
func between(t *testing.T, body, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, from)
	require.True(t, ok, "no %q in the page", from)
	out, _, ok := strings.Cut(rest, to)
	require.True(t, ok, "no %q after %q", to, from)
	return out
}

// TestJobsFiltersAndTotals: the filters offer the queues and policies that
// exist and the statuses and reasons in words, keep the stored value in
// the URL and the chosen one selected (an unknown one too); the page says
// where it stands in what the filter matches, counted up to 1,000, and
// says "shown" where no index serves a count.
func TestJobsFiltersAndTotals(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	_, err := admin.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, run_at, created_at)
		SELECT 'q' || (i % 3), 'pending', now(), now() FROM generate_series(1, 1234) AS i;
		INSERT INTO backoff.policies (name) VALUES ('slow-<b>');`)
	require.NoError(t, err)
	srv, _ := serve(t, dbURL, webui.Options{})

	code, body, _ := get(t, http.DefaultClient, srv.URL+"/jobs?queue=q1&status=pending")
	require.Equal(t, 200, code, body)
	queues := between(t, body, `<select name="queue" id="queue-filter">`, "</select>")
	require.Equal(t, 4, strings.Count(queues, "<option"), "any, q0, q1, q2: %s", queues)
	require.Contains(t, queues, `<option value="q1" selected>q1</option>`)
	statuses := between(t, body, `<select name="status" id="status-filter">`, "</select>")
	require.Contains(t, statuses, `<option value="pending" selected>pending: waiting for its first run</option>`)
	require.Contains(t, statuses, `<option value="dead_lettered">dead-lettered: given up</option>`)
	reasons := between(t, body, `<select name="reason" id="reason-filter">`, "</select>")
	require.Contains(t, reasons, `<option value="lease_expiries">leases expired too often</option>`)
	policies := between(t, body, `<select name="policy" id="policy-filter">`, "</select>")
	for _, p := range []string{"aggressive", "conservative", "default", "moderate"} {
		require.Contains(t, policies, fmt.Sprintf(`<option value="%s">%s</option>`, p, p))
	}
	require.Contains(t, policies, `<option value="slow-&lt;b&gt;">slow-&lt;b&gt;</option>`, "escaped")
	require.NotContains(t, body, `id="choices-note"`)
	// 412 jobs in q1 (i % 3 = 1 for i = 1, 4, ..., 1234).
	require.Contains(t, body, `id="shown">1–50 of 412<`)

	// The next page continues the count.
	next := between(t, body, `<a href="`+"", `" id="next">`)
	next = next[strings.LastIndex(next, `"`)+1:]
	next = strings.ReplaceAll(next, "&amp;", "&")
	require.Contains(t, next, "at=50")
	code, body, _ = get(t, http.DefaultClient, srv.URL+next)
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="shown">51–100 of 412<`)

	// No filter: 1,234 jobs, counted up to 1,000.
	_, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs")
	require.Contains(t, body, `id="shown">1–50 of more than 1,000<`)

	// A filter no index serves (the effective policy): no count, "shown".
	_, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs?policy=default")
	require.Contains(t, body, `id="shown">50 shown, more on the next page<`)
	require.Contains(t, between(t, body, `<select name="policy" id="policy-filter">`, "</select>"), `<option value="default" selected>`)

	// A queue that is not in the list stays chosen; two statuses make a
	// multiple select that keeps both.
	_, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs?queue=nope&status=pending&status=running")
	require.Contains(t, body, `<option value="nope" selected>nope (not in the list)</option>`)
	multi := between(t, body, `<select name="status" id="status-filter" multiple size="3">`, "</select>")
	require.Contains(t, multi, `<option value="pending" selected>`)
	require.Contains(t, multi, `<option value="running" selected>`)
	require.Contains(t, body, "No job matches this filter.")

	code, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs?at=-3")
	require.Equal(t, 400, code)
	require.Contains(t, body, `at &#34;-3&#34;: not a position`)
}
