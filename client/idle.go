package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The polls of WaitIdle: the first at once, then at intervals that double
// from idlePollFirst to idlePollMax, so that a short wait (a test's few
// jobs) ends soon after the last job and a long one costs a cheap indexed
// read four times a second.
const (
	idlePollFirst = 10 * time.Millisecond
	idlePollMax   = 250 * time.Millisecond
)

// WaitIdle returns nil once none of the given queues (every queue when none
// is given) has an unfinished job: none pending, running or retrying,
// whatever its run_at. A job that waits for a retry an hour away, or that
// was enqueued to run tomorrow, keeps its queue busy until it has finished
// (completed, dead-lettered or cancelled): idle means drained, nothing left
// to do, which is what a test harness or a batch job waits for after
// enqueueing its work. A snoozed job is pending, so it counts.
//
// It asks backoff.unfinished_job (producers, workers and admins; a login
// scoped by backoff.grant_queue sees, and waits for, only its queues) at
// once and then every 10 ms to 250 ms, until the
// queues are idle, a read fails (that error is returned), or ctx ends: then
// the error wraps context.Cause(ctx) and names a queue that still has a
// job, and its status. Give ctx a deadline. Behind a router every shard
// answers for its part of the queues.
//
// Idle is a moment, not a promise: a job enqueued just after WaitIdle
// returns makes the queue busy again.
func (c *Client) WaitIdle(ctx context.Context, queues ...string) error {
	op := "wait until every queue is idle"
	var only []string // NULL: every queue
	if len(queues) > 0 {
		op = "wait until " + quoteNames(queues) + " idle"
		only = queues
	}
	wait := idlePollFirst
	// The last unfinished job seen, named when ctx ends: also when it ends
	// during a later look, which a deadline often does.
	var queue, status string
	ended := func() error {
		if queue == "" {
			return fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		return fmt.Errorf("%s: %w (queue %q still has a %s job)", op, context.Cause(ctx), queue, status)
	}
	for {
		var q, s string
		err := c.db.QueryRow(ctx, "SELECT queue, status FROM backoff.unfinished_job($1::text[]) LIMIT 1", only).Scan(&q, &s)
		switch {
		case err == nil:
			queue, status = q, s
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case ctx.Err() != nil:
			return ended()
		default:
			return translate(op, 0, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ended()
		case <-t.C:
		}
		wait = min(2*wait, idlePollMax)
	}
}

// quoteNames reads `queue "a" is` or `queues "a", "b" are`.
func quoteNames(queues []string) string {
	quoted := make([]string, len(queues))
	for i, q := range queues {
		quoted[i] = fmt.Sprintf("%q", q)
	}
	if len(queues) == 1 {
		return "queue " + quoted[0] + " is"
	}
	return "queues " + strings.Join(quoted, ", ") + " are"
}
