package webui

import (
	"sync"
	"time"
)

// healthEvery is how often the overview asks backoff.health for its
// vacuum warning. It reads pg_stat_activity and the job tables'
// statistics, which cost more than the overview's counts, and a snapshot
// worth a warning is minutes old (the threshold is 5 minutes): asked at
// every refresh of the table (5 s), it took a measurable share of the
// queue's throughput (docs/benchmarks.md, "ui-refresh").
const healthEvery = time.Minute

// healthCache keeps the last warning read, for healthEvery.
type healthCache struct {
	mu      sync.Mutex
	at      time.Time // when warning was read; zero: never
	warning string
}

// get returns the warning at now, calling read when the kept one is older
// than healthEvery. The warning is advice: when read fails (a login that
// may not ask, a schema without backoff.health), the kept one stays.
func (hc *healthCache) get(now time.Time, read func() (string, error)) string {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if !hc.at.IsZero() && now.Sub(hc.at) < healthEvery && !now.Before(hc.at) {
		return hc.warning
	}
	if w, err := read(); err == nil {
		hc.at, hc.warning = now, w
	}
	return hc.warning
}
