package webui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// The retry timeline of the Job page: what happened (each attempt from
// its recorded start, how it ended, the wait the retry decision set after
// it, lease expiries, snoozes, an operator's replay or cancel) and what the
// policy has ahead (the next run, then each further attempt if every one
// fails, up to the attempt whose failure dead-letters the job), on one
// time axis. The decision and the schedule ahead are client/policy's
// (policy.Decide and policy.Timeline, the Go mirror of
// backoff._retry_decision that backoffctl schedule and the demo print),
// with the job id as the jitter seed and the job's lease expiries counted,
// as backoff.fail and backoff.reap decide.

const (
	tlWidth  = 1000
	tlHeight = 130
	tlPad    = 40
	tlLine   = 60
	// maxProjected bounds the attempts drawn ahead.
	maxProjected = 50
)

type tlPoint struct {
	X     float64
	Kind  string // created, failed, expired, snoozed, operator, completed, dead, cancelled, running, next, projected, last, deadline, now
	Label string // the attempt number above the dot
	Title string // the tooltip: what happened, as text
}

type tlSeg struct {
	X1, X2 float64
	Kind   string // wait, ahead, run (an attempt, from its start), stuck (an attempt whose lease expired)
}

type tlTick struct {
	X     float64
	Label string
}

type tlRow struct {
	At      time.Time
	Event   string
	Detail  string
	Planned bool
}

type timeline struct {
	Width, Height, Line int
	Points              []tlPoint
	Segs                []tlSeg
	Ticks               []tlTick
	Rows                []tlRow
	Note                string
	// Axis says what the tick labels are: UTC times, and their span.
	Axis string
	// LeaseExpiries is the job's lease expiries since its last replay (as
	// far as its history shows), against the policy's budget (0: none).
	LeaseExpiries, LeaseBudget int
}

type event struct {
	at     time.Time
	kind   string
	label  string
	detail string
	wait   time.Time // end of the wait that follows (zero: none)
	from   time.Time // start of the attempt that ends here (zero: unknown)
	stuck  bool      // the attempt's lease expired: the interval is stranded work
	ahead  bool
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown role"
	}
	return s
}

// eventNames are the table's words for the kinds of the axis.
var eventNames = map[string]string{
	"created": "created", "failed": "attempt failed", "expired": "lease expired", "snoozed": "snoozed",
	"operator": "operator", "completed": "completed", "dead": "dead-lettered", "cancelled": "cancelled",
	"running": "attempt running", "next": "next run", "projected": "ahead", "last": "last attempt",
	"deadline": "deadline", "now": "now",
}

