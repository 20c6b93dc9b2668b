package client

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of every instrument below.
const meterName = "github.com/pgbackoff/pgbackoff/client"

// metrics holds the client's OpenTelemetry instruments. They are recorded
// where the event is known for sure: claims, completions and failures by
// the typed calls (so hand-written loops get them too), handler durations by
// the Worker, expired leases by Reap.
type metrics struct {
	jobsClaimed      metric.Int64Counter
	jobsCompleted    metric.Int64Counter
	jobsFailed       metric.Int64Counter
	jobsRetried      metric.Int64Counter
	jobsDeadLettered metric.Int64Counter
	leasesReaped     metric.Int64Counter
	leasesLost       metric.Int64Counter
	handlerDuration  metric.Float64Histogram
	backoffDelay     metric.Float64Histogram

	// attrs caches the attribute option of each (queue, outcome): building
	// an attribute set sorts and hashes its attributes, which cost a
	// Worker more CPU per job than the rest of its bookkeeping (profile in
	// docs/adr/0049), and the set of queues and outcomes is small.
	attrs sync.Map // attrKey -> *attrOpts
}

type attrKey struct{ queue, outcome string }

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter(meterName)
	var (
		out metrics
		err error
	)
	counter := func(dst *metric.Int64Counter, name, desc string) {
		if err == nil {
			*dst, err = m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{job}"))
		}
	}
	counter(&out.jobsClaimed, "pgbackoff.jobs.claimed", "Jobs claimed (Claim, Acquire).")
	counter(&out.jobsCompleted, "pgbackoff.jobs.completed", "Jobs completed.")
	counter(&out.jobsFailed, "pgbackoff.jobs.failed", "Failed attempts reported (retried or dead-lettered).")
	counter(&out.jobsRetried, "pgbackoff.jobs.retried", "Failed attempts scheduled for a retry.")
	counter(&out.jobsDeadLettered, "pgbackoff.jobs.dead_lettered", "Jobs dead-lettered by a failure.")
	counter(&out.leasesReaped, "pgbackoff.leases.expired", "Running jobs whose lease expired, moved by the reaper.")
	counter(&out.leasesLost, "pgbackoff.leases.lost", "Attempts a worker found it no longer owned (heartbeat or settle refused).")
	if err != nil {
		return nil, err
	}
	out.handlerDuration, err = m.Float64Histogram("pgbackoff.handler.duration",
		metric.WithDescription("Time a handler ran for one attempt."), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	out.backoffDelay, err = m.Float64Histogram("pgbackoff.backoff.delay",
		metric.WithDescription("Delay before the retry a failure scheduled."), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// attrOpts is one attribute set as the option lists Add and Record take,
// built once: passing a cached list allocates nothing per measurement.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// queueAttr is the attribute set queue=QUEUE.
func (m *metrics) queueAttr(queue string) *attrOpts {
	return m.attr(queue, "")
}

// attr is the attribute set of queue and (when not empty) outcome.
func (m *metrics) attr(queue, outcome string) *attrOpts {
	k := attrKey{queue, outcome}
	if o, ok := m.attrs.Load(k); ok {
		return o.(*attrOpts)
	}
	var o metric.MeasurementOption
	if outcome == "" {
		o = metric.WithAttributes(attribute.String("queue", queue))
	} else {
		o = metric.WithAttributes(attribute.String("queue", queue), attribute.String("outcome", outcome))
	}
	a, _ := m.attrs.LoadOrStore(k, &attrOpts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}})
	return a.(*attrOpts)
}

func (m *metrics) claimed(ctx context.Context, queue string, n int) {
	m.jobsClaimed.Add(ctx, int64(n), m.queueAttr(queue).add...)
}

// completed counts completions; CompleteMany knows no queue and records "".
func (m *metrics) completed(ctx context.Context, queue string, n int) {
	if n > 0 {
		m.jobsCompleted.Add(ctx, int64(n), m.queueAttr(queue).add...)
	}
}

// failed counts a failure by what the database decided for the job.
func (m *metrics) failed(ctx context.Context, j *Job) {
	q := m.queueAttr(j.Queue)
	m.jobsFailed.Add(ctx, 1, q.add...)
	switch j.Status {
	case StatusRetrying:
		m.jobsRetried.Add(ctx, 1, q.add...)
		if j.LastFailedAt != nil {
			m.backoffDelay.Record(ctx, j.RunAt.Sub(*j.LastFailedAt).Seconds(), q.rec...)
		}
	case StatusDeadLettered:
		m.jobsDeadLettered.Add(ctx, 1, q.add[0],
			metric.WithAttributes(attribute.String("reason", j.DeadLetterReason)))
	}
}

func (m *metrics) leasesExpired(ctx context.Context, n int) {
	if n > 0 {
		m.leasesReaped.Add(ctx, int64(n))
	}
}

func (m *metrics) leaseLost(ctx context.Context, queue string) {
	m.leasesLost.Add(ctx, 1, m.queueAttr(queue).add...)
}

func (m *metrics) handlerRan(ctx context.Context, queue, outcome string, d time.Duration) {
	m.handlerDuration.Record(ctx, d.Seconds(), m.attr(queue, outcome).rec...)
}
