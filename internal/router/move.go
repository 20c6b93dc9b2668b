package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/sharding"
)

// Moving a live queue between shards (docs/adr/0092-moving-a-live-queue.md).
// The mover marks the queue 'in' on the shard it goes to and 'out' on the
// shard it leaves (which then refuses its enqueues and gives no claims),
// waits for the transactions that did not see the mark, holds the queue's
// dedupe keys on the new shard, flips the router's placement, and then
// copies schedules, waiting jobs and dead letters in batches: inserted on
// the new shard under new ids (recorded in backoff.moved_jobs there, which
// makes a second copy a no-op), then deleted where they were. Running jobs
// finish or are reaped where they are; what they leave waiting is copied
// too, until nothing of the queue is unfinished on the old shard. Then the
// controls' state moves and the 'in' mark goes. Every step can be run
// again: a mover killed anywhere finishes when run again, and Abort moves
// everything back.

// The steps of a move, in their order, by the names MoveOptions.Step is
// told as each is done (a copy and a delete once per batch).
const (
	StepMarkTarget = "mark-target"
	StepMarkSource = "mark-source"
	StepDrain      = "drain"
	StepKeys       = "keys"
	StepFlip       = "flip"
	StepSchedules  = "schedules"
	StepCopy       = "copy"
	StepDelete     = "delete"
	StepControls   = "controls"
	StepFinish     = "finish"
)

// ErrMoveWaiting is returned (wrapped) when a move's wait for running jobs
// or for transactions in flight on the shard it leaves outlasts
// MoveOptions.Wait: the move stays where it is, and running it again goes
// on from there.
var ErrMoveWaiting = errors.New("router: the move waits")

// MoveOptions tunes MoveQueue.
type MoveOptions struct {
	// Abort moves a queue whose move is under way back to the shard it
	// came from (the to argument is ignored).
	Abort bool
	// Batch is how many jobs one copy takes (default 100: a shorter burst
	// of work on both shards than a larger batch, for the same share).
	Batch int
	// Wait bounds the waits for the old shard's transactions in flight
	// and running jobs (default 10 minutes); past it the move returns
	// ErrMoveWaiting, resumable.
	Wait time.Duration
	// Poll is the pause between two looks while waiting (default 200 ms).
	Poll time.Duration
	// Share is the share of the time the copy of waiting jobs works:
	// after each batch it pauses for as long as that keeps its share, so
	// that the shards' other queues keep their CPU (default 0.25: a batch
	// that took 10 ms is followed by a 30 ms pause; 1: no pause, the
	// fastest move). Outside (0, 1], the default.
	Share float64
	// Step, when set, is called after each step is done.
	Step func(step string)
}

// MoveResult says what a run of MoveQueue did.
type MoveResult struct {
	Queue string `json:"queue"`
	From  int    `json:"from"`
	To    int    `json:"to"`
	// Jobs is the number of waiting jobs and dead letters copied by this
	// run; Schedules the schedules.
	Jobs      int `json:"jobs"`
	Schedules int `json:"schedules"`
	// Changed is false when the queue was already on To, with no move
	// under way.
	Changed bool `json:"changed"`
}

