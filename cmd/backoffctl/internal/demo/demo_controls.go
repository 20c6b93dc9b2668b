package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/cli"
)

// heldMessage is what a Worker logs, at debug level, when a claim returned
// nothing and backoff.queue_state says when a claim can next return jobs
// (next_claim_at): it holds the queue until then (docs/adr/0047). Its
// "breaker" attribute is the breaker's state; when that is not "open",
// what held the queue is its rate limit: the bucket had no token left.
// (client/producer.go writes it; TestDemoEndToEnd fails if it changes.)
const heldMessage = "queue held by its controls"

// holdCounter is the Workers' logger: it counts, per queue, the claims the
// rate limit refused (demoQueue.nRefused), notes when the Worker found the
// breaker open (demoQueue.breaker), and drops everything else (the
// handlers' failures are the demo's point, not news).
type holdCounter struct{ queues map[string]*demoQueue }

func newHoldCounter(queues []*demoQueue) *slog.Logger {
	h := holdCounter{queues: map[string]*demoQueue{}}
	for _, q := range queues {
		h.queues[q.name] = q
	}
	return slog.New(h)
}

func (h holdCounter) Enabled(_ context.Context, level slog.Level) bool {
	return level == slog.LevelDebug
}

func (h holdCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message != heldMessage {
		return nil
	}
	var queue, breaker string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "queue":
			queue = a.Value.String()
		case "breaker":
			breaker = a.Value.String()
		}
		return true
	})
	q := h.queues[queue]
	switch {
	case q == nil:
	case breaker == "open":
		q.breaker.opened(r.Time, q.lastError())
	default:
		q.nRefused.Add(1)
	}
	return nil
}

func (h holdCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h holdCounter) WithGroup(string) slog.Handler      { return h }

// breakerLog is what the demo knows of a queue's breaker from the Worker
// and the handler, to the millisecond whatever the progress polls see: it
// opened when the Worker first found it open (its claim returned nothing
// and backoff.queue_state said "open"; or, if a poll saw it open or half
// open first, then), and closed when a call succeeded after that, since a
// success is what closes it (the half-open probe's; no other job is
// claimed while it is open or half open).
type breakerLog struct {
	mu       sync.Mutex
	open     bool
	episodes []breakerEpisode
}

// breakerEpisode is one opening of a queue's breaker: when, the error of
// the last retryable failure before it, and when it closed (zero: not yet).
// (Failed probes in between reopen it: the same episode.)
type breakerEpisode struct {
	opened time.Time
	cause  string
	closed time.Time
}

// opened notes that the breaker was found open at t: by the Worker, or by
// a progress poll (open or half open) that saw it closed before.
func (b *breakerLog) opened(t time.Time, cause string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		b.open = true
		b.episodes = append(b.episodes, breakerEpisode{opened: t, cause: cause})
	}
}

// succeeded notes a call that succeeded at t.
func (b *breakerLog) succeeded(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		b.open = false
		b.episodes[len(b.episodes)-1].closed = t
	}
}

func (b *breakerLog) list() []breakerEpisode {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.episodes)
}

// writeControls says what each queue's controls did: how often the rate
// limit refused a claim and the most calls its downstream got in a second,
// when its downstream was down, and when the breaker opened, why, and when
// it closed. Times are since the demo started, as in the progress lines.
func (d *demo) writeControls(ctx context.Context, w io.Writer, start time.Time) error {
	infos, err := d.ops.Queues(ctx)
	if err != nil {
		return fmt.Errorf("read the queues' controls: %w", err)
	}
	info := map[string]ops.QueueInfo{}
	for _, qi := range infos {
		info[qi.Name] = qi
	}
	since := func(t time.Time) string { return fmt.Sprintf("%.1fs", t.Sub(start).Seconds()) }
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== queue controls (times since the demo started) ==")
	for _, q := range d.queues {
		qi := info[q.name]
		if qi.Rate != nil {
			limit := strconv.FormatFloat(*qi.Rate, 'f', -1, 64) + "/s"
			if qi.Burst != nil {
				limit += fmt.Sprintf(" (burst %d)", *qi.Burst)
			}
			if refused := q.nRefused.Load(); refused > 0 {
				fmt.Fprintf(w, "%s rate limit %s: refused %s (no token left: the Worker waited for the next), so at most %d calls a second reached %s\n",
					q.name, limit, claims(refused), q.calls.busiest(), q.downstream)
			} else {
				fmt.Fprintf(w, "%s rate limit %s: refused no claim (the Worker claimed fewer jobs a second on this machine)\n", q.name, limit)
			}
		}
		if q.outage != nil {
			if from, until := q.outage.window(); !from.IsZero() {
				fmt.Fprintf(w, "%s downstream %s: down from %s to %s, answering 503 to every call (%d)\n",
					q.name, q.downstream, since(from), since(until), q.nDown.Load())
			}
		}
		if qi.BreakerFailures == nil {
			continue
		}
		fmt.Fprintf(w, "%s breaker (%d failures within %s open it for %s):", q.name, *qi.BreakerFailures,
			cli.FormatDelay(*qi.BreakerWindow), cli.FormatDelay(*qi.BreakerCooldown))
		episodes := q.breaker.list()
		if len(episodes) == 0 {
			fmt.Fprintln(w, " never opened")
			continue
		}
		fmt.Fprintln(w)
		for _, e := range episodes {
			fmt.Fprintf(w, "  %6s  opened: %d failed calls within %s, the last: %s\n", since(e.opened), *qi.BreakerFailures,
				cli.FormatDelay(*qi.BreakerWindow), e.cause)
			if e.closed.IsZero() {
				fmt.Fprintf(w, "  %6s  still open\n", "")
			} else {
				fmt.Fprintf(w, "  %6s  closed: a probe succeeded\n", since(e.closed))
			}
		}
	}
	return nil
}
