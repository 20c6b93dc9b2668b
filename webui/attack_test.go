package webui_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// These tests reproduce attacks on the UI over raw HTTP: each sends what a
// hostile page, producer or database would, and checks the UI refuses it
// or stays bounded (docs/adr/0060-ui-hosts-token-and-bounded-reads.md).

// send makes a request with a Host header of its own (what a browser sends
// for a name the attacker resolves to this machine) and extra headers.
func send(t *testing.T, hc *http.Client, method, u, host string, form url.Values, header map[string]string) (int, string, http.Header) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func paused(t *testing.T, c *client.Client, queue string) bool {
	t.Helper()
	qs, err := opsOf(c).Queues(context.Background())
	require.NoError(t, err)
	for _, q := range qs {
		if q.Name == queue {
			return q.Paused
		}
	}
	t.Fatalf("no queue %q", queue)
	return false
}

// TestHostHeaderRebinding: a page of attacker.example whose name the
// attacker points at 127.0.0.1 (DNS rebinding) is same-origin with itself:
// its requests carry Host: attacker.example:PORT and a matching Origin.
// The UI answers only to loopback names and the hosts it was given.
func TestHostHeaderRebinding(t *testing.T) {
	dbURL := testdb.NewURL(t)
	srv, c := serve(t, dbURL, webui.Options{AllowActions: true})
	ctx := context.Background()
	_, err := c.Enqueue(ctx, "billing", nil)
	require.NoError(t, err)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	evil := fmt.Sprintf("attacker.example:%d", port)
	hc := noRedirect()

	for _, p := range []string{"/", "/overview/table", "/jobs", "/jobs?queue=billing", "/dead-letters", "/policies", "/enqueue", "/static/app.css"} {
		code, body, _ := send(t, hc, http.MethodGet, srv.URL+p, evil, nil, nil)
		require.Equal(t, http.StatusMisdirectedRequest, code, "%s: %s", p, body)
		require.Contains(t, body, `host "attacker.example" is not one this UI answers to`, p)
		require.NotContains(t, body, "billing", p)
	}
	// The attack of the finding: read a page's token as attacker.example,
	// then post it back with the matching Origin.
	_, body, _ := send(t, hc, http.MethodGet, srv.URL+"/", "127.0.0.1:"+fmt.Sprint(port), nil, nil)
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok, body)
	code, body, _ := send(t, hc, http.MethodPost, srv.URL+"/queues/pause", evil,
		url.Values{"csrf": {tok[1]}, "queue": {"billing"}}, map[string]string{"Origin": "http://" + evil})
	require.Equal(t, http.StatusMisdirectedRequest, code, body)
	require.False(t, paused(t, c, "billing"), "the rebound page paused billing")

	// Loopback names are this machine, whatever the port.
	for _, host := range []string{"localhost:" + fmt.Sprint(port), "LocalHost.", "127.0.0.1", "127.0.0.2:9", "[::1]:" + fmt.Sprint(port)} {
		code, body, _ := send(t, hc, http.MethodGet, srv.URL+"/policies", host, nil, nil)
		require.Equal(t, http.StatusOK, code, "%s: %s", host, body)
	}
	code, _, _ = send(t, hc, http.MethodGet, srv.URL+"/policies", "localhost.attacker.example", nil, nil)
	require.Equal(t, http.StatusMisdirectedRequest, code)
}

