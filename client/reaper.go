package client

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// reapLoop sends the running jobs whose lease expired (their worker died or
// lost the database) back through the retry decision, once at start (a
// worker restarted after a crash frees what its predecessor stranded
// without waiting an interval) and then every ReapInterval, and wakes the
// producers when it moved any. backoff.reap is safe to run from many
// workers at once. backoff.rotate runs after each reap.
func (w *Worker) reapLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.ReapInterval)
	defer t.Stop()
	rotate := true
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		n, err := w.c.Reap(ctx, 0)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Error("reap failed", "err", err)
		case n > 0:
			w.log.Info("reaped expired leases", "jobs", n)
			for _, p := range w.producers {
				signal(p.wake)
			}
		}
		if rotate {
			rotate = w.rotate(ctx)
		}
	}
}

// rotate runs backoff.rotate beside reap (docs/adr/0061): it keeps the
// segments that hold the live jobs small, so that an old snapshot cannot
// slow the claims. It reports whether to go on: a schema without rotate
// (before version 5) has nothing to rotate.
func (w *Worker) rotate(ctx context.Context) bool {
	rs, err := w.c.Rotate(ctx)
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
