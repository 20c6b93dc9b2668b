package webui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// TestOverviewWarnsOfAHeldSnapshot: a session idle in a transaction that
// holds a snapshot shows on the overview, named, once it is older than
// backoff.health's threshold (the client's clock runs ten minutes ahead,
// so nothing sleeps), and not before.
func TestOverviewWarnsOfAHeldSnapshot(t *testing.T) {
	dbURL := testdb.NewURL(t)
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer holder.Close(ctx)
	_, err = holder.Exec(ctx, "SET application_name = 'nightly-report'")
	require.NoError(t, err)
	_, err = holder.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
	require.NoError(t, err)

	page := func(ahead time.Duration) string {
		clock := func() time.Time { return time.Now().Add(ahead) }
		p := testdb.Pool(t, dbURL)
		c, err := client.New(ctx, p, client.WithClock(clock))
		require.NoError(t, err)
		_, err = c.Enqueue(ctx, "mail", nil)
		require.NoError(t, err)
		h, err := webui.New(c, ops.New(p, ops.WithClock(clock)), webui.Options{})
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		defer srv.Close()
		code, body, _ := get(t, http.DefaultClient, srv.URL+"/")
		require.Equal(t, 200, code, body)
		return body
	}
	require.NotContains(t, page(0), `id="vacuum"`, "held for less than 5 minutes")
	body := page(10 * time.Minute)
	require.Contains(t, body, `id="vacuum"`)
	require.Contains(t, body, "nightly-report")
}

// TestOverviewSaysMaintenanceStopped: with no worker running, the overview
// says no maintenance ran and no worker was seen; once a Worker's
// maintenance calls come (reap, rotate naming the worker), it says when
// they ran, counts the worker, and warns of nothing.
func TestOverviewSaysMaintenanceStopped(t *testing.T) {
	dbURL := testdb.NewURL(t)
	ctx := context.Background()
	p := testdb.Pool(t, dbURL)
	c, err := client.New(ctx, p)
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)
	h, err := webui.New(c, ops.New(p), webui.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	code, body, _ := get(t, http.DefaultClient, srv.URL+"/")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="liveness-warning"`)
	require.Contains(t, body, "no maintenance has ever run: reap never ran, rotate never ran")
	require.Contains(t, body, "no worker was seen in the last minute")
	require.Contains(t, body, `Workers seen in the last minute: <b>0</b>`)

	_, err = p.Exec(ctx, `SELECT backoff.reap(); SELECT backoff.rotate(p_worker => 'worker-1')`)
	require.NoError(t, err)
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/overview/table")
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, `id="liveness-warning"`)
	require.Contains(t, body, `Workers seen in the last minute: <b>1</b>`)
	require.Contains(t, body, `id="live-reap" title="last reap of expired leases: `)
	require.Regexp(t, `id="live-rotate"[^>]*>Rotate: <b>(just now|\d+s ago)</b>`, body)
}