// TestHostsOption: Options.Hosts adds the names the UI answers to; "*"
// turns the check off for an application that checks hosts itself.
func TestHostsOption(t *testing.T) {
	dbURL := testdb.NewURL(t)
	srv, c := serve(t, dbURL, webui.Options{Hosts: []string{"ops.example.com", "10.1.2.3"}})
	hc := noRedirect()
	for host, want := range map[string]int{
		"ops.example.com":        200,
		"OPS.example.com.:8443":  200,
		"10.1.2.3:80":            200,
		"localhost":              200,
		"example.com":            http.StatusMisdirectedRequest,
		"ops.example.com.evil.x": http.StatusMisdirectedRequest,
		"10.1.2.4":               http.StatusMisdirectedRequest,
	} {
		code, body, _ := send(t, hc, http.MethodGet, srv.URL+"/policies", host, nil, nil)
		require.Equal(t, want, code, "%s: %s", host, body)
	}
	srv, _ = serve(t, dbURL, webui.Options{Hosts: []string{"*"}})
	code, _, _ := send(t, hc, http.MethodGet, srv.URL+"/policies", "anything.example", nil, nil)
	require.Equal(t, 200, code)
	_, err := webui.New(c, opsOf(c), webui.Options{Hosts: []string{":8080"}})
	require.ErrorContains(t, err, `host ":8080": want a host name or address`)
}

