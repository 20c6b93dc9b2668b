package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/policy"
	"github.com/pgbackoff/pgbackoff/examples/workflow"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// fakeClock is the simulated time every client call passes as p_now.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// wait is Drive's wait on the simulated clock: jump to the retry time.
func (c *fakeClock) wait(_ context.Context, until time.Time) error {
	if until.After(c.now) {
		c.now = until
	}
	return nil
}

// orderWorkflow is fetch → transform → publish, where transform fails on
// its first two attempts (a flaky upstream) and succeeds on the third. Each
// step records the simulated time it ran at.
func orderWorkflow(clock *fakeClock, ran map[string][]time.Time) workflow.Workflow {
	step := func(name string, failures int) workflow.Step {
		return workflow.Step{Name: name, Run: func(_ context.Context, job *client.Job) error {
			ran[name] = append(ran[name], clock.Now())
			if job.Token <= failures {
				return fmt.Errorf("%s: upstream answered 503 (attempt %d)", name, job.AttemptNumber())
			}
			return nil
		}}
	}
	return workflow.Workflow{Name: "order", Steps: []workflow.Step{step("fetch", 0), step("transform", 2), step("publish", 0)}}
}

func newOrchestrator(t *testing.T, clock *fakeClock) (*workflow.Orchestrator, *client.Client) {
	ctx := context.Background()
	c, err := client.New(ctx, testdb.New(t), client.WithClock(clock.Now), client.WithWorkerID("orchestrator-1"))
	require.NoError(t, err)
	// The queue has no mapping: its steps use the 'default' policy (1s
	// doubling, ±10% jitter seeded by the job id, five attempts).
	return workflow.New(c, "order_steps"), c
}

// Step by step: the failing step is retried exactly at the time its policy
// scheduled, asking earlier says "not ready until RetryAt" with the attempt
// count, and no one sleeps.
func TestWorkflowRetriesAStepAtItsScheduledTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: t0}
	o, c := newOrchestrator(t, clock)
	ran := map[string][]time.Time{}
	run, err := o.Start(ctx, orderWorkflow(clock, ran), "A-1")
	require.NoError(t, err)
	require.Len(t, run.JobIDs, 3)
	transformID := run.JobIDs[1]
	pol := policy.Profiles()["default"]

	p, err := o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.Executed, p.Outcome)
	require.Equal(t, "fetch", p.Step)

	// transform, attempt 1: fails; the retry is at now + the policy's
	// delay for attempt 1, jitter seeded by the job id (Go's mirror of the
	// SQL math agrees to the microsecond).
	p, err = o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, p.Outcome)
	require.Equal(t, 1, p.Attempts)
	retry1 := t0.Add(pol.Delay(1, transformID))
	require.True(t, retry1.Equal(p.RetryAt), "retry at %s, want %s", p.RetryAt, retry1)

	// Asking again now, or a microsecond before the retry: not ready, with
	// when and how many attempts so far.
	for _, at := range []time.Time{t0, retry1.Add(-time.Microsecond)} {
		clock.now = at
		p, err = o.Advance(ctx, run)
		require.NoError(t, err)
		require.Equal(t, workflow.NotReady, p.Outcome, "at %s", at)
		require.Equal(t, "transform", p.Step)
		require.Equal(t, 1, p.Attempts)
		require.True(t, retry1.Equal(p.RetryAt), "not ready until %s, want %s", p.RetryAt, retry1)
	}

	// At the scheduled time: attempt 2, fails again.
	clock.now = retry1
	p, err = o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, p.Outcome)
	require.Equal(t, 2, p.Attempts)
	retry2 := retry1.Add(pol.Delay(2, transformID))
	require.True(t, retry2.Equal(p.RetryAt), "retry at %s, want %s", p.RetryAt, retry2)
	require.Greater(t, pol.Delay(2, transformID), pol.Delay(1, transformID), "backoff grows")

	// At the second retry time: attempt 3 succeeds, then publish runs.
	clock.now = retry2
	p, err = o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.Executed, p.Outcome)
	require.Equal(t, 3, p.Attempts)
	p, err = o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.Executed, p.Outcome)
	require.Equal(t, "publish", p.Step)
	p, err = o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.Finished, p.Outcome)

	// Each step ran when it should have, transform exactly at its retries.
	require.Equal(t, []time.Time{t0}, ran["fetch"])
	require.Equal(t, []time.Time{t0, retry1, retry2}, ran["transform"])
	require.Equal(t, []time.Time{retry2}, ran["publish"])

	// The database kept the evidence: both failures, at the simulated times.
	job, err := c.Get(ctx, transformID)
	require.NoError(t, err)
	require.Equal(t, client.StatusCompleted, job.Status)
	require.Len(t, job.Errors, 2)
	require.True(t, t0.Equal(job.Errors[0].At))
	require.True(t, retry1.Equal(job.Errors[1].At))
	require.Equal(t, "transform: upstream answered 503 (attempt 2)", job.Errors[1].Error)
}

