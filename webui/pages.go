package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// defaultQueryTimeout bounds each page's database calls unless
// Options.QueryTimeout says otherwise.
const defaultQueryTimeout = 10 * time.Second

func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.QueryTimeout)
}

// queueRow is one line of the overview.
type queueRow struct {
	ops.QueueOverview
	Spark *sparkline // nil: nothing happened in the last hour
	// FailedHour and DeadHour are the last hour's failed attempts and dead
	// letters (the chart's sums).
	FailedHour, DeadHour int64
	// Rate and Tokens are the queue's rate limit and its bucket, as text
	// ("" without a rate).
	Rate, Tokens string
}

type overviewData struct {
	Queues       []queueRow
	At           time.Time
	RefreshMS    int64
	AllowActions bool
	Prefix       string
	CSRF         string
	Banner       string
	Estimated    bool // some finished counts are estimates
	// Vacuum is backoff.health's warning: an old snapshot keeps vacuum from
	// removing finished jobs, which every claim then walks ("" when none,
	// or when the login may not ask).
	Vacuum string
	// Live is backoff.liveness, read at every refresh: when the
	// maintenance last ran and the workers seen in the last minute (nil
	// when the login may not ask).
	Live *liveness
}

// liveness is the overview's line on the maintenance and the workers.
type liveness struct {
	Warning string
	Workers int64
	Items   []liveItem
}

// liveItem is one "when did it last run" of the line.
type liveItem struct {
	ID, Label, When, Title string
	Stale                  bool // never, or older than the quiet limit: shown in red
	Plain                  bool // a fact, not judged (a truncate that never happened is no fault)
}

// newLiveness renders l at now.
func newLiveness(l ops.Liveness, now time.Time) *liveness {
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		d := now.Sub(*t).Round(time.Second)
		if d <= 0 {
			return "just now"
		}
		return formatDuration(d) + " ago"
	}
	stale := func(t *time.Time) bool { return t == nil || now.Sub(*t) > ops.DefaultLivenessMaxQuiet }
	title := func(t *time.Time, what string) string {
		if t == nil {
			return what + ": never"
		}
		return what + ": " + formatTime(*t)
	}
	lv := &liveness{Warning: l.Warning, Workers: l.WorkersSeen}
	lv.Items = []liveItem{
		{ID: "live-reap", Label: "Reap", When: when(l.ReapAt), Stale: stale(l.ReapAt),
			Title: title(l.ReapAt, "last reap of expired leases")},
		{ID: "live-rotate", Label: "Rotate", When: when(l.RotateAt), Stale: stale(l.RotateAt),
			Title: title(l.RotateAt, "last rotation of the live segments")},
		{ID: "live-switch", Label: "Last switch", When: when(l.SwitchAt), Plain: true,
			Title: title(l.SwitchAt, "the current segment became current")},
		{ID: "live-truncate", Label: "Last truncate", When: when(l.TruncateAt), Plain: true,
			Title: title(l.TruncateAt, "rotate last truncated a segment")},
	}
	fire := liveItem{ID: "live-fire", Label: "Schedules fired", When: when(l.FireAt),
		Title: title(l.FireAt, "a schedule firer last ran")}
	if l.ActiveSchedules == 0 {
		fire.When += " (none active)"
		fire.Plain = true
	} else {
		fire.Stale = stale(l.FireAt)
	}
	lv.Items = append(lv.Items, fire)
	return lv
}

// overviewData makes two calls: backoff.overview (counts, read from
// indexes) and backoff.activity for the chart's minutes the handler has
// not kept yet (docs/adr/0048-overview-without-full-scans.md).
func (h *Handler) overviewData(r *http.Request) (overviewData, error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	d := overviewData{At: time.Now().UTC(), RefreshMS: h.opts.RefreshEvery.Milliseconds(),
		AllowActions: h.opts.AllowActions, Prefix: h.opts.Prefix}
	queues, err := h.ops.Overview(ctx, 0)
	if err != nil {
		return d, err
	}
	acts, err := h.activity.get(ctx, h.ops, d.At)
	if err != nil {
		return d, err
	}
	d.Vacuum = h.health.get(d.At, func() (string, error) {
		hl, err := h.ops.Health(ctx, 0)
		return hl.Warning, err
	})
	// Advice, as the vacuum warning: a login that may not ask, or a
	// schema without backoff.liveness, shows the table alone.
	if l, err := h.ops.Liveness(ctx, 0); err == nil {
		d.Live = newLiveness(l, d.At)
	}
	sparks := buildSparklines(acts, d.At)
	for _, q := range queues {
		row := queueRow{QueueOverview: q}
		if q.Rate != nil {
			row.Rate = strconv.FormatFloat(*q.Rate, 'g', 4, 64)
		}
		if q.Tokens != nil {
			row.Tokens = strconv.FormatFloat(*q.Tokens, 'f', 1, 64)
		}
		if sp, ok := sparks[q.Queue]; ok {
			row.Spark = &sp
			row.FailedHour, row.DeadHour = sp.failed, sp.dead
		}
		d.Estimated = d.Estimated || !q.FinishedExact
		d.Queues = append(d.Queues, row)
	}
	return d, nil
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	d, err := h.overviewData(r)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	if h.opts.AllowActions {
		d.CSRF = h.csrfToken(w, r)
	}
	h.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Data: d})
}

