package client

import (
	"context"
	"fmt"
	"time"
)

// QueueState is the live state of a queue's controls at one time
// (backoff.queue_state): its breaker, its token bucket, and when a claim
// can next return a job as far as they go.
type QueueState struct {
	Queue string
	// State is "closed" (also without a breaker), "open" or "half_open".
	State string
	// OpenedAt is when the breaker last opened; zero when closed.
	OpenedAt time.Time
	// Failures is the failures counted in the breaker's window (0 without
	// a breaker).
	Failures int64
	// ProbesLeft is how many probe jobs a half-open breaker still hands
	// out; nil in the other states.
	ProbesLeft *int32
	// Rate and Burst are the queue's rate limit; nil: none.
	Rate  *float64
	Burst *int32
	// Tokens is how many jobs may be claimed now under the rate limit; nil
	// without one.
	Tokens *float64
	// NextClaimAt is when the breaker's cooldown ends or the next token
	// arrives; zero when nothing holds claims back (a paused queue too:
	// a pause has no end time).
	NextClaimAt time.Time
}

// queueStateColumns are QueueState's, then the time the state was read at
// (p_now, or the database's now()), which the Worker measures NextClaimAt
// from so that its wait does not depend on the clocks agreeing.
const queueStateColumns = "queue, state, opened_at, failures, probes_left, rate, burst, tokens, next_claim_at, "

// QueueState reads the live state of queue's breaker and rate limit
// (backoff.queue_state). A queue without a row in backoff.queues has
// every control off. A queue-scoped caller sees only queues it may work on
// or produce to.
func (c *Client) QueueState(ctx context.Context, queue string) (QueueState, error) {
	st, _, err := c.queueState(ctx, queue)
	return st, err
}

// queueState is QueueState, and how long from now NextClaimAt is (0 when
// it is zero or past), measured on the clock the state was read with.
func (c *Client) queueState(ctx context.Context, queue string) (QueueState, time.Duration, error) {
	op := fmt.Sprintf("read state of queue %q", queue)
	call, args := c.fn("queue_state", arg{"p_queue", "text", queue})
	var st QueueState
	var openedAt, next *time.Time
	var at time.Time
	err := c.db.QueryRow(ctx, "SELECT "+queueStateColumns+"coalesce($2::timestamptz, now()) FROM "+call, args...).
		Scan(&st.Queue, &st.State, &openedAt, &st.Failures, &st.ProbesLeft, &st.Rate, &st.Burst, &st.Tokens, &next, &at)
	if err != nil {
		return QueueState{}, 0, translate(op, 0, err)
	}
	var wait time.Duration
	if openedAt != nil {
		st.OpenedAt = *openedAt
	}
	if next != nil {
		st.NextClaimAt = *next
		wait = max(0, next.Sub(at))
	}
	return st, wait, nil
}