// TestAccessToken: with a token, a page is served only to a request that
// carries it: the cookie that opening any page with ?token=TOKEN sets (then
// the URL without it), or Authorization: Bearer. Static assets need none.
func TestAccessToken(t *testing.T) {
	const token = "k8Jx2-tok3n-for-the-test"
	srv, c := serve(t, testdb.NewURL(t), webui.Options{AllowActions: true, BearerToken: token})
	_, err := c.Enqueue(context.Background(), "billing", nil)
	require.NoError(t, err)
	hc := noRedirect()

	code, body, _ := get(t, hc, srv.URL+"/jobs?queue=billing")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "?token=")
	require.NotContains(t, body, "billing</td>")
	code, _, h := get(t, hc, srv.URL+"/jobs?queue=billing&token=wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Empty(t, h.Values("Set-Cookie"))
	code, _, _ = get(t, hc, srv.URL+"/static/app.css")
	require.Equal(t, 200, code, "assets need no token")

	code, _, h = get(t, hc, srv.URL+"/jobs?queue=billing&token="+token)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/jobs?queue=billing", h.Get("Location"), "the token leaves the URL")
	cookies := h.Values("Set-Cookie")
	require.Len(t, cookies, 1)
	require.Contains(t, cookies[0], "HttpOnly")
	require.Contains(t, cookies[0], "SameSite=Strict")
	require.NotContains(t, cookies[0], token, "the cookie is not the token")
	code, body, _ = get(t, hc, srv.URL+"/jobs?queue=billing")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "billing")

	// The cookie and a CSRF token act; a POST without the cookie does not.
	_, body, _ = get(t, hc, srv.URL+"/")
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	code, _ = post(t, noRedirect(), srv.URL+"/queues/pause", url.Values{"csrf": {tok[1]}, "queue": {"billing"}}, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	require.False(t, paused(t, c, "billing"))
	code, _ = post(t, hc, srv.URL+"/queues/pause", url.Values{"csrf": {tok[1]}, "queue": {"billing"}}, nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.True(t, paused(t, c, "billing"))

	// Scripts send the token as a bearer.
	code, _, _ = send(t, http.DefaultClient, http.MethodGet, srv.URL+"/policies", "", nil,
		map[string]string{"Authorization": "Bearer " + token})
	require.Equal(t, 200, code)
}

// countingDB is a client.DB over a pool that counts the bytes of the rows
// its Query calls return: what the UI's process receives and holds.
type countingDB struct {
	*pgxpool.Pool
	n atomic.Int64
}

func (d *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Pool.Query(ctx, sql, args...)
	if err != nil {
		return rows, err
	}
	return &countingRows{Rows: rows, n: &d.n}, nil
}

// QueryRow goes through Query, so that its row is counted too.
func (d *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := d.Query(ctx, sql, args...)
	return countingRow{rows: rows, err: err}
}

type countingRow struct {
	rows pgx.Rows
	err  error
}

func (r countingRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type countingRows struct {
	pgx.Rows
	n *atomic.Int64
}

func (r *countingRows) Next() bool {
	if !r.Rows.Next() {
		return false
	}
	for _, v := range r.Rows.RawValues() {
		r.n.Add(int64(len(v)))
	}
	return true
}

// TestListsWithoutPayloads: eight jobs of 4 MB payloads. The jobs page
// reads none of them; a job's page reads the start of its payload and
// says how big it is.
func TestListsWithoutPayloads(t *testing.T) {
	dbURL := testdb.NewURL(t)
	db := &countingDB{Pool: testdb.Pool(t, dbURL)}
	ctx := context.Background()
	var ids []int64
	rows, err := db.Pool.Query(ctx, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at, errors)
		SELECT 'big', jsonb_build_object('blob', repeat(md5(i::text), 131072)), now(), now(),
		       jsonb_build_array(jsonb_build_object('attempt', 1, 'error', repeat('e', 8000)))
		FROM generate_series(1, 8) AS i RETURNING id`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	c, err := client.New(ctx, db)
	require.NoError(t, err)
	h, err := webui.New(c, ops.New(db), webui.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, p := range []string{"/jobs", "/jobs?queue=big&order=oldest", "/jobs?status=pending&error=x"} {
		db.n.Store(0)
		code, body, _ := get(t, http.DefaultClient, srv.URL+p)
		require.Equal(t, 200, code, body)
		require.Less(t, db.n.Load(), int64(100_000), "%s read %d bytes from the database", p, db.n.Load())
		require.Less(t, len(body), 100_000, p)
	}

	db.n.Store(0)
	code, body, _ := get(t, http.DefaultClient, fmt.Sprintf("%s/jobs/%d", srv.URL, ids[0]))
	require.Equal(t, 200, code, body)
	require.Less(t, db.n.Load(), int64(1<<20), "a job's page read %d bytes", db.n.Load())
	require.Less(t, len(body), 1<<20)
	require.Contains(t, body, `id="payload-truncated"`)
	require.Regexp(t, `The payload is 4,194,3\d\d bytes: the first 65,536 characters are shown`, section(t, body, `id="payload-truncated"`))
}

// TestFormatCharactersEscaped: Unicode format characters (category Cf:
// bidi overrides and isolates, zero-width characters, the byte order mark)
// in a queue name, a payload and an error reach no page as characters:
// they are shown as \u escapes, as the CLI shows them.
// legacyQueueJob enqueues a job and then renames its queue to name, as a
// queue named before enqueue refused format characters in names would be
// (docs/adr/0059): such names can still be in a database, and the UI must
// show them escaped.
func legacyQueueJob(t *testing.T, dbURL string, c *client.Client, name string, payload any) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "legacy", payload)
	require.NoError(t, err)
	_, err = testdb.Pool(t, dbURL).Exec(ctx, "UPDATE backoff.jobs SET queue = $1 WHERE id = $2", name, id)
	require.NoError(t, err)
	return id
}

func TestFormatCharactersEscaped(t *testing.T) {
	dbURL := testdb.NewURL(t)
	srv, c := serve(t, dbURL, webui.Options{AllowActions: true})
	ctx := context.Background()
	const queue = "pay\u202eslo" // shows as "payols" when reordered
	id := legacyQueueJob(t, dbURL, c, queue, map[string]any{"note": "refund\u202e\u2066 100\u2069 \u200bx\ufeff"})
	j, err := c.Acquire(ctx, id, 0)
	require.NoError(t, err)
	_, err = c.Fail(ctx, id, j.Token, "card \u202e1234\u202c declined\u200d\u2060 \u00ad\U000e0041", client.NonRetryable())
	require.NoError(t, err)

	tag := regexp.MustCompile(`<[^>]*>`)
	title := regexp.MustCompile(`title="([^"]*)"`)
	for _, p := range []string{"/", "/overview/table", "/jobs", "/jobs?queue=" + url.QueryEscape(queue),
		fmt.Sprintf("/jobs/%d", id), "/dead-letters", "/policies", "/enqueue"} {
		code, body, _ := get(t, http.DefaultClient, srv.URL+p)
		require.Equal(t, 200, code, "%s: %s", p, body)
		shown := tag.ReplaceAllString(body, " ")
		for _, m := range title.FindAllStringSubmatch(body, -1) {
			shown += " " + m[1]
		}
		i := strings.IndexFunc(shown, func(r rune) bool { return unicode.Is(unicode.Cf, r) })
		if i >= 0 {
			t.Errorf("%s shows a format character as text: %q", p, shown[max(0, i-40):min(len(shown), i+40)])
		}
	}
	_, body, _ := get(t, http.DefaultClient, fmt.Sprintf("%s/jobs/%d", srv.URL, id))
	require.Contains(t, body, `pay\u202eslo`)
	require.Contains(t, body, `card \u202e1234\u202c declined\u200d\u2060 \u00ad\U000e0041`)
	require.Contains(t, body, `refund\u202e\u2066 100\u2069 \u200bx\ufeff`)
}

