package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// Cancel moves an unfinished job to the terminal status cancelled.
func (c *Client) Cancel(ctx context.Context, jobID int64, reason string) (jobtype.Job, error) {
	op := fmt.Sprintf("cancel job %d", jobID)
	call, args := c.fn("cancel",
		sqlapi.Arg("p_job_id", "bigint", jobID),
		sqlapi.Arg("p_reason", "text", sqlapi.NullString(sqlapi.CleanErrorText(reason))),
	)
	j, err := c.queryJob(ctx, "SELECT "+sqlapi.JobColumns+" FROM "+call, args)
	if err != nil {
		return jobtype.Job{}, translate(op, err)
	}
	return j, nil
}

// Replay returns a dead-lettered or cancelled job to pending with a fresh
// attempt budget (AttemptNumber() 0 until its next claim); its error
// history is kept. Token keeps counting, so a worker still running an attempt from
// before the cancel cannot settle the replayed job's next claim.
func (c *Client) Replay(ctx context.Context, jobID int64) (jobtype.Job, error) {
	op := fmt.Sprintf("replay job %d", jobID)
	call, args := c.fn("replay", sqlapi.Arg("p_job_id", "bigint", jobID))
	j, err := c.queryJob(ctx, "SELECT "+sqlapi.JobColumns+" FROM "+call, args)
	if err != nil {
		return jobtype.Job{}, translate(op, err)
	}
	return j, nil
}

// Prune deletes up to limit (0: the function's default) finished jobs
// older than olderThan and returns how many it deleted.
func (c *Client) Prune(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	op := fmt.Sprintf("prune jobs older than %s", olderThan)
	args := []sqlapi.Param{sqlapi.Arg("p_older_than", "interval", olderThan)}
	if limit > 0 {
		args = append(args, sqlapi.Arg("p_limit", "integer", limit))
	}
	call, values := c.fn("prune", args...)
	var n int32
	if err := c.db.QueryRow(ctx, "SELECT "+call, values...).Scan(&n); err != nil {
		return 0, translate(op, err)
	}
	return int(n), nil
}
