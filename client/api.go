package client

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// arg is one named argument of a SQL function call (sqlapi.Arg): naming the
// parameters (p_queue => $1) keeps calls correct when a function gains
// optional parameters, and the cast fixes the parameter's type for the
// planner.
type arg struct {
	name  string
	cast  string
	value any
}

func params(args []arg) []sqlapi.Param {
	ps := make([]sqlapi.Param, len(args))
	for i, a := range args {
		ps[i] = sqlapi.Arg(a.name, a.cast, a.value)
	}
	return ps
}

// fn builds the call "backoff.<name>(p_a => $1::t, ..., p_now => $n)" and
// its arguments, with p_now the clock's time with WithClock, else NULL
// (sqlapi.CallAt).
func (c *Client) fn(name string, args ...arg) (string, []any) {
	return sqlapi.CallAt(name, c.nowArg(), params(args)...)
}

// The NULLs of the optional arguments: a zero value passes NULL, the
// function's default.
var (
	nullDuration = sqlapi.NullDuration
	nullInt      = sqlapi.NullInt
	nullString   = sqlapi.NullString
	nullTime     = sqlapi.NullTime
)

// NewJob describes a job to enqueue.
type NewJob struct {
	Queue       string
	Payload     any       // marshalled with encoding/json; []byte and json.RawMessage are sent as they are
	RunAt       time.Time // zero: now
	MaxAttempts int       // 0: the policy's
	Priority    int       // higher runs first, -32768 to 32767; default 0
	DedupeKey   string    // "": none. A key matching an unfinished job of the queue returns that job's id
	Policy      string    // "": the queue's policy (backoff.queues, else 'default'); else a name in backoff.policies
}

// The range of a job's priority (backoff.enqueue refuses others).
const (
	MinPriority = -32768
	MaxPriority = 32767
)

// EnqueueOption sets an optional field of a job for Enqueue.
type EnqueueOption func(*NewJob)

// RunAt schedules the job's first run (default: now).
func RunAt(t time.Time) EnqueueOption { return func(j *NewJob) { j.RunAt = t } }

// MaxAttempts overrides the policy's max_attempts for this job.
func MaxAttempts(n int) EnqueueOption { return func(j *NewJob) { j.MaxAttempts = n } }

// Priority sets the job's priority, -32768 to 32767 (MinPriority to
// MaxPriority; outside, the enqueue fails with ErrInvalidArgument): higher
// is claimed first.
func Priority(p int) EnqueueOption { return func(j *NewJob) { j.Priority = p } }

// DedupeKey makes the enqueue idempotent: while a job of the queue with the
// same key is unfinished, Enqueue returns its id instead of adding another.
func DedupeKey(key string) EnqueueOption { return func(j *NewJob) { j.DedupeKey = key } }

// UsePolicy gives this job the named retry policy (a row of
// backoff.policies) instead of its queue's: the job records it at enqueue
// and its delays, max_attempts and lease follow it. An unknown name is
// refused with ErrInvalidArgument.
func UsePolicy(name string) EnqueueOption { return func(j *NewJob) { j.Policy = name } }

func encodePayload(p any) (string, error) {
	switch v := p.(type) {
	case nil:
		return "{}", nil
	case json.RawMessage:
		return string(v), nil
	case []byte:
		return string(v), nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode payload: %w", err)
	}
	return string(b), nil
}

// Enqueue adds a job to queue and returns its id (the existing job's id
// when a DedupeKey matches an unfinished job). Run it on a transaction
// (c.With(tx)) to enqueue atomically with the caller's own writes. On a
// pool, an enqueue refused because the queue is moving to another shard
// (ErrQueueMoving) is tried again for up to 10 s (see docs/sharding.md);
// the same holds for EnqueueMany and EnqueueGraph.
func (c *Client) Enqueue(ctx context.Context, queue string, payload any, opts ...EnqueueOption) (int64, error) {
	j := NewJob{Queue: queue, Payload: payload}
	for _, o := range opts {
		o(&j)
	}
	op := fmt.Sprintf("enqueue job in %q", queue)
	body, err := encodePayload(j.Payload)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	call, args := c.fn("enqueue",
		arg{"p_queue", "text", j.Queue},
		arg{"p_payload", "jsonb", body},
		arg{"p_run_at", "timestamptz", nullTime(j.RunAt)},
		arg{"p_max_attempts", "integer", nullInt(j.MaxAttempts)},
		arg{"p_priority", "integer", j.Priority},
		arg{"p_dedupe_key", "text", nullString(j.DedupeKey)},
		arg{"p_policy", "text", nullString(j.Policy)},
	)
	var id int64
	err = c.retryWhileMoving(ctx, func() error {
		if err := c.db.QueryRow(ctx, "SELECT "+call, args...).Scan(&id); err != nil {
			return translate(op, 0, err)
		}
		return nil
	})
	return id, err
}

