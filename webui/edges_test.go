package webui_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// Durations read the way the CLI prints them: rounded for people, not to
// the microsecond.
func TestDurationsRoundedForPeople(t *testing.T) {
	url := testdb.NewURL(t)
	conn := testdb.Pool(t, url)
	_, err := conn.Exec(context.Background(), `INSERT INTO backoff.policies (name, base, max_delay, lease)
		VALUES ('jittery', '1.182429 seconds', '62.4 seconds', '90 minutes 20 seconds')`)
	require.NoError(t, err)
	srv, _ := serve(t, url, webui.Options{})
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/policies")
	require.Equal(t, 200, code)
	require.Contains(t, body, "1.18s")
	require.Contains(t, body, "1m2s")
	require.Contains(t, body, "1h30m")
	require.NotContains(t, body, "1.182429s")
	require.NotContains(t, body, "1h30m0s", "no zero units at the end")
}

// A queue that is not paused is "active": "running" is a job's status.
func TestQueueBadgeSaysActive(t *testing.T) {
	url := testdb.NewURL(t)
	srv, c := serve(t, url, webui.Options{})
	_, err := c.Enqueue(context.Background(), "emails", map[string]string{"to": "ada@example.com"})
	require.NoError(t, err)
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/")
	require.Equal(t, 200, code)
	require.Contains(t, body, `<span class="tag ok">active</span>`)
	require.NotContains(t, body, `<span class="tag ok">running</span>`)
}

// Dead-letter reasons read as words where they are text; the jobs filter
// keeps the raw value in its option and its URL.
func TestReasonsForPeople(t *testing.T) {
	url := testdb.NewURL(t)
	admin := testdb.Pool(t, url)
	_, err := admin.Exec(context.Background(), `
INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason)
SELECT 'mail', 'dead_lettered', 1, now(), now(), now(), 'failed ' || r, r
FROM unnest(ARRAY['non_retryable', 'max_attempts', 'lease_expiries', 'deadline']) AS r`)
	require.NoError(t, err)
	srv, _ := serve(t, url, webui.Options{})
	words := []string{"not retryable", "attempts used up", "leases expired too often", "past its deadline"}
	for _, page := range []string{"/dead-letters", "/jobs"} {
		code, body, _ := get(t, http.DefaultClient, srv.URL+page)
		require.Equal(t, 200, code, body)
		for _, w := range words {
			require.Contains(t, body, w, page)
		}
		require.NotRegexp(t, `>\s*(non_retryable|max_attempts|lease_expiries)\s*<`, body, "%s: a raw reason as text", page)
	}
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/jobs?reason=lease_expiries")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<option value="lease_expiries" selected>leases expired too often</option>`)
	require.Contains(t, body, "failed lease_expiries")
	require.NotContains(t, body, "failed deadline", "the filter still filters")
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs/3")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "<dd>leases expired too often</dd>")
	require.Contains(t, body, "dead-lettered: leases expired too often")
}
