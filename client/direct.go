package client

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/client/sharding"
)

// A Worker in direct mode (WorkerConfig.DirectShards,
// docs/adr/0093-workers-call-shards-directly.md) is given a router's pool
// but sends its hot calls to the shards themselves: it reads the router's
// layout and the shards' addresses once, opens a pool per shard it needs
// (the router pool's user, password, TLS and pool settings at the shard's
// address, sharding.Pools), and then
//
//   - claims a queue's jobs, reads its controls' state and writes its
//     wake-up registration on the queue's shard;
//   - settles a job (complete, complete_many split per shard, fail,
//     snooze, heartbeat with its progress, completion with an output) on
//     the shard in the job's id (sharding.ShardOfJob): the shard it was
//     claimed from, even after its queue moved;
//   - LISTENs on every shard of its queues, where enqueue notifies;
//   - leaves the maintenance (reap, rotate, fire_schedules and the idle
//     look, backoff.next_work) to the router, which runs it on every shard
//     in one statement.
//
// It follows a layout change (a placement, or a queue moved with
// backoffctl shards move): it reads the layout's version from the router
// every layoutCheckEvery, and after a direct claim that came back short
// (at most once per layoutCheckMin); when the version changed it reads the
// layout again and sends the claims of a queue that moved to its new
// shard.

// layoutCheckEvery is how often a direct Worker reads the router's layout
// version whatever happens: it bounds how long the claims of a moved queue
// pause when nothing else asks, and costs an idle Worker 0.2 statements a
// second.
const layoutCheckEvery = 5 * time.Second

// layoutCheckMin is the least time between two reads of the version asked
// for by short claims: a trickle of jobs costs at most one a second.
const layoutCheckMin = time.Second

// direct is a direct Worker's view of the shards.
type direct struct {
	w      *Worker
	router *pgxpool.Pool
	pools  *sharding.Pools
	// check is signalled by a direct claim that came back short.
	check chan struct{}
	// changed is signalled when the shards of the Worker's queues
	// change (the notifier listens on the new ones).
	changed chan struct{}
	routes  atomic.Pointer[routes]

	// mu guards what follows (refresh runs in one goroutine, open may
	// run beside the notifier's reads of served).
	mu     sync.Mutex
	addrs  map[int]sharding.Shard // the shards' addresses, as last read
	shards map[int]*Client        // every shard opened, kept until Run ends
}

// routes is one reading of the layout: where each queue's calls and each
// job's go. It is replaced whole, never changed.
type routes struct {
	version int64
	queue   map[string]*Client
	shardOf map[string]int
	jobs    map[int]*Client // by shard number: every shard opened
}

// errNotRouter is why a direct Worker refuses a pool that is not a
// router's.
func errNotRouter(names string) error {
	return fmt.Errorf("run worker for %s: %w: DirectShards needs a pool connected to a pgbackoff router "+
		"(this database has no backoff.router_layout, so it is not one): give the router's pool, or unset DirectShards",
		names, ErrInvalidArgument)
}

// newDirect reads the router's layout and shards and connects to the
// shards of the Worker's queues.
func newDirect(ctx context.Context, w *Worker) (*direct, error) {
	var isRouter bool
	if err := w.pool.QueryRow(ctx, `SELECT to_regclass('backoff.router_layout') IS NOT NULL`).Scan(&isRouter); err != nil {
		return nil, fmt.Errorf("run worker for %s: read the router's layout: %w", w.names(), err)
	}
	if !isRouter {
		return nil, errNotRouter(w.names())
	}
	d := &direct{
		w:       w,
		router:  w.pool,
		pools:   sharding.NewPools(w.pool, w.pool.Config()),
		check:   make(chan struct{}, 1),
		changed: make(chan struct{}, 1),
		addrs:   map[int]sharding.Shard{},
		shards:  map[int]*Client{},
	}
	l, err := sharding.ReadLayout(ctx, w.pool)
	if err == nil {
		var r *routes
		r, err = d.route(ctx, l)
		if err == nil {
			d.routes.Store(r)
			return d, nil
		}
	}
	d.close()
	return nil, fmt.Errorf("run worker for %s in direct mode: %w", w.names(), err)
}

// route opens the shards of layout l's placement of the Worker's queues
// and returns the routes it gives.
func (d *direct) route(ctx context.Context, l sharding.Layout) (*routes, error) {
	r := &routes{version: l.Version, queue: map[string]*Client{}, shardOf: map[string]int{}}
	for _, q := range d.w.queue {
		k, _ := l.QueueShard(q.Queue)
		c, err := d.open(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("queue %q: %w", q.Queue, err)
		}
		r.queue[q.Queue], r.shardOf[q.Queue] = c, k
	}
	d.mu.Lock()
	r.jobs = maps.Clone(d.shards)
	d.mu.Unlock()
	return r, nil
}

