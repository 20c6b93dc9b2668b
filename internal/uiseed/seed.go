// Package uiseed fills a migrated pgbackoff database with jobs in every
// state, for the web UI's browser tests, its screenshots and a first look
// (go run ./internal/uiseed/cmd/uiseed). It drives the jobs through the Go
// client with a clock it advances, so histories, waits and next runs are
// what the real functions computed.
package uiseed

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

// Hostile is the text the security tests look for: markup that would run
// script if it were rendered as HTML, and terminal escape sequences.
const Hostile = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"> \x1b[31mred\x1b[0m \x1b]0;title\x07"

// Result names a few of the seeded jobs.
type Result struct {
	Hostile  int64 // dead letter whose payload and errors hold Hostile
	Retrying int64 // a retrying job with a history of failures
	Running  int64
	// Stranded is a running job whose worker was killed: its lease
	// expired minutes ago and nothing has reaped it yet.
	Stranded int64
	Total    int
}

// Seed adds jobs to queues emails, webhooks and reports (plus hostile) of
// the database behind db. The jobs' times end around now.
func Seed(ctx context.Context, db client.DB, n int) (Result, error) {
	var res Result
	// The finished jobs spread over the last hour (the overview's chart).
	clk := time.Now().Add(-58 * time.Minute)
	step := 40 * time.Minute / time.Duration(max(n, 1))
	clock := func() time.Time { return clk }
	c, err := client.New(ctx, db, client.WithClock(clock), client.WithWorkerID("seed-worker-1"))
	if err != nil {
		return res, err
	}
	enqueue := func(queue string, payload any, opts ...client.EnqueueOption) (int64, error) {
		res.Total++
		return c.Enqueue(ctx, queue, payload, opts...)
	}
	acquire := func(id int64) (client.Job, error) { return c.Acquire(ctx, id, time.Minute) }
	errTexts := []string{
		"dial tcp 10.0.%d.7:443: connect: connection refused",
		"upstream answered 503 Service Unavailable (request id 7f3a%04d-9c1b)",
		"smtp: 452 4.2.2 mailbox of user%d@example.com full",
	}
	// Completed, with and without failures before.
	for i := range n {
		queue := []string{"emails", "webhooks", "reports"}[i%3]
		id, err := enqueue(queue, map[string]any{"n": i, "to": fmt.Sprintf("user%d@example.com", i)})
		if err != nil {
			return res, err
		}
		j, err := acquire(id)
		if err != nil {
			return res, err
		}
		clk = clk.Add(step)
		if i%4 == 0 {
			if j, err = c.Fail(ctx, id, j.Token, fmt.Sprintf(errTexts[i%3], i), client.RetryIn(time.Second)); err != nil {
				return res, err
			}
			clk = clk.Add(2 * time.Second)
			if j, err = acquire(id); err != nil {
				return res, err
			}
		}
		if _, err := c.Complete(ctx, id, j.Token); err != nil {
			return res, err
		}
	}
	// Dead letters: exhausted attempts (moderate: 5) and non-retryable.
	for i := range max(3, n/4) {
		queue := []string{"emails", "webhooks"}[i%2]
		id, err := enqueue(queue, map[string]any{"order": 1000 + i}, client.MaxAttempts(3))
		if err != nil {
			return res, err
		}
		for a := 0; a < 3; a++ {
			j, err := acquire(id)
			if err != nil {
				return res, err
			}
			clk = clk.Add(time.Second)
			j, err = c.Fail(ctx, id, j.Token, fmt.Sprintf(errTexts[i%2], i+a))
			if err != nil {
				return res, err
			}
			clk = maxTime(clk, j.RunAt)
		}
	}
	for i := range max(2, n/8) {
		id, err := enqueue("webhooks", map[string]any{"hook": i})
		if err != nil {
			return res, err
		}
		j, err := acquire(id)
		if err != nil {
			return res, err
		}
		if _, err := c.Fail(ctx, id, j.Token, fmt.Sprintf("invalid signature for hook %d: rejected", i), client.NonRetryable()); err != nil {
			return res, err
		}
	}
	// The hostile dead letter.
	hostile, err := json.Marshal(map[string]any{"note": Hostile, "nested": map[string]any{"html": Hostile}})
	if err != nil {
		return res, err
	}
	if res.Hostile, err = enqueue("hostile", json.RawMessage(hostile), client.MaxAttempts(2)); err != nil {
		return res, err
	}
	for a := 0; a < 2; a++ {
		j, err := acquire(res.Hostile)
		if err != nil {
			return res, err
		}
		clk = clk.Add(time.Second)
		if j, err = c.Fail(ctx, res.Hostile, j.Token, Hostile); err != nil {
			return res, err
		}
		clk = maxTime(clk, j.RunAt)
	}
	// Cancelled.
	for i := range 2 {
		id, err := enqueue("reports", map[string]any{"report": "weekly", "i": i})
		if err != nil {
			return res, err
		}
		if _, err := ops.New(db, ops.WithClock(clock)).Cancel(ctx, id, "superseded"); err != nil {
			return res, err
		}
	}
	// Now the jobs still in flight, timed to end near the real now.
	clk = time.Now().Add(-3 * time.Minute)
	// Retrying, with a history: conservative policy, three failures.
	if res.Retrying, err = enqueue("reports", map[string]any{"report": "monthly"}, client.UsePolicy("conservative")); err != nil {
		return res, err
	}
	for a := 0; a < 3; a++ {
		j, err := acquire(res.Retrying)
		if err != nil {
			return res, err
		}
		clk = clk.Add(500 * time.Millisecond)
		if j, err = c.Fail(ctx, res.Retrying, j.Token, fmt.Sprintf(errTexts[1], 40+a)); err != nil {
			return res, err
		}
		if a < 2 {
			clk = maxTime(clk, j.RunAt)
		}
	}
	clk = time.Now()
	// Running.
	if res.Running, err = enqueue("emails", map[string]any{"to": "ops@example.com"}); err != nil {
		return res, err
	}
	if _, err := acquire(res.Running); err != nil {
		return res, err
	}
	// Stranded: claimed 6 minutes ago by a worker that was killed, with
	// a lease of one minute.
	killedAt := clk.Add(-6 * time.Minute)
	killed, err := client.New(ctx, db, client.WithClock(func() time.Time { return killedAt }), client.WithWorkerID("worker-7f-killed"))
	if err != nil {
		return res, err
	}
	res.Total++
	if res.Stranded, err = killed.Enqueue(ctx, "webhooks", map[string]any{"id": 7, "url": "https://hooks.example.com/in"}); err != nil {
		return res, err
	}
	if _, err := killed.Acquire(ctx, res.Stranded, time.Minute); err != nil {
		return res, err
	}
	// Pending: due now and scheduled later.
	for i := range max(3, n/2) {
		var opts []client.EnqueueOption
		if i%3 == 0 {
			opts = append(opts, client.RunAt(clk.Add(time.Hour)))
		}
		if _, err := enqueue([]string{"emails", "webhooks", "reports"}[i%3], map[string]any{"pending": i}, opts...); err != nil {
			return res, err
		}
	}
	if _, err := ops.New(db, ops.WithClock(clock)).PauseQueue(ctx, "reports"); err != nil {
		return res, err
	}
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
