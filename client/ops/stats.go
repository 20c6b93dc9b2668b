package ops

import (
	"context"
	"time"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// QueueStats is one queue's row of backoff.stats.
type QueueStats struct {
	Queue   string
	Pending int64
	Running int64
	// Expired counts the running jobs whose lease has ended: work a
	// stopped worker stranded, until a reap settles it.
	Expired      int64
	Retrying     int64
	Completed    int64
	DeadLettered int64
	Cancelled    int64
	// Blocked counts the jobs waiting for the jobs they depend on
	// (docs/workflows.md).
	Blocked int64
	// Due counts claimable jobs whose run_at has passed; OldestDueAge is
	// how long the oldest of them has waited (0 when none is due).
	Due          int64
	OldestDueAge time.Duration
	// Retries and DeadLetters count what happened within the window (an
	// operator's replay is no retry).
	Retries     int64
	DeadLetters int64
	// Paused: the queue is paused (PauseQueue).
	Paused bool
}

// Stats returns backoff.stats: per queue, jobs by status, the due backlog
// and its oldest age, and the retries and dead letters of the last window
// (0: the function's default, one hour). It scans the table: for operators
// and dashboards, not for a tight loop. To wait until queues are drained,
// use client.Client.WaitIdle.
func (c *Client) Stats(ctx context.Context, window time.Duration) ([]QueueStats, error) {
	op := "read job stats"
	var args []sqlapi.Param
	if window > 0 {
		args = append(args, sqlapi.Arg("p_window", "interval", window))
	}
	call, values := c.fn("stats", args...)
	rows, err := c.db.Query(ctx, "SELECT queue, pending, running, expired, retrying, completed, dead_lettered, cancelled, "+
		"due, COALESCE(oldest_due_age, interval '0'), retries, dead_letters, paused, blocked FROM "+call, values...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []QueueStats
	for rows.Next() {
		var s QueueStats
		if err := rows.Scan(&s.Queue, &s.Pending, &s.Running, &s.Expired, &s.Retrying, &s.Completed, &s.DeadLettered,
			&s.Cancelled, &s.Due, &s.OldestDueAge, &s.Retries, &s.DeadLetters, &s.Paused, &s.Blocked); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