// open returns the client of shard k, connecting to it at the first call.
func (d *direct) open(ctx context.Context, k int) (*Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.shards[k]; ok {
		return c, nil
	}
	addr, ok := d.addrs[k]
	if !ok {
		// The first shard, or one added since the addresses were read.
		shards, err := sharding.ReadShards(ctx, d.router)
		if err != nil {
			return nil, err
		}
		for _, s := range shards {
			d.addrs[s.Number] = s
		}
		if addr, ok = d.addrs[k]; !ok {
			return nil, fmt.Errorf("the router lists no shard %d", k)
		}
	}
	pool, err := d.pools.ForShard(ctx, addr)
	if err != nil {
		return nil, err
	}
	c, err := onShard(ctx, pool, d.w.c.cfg)
	if err != nil {
		return nil, fmt.Errorf("shard %d (%s): %w", k, addr.Conninfo, err)
	}
	d.shards[k] = c
	signal(d.changed)
	return c, nil
}

// onShard is a client on a shard's pool that shares cfg (the Worker's
// clock, logger, metrics and id), after the checks New makes.
func onShard(ctx context.Context, pool *pgxpool.Pool, cfg *config) (*Client, error) {
	if err := checkSchema(ctx, pool); err != nil {
		return nil, err
	}
	db, err := readCommittedIfNeeded(ctx, pool)
	if err != nil {
		return nil, err
	}
	return &Client{db: db, cfg: cfg, pool: pool}, nil
}

// served is the pools of the shards that hold the Worker's queues now.
func (d *direct) served() map[int]*pgxpool.Pool {
	out := map[int]*pgxpool.Pool{}
	r := d.routes.Load()
	for _, k := range r.shardOf {
		if c := r.jobs[k]; c != nil && c.pool != nil {
			out[k] = c.pool
		}
	}
	return out
}

// claimedShort is told by a producer whose direct claim returned fewer
// jobs than it asked for: the queue may have moved.
func (d *direct) claimedShort() { signal(d.check) }

// follow reads the layout's version every layoutCheckEvery and when a
// short claim asks (at most once per layoutCheckMin), until ctx ends.
func (d *direct) follow(ctx context.Context) {
	t := time.NewTicker(layoutCheckEvery)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.check:
			if wait := layoutCheckMin - time.Since(last); wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
			}
		}
		last = time.Now()
		d.refresh(ctx)
	}
}

// refresh reads the layout's version and, when it changed, the layout, and
// moves the claims of every queue whose shard changed. A failure is
// logged; the next check tries again (the routes keep their version).
func (d *direct) refresh(ctx context.Context) {
	cur := d.routes.Load()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var version int64
	if err := d.router.QueryRow(cctx, `SELECT version FROM backoff.router_layout`).Scan(&version); err != nil {
		if ctx.Err() == nil {
			d.w.log.Warn("read the router's layout version failed; the queues stay on their shards", "err", err)
		}
		return
	}
	if version == cur.version {
		return
	}
	l, err := sharding.ReadLayout(cctx, d.router)
	var next *routes
	if err == nil {
		next, err = d.route(cctx, l)
	}
	if err != nil {
		if ctx.Err() == nil {
			d.w.log.Error("follow the router's layout failed; the queues stay on their shards until it works", "version", version, "err", err)
		}
		return
	}
	d.routes.Store(next)
	for _, p := range d.w.producers {
		from, to := cur.shardOf[p.cfg.Queue], next.shardOf[p.cfg.Queue]
		if from != to {
			d.w.log.Info("queue moved: claiming on its new shard", "queue", p.cfg.Queue, "from", from, "to", to, "layout_version", version)
			p.moved.Store(true)
			signal(p.wake)
		}
	}
}

// close closes the shard pools.
func (d *direct) close() { d.pools.Close() }

// queueClient is the client a queue's calls go through: its shard's in
// direct mode, else the Worker's.
func (w *Worker) queueClient(queue string) *Client {
	if w.direct != nil {
		if c := w.direct.routes.Load().queue[queue]; c != nil {
			return c
		}
	}
	return w.c
}

// jobClient is the client a job's settling calls go through: the shard in
// its id in direct mode, else the Worker's.
func (w *Worker) jobClient(id int64) *Client {
	if w.direct != nil {
		if c := w.direct.routes.Load().jobs[sharding.ShardOfJob(id)]; c != nil {
			return c
		}
	}
	return w.c
}