// enqueueManySQL enqueues a batch in one statement through the bulk form of
// backoff.enqueue (arrays, ids returned in input order), which inserts a
// batch without dedupe keys with one set-based INSERT
// (docs/adr/0016-set-based-bulk-enqueue.md).
const enqueueManySQL = `SELECT id FROM backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[], ` +
	`p_run_ats => $3::timestamptz[], p_max_attempts => $4::integer[], p_priorities => $5::integer[], ` +
	`p_dedupe_keys => $6::text[], p_policies => $7::text[], p_now => $8::timestamptz) AS t(id)`

// EnqueueMany adds jobs in one statement and one round trip (the bulk form
// of backoff.enqueue, which gives every job exactly the single-job
// semantics, dedupe included) and returns their ids in input order. It is
// atomic: on error no job is added.
func (c *Client) EnqueueMany(ctx context.Context, jobs []NewJob) ([]int64, error) {
	op := fmt.Sprintf("enqueue %d jobs", len(jobs))
	if len(jobs) == 0 {
		return nil, nil
	}
	// A column no job sets stays nil and is sent as a NULL array, which the
	// server checks and reads at no cost per job.
	var (
		n        = len(jobs)
		queues   = make([]string, n)
		payloads = make([]string, n)
		runAts   []*time.Time
		maxAtt   []*int32
		prios    []int32
		dedupes  []*string
		policies []*string
	)
	for i, j := range jobs {
		body, err := encodePayload(j.Payload)
		if err != nil {
			return nil, fmt.Errorf("%s: job %d: %w", op, i, err)
		}
		// Out of int32 is refused, as Enqueue's encoding refuses it, never
		// wrapped into another priority or attempt limit.
		if j.Priority < math.MinInt32 || j.Priority > math.MaxInt32 {
			return nil, fmt.Errorf("%s: job %d: %w: priority %d is outside the integer range", op, i, ErrInvalidArgument, j.Priority)
		}
		if j.MaxAttempts < math.MinInt32 || j.MaxAttempts > math.MaxInt32 {
			return nil, fmt.Errorf("%s: job %d: %w: max attempts %d is outside the integer range", op, i, ErrInvalidArgument, j.MaxAttempts)
		}
		queues[i], payloads[i] = j.Queue, body
		if j.Priority != 0 {
			if prios == nil {
				prios = make([]int32, n)
			}
			prios[i] = int32(j.Priority)
		}
		if !j.RunAt.IsZero() {
			setColumn(&runAts, n, i, j.RunAt)
		}
		if j.MaxAttempts != 0 {
			setColumn(&maxAtt, n, i, int32(j.MaxAttempts))
		}
		if j.DedupeKey != "" {
			setColumn(&dedupes, n, i, j.DedupeKey)
		}
		if j.Policy != "" {
			setColumn(&policies, n, i, j.Policy)
		}
	}
	var ids []int64
	err := c.retryWhileMoving(ctx, func() error {
		rows, err := c.db.Query(ctx, enqueueManySQL, queues, payloads, runAts, maxAtt, prios, dedupes, policies, c.nowArg())
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		return translate(op, 0, err)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// setColumn sets element i of an optional column of n jobs, made on first use.
func setColumn[T any](col *[]*T, n, i int, v T) {
	if *col == nil {
		*col = make([]*T, n)
	}
	(*col)[i] = &v
}

// Claim takes up to limit due jobs of queue for this client's worker id:
// each comes back running, with its attempt counted and a lease of lease
// (0: the policy's lease). Higher priority first, then earliest run_at.
func (c *Client) Claim(ctx context.Context, queue string, limit int, lease time.Duration) ([]Job, error) {
	op := fmt.Sprintf("claim jobs in %q", queue)
	call, args := c.fn("claim",
		arg{"p_queue", "text", queue},
		arg{"p_worker", "text", c.cfg.workerID},
		arg{"p_limit", "integer", limit},
		arg{"p_lease", "interval", nullDuration(lease)},
	)
	jobs, err := c.queryJobs(ctx, "SELECT "+jobColumns+" FROM "+call, args)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	if len(jobs) > 0 {
		c.cfg.metrics.claimed(ctx, queue, len(jobs))
	}
	return jobs, nil
}

// Acquire claims one specific job if it is due, as Claim would. A job not
// due yet gives a *NotReadyError (errors.Is ErrNotReady) holding its RetryAt
// and Token; a running job ErrStaleAttempt, a finished one
// ErrInvalidTransition, an unknown id ErrJobNotFound.
func (c *Client) Acquire(ctx context.Context, jobID int64, lease time.Duration) (Job, error) {
	op := fmt.Sprintf("acquire job %d", jobID)
	call, args := c.fn("acquire",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_worker", "text", c.cfg.workerID},
		arg{"p_lease", "interval", nullDuration(lease)},
	)
	j, err := c.queryJob(ctx, "SELECT "+jobColumns+" FROM "+call, args)
	if err != nil {
		return Job{}, translate(op, jobID, err)
	}
	c.cfg.metrics.claimed(ctx, j.Queue, 1)
	return j, nil
}

// Complete marks the running attempt of a job completed. token is the
// Job.Token it was claimed with.
func (c *Client) Complete(ctx context.Context, jobID int64, token int) (Job, error) {
	op := fmt.Sprintf("complete job %d (token %d)", jobID, token)
	call, args := c.fn("complete",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_attempt", "integer", token},
	)
	j, err := c.queryJob(ctx, "SELECT "+jobColumns+" FROM "+call, args)
	if err != nil {
		return Job{}, translate(op, jobID, err)
	}
	c.cfg.metrics.completed(ctx, j.Queue, 1)
	return j, nil
}

// CompleteMany completes, in one statement, each job still running under
// its given token (jobIDs[i] with tokens[i], each a Job.Token) and
// returns the ids it completed; an entry whose fencing fails is left alone
// and not returned.
func (c *Client) CompleteMany(ctx context.Context, jobIDs []int64, tokens []int) ([]int64, error) {
	if len(jobIDs) != len(tokens) {
		return nil, fmt.Errorf("complete %d jobs: %w: %d ids but %d tokens", len(jobIDs), ErrInvalidArgument, len(jobIDs), len(tokens))
	}
	if len(jobIDs) == 0 {
		return nil, nil
	}
	done, err := completeBatch(ctx, c, jobIDs, tokens, nil)
	if err != nil {
		return nil, err
	}
	c.cfg.metrics.completed(ctx, "", len(done))
	return done, nil
}

// FailOption refines how Fail settles a job.
type FailOption func(*failParams)

type failParams struct {
	retryIn      time.Duration
	hasRetryIn   bool
	nonRetryable bool
}

// RetryIn asks for the next attempt after d instead of the policy's
// delay (an HTTP Retry-After, say); the database clamps it to the policy's
// max.
func RetryIn(d time.Duration) FailOption {
	return func(p *failParams) { p.retryIn, p.hasRetryIn = d, true }
}

// NonRetryable dead-letters the job now (reason non_retryable).
func NonRetryable() FailOption { return func(p *failParams) { p.nonRetryable = true } }

// Fail reports a failed attempt. The database decides, in one guarded
// update, whether the job is retried (status retrying, run_at set by the
// policy or RetryIn) or dead-lettered; the returned job says which. token
// is the Job.Token the attempt was claimed with.
func (c *Client) Fail(ctx context.Context, jobID int64, token int, errMsg string, opts ...FailOption) (Job, error) {
	var p failParams
	for _, o := range opts {
		o(&p)
	}
	op := fmt.Sprintf("fail job %d (token %d)", jobID, token)
	var retryIn any
	if p.hasRetryIn {
		retryIn = p.retryIn
	}
	call, args := c.fn("fail",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_attempt", "integer", token},
		arg{"p_error", "text", CleanErrorText(errMsg)},
		arg{"p_retry_in", "interval", retryIn},
		arg{"p_retryable", "boolean", !p.nonRetryable},
	)
	j, err := c.queryJob(ctx, "SELECT "+jobColumns+" FROM "+call, args)
	if err != nil {
		return Job{}, translate(op, jobID, err)
	}
	c.cfg.metrics.failed(ctx, &j)
	return j, nil
}

// Heartbeat extends the lease of a running attempt by extend (0: the
// policy's lease) from now and returns the new lease_until. ErrStaleAttempt
// means the lease was lost: stop working on the job. token is the
// Job.Token the attempt was claimed with.
func (c *Client) Heartbeat(ctx context.Context, jobID int64, token int, extend time.Duration) (time.Time, error) {
	op := fmt.Sprintf("heartbeat job %d (token %d)", jobID, token)
	call, args := c.fn("heartbeat",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_attempt", "integer", token},
		arg{"p_extend", "interval", nullDuration(extend)},
	)
	var until time.Time
	if err := c.db.QueryRow(ctx, "SELECT "+call, args...).Scan(&until); err != nil {
		return time.Time{}, translate(op, jobID, err)
	}
	return until, nil
}

// Snooze puts a running job back to pending, due after delay, without
// spending an attempt: AttemptNumber() goes back by one, while Token
// stays, so the next claim gets a new token and a repeated Snooze with this
// one is refused (ErrStaleAttempt) instead of snoozing that claim.
func (c *Client) Snooze(ctx context.Context, jobID int64, token int, delay time.Duration) (Job, error) {
	op := fmt.Sprintf("snooze job %d (token %d)", jobID, token)
	call, args := c.fn("snooze",
		arg{"p_job_id", "bigint", jobID},
		arg{"p_attempt", "integer", token},
		arg{"p_delay", "interval", delay},
	)
	j, err := c.queryJob(ctx, "SELECT "+jobColumns+" FROM "+call, args)
	if err != nil {
		return Job{}, translate(op, jobID, err)
	}
	return j, nil
}

// Reap sends up to limit (0: the function's default) running jobs whose
// lease expired through the same retry-or-dead-letter decision as Fail, and
// returns how many it moved. Safe to run from many workers at once.
func (c *Client) Reap(ctx context.Context, limit int) (int, error) {
	op := "reap expired leases"
	args := []arg{}
	if limit > 0 {
		args = append(args, arg{"p_limit", "integer", limit})
	}
	call, values := c.fn("reap", args...)
	var n int32
	if err := c.db.QueryRow(ctx, "SELECT "+call, values...).Scan(&n); err != nil {
		return 0, translate(op, 0, err)
	}
	c.cfg.metrics.leasesExpired(ctx, int(n))
	return int(n), nil
}

// Rotation is what one call of backoff.rotate did on one database (one row
// per shard through a router): the live jobs' segments (docs/adr/0061).
type Rotation struct {
	// Segment is the current segment after the call, the one enqueue
	// inserts into.
	Segment int
	// SwitchedFrom is the segment that was current before, when the call
	// made the next one current; 0 when it did not.
	SwitchedFrom int
	// Moved counts the rows moved out of segments that are not current.
	Moved int64
	// Truncated lists the segments emptied by TRUNCATE.
	Truncated []int
	// Note says why a segment was not switched or not truncated, or is "".
	Note string
}

// Rotate maintains the segments the live jobs are stored in: it makes the
// next segment current when the current one has taken enough jobs, moves
// the rows left behind, and truncates a segment that holds none. A Worker
// calls it with every reap; call it yourself, about once a second, where no
// Worker runs and pg_cron does not (backoffctl cron install).
//
// Rotate truncates only at READ COMMITTED (docs/adr/0078), the level the
// client's calls run at over a pool or a connection (docs/adr/0080); in a
// transaction of yours it runs at that transaction's level.
func (c *Client) Rotate(ctx context.Context) ([]Rotation, error) {
	return c.rotateAs(ctx, "")
}

// rotateAs is Rotate naming worker (when not "") as the caller, so that
// backoff.liveness counts it among the workers seen: the Worker's
// maintenance loop passes its WorkerID, busy or idle (docs/adr/0079).
func (c *Client) rotateAs(ctx context.Context, worker string) ([]Rotation, error) {
	out, err := c.rotate(ctx, worker)
	if err != nil {
		return nil, translate("rotate the job segments", 0, err)
	}
	return out, nil
}

func (c *Client) rotate(ctx context.Context, worker string) ([]Rotation, error) {
	args := []arg{}
	if worker != "" {
		args = append(args, arg{"p_worker", "text", worker})
	}
	call, values := c.fn("rotate", args...)
	rows, err := c.db.Query(ctx, "SELECT current_segment, coalesce(switched_from, 0), moved, truncated, coalesce(note, '') FROM "+call, values...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Rotation
	for rows.Next() {
		var r Rotation
		var seg, from int16
		var truncated []int16
		if err := rows.Scan(&seg, &from, &r.Moved, &truncated, &r.Note); err != nil {
			return nil, err
		}
		r.Segment, r.SwitchedFrom = int(seg), int(from)
		for _, s := range truncated {
			r.Truncated = append(r.Truncated, int(s))
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Get reads one job; an unknown id gives ErrJobNotFound, and so does a job
// of a queue the login may not work on when it is scoped by queue grants.
// It reads through backoff.job, which applies that scope in the database
// without telling a foreign job from a missing one.
func (c *Client) Get(ctx context.Context, jobID int64) (Job, error) {
	op := fmt.Sprintf("get job %d", jobID)
	j, err := c.queryJob(ctx, "SELECT "+jobColumns+" FROM backoff.job($1)", []any{jobID})
	if err != nil {
		return Job{}, translate(op, jobID, err)
	}
	return j, nil
}

func (c *Client) queryJobs(ctx context.Context, sql string, args []any) ([]Job, error) {
	rows, err := c.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

func (c *Client) queryJob(ctx context.Context, sql string, args []any) (Job, error) {
	return scanJob(c.db.QueryRow(ctx, sql, args...))
}
