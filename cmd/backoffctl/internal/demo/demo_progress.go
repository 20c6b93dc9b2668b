package demo

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/cli"
)

// progress is the demo's live display. On a terminal it redraws a small
// table in place with ANSI cursor movements (cursor up, erase line), which
// every terminal emulator in use understands; elsewhere (a pipe, a file, CI
// logs) it prints one plain line a second, which reads well in a log. Being
// two escape sequences, it needs no library (see docs/adr/0019).
type progress struct {
	w        io.Writer
	live     bool
	queues   []*demoQueue
	start    time.Time
	interval time.Duration // how often the demo polls the database

	every time.Duration // how often a plain line is printed
	last  time.Time     // when a plain line was last printed
	line  string        // the last plain line
	lines int           // lines of the last live frame, to move back over

	breakers map[string]*breakerSeen // per queue with a breaker, what the polls saw
	rated    map[string]bool         // queues with a rate limit
}

// breakerSeen is a queue's circuit breaker as the progress polls saw it:
// its last state and how often it was seen to open and to close again.
type breakerSeen struct {
	state          string
	opened, closed int
}

// observe follows each breaker from one poll to the next.
func (p *progress) observe(stats []cli.StatsRow) {
	for _, s := range stats {
		if s.Rate != nil {
			p.rated[s.Queue] = true
		}
		if s.Breaker == nil {
			continue
		}
		b := p.breakers[s.Queue]
		if b == nil {
			b = &breakerSeen{state: "closed"}
			p.breakers[s.Queue] = b
		}
		switch now := *s.Breaker; {
		case now == b.state:
		case b.state == "closed": // open, or half open between two polls
			b.opened++
			if q := p.queue(s.Queue); q != nil {
				q.breaker.opened(time.Now(), q.lastError())
			}
		case now == "closed":
			b.closed++
		case now == "open" && b.state == "half_open": // a failed probe
			b.opened++
		}
		b.state = *s.Breaker
	}
}

func (p *progress) queue(name string) *demoQueue {
	for _, q := range p.queues {
		if q.name == name {
			return q
		}
	}
	return nil
}

// breakerCell is a queue's breaker for the progress: "closed, opened 3×".
func (p *progress) breakerCell(queue string) string {
	b := p.breakers[queue]
	if b == nil {
		return "-"
	}
	if b.opened == 0 {
		return b.state
	}
	return fmt.Sprintf("%s, opened %d×", b.state, b.opened)
}

func newProgress(w io.Writer, mode string, queues []*demoQueue, start time.Time) *progress {
	live := mode == "live" || mode == "auto" && isTerminal(w)
	return &progress{w: w, live: live, queues: queues, start: start, interval: 100 * time.Millisecond, every: time.Second,
		breakers: map[string]*breakerSeen{}, rated: map[string]bool{}}
}

// isTerminal reports whether w is a character device (a terminal) and TERM
// does not say it cannot move the cursor.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return os.Getenv("TERM") != "dumb"
}

// draw shows stats: a new frame when live, a line a second when plain.
func (p *progress) draw(stats []cli.StatsRow) {
	p.observe(stats)
	if p.live {
		p.frame(stats)
		return
	}
	if time.Since(p.last) < p.every {
		return
	}
	p.last = time.Now()
	p.line = p.summary(stats)
	fmt.Fprintln(p.w, p.line)
}

// done shows the final state.
func (p *progress) done(stats []cli.StatsRow) {
	p.observe(stats)
	if p.live {
		p.frame(stats)
		return
	}
	if line := p.summary(stats); line != p.line {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) totals(stats []cli.StatsRow) (t cli.StatsRow, enqueued int64) {
	for _, s := range stats {
		t.Pending += s.Pending
		t.Running += s.Running
		t.Retrying += s.Retrying
		t.Completed += s.Completed
		t.DeadLettered += s.DeadLettered
		t.Retries += s.Retries
	}
	for _, q := range p.queues {
		enqueued += int64(q.enqueued)
	}
	return t, enqueued
}

// summary is the plain line: "  2.1s  settled 1860/3000 (62%)  pending …".
func (p *progress) summary(stats []cli.StatsRow) string {
	t, enq := p.totals(stats)
	done := t.Completed + t.DeadLettered
	line := fmt.Sprintf("%6s  settled %d/%d (%d%%)  pending %d  running %d  retrying %d  completed %d  dead-lettered %d  retries %d",
		time.Since(p.start).Round(100*time.Millisecond), done, enq, percent(done, enq),
		t.Pending, t.Running, t.Retrying, t.Completed, t.DeadLettered, t.Retries)
	for _, q := range p.queues {
		var controls []string
		if p.rated[q.name] {
			controls = append(controls, "rate limit refused "+claims(q.nRefused.Load()))
		}
		if _, ok := p.breakers[q.name]; ok {
			controls = append(controls, "breaker "+p.breakerCell(q.name))
		}
		if len(controls) > 0 {
			line += fmt.Sprintf("  %s: %s", q.name, strings.Join(controls, ", "))
		}
	}
	return line
}

// claims is "1 claim", "2 claims".
func claims(n int64) string {
	if n == 1 {
		return "1 claim"
	}
	return fmt.Sprintf("%d claims", n)
}

func percent(n, of int64) int64 {
	if of == 0 {
		return 100
	}
	return n * 100 / of
}

// frame redraws the live table in place.
func (p *progress) frame(stats []cli.StatsRow) {
	byQueue := map[string]cli.StatsRow{}
	for _, s := range stats {
		byQueue[s.Queue] = s
	}
	const format = "%-10s %8s %8s %9s %10s %14s %8s %8s  %s"
	line := func(name string, s cli.StatsRow, refused, breaker string) string {
		i := func(v int64) string { return fmt.Sprint(v) }
		return fmt.Sprintf(format, name, i(s.Pending), i(s.Running), i(s.Retrying), i(s.Completed), i(s.DeadLettered), i(s.Retries), refused, breaker)
	}
	lines := []string{fmt.Sprintf(format, "QUEUE", "PENDING", "RUNNING", "RETRYING", "COMPLETED", "DEAD_LETTERED", "RETRIES", "REFUSED", "BREAKER")}
	for _, q := range p.queues {
		refused := "-" // no rate limit
		if p.rated[q.name] {
			refused = fmt.Sprint(q.nRefused.Load())
		}
		lines = append(lines, line(q.name, byQueue[q.name], refused, p.breakerCell(q.name)))
	}
	t, enq := p.totals(stats)
	lines = append(lines, strings.TrimRight(line("total", t, "", ""), " "))
	done := t.Completed + t.DeadLettered
	const width = 30
	filled := int(percent(done, enq) * width / 100)
	lines = append(lines, fmt.Sprintf("[%s%s] %3d%%  %d/%d settled  %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), percent(done, enq), done, enq,
		time.Since(p.start).Round(100*time.Millisecond)))

	var b strings.Builder
	if p.lines > 0 {
		fmt.Fprintf(&b, "\033[%dA", p.lines) // back to the first line of the last frame
	}
	for _, l := range lines {
		b.WriteString("\r\033[2K") // erase the line, then write it again
		b.WriteString(l)
		b.WriteByte('\n')
	}
	p.lines = len(lines)
	_, _ = io.WriteString(p.w, b.String())
}
