package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// quiet keeps the examples' output to what they print.
var quiet = client.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))

// Enqueue a job in the same transaction as the application's own write:
// both commit, or neither.
func ExampleClient_Enqueue_inTransaction() {
	pool, cleanup := client.SampleDatabase() // your *pgxpool.Pool
	defer cleanup()
	ctx := context.Background()

	c, err := client.New(ctx, pool)
	if err != nil {
		panic(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	// ... the application's own INSERT INTO users ... on tx ...
	id, err := c.With(tx).Enqueue(ctx, "emails", map[string]string{"to": "ada@example.com"},
		client.DedupeKey("welcome:ada"))
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	job, _ := c.Get(ctx, id)
	fmt.Println(job.Queue, job.Status, string(job.Payload))
	// Output: emails pending {"to": "ada@example.com"}
}

// Enqueue a batch in one statement and one round trip: each job with its
// own queue, payload and options, the ids in input order. The batch is
// atomic, and a dedupe key means what it means to Enqueue: a job whose key
// matches an unfinished job (earlier in the batch or already queued) gets
// that job's id instead of a new job.
func ExampleClient_EnqueueMany() {
	pool, cleanup := client.SampleDatabase() // your *pgxpool.Pool
	defer cleanup()
	ctx := context.Background()
	c, err := client.New(ctx, pool)
	if err != nil {
		panic(err)
	}
	type Email struct{ To string }
	ids, err := c.EnqueueMany(ctx, []client.NewJob{
		{Queue: "emails", Payload: Email{To: "ada@example.com"}, DedupeKey: "welcome:ada"},
		{Queue: "emails", Payload: Email{To: "alan@example.com"}, Priority: 10},
		{Queue: "reports", Payload: map[string]string{"month": "2030-01"}, RunAt: time.Now().Add(time.Hour), MaxAttempts: 3},
		{Queue: "emails", Payload: Email{To: "ada@example.com"}, DedupeKey: "welcome:ada"}, // the first job's id
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ids), "ids;", "the repeated key gives the first job's id:", ids[3] == ids[0])
	for _, id := range ids[:3] {
		job, _ := c.Get(ctx, id)
		fmt.Println(job.Queue, job.Status, job.Priority, job.MaxAttempts, string(job.Payload))
	}
	// Output:
	// 4 ids; the repeated key gives the first job's id: true
	// emails pending 0 0 {"To": "ada@example.com"}
	// emails pending 10 0 {"To": "alan@example.com"}
	// reports pending 0 3 {"month": "2030-01"}
}

// A worker in a dozen lines: handlers run concurrently, with leases,
// heartbeats, retries and a graceful shutdown when ctx ends.
func ExampleNewWorker() {
	pool, cleanup := client.SampleDatabase()
	defer cleanup()
	ctx, stop := context.WithCancel(context.Background()) // signal.NotifyContext(ctx, os.Interrupt) in a program
	done := make(chan struct{})

	w, err := client.NewWorker(pool, client.WorkerConfig{
		Queue:       "emails",
		Concurrency: 10,
		Handler: func(ctx context.Context, job *client.Job) error {
			var msg struct{ To string }
			if err := job.UnmarshalPayload(&msg); err != nil {
				return client.Permanent(err) // bad input: dead-letter, don't retry
			}
			fmt.Println("sending to", msg.To, "attempt", job.AttemptNumber()) // 1 on the first try
			close(done)
			return nil // completed; any other error retries with the policy's backoff
		},
	}, quiet)
	if err != nil {
		panic(err)
	}
	c, _ := client.New(ctx, pool)
	if _, err := c.Enqueue(ctx, "emails", map[string]string{"to": "ada@example.com"}); err != nil {
		panic(err)
	}
	go func() { <-done; stop() }()
	if err := w.Run(ctx); err != nil { // returns after draining
		panic(err)
	}
	// Output: sending to ada@example.com attempt 1
}

// A workflow engine picks the step itself and asks whether it may run it
// now: it either gets the job, claimed, or learns when to come back.
func ExampleClient_Acquire() {
	pool, cleanup := client.SampleDatabase()
	defer cleanup()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	c, err := client.New(ctx, pool, client.WithClock(func() time.Time { return now }), quiet)
	if err != nil {
		panic(err)
	}
	step, _ := c.Enqueue(ctx, "workflow", map[string]string{"step": "charge"}, client.RunAt(now.Add(time.Minute)))

	_, err = c.Acquire(ctx, step, 0)
	var notReady *client.NotReadyError
	if errors.As(err, &notReady) {
		fmt.Println("not ready until", notReady.RetryAt.Format(time.TimeOnly), "after", notReady.Token, "claims")
	}
	now = now.Add(time.Minute)
	job, err := c.Acquire(ctx, step, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(job.Status, "attempt", job.AttemptNumber(), "token", job.Token) // settle with c.Complete(ctx, job.ID, job.Token)
	// Output:
	// not ready until 12:01:00 after 0 claims
	// running attempt 1 token 1
}

// One Worker for several queues, each with its own handler and limits,
// sharing one LISTEN connection, one reaper and one batched completer. A
// typed handler gets the decoded payload.
func ExampleWorkerConfig_queues() {
	pool, cleanup := client.SampleDatabase()
	defer cleanup()
	ctx, stop := context.WithCancel(context.Background())
	type Email struct{ To string }
	var mu sync.Mutex
	seen := map[string]bool{}
	ran := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		seen[what] = true
		if len(seen) == 2 {
			stop()
		}
	}

	w, err := client.NewWorker(pool, client.WorkerConfig{
		Queues: []client.QueueConfig{
			{Queue: "emails", Concurrency: 20, Handler: client.HandlerFor(func(ctx context.Context, job *client.Job, e Email) error {
				ran("email to " + e.To)
				return nil
			})},
			{Queue: "thumbnails", Concurrency: 2, Handler: func(ctx context.Context, job *client.Job) error {
				ran("thumbnail")
				return nil
			}},
		},
	}, quiet)
	if err != nil {
		panic(err)
	}
	c, _ := client.New(ctx, pool)
	if _, err := c.EnqueueMany(ctx, []client.NewJob{
		{Queue: "emails", Payload: Email{To: "ada@example.com"}},
		{Queue: "thumbnails"},
	}); err != nil {
		panic(err)
	}
	if err := w.Run(ctx); err != nil {
		panic(err)
	}
	fmt.Println(seen["email to ada@example.com"], seen["thumbnail"])
	// Output: true true
}
