// Package workflow is an example of a workflow engine on pgbackoff: an
// orchestrator that decides which step runs next and asks the database
// whether it may run it now, instead of pulling "any due job" from a queue.
//
// Each step of a run is a job (enqueued together when the run starts, so the
// whole workflow is visible in backoff.jobs). The orchestrator acquires the
// current step by id with client.Acquire:
//
//   - the step is due: Acquire claims it exactly as a worker's claim would
//     (attempt counted, lease taken), the orchestrator runs it, and completes
//     it, or fails it so that the step's policy schedules the retry in the
//     database (or dead-letters it when it is out of attempts);
//   - the step is waiting for its retry: Acquire returns a
//     *client.NotReadyError with RetryAt and Token, and the orchestrator
//     comes back at RetryAt. Nothing sleeps in the database and no timer
//     lives in the orchestrator's memory: the row is the scheduler.
//
// Two orchestrators advancing the same run cannot both execute a step:
// acquire is one guarded UPDATE, and the loser gets client.ErrStaleAttempt
// (docs/adr/0010-acquire-by-id.md).
//
// Time is a parameter: with client.WithClock every call passes p_now, so
// the test drives the whole workflow, retries included, on a simulated
// clock without sleeping (workflow_test.go).
package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// Step is one step of a workflow.
type Step struct {
	Name string
	// Run does the step's work. An error fails this attempt: the step is
	// retried after its policy's delay, or dead-lettered when out of
	// attempts (client.Permanent dead-letters at once).
	Run func(ctx context.Context, job *client.Job) error
}

// Workflow is a named sequence of steps, run in order.
type Workflow struct {
	Name  string
	Steps []Step
}

// Run is one execution of a workflow: a job per step.
type Run struct {
	Workflow Workflow
	ID       string  // the run's id, part of each step's dedupe key
	JobIDs   []int64 // JobIDs[i] is step i's job
	next     int     // the step to acquire next
}

// Outcome says what one Advance did.
type Outcome int

// The outcomes of Advance.
const (
	Executed     Outcome = iota // the step ran and completed
	Failed                      // the step ran and failed; its retry is at RetryAt
	NotReady                    // the step is waiting for its retry at RetryAt
	Finished                    // every step has completed
	DeadLettered                // the step is out of attempts (or failed permanently): the run is stuck
)

var outcomeNames = [...]string{"executed", "failed", "not ready", "finished", "dead-lettered"}

func (o Outcome) String() string { return outcomeNames[o] }

// Progress is the result of one Advance.
type Progress struct {
	Outcome  Outcome
	Step     string    // the step it concerned ("" when Finished)
	JobID    int64     // its job
	Attempts int       // attempts the step has spent
	RetryAt  time.Time // when the step may run again (Failed, NotReady)
	Err      error     // the step's error (Failed, DeadLettered)
}

// Orchestrator runs workflows whose steps are jobs of one queue. The queue
// belongs to the orchestrator: run no client.Worker on it, or the worker
// would take steps out of order.
type Orchestrator struct {
	c     *client.Client
	queue string
}

// New returns an orchestrator on queue; the steps' retry policy is the
// queue's (backoff.toml's [queues.NAME], else the default).
func New(c *client.Client, queue string) *Orchestrator {
	return &Orchestrator{c: c, queue: queue}
}

// Start enqueues a job per step of wf for the run id and returns the run.
// Starting the same run id again returns the same jobs (dedupe keys) as
// long as they are not finished.
func (o *Orchestrator) Start(ctx context.Context, wf Workflow, id string) (*Run, error) {
	if len(wf.Steps) == 0 {
		return nil, fmt.Errorf("start workflow %q: no steps", wf.Name)
	}
	jobs := make([]client.NewJob, len(wf.Steps))
	for i, s := range wf.Steps {
		jobs[i] = client.NewJob{
			Queue:     o.queue,
			Payload:   map[string]any{"workflow": wf.Name, "run": id, "step": s.Name, "index": i},
			DedupeKey: fmt.Sprintf("%s/%s/%s", wf.Name, id, s.Name),
		}
	}
	ids, err := o.c.EnqueueMany(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("start workflow %q run %s: %w", wf.Name, id, err)
	}
	return &Run{Workflow: wf, ID: id, JobIDs: ids}, nil
}