// TestOneCSRFCookiePerRequest: the overview's first visit sets one CSRF
// cookie, and the token in its forms is that cookie's: the first Pause
// after a fresh start works.
func TestOneCSRFCookiePerRequest(t *testing.T) {
	srv, c := serve(t, testdb.NewURL(t), webui.Options{AllowActions: true})
	_, err := c.Enqueue(context.Background(), "billing", nil)
	require.NoError(t, err)
	hc := noRedirect()
	code, body, h := get(t, hc, srv.URL+"/")
	require.Equal(t, 200, code, body)
	n := 0
	for _, v := range h.Values("Set-Cookie") {
		if strings.HasPrefix(v, "pgbackoff_csrf=") {
			n++
		}
	}
	require.Equal(t, 1, n, "CSRF cookies set by one page: %q", h.Values("Set-Cookie"))
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	code, body = post(t, hc, srv.URL+"/queues/pause", url.Values{"csrf": {tok[1]}, "queue": {"billing"}}, nil)
	require.Equal(t, http.StatusSeeOther, code, body)
	require.True(t, paused(t, c, "billing"))
}

// TestDeadLettersManyPairs: 33,000 queues with a dead letter each (a queue
// per tenant). The page's sample had one or two parameters per (queue,
// reason) pair and failed past 65,535; it now reads the first pairs only
// and says so.
func TestDeadLettersManyPairs(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	_, err := admin.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason)
		SELECT 'tenant-' || lpad(i::text, 5, '0'), 'dead_lettered', 1, now(), now(), now() - i * interval '1 second',
		       'tenant ' || i || ' failed', 'max_attempts'
		FROM generate_series(1, 33000) AS i;
		ANALYZE backoff.jobs`)
	require.NoError(t, err)
	srv, _ := serve(t, dbURL, webui.Options{AllowActions: true})
	code, body, _ := get(t, http.DefaultClient, srv.URL+"/dead-letters")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="pairs-capped"`)
	require.Contains(t, body, "only the first 500 (queue, reason) pairs")
	reasons := section(t, body, `id="reasons"`)
	require.Equal(t, 500, strings.Count(reasons, "<tr>")-1, "500 pairs and the header")
	require.Contains(t, reasons, "tenant-00001")
	require.NotContains(t, reasons, "tenant-00501")

	// One queue: every pair of it, no note.
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/dead-letters?queue=tenant-20000")
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, `id="pairs-capped"`)
	require.Contains(t, section(t, body, `id="groups"`), "tenant N failed")

	// The Jobs page offers the first 200 queues as suggestions of a text
	// field, not 33,000 options, and says so; the chosen queue stays.
	code, body, _ = get(t, http.DefaultClient, srv.URL+"/jobs?queue=tenant-20000")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="choices-note"`)
	require.Contains(t, body, `<input name="queue" list="queues" value="tenant-20000"`)
	_, list, ok := strings.Cut(body, `<datalist id="queues">`)
	require.True(t, ok)
	list, _, _ = strings.Cut(list, "</datalist>")
	require.Equal(t, 200, strings.Count(list, "<option"))
	require.Less(t, len(body), 100_000, "the page stays small")
	require.Contains(t, body, `id="shown">1–1 of 1<`)
}