func buildTimeline(j ops.JobDetail, p *policy.Policy, now time.Time) timeline {
	tl := timeline{Width: tlWidth, Height: tlHeight, Line: tlLine}
	if p != nil {
		tl.LeaseBudget = p.MaxLeaseExpiries
	}
	var evs []event
	evs = append(evs, event{at: j.CreatedAt, kind: "created", detail: "enqueued in " + j.Queue})
	errs := append([]client.AttemptError(nil), j.Errors...)
	// By time: an operator's entries (replayed, cancelled) repeat the
	// token of the attempt before them.
	sort.SliceStable(errs, func(a, b int) bool { return errs[a].At.Before(errs[b].At) })
	// Claims given back by a snooze are not in the history: they show as
	// uncounted claims (token - counted) growing between two entries.
	uncounted, known := 0, true
	expiries := 0 // lease expiries since the last replay, as reap counts them
	for i, e := range errs {
		if e.Kind == "replayed" || e.Kind == "cancelled" {
			detail := e.Kind + " by " + orUnknown(e.Role)
			if e.Error != "" {
				detail += ": " + e.Error
			}
			label := "R"
			if e.Kind == "cancelled" {
				label = "C"
			}
			ev := event{at: e.At, kind: "operator", label: label, detail: detail}
			if e.Started != nil {
				ev.from = *e.Started
			}
			evs = append(evs, ev)
			if e.Kind == "replayed" {
				expiries, uncounted, known = 0, e.Token, true
			}
			continue
		}
		if e.AttemptNumber > 0 {
			if u := e.Token - e.AttemptNumber; known && u > uncounted {
				prev := j.CreatedAt
				if i > 0 {
					prev = errs[i-1].At
				}
				at := prev.Add(e.At.Sub(prev) / 2)
				if e.Started != nil {
					at = *e.Started
				}
				evs = append(evs, event{at: at, kind: "snoozed", label: "S",
					detail: fmt.Sprintf("%d claim(s) snoozed before attempt %d (when is not recorded: drawn at the next claim)", u-uncounted, e.Token)})
			}
			uncounted, known = e.Token-e.AttemptNumber, true
		}
		kind := "failed"
		if e.Kind == "lease_expired" {
			kind = "expired"
			expiries++
		}
		ev := event{at: e.At, kind: kind, label: fmt.Sprint(e.Token),
			detail: fmt.Sprintf("attempt %d failed (%s): %s", e.Token, e.Kind, e.Error), stuck: e.Kind == "lease_expired"}
		if e.Started != nil {
			ev.from = *e.Started
			ev.detail += fmt.Sprintf(" (started %s, ran %s)", formatTime(*e.Started), formatDuration(e.At.Sub(*e.Started)))
		}
		if p != nil && e.AttemptNumber > 0 {
			wait, reason := p.Decide(policy.Failure{Attempt: e.AttemptNumber, MaxAttempts: j.MaxAttempts,
				LeaseExpiries: expiries, Elapsed: e.At.Sub(j.CreatedAt), Seed: j.ID})
			if reason == "" {
				ev.wait = e.At.Add(wait)
				ev.detail += "; the policy's wait: " + formatDuration(wait)
			}
		}
		evs = append(evs, ev)
	}
	// The latest wait ends when the job is due: a Retry-After or an
	// operator may have set it other than the policy.
	if j.Status == client.StatusRetrying {
		for i := len(evs) - 1; i > 0; i-- {
			if !evs[i].wait.IsZero() {
				evs[i].wait = j.RunAt
				break
			}
		}
	}
	if u := j.UncountedAttempts; known && u > uncounted && j.LastAttemptedAt != nil && j.Status != client.StatusRunning {
		evs = append(evs, event{at: *j.LastAttemptedAt, kind: "snoozed", label: "S",
			detail: fmt.Sprintf("%d claim(s) snoozed since the last entry of the history (drawn at the last claim)", u-uncounted)})
	}
	tl.LeaseExpiries = expiries
	switch j.Status {
	case client.StatusCompleted, client.StatusDeadLettered, client.StatusCancelled:
		at := j.CreatedAt
		if j.CompletedAt != nil {
			at = *j.CompletedAt
		}
		kind, detail := "completed", fmt.Sprintf("completed on attempt %d", j.Token)
		if j.Status == client.StatusDeadLettered {
			kind, detail = "dead", "dead-lettered: "+reasonText(j.DeadLetterReason)
		} else if j.Status == client.StatusCancelled {
			kind, detail = "cancelled", "cancelled"
		}
		ev := event{at: at, kind: kind, detail: detail}
		if j.Status == client.StatusCompleted && j.LastAttemptedAt != nil {
			ev.from = *j.LastAttemptedAt // the attempt that succeeded
		}
		evs = append(evs, ev)
		tl.Note = "The job is finished: nothing is scheduled ahead."
	case client.StatusRunning:
		at := j.RunAt
		if j.LastAttemptedAt != nil {
			at = *j.LastAttemptedAt
		}
		ev := event{at: at, kind: "running", label: fmt.Sprint(j.Token), wait: now,
			detail: fmt.Sprintf("attempt %d running on %s since %s, lease until %s", j.Token, j.LockedBy, formatTime(at), formatTimePtr(j.LeaseUntil))}
		tl.Note = "The job is running: its outcome decides what comes next."
		if j.LeaseUntil != nil && j.LeaseUntil.Before(now) {
			// Stranded: from the attempt's recorded start to now, with
			// the moment the lease ran out marked on it.
			ev.stuck = true
			ev.detail += fmt.Sprintf("; the lease expired %s ago: its worker stopped, and a reap retries the job", formatDuration(now.Sub(*j.LeaseUntil)))
			tl.Note = "The job's lease has expired: its worker stopped renewing it. A reap (backoffctl reap, a worker's reaper, or Reap on the overview) retries it."
			evs = append(evs, ev, event{at: *j.LeaseUntil, kind: "expired",
				detail: fmt.Sprintf("lease of attempt %d expired: nothing has reaped it yet", j.Token)})
		} else {
			evs = append(evs, ev)
		}
	default:
		evs = append(evs, project(j, p, expiries)...)
	}
	if p != nil && p.Deadline > 0 {
		evs = append(evs, event{at: j.CreatedAt.Add(p.Deadline), kind: "deadline", ahead: true,
			detail: fmt.Sprintf("deadline: created + %s; a failure whose retry would come after it dead-letters the job", formatDuration(p.Deadline))})
	}
	if tl.LeaseBudget > 0 {
		tl.Note += fmt.Sprintf(" Lease expiries: %d of the %d the policy allows (the %s dead-letters the job).", expiries, tl.LeaseBudget, ordinal(tl.LeaseBudget))
	}

	lo, hi := evs[0].at, evs[0].at
	for _, e := range evs {
		lo, hi = minTime(lo, e.at), maxTime(hi, e.at)
		if !e.wait.IsZero() {
			hi = maxTime(hi, e.wait)
		}
		if !e.from.IsZero() {
			lo = minTime(lo, e.from)
		}
	}
	if !now.Before(lo) && !now.After(hi) {
		evs = append(evs, event{at: now, kind: "now", detail: "now (when the page was made)"})
	}
	ax := newTLAxis(lo, hi, tlWidth)
	x := ax.x
	for i, e := range evs {
		if !e.from.IsZero() {
			kind := "run"
			if e.stuck {
				kind = "stuck"
			}
			tl.Segs = append(tl.Segs, tlSeg{X1: x(e.from), X2: x(e.at), Kind: kind})
		}
		if !e.wait.IsZero() {
			kind := "wait"
			if e.kind == "running" {
				kind = "run"
				if e.stuck {
					kind = "stuck"
				}
			}
			tl.Segs = append(tl.Segs, tlSeg{X1: x(e.at), X2: x(e.wait), Kind: kind})
		}
		if e.ahead && i > 0 && evs[i-1].ahead && e.kind != "deadline" {
			tl.Segs = append(tl.Segs, tlSeg{X1: x(evs[i-1].at), X2: x(e.at), Kind: "ahead"})
		}
		tl.Points = append(tl.Points, tlPoint{X: x(e.at), Kind: e.kind, Label: e.label,
			Title: formatTime(e.at) + " " + e.detail})
		if e.kind != "now" {
			tl.Rows = append(tl.Rows, tlRow{At: e.at, Event: eventNames[e.kind], Detail: e.detail, Planned: e.ahead})
		}
	}
	sort.SliceStable(tl.Points, func(a, b int) bool { return tl.Points[a].X < tl.Points[b].X })
	thinLabels(tl.Points)
	tl.Ticks, tl.Axis = ax.ticks(), ax.caption()
	sort.SliceStable(tl.Rows, func(a, b int) bool { return tl.Rows[a].At.Before(tl.Rows[b].At) })
	return tl
}

