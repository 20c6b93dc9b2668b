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
