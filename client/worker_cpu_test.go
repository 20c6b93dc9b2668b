package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
)

// Tests of the Worker's CPU per job (profile in docs/adr/0049).

// A Worker records a handler duration per job: its attribute set is built
// once per queue and outcome, not per job (building one sorts and hashes
// the attributes, and cost a Worker more CPU per job than the rest of its
// bookkeeping; docs/adr/0049).
func TestMetricAttributesBuiltOncePerQueueAndOutcome(t *testing.T) {
	m, err := newMetrics(noop.NewMeterProvider())
	require.NoError(t, err)
	ctx := t.Context()
	m.handlerRan(ctx, "emails", "completed", time.Millisecond)
	require.Same(t, m.attr("emails", "completed"), m.attr("emails", "completed"))
	require.NotSame(t, m.attr("emails", "completed"), m.attr("emails", "failed"))
	require.NotSame(t, m.queueAttr("emails"), m.queueAttr("sms"))
	allocs := testing.AllocsPerRun(100, func() {
		m.handlerRan(ctx, "emails", "completed", time.Millisecond)
		m.completed(ctx, "emails", 3)
	})
	require.Zero(t, allocs)
}