// tickLayout labels the axis as finely as its span needs.
// tlAxis places times from lo to hi on a plot width wide, inside tlPad
// on each side: the one axis of the job's retry timeline and of a
// schedule's fires ahead.
type tlAxis struct {
	lo, hi time.Time
	span   time.Duration // hi - lo, at least a second
	width  int
}

func newTLAxis(lo, hi time.Time, width int) tlAxis {
	span := hi.Sub(lo)
	if span <= 0 {
		span = time.Second
	}
	return tlAxis{lo: lo, hi: hi, span: span, width: width}
}

func (a tlAxis) x(t time.Time) float64 {
	return tlPad + float64(t.Sub(a.lo))/float64(a.span)*float64(a.width-2*tlPad)
}

// ticks are five labelled times, both ends included.
func (a tlAxis) ticks() []tlTick {
	layout := tickLayout(a.span)
	var ticks []tlTick
	for i := 0; i <= 4; i++ {
		t := a.lo.Add(time.Duration(float64(a.span) * float64(i) / 4))
		ticks = append(ticks, tlTick{X: a.x(t), Label: t.UTC().Format(layout)})
	}
	return ticks
}

// caption says what the axis spans, in UTC.
func (a tlAxis) caption() string {
	return fmt.Sprintf("time (UTC), %s to %s: %s in all", a.lo.UTC().Format("2006-01-02 15:04:05"),
		a.hi.UTC().Format("2006-01-02 15:04:05"), formatDuration(a.span))
}

