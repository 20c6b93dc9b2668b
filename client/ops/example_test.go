package ops_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

// Find a dead letter and replay it: a worker's client made it, the
// operator's client repairs it.
func Example() {
	pool, cleanup := ops.SampleDatabase() // your *pgxpool.Pool
	defer cleanup()
	ctx := context.Background()

	c, err := client.New(ctx, pool)
	if err != nil {
		panic(err)
	}
	id, err := c.Enqueue(ctx, "emails", map[string]string{"to": "a@example.com"})
	if err != nil {
		panic(err)
	}
	jobs, err := c.Claim(ctx, "emails", 1, time.Minute)
	if err != nil {
		panic(err)
	}
	if _, err := c.Fail(ctx, jobs[0].ID, jobs[0].Token, "mailbox unavailable", client.NonRetryable()); err != nil {
		panic(err)
	}

	o := ops.New(pool)
	page, err := o.List(ctx, ops.ListParams{Queue: "emails", Statuses: []client.Status{client.StatusDeadLettered}})
	if err != nil {
		panic(err)
	}
	for _, d := range page.Jobs {
		fmt.Println(d.ID == id, d.Status, d.DeadLetterReason, d.LastError)
	}
	j, err := o.Replay(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(j.Status, "attempt", j.AttemptNumber(), "token", j.Token)
	_, err = o.Replay(ctx, id) // pending now: nothing to replay
	fmt.Println(errors.Is(err, client.ErrInvalidTransition))
	// Output:
	// true dead_lettered non_retryable mailbox unavailable
	// pending attempt 0 token 1
	// true
}

// Pause a queue while its downstream is away: claims stop, running jobs
// go on, and the queue's history says who did it.
func ExampleClient_PauseQueue() {
	pool, cleanup := ops.SampleDatabase()
	defer cleanup()
	ctx := context.Background()

	o := ops.New(pool)
	_, err := o.PauseQueue(ctx, "webhooks")
	fmt.Println(err != nil) // no such queue yet: SwitchQueue with create makes one
	changed, err := o.SwitchQueue(ctx, "webhooks", true, true)
	if err != nil {
		panic(err)
	}
	fmt.Println("paused:", changed)
	changed, _ = o.PauseQueue(ctx, "webhooks")
	fmt.Println("paused again:", changed)
	events, err := o.QueueEvents(ctx, "webhooks", 10)
	if err != nil {
		panic(err)
	}
	for _, e := range events {
		fmt.Println(e.Queue, e.Action)
	}
	// Output:
	// true
	// paused: true
	// paused again: false
	// webhooks pause
}
