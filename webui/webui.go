// Package webui is pgbackoff's operator web UI: an http.Handler an
// application mounts under a path prefix of its own, and what
// `backoffctl ui` serves. Pages are rendered on the server with
// html/template from the Go client's calls (the UI has no SQL of its own);
// the few lines of JavaScript and the stylesheet are embedded. It is read
// only unless Options.AllowActions is set; every action is a POST carrying
// a CSRF token and passing a same-origin check
// (docs/adr/0044-operator-web-ui.md). It answers only to loopback names
// and Options.Hosts, and with Options.BearerToken to requests carrying it
// (docs/adr/0060-ui-hosts-token-and-bounded-reads.md).
//
// The client package does not import this one: a program that only
// enqueues pulls in no web code.
package webui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the handler.
type Options struct {
	// Prefix is the path the handler is mounted under ("/ops"), without a
	// trailing slash; "" for the root. Requests keep it (do not wrap the
	// handler in http.StripPrefix): links are built with it.
	Prefix string
	// AllowActions enables the actions (replay, cancel, unblock, pause, resume,
	// bulk, enqueue). Without it the UI is read only and says so.
	AllowActions bool
	// Hosts are the names (or addresses) the UI answers to in a request's
	// Host header besides the loopback ones (localhost, 127.0.0.0/8, ::1),
	// which it always answers to; a port is ignored, and "*" answers to
	// any host (for an application that checks hosts itself). Any other
	// host gets 421: a page of another site whose name the attacker points
	// at this machine (DNS rebinding) is same-origin with itself, so the
	// browser would let it read the pages and post their forms.
	Hosts []string
	// BasicUser and BasicPassword, when both set, require HTTP basic
	// authentication on every request.
	BasicUser, BasicPassword string
	// BearerToken, when set, is required on every request but for the
	// static assets: as "Authorization: Bearer TOKEN", or from a browser
	// as the HttpOnly, SameSite=Strict cookie that opening any page with
	// "?token=TOKEN" sets (the page then redirects to its URL without the
	// token: the address `backoffctl ui` prints). With basic auth also
	// set, either one is enough.
	BearerToken string
	// Logger receives server-side errors (default: slog.Default()).
	Logger *slog.Logger
	// RefreshEvery is how often the overview refreshes its table (default
	// 5s).
	RefreshEvery time.Duration
	// DeadLetterSample is how many of the most recent dead letters the
	// Dead letters page groups by error signature (default
	// ops.DefaultDeadLetterSample, 10,000): the page's cost grows with
	// it, not with the dead letters; above it the page says so.
	DeadLetterSample int
	// QueryTimeout bounds the database calls of one page (default 10s);
	// a page whose calls run out of it answers 503 with the banner.
	QueryTimeout time.Duration
}

// Handler serves the UI.
type Handler struct {
	c     *client.Client // enqueue (a schedule's trigger), reap, schedules
	ops   *ops.Client    // every read and action on jobs and queues
	opts  Options
	hosts map[string]bool // Options.Hosts, normalized
	// session is the value of the session cookie for BearerToken: an HMAC
	// of a constant under the token, so that the cookie is not the token
	// and stays valid across restarts with the same token.
	session string
	mux     *http.ServeMux
	pages   map[string]*pageTemplate
	secret  []byte
	cop     *http.CrossOriginProtection
	assets  string // cache-busting version of the embedded assets
	// activity keeps the overview chart's ended minutes.
	activity activityCache
	// health keeps backoff.health's vacuum warning for a minute.
	health healthCache
}

