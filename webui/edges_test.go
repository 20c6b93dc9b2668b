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
