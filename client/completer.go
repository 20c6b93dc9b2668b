package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// completer batches the completions of every queue of a Worker into
// complete_many calls: under load the completions of many handlers, of all
// queues, share one statement; when idle a completion is written at once. One flush runs at a
// time; what arrives meanwhile forms the next batch, capped at
// maxCompleteBatch.
type completer struct {
	w       *Worker
	mu      sync.Mutex
	ids     []int64
	att     []int
	queues  []string
	outs    []json.RawMessage // each job's output, nil for none (batchedOutputBytes)
	stopped bool
	kick    chan struct{}
	quit    chan struct{}
	exited  chan struct{}
}

// maxCompleteBatch caps one CompleteMany call.
const maxCompleteBatch = 5000

func newCompleter(w *Worker) *completer {
	return &completer{w: w, kick: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
}

// batchedOutputBytes: an output whose JSON text is at most this long rides
// the batch. As jsonb it stays under 1 KiB (a value's binary form takes at
// most about five times its shortest text), the smallest max_output_bytes
// a queue may have, so it cannot be refused and fail the whole batch; a
// larger one is completed by a call of its own.
const batchedOutputBytes = 128

// add queues a completion, with its output (nil: none, else at most
// batchedOutputBytes); false when the completer has stopped and the caller
// must complete the job itself.
func (c *completer) add(id int64, attempt int, queue string, output json.RawMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.ids = append(c.ids, id)
	c.att = append(c.att, attempt)
	c.queues = append(c.queues, queue)
	c.outs = append(c.outs, output)
	signal(c.kick)
	return true
}

// take removes up to maxCompleteBatch queued completions.
func (c *completer) take(stop bool) (ids []int64, att []int, queues []string, outs []json.RawMessage, more bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.ids), maxCompleteBatch)
	ids, att, queues, outs = c.ids[:n:n], c.att[:n:n], c.queues[:n:n], c.outs[:n:n]
	c.ids, c.att, c.queues, c.outs = c.ids[n:], c.att[n:], c.queues[n:], c.outs[n:]
	if len(c.ids) == 0 {
		c.ids, c.att, c.queues, c.outs = nil, nil, nil, nil
	}
	if stop {
		c.stopped = true
	}
	return ids, att, queues, outs, len(c.ids) > 0
}

func (c *completer) run() {
	defer close(c.exited)
	for {
		stop := false
		select {
		case <-c.kick:
		case <-c.quit:
			stop = true
		}
		for {
			ids, att, queues, outs, more := c.take(stop)
			if len(ids) > 0 {
				c.flush(ids, att, queues, outs)
			}
			if !more {
				break
			}
		}
		if stop {
			return
		}
	}
}

// stop flushes what is queued and ends the completer; later completions
// are written one by one by their callers.
func (c *completer) stop() {
	close(c.quit)
	<-c.exited
}

func (c *completer) flush(ids []int64, att []int, queues []string, outs []json.RawMessage) {
	if c.w.direct == nil {
		c.flushOn(c.w.c, ids, att, queues, outs)
		return
	}
	// Direct mode: one complete_many per shard, on the shard in the ids.
	type part struct {
		ids    []int64
		att    []int
		queues []string
		outs   []json.RawMessage
	}
	parts := map[*Client]*part{}
	var order []*Client
	for i, id := range ids {
		jc := c.w.jobClient(id)
		pt := parts[jc]
		if pt == nil {
			pt = &part{}
			parts[jc] = pt
			order = append(order, jc)
		}
		pt.ids, pt.att, pt.queues, pt.outs = append(pt.ids, id), append(pt.att, att[i]), append(pt.queues, queues[i]), append(pt.outs, outs[i])
	}
	for _, jc := range order {
		pt := parts[jc]
		c.flushOn(jc, pt.ids, pt.att, pt.queues, pt.outs)
	}
}

