package webui_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// TestPoliciesPageExplainsItself: the page says in words what the bars,
// the whiskers and the red bar mean, and each chart has a caption with
// its waits and the attempt that dead-letters, from policy.Timeline (a
// deadline that comes first is named).
func TestPoliciesPageExplainsItself(t *testing.T) {
	dbURL := testdb.NewURL(t)
	_, err := testdb.Pool(t, dbURL).Exec(context.Background(),
		`INSERT INTO backoff.policies (name, strategy, base, max_attempts, deadline, max_lease_expiries)
		 VALUES ('short', 'fixed', '10 seconds', 9, '25 seconds', 2)`)
	require.NoError(t, err)
	srv, _ := serve(t, dbURL, webui.Options{})
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/policies")
	require.Equal(t, 200, code, body)
	help := between(t, body, `id="policies-help"`, "</div>")
	for _, w := range []string{"blue bar", "amber whisker", "red bar", "dead-lettered", "Dead letters page", "max delay"} {
		require.Contains(t, help, w)
	}
	require.Contains(t, between(t, body, `id="caption-moderate">`, "</p>"),
		"Waits 1s, 2s, 4s, 8s after attempts 1 to 4 (before jitter, 15s in all); a job whose attempt 5 fails is dead-lettered (red bar): attempts used up.")
	// 10s waits: attempt 3 fails at 20s, its retry would come at 30s,
	// after the 25s deadline.
	require.Contains(t, between(t, body, `id="caption-short">`, "</p>"),
		"Waits 10s, 10s after attempts 1 to 2 (before jitter, 20s in all); a job whose attempt 3 fails is dead-lettered (red bar): past its deadline. A job whose lease expires 2 times")
}
