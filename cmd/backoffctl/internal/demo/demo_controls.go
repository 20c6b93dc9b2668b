package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
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
// rate limit refused (demoQueue.nRefused) and drops everything else (the
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
	if q := h.queues[queue]; q != nil && breaker != "open" {
		q.nRefused.Add(1)
	}
	return nil
}

func (h holdCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h holdCounter) WithGroup(string) slog.Handler      { return h }

// breakerEpisode is one opening of a queue's breaker as the progress polls
// saw it: when it was first seen open (since the demo started), the error
// of the last failure before that, how often a failed probe opened it again,
// and when it was seen closed (0: not yet).
type breakerEpisode struct {
	opened   time.Duration
	cause    string
	reopened int
	closed   time.Duration
}

// writeControls says what each queue's controls did: how often the rate
// limit refused a claim and the most calls its downstream got in a second,
// when its downstream was down, and when the breaker opened, why, and when
// it closed. Times are since the demo started, as in the progress lines.
func (d *demo) writeControls(ctx context.Context, w io.Writer, p *progress) error {
	infos, err := d.ops.Queues(ctx)
	if err != nil {
		return fmt.Errorf("read the queues' controls: %w", err)
	}
	info := map[string]ops.QueueInfo{}
	for _, qi := range infos {
		info[qi.Name] = qi
	}
	since := func(t time.Time) string { return seconds(t.Sub(p.start)) }
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
				fmt.Fprintf(w, "%s rate limit %s: refused %d claims (no token left: the Worker waited for the next), so at most %d calls a second reached %s\n",
					q.name, limit, refused, q.calls.busiest(), q.downstream)
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
		b := p.breakers[q.name]
		fmt.Fprintf(w, "%s breaker (%d failures within %s open it for %s): ", q.name, *qi.BreakerFailures,
			cli.FormatDelay(*qi.BreakerWindow), cli.FormatDelay(*qi.BreakerCooldown))
		if b == nil || len(b.episodes) == 0 {
			fmt.Fprintln(w, "never opened")
			continue
		}
		fmt.Fprintf(w, "opened %d× (as the progress saw it, polling every %s)\n", b.opened, p.interval)
		for _, e := range b.episodes {
			fmt.Fprintf(w, "  %6s  opened: %d failed calls within %s, the last: %s\n", seconds(e.opened), *qi.BreakerFailures,
				cli.FormatDelay(*qi.BreakerWindow), e.cause)
			switch {
			case e.closed == 0:
				fmt.Fprintf(w, "  %6s  still open\n", "")
			case e.reopened > 0:
				fmt.Fprintf(w, "  %6s  closed: a probe succeeded (%d failed probe(s) had opened it again)\n", seconds(e.closed), e.reopened)
			default:
				fmt.Fprintf(w, "  %6s  closed: a probe succeeded\n", seconds(e.closed))
			}
		}
	}
	return nil
}

// seconds is a time since the demo started: "4.2s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}
