package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// workflows measures dependencies (docs/workflows.md, docs/adr/0087) on
// four shapes of n jobs, each a graph enqueued in one call and then worked
// by one Worker with the settings of the Worker lines:
//
//   - fan-out: one root, n-1 children of it;
//   - fan-in: n-1 parents, one child of them all;
//   - layers: 20 layers, each job after 3 jobs of the layer before;
//   - chain: each job after the one before.
//
// Each shape's jobs/s (from the Worker's start to its last completion)
// is printed beside the same number of jobs without dependencies, worked
// the same way, in alternating rounds. A child becomes claimable in the
// transaction that completes its last parent: the section checks that the
// first claim after that commit takes it, and prints the buffers the last
// parent's completion touches in a fan-in of (n-1)/100 and of n-1 parents
// (flat: the release is a counter, not a count of the parents), how long
// after its last parent's completion each child was claimed (the Worker's
// batching of completions and its claim loop, not the release), and
// completions that release a child over 1 and over 1,000 queues.
func (b *bench) workflows(ctx context.Context) error {
	n := b.cfg.WorkflowJobs
	fmt.Fprintf(b.out, "\n== workflows: graphs of %d jobs worked by one Worker vs the same jobs without dependencies, medians of %d rounds ==\n", n, b.cfg.Rounds)
	fmt.Fprintf(b.out, "%-8s %12s %12s %7s %15s %12s %18s %7s\n", "shape", "graph jobs/s", "plain jobs/s", "ratio", "round ratios", "enqueue s", "claim after p50/p99", "target")
	shapes := []struct {
		name  string
		build func(n int) *client.Graph
		goal  float64
	}{
		{"fan-out", fanOutGraph, 0.90},
		{"fan-in", fanInGraph, 0.80},
		{"layers", layeredGraph, 0.90},
		{"chain", chainGraph, 0},
	}
	for _, s := range shapes {
		var enqueue []float64
		var gap workflowGap
		graph, plain, ratios, err := alternate(b.cfg.Rounds,
			func() (float64, error) {
				res, err := b.plainRun(ctx, n)
				return res.rate(), err
			},
			func() (float64, error) {
				res, took, g, err := b.graphRun(ctx, s.build(n))
				enqueue, gap = append(enqueue, took.Seconds()), g
				return res.rate(), err
			})
		if err != nil {
			return fmt.Errorf("workflows, %s: %w", s.name, err)
		}
		ratio := median(graph) / median(plain)
		goal := "-"
		if s.goal > 0 {
			goal = fmt.Sprintf(">= %.2f", s.goal)
			b.target("workflow-"+s.name+"-vs-plain", ratio, s.goal)
		}
		fmt.Fprintf(b.out, "%-8s %12.0f %12.0f %7.2f %15s %12.2f %18s %7s\n", s.name, median(graph), median(plain), ratio,
			roundRatios(ratios), median(enqueue), gap, goal)
	}
	if err := b.lastParent(ctx, n); err != nil {
		return err
	}
	return b.completionByQueues(ctx, n/2)
}

// completionByQueues times the completions of pairs parents, each with
// one child waiting for it, spread over 1 and over 1,000 queues: 4
// clients, one completion a transaction, alternating rounds. A completion
// that releases a child reads and writes rows of that child only, so the
// number of queues should not show (goal: within 10%).
func (b *bench) completionByQueues(ctx context.Context, pairs int) error {
	const clients = 4
	byQueues := func(queues int) func() (float64, error) {
		return func() (float64, error) {
			rate, err := b.completeParents(ctx, pairs, queues, clients)
			if err != nil {
				return 0, fmt.Errorf("workflows, completions over %d queues: %w", queues, err)
			}
			return rate, nil
		}
	}
	many, one, ratios, err := alternate(b.cfg.Rounds, byQueues(1), byQueues(1000))
	if err != nil {
		return err
	}
	ratio := median(many) / median(one)
	fmt.Fprintf(b.out, "completions that release a child, %d clients: %.0f/s over 1,000 queues, %.0f/s over 1 (ratio %.2f, rounds %s, goal >= 0.90)\n",
		clients, median(many), median(one), ratio, roundRatios(ratios))
	b.target("workflow-complete-1000-queues-vs-1", ratio, 0.90)
	return nil
}