// thinLabels clears the labels of points (in order of X) closer to the
// previous label than a label's width, which would overprint it: they stay
// in the tooltip and in the text beside the plot.
func thinLabels(points []tlPoint) {
	last := -1e9
	for i := range points {
		if points[i].Label == "" {
			continue
		}
		if points[i].X-last < 14 {
			points[i].Label = ""
			continue
		}
		last = points[i].X
	}
}

func tickLayout(span time.Duration) string {
	switch {
	case span < 10*time.Second:
		return "15:04:05.000"
	case span < 24*time.Hour:
		return "15:04:05"
	default:
		return "01-02 15:04"
	}
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// project lists what lies ahead of a pending or retrying job: its next
// run, then, if every attempt fails, each retry policy.Timeline gives, up
// to the attempt whose failure dead-letters the job (its attempt limit,
// the deadline or the lease-expiry budget spent).
func project(j ops.JobDetail, p *policy.Policy, expiries int) []event {
	next := j.AttemptNumber() + 1
	if p == nil {
		return []event{{at: j.RunAt, kind: "next", ahead: true, label: fmt.Sprint(next),
			detail: fmt.Sprintf("next run: attempt %d (its policy is unknown: nothing further is drawn)", next)}}
	}
	steps := policy.Timeline(*p, policy.TimelineStart{Seed: j.ID, Attempt: next, Elapsed: j.RunAt.Sub(j.CreatedAt),
		MaxAttempts: j.MaxAttempts, LeaseExpiries: expiries})
	var out []event
	for i, st := range steps {
		if i == maxProjected {
			break
		}
		at := j.CreatedAt.Add(st.Start)
		kind, detail := "projected", fmt.Sprintf("attempt %d if the ones before fail", st.Attempt)
		if i == 0 {
			kind, detail = "next", fmt.Sprintf("next run: attempt %d of %d", st.Attempt, j.EffectiveMaxAttempts)
		}
		if st.DeadLetter != "" {
			if i > 0 {
				kind = "last"
			}
			detail += "; if it fails the job is dead-lettered (" + reasonText(st.DeadLetter) + ")"
		} else {
			detail += "; if it fails, the next in " + formatDuration(st.Delay)
		}
		out = append(out, event{at: at, kind: kind, ahead: true, label: fmt.Sprint(st.Attempt), detail: detail})
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// schedulePlot is a policy's delays per attempt as bars: the delay before
// jitter, and the spread jitter puts around it (client/policy's
// BaseDelay and DelayRange, the math of `backoffctl schedule`).
type schedulePlot struct {
	Width, Height, Base int
	Bars                []plotBar
	MaxLabel            string
	Truncated           bool
	// Caption says in words what the chart shows: the waits, where the
	// job is dead-lettered and why.
	Caption string
}

type plotBar struct {
	X, W, Y, H  float64 // the bar
	Lo, Hi, CX  float64 // the spread: its y bounds and x
	Label       string  // attempt number
	Title       string
	DeadLetters bool
}

const maxPlotAttempts = 30

func buildSchedulePlot(p policy.Policy) schedulePlot {
	sp := schedulePlot{Width: 600, Height: 185, Base: 150}
	n := p.MaxAttempts
	if n > maxPlotAttempts {
		n, sp.Truncated = maxPlotAttempts, true
	}
	if n < 1 {
		n = 1
	}
	var top time.Duration
	for k := 1; k <= n; k++ {
		_, hi := p.DelayRange(k)
		top = max(top, hi, p.BaseDelay(k))
	}
	if top <= 0 {
		top = time.Second
	}
	sp.MaxLabel = formatDuration(top)
	slot := float64(sp.Width-60) / float64(n)
	y := func(d time.Duration) float64 { return float64(sp.Base) - float64(d)/float64(top)*float64(sp.Base-10) }
	for k := 1; k <= n; k++ {
		base := p.BaseDelay(k)
		lo, hi := p.DelayRange(k)
		b := plotBar{X: 50 + float64(k-1)*slot + slot*0.15, W: slot * 0.7, Y: y(base), Lo: y(lo), Hi: y(hi),
			Label: fmt.Sprint(k), DeadLetters: k >= p.MaxAttempts}
		b.H = float64(sp.Base) - b.Y
		b.CX = b.X + b.W/2
		if b.DeadLetters {
			b.Title = fmt.Sprintf("attempt %d fails: dead-lettered (max_attempts %d)", k, p.MaxAttempts)
			b.Y, b.H, b.Lo, b.Hi = float64(sp.Base)-4, 4, float64(sp.Base), float64(sp.Base)
		} else {
			b.Title = fmt.Sprintf("after attempt %d fails: wait %s (jitter: %s to %s)", k, formatDuration(base),
				formatDuration(lo), formatDuration(hi))
		}
		sp.Bars = append(sp.Bars, b)
	}
	sp.Caption = scheduleCaption(p)
	return sp
}

// scheduleCaption is a policy's chart in words, from policy.Timeline
// (before jitter: the seed 0 of a policy without jitter): the waits, and
// the attempt whose failure dead-letters a job that keeps failing.
func scheduleCaption(p policy.Policy) string {
	tl := policy.Timeline(p, policy.TimelineStart{})
	last := tl[len(tl)-1]
	var total time.Duration
	for _, st := range tl[:len(tl)-1] {
		total += st.Unjittered
	}
	var b strings.Builder
	switch n := len(tl) - 1; {
	case n == 0:
		b.WriteString("No retry: ")
	case n <= 6:
		b.WriteString("Waits ")
		for i, st := range tl[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatDuration(st.Unjittered))
		}
		fmt.Fprintf(&b, " after attempts 1 to %d (before jitter, %s in all); ", n, formatDuration(total))
	default:
		fmt.Fprintf(&b, "Waits from %s to %s after attempts 1 to %d (before jitter, %s in all); ",
			formatDuration(tl[0].Unjittered), formatDuration(tl[n-1].Unjittered), n, formatDuration(total))
	}
	fmt.Fprintf(&b, "a job whose attempt %d fails is dead-lettered (red bar): %s.", last.Attempt, reasonText(last.DeadLetter))
	if last.DeadLetter == policy.ReasonMaxAttempts && p.Deadline > 0 {
		fmt.Fprintf(&b, " Its deadline, %s after creation, can end it sooner.", formatDuration(p.Deadline))
	}
	if p.MaxLeaseExpiries > 0 {
		fmt.Fprintf(&b, " A job whose lease expires %d times (its worker crashing on it) is dead-lettered too.", p.MaxLeaseExpiries)
	}
	return b.String()
}

// sparkline is a queue's last hour on the overview: completed, failed
// attempts and dead letters per minute, as three polylines.
type sparkline struct {
	Completed, Failed, Dead string // "x,y x,y ..." points
	Title                   string
	failed, dead            int64 // the hour's sums
}

const (
	sparkW, sparkH = 120, 24
	sparkBuckets   = 60
)

func buildSparklines(acts []ops.Activity, now time.Time) map[string]sparkline {
	type series struct{ c, f, d [sparkBuckets]int64 }
	by := map[string]*series{}
	start := now.Truncate(time.Minute).Add(-(sparkBuckets - 1) * time.Minute)
	for _, a := range acts {
		i := int(a.Start.Sub(start) / time.Minute)
		if i < 0 || i >= sparkBuckets {
			continue
		}
		s := by[a.Queue]
		if s == nil {
			s = &series{}
			by[a.Queue] = s
		}
		s.c[i] += a.Completed
		s.f[i] += a.Failed
		s.d[i] += a.DeadLettered
	}
	out := map[string]sparkline{}
	for q, s := range by {
		var top, tc, tf, td int64 = 1, 0, 0, 0
		for i := range sparkBuckets {
			top = max(top, s.c[i], s.f[i], s.d[i])
			tc, tf, td = tc+s.c[i], tf+s.f[i], td+s.d[i]
		}
		line := func(v [sparkBuckets]int64) string {
			var b []byte
			for i := range sparkBuckets {
				x := float64(i) * float64(sparkW-1) / float64(sparkBuckets-1)
				y := float64(sparkH-1) - float64(v[i])/float64(top)*float64(sparkH-2)
				b = fmt.Appendf(b, "%.1f,%.1f ", x, y)
			}
			return string(b)
		}
		out[q] = sparkline{Completed: line(s.c), Failed: line(s.f), Dead: line(s.d), failed: tf, dead: td,
			Title: fmt.Sprintf("last hour, per minute (peak %d): %d completed, %d failed attempts, %d dead-lettered", top, tc, tf, td)}
	}
	return out
}
