package webui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/visible"
)

// pageTemplate is layout.html with one page's templates.
type pageTemplate struct{ t *template.Template }

// view is what every page template gets.
type view struct {
	Title        string
	Nav          string // the nav entry to highlight
	Prefix       string
	Assets       string
	CSRF         string
	AllowActions bool
	Banner       string // the database could not be reached, or similar
	Status       int
	Message      string // the error page's text
	Data         any
}

var pageNames = []string{"overview", "jobs", "job", "graph", "deadletters", "policies", "schedules", "schedule", "bulk", "enqueue", "result", "error"}

func parseTemplates(h *Handler) (map[string]*pageTemplate, error) {
	funcs := template.FuncMap{
		"text":  text,
		"short": func(s string, n int) string { return text(truncate(s, n)) },
		"ts":    formatTime,
		"tsp":   func(t *time.Time) string { return formatTimePtr(t) },
		"dur":   formatDuration,
		"since": func(t time.Time) string { return formatDuration(time.Since(t)) },
		"join":  strings.Join,
		// A name in a path segment of a link ("/" and "?" escaped too).
		"path":     url.PathEscape,
		"contains": func(list []string, s string) bool { return contains(list, s) },
		"add":      func(a, b int) int { return a + b },
		"divide":   func(a, b int) int { return a / b },
		"count":    thousands,
		// A running job's lease against the clock: stranded work stands out.
		"expired": func(t *time.Time) bool { return t != nil && t.Before(time.Now()) },
		"lease":   leaseText,
		"reason":  reasonText,
	}
	out := map[string]*pageTemplate{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("webui: parse template %s: %w", name, err)
		}
		out[name] = &pageTemplate{t}
	}
	frag, err := template.New("overview.html").Funcs(funcs).ParseFS(templateFS, "templates/overview.html")
	if err != nil {
		return nil, fmt.Errorf("webui: parse overview fragment: %w", err)
	}
	out["overview-table"] = &pageTemplate{frag}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// text shows what producers and workers wrote as what it is: control
// characters (a terminal escape, a NUL) and Unicode format characters (a
// bidi override that reorders what follows, a zero-width character) as Go
// escapes, the rule of the CLI (package visible); newlines and tabs stay,
// for payloads and errors in <pre>. html/template escapes the markup
// characters when the result is rendered.
func text(s string) string { return visible.Escape(s, "\n\t") }

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// reasonWords are the dead-letter reasons (backoff.jobs.dead_letter_reason)
// as the pages say them; filters and URLs keep the raw value.
var reasonWords = map[string]string{
	"non_retryable":  "not retryable",
	"max_attempts":   "attempts used up",
	"lease_expiries": "leases expired too often",
	"deadline":       "past its deadline",
}

// reasonText is a dead-letter reason for people; one the UI does not know
// (a newer schema's) is shown as stored, escaped.
func reasonText(r string) string {
	if w, ok := reasonWords[r]; ok {
		return w
	}
	return text(r)
}

// formatDuration renders a duration for people by the CLI's rule
// (visible.Duration: "250ms", "1.18s", "1m2s", "2.5d"); a negative one,
// the age of a time that the clock has not reached, is "0s".
func formatDuration(d time.Duration) string { return visible.Duration(max(d, 0)) }

// page renders a full page with status.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	v.Prefix, v.Assets, v.AllowActions = h.opts.Prefix, h.assets, h.opts.AllowActions
	if v.Status == 0 {
		v.Status = status
	}
	if h.opts.AllowActions && name != "error" { // the error page has no form
		v.CSRF = h.csrfToken(w, r)
	}
	var buf bytes.Buffer
	if err := h.pages[name].t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.opts.Logger.Error("webui: render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page: status and what was wrong.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", view{Title: http.StatusText(status), Message: msg})
}

// failErr maps a client error to a page: bad input 4xx, a missing right
// 403, an unreachable database 503 with the banner, anything else 500.
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := h.classify(err)
	if status >= 500 && !errors.Is(err, context.Canceled) { // canceled: the browser left
		h.opts.Logger.Error("webui", "path", r.URL.Path, "err", err)
	}
	v := view{Title: http.StatusText(status), Message: msg}
	if status == http.StatusServiceUnavailable {
		v.Banner = msg
	}
	h.render(w, r, status, "error", v)
}

// classify says what an error from the client means for the operator.
func (h *Handler) classify(err error) (int, string) {
	var pgErr *pgconn.PgError
	detail := err.Error()
	if errors.As(err, &pgErr) {
		detail = pgErr.Message
	}
	switch {
	case errors.Is(err, client.ErrPermissionDenied):
		return http.StatusForbidden, "the database role this UI connects with lacks the right for this: " + detail +
			" (backoff_admin may do everything the UI offers; backoff_worker may read jobs, dead letters and policies)"
	case errors.Is(err, client.ErrJobNotFound):
		return http.StatusNotFound, "no such job: " + detail
	case errors.Is(err, client.ErrInvalidArgument):
		return http.StatusBadRequest, "invalid input: " + detail
	case errors.Is(err, client.ErrInvalidTransition), errors.Is(err, client.ErrStaleAttempt):
		return http.StatusConflict, "not possible in the job's current state: " + detail
	case errors.Is(err, context.DeadlineExceeded):
		// The page's own deadline: its queries ran longer, or the
		// connection could not be made in time; both read the same here.
		return http.StatusServiceUnavailable, fmt.Sprintf("the database did not answer within the page's query timeout (%s): "+
			"it is busy or slow, or it cannot be reached. The page recovers by itself when it answers again.", h.opts.QueryTimeout)
	case client.IsConnectionError(err):
		return http.StatusServiceUnavailable, "the database cannot be reached: " + err.Error() +
			". The page recovers by itself when it is back."
	}
	if pgErr != nil {
		return http.StatusInternalServerError, fmt.Sprintf("database error SQLSTATE %s: %s", pgErr.Code, pgErr.Message)
	}
	return http.StatusInternalServerError, err.Error()
}

// leaseText says where a lease stands: "lease expired 33s ago" once it
// has ended (its worker stopped renewing it), else "lease ends in 20s".
func leaseText(t *time.Time) string {
	if t == nil {
		return ""
	}
	d := time.Until(*t).Round(time.Second)
	if d < 0 {
		return "lease expired " + formatDuration(-d) + " ago"
	}
	return "lease ends in " + formatDuration(d)
}