// completeParents enqueues pairs parent/child pairs over queues queues in
// a fresh database, claims the parents, and returns the completions per
// second of clients completing them one a transaction.
func (b *bench) completeParents(ctx context.Context, pairs, queues, clients int) (float64, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return 0, err
	}
	defer drop()
	c, err := client.New(ctx, db.pool, client.WithLogger(discard))
	if err != nil {
		return 0, err
	}
	g := client.NewGraph()
	for i := range pairs {
		q := fmt.Sprintf("wf-q%d", i%queues)
		g.Add(fmt.Sprintf("p%d", i), q, nil, nil)
		g.Add(fmt.Sprintf("c%d", i), q, nil, []client.Dependency{client.After(fmt.Sprintf("p%d", i))})
	}
	if _, err := c.EnqueueGraph(ctx, g); err != nil {
		return 0, err
	}
	var parents []client.Job
	for q := range queues {
		jobs, err := c.Claim(ctx, fmt.Sprintf("wf-q%d", q), pairs, time.Hour)
		if err != nil {
			return 0, err
		}
		parents = append(parents, jobs...)
	}
	if len(parents) != pairs {
		return 0, fmt.Errorf("claimed %d parents of %d", len(parents), pairs)
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE backoff.jobs, backoff.job_dependencies, backoff.job_blockers"); err != nil {
		return 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	began := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(parents)); i = next.Add(1) - 1 {
				if _, err := db.pool.Exec(ctx, "SELECT 1 FROM backoff.complete($1, $2)", parents[i].ID, parents[i].Token); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	var released int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM backoff.jobs WHERE status = 'pending'").Scan(&released); err != nil {
		return 0, err
	}
	if released != pairs {
		return 0, fmt.Errorf("%d children released of %d", released, pairs)
	}
	return float64(pairs) / took.Seconds(), nil
}

// plainRun works n jobs without dependencies in a fresh database.
func (b *bench) plainRun(ctx context.Context, n int) (result, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return result{}, err
	}
	defer drop()
	return runWorkerSetup(ctx, b.cfg, db, workerSetup{workers: 1, queues: 1}, n)
}

// graphRun enqueues g in a fresh database (timed apart) and works it.
func (b *bench) graphRun(ctx context.Context, g *client.Graph) (result, time.Duration, workflowGap, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return result{}, 0, workflowGap{}, err
	}
	defer drop()
	c, err := client.New(ctx, db.pool, client.WithLogger(discard))
	if err != nil {
		return result{}, 0, workflowGap{}, err
	}
	began := time.Now()
	if _, err := c.EnqueueGraph(ctx, g); err != nil {
		return result{}, 0, workflowGap{}, err
	}
	took := time.Since(began)
	if _, err := db.pool.Exec(ctx, "ANALYZE backoff.jobs"); err != nil {
		return result{}, 0, workflowGap{}, err
	}
	n := len(g.Jobs())
	h, all := countingHandler(n)
	start := time.Now()
	stop, err := startWorkers(ctx, b.cfg, db, workerSetup{workers: 1, queues: 1}, h)
	if err != nil {
		return result{}, 0, workflowGap{}, err
	}
	select {
	case <-all:
	case <-ctx.Done():
	case <-time.After(10 * time.Minute):
	}
	if err := stop(); err != nil {
		return result{}, 0, workflowGap{}, err
	}
	res, err := checkCompleted(ctx, db, n, time.Since(start))
	if err != nil {
		return result{}, 0, workflowGap{}, err
	}
	gap, err := claimGap(ctx, db)
	return res, took, gap, err
}

// workflowGap is how long after its last parent's completion a child was
// claimed, p50 and p99 in milliseconds: from the completed_at of its last
// parent to its last_attempted_at, the times the Worker's calls passed,
// read at their starts; 0 where the child's claim read its time first.
type workflowGap struct{ p50, p99 float64 }

func (g workflowGap) String() string { return fmt.Sprintf("%.1f/%.1f ms", g.p50, g.p99) }

func claimGap(ctx context.Context, db *database) (workflowGap, error) {
	var g workflowGap
	err := db.pool.QueryRow(ctx, `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY gap), 0),
		       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY gap), 0)
		FROM (SELECT greatest(0, extract(epoch FROM c.last_attempted_at - max(p.completed_at)) * 1000) AS gap
		      FROM backoff.job_dependencies AS d
		      JOIN backoff.jobs AS c ON c.id = d.child_id
		      JOIN backoff.jobs AS p ON p.id = d.parent_id
		      GROUP BY c.id, c.last_attempted_at) AS g`).Scan(&g.p50, &g.p99)
	if err != nil {
		return g, fmt.Errorf("claim gap: %w", err)
	}
	return g, nil
}