// overviewTable is the overview's table alone, which the page fetches
// every few seconds; when the database is away it returns the banner.
func (h *Handler) overviewTable(w http.ResponseWriter, r *http.Request) {
	d, err := h.overviewData(r)
	status := http.StatusOK
	if err != nil {
		status, d.Banner = h.classify(err)
	}
	if h.opts.AllowActions {
		d.CSRF = h.csrfToken(w, r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := h.pages["overview-table"].t.ExecuteTemplate(w, "queues", d); err != nil {
		h.opts.Logger.Error("webui: render overview table", "err", err)
	}
}

// filter is the Jobs page's filter as it appears in the URL.
type filter struct {
	Queue, Policy, Reason, Error, Signature string
	Statuses                                []string
	From, To                                string // created_at bounds, RFC 3339 or 2006-01-02T15:04 (UTC)
	Order                                   string // oldest, newest, finished
	Cursor                                  string
	// At is the position of the page's first job in the listing (0 for
	// the first page), carried in the next page's URL for "51–100 of N".
	At int64
}

var statuses = []string{"pending", "running", "retrying", "blocked", "completed", "dead_lettered", "cancelled"}
var reasons = []string{"max_attempts", "non_retryable", "deadline", "lease_expiries"}

// parseFilter reads and checks the filter in q.
func parseFilter(q url.Values) (filter, ops.ListParams, error) {
	f := filter{Queue: strings.TrimSpace(q.Get("queue")), Policy: strings.TrimSpace(q.Get("policy")),
		Reason: q.Get("reason"), Error: q.Get("error"), Signature: q.Get("signature"),
		From: q.Get("from"), To: q.Get("to"), Order: q.Get("order"), Cursor: q.Get("cursor")}
	p := ops.ListParams{Queue: f.Queue, Policy: f.Policy, DeadLetterReason: f.Reason, ErrorContains: f.Error,
		Cursor: f.Cursor, Limit: 50}
	for _, s := range q["status"] {
		if s == "" {
			continue
		}
		if !slices.Contains(statuses, s) {
			return f, p, fmt.Errorf("unknown status %q: want one of %s", s, strings.Join(statuses, ", "))
		}
		f.Statuses = append(f.Statuses, s)
		p.Statuses = append(p.Statuses, client.Status(s))
	}
	if f.Reason != "" && !slices.Contains(reasons, f.Reason) {
		return f, p, fmt.Errorf("unknown dead-letter reason %q: want one of %s", f.Reason, strings.Join(reasons, ", "))
	}
	switch f.Order {
	case "", "newest":
		f.Order, p.Order = "newest", ops.NewestFirst
	case "oldest":
		p.Order = ops.OldestFirst
	case "finished":
		p.Order = ops.RecentlyFinishedFirst
	default:
		return f, p, fmt.Errorf("unknown order %q: want newest, oldest or finished", f.Order)
	}
	var err error
	if p.CreatedFrom, err = parseWhen("from", f.From); err != nil {
		return f, p, err
	}
	if p.CreatedTo, err = parseWhen("to", f.To); err != nil {
		return f, p, err
	}
	if f.Cursor != "" && strings.Trim(f.Cursor, "0123456789:") != "" {
		return f, p, fmt.Errorf("cursor %q: not a cursor", f.Cursor)
	}
	if s := q.Get("at"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return f, p, fmt.Errorf("at %q: not a position (a whole number from 0)", s)
		}
		f.At = n
	}
	return f, p, nil
}

func parseWhen(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: not a time (want 2006-01-02T15:04 in UTC, or RFC 3339)", name, s)
}

// values is the filter as URL parameters, without the cursor.
func (f filter) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("queue", f.Queue)
	set("policy", f.Policy)
	set("reason", f.Reason)
	set("error", f.Error)
	set("signature", f.Signature)
	set("from", f.From)
	set("to", f.To)
	if f.Order != "newest" {
		set("order", f.Order)
	}
	for _, s := range f.Statuses {
		v.Add("status", s)
	}
	return v
}