// Advance tries the run's current step once: it runs it if it is due, or
// says when it will be. It never waits.
func (o *Orchestrator) Advance(ctx context.Context, run *Run) (Progress, error) {
	if run.next == len(run.JobIDs) {
		return Progress{Outcome: Finished}, nil
	}
	step, id := run.Workflow.Steps[run.next], run.JobIDs[run.next]
	job, err := o.c.Acquire(ctx, id, 0)
	var notReady *client.NotReadyError
	switch {
	case errors.As(err, &notReady):
		return Progress{Outcome: NotReady, Step: step.Name, JobID: id, Attempts: notReady.Token, RetryAt: notReady.RetryAt}, nil
	case errors.Is(err, client.ErrInvalidTransition):
		// Finished already: by us before a crash, or dead-lettered.
		j, gerr := o.c.Get(ctx, id)
		if gerr != nil {
			return Progress{}, gerr
		}
		if j.Status == client.StatusCompleted {
			run.next++
			return o.Advance(ctx, run)
		}
		return Progress{Outcome: DeadLettered, Step: step.Name, JobID: id, Attempts: j.Token, Err: errors.New(j.LastError)}, nil
	case err != nil:
		return Progress{}, fmt.Errorf("advance %s run %s: %w", run.Workflow.Name, run.ID, err)
	}

	if runErr := step.Run(ctx, &job); runErr != nil {
		var opts []client.FailOption
		if client.IsPermanent(runErr) {
			opts = append(opts, client.NonRetryable())
		}
		j, err := o.c.Fail(ctx, id, job.Token, runErr.Error(), opts...)
		if err != nil {
			return Progress{}, fmt.Errorf("advance %s run %s: %w", run.Workflow.Name, run.ID, err)
		}
		p := Progress{Outcome: Failed, Step: step.Name, JobID: id, Attempts: j.Token, RetryAt: j.RunAt, Err: runErr}
		if j.Status == client.StatusDeadLettered {
			p.Outcome, p.RetryAt = DeadLettered, time.Time{}
		}
		return p, nil
	}
	if _, err := o.c.Complete(ctx, id, job.Token); err != nil {
		return Progress{}, fmt.Errorf("advance %s run %s: %w", run.Workflow.Name, run.ID, err)
	}
	run.next++
	return Progress{Outcome: Executed, Step: step.Name, JobID: id, Attempts: job.Token}, nil
}

// Drive advances the run until it finishes or a step is dead-lettered,
// calling wait(ctx, until) whenever the current step is not due. In a
// program wait sleeps (or does other work) until then; in a test it moves a
// simulated clock. observe, when not nil, sees every Progress.
func (o *Orchestrator) Drive(ctx context.Context, run *Run, wait func(ctx context.Context, until time.Time) error, observe func(Progress)) error {
	for {
		p, err := o.Advance(ctx, run)
		if err != nil {
			return err
		}
		if observe != nil {
			observe(p)
		}
		switch p.Outcome {
		case Finished:
			return nil
		case DeadLettered:
			return fmt.Errorf("workflow %s run %s: step %s dead-lettered after %d attempt(s): %w",
				run.Workflow.Name, run.ID, p.Step, p.Attempts, p.Err)
		case Failed, NotReady:
			if err := wait(ctx, p.RetryAt); err != nil {
				return err
			}
		}
	}
}

// Sleep is the wait of a real program: it sleeps until until, or until ctx
// ends.
func Sleep(ctx context.Context, until time.Time) error {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