// lastParent completes the last parent of a fan-in of k parents and of n-1,
// reading the buffers each completion touched (EXPLAIN ANALYZE counts the
// function's own statements), and claims the child right after each commit.
func (b *bench) lastParent(ctx context.Context, n int) error {
	small := max(9, (n-1)/100)
	var buffers [2]int64
	for i, k := range []int{small, n - 1} {
		db, drop, err := b.freshDatabase(ctx)
		if err != nil {
			return err
		}
		buffers[i], err = completeLastParent(ctx, db, k)
		drop()
		if err != nil {
			return fmt.Errorf("workflows, fan-in of %d: %w", k, err)
		}
	}
	ratio := float64(buffers[1]) / float64(buffers[0])
	fmt.Fprintf(b.out, "fan-in, the last parent's completion: %d buffers with %d parents, %d with %d (ratio %.2f, goal <= 1.50); the child was taken by the first claim after that commit (commit-to-claimable gap 0)\n",
		buffers[0], small, buffers[1], n-1, ratio)
	b.targetAtMost("workflow-fanin-last-complete-buffers-ratio", ratio, 1.5)
	return nil
}

// completeLastParent enqueues two fan-ins of k parents, completes every
// parent but the last of each, then the first fan-in's last parent (its
// release path planned on this connection) and the second's under EXPLAIN
// (ANALYZE, BUFFERS), and checks that the next claim takes that child.
func completeLastParent(ctx context.Context, db *database, k int) (int64, error) {
	c, err := client.New(ctx, db.pool, client.WithLogger(discard))
	if err != nil {
		return 0, err
	}
	var last [2]client.Job
	for i, side := range []string{"warm", "measured"} {
		parents := "wf-parents-" + side
		g := client.NewGraph()
		deps := make([]client.Dependency, k)
		for p := range k {
			ref := fmt.Sprintf("p%d", p)
			g.Add(ref, parents, nil, nil)
			deps[p] = client.After(ref)
		}
		g.Add("child", "wf-child-"+side, nil, deps)
		if _, err := c.EnqueueGraph(ctx, g); err != nil {
			return 0, err
		}
		jobs, err := c.Claim(ctx, parents, k, time.Hour)
		if err != nil || len(jobs) != k {
			return 0, fmt.Errorf("claim %d parents: got %d: %v", k, len(jobs), err)
		}
		ids, tokens := make([]int64, k-1), make([]int, k-1)
		for p, j := range jobs[:k-1] {
			ids[p], tokens[p] = j.ID, j.Token
		}
		if _, err := c.CompleteMany(ctx, ids, tokens); err != nil {
			return 0, err
		}
		last[i] = jobs[k-1]
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE backoff.jobs, backoff.job_dependencies, backoff.job_blockers"); err != nil {
		return 0, err
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT * FROM backoff.complete($1, $2)", last[0].ID, last[0].Token); err != nil {
		return 0, err
	}
	var plan []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM backoff.complete($1, $2)",
		last[1].ID, last[1].Token).Scan(&plan); err != nil {
		return 0, fmt.Errorf("complete the last parent: %w", err)
	}
	var doc []struct {
		Plan struct {
			Hit  int64 `json:"Shared Hit Blocks"`
			Read int64 `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		return 0, fmt.Errorf("read the plan: %v", err)
	}
	child, err := c.Claim(ctx, "wf-child-measured", 1, time.Hour)
	if err != nil {
		return 0, err
	}
	if len(child) != 1 {
		return 0, fmt.Errorf("the child was not claimable right after its last parent's completion committed")
	}
	return doc[0].Plan.Hit + doc[0].Plan.Read, nil
}

func fanOutGraph(n int) *client.Graph {
	g := client.NewGraph().Add("root", queue, nil, nil)
	for i := 1; i < n; i++ {
		g.Add(fmt.Sprintf("c%d", i), queue, nil, []client.Dependency{client.After("root")})
	}
	return g
}

func fanInGraph(n int) *client.Graph {
	g := client.NewGraph()
	deps := make([]client.Dependency, 0, n-1)
	for i := 1; i < n; i++ {
		ref := fmt.Sprintf("p%d", i)
		g.Add(ref, queue, nil, nil)
		deps = append(deps, client.After(ref))
	}
	return g.Add("child", queue, nil, deps)
}

// layeredGraph is 20 layers of n/20 jobs, each after 3 jobs of the layer
// before it (the same three offsets for every job, spread over the layer).
func layeredGraph(n int) *client.Graph {
	const layers, parents = 20, 3
	width := n / layers
	g := client.NewGraph()
	for l := range layers {
		for i := range width {
			var deps []client.Dependency
			if l > 0 {
				for p := range parents {
					deps = append(deps, client.After(fmt.Sprintf("l%d-%d", l-1, (i+p*width/parents)%width)))
				}
			}
			g.Add(fmt.Sprintf("l%d-%d", l, i), queue, nil, deps)
		}
	}
	return g
}

func chainGraph(n int) *client.Graph {
	g := client.NewGraph().Add("j0", queue, nil, nil)
	for i := 1; i < n; i++ {
		g.Add(fmt.Sprintf("j%d", i), queue, nil, []client.Dependency{client.After(fmt.Sprintf("j%d", i-1))})
	}
	return g
}
