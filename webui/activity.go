package webui

import (
	"context"
	"sync"
	"time"

	"github.com/pgbackoff/pgbackoff/client/ops"
)

// activitySettle is how long after its end a minute of the chart is still
// read again: a job's completed_at is its transaction's start, and the
// transaction may commit a little later.
const activitySettle = 30 * time.Second

// activityCache keeps the overview chart's minutes that have ended, so
// that a refresh asks the database only for the minutes since (a few
// thousand rows at most), not for the whole hour (docs/adr/0048). A minute
// that ended counts the same on every call: backoff.activity aligns its
// buckets to whole minutes.
type activityCache struct {
	mu     sync.Mutex
	until  time.Time      // the minutes before until are kept, complete
	kept   []ops.Activity // those minutes, within the last hour
	loaded bool
}

// get returns the last hour's activity per minute at now.
func (a *activityCache) get(ctx context.Context, c *ops.Client, now time.Time) ([]ops.Activity, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := now.Truncate(time.Minute).Add(-(sparkBuckets - 1) * time.Minute)
	from := start
	if a.loaded && a.until.After(start) {
		from = a.until
	}
	fresh, err := c.ActivitySince(ctx, from, time.Minute)
	if err != nil {
		return nil, err
	}
	settled := now.Add(-activitySettle).Truncate(time.Minute)
	var kept []ops.Activity
	for _, x := range a.kept {
		if !x.Start.Before(start) && x.Start.Before(from) {
			kept = append(kept, x)
		}
	}
	out := append([]ops.Activity(nil), kept...)
	for _, x := range fresh {
		out = append(out, x)
		if x.Start.Before(settled) {
			kept = append(kept, x)
		}
	}
	a.kept, a.loaded = kept, true
	if settled.After(from) {
		a.until = settled
	} else {
		a.until = from
	}
	return out, nil
}