// MoveQueue moves queue, with its waiting jobs, dead letters, schedules and
// the state of its controls, to shard to, while producers and workers go on
// through the router (docs/sharding.md, moving a queue). The shards are
// reached at the addresses the router lists, with base's user, password
// and TLS settings; the login must be an admin on the router and the
// shards. Run it again after any failure: it resumes. With opts.Abort it
// moves a queue whose move is under way back where it came from.
func MoveQueue(ctx context.Context, router *pgx.Conn, base *pgx.ConnConfig, queue string, to int, opts MoveOptions) (MoveResult, error) {
	res := MoveResult{Queue: queue, From: -1, To: to}
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	if opts.Share <= 0 || opts.Share > 1 {
		opts.Share = 0.25
	}
	step := func(s string) {
		if opts.Step != nil {
			opts.Step(s)
		}
	}
	fail := func(err error) (MoveResult, error) {
		return res, fmt.Errorf("move queue %q: %w", queue, err)
	}
	if queue == "" {
		return fail(errors.New("a queue name is not empty"))
	}

	// One mover per queue: a session lock on the router, released when the
	// mover's connection ends (a killed mover's too).
	var locked bool
	if err := router.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended('backoff.move:' || $1, 0))`, queue).Scan(&locked); err != nil {
		return fail(err)
	}
	if !locked {
		return fail(errors.New("another move of this queue is running"))
	}
	defer func() {
		_, _ = router.Exec(context.WithoutCancel(ctx), `SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended('backoff.move:' || $1, 0))`, queue)
	}()

	shards, err := connectShards(ctx, router, base)
	if err != nil {
		return fail(err)
	}
	defer func() {
		for _, c := range shards {
			c.Close(context.WithoutCancel(ctx))
		}
	}()

	// Where the queue is and whether a move is under way: the shard
	// marked 'in' holds the move's destination, its peer the origin.
	var placed int
	if err := router.QueryRow(ctx, `SELECT backoff.router_queue_shard($1)`, queue).Scan(&placed); err != nil {
		return fail(err)
	}
	// The 'in' mark of the highest generation is the move under way (an
	// abort marks the origin 'in' before it marks the destination 'out').
	in, origin := -1, -1
	var gen, inGen int64
	for k, c := range shards {
		var dir string
		var peer int
		var g int64
		err := c.QueryRow(ctx, `SELECT m.direction, m.peer, m.generation FROM backoff.queue_moves AS m WHERE m.queue = $1`, queue).Scan(&dir, &peer, &g)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("shard %d: %w", k, err))
		}
		gen = max(gen, g)
		if dir == "in" && (in < 0 || g > inGen) {
			in, origin, inGen = k, peer, g
		}
	}
	var from int
	switch {
	case in >= 0 && opts.Abort:
		from, to = in, origin
	case in >= 0 && to != in:
		return fail(fmt.Errorf("it is moving from shard %d to shard %d: run the move to shard %d again to finish it, or abort it (--abort)", origin, in, in))
	case in >= 0:
		from = origin
	case opts.Abort:
		return fail(errors.New("no move of this queue is under way"))
	default:
		from = placed
	}
	res.From, res.To = from, to
	if to < 0 || to >= len(shards) || from < 0 || from >= len(shards) {
		return fail(fmt.Errorf("the router has shards 0 to %d, not %d", len(shards)-1, max(to, from)))
	}
	if from == to {
		return res, nil
	}
	res.Changed = true
	src, dst := shards[from], shards[to]
	if opts.Abort {
		// A copy whose delete was interrupted left the job on both
		// shards: the copy may have run since, so the original goes
		// before anything moves back.
		var copied []json.RawMessage
		if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'copied')`, queue).Scan(&copied); err != nil {
			return fail(fmt.Errorf("read the jobs copied to shard %d: %w", from, err))
		}
		if len(copied) > 0 {
			if _, err := dst.Exec(ctx, `SELECT backoff._transfer_forget($1, 'jobs', $2::jsonb[])`, queue, copied); err != nil {
				return fail(fmt.Errorf("delete the copied jobs on shard %d: %w", to, err))
			}
		}
	}
	if in < 0 {
		// A queue in a workflow is refused before anything changes (and
		// again once the origin is marked, below, for a graph enqueued
		// meanwhile).
		if _, err := src.Exec(ctx, `SELECT backoff._transfer_out($1, 'check')`, queue); err != nil {
			return fail(fmt.Errorf("shard %d: %w", from, err))
		}
	}
	deadline := time.Now().Add(opts.Wait)

	// 1. Marks (of a new generation, unless this run resumes a move whose
	// marks are there): the destination first, so that it holds the
	// dedupe keys of the origin's jobs before any enqueue reaches it; then
	// the origin, which from then on refuses the queue's enqueues and
	// gives no claims of it.
	if in != to || origin != from {
		gen++
	}
	if _, err := dst.Exec(ctx, `SELECT backoff._transfer_mark($1, 'in', $2, $3)`, queue, from, gen); err != nil {
		return fail(fmt.Errorf("mark shard %d: %w", to, err))
	}
	step(StepMarkTarget)
	if _, err := src.Exec(ctx, `SELECT backoff._transfer_mark($1, 'out', $2, $3)`, queue, to, gen); err != nil {
		return fail(fmt.Errorf("mark shard %d: %w", from, err))
	}
	step(StepMarkSource)
	// 2. The transactions in flight on the origin when it was marked may
	// not have seen the mark (an enqueue, a claim): wait for them.
	if err := waitForTransactions(ctx, src, deadline, opts.Poll); err != nil {
		return fail(fmt.Errorf("shard %d: %w", from, err))
	}
	step(StepDrain)
	// 3. The dedupe keys of the origin's unfinished jobs, held on the
	// destination for them.
	var keys []json.RawMessage
	if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'keys')`, queue).Scan(&keys); err != nil {
		return fail(fmt.Errorf("read the dedupe keys on shard %d: %w", from, err))
	}
	if _, err := dst.Exec(ctx, `SELECT backoff._transfer_in($1, 'keys', $2::jsonb[])`, queue, keys); err != nil {
		return fail(fmt.Errorf("hold the dedupe keys on shard %d: %w", to, err))
	}
	step(StepKeys)
	// 4. The flip: enqueues and claims go to the destination.
	if _, err := router.Exec(ctx, `SELECT backoff._router_flip_queue($1, $2)`, queue, to); err != nil {
		return fail(fmt.Errorf("place it on shard %d: %w", to, err))
	}
	step(StepFlip)
	// 5. Schedules: written on the destination, then deleted on the origin
	// (which fires none of them any more since it was marked).
	var schedules []json.RawMessage
	if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'schedules')`, queue).Scan(&schedules); err != nil {
		return fail(fmt.Errorf("read the schedules on shard %d: %w", from, err))
	}
	if len(schedules) > 0 {
		var names []json.RawMessage
		if err := dst.QueryRow(ctx, `SELECT backoff._transfer_in($1, 'schedules', $2::jsonb[])`, queue, schedules).Scan(&names); err != nil {
			return fail(fmt.Errorf("write the schedules on shard %d: %w", to, err))
		}
		if len(names) < len(schedules) {
			return fail(fmt.Errorf("%d of its %d schedules have names that another queue's schedules have on shard %d: rename them (drop and put again), then run the move again", len(schedules)-len(names), len(schedules), to))
		}
		var n int
		if err := src.QueryRow(ctx, `SELECT backoff._transfer_forget($1, 'schedules', $2::jsonb[])`, queue, names).Scan(&n); err != nil {
			return fail(fmt.Errorf("delete the schedules on shard %d: %w", from, err))
		}
		res.Schedules = n
	}
	step(StepSchedules)
	// 6. Waiting jobs and dead letters, in batches, until nothing of the
	// queue is unfinished on the origin; not a queue in a workflow.
	if _, err := src.Exec(ctx, `SELECT backoff._transfer_out($1, 'check')`, queue); err != nil {
		return fail(fmt.Errorf("shard %d: %w", from, err))
	}
	batches := 0
	for {
		began := time.Now()
		var rows []json.RawMessage
		if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'jobs', $2)`, queue, opts.Batch).Scan(&rows); err != nil {
			return fail(fmt.Errorf("read jobs on shard %d: %w", from, err))
		}
		if len(rows) > 0 {
			var copied []json.RawMessage
			if err := dst.QueryRow(ctx, `SELECT backoff._transfer_in($1, 'jobs', $2::jsonb[])`, queue, rows).Scan(&copied); err != nil {
				return fail(fmt.Errorf("copy jobs to shard %d: %w", to, err))
			}
			step(StepCopy)
			var n int
			if err := src.QueryRow(ctx, `SELECT backoff._transfer_forget($1, 'jobs', $2::jsonb[])`, queue, copied).Scan(&n); err != nil {
				return fail(fmt.Errorf("delete copied jobs on shard %d: %w", from, err))
			}
			res.Jobs += n
			step(StepDelete)
			if batches++; batches%50 == 0 {
				if err := freeKeys(ctx, src, dst, queue); err != nil {
					return fail(err)
				}
			}
			if err := pause(ctx, time.Duration(float64(time.Since(began))*(1-opts.Share)/opts.Share)); err != nil {
				return fail(err)
			}
			continue
		}
		var state []json.RawMessage
		if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'state')`, queue).Scan(&state); err != nil {
			return fail(fmt.Errorf("read the queue's state on shard %d: %w", from, err))
		}
		var st struct {
			Waiting      int64 `json:"waiting"`
			DeadLettered int64 `json:"dead_lettered"`
			Blocked      int64 `json:"blocked"`
			Running      int64 `json:"running"`
		}
		if len(state) == 1 {
			if err := json.Unmarshal(state[0], &st); err != nil {
				return fail(err)
			}
		}
		if st.Blocked > 0 {
			return fail(fmt.Errorf("it has %d blocked jobs on shard %d, whose edges stay on one shard: let its workflows finish, then run the move again, or abort it", st.Blocked, from))
		}
		if err := freeKeys(ctx, src, dst, queue); err != nil {
			return fail(err)
		}
		if st.Waiting == 0 && st.DeadLettered == 0 && st.Running == 0 {
			break
		}
		if st.Waiting > 0 || st.DeadLettered > 0 {
			continue
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%w: %d jobs still running on shard %d; they finish or are reaped there: run the move again", ErrMoveWaiting, st.Running, from))
		}
		if err := pause(ctx, opts.Poll); err != nil {
			return fail(err)
		}
	}
	// 7. The state of the controls (breaker, token bucket, failure log),
	// which the last running jobs on the origin may have changed.
	var controls []json.RawMessage
	if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'controls')`, queue).Scan(&controls); err != nil {
		return fail(fmt.Errorf("read the controls' state on shard %d: %w", from, err))
	}
	if _, err := dst.Exec(ctx, `SELECT backoff._transfer_in($1, 'controls', $2::jsonb[])`, queue, controls); err != nil {
		return fail(fmt.Errorf("write the controls' state on shard %d: %w", to, err))
	}
	if _, err := src.Exec(ctx, `SELECT backoff._transfer_forget($1, 'controls', NULL)`, queue); err != nil {
		return fail(fmt.Errorf("delete the controls' state on shard %d: %w", from, err))
	}
	step(StepControls)
	// 8. Done: the shards forget the keys held for each other's jobs, and
	// the destination its mark. The origin keeps its mark, refusing the
	// queue's enqueues (a producer that found the old shard before the
	// move) until a move brings the queue back.
	for k, c := range map[int]*pgx.Conn{to: dst, from: src} {
		// Keys either shard holds for jobs of the other (the origin's from
		// an earlier move, aborted before its flip) hold nothing now.
		if _, err := c.Exec(ctx, `SELECT backoff._transfer_forget($1, 'keys', '{}'::jsonb[])`, queue); err != nil {
			return fail(fmt.Errorf("free dedupe keys on shard %d: %w", k, err))
		}
	}
	if _, err := dst.Exec(ctx, `SELECT backoff._transfer_mark($1, NULL, NULL, NULL)`, queue); err != nil {
		return fail(fmt.Errorf("unmark shard %d: %w", to, err))
	}
	step(StepFinish)
	return res, nil
}

// freeKeys frees the dedupe keys that the destination holds for jobs of
// the origin that are no longer unfinished there (completed, cancelled,
// dead-lettered since): a finished job holds no key. Safe at any time of
// the move: a job of the origin that is finished stays finished (the
// origin replays nothing of the queue once marked).
func freeKeys(ctx context.Context, src, dst *pgx.Conn, queue string) error {
	var held, keep []json.RawMessage
	if err := dst.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'held')`, queue).Scan(&held); err != nil {
		return fmt.Errorf("read the dedupe keys held for the old shard: %w", err)
	}
	if len(held) == 0 {
		return nil
	}
	if err := src.QueryRow(ctx, `SELECT backoff._transfer_out($1, 'unfinished', p_ids => $2::jsonb[])`, queue, held).Scan(&keep); err != nil {
		return fmt.Errorf("read which jobs are unfinished on the old shard: %w", err)
	}
	if keep == nil {
		keep = []json.RawMessage{}
	}
	if _, err := dst.Exec(ctx, `SELECT backoff._transfer_forget($1, 'keys', $2::jsonb[])`, queue, keep); err != nil {
		return fmt.Errorf("free dedupe keys: %w", err)
	}
	return nil
}

