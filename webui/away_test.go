package webui_test

import (
	"context"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// cutProxy forwards TCP to the database until cut, and again once
// restored, on the same address: the database going away and coming back,
// as the UI sees it.
type cutProxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func (p *cutProxy) listen(t *testing.T) {
	t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestBrowserDatabaseAway: the overview shows a banner while the database
// cannot be reached and clears it by itself when it is back.
func TestBrowserDatabaseAway(t *testing.T) {
	dbURL := testdb.NewURL(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	p := &cutProxy{target: u.Host}
	p.listen(t)
	u.Host = p.addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	pool := testdb.Pool(t, u.String())
	ctx := context.Background()
	c, err := client.New(ctx, pool)
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "mail", nil)
	require.NoError(t, err)
	h, err := webui.New(c, ops.New(pool), webui.Options{RefreshEvery: 300 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	bctx, console := browser(t)
	do(t, bctx, chromedp.Navigate(srv.URL+"/"))
	require.False(t, run(t, bctx, chromedp.Evaluate[bool](`!document.getElementById("banner").hidden`)))
	bannerShown := func() (bool, string) {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
			`[String(!document.getElementById("banner").hidden), document.getElementById("banner").textContent]`))
		if err != nil || len(v) != 2 {
			return false, ""
		}
		return v[0] == "true", v[1]
	}

	p.cut()
	require.Eventually(t, func() bool {
		shown, text := bannerShown()
		return shown && len(text) > 0
	}, 20*time.Second, 200*time.Millisecond, "banner while the database is away")
	_, text := bannerShown()
	require.Contains(t, text, "the database cannot be reached")
	require.Equal(t, srv.URL+"/", run(t, bctx, chromedp.Location()), "no navigation")

	p.listen(t)
	require.Eventually(t, func() bool {
		shown, _ := bannerShown()
		return !shown
	}, 20*time.Second, 200*time.Millisecond, "the banner goes when the database is back")
	require.Contains(t, run(t, bctx, chromedp.Text(chromedp.CSS(`tr[data-queue=mail]`))), "mail")
	for _, m := range console() {
		// The refused refreshes log their 503s; nothing else may appear.
		require.Contains(t, m, "503", m)
	}
}
