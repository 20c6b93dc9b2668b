package client

import (
	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// Status is a job's place in its life cycle (backoff.jobs.status):
// StatusPending and StatusRetrying jobs are claimable once their RunAt has
// passed; StatusCompleted, StatusDeadLettered and StatusCancelled are
// terminal.
type Status = jobtype.Status

// The statuses of a job (jobtype.Status).
const (
	StatusPending      = jobtype.StatusPending
	StatusRunning      = jobtype.StatusRunning
	StatusRetrying     = jobtype.StatusRetrying
	StatusCompleted    = jobtype.StatusCompleted
	StatusDeadLettered = jobtype.StatusDeadLettered
	StatusCancelled    = jobtype.StatusCancelled
	StatusBlocked      = jobtype.StatusBlocked
)

// Job is a claimed (or read) job: a row of backoff.jobs, with its payload
// (Job.UnmarshalPayload, or HandlerFor to decode it before the handler
// runs), its fencing token (Job.Token, which Complete, Fail, Heartbeat and
// Snooze take) and its counted attempt (Job.AttemptNumber). Its fields are
// documented with jobtype.Job (`go doc github.com/pgbackoff/pgbackoff/client/jobtype.Job`):
// the type is defined there so that package client/ops can speak of jobs
// too.
type Job = jobtype.Job

// AttemptError is one entry of a job's bounded error history (Job.Errors),
// documented with jobtype.AttemptError.
type AttemptError = jobtype.AttemptError

// jobColumns is the column list every query returning jobs selects, in the
// order scanJob reads them.
const jobColumns = sqlapi.JobColumns

// scanJob reads one row selected with jobColumns, then into extra the
// columns that follow them.
var scanJob = sqlapi.ScanJob
