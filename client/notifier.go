package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier holds the Worker's one LISTEN connection, shared by all its
// queues, and the registrations that tell enqueuers a queue has a waiting
// worker (docs/adr/0027-wake-ups-only-for-waiting-workers.md).
//
// backoff.enqueue notifies only when a worker has registered, with
// backoff.wait_for_jobs, that it waits for the queue: a busy system, whose
// workers never register, sends no notification and its enqueuers never
// take PostgreSQL's database-wide notify lock. A producer registers when a
// claim finds its queue empty (and looks once more, for a job enqueued
// before the registration was visible), and ends the registration with
// backoff.stop_waiting when two claims in a row find jobs (a backlog). A registration also
// expires (registrationTTL), so one left by a worker that died costs at
// most that long of needless notifications; an idle producer renews its
// registration at its poll ticks.
type notifier struct {
	w *Worker
	// LISTEN is in effect on every connection meant to hold it: want of
	// them (one; in direct mode one per shard of the Worker's queues),
	// active of them now.
	want, active atomic.Int32

	mu      sync.Mutex
	renewed map[string]time.Time // queue -> when its registration was written
}

func newNotifier(w *Worker) *notifier {
	return &notifier{w: w, renewed: map[string]time.Time{}}
}

// registrationTTL is how long a registration lasts without renewal: long
// enough that an idle producer renews it at a poll tick before it expires.
func (n *notifier) registrationTTL() time.Duration {
	return max(30*time.Second, 3*n.w.cfg.PollInterval)
}

// listening reports whether a notification would reach this worker now.
func (n *notifier) listening() bool {
	want := n.want.Load()
	return want > 0 && n.active.Load() == want
}

// setWaiting writes (waiting) or ends this worker's registration for
// queue. A failure is logged: the poll interval still bounds how late a
// job starts.
func (n *notifier) setWaiting(ctx context.Context, queue string, waiting bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	if waiting {
		_, err = n.w.queueClient(queue).db.Exec(ctx, `SELECT backoff.wait_for_jobs(p_queue => $1::text, p_worker => $2::text, p_ttl => $3::interval)`,
			queue, n.w.c.cfg.workerID, n.registrationTTL())
	} else {
		_, err = n.w.queueClient(queue).db.Exec(ctx, `SELECT backoff.stop_waiting(p_queue => $1::text, p_worker => $2::text)`,
			queue, n.w.c.cfg.workerID)
	}
	if err != nil {
		n.w.log.Warn("could not record whether the worker waits; polling covers it", "queue", queue, "waiting", waiting,
			"err", translate(fmt.Sprintf("register waiting on %q", queue), 0, err))
		return
	}
	n.mu.Lock()
	if waiting {
		n.renewed[queue] = time.Now()
	} else {
		delete(n.renewed, queue)
	}
	n.mu.Unlock()
}

// refresh renews an idle queue's registration once a third of its TTL has
// passed (or writes it again after a failed write).
func (n *notifier) refresh(ctx context.Context, queue string) {
	if !n.listening() {
		return
	}
	n.mu.Lock()
	at, ok := n.renewed[queue]
	n.mu.Unlock()
	if !ok || time.Since(at) > n.registrationTTL()/3 {
		n.setWaiting(ctx, queue, true)
	}
}

// unregisterAll ends the registrations still held, at shutdown.
func (n *notifier) unregisterAll(ctx context.Context) {
	n.mu.Lock()
	queues := make([]string, 0, len(n.renewed))
	for q := range n.renewed {
		queues = append(queues, q)
	}
	n.mu.Unlock()
	for _, q := range queues {
		n.setWaiting(ctx, q, false)
	}
}

// listen wakes the producer of a queue when backoff.enqueue notifies it.
// It holds one connection of the pool (in direct mode, of each shard pool
// of the Worker's queues, as they come), and reconnects after an error;
// polling covers the gap.
func (n *notifier) listen(ctx context.Context) {
	if n.w.direct == nil {
		n.want.Store(1)
		n.listenOn(ctx, n.w.pool)
		return
	}
	var loops sync.WaitGroup
	defer loops.Wait()
	started := map[int]bool{}
	for {
		for k, pool := range n.w.direct.served() {
			if !started[k] {
				started[k] = true
				n.want.Add(1)
				loops.Add(1)
				go func() { defer loops.Done(); n.listenOn(ctx, pool) }()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-n.w.direct.changed:
		}
	}
}

// listenOn listens on one pool's connection until ctx ends.
func (n *notifier) listenOn(ctx context.Context, pool *pgxpool.Pool) {
	retry := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listenOnce(ctx, pool)
		if ctx.Err() != nil {
			return
		}
		n.w.log.Warn("listen failed; polling until it reconnects", "err", err, "retry_in", retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(retry*2, 30*time.Second)
	}
}

func (n *notifier) listenOnce(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection to listen: %w", err)
	}
	// The connection leaves the pool for good: returned after LISTEN, it
	// would carry the subscription to its next user.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("listen %s: %w", NotifyChannel, err)
	}
	n.active.Add(1)
	defer n.active.Add(-1)
	byQueue := make(map[string]*producer, len(n.w.producers))
	for _, p := range n.w.producers {
		byQueue[p.cfg.Queue] = p
		// Look again: anything enqueued before LISTEN took effect, and a
		// producer that found its queue empty registers now.
		signal(p.wake)
	}
	for {
		msg, err := pc.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if p, ok := byQueue[msg.Payload]; ok {
			signal(p.wake)
		} else if msg.Payload == "" {
			for _, p := range n.w.producers {
				signal(p.wake)
			}
		}
	}
}
