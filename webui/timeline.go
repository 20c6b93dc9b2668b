package webui

import (
	"fmt"
	"sort"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// The retry timeline of the Job page: what happened (each attempt that
// failed, the wait the policy set after it, how the job ended) and what
// the policy has ahead (the next run, then each further attempt if every
// one fails, up to the attempt limit and the deadline), on one time axis.
// Delays come from client/policy, the Go mirror of the SQL math, with the
// job id as the jitter seed, as backoff.fail computes them.

const (
	tlWidth  = 1000
	tlHeight = 120
	tlPad    = 40
	tlLine   = 60
	// maxProjected bounds the attempts drawn ahead.
	maxProjected = 50
)

type tlPoint struct {
	X     float64
	Kind  string // created, failed, completed, dead, cancelled, running, next, projected, last, deadline
	Label string // the attempt number above the dot
	Title string // the tooltip: what happened, as text
}

type tlSeg struct {
	X1, X2 float64
	Kind   string // wait, ahead, run (a failed attempt, from its start), stuck (an attempt whose lease expired)
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

func buildTimeline(j client.JobDetail, p *policy.Policy, now time.Time) timeline {
	tl := timeline{Width: tlWidth, Height: tlHeight, Line: tlLine}
	var evs []event
	evs = append(evs, event{at: j.CreatedAt, kind: "created", detail: "enqueued in " + j.Queue})
	errs := append([]client.AttemptError(nil), j.Errors...)
	// By time: an operator's entries (replayed, cancelled) repeat the
	// token of the attempt before them.
	sort.SliceStable(errs, func(a, b int) bool { return errs[a].At.Before(errs[b].At) })
	for _, e := range errs {
		if e.Kind == "replayed" || e.Kind == "cancelled" {
			detail := e.Kind + " by " + orUnknown(e.Role)
			if e.Error != "" {
				detail += ": " + e.Error
			}
			ev := event{at: e.At, kind: "operator", detail: detail}
			if e.Started != nil {
				ev.from = *e.Started
			}
			evs = append(evs, ev)
			continue
		}
		ev := event{at: e.At, kind: "failed", label: fmt.Sprint(e.Token),
			detail: fmt.Sprintf("attempt %d failed (%s): %s", e.Token, e.Kind, e.Error), stuck: e.Kind == "lease_expired"}
		if e.Started != nil {
			ev.from = *e.Started
			ev.detail += fmt.Sprintf(" (started %s, ran %s)", formatTime(*e.Started), formatDuration(e.At.Sub(*e.Started)))
		}
		if p != nil && e.AttemptNumber > 0 && (j.EffectiveMaxAttempts == 0 || e.AttemptNumber < j.EffectiveMaxAttempts) {
			ev.wait = e.At.Add(p.Delay(e.AttemptNumber, j.ID))
		}
		evs = append(evs, ev)
	}
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
		evs = append(evs, event{at: at, kind: kind, detail: detail})
		tl.Note = "The job is finished: nothing is scheduled ahead."
	case client.StatusRunning:
		at := j.RunAt
		if j.LastAttemptedAt != nil {
			at = *j.LastAttemptedAt
		}
		ev := event{at: at, kind: "running", label: fmt.Sprint(j.Token),
			detail: fmt.Sprintf("attempt %d running on %s, lease until %s", j.Token, j.LockedBy, formatTimePtr(j.LeaseUntil))}
		tl.Note = "The job is running: its outcome decides what comes next."
		if j.LeaseUntil != nil && j.LeaseUntil.Before(now) {
			// Stranded: drawn from the attempt's start to now.
			ev.wait, ev.stuck = now, true
			ev.detail += fmt.Sprintf("; the lease expired %s ago: its worker stopped, and a reap retries the job", formatDuration(now.Sub(*j.LeaseUntil)))
			tl.Note = "The job's lease has expired: its worker stopped renewing it. A reap (backoffctl reap, a worker's reaper, or Reap on the overview) retries it."
		}
		evs = append(evs, ev)
	default:
		evs = append(evs, project(j, p)...)
	}
	if p != nil && p.Deadline > 0 {
		evs = append(evs, event{at: j.CreatedAt.Add(p.Deadline), kind: "deadline", ahead: true,
			detail: fmt.Sprintf("deadline: created + %s; a failure after it dead-letters the job", p.Deadline)})
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
	span := hi.Sub(lo)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		return tlPad + float64(t.Sub(lo))/float64(span)*float64(tlWidth-2*tlPad)
	}
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
			if e.kind == "running" && e.stuck {
				kind = "stuck"
			}
			tl.Segs = append(tl.Segs, tlSeg{X1: x(e.at), X2: x(e.wait), Kind: kind})
		}
		if e.ahead && i > 0 && evs[i-1].ahead && e.kind != "deadline" {
			tl.Segs = append(tl.Segs, tlSeg{X1: x(evs[i-1].at), X2: x(e.at), Kind: "ahead"})
		}
		tl.Points = append(tl.Points, tlPoint{X: x(e.at), Kind: e.kind, Label: e.label,
			Title: formatTime(e.at) + " " + e.detail})
		tl.Rows = append(tl.Rows, tlRow{At: e.at, Event: e.kind, Detail: e.detail, Planned: e.ahead})
	}
	for i := 0; i <= 4; i++ {
		t := lo.Add(time.Duration(float64(span) * float64(i) / 4))
		tl.Ticks = append(tl.Ticks, tlTick{X: x(t), Label: t.UTC().Format("01-02 15:04:05")})
	}
	sort.SliceStable(tl.Rows, func(a, b int) bool { return tl.Rows[a].At.Before(tl.Rows[b].At) })
	return tl
}

// project lists what lies ahead of a pending or retrying job: its next
// run, then, if every attempt fails, each retry at the policy's delay up
// to the attempt limit (the last one dead-letters) or the deadline.
func project(j client.JobDetail, p *policy.Policy) []event {
	var out []event
	next := j.AttemptNumber() + 1
	limit := j.EffectiveMaxAttempts
	var deadline time.Time
	if p != nil && p.Deadline > 0 {
		deadline = j.CreatedAt.Add(p.Deadline)
	}
	t := j.RunAt
	for k := next; len(out) < maxProjected; k++ {
		kind, detail := "projected", fmt.Sprintf("attempt %d if the ones before fail", k)
		if k == next {
			kind, detail = "next", fmt.Sprintf("next run: attempt %d of %d", k, limit)
		}
		if limit > 0 && k >= limit {
			detail += "; if it fails the job is dead-lettered (max_attempts)"
			if k != next {
				kind = "last"
			}
		}
		if !deadline.IsZero() && t.After(deadline) {
			out = append(out, event{at: t, kind: "last", ahead: true, label: fmt.Sprint(k),
				detail: fmt.Sprintf("attempt %d would start after the deadline: the failure before it dead-letters the job", k)})
			break
		}
		out = append(out, event{at: t, kind: kind, ahead: true, label: fmt.Sprint(k), detail: detail})
		if p == nil || (limit > 0 && k >= limit) {
			break
		}
		t = t.Add(p.Delay(k, j.ID))
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
	return sp
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

func buildSparklines(acts []client.Activity, now time.Time) map[string]sparkline {
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
