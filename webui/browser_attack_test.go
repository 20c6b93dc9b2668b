package webui_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// The attacks of attack_test.go, in a real browser.

// attackScript is what a page of the attacker's, served as the UI's
// origin after DNS rebinding, runs: read the overview and post its CSRF
// token back to pause billing.
const attackScript = `(async () => {
	const page = await fetch("/");
	const m = /name="csrf" value="([^"]+)"/.exec(await page.text());
	if (!m) return "no token: " + page.status;
	const r = await fetch("/queues/pause", {method: "POST", body: new URLSearchParams({csrf: m[1], queue: "billing"})});
	return "posted: " + r.status;
})()`

// TestBrowserRebinding: chromium resolves attacker.example to 127.0.0.1,
// as DNS rebinding makes it; the UI refuses the page and the pause.
func TestBrowserRebinding(t *testing.T) {
	srv, c := serve(t, testdb.NewURL(t), webui.Options{AllowActions: true})
	_, err := c.Enqueue(context.Background(), "billing", nil)
	require.NoError(t, err)
	ctx, console := browser(t, chromedp.Flag("host-resolver-rules", "MAP attacker.example 127.0.0.1"))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	evil := fmt.Sprintf("http://attacker.example:%d", port)

	do(t, ctx, chromedp.Navigate(evil+"/"))
	require.Equal(t, evil+"/", run(t, ctx, chromedp.Location()), "the browser reached the UI by the attacker's name")
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("body"))), `host "attacker.example" is not one this UI answers to`)
	got := run(t, ctx, chromedp.Evaluate[string](attackScript, chromedp.EvalAwaitPromise))
	require.Equal(t, "no token: 421", got)
	require.False(t, paused(t, c, "billing"), "the rebound page paused billing")
	console()

	// The same page by a loopback name is the UI.
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("http://localhost:%d/", port)))
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), "Queues")
	require.Empty(t, console())
}

// login opens the URL backoffctl ui prints: the token sets the cookie and
// leaves the address bar.
func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(base+"/?token="+url.QueryEscape(token)))
	require.Equal(t, base+"/", run(t, ctx, chromedp.Location()))
}

// TestBrowserAccessToken: without the token a browser gets a page that
// says how to open the UI; the printed URL opens it, and the token stays
// out of the address bar and of the page's script.
func TestBrowserAccessToken(t *testing.T) {
	const token = "Zq3-browser-token"
	srv, c := serve(t, testdb.NewURL(t), webui.Options{AllowActions: true, BearerToken: token})
	_, err := c.Enqueue(context.Background(), "billing", nil)
	require.NoError(t, err)
	ctx, console := browser(t)
	do(t, ctx, chromedp.Navigate(srv.URL+"/jobs"))
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.ID("message"))), "?token=")
	require.False(t, run(t, ctx, chromedp.Evaluate[bool](`document.querySelector("#jobs") !== null`)))
	console() // the 401

	login(t, ctx, srv.URL, token)
	require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), "Queues")
	require.Empty(t, run(t, ctx, chromedp.Evaluate[string](`document.cookie`)), "cookies are HttpOnly")
	do(t, ctx, chromedp.Navigate(srv.URL+"/jobs?queue=billing"))
	require.Equal(t, 1, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#jobs tbody tr[data-id]").length`)))
	do(t, ctx, chromedp.Navigate(srv.URL+"/"))
	_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.CSS(`tr[data-queue=billing] button`))))
	require.NoError(t, err)
	require.True(t, paused(t, c, "billing"))
	require.Empty(t, console())
}

// TestBrowserFirstVisitPause: a fresh browser's first visit to the
// overview, then Pause: it works the first time.
func TestBrowserFirstVisitPause(t *testing.T) {
	srv, c := serve(t, testdb.NewURL(t), webui.Options{AllowActions: true})
	_, err := c.Enqueue(context.Background(), "billing", nil)
	require.NoError(t, err)
	ctx, console := browser(t)
	do(t, ctx, chromedp.Navigate(srv.URL+"/"))
	_, err = chromedp.Run(ctx, chromedp.WaitEvent(pageLoad, nil, chromedp.Click(chromedp.CSS(`tr[data-queue=billing] button`))))
	require.NoError(t, err)
	require.Equal(t, srv.URL+"/", run(t, ctx, chromedp.Location()), run(t, ctx, chromedp.Text(chromedp.CSS("body"))))
	require.True(t, paused(t, c, "billing"))
	require.Empty(t, console())
}

// TestBrowserFormatCharacters: no page shows a Unicode format character
// (bidi override, zero-width character) from a queue name, payload or
// error as a character: not in its text, not in a tooltip.
func TestBrowserFormatCharacters(t *testing.T) {
	dbURL := testdb.NewURL(t)
	srv, c := serve(t, dbURL, webui.Options{AllowActions: true})
	ctx := context.Background()
	const queue = "pay\u202eslo"
	id := legacyQueueJob(t, dbURL, c, queue, map[string]any{"note": "refund\u202e\u2066 100\u2069 \u200bx\ufeff"})
	j, err := c.Acquire(ctx, id, 0)
	require.NoError(t, err)
	_, err = c.Fail(ctx, id, j.Token, "card \u202e1234\u202c declined\u200d\u2060", client.NonRetryable())
	require.NoError(t, err)
	bctx, console := browser(t)
	shown := `[document.title, document.body.innerText,
		...Array.from(document.querySelectorAll("[title]")).map(e => e.getAttribute("title")),
		...Array.from(document.querySelectorAll("svg title")).map(e => e.textContent)].join("\n")`
	for _, p := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", id), "/dead-letters", "/policies", "/enqueue"} {
		do(t, bctx, chromedp.Navigate(srv.URL+p))
		text := run(t, bctx, chromedp.Evaluate[string](shown))
		bad := run(t, bctx, chromedp.Evaluate[[]string](`(`+shown+`).match(/.{0,20}\p{Cf}.{0,20}/gu) || []`))
		require.Empty(t, bad, "%s shows format characters", p)
		if p != "/enqueue" { // its queues are a datalist's values
			require.Contains(t, text, `pay\u202eslo`, p)
		}
		require.Empty(t, console(), p)
	}
	do(t, bctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, id)))
	require.True(t, strings.Contains(run(t, bctx, chromedp.Text(chromedp.ID("payload"))), `refund\u202e\u2066 100\u2069 \u200bx\ufeff`))
}
