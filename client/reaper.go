package client

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// maintain is the worker's maintenance loop: it reaps expired leases and
// rotates the job segments, fires due schedules and makes the idle queues'
// one look (look.go), one call at a time, so that all share one connection
// of the pool and no leader is needed (backoff.reap, backoff.rotate and
// backoff.fire_schedules are safe to run from many workers at once). Each
// runs once at start: a worker restarted after a crash frees what its
// predecessor stranded, and fires what came due while none ran, without
// waiting an interval.
//
// Every ReapInterval while jobs flow it reaps and rotates, as the segments
// need under load; idle, the look calls each only when it has work, and
// all three run once every idleMaintenanceInterval. Without the look (a
// schema before next_work, or a look that failed) each runs at its own
// interval.
func (w *Worker) maintain(ctx context.Context) {
	var reapC, fireC, lookC <-chan time.Time
	rotate := true // until the schema turns out to have no backoff.rotate
	reapAndRotate := func() {
		w.reap(ctx)
		if rotate {
			rotate = w.rotate(ctx)
		}
	}
	newTicker := w.newTicker
	if newTicker == nil {
		newTicker = realTicker
	}
	if w.cfg.ReapInterval > 0 {
		t := newTicker(w.cfg.ReapInterval)
		defer t.Stop()
		reapC = t.C
		reapAndRotate()
	}
	if w.cfg.ScheduleInterval > 0 {
		t := newTicker(w.cfg.ScheduleInterval)
		defer t.Stop()
		fireC = t.C
		w.fireSchedules(ctx)
	}
	{
		t := newTicker(w.lookEvery())
		defer t.Stop()
		lookC = t.C
	}
	lastFull := w.c.clock() // the last reap, rotate and fire not asked for by a look
	lastClaims := w.claims.Load()
	if w.stepped != nil {
		w.stepped() // the loop is ready for its first tick
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-reapC:
			if w.busy(&lastClaims) || !w.lookOn() || w.lookFailed {
				reapAndRotate()
				lastFull = w.c.clock()
			}
		case <-fireC:
			if !w.lookOn() || w.lookFailed {
				w.fireSchedules(ctx)
			}
		case <-lookC:
			if !w.lookOn() {
				break
			}
			w.lookAndDo(ctx, &rotate)
			if w.c.clock().Sub(lastFull) >= idleMaintenanceInterval {
				// Idle or not: the maintenance's timestamps stay fresh for
				// backoff.liveness, and rotate names this worker to it.
				if w.cfg.ReapInterval > 0 {
					reapAndRotate()
				}
				if w.cfg.ScheduleInterval > 0 {
					w.fireSchedules(ctx)
				}
				lastFull = w.c.clock()
			}
		}
		if w.stepped != nil {
			w.stepped()
		}
	}
}

// reap sends the running jobs whose lease expired (their worker died or
// lost the database) back through the retry decision, and wakes the
// producers when it moved any.
func (w *Worker) reap(ctx context.Context) {
	n, err := w.c.Reap(ctx, 0)
	switch {
	case err != nil && ctx.Err() == nil:
		w.log.Error("reap failed", "err", err)
	case n > 0:
		w.log.Info("reaped expired leases", "jobs", n)
		w.wakeProducers()
	}
}

// fireSchedules enqueues the jobs of the schedules due now. Nothing due
// costs one index probe in the database; a separate "next fire time"
// function would cost no less and add a round trip when something is due
// (docs/adr/0068).
// A failure is a warning: the next tick, or another worker, fires the same
// slots, since a slot stays due until a call handles it.
func (w *Worker) fireSchedules(ctx context.Context) {
	fired, err := w.c.FireSchedules(ctx, 0)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("fire schedules failed", "err", err)
		}
		return
	}
	for _, f := range fired {
		w.log.Debug("fired schedule", "schedule", f.Schedule, "slot", f.Slot, "job", f.JobID)
	}
	if len(fired) > 0 {
		// A slot is due at once; without LISTEN nothing else tells the
		// producers before their next poll.
		w.wakeProducers()
	}
}

func (w *Worker) wakeProducers() {
	for _, p := range w.producers {
		signal(p.wake)
	}
}

// rotate runs backoff.rotate beside reap (docs/adr/0061): it keeps the
// segments that hold the live jobs small, so that an old snapshot cannot
// slow the claims. It reports whether to go on: a schema without rotate
// (before version 5) has nothing to rotate.
func (w *Worker) rotate(ctx context.Context) bool {
	// Named: the worker counts as seen (backoff.liveness), busy or idle.
	rs, err := w.c.rotateAs(ctx, w.c.cfg.workerID)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42883":
		w.log.Info("the schema has no backoff.rotate: the job segments are not rotated (migrate to version 5)")
		return false
	case err != nil && ctx.Err() == nil:
		w.log.Error("rotate failed", "err", err)
	}
	for _, r := range rs {
		if r.SwitchedFrom != 0 || len(r.Truncated) > 0 || r.Note != "" {
			w.log.Debug("rotated the job segments", "segment", r.Segment, "switched_from", r.SwitchedFrom,
				"moved", r.Moved, "truncated", r.Truncated, "note", r.Note)
		}
	}
	return true
}
