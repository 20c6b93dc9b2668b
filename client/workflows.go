package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// OnFailure is what a dependency does to its child when the parent ends
// without completing (dead-lettered or cancelled); docs/workflows.md.
type OnFailure string

const (
	// OnFailureCancel cancels the child, naming the parent (the default),
	// and in turn the child's own OnFailureCancel children.
	OnFailureCancel OnFailure = "cancel"
	// OnFailureRun counts the dependency as satisfied.
	OnFailureRun OnFailure = "run"
	// OnFailureWait keeps the child blocked until an operator unblocks it
	// or replays the parent.
	OnFailureWait OnFailure = "wait"
)

// Dependency is one parent of a GraphJob: a Ref of the same graph or the
// id of an existing job, with the policy for a parent that fails.
type Dependency struct {
	Ref       string
	JobID     int64
	OnFailure OnFailure
}

// After is a dependency on the job of the same graph named ref.
func After(ref string) Dependency { return Dependency{Ref: ref} }

// AfterJob is a dependency on an existing job.
func AfterJob(id int64) Dependency { return Dependency{JobID: id} }

// Or returns the dependency with the given policy for a failed parent.
func (d Dependency) Or(p OnFailure) Dependency { d.OnFailure = p; return d }

// GraphJob is one job of a Graph: a NewJob with a Ref, local to the graph,
// and the jobs it depends on.
type GraphJob struct {
	NewJob
	Ref       string
	DependsOn []Dependency
}

// Graph is a workflow to enqueue in one call (Client.EnqueueGraph): jobs
// across queues with dependencies among them and on existing jobs.
type Graph struct {
	jobs []GraphJob
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{} }

// Add adds a job named ref to the graph, in queue, that runs once every
// dependency has completed; opts are those of Client.Enqueue.
func (g *Graph) Add(ref, queue string, payload any, deps []Dependency, opts ...EnqueueOption) *Graph {
	j := GraphJob{NewJob: NewJob{Queue: queue, Payload: payload}, Ref: ref, DependsOn: deps}
	for _, o := range opts {
		o(&j.NewJob)
	}
	g.jobs = append(g.jobs, j)
	return g
}

// Jobs returns the jobs added so far.
func (g *Graph) Jobs() []GraphJob { return g.jobs }

// graphJSON is the document backoff.enqueue_graph takes.
func (g *Graph) graphJSON() ([]byte, error) {
	type edge struct {
		Ref       string    `json:"ref,omitempty"`
		Job       int64     `json:"job,omitempty"`
		OnFailure OnFailure `json:"on_failure,omitempty"`
	}
	type node struct {
		Ref         string          `json:"ref"`
		Queue       string          `json:"queue"`
		Payload     json.RawMessage `json:"payload"`
		RunAt       *time.Time      `json:"run_at,omitempty"`
		MaxAttempts int             `json:"max_attempts,omitempty"`
		Priority    int             `json:"priority,omitempty"`
		DedupeKey   string          `json:"dedupe_key,omitempty"`
		Policy      string          `json:"policy,omitempty"`
		DependsOn   []edge          `json:"depends_on,omitempty"`
	}
	nodes := make([]node, len(g.jobs))
	for i, j := range g.jobs {
		body, err := encodePayload(j.Payload)
		if err != nil {
			return nil, fmt.Errorf("job %q: %w", j.Ref, err)
		}
		n := node{Ref: j.Ref, Queue: j.Queue, Payload: json.RawMessage(body), MaxAttempts: j.MaxAttempts,
			Priority: j.Priority, DedupeKey: j.DedupeKey, Policy: j.Policy}
		if !j.RunAt.IsZero() {
			t := j.RunAt
			n.RunAt = &t
		}
		for _, d := range j.DependsOn {
			n.DependsOn = append(n.DependsOn, edge{Ref: d.Ref, Job: d.JobID, OnFailure: d.OnFailure})
		}
		nodes[i] = n
	}
	return json.Marshal(nodes)
}

