// Package jobtype holds the types that the worker API (package client) and
// the operator API (package client/ops) both speak of: a job's row, its
// status and its error history. client names them too (client.Job is
// jobtype.Job), so a worker's code needs only client.
package jobtype

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is a job's place in its life cycle (backoff.jobs.status).
type Status string

// The statuses of a job. Pending and Retrying jobs are claimable once their
// RunAt has passed; Completed, DeadLettered and Cancelled are terminal.
const (
	StatusPending      Status = "pending"
	StatusRunning      Status = "running"
	StatusRetrying     Status = "retrying"
	StatusCompleted    Status = "completed"
	StatusDeadLettered Status = "dead_lettered"
	StatusCancelled    Status = "cancelled"
	// StatusBlocked: waiting for the jobs it depends on (docs/workflows.md);
	// never claimed until its last parent completes.
	StatusBlocked Status = "blocked"
)

// Job mirrors a row of backoff.jobs. Nullable columns are pointers or the
// zero value where the zero value cannot be a real value (an empty
// LockedBy, LastError, Policy, DedupeKey or DeadLetterReason means NULL;
// MaxAttempts 0 means "the policy's value").
//
// Two numbers answer "which try is this?" (docs/adr/0020, docs/adr/0065):
//   - Token, the fencing token: it counts every claim over the job's life
//     and never goes down. Every call that settles or extends a claimed job
//     (client.Complete, CompleteMany, Fail, Heartbeat, Snooze) carries it.
//   - AttemptNumber(), the counted attempt: 1 for the first try, what
//     MaxAttempts bounds and what the backoff delay grows with. It is Token
//     minus UncountedAttempts: a snooze and a replay give budget back
//     (UncountedAttempts grows), never tokens.
type Job struct {
	ID       int64
	Queue    string
	Payload  json.RawMessage
	Status   Status
	Priority int
	// Token is the fencing token: the count of every claim of the job
	// (claim, acquire; the column attempts), which never goes down, not on
	// snooze, replay or cancel. While the job runs it is the running
	// attempt's token, which no other claim of the job ever has: a call
	// with a token that no longer holds the job (reaped, snoozed, cancelled
	// and replayed) is refused, whatever happened since (client.ErrStaleAttempt,
	// client.ErrInvalidTransition). 0 for a job never claimed.
	Token int
	// UncountedAttempts counts the claims that do not count against
	// MaxAttempts: one per snooze, and every claim before the last replay.
	UncountedAttempts int
	MaxAttempts       int // 0: the policy's max_attempts
	Policy            string
	RunAt             time.Time
	LeaseUntil        *time.Time
	LockedBy          string
	LastAttemptedAt   *time.Time
	LastFailedAt      *time.Time
	LastError         string
	Errors            []AttemptError
	// DeadLetterReason says why a dead-lettered job was given up:
	// max_attempts (its counted attempts ran out), non_retryable (client.Fail with
	// client.NonRetryable, a handler's client.Permanent), deadline (the policy's deadline
	// passed) or lease_expiries (its leases expired more often than the
	// policy's max_lease_expiries: a job that crashes its worker).
	DeadLetterReason string
	DedupeKey        string
	CreatedAt        time.Time
	CompletedAt      *time.Time
}

// AttemptError is one entry of a job's bounded error history. Its JSON
// keys are the history's, as stored: attempt (the token) and counted.
type AttemptError struct {
	// Token is the fencing token of the attempt that failed (Job.Token when
	// it ran): unique per entry.
	Token int `json:"attempt"`
	// AttemptNumber is that attempt's counted number (Job.AttemptNumber()
	// when it ran), the n of the backoff delay that followed; 0 in entries
	// written before migration 4.
	AttemptNumber int       `json:"counted,omitempty"`
	At            time.Time `json:"at"`
	Error         string    `json:"error"`
	Worker        string    `json:"worker,omitempty"`
	// Kind is "error" (the handler's) or "lease_expired" for a failed
	// attempt; "replayed" or "cancelled" for an operator's action, which
	// is no attempt (docs/adr/0066).
	Kind string `json:"kind"`
	// Started is when the failed attempt was claimed (nil in entries
	// written before migration 5, and for a replay).
	Started *time.Time `json:"started,omitempty"`
	// Role is the database role of an operator's replay or cancel.
	Role string `json:"role,omitempty"`
}

// AttemptNumber is the counted attempt: which try this is, 1 for the
// first, what MaxAttempts bounds (Token - UncountedAttempts). A snooze does
// not spend one (the next claim has the same number), and after a replay
// the first try is 1 again. On the last allowed attempt it equals the
// max_attempts that applies. It is not a token: settle calls take Token.
func (j *Job) AttemptNumber() int { return j.Token - j.UncountedAttempts }

// UnmarshalPayload decodes the job's payload into v.
func (j *Job) UnmarshalPayload(v any) error {
	if err := json.Unmarshal(j.Payload, v); err != nil {
		return fmt.Errorf("decode payload of job %d: %w", j.ID, err)
	}
	return nil
}
