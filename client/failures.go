package client

import (
	"log/slog"
	"sort"
	"sync"
	"time"
)

// failureSummaryInterval is how often a Worker logs, at Info, how many
// attempts failed per queue since the last summary. Each failed attempt has
// its own line at Debug: when a downstream is down, every job of a queue
// fails at once, and one line per attempt at Info would bury everything
// else (docs/adr/0065).
const failureSummaryInterval = 10 * time.Second

// failureSummary counts the failed attempts of each queue between two
// summaries. Handlers record into it concurrently; the Worker's summary
// loop, and Run once more on the way out, flush it.
type failureSummary struct {
	mu     sync.Mutex
	since  time.Time
	queues map[string]*queueFailures
}

type queueFailures struct {
	failed       int // attempts that failed: retried or dead-lettered
	deadLettered int
}

func newFailureSummary(now time.Time) *failureSummary {
	return &failureSummary{since: now, queues: map[string]*queueFailures{}}
}

// record counts one failed attempt of queue whose job is now status.
func (s *failureSummary) record(queue string, status Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[queue]
	if q == nil {
		q = &queueFailures{}
		s.queues[queue] = q
	}
	q.failed++
	if status == StatusDeadLettered {
		q.deadLettered++
	}
}

// flush logs one Info line per queue that had failures since the last
// flush, by queue name, and starts counting again from now. Nothing is
// logged for an interval without failures.
func (s *failureSummary) flush(log *slog.Logger, now time.Time) {
	s.mu.Lock()
	queues, since := s.queues, s.since
	s.queues, s.since = map[string]*queueFailures{}, now
	s.mu.Unlock()
	names := make([]string, 0, len(queues))
	for name := range queues {
		names = append(names, name)
	}
	sort.Strings(names)
	window := now.Sub(since).Round(time.Second)
	for _, name := range names {
		q := queues[name]
		log.Info("attempts failed", "queue", name, "failed", q.failed, "dead_lettered", q.deadLettered,
			"in_last", window.String())
	}
}