// New returns the UI's handler over c, the worker's client, and o, the
// operator's (client/ops), normally on the same pool: both should sit on a
// pool (pgxpool.Pool) so that the UI recovers when the database comes
// back.
func New(c *client.Client, o *ops.Client, opts Options) (*Handler, error) {
	if c == nil || o == nil {
		return nil, errors.New("webui: nil client")
	}
	opts.Prefix = strings.TrimRight(opts.Prefix, "/")
	if opts.Prefix != "" && !strings.HasPrefix(opts.Prefix, "/") {
		return nil, fmt.Errorf("webui: prefix %q must start with /", opts.Prefix)
	}
	if (opts.BasicUser == "") != (opts.BasicPassword == "") {
		return nil, errors.New("webui: basic auth needs both a user and a password")
	}
	if opts.DeadLetterSample < 0 {
		return nil, fmt.Errorf("webui: dead-letter sample %d must not be negative", opts.DeadLetterSample)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RefreshEvery <= 0 {
		opts.RefreshEvery = 5 * time.Second
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = defaultQueryTimeout
	}
	h := &Handler{c: c, ops: o, opts: opts, mux: http.NewServeMux(), secret: make([]byte, 32),
		cop: http.NewCrossOriginProtection(), hosts: map[string]bool{}}
	for _, host := range opts.Hosts {
		n := hostName(host)
		if n == "" {
			return nil, fmt.Errorf("webui: host %q: want a host name or address", host)
		}
		h.hosts[n] = true
	}
	if opts.BearerToken != "" {
		m := hmac.New(sha256.New, []byte(opts.BearerToken))
		m.Write([]byte("pgbackoff web UI session"))
		h.session = base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	if _, err := rand.Read(h.secret); err != nil {
		return nil, fmt.Errorf("webui: csrf secret: %w", err)
	}
	sum := sha256.New()
	_ = fs.WalkDir(staticFS, "static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := staticFS.ReadFile(path)
			sum.Write(b)
		}
		return nil
	})
	h.assets = hex.EncodeToString(sum.Sum(nil))[:12]
	pages, err := parseTemplates(h)
	if err != nil {
		return nil, err
	}
	h.pages = pages
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	p := h.opts.Prefix
	get := func(path string, fn func(http.ResponseWriter, *http.Request)) {
		h.mux.HandleFunc("GET "+p+path, fn)
	}
	post := func(path string, fn func(http.ResponseWriter, *http.Request)) {
		h.mux.HandleFunc("POST "+p+path, h.action(fn))
	}
	get("/{$}", h.overview)
	get("/overview/table", h.overviewTable)
	get("/jobs", h.jobs)
	get("/jobs/{id}", h.job)
	get("/jobs/{id}/graph", h.jobGraph)
	get("/dead-letters", h.deadLetters)
	get("/policies", h.policies)
	get("/schedules", h.schedules)
	get("/schedules/{name}", h.schedule)
	get("/bulk", h.bulkConfirm)
	get("/enqueue", h.enqueueForm)
	post("/jobs/{id}/replay", h.replayJob)
	post("/jobs/{id}/cancel", h.cancelJob)
	post("/jobs/{id}/unblock", h.unblockJob)
	post("/reap", h.reap)
	post("/queues/pause", h.pauseQueue)
	post("/queues/resume", h.resumeQueue)
	post("/schedules/pause", h.pauseSchedule)
	post("/schedules/resume", h.resumeSchedule)
	post("/bulk", h.bulk)
	post("/enqueue", h.enqueue)
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(p+"/static/", http.FileServerFS(static))
	h.mux.Handle("GET "+p+"/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Asset URLs carry ?v=<hash of the assets>: cache them for a year.
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		files.ServeHTTP(w, r)
	}))
	if p != "" {
		h.mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, p+"/", http.StatusFound)
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no page at %q", r.URL.Path))
	})
}

// csp forbids inline script and style and every origin but this one.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// ServeHTTP sets the security headers, checks the host, authenticates and
// routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if !h.hostAllowed(r.Host) {
		// Plain text: nothing of the UI, not even its stylesheet, for a
		// name this UI does not go by.
		http.Error(w, fmt.Sprintf("refused: host %q is not one this UI answers to (loopback names, and those given "+
			"with backoffctl ui --allow-host or webui.Options.Hosts)", hostName(r.Host)), http.StatusMisdirectedRequest)
		return
	}
	if tok, ok := r.URL.Query()["token"]; ok && h.session != "" && r.Method == http.MethodGet &&
		subtle.ConstantTimeCompare([]byte(tok[0]), []byte(h.opts.BearerToken)) == 1 {
		// The URL printed at start: keep the session in a cookie and
		// take the token out of the address bar (and of the history).
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: h.session, Path: h.opts.Prefix + "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		u := *r.URL
		q := u.Query()
		q.Del("token")
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	static := strings.HasPrefix(r.URL.Path, h.opts.Prefix+"/static/") && r.Method == http.MethodGet
	if !static && !h.authorized(r) {
		if h.opts.BasicUser != "" {
			hd.Set("WWW-Authenticate", `Basic realm="pgbackoff", charset="UTF-8"`)
		}
		msg := "authentication required"
		if h.session != "" {
			msg = "this UI needs its access token: open the address that backoffctl ui printed when it started " +
				"(it ends in ?token=…; with BACKOFF_UI_TOKEN set, add ?token= and that token to the address), " +
				"or send the header Authorization: Bearer with the token"
		}
		h.render(w, r, http.StatusUnauthorized, "error", view{Title: http.StatusText(http.StatusUnauthorized), Message: msg})
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), csrfKey{}, &csrfValue{})))
}

