package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestUIRefusesOpenListenWithoutAuth: beyond loopback the UI needs
// authentication from the environment; the check comes before connecting.
func TestUIRefusesOpenListenWithoutAuth(t *testing.T) {
	t.Setenv(envUIUser, "")
	t.Setenv(envUIPassword, "")
	t.Setenv(envUIToken, "")
	code, _, stderr := run(t, "ui", "--listen", "0.0.0.0:8080", "--database-url", "postgres://nobody@127.0.0.1:1/x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `--listen "0.0.0.0:8080" is not a loopback address`)

	t.Setenv(envUIUser, "ops")
	code, _, stderr = run(t, "ui", "--listen", "0.0.0.0:8080", "--database-url", "postgres://nobody@127.0.0.1:1/x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "set both BACKOFF_UI_USER and BACKOFF_UI_PASSWORD")

	// With a token it goes on, to the database (here unreachable: exit 1).
	t.Setenv(envUIUser, "")
	t.Setenv(envUIToken, "s3cret")
	code, _, stderr = run(t, "ui", "--listen", "0.0.0.0:0", "--database-url", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2")
	require.Equal(t, ExitFailure, code, stderr)
	require.NotContains(t, stderr, "loopback")
}

// syncBuffer is a bytes.Buffer for a command that runs in a goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startUI runs `backoffctl ui --listen 127.0.0.1:0 --allow-actions` over
// dbURL until the test ends and returns the line it printed on start.
func startUI(t *testing.T, dbURL string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"ui", "--listen", "127.0.0.1:0", "--allow-actions", "--database-url", dbURL}, &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, ExitOK, <-done, errOut.String())
	})
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "\n") }, 20*time.Second, 50*time.Millisecond,
		"stdout: %q stderr: %q", out.String(), errOut.String())
	return out.String()
}

// TestUITokenAndHost: `backoffctl ui` on loopback, the default, prints a
// URL with a fresh token; a page needs it (the cookie that URL sets), and
// a request naming another host (DNS rebinding) is refused even with it.
func TestUITokenAndHost(t *testing.T) {
	t.Setenv(envUIUser, "")
	t.Setenv(envUIPassword, "")
	t.Setenv(envUIToken, "")
	dbURL := testdb.NewURL(t)
	line := startUI(t, dbURL)
	m := regexp.MustCompile(`serving (http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9_-]{32,}) `).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	base, port, token := m[1], m[2], m[3]

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u, host string) (int, http.Header) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	code, _ := get(base+"/jobs", "")
	require.Equal(t, http.StatusUnauthorized, code, "no token")
	code, h := get(base+"/?token="+token, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/", h.Get("Location"))
	code, _ = get(base+"/jobs", "")
	require.Equal(t, http.StatusOK, code, "the cookie the URL set")
	code, _ = get(base+"/jobs", "attacker.example:"+port)
	require.Equal(t, http.StatusMisdirectedRequest, code, "another host, even with the cookie")

	// A fixed token from the environment, for scripts: it works, and it
	// is not printed.
	t.Setenv(envUIToken, "fixed-token-for-scripts")
	line = startUI(t, dbURL)
	require.NotContains(t, line, "fixed-token-for-scripts")
	require.Contains(t, line, "?token=$"+envUIToken)
	m = regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)/`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	code, _ = get(m[1]+"/?token=fixed-token-for-scripts", "")
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = get(m[1]+"/jobs", "")
	require.Equal(t, http.StatusOK, code)
}