// connectShards connects to every shard the router lists, with base's
// user, password and TLS settings.
func connectShards(ctx context.Context, router *pgx.Conn, base *pgx.ConnConfig) ([]*pgx.Conn, error) {
	rows, err := router.Query(ctx, `SELECT s.shard, s.conninfo FROM backoff.router_shards() AS s ORDER BY s.shard`)
	if err != nil {
		return nil, fmt.Errorf("list the router's shards: %w", err)
	}
	listed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sharding.Shard, error) {
		var s sharding.Shard
		return s, r.Scan(&s.Number, &s.Conninfo)
	})
	if err != nil {
		return nil, fmt.Errorf("list the router's shards: %w", err)
	}
	var out []*pgx.Conn
	for i, s := range listed {
		if s.Number != i {
			err = fmt.Errorf("the router lists shard %d in place %d", s.Number, i)
		}
		var cfg *pgx.ConnConfig
		if err == nil {
			cfg, err = s.ConnConfig(base)
		}
		var c *pgx.Conn
		if err == nil {
			c, err = pgx.ConnectConfig(ctx, cfg)
		}
		if err != nil {
			for _, c := range out {
				c.Close(ctx)
			}
			return nil, fmt.Errorf("connect to shard %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// waitForTransactions waits until every transaction that was open in the
// database of conn when it was called has ended (as CREATE INDEX
// CONCURRENTLY does: by their virtual transaction ids).
func waitForTransactions(ctx context.Context, conn *pgx.Conn, deadline time.Time, poll time.Duration) error {
	var open []string
	err := conn.QueryRow(ctx, `
SELECT coalesce(pg_catalog.array_agg(l.virtualxid), '{}')
FROM pg_catalog.pg_locks AS l
JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'virtualxid' AND l.granted AND l.pid <> pg_catalog.pg_backend_pid()
  AND a.datname = pg_catalog.current_database() AND a.backend_type = 'client backend'`).Scan(&open)
	if err != nil {
		return fmt.Errorf("list the transactions in flight: %w", err)
	}
	for len(open) > 0 {
		err := conn.QueryRow(ctx, `
SELECT coalesce(pg_catalog.array_agg(l.virtualxid), '{}')
FROM pg_catalog.pg_locks AS l
WHERE l.locktype = 'virtualxid' AND l.granted AND l.virtualxid = ANY ($1)`, open).Scan(&open)
		if err != nil {
			return fmt.Errorf("look at the transactions in flight: %w", err)
		}
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d transactions that were open when the queue was marked are still open", ErrMoveWaiting, len(open))
		}
		if err := pause(ctx, poll); err != nil {
			return err
		}
	}
	return nil
}

// pause waits for d or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