// filterChoices bounds the queues and policies a filter offers as
// choices: with more, the field is a text input with the first ones as
// suggestions, so that a page stays small with thousands of queues.
const filterChoices = 200

// countBound is how far the Jobs page counts the jobs its filter matches:
// "1–50 of 734", or "of more than 1,000" (a bounded count reads at most
// that many index entries).
const countBound = 1000

// choice is one option of a filter's select: the stored value (what the
// URL carries) and the words shown for it.
type choice struct {
	Value, Words string
	Selected     bool
}

// statusWords are the statuses as the filter offers them.
var statusWords = map[string]string{
	"pending":       "pending: waiting for its first run",
	"running":       "running: claimed by a worker",
	"retrying":      "retrying: failed, waiting to retry",
	"blocked":       "blocked: waiting for the jobs it depends on",
	"completed":     "completed",
	"dead_lettered": "dead-lettered: given up",
	"cancelled":     "cancelled",
}

// nameChoices are names as choices, the chosen one kept (and offered)
// when the list does not hold it.
func nameChoices(names []string, chosen string) []choice {
	out := make([]choice, 0, len(names)+1)
	found := chosen == ""
	for _, n := range names {
		out = append(out, choice{Value: n, Words: text(n), Selected: n == chosen})
		found = found || n == chosen
	}
	if !found {
		out = append(out, choice{Value: chosen, Words: text(chosen) + " (not in the list)", Selected: true})
	}
	return out
}

type jobsData struct {
	F        filter
	Jobs     []ops.JobDetail
	Next     string // URL of the next page
	First    string // URL of the first page (when on a later one)
	Query    string // the filter as a query string
	Replay   string // URL of the bulk replay confirmation for this filter
	Cancel   string // URL of the bulk cancel confirmation
	Queues   []choice
	Policies []choice
	Statuses []choice
	Reasons  []choice
	// QueuesMore and PoliciesMore: there are more than filterChoices, so
	// the field is a text input and the choices only suggestions.
	QueuesMore, PoliciesMore bool
	// MultiStatus: the URL chose several statuses (a multiple select).
	MultiStatus bool
	Choices     int
	// Shown is "1–50 of 734", "51–100 of more than 1,000" or "50 shown,
	// more on the next page" when no index serves a count of the filter.
	Shown string
	// Searched: the error-text filter stopped at ScanLimit jobs examined.
	Searched  bool
	ScanLimit int
	// Events are the chosen queue's newest pauses and resumes.
	Events []ops.QueueEvent
}

// countable: an index serves every filter set, so that a count bounded
// by countBound reads at most that many entries (a queue, statuses, a
// dead-letter reason). The effective policy and the error text are
// computed per row, and no index leads with created_at.
func (f filter) countable() bool {
	return f.Policy == "" && f.Error == "" && f.From == "" && f.To == ""
}

