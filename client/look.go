package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// An idle Worker's cost (docs/adr/0083). A producer whose claim found its
// queue drained (nothing due, no controls holding it) parks: it stops
// polling and waits for a notification, a freed slot or the Worker's one
// look. The maintenance loop makes that look once per PollInterval (or
// ScheduleInterval, the shorter) with backoff.next_work for all parked
// queues at once, wakes the producers whose queue has a job due, and calls
// fire_schedules, reap and rotate only when the look says they have work.
// While jobs flow, reap and rotate keep their ReapInterval cadence (rotate
// is what keeps the live segments small under a held snapshot); with
// nothing claimed since the last reap tick they run, beside fire_schedules,
// once every idleMaintenanceInterval, which still names the Worker to
// backoff.liveness within its minute and keeps the maintenance's
// timestamps fresh. So an idle Worker sends about one statement a second
// whatever the number of its queues, instead of two per queue.

// idleMaintenanceInterval is how often an idle Worker reaps, rotates and
// fires schedules when no look asked for it: under backoff.liveness's
// minute for the workers it sees, and well under its ten minutes for the
// maintenance.
const idleMaintenanceInterval = 30 * time.Second

// lookOn reports whether the Worker's look runs, so that producers may
// park: the maintenance loop runs and the schema has backoff.next_work.
func (w *Worker) lookOn() bool {
	return (w.cfg.ReapInterval > 0 || w.cfg.ScheduleInterval > 0) && !w.lookOff.Load()
}

// lookEvery is the look's cadence: PollInterval bounds how late a job
// starts, ScheduleInterval how late a slot fires, ReapInterval how late an
// expired lease is reaped.
func (w *Worker) lookEvery() time.Duration {
	d := w.cfg.PollInterval
	for _, e := range []time.Duration{w.cfg.ScheduleInterval, w.cfg.ReapInterval} {
		if e > 0 && e < d {
			d = e
		}
	}
	return d
}

// work is what one look found due at the time it was made.
type work struct {
	queues             []string // parked queues with a job to claim
	fire, reap, rotate bool
}

// look asks backoff.next_work about the parked queues. It reports ok false
// when the look failed; a schema without the function turns the look off
// for good (the producers then poll as before).
func (w *Worker) look(ctx context.Context) (work, bool) {
	var queues []string
	for _, p := range w.producers {
		if p.parked.Load() {
			queues = append(queues, p.cfg.Queue)
		}
	}
	if queues == nil {
		queues = []string{}
	}
	args := []arg{{"p_queues", "text[]", queues}}
	if w.notifier.listening() {
		// The look keeps the parked queues' wake-up registrations alive.
		args = append(args, arg{"p_worker", "text", w.c.cfg.workerID},
			arg{"p_ttl", "interval", w.notifier.registrationTTL()})
	}
	call, values := w.c.fn("next_work", args...)
	// Due is decided against the same time the look used: the client's
	// clock with WithClock, else the database's, so that a skew between
	// the two delays nothing.
	now := "$" + strconv.Itoa(len(values))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := w.c.db.Query(cctx, "SELECT kind, coalesce(queue, ''), coalesce(at <= coalesce("+now+
		"::timestamptz, statement_timestamp()), false) FROM "+call, values...)
	var found work
	if err == nil {
		for rows.Next() {
			var kind, queue string
			var due bool
			if err = rows.Scan(&kind, &queue, &due); err != nil {
				break
			}
			if !due {
				continue
			}
			switch kind {
			case "queue":
				found.queues = append(found.queues, queue)
			case "schedules":
				found.fire = true
			case "reap":
				found.reap = true
			case "rotate":
				found.rotate = true
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		w.lookFailed = false
		return found, true
	case errors.As(err, &pgErr) && pgErr.Code == "42883":
		w.log.Info("the schema has no backoff.next_work: idle queues poll on their own (migrate to version 5)")
		w.lookOff.Store(true)
	case ctx.Err() == nil:
		level := "error"
		if w.lookFailed {
			level = "debug"
		}
		err = translate(fmt.Sprintf("look for work in %d idle queues", len(queues)), 0, err)
		if level == "error" {
			w.log.Error("look for work failed; idle queues claim and schedules fire at every look until it works", "err", err)
		} else {
			w.log.Debug("look for work failed", "err", err)
		}
		w.lookFailed = true
	}
	return work{}, false
}

// lookAndDo makes one look and does what it found due; after a failed look
// every producer claims, and the maintenance loop fires, reaps and rotates
// at their own intervals until a look works again.
func (w *Worker) lookAndDo(ctx context.Context, rotate *bool) {
	found, ok := w.look(ctx)
	if !ok {
		w.wakeProducers()
		return
	}
	for _, q := range found.queues {
		for _, p := range w.producers {
			if p.cfg.Queue == q {
				signal(p.wake)
			}
		}
	}
	if found.fire && w.cfg.ScheduleInterval > 0 {
		w.fireSchedules(ctx)
	}
	if w.cfg.ReapInterval > 0 {
		if found.reap {
			w.reap(ctx)
		}
		if found.rotate && *rotate {
			*rotate = w.rotate(ctx)
		}
	}
}

// busy reports whether jobs flowed since the last call: a claim found
// jobs, or handlers run.
func (w *Worker) busy(lastClaims *int64) bool {
	n := w.claims.Load()
	moved := n != *lastClaims
	*lastClaims = n
	if moved {
		return true
	}
	for _, p := range w.producers {
		if p.inflight.Load() > 0 {
			return true
		}
	}
	return false
}

// ticker is a time.Ticker's channel and its Stop; tests drive their own.
type ticker struct {
	C    <-chan time.Time
	Stop func()
}

func realTicker(d time.Duration) ticker {
	t := time.NewTicker(d)
	return ticker{C: t.C, Stop: t.Stop}
}
