package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// A workflow: extract, then two loads, then a report that reads what the
// loads left it. Each job becomes claimable in the transaction that
// completes its last parent.
func ExampleClient_EnqueueGraph() {
	pool, cleanup := client.SampleDatabase() // your *pgxpool.Pool
	defer cleanup()
	ctx := context.Background()
	c, err := client.New(ctx, pool, quiet)
	if err != nil {
		panic(err)
	}
	ids, err := c.EnqueueGraph(ctx, client.NewGraph().
		Add("extract", "etl", map[string]string{"table": "orders"}, nil).
		Add("load-eu", "etl", nil, []client.Dependency{client.After("extract")}).
		Add("load-us", "etl", nil, []client.Dependency{client.After("extract")}).
		Add("report", "reports", nil, []client.Dependency{
			client.After("load-eu"),
			client.After("load-us").Or(client.OnFailureRun),
		}))
	if err != nil {
		panic(err)
	}
	// A worker's loop, by hand: each job completes with an output.
	for _, queue := range []string{"etl", "etl", "reports"} {
		jobs, err := c.Claim(ctx, queue, 10, time.Minute)
		if err != nil {
			panic(err)
		}
		for _, j := range jobs {
			if j.ID == ids["report"] {
				parents, err := c.ParentOutputs(ctx, j.ID)
				if err != nil {
					panic(err)
				}
				for _, p := range parents {
					fmt.Println("report reads", p.Status, string(p.Output))
				}
			}
			if _, err := c.CompleteWithOutput(ctx, j.ID, j.Token, map[string]int64{"job": j.ID}); err != nil {
				panic(err)
			}
		}
	}
	out, err := c.JobOutput(ctx, ids["report"])
	if err != nil {
		panic(err)
	}
	fmt.Println("report:", string(out))
	// Output:
	// report reads completed {"job": 2}
	// report reads completed {"job": 3}
	// report: {"job": 4}
}

// A producer waits for the output of the job it enqueued: the call that
// completes the job notifies it, with a poll each second in case a
// notification is missed; the context's deadline is the timeout.
func ExampleClient_WaitForOutput() {
	pool, cleanup := client.SampleDatabase() // your *pgxpool.Pool
	defer cleanup()
	ctx := context.Background()
	c, err := client.New(ctx, pool, quiet)
	if err != nil {
		panic(err)
	}
	id, err := c.Enqueue(ctx, "thumbnails", map[string]string{"image": "cat.png"})
	if err != nil {
		panic(err)
	}
	go func() { // a worker, elsewhere
		for {
			jobs, err := c.Claim(ctx, "thumbnails", 1, time.Minute)
			if err != nil {
				panic(err)
			}
			if len(jobs) == 1 {
				if _, err := c.CompleteWithOutput(ctx, jobs[0].ID, jobs[0].Token, map[string]string{"url": "/t/cat.png"}); err != nil {
					panic(err)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done, err := c.WaitForOutput(wctx, id, time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.Status, string(done.Output))
	// Output:
	// completed {"url": "/t/cat.png"}
}