// shown is the page's place in the listing for people.
func shown(f filter, n int, next bool, total int64, more, counted bool) string {
	if n == 0 {
		return ""
	}
	if !counted {
		if next {
			return fmt.Sprintf("%s shown, more on the next page", thousands(int64(n)))
		}
		return fmt.Sprintf("%s shown, the last of this filter", thousands(int64(n)))
	}
	of := "of " + thousands(total)
	if more {
		of = "of more than " + thousands(total)
	}
	if f.Cursor != "" && f.At == 0 {
		return fmt.Sprintf("%s shown %s", thousands(int64(n)), of)
	}
	return fmt.Sprintf("%s–%s %s", thousands(f.At+1), thousands(f.At+int64(n)), of)
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request) {
	f, p, err := parseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "invalid filter: "+err.Error())
		return
	}
	if f.Signature != "" {
		h.fail(w, r, http.StatusBadRequest, "invalid filter: an error signature selects jobs for a bulk action only")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	p.WithoutPayloads = true // a page of jobs shows no payload: it reads none
	page, err := h.ops.List(ctx, p)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := jobsData{F: f, Jobs: page.Jobs, Searched: page.Searched, ScanLimit: ops.ErrorScanLimit, Choices: filterChoices,
		MultiStatus: len(f.Statuses) > 1}
	for _, s := range statuses {
		d.Statuses = append(d.Statuses, choice{Value: s, Words: statusWords[s], Selected: contains(f.Statuses, s)})
	}
	for _, s := range reasons {
		d.Reasons = append(d.Reasons, choice{Value: s, Words: reasonText(s), Selected: s == f.Reason})
	}
	var total int64
	var more, counted bool
	if f.countable() && len(page.Jobs) > 0 {
		if total, err = h.ops.CountJobs(ctx, p, countBound+1); err == nil {
			counted, more = true, total > countBound
			total = min(total, countBound)
		}
	}
	d.Shown = shown(f, len(page.Jobs), page.Next != "", total, more, counted)
	q := f.values()
	d.Query = q.Encode()
	q.Set("action", "replay")
	d.Replay = h.opts.Prefix + "/bulk?" + q.Encode()
	q.Set("action", "cancel")
	d.Cancel = h.opts.Prefix + "/bulk?" + q.Encode()
	if page.Next != "" {
		n := f.values()
		n.Set("cursor", page.Next)
		if f.Cursor == "" || f.At > 0 {
			n.Set("at", strconv.FormatInt(f.At+int64(len(page.Jobs)), 10))
		}
		d.Next = h.opts.Prefix + "/jobs?" + n.Encode()
	}
	if f.Cursor != "" {
		d.First = h.opts.Prefix + "/jobs?" + d.Query
	}
	// A text field keeps its value itself: its suggestions are only the
	// names read.
	if names, more, err := h.ops.QueueNames(ctx, filterChoices); err == nil && !more {
		d.Queues = nameChoices(names, f.Queue)
	} else {
		d.Queues, d.QueuesMore = nameChoices(names, ""), true
	}
	if ps, err := h.ops.Policies(ctx); err == nil {
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		if len(names) > filterChoices {
			d.Policies, d.PoliciesMore = nameChoices(names[:filterChoices], ""), true
		} else {
			d.Policies = nameChoices(names, f.Policy)
		}
	} else {
		d.PoliciesMore = true
	}
	if f.Queue != "" {
		// The queue's own history, on its view: who paused or resumed it.
		if evs, err := h.ops.QueueEvents(ctx, f.Queue, 10); err == nil {
			d.Events = evs
		}
	}
	h.render(w, r, http.StatusOK, "jobs", view{Title: "Jobs", Nav: "jobs", Data: d})
}

// payloadPreviewChars is the most of a payload the job page reads and
// shows: a payload of many megabytes neither travels to the UI nor sits in
// its memory.
const payloadPreviewChars = 65536

type jobData struct {
	J       ops.JobDetail
	Payload string
	// PayloadBytes is the whole payload's size when Payload is only its
	// first payloadPreviewChars characters; 0 when it is whole.
	PayloadBytes int64
	PreviewChars int64
	Policy       *policy.Policy
	Timeline     timeline
	CanRetry     bool         // replay allowed
	CanStop      bool         // cancel allowed
	Counted      int          // J.AttemptNumber()
	Schedule     *jobSchedule // the schedule that enqueued the job (nil: none)
	// Waiting: of a blocked job, how many parents failed and wait for an
	// operator (J.ParentsWaiting, 0 when none or not blocked).
	Waiting int
	// InGraph: the job has parents or children; the page links to its
	// graph.
	InGraph bool
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("job id %q: not a job id (a positive integer)", r.PathValue("id")))
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	j, pv, err := h.ops.Preview(ctx, id, payloadPreviewChars)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := jobData{J: j, Payload: pv.Text, Counted: j.AttemptNumber(), PreviewChars: payloadPreviewChars}
	if j.ParentsWaiting != nil {
		d.Waiting = *j.ParentsWaiting
	}
	if pv.Truncated {
		d.PayloadBytes = pv.Bytes
	} else {
		d.Payload = indentJSON([]byte(pv.Text))
	}
	ps, err := h.ops.Policies(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	for i := range ps {
		if ps[i].Name == j.EffectivePolicy {
			d.Policy = &ps[i]
		}
	}
	if j.Schedule != "" {
		d.Schedule = &jobSchedule{Name: j.Schedule}
		if j.ScheduleSlot != nil {
			d.Schedule.Slot = *j.ScheduleSlot
		}
	}
	if len(j.Parents) > 0 {
		d.InGraph = true
	} else {
		// A job without parents may have children: two jobs say so.
		g, err := h.ops.Graph(ctx, id, 2)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		d.InGraph = len(g.Jobs) > 1
	}
	d.Timeline = buildTimeline(j, d.Policy, time.Now())
	d.CanRetry = j.Status == client.StatusDeadLettered || j.Status == client.StatusCancelled
	d.CanStop = j.Status == client.StatusPending || j.Status == client.StatusRetrying || j.Status == client.StatusRunning ||
		j.Status == client.StatusBlocked
	h.render(w, r, http.StatusOK, "job", view{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: d})
}

