package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// queueMoveWait bounds how long an enqueue of a moving queue is tried
// again: a move refuses enqueues on the old shard from its mark until the
// router's placement flips, a few statements later (longer while the old
// shard still has transactions open from before the mark, which the mover
// waits for; docs/adr/0092-moving-a-live-queue.md).
const queueMoveWait = 10 * time.Second

// retryWhileMoving runs an enqueue again while it fails with
// ErrQueueMoving, with pauses from 10 ms doubling up to 250 ms, for at
// most queueMoveWait or until ctx ends. Only a client on a pool does so:
// each call is then a transaction of its own, and through a router the
// next one goes to the queue's new shard once the move flips. In the
// caller's transaction the error has aborted it: it is returned at once.
func (c *Client) retryWhileMoving(ctx context.Context, enqueue func() error) error {
	if c.pool == nil {
		return enqueue()
	}
	pause := 10 * time.Millisecond
	deadline := time.Now().Add(queueMoveWait)
	for {
		err := enqueue()
		if !errors.Is(err, ErrQueueMoving) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		case <-t.C:
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}