// flushOn completes one batch with one complete_many through jc.
func (c *completer) flushOn(jc *Client, ids []int64, att []int, queues []string, outs []json.RawMessage) {
	w := c.w
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var done []int64
	calls := 0
	err := w.retryTransient(ctx, func(ctx context.Context) error {
		var err error
		calls++
		done, err = completeBatch(ctx, jc, ids, att, outs)
		return err
	})
	if err != nil {
		w.log.Error("could not record completions; the reaper will retry the jobs", "jobs", len(ids), "err", err)
		return
	}
	if calls > 1 && len(done) < len(ids) {
		done = append(done, w.confirmCompletions(ctx, jc, ids, att, done)...)
	}
	got := make(map[int64]bool, len(done))
	for _, id := range done {
		got[id] = true
	}
	perQueue := map[string]int{}
	for i, id := range ids {
		if got[id] {
			perQueue[queues[i]]++
			continue
		}
		w.c.cfg.metrics.leaseLost(ctx, queues[i])
		w.log.Warn("completion refused: the attempt no longer holds the job", "job", id, "token", att[i])
	}
	for q, n := range perQueue {
		w.c.cfg.metrics.completed(ctx, q, n)
	}
	for _, p := range w.producers {
		if perQueue[p.cfg.Queue] > 0 {
			p.settle() // a half-open breaker's probe may have closed it
		}
	}
}

// confirmCompletions returns those of the refused completions (ids and
// att, minus done) that an earlier, repeated call made: its reply was lost,
// so the repeat was refused because the attempt had already completed the
// job. An attempt's token never repeats (docs/adr/0020), so a completed job
// whose attempts equal the token was completed by that attempt and no other.
// Without the check such a completion was logged as refused and counted as
// a lost lease. If the check itself fails, the refusals stand. jc is the
// client the completions were sent through (the jobs' shard in direct
// mode).
func (w *Worker) confirmCompletions(ctx context.Context, jc *Client, ids []int64, att []int, done []int64) []int64 {
	ok := make(map[int64]bool, len(done))
	for _, id := range done {
		ok[id] = true
	}
	var refused []int64
	var tokens []int32
	for i, id := range ids {
		if !ok[id] {
			refused, tokens = append(refused, id), append(tokens, int32(att[i]))
		}
	}
	rows, err := jc.db.Query(ctx, confirmCompletionsSQL, refused, tokens)
	if err == nil {
		var mine []int64
		mine, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err == nil {
			if len(mine) > 0 {
				w.log.Info("completions confirmed: the reply of an earlier call was lost", "jobs", len(mine))
			}
			return mine
		}
	}
	w.log.Warn("could not check whether refused completions were made by a call whose reply was lost", "jobs", len(refused), "err", err)
	return nil
}

// confirmCompletionsSQL: which of these (job, attempt) tokens completed
// their job. Through backoff.job, which applies the caller's queue scope.
const confirmCompletionsSQL = `SELECT j.id FROM unnest($1::bigint[], $2::integer[]) AS t(id, attempt)
	CROSS JOIN LATERAL backoff.job(t.id) AS j
	WHERE j.attempts = t.attempt AND j.status = 'completed'`

// completeBatch runs backoff.complete_many for CompleteMany and for the
// completer (one statement for the completions of every queue); each
// caller counts the metrics (the completer per queue). outputs (nil, or
// one per id, nil for none) are sent only when one is given, so that a
// batch without outputs is the call it always was.
func completeBatch(ctx context.Context, c *Client, ids []int64, attempts []int, outputs []json.RawMessage) ([]int64, error) {
	op := fmt.Sprintf("complete %d jobs", len(ids))
	att := make([]int32, len(attempts))
	for i, a := range attempts {
		att[i] = int32(a)
	}
	params := []arg{
		{"p_job_ids", "bigint[]", ids},
		{"p_attempts", "integer[]", att},
	}
	if slices.ContainsFunc(outputs, func(o json.RawMessage) bool { return o != nil }) {
		outs := make([]*string, len(outputs))
		for i, o := range outputs {
			if o != nil {
				s := string(o)
				outs[i] = &s
			}
		}
		params = append(params, arg{"p_outputs", "jsonb[]", outs})
	}
	call, args := c.fn("complete_many", params...)
	rows, err := c.db.Query(ctx, "SELECT id FROM "+call+" AS t(id)", args...)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, translate(op, 0, err)
	}
	return done, nil
}