// EnqueueGraph enqueues every job of g in one call and one transaction
// (backoff.enqueue_graph) and returns each job's id by its Ref. A job with
// a parent that has not completed is StatusBlocked until its last parent
// completes. Cycles, self-dependencies and unknown refs or ids are refused
// with ErrInvalidArgument, naming them.
func (c *Client) EnqueueGraph(ctx context.Context, g *Graph) (map[string]int64, error) {
	op := fmt.Sprintf("enqueue a graph of %d jobs", len(g.jobs))
	doc, err := g.graphJSON()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	call, args := c.fn("enqueue_graph", arg{"p_jobs", "jsonb", string(doc)})
	var ids map[string]int64
	err = c.retryWhileMoving(ctx, func() error {
		rows, err := c.db.Query(ctx, "SELECT ref, job_id FROM "+call, args...)
		if err != nil {
			return translate(op, 0, err)
		}
		ids = map[string]int64{}
		var ref string
		var id int64
		_, err = pgx.ForEachRow(rows, []any{&ref, &id}, func() error { ids[ref] = id; return nil })
		return translate(op, 0, err)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// CompleteWithOutput completes the running attempt token of a job, as
// Complete, and records output (JSON-encoded; json.RawMessage as it is) as
// its result, which JobOutput and its dependents' ParentOutputs read. An
// output over the queue's max_output_bytes is refused (ErrInvalidArgument)
// and the job stays running.
func (c *Client) CompleteWithOutput(ctx context.Context, jobID int64, token int, output any) (Job, error) {
	op := fmt.Sprintf("complete job %d (token %d)", jobID, token)
	body, err := encodePayload(output)
	if err != nil {
		return Job{}, fmt.Errorf("%s: output: %w", op, err)
	}
	call, args := c.fn("complete",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_attempt", "integer", token},
		arg{"p_output", "jsonb", body},
	)
	j, err := c.queryJob(ctx, "SELECT "+jobColumns+" FROM "+call, args)
	if err != nil {
		return Job{}, translate(op, jobID, err)
	}
	c.cfg.metrics.completed(ctx, j.Queue, 1)
	return j, nil
}

// JobOutput returns the output a job recorded when it completed, or nil
// when it recorded none or has not completed.
func (c *Client) JobOutput(ctx context.Context, jobID int64) (json.RawMessage, error) {
	call, args := sqlapi.Call("job_output", params([]arg{{"p_job_id", "bigint", jobID}})...)
	var out []byte
	if err := c.db.QueryRow(ctx, "SELECT "+call, args...).Scan(&out); err != nil {
		return nil, translate(fmt.Sprintf("read the output of job %d", jobID), jobID, err)
	}
	if out == nil {
		return nil, nil
	}
	return json.RawMessage(out), nil
}

// ParentOutput is one job a job depends on, as the child sees it.
type ParentOutput struct {
	ParentID  int64
	Queue     string // empty when the parent was pruned
	Status    Status // empty when the parent was pruned
	OnFailure OnFailure
	Output    json.RawMessage // nil when it recorded none
}

// ParentOutputs returns, in one call, the jobs jobID depends on with
// their status and output, in id order; none for a job without
// dependencies.
func (c *Client) ParentOutputs(ctx context.Context, jobID int64) ([]ParentOutput, error) {
	op := fmt.Sprintf("read the parents of job %d", jobID)
	call, args := sqlapi.Call("parent_outputs", params([]arg{{"p_job_id", "bigint", jobID}})...)
	rows, err := c.db.Query(ctx, "SELECT parent_id, coalesce(queue, ''), coalesce(status, ''), on_failure, output FROM "+call, args...)
	if err != nil {
		return nil, translate(op, jobID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParentOutput, error) {
		var p ParentOutput
		var status, onFailure string
		var output []byte
		err := r.Scan(&p.ParentID, &p.Queue, &status, &onFailure, &output)
		p.Status, p.OnFailure = Status(status), OnFailure(onFailure)
		if output != nil {
			p.Output = json.RawMessage(output)
		}
		return p, err
	})
	if err != nil {
		return nil, translate(op, jobID, err)
	}
	return out, nil
}

// HeartbeatProgress extends the lease as Heartbeat does and records
// progress (JSON-encoded, at most 8 KiB) as the job's progress, which
// backoff.job_detail and `backoffctl jobs show` display.
func (c *Client) HeartbeatProgress(ctx context.Context, jobID int64, token int, extend time.Duration, progress any) (time.Time, error) {
	op := fmt.Sprintf("heartbeat job %d (token %d)", jobID, token)
	body, err := encodePayload(progress)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: progress: %w", op, err)
	}
	call, args := c.fn("heartbeat",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_attempt", "integer", token},
		arg{"p_extend", "interval", nullDuration(extend)},
		arg{"p_progress", "jsonb", body},
	)
	var until time.Time
	if err := c.db.QueryRow(ctx, "SELECT "+call, args...).Scan(&until); err != nil {
		return time.Time{}, translate(op, jobID, err)
	}
	return until, nil
}

// outputSlot holds what a Worker's handler recorded: its output
// (SetOutput, read once the handler returned) and the progress not sent
// yet (ReportProgress, taken by the heartbeat's goroutine, hence the lock).
type outputSlot struct {
	body     json.RawMessage
	mu       sync.Mutex
	progress json.RawMessage
}

// takeProgress returns the progress reported since the last heartbeat, if
// any, and forgets it.
func (s *outputSlot) takeProgress() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.progress
	s.progress = nil
	return p
}

// maxProgressBytes is backoff.heartbeat's limit on a progress document.
const maxProgressBytes = 8192

// ReportProgress records v (JSON-encoded, at most 8 KiB) as the progress
// of the job whose Worker handler ctx belongs to; the next heartbeat sends
// it (every HeartbeatInterval, a third of the lease by default), and
// backoff.job_detail and `backoffctl jobs show` display it. A later call
// replaces a progress not sent yet.
func ReportProgress(ctx context.Context, v any) error {
	s, ok := ctx.Value(outputKey{}).(*outputSlot)
	if !ok {
		return errors.New("report progress: not in a Worker's handler")
	}
	body, err := encodePayload(v)
	if err != nil {
		return fmt.Errorf("report progress: %w", err)
	}
	if len(body) > maxProgressBytes {
		return fmt.Errorf("report progress: %w: %d bytes, over %d", ErrInvalidArgument, len(body), maxProgressBytes)
	}
	s.mu.Lock()
	s.progress = json.RawMessage(body)
	s.mu.Unlock()
	return nil
}

type outputKey struct{}

// errNoOutputSlot: SetOutput outside a Worker's handler.
var errNoOutputSlot = errors.New("set output: not in a Worker's handler")

// SetOutput records v (JSON-encoded) as the output of the job whose
// handler ctx belongs to: when the handler returns nil, the Worker
// completes the job with it (CompleteWithOutput). The handler's signature
// stays as it is; a later call replaces an earlier one.
func SetOutput(ctx context.Context, v any) error {
	s, ok := ctx.Value(outputKey{}).(*outputSlot)
	if !ok {
		return errNoOutputSlot
	}
	body, err := encodePayload(v)
	if err != nil {
		return fmt.Errorf("set output: %w", err)
	}
	s.body = json.RawMessage(body)
	return nil
}