func indentJSON(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	// Markup characters stay as they are: html/template escapes them when
	// the page is rendered, and the operator reads the payload as sent.
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(b)
	}
	return strings.TrimRight(out.String(), "\n")
}

type deadData struct {
	Queue   string
	Reasons []deadReason
	Groups  []deadGroup
	Queues  []string
	// Complete: the groups cover every dead letter; otherwise only the
	// Sampled most recent of Total (TotalExact false: more than Total).
	Complete   bool
	Sampled    int64
	Total      int64
	TotalExact bool
	// PairsCapped: there are more (queue, reason) pairs than Pairs; the
	// page counts and samples the first Pairs.
	PairsCapped bool
	Pairs       int
}

type deadReason struct {
	ops.DeadLetterReason
	Replay string // URL of the reason's bulk replay confirmation ("" without a reason: not a filter)
	List   string // URL of its jobs on the Jobs page
}

type deadGroup struct {
	ops.DeadLetterGroup
	Replay string // URL of the group's bulk replay confirmation
	List   string // URL of the group's jobs on the Jobs page (reason only: signatures are not a List filter)
}

// deadLetters groups the dead letters: exact counts per queue and reason,
// and the most recent Options.DeadLetterSample grouped by error signature
// (ops.Client.DeadLetters, docs/adr/0055-dead-letters-page-bounded.md). A
// group's replay acts on every dead letter of the group, sampled or not.
func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	queue := r.URL.Query().Get("queue")
	s, err := h.ops.DeadLetters(ctx, ops.DeadLetterOptions{Queue: queue, Sample: h.opts.DeadLetterSample})
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := deadData{Queue: queue, Complete: s.Complete, Sampled: s.Sampled, TotalExact: true,
		PairsCapped: s.PairsCapped, Pairs: ops.DefaultDeadLetterPairs}
	replay := func(f filter) string {
		v := f.values()
		v.Set("action", "replay")
		return h.opts.Prefix + "/bulk?" + v.Encode()
	}
	for _, x := range s.Reasons {
		d.Total += x.Count
		d.TotalExact = d.TotalExact && x.CountExact
		l := filter{Queue: x.Queue, Reason: x.Reason, Statuses: []string{"dead_lettered"}, Order: "newest"}
		row := deadReason{DeadLetterReason: x, List: h.opts.Prefix + "/jobs?" + l.values().Encode()}
		if x.Reason != "" {
			row.Replay = replay(l)
		}
		d.Reasons = append(d.Reasons, row)
	}
	for _, g := range s.Groups {
		l := filter{Queue: g.Queue, Reason: g.Reason, Statuses: []string{"dead_lettered"}, Order: "newest"}
		row := deadGroup{DeadLetterGroup: g, List: h.opts.Prefix + "/jobs?" + l.values().Encode()}
		// As for the reasons above: a filter cannot say "no reason" (an
		// empty one means any), so a group without one offers no replay
		// that would take other reasons' dead letters with it.
		if g.Reason != "" {
			f := l
			f.Signature = g.Signature
			row.Replay = replay(f)
		}
		d.Groups = append(d.Groups, row)
	}
	if qs, err := h.ops.Queues(ctx); err == nil {
		for _, q := range qs {
			d.Queues = append(d.Queues, q.Name)
		}
	}
	h.render(w, r, http.StatusOK, "deadletters", view{Title: "Dead letters", Nav: "dead", Data: d})
}

type policyRow struct {
	P      policy.Policy
	Queues []string
	Plot   schedulePlot
}

func (h *Handler) policies(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	ps, err := h.ops.Policies(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	qs, err := h.ops.Queues(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	var rows []policyRow
	for _, p := range ps {
		row := policyRow{P: p, Plot: buildSchedulePlot(p)}
		for _, q := range qs {
			if q.Policy == p.Name {
				row.Queues = append(row.Queues, q.Name)
			}
		}
		rows = append(rows, row)
	}
	h.render(w, r, http.StatusOK, "policies", view{Title: "Policies", Nav: "policies", Data: rows})
}
