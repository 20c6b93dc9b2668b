package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// serve starts the UI over the database at dbURL with opts.
func serve(t *testing.T, dbURL string, opts webui.Options) (*httptest.Server, *client.Client) {
	t.Helper()
	pool := testdb.Pool(t, dbURL)
	c, err := client.New(context.Background(), pool)
	require.NoError(t, err)
	o := ops.New(pool)
	operators.Store(c, o)
	if opts.QueryTimeout == 0 {
		opts.QueryTimeout = busyQueryTimeout
	}
	h, err := webui.New(c, o, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, c
}

// busyQueryTimeout is the pages' query timeout in the tests: the default
// 10 s guards a server, and a page of tens of thousands of queues on a busy
// machine may take longer without anything being wrong.
const busyQueryTimeout = 2 * time.Minute

// operators holds, for each worker's client serve made, the operator's
// client on the same pool: the tests' own reads and actions (opsOf).
var operators sync.Map

// opsOf is the operator's client serve made alongside c.
func opsOf(c *client.Client) *ops.Client {
	o, _ := operators.Load(c)
	return o.(*ops.Client)
}

func get(t *testing.T, hc *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := hc.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func noRedirect() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// post sends a form the way a browser on the UI's own page does.
func post(t *testing.T, hc *http.Client, u string, form url.Values, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSecurityHeadersAndAssets(t *testing.T) {
	srv, _ := serve(t, testdb.NewURL(t), webui.Options{})
	code, body, h := get(t, http.DefaultClient, srv.URL+"/")
	require.Equal(t, 200, code)
	csp := h.Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self'")
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, body, "<script>", "no inline script")
	m := regexp.MustCompile(`src="(/static/app\.js\?v=[0-9a-f]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m)
	code, _, h = get(t, http.DefaultClient, srv.URL+m[1])
	require.Equal(t, 200, code)
	require.Contains(t, h.Get("Cache-Control"), "max-age=31536000")
}

func TestAuthentication(t *testing.T) {
	srv, _ := serve(t, testdb.NewURL(t), webui.Options{BearerToken: "t0ken", BasicUser: "ops", BasicPassword: "pw"})
	for _, c := range []struct {
		name string
		set  func(*http.Request)
		want int
	}{
		{"none", func(*http.Request) {}, 401},
		{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0ken") }, 200},
		{"wrong basic", func(r *http.Request) { r.SetBasicAuth("ops", "nope") }, 401},
		{"basic", func(r *http.Request) { r.SetBasicAuth("ops", "pw") }, 200},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/jobs", nil)
		c.set(req)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, c.want, resp.StatusCode, c.name)
	}
}

// TestActionGuards: an action needs the CSRF token of the browser's cookie
// and a same-origin request; a valid one changes the database.
func TestActionGuards(t *testing.T) {
	dbURL := testdb.NewURL(t)
	srv, c := serve(t, dbURL, webui.Options{AllowActions: true})
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "mail", map[string]any{"a": 1})
	require.NoError(t, err)
	hc := noRedirect()
	code, body, _ := get(t, hc, srv.URL+"/jobs/"+itoa(id))
	require.Equal(t, 200, code)
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok, "the job page carries a token")
	cancelURL := srv.URL + "/jobs/" + itoa(id) + "/cancel"

	code, body = post(t, hc, cancelURL, url.Values{}, nil)
	require.Equal(t, 403, code)
	require.Contains(t, body, "CSRF token")
	code, _ = post(t, hc, cancelURL, url.Values{"csrf": {"forged"}}, nil)
	require.Equal(t, 403, code)
	// Another browser (no cookie) with this browser's token.
	code, _ = post(t, noRedirect(), cancelURL, url.Values{"csrf": {tok[1]}}, nil)
	require.Equal(t, 403, code)
	// A page of another site posting with the user's cookie.
	code, body = post(t, hc, cancelURL, url.Values{"csrf": {tok[1]}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, 403, code)
	require.Contains(t, body, "cross-origin")
	code, _ = post(t, hc, cancelURL, url.Values{"csrf": {tok[1]}}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, 403, code)
	j, err := c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.StatusPending, j.Status, "no refused POST changed the job")

	code, _ = post(t, hc, cancelURL, url.Values{"csrf": {tok[1]}}, map[string]string{"Origin": srv.URL})
	require.Equal(t, http.StatusSeeOther, code)
	j, err = c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, j.Status)

	// Bad input is a 4xx that says what was wrong.
	code, body = post(t, hc, srv.URL+"/enqueue", url.Values{"csrf": {tok[1]}, "queue": {"mail"}, "payload": {`{"a":`}}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "payload: not valid JSON")
	code, body = post(t, hc, srv.URL+"/jobs/"+itoa(id)+"/cancel", url.Values{"csrf": {tok[1]}}, nil)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "cannot cancel job")
	code, body = post(t, hc, srv.URL+"/bulk", url.Values{"csrf": {tok[1]}, "action": {"delete"}}, nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, `unknown bulk action &#34;delete&#34;`)
}

// TestRoleWithoutTheRight: the database role decides; a refusal is a 403
// page that says so, not a 500.
func TestRoleWithoutTheRight(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	ca, err := client.New(ctx, admin)
	require.NoError(t, err)
	id, err := ca.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)
	_, err = ops.New(admin).Cancel(ctx, id, "")
	require.NoError(t, err)

	srv, _ := serve(t, testdb.LoginRole(t, dbURL, "backoff_worker"), webui.Options{AllowActions: true})
	hc := noRedirect()
	// A worker reads no jobs table (docs/adr/0058): the job pages are for
	// admins, and say what is missing; the policies are not jobs.
	for _, p := range []string{"/jobs/" + itoa(id), "/jobs", "/dead-letters"} {
		code, body, _ := get(t, hc, srv.URL+p)
		require.Equal(t, http.StatusForbidden, code, "%s: %s", p, body)
		require.Contains(t, body, "lacks the right", p)
	}
	code, body, _ := get(t, hc, srv.URL+"/policies")
	require.Equal(t, 200, code, body)
	code, body, _ = get(t, hc, srv.URL+"/enqueue")
	require.Equal(t, 200, code, body)
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	// backoff.overview is for admins: the overview says what is missing.
	code, body, _ = get(t, hc, srv.URL+"/")
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "lacks the right")
	code, body = post(t, hc, srv.URL+"/jobs/"+itoa(id)+"/replay", url.Values{"csrf": {tok[1]}}, nil)
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "lacks the right")
}

// TestDatabaseAway: when the database cannot be reached the pages answer
// 503 with the banner, and the overview's refresh carries it.
func TestDatabaseAway(t *testing.T) {
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	c, err := client.New(context.Background(), pool)
	require.NoError(t, err)
	h, err := webui.New(c, ops.New(pool), webui.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	pool.Close()
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, `id="banner" class="banner" >the database cannot be reached`)
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/overview/table")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, `data-banner="the database cannot be reached`)
}

// TestQueryTimeout: a page whose database calls outlast QueryTimeout
// answers 503 with a banner that names the timeout, not an unreachable
// database.
func TestQueryTimeout(t *testing.T) {
	srv, _ := serve(t, testdb.NewURL(t), webui.Options{QueryTimeout: time.Nanosecond})
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, `id="banner" class="banner" >the database did not answer within the page&#39;s query timeout (1ns)`)
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/overview/table")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, `data-banner="the database did not answer within the page&#39;s query timeout (1ns)`)
}

// TestMountedUnderPrefix: an application mounts the handler at /ops.
func TestMountedUnderPrefix(t *testing.T) {
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	c, err := client.New(context.Background(), pool)
	require.NoError(t, err)
	h, err := webui.New(c, ops.New(pool), webui.Options{Prefix: "/ops"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "app") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/ops/policies")
	require.Equal(t, 200, code)
	require.Contains(t, body, `href="/ops/jobs"`)
	require.Contains(t, body, `src="/ops/static/app.js`)
	_, body, _ = get(t, http.DefaultClient, srv.URL+"/elsewhere")
	require.Equal(t, "app", body)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestOverviewControlsAndEstimates: the overview shows a queue's open
// breaker and its rate, marks finished counts above the exact
// limit as estimates ("~") and explains the mark; live counts stay exact.
func TestOverviewControlsAndEstimates(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	ca, err := client.New(ctx, admin)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `INSERT INTO backoff.queues (name, policy, rate, breaker_failures, breaker_window, breaker_cooldown)
		VALUES ('hooks', 'default', 50, 1, '1 minute', '1 hour')`)
	require.NoError(t, err)
	id, err := ca.Enqueue(ctx, "hooks", nil)
	require.NoError(t, err)
	j, err := ca.Acquire(ctx, id, 0)
	require.NoError(t, err)
	_, err = ca.Fail(ctx, id, j.Token, "down") // retryable: the only kind the breaker counts
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at)
		SELECT 'bulk', 'completed', 1, now(), now(), now() FROM generate_series(1, 10001);
		ANALYZE backoff.jobs`)
	require.NoError(t, err)
	_, err = ca.Enqueue(ctx, "bulk", nil)
	require.NoError(t, err)

	srv, _ := serve(t, dbURL, webui.Options{})
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/overview/table")
	require.Equal(t, 200, code, body)
	row := func(queue string) string {
		i := strings.Index(body, `<tr data-queue="`+queue+`">`)
		require.GreaterOrEqual(t, i, 0, body)
		return body[i : i+strings.Index(body[i:], "</tr>")]
	}
	hooks := row("hooks")
	require.Contains(t, hooks, "breaker open")
	require.Contains(t, hooks, "50/s")
	require.NotContains(t, hooks, "~")
	bulk := row("bulk")
	require.Regexp(t, `title="estimate">~\d+</a>`, bulk, "10001 finished jobs: an estimate")
	require.Contains(t, bulk, `status=pending">1</a>`, "live counts are exact")
	require.Contains(t, body, `id="estimated"`)
}
