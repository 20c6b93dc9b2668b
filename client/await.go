package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// FinishedChannel is the channel a call that finishes an awaited job
// notifies, with the job's id (backoff.await_job).
const FinishedChannel = "backoff_finished"

// FinishedJob is how a job ended, as WaitForOutput returns it.
type FinishedJob struct {
	ID     int64
	Status Status          // StatusCompleted, StatusDeadLettered or StatusCancelled
	Output json.RawMessage // nil when it recorded none
}

// DefaultAwaitPoll is how often WaitForOutput looks at the job without a
// notification.
const DefaultAwaitPoll = time.Second

// WaitForOutput waits until job jobID has finished (completed,
// dead-lettered or cancelled) and returns how it ended with its output.
// It registers with backoff.await_job, so that the call that finishes the
// job notifies FinishedChannel: on a client over a *pgxpool.Pool it
// LISTENs on a connection of the pool for the wait (its calls take
// another) and returns as soon as the job finishes, and looks at the job every poll (DefaultAwaitPoll when
// 0) in case a notification is missed; on another DB it polls. ctx bounds
// the wait: its deadline is the timeout, and its error is returned,
// wrapped, when it ends first. A job that does not exist, or one of a
// queue the caller may not read, is ErrJobNotFound.
func (c *Client) WaitForOutput(ctx context.Context, jobID int64, poll time.Duration) (FinishedJob, error) {
	op := fmt.Sprintf("wait for the output of job %d", jobID)
	if poll <= 0 {
		poll = DefaultAwaitPoll
	}
	var wait func(context.Context) error
	if c.pool != nil {
		conn, done, err := listenOn(ctx, c.pool)
		if err != nil {
			return FinishedJob{}, fmt.Errorf("%s: %w", op, err)
		}
		defer done()
		id := strconv.FormatInt(jobID, 10)
		wait = func(ctx context.Context) error {
			for {
				n, err := conn.Conn().WaitForNotification(ctx)
				if err != nil {
					return err
				}
				if n.Payload == id {
					return nil
				}
			}
		}
	}
	ttl := max(time.Minute, 3*poll)
	registered := false
	for {
		var status string
		err := c.db.QueryRow(ctx, `SELECT backoff.await_job(p_job_id => $1::bigint, p_awaiter => $2::text, p_ttl => $3::interval)`,
			jobID, c.cfg.workerID, ttl).Scan(&status)
		if err != nil {
			c.stopAwaiting(registered, jobID)
			return FinishedJob{}, translate(op, jobID, err)
		}
		switch Status(status) {
		case StatusCompleted, StatusDeadLettered, StatusCancelled:
			out, err := c.JobOutput(ctx, jobID)
			if err != nil {
				return FinishedJob{}, fmt.Errorf("%s: %w", op, err)
			}
			return FinishedJob{ID: jobID, Status: Status(status), Output: out}, nil
		}
		registered = true
		wctx, cancel := context.WithTimeout(ctx, poll)
		if wait != nil {
			err = wait(wctx)
		} else {
			<-wctx.Done()
		}
		cancel()
		if ctx.Err() != nil {
			c.stopAwaiting(registered, jobID)
			return FinishedJob{}, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			// The LISTEN connection broke: poll from here on.
			wait = nil
		}
	}
}

// stopAwaiting ends this client's registration for the job after a wait
// that gave up; a failure leaves it to expire.
func (c *Client) stopAwaiting(registered bool, jobID int64) {
	if !registered {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.db.Exec(ctx, `SELECT backoff.stop_awaiting(p_job_id => $1::bigint, p_awaiter => $2::text)`, jobID, c.cfg.workerID)
}

// listenOn takes a connection of pool and LISTENs on FinishedChannel;
// done UNLISTENs and gives it back (or closes it when UNLISTEN fails, so
// that the pool never lends a listening connection).
func listenOn(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire a connection to listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+FinishedChannel); err != nil {
		conn.Release()
		return nil, nil, fmt.Errorf("listen %s: %w", FinishedChannel, err)
	}
	return conn, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "UNLISTEN "+FinishedChannel); err != nil {
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}