// hostName is the host of a Host header (or of Options.Hosts) without
// its port, brackets and trailing dot, in lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// hostAllowed: the Host header names this machine's loopback or a host
// of Options.Hosts.
func (h *Handler) hostAllowed(host string) bool {
	n := hostName(host)
	if n == "localhost" || h.hosts["*"] || h.hosts[n] {
		return true
	}
	ip := net.ParseIP(n)
	return ip != nil && ip.IsLoopback()
}

// sessionCookie carries Handler.session for a browser that opened the
// URL with the token.
const sessionCookie = "pgbackoff_session"

func (h *Handler) authorized(r *http.Request) bool {
	if h.opts.BasicUser == "" && h.opts.BearerToken == "" {
		return true
	}
	if c, err := r.Cookie(sessionCookie); err == nil && h.session != "" &&
		subtle.ConstantTimeCompare([]byte(c.Value), []byte(h.session)) == 1 {
		return true
	}
	auth := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(auth, "Bearer "); ok && h.opts.BearerToken != "" {
		return subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.BearerToken)) == 1
	}
	if u, pw, ok := r.BasicAuth(); ok && h.opts.BasicUser != "" {
		okU := subtle.ConstantTimeCompare([]byte(u), []byte(h.opts.BasicUser))
		okP := subtle.ConstantTimeCompare([]byte(pw), []byte(h.opts.BasicPassword))
		return okU&okP == 1
	}
	return false
}

// csrfCookie holds a random value per browser; the form token is its HMAC
// under the handler's secret, so a page from another origin can neither
// read nor forge it.
const csrfCookie = "pgbackoff_csrf"

// csrfKey keys a request's *csrfValue in its context.
type csrfKey struct{}

// csrfValue is a request's CSRF cookie value once known: a page may ask
// for the token more than once (the overview's table and its layout), and
// a browser without the cookie must get one cookie and forms that match
// it, not one new cookie per call.
type csrfValue struct{ v string }

// csrfToken returns the token for r's browser, setting the cookie when it
// has none (once per request).
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	memo, _ := r.Context().Value(csrfKey{}).(*csrfValue)
	if memo != nil && memo.v != "" {
		return h.sign(memo.v)
	}
	v := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 16 {
		v = c.Value
	} else {
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		v = base64.RawURLEncoding.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: h.opts.Prefix + "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	}
	if memo != nil {
		memo.v = v
	}
	return h.sign(v)
}

func (h *Handler) sign(v string) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// action wraps a POST handler: actions must be enabled, the request must
// pass the same-origin check and carry the CSRF token.
func (h *Handler) action(fn func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.opts.AllowActions {
			h.fail(w, r, http.StatusForbidden, "actions are disabled: this UI was started read-only (without --allow-actions)")
			return
		}
		if err := h.cop.Check(r); err != nil {
			h.fail(w, r, http.StatusForbidden, "refused: the request did not come from this UI's own pages (cross-origin)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, http.StatusBadRequest, "cannot read the form: "+err.Error())
			return
		}
		c, err := r.Cookie(csrfCookie)
		tok := r.PostForm.Get("csrf")
		if err != nil || tok == "" || !hmac.Equal([]byte(tok), []byte(h.sign(c.Value))) {
			h.fail(w, r, http.StatusForbidden, "refused: missing or wrong CSRF token; reload the page and try again")
			return
		}
		fn(w, r)
	}
}
