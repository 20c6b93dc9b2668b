package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// captureHandler is a slog.Handler that keeps every record, at every level,
// with the attributes given to the logger (With) before its own.
type captureHandler struct {
	mu      *sync.Mutex
	records *[]capturedRecord
	attrs   []slog.Attr
}

type capturedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func newCaptureHandler() *captureHandler {
	return &captureHandler{mu: &sync.Mutex{}, records: &[]capturedRecord{}}
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := capturedRecord{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.Any()
	}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}

func (h *captureHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &captureHandler{mu: h.mu, records: h.records, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

// find returns the records with msg, at any level.
func (h *captureHandler) find(msg string) []capturedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []capturedRecord
	for _, r := range *h.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

func TestFailureSummaryCountsPerQueueAndInterval(t *testing.T) {
	t.Parallel()
	h := newCaptureHandler()
	log := slog.New(h)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newFailureSummary(t0)
	for range 12 {
		s.record("emails", StatusRetrying)
	}
	for range 3 {
		s.record("emails", StatusDeadLettered)
	}
	s.record("billing", StatusDeadLettered)
	s.flush(log, t0.Add(10*time.Second))
	s.flush(log, t0.Add(20*time.Second)) // nothing failed: no line

	got := h.find("attempts failed")
	require.Len(t, got, 2, "one line per queue with failures, none for a quiet interval")
	for _, r := range got {
		require.Equal(t, slog.LevelInfo, r.level)
		require.Equal(t, "10s", r.attrs["in_last"])
	}
	require.Equal(t, "billing", got[0].attrs["queue"], "by queue name")
	require.EqualValues(t, 1, got[0].attrs["failed"])
	require.EqualValues(t, 1, got[0].attrs["dead_lettered"])
	require.Equal(t, "emails", got[1].attrs["queue"])
	require.EqualValues(t, 15, got[1].attrs["failed"])
	require.EqualValues(t, 3, got[1].attrs["dead_lettered"])

	s.record("emails", StatusRetrying)
	s.flush(log, t0.Add(35*time.Second))
	got = h.find("attempts failed")
	require.Len(t, got, 3)
	require.Equal(t, "15s", got[2].attrs["in_last"], "counted from the last flush")
}

// A queue whose every job fails logs one Debug line per attempt and one
// Info summary (flushed at the latest when Run returns), and the start line
// carries the queues as a list.
func TestWorkerLogsFailedAttemptsAtDebugAndASummaryAtInfo(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	jobs := []NewJob{{Queue: "alpha", MaxAttempts: 1}, {Queue: "alpha", Payload: map[string]bool{"bad": true}}}
	for range 5 {
		jobs = append(jobs, NewJob{Queue: "alpha"})
	}
	_, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)

	h := newCaptureHandler()
	var handled atomic.Int64
	// The worker's clock stands still: the retries (a second away under
	// the default policy) never come due, however slowly the test runs.
	now := time.Now()
	fail := func(ctx context.Context, job *Job) error {
		defer handled.Add(1)
		var p struct{ Bad bool }
		_ = job.UnmarshalPayload(&p)
		if p.Bad {
			return Permanent(errors.New("bad input"))
		}
		return errors.New("downstream down")
	}
	w, err := NewWorker(pool, WorkerConfig{
		Queues: []QueueConfig{
			{Queue: "alpha", Handler: fail},
			{Queue: "beta", Handler: func(context.Context, *Job) error { return nil }},
		},
		ReapInterval: -1, PollInterval: 50 * time.Millisecond,
	}, WithLogger(slog.New(h)), WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	w.summaryEvery = time.Hour // only the summary Run flushes on its way out
	stop := startWorker(t, w)
	eventually(t, time.Minute, "seven attempts failed and settled", func() bool {
		return handled.Load() >= 7 && countStatus(t, pool, StatusRunning) == 0
	})
	stop()

	started := h.find("worker started")
	require.Len(t, started, 1)
	require.Equal(t, slog.LevelInfo, started[0].level)
	require.Equal(t, []string{"alpha", "beta"}, started[0].attrs["queues"])

	failed := h.find("job failed")
	require.Len(t, failed, 7, "one line per failed attempt")
	for _, r := range failed {
		require.Equal(t, slog.LevelDebug, r.level)
		require.Equal(t, "alpha", r.attrs["queue"])
	}
	summary := h.find("attempts failed")
	require.Len(t, summary, 1, "one summary for the interval")
	require.Equal(t, slog.LevelInfo, summary[0].level)
	require.Equal(t, "alpha", summary[0].attrs["queue"])
	require.EqualValues(t, 7, summary[0].attrs["failed"])
	require.EqualValues(t, 2, summary[0].attrs["dead_lettered"], "out of attempts, and Permanent")
	requireNoneRunning(t, pool)
}