// Drive runs the same workflow to the end, its wait moving the simulated
// clock to each RetryAt: the whole run, with two backoffs of over a second,
// takes no wall-clock time to speak of.
func TestWorkflowDriveOnASimulatedClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: t0}
	o, _ := newOrchestrator(t, clock)
	ran := map[string][]time.Time{}
	run, err := o.Start(ctx, orderWorkflow(clock, ran), "A-2")
	require.NoError(t, err)
	var seen []string
	start := time.Now()
	err = o.Drive(ctx, run, clock.wait, func(p workflow.Progress) {
		seen = append(seen, fmt.Sprintf("%s %s %d", p.Step, p.Outcome, p.Attempts))
	})
	require.NoError(t, err)
	require.Equal(t, []string{
		"fetch executed 1",
		"transform failed 1",
		"transform failed 2",
		"transform executed 3",
		"publish executed 1",
		" finished 0",
	}, seen)
	require.Len(t, ran["transform"], 3)
	simulated := clock.now.Sub(t0)
	require.Greater(t, simulated, 2*time.Second, "two backoffs: about 1s then 2s")
	require.Less(t, time.Since(start), simulated, "faster than the time it simulated: nothing slept")
}

// A step that fails permanently dead-letters and stops the run; Drive
// reports it.
func TestWorkflowStopsOnADeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)}
	o, c := newOrchestrator(t, clock)
	wf := workflow.Workflow{Name: "refund", Steps: []workflow.Step{
		{Name: "validate", Run: func(context.Context, *client.Job) error {
			return client.Permanent(errors.New("refund amount exceeds the charge"))
		}},
		{Name: "pay", Run: func(context.Context, *client.Job) error { t.Fatal("must not run"); return nil }},
	}}
	run, err := o.Start(ctx, wf, "R-1")
	require.NoError(t, err)
	err = o.Drive(ctx, run, clock.wait, nil)
	require.ErrorContains(t, err, "step validate dead-lettered after 1 attempt(s)")
	job, err := c.Get(ctx, run.JobIDs[0])
	require.NoError(t, err)
	require.Equal(t, client.StatusDeadLettered, job.Status)
	require.Equal(t, "non_retryable", job.DeadLetterReason)
	// Advancing again reads the dead letter instead of running anything.
	p, err := o.Advance(ctx, run)
	require.NoError(t, err)
	require.Equal(t, workflow.DeadLettered, p.Outcome)
}

// Two orchestrators on the same run: a due step is executed once; the one
// that loses the race is told the step is taken.
func TestWorkflowTwoOrchestratorsOneExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)}
	pool := testdb.New(t)
	c1, err := client.New(ctx, pool, client.WithClock(clock.Now), client.WithWorkerID("orchestrator-1"))
	require.NoError(t, err)
	c2, err := client.New(ctx, pool, client.WithClock(clock.Now), client.WithWorkerID("orchestrator-2"))
	require.NoError(t, err)
	o1, o2 := workflow.New(c1, "order_steps"), workflow.New(c2, "order_steps")
	runs := 0
	var second error
	wf := workflow.Workflow{Name: "once", Steps: []workflow.Step{{Name: "charge", Run: func(ctx context.Context, _ *client.Job) error {
		runs++
		// While the first orchestrator holds the step, the second tries.
		run2, err := o2.Start(ctx, workflow.Workflow{Name: "once", Steps: []workflow.Step{{Name: "charge"}}}, "O-1")
		require.NoError(t, err)
		_, second = o2.Advance(ctx, run2)
		return nil
	}}}}
	run1, err := o1.Start(ctx, wf, "O-1")
	require.NoError(t, err)
	p, err := o1.Advance(ctx, run1)
	require.NoError(t, err)
	require.Equal(t, workflow.Executed, p.Outcome)
	require.Equal(t, 1, runs)
	require.ErrorIs(t, second, client.ErrStaleAttempt, "the step is running under the other orchestrator")
}
