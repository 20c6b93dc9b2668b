package client

import (
	"context"
	"time"
)

// reapLoop sends the running jobs whose lease expired (their worker died or
// lost the database) back through the retry decision, once at start (a
// worker restarted after a crash frees what its predecessor stranded
// without waiting an interval) and then every ReapInterval, and wakes the
// producers when it moved any. backoff.reap is safe to run from many
// workers at once.
func (w *Worker) reapLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.ReapInterval)
	defer t.Stop()
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
	}
}
