package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// --- held snapshot: the queue free vs while an old snapshot holds back vacuum

// A queue that updates its job rows in place leaves a dead row version per
// claim and per completion. While one transaction anywhere in the database
// keeps an old snapshot, vacuum may remove none of them, and every claim
// walks the dead index entries at the head of the claim index. This section
// offers the same load free and then held, and prints how the queue keeps up
// (docs/benchmarks.md, "Held snapshot").

// The load's shape: producers enqueue a fixed batch per call at a fixed
// rate, claimers claim a batch and complete it in one more call.
const (
	mvccRate         = 2000.0 // jobs/s offered, all producers together
	mvccProducers    = 2
	mvccEnqueueBatch = 20
	mvccClaimers     = 4
	mvccClaimBatch   = 10
	mvccIdle         = 10 * time.Millisecond // a claimer that found nothing waits this long
	// mvccHolderApp names the holding session, so that it is found and
	// terminated by name after the load.
	mvccHolderApp = "backoff-bench-mvcc-holder"
)

// queueDriver is one way of storing and moving the queue's jobs: the three
// statements the load calls, on the table whose statistics the run prints.
// Another storage layout is measured by adding a driver to mvccDrivers.
type queueDriver struct {
	name  string // short, printed in every row's heading and the summary
	about string // what it runs, printed once
	table string // the relation holding the jobs (its size counts its indexes)
	// setup, when set, runs once on the run's fresh database, before the
	// VACUUM and CHECKPOINT that start every run.
	setup []string
	// enqueue inserts one due job per element of $1 (text[], queue names)
	// with the payload in $2 (jsonb[]); rows affected: the jobs inserted.
	enqueue string
	// claim claims up to mvccClaimBatch due jobs of queue $1 for worker
	// $2 and returns id, attempts (the token complete takes) and payload.
	claim string
	// complete completes the jobs $1 (bigint[]) that run attempts $2
	// (integer[]); rows affected: the jobs completed.
	complete string
	// maintenance, when set, runs once a second on a connection of its own
	// while the load runs (a layout that rotates or truncates would), as
	// the Workers run it.
	maintenance string
	// cron, when set, is the maintenance as a deployment without our
	// Workers runs it (backoffctl cron install): once a minute, for most
	// of the minute. The held-cron run uses it in place of maintenance.
	cron string
}

// mvccDrivers are the layouts measured: pgbackoff through its functions,
// and the bench's hand-written limit statements on public.raw_jobs, a copy
// of backoff.jobs with the same columns and indexes (bench.go).
func mvccDrivers() []queueDriver {
	return []queueDriver{
		{
			name:  "functions",
			about: "backoff.enqueue (the array form), backoff.claim, backoff.complete_many on backoff.jobs, backoff.rotate once a second",
			table: oursTable,
			// The array form as the Go client's EnqueueMany calls it.
			enqueue: `SELECT id FROM backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[],
				p_run_ats => NULL::timestamptz[], p_max_attempts => NULL::integer[], p_priorities => NULL::integer[],
				p_dedupe_keys => NULL::text[]) AS t(id)`,
			claim:    fmt.Sprintf(`SELECT id, attempts, payload FROM backoff.claim($1::text, $2::text, %d)`, mvccClaimBatch),
			complete: `SELECT id FROM backoff.complete_many($1::bigint[], $2::integer[]) AS t(id)`,
			// The live segments' rotation, as a Worker runs it beside reap
			// (docs/adr/0061).
			maintenance: `SELECT * FROM backoff.rotate()`,
			cron:        `CALL backoff.maintain()`,
		},
		{
			name:     "sql",
			about:    "hand-written INSERT, UPDATE with FOR UPDATE SKIP LOCKED, and UPDATE on public.raw_jobs (the limit's statements)",
			table:    rawTable,
			enqueue:  rawEnqueueManySQL,
			claim:    rawClaimSQL(mvccClaimBatch),
			complete: rawCompleteManySQL,
		},
	}
}

// rawClaimSQL is the limit's batch claim with n in place of its 100. A
// constant, not a parameter: with a parameter in LIMIT the plan cache
// plans the statement again on every call (sql/functions/claim.sql).
func rawClaimSQL(n int) string {
	if strings.Count(rawClaimManySQL, "LIMIT 100") != 1 {
		panic("rawClaimManySQL no longer has one LIMIT 100")
	}
	return strings.Replace(rawClaimManySQL, "LIMIT 100", fmt.Sprintf("LIMIT %d", n), 1)
}

// mvccHold is what holds vacuum back during a run: nothing, a REPEATABLE
// READ transaction opened before the load that runs hold and stays open
// until the load has stopped, or pg_dump of the database again and again.
type mvccHold struct {
	key   string // target name stem: free, held, held-xid, ...
	about string
	hold  string // "" for a free run; %s: the driver's table
	xid   bool   // hold takes a transaction id (the check expects one)
	// cron runs the driver's cron maintenance instead of its maintenance
	// (a driver without one has no such run).
	cron bool
	// dump runs pg_dump of the database, one after the other, while the
	// load runs (each holds ACCESS SHARE on every table and a snapshot
	// for as long as it runs).
	dump bool
	// targets: the run's target lines (completed/s against free, backlog,
	// claim p99 against free), or only the first.
	targets bool
}

var mvccHolds = []mvccHold{
	{key: "free", about: "nothing held"},
	{key: "held", about: "a REPEATABLE READ transaction opened before the load keeps its snapshot (SELECT 1, no transaction id)", hold: "SELECT 1", targets: true},
	{key: "held-xid", about: "the same transaction after it took a transaction id (pg_current_xact_id())", hold: "SELECT pg_catalog.pg_current_xact_id()", xid: true},
	{key: "held-reader", about: "the same transaction after it read the queue's table, as a report does: it holds ACCESS SHARE on it (every partition) until it ends", hold: "SELECT count(*) FROM %s", targets: true},
	{key: "held-cron", about: "held as in held, the maintenance as backoffctl cron install runs it: once a minute", hold: "SELECT 1", cron: true, targets: true},
	{key: "held-dump", about: "pg_dump of the database, one after the other, through the run", dump: true},
}

// mvccEvery is the sampling interval of a run of length d: the mode's, but
// at most a quarter of the run, so that a short run still shows a trend.
func mvccEvery(every, d time.Duration) time.Duration {
	return min(every, max(d/4, time.Millisecond))
}

// mvccIntervals is the number of intervals a run of length d sampled every
// every has (at least one); the run lasts that many whole intervals.
func mvccIntervals(d, every time.Duration) int {
	return max(1, int(d/every))
}

// mvccCounts is one reading of the load's counters and the server's WAL
// position.
type mvccCounts struct {
	at                           time.Time
	enqueued, claimed, completed int64
	wal                          int64         // bytes since 0/0
	live, dead, size, xminAge    int64         // read with wal, reported as they are
	p50, p99                     time.Duration // claim calls since the last reading
}

// backlog is what was enqueued and not yet claimed. An enqueuer counts its
// batch after the commit, so a claimer can count the same jobs first: the
// difference can dip below zero for a moment, and then no job is waiting.
func (c mvccCounts) backlog() int64 {
	return max(0, c.enqueued-c.claimed)
}

// mvccRow is one printed interval.
type mvccRow struct {
	end       time.Duration // since the load started
	done, enq float64       // jobs/s completed and enqueued in the interval
	backlog   int64         // due jobs not claimed at the interval's end
	p50, p99  time.Duration // claim latency per call in the interval, calls that found nothing included
	walPerJob float64       // WAL bytes in the interval / jobs completed in it
	live      int64
	dead      int64
	size      int64 // bytes, with indexes
	xminAge   int64 // age of the oldest xmin or xid of the database's sessions
}

// intervalRow turns two readings into the interval's row. Every job is due
// when it is enqueued, so the backlog (pending and retrying, due) is what
// was enqueued and not yet claimed.
func intervalRow(start time.Time, prev, cur mvccCounts) mvccRow {
	secs := cur.at.Sub(prev.at).Seconds()
	r := mvccRow{end: cur.at.Sub(start), backlog: cur.backlog(), p50: cur.p50, p99: cur.p99,
		live: cur.live, dead: cur.dead, size: cur.size, xminAge: cur.xminAge}
	if secs > 0 {
		r.done = float64(cur.completed-prev.completed) / secs
		r.enq = float64(cur.enqueued-prev.enqueued) / secs
	}
	if n := cur.completed - prev.completed; n > 0 {
		r.walPerJob = float64(cur.wal-prev.wal) / float64(n)
	}
	return r
}

// mvccResult is one run of one driver.
type mvccResult struct {
	rows       []mvccRow
	completed  int64
	walPerJob  float64 // over the whole run
	backlog    int64   // at the end
	maintained int64   // maintenance calls
}

func (r mvccResult) last() mvccRow {
	if len(r.rows) == 0 {
		return mvccRow{}
	}
	return r.rows[len(r.rows)-1]
}

// mvcc runs every hold with every driver (each run on a fresh database,
// vacuumed and checkpointed), prints each run's intervals and a summary,
// and records the targets of the functions driver.
func (b *bench) mvcc(ctx context.Context) error {
	if b.cfg.MVCCWorkflows {
		// Free and held only: the deployments' differences are the same
		// with dependencies as without.
		return b.mvccWith(ctx, []queueDriver{workflowsDriver()}, mvccHolds[:2], "mvcc-workflows-")
	}
	drivers := mvccDrivers()
	if b.cfg.MVCCOursOnly {
		drivers = drivers[:1]
	}
	holds, err := chooseHolds(mvccHolds, b.cfg.MVCCRuns)
	if err != nil {
		return err
	}
	return b.mvccWith(ctx, drivers, holds, "mvcc-")
}

// chooseHolds is the runs of all named in list (comma-separated; every run
// when empty), free first whether named or not.
func chooseHolds(all []mvccHold, list string) ([]mvccHold, error) {
	if list == "" {
		return all, nil
	}
	want := map[string]bool{"free": true}
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		if !slices.ContainsFunc(all, func(h mvccHold) bool { return h.key == k }) {
			return nil, fmt.Errorf("-mvcc-runs: no run %q (want some of free, held, held-xid, held-reader, held-cron, held-dump)", k)
		}
		want[k] = true
	}
	var out []mvccHold
	for _, h := range all {
		if want[h.key] {
			out = append(out, h)
		}
	}
	return out, nil
}

// workflowsDriver is the functions driver with dependencies and outputs in
// the mix: each enqueue is one graph of pairs, a parent and a child that
// waits for it, and every completion records an output.
func workflowsDriver() queueDriver {
	d := mvccDrivers()[0]
	d.name = "workflows"
	d.about = "backoff.enqueue_graph of pairs (a child after its parent), backoff.claim, backoff.complete_many with an output each, on backoff.jobs, backoff.rotate once a second"
	d.enqueue = `SELECT job_id FROM backoff.enqueue_graph((
		SELECT jsonb_agg(jsonb_build_object('ref', 'j' || t.i, 'queue', t.q, 'payload', t.p,
		                                    'depends_on', CASE WHEN t.i % 2 = 0 THEN jsonb_build_array('j' || (t.i - 1)) ELSE '[]'::jsonb END)
		                 ORDER BY t.i)
		FROM unnest($1::text[], $2::jsonb[]) WITH ORDINALITY AS t(q, p, i)))`
	d.complete = `SELECT id FROM backoff.complete_many($1::bigint[], $2::integer[],
		p_outputs => array_fill('{"rows": 42, "ok": true}'::jsonb, ARRAY[cardinality($1::bigint[])])) AS t(id)`
	return d
}

func (b *bench) mvccWith(ctx context.Context, drivers []queueDriver, holds []mvccHold, prefix string) error {
	n := mvccIntervals(b.cfg.MVCC, b.cfg.MVCCEvery)
	fmt.Fprintf(b.out, "\n== held snapshot: the queue free vs while an old snapshot holds back vacuum (%.0f jobs/s offered by %d producers enqueueing %d a call; %d claimers of %d + complete; %s a run, sampled every %s) ==\n",
		mvccRate, mvccProducers, mvccEnqueueBatch, mvccClaimers, mvccClaimBatch, time.Duration(n)*b.cfg.MVCCEvery, b.cfg.MVCCEvery)
	for _, d := range drivers {
		fmt.Fprintf(b.out, "driver %s: %s\n", d.name, d.about)
	}
	var version int
	if err := b.admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::integer`).Scan(&version); err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	major := version / 10000
	dump := pgDumpFor(major)
	results := make(map[string]map[string]mvccResult) // hold key -> driver name -> result
	for _, h := range holds {
		results[h.key] = map[string]mvccResult{}
		for _, d := range drivers {
			if h.cron && d.cron == "" {
				fmt.Fprintf(b.out, "\n-- %s, %s: no maintenance of its own, as held --\n", h.key, d.name)
				continue
			}
			if h.dump && dump == "" {
				fmt.Fprintf(b.out, "\n-- %s, %s: skipped, no pg_dump of version %d or later beside the server's binaries, on PATH or in /usr/lib/postgresql/*/bin --\n",
					h.key, d.name, major)
				continue
			}
			fmt.Fprintf(b.out, "\n-- %s, %s: %s --\n", h.key, d.name, h.about)
			res, err := b.mvccRun(ctx, d, h, n, dump)
			if err != nil {
				return fmt.Errorf("held snapshot, %s, %s: %w", h.key, d.name, err)
			}
			results[h.key][d.name] = res
		}
	}

	fmt.Fprintf(b.out, "\n== held snapshot: the last interval of each run, and the backlog at its end ==\n")
	fmt.Fprintf(b.out, "%-9s", "run")
	for _, d := range drivers {
		fmt.Fprintf(b.out, " %14s %14s %14s", d.name+" done/s", "claim p99", "backlog")
	}
	fmt.Fprintln(b.out)
	for _, h := range holds {
		fmt.Fprintf(b.out, "%-9s", h.key)
		for _, d := range drivers {
			r, ok := results[h.key][d.name]
			if !ok {
				fmt.Fprintf(b.out, " %14s %14s %14s", "-", "-", "-")
				continue
			}
			fmt.Fprintf(b.out, " %14.0f %14s %14d", r.last().done, ms(r.last().p99), r.backlog)
		}
		fmt.Fprintln(b.out)
	}
	for _, h := range holds[1:] {
		var parts []string
		for _, d := range drivers {
			if r, ok := results[h.key][d.name]; ok {
				parts = append(parts, fmt.Sprintf("%s %.2f", d.name, ratioOf(r.last().done, results["free"][d.name].last().done)))
			}
		}
		fmt.Fprintf(b.out, "%s / free, completed/s of the last interval: %s\n", h.key, strings.Join(parts, ", "))
	}

	// Targets are ours: the first driver; WAL lines set it beside the second.
	ours := drivers[0].name
	free := results["free"][ours]
	for _, h := range holds[1:] {
		r, ok := results[h.key][ours]
		if !ok {
			continue
		}
		b.target(prefix+h.key+"-vs-free", ratioOf(r.last().done, free.last().done), 0.95)
		if h.targets {
			b.targetAtMost(prefix+h.key+"-backlog-s", float64(r.backlog)/mvccRate, 1.00)
			b.targetAtMost(prefix+h.key+"-claim-p99-ratio", ratioOf(float64(r.last().p99), float64(free.last().p99)), 2.00)
		}
	}
	if len(drivers) > 1 {
		for _, h := range holds {
			if sql, ok := results[h.key][drivers[1].name]; ok {
				b.wal(prefix+h.key, results[h.key][ours].walPerJob, sql.walPerJob)
			}
		}
	}
	return nil
}

// mvccLoad is the running load of one run: producers, claimers and the
// driver's maintenance, each on a connection of its own.
type mvccLoad struct {
	enqueued, claimed, completed, maintained atomic.Int64
	lat                                      latencies
	stop                                     chan struct{}
	wg                                       sync.WaitGroup
	errMu                                    sync.Mutex
	err                                      error
	failed                                   chan struct{} // closed at the first error
}

func (l *mvccLoad) fail(err error) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.err == nil {
		l.err = err
		close(l.failed)
	}
}

// halt stops the load after the calls under way and returns its first
// error.
func (l *mvccLoad) halt() error {
	close(l.stop)
	l.wg.Wait()
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// waitOrStop waits d and says false when the load was told to stop first.
func (l *mvccLoad) waitOrStop(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stop:
		return false
	case <-t.C:
		return true
	}
}

// startLoad starts the producers, the claimers and the maintenance on
// connections of pool. Calls are never cancelled half way: each goroutine
// checks stop between calls, so what a call did is counted.
func startLoad(ctx context.Context, pool *pgxpool.Pool, d queueDriver, every time.Duration) (*mvccLoad, error) {
	l := &mvccLoad{stop: make(chan struct{}), failed: make(chan struct{})}
	var conns []*pgxpool.Conn
	k := mvccProducers + mvccClaimers
	if d.maintenance != "" {
		k++
	}
	for range k {
		c, err := pool.Acquire(ctx)
		if err != nil {
			for _, c := range conns {
				c.Release()
			}
			return nil, fmt.Errorf("acquire a load connection: %w", err)
		}
		conns = append(conns, c)
	}
	queues, payloads := make([]string, mvccEnqueueBatch), make([]string, mvccEnqueueBatch)
	for i := range queues {
		queues[i], payloads[i] = queue, "{}"
	}
	run := func(c *pgxpool.Conn, f func(*pgxpool.Conn) error) {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer c.Release()
			if err := f(c); err != nil {
				l.fail(err)
			}
		}()
	}
	for i := range mvccProducers {
		run(conns[i], func(c *pgxpool.Conn) error {
			_, err := paceBatches(ctx, mvccRate/mvccProducers, mvccEnqueueBatch, l.stop, func() error {
				tag, err := c.Exec(ctx, d.enqueue, queues, payloads)
				if err == nil && tag.RowsAffected() != mvccEnqueueBatch {
					err = fmt.Errorf("enqueued %d of %d", tag.RowsAffected(), mvccEnqueueBatch)
				}
				if err != nil {
					return fmt.Errorf("enqueue: %w", err)
				}
				l.enqueued.Add(mvccEnqueueBatch)
				return nil
			})
			return err
		})
	}
	for i := range mvccClaimers {
		worker := fmt.Sprintf("mvcc-%d", i)
		run(conns[mvccProducers+i], func(c *pgxpool.Conn) error {
			for {
				select {
				case <-l.stop:
					return nil
				default:
				}
				t := time.Now()
				cl, err := queryClaimed(ctx, c, d.claim, queue, worker)
				l.lat.add(time.Since(t))
				if err != nil {
					return fmt.Errorf("claim: %w", err)
				}
				if len(cl.ids) == 0 {
					if !l.waitOrStop(mvccIdle) {
						return nil
					}
					continue
				}
				l.claimed.Add(int64(len(cl.ids)))
				tag, err := c.Exec(ctx, d.complete, cl.ids, cl.attempts)
				if err == nil && tag.RowsAffected() != int64(len(cl.ids)) {
					err = fmt.Errorf("completed %d of %d", tag.RowsAffected(), len(cl.ids))
				}
				if err != nil {
					return fmt.Errorf("complete: %w", err)
				}
				l.completed.Add(int64(len(cl.ids)))
			}
		})
	}
	if d.maintenance != "" {
		run(conns[k-1], func(c *pgxpool.Conn) error {
			// A call may last most of its interval (backoff.maintain):
			// stopping the load cancels it.
			mctx, cancel := untilClosed(ctx, l.stop)
			defer cancel()
			next := time.Now()
			for {
				if _, err := c.Exec(mctx, d.maintenance); err != nil {
					if mctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("maintenance: %w", err)
				}
				l.maintained.Add(1)
				next = next.Add(every)
				if !l.waitOrStop(max(time.Until(next), 0)) {
					return nil
				}
			}
		})
	}
	return l, nil
}

// paceBatches calls send once per batch of jobs offered at rate jobs/s:
// batch k (from 0) goes when (k+1) x batch jobs have been offered since
// the start, never before, so what was sent never runs ahead of the offer;
// a late call is caught up by the next ones, up to the offer. It returns
// the batches sent when stop is closed.
func paceBatches(ctx context.Context, rate float64, batch int, stop <-chan struct{}, send func() error) (int, error) {
	began := time.Now()
	for k := 0; ; k++ {
		wait := time.Until(began.Add(batchDue(k, rate, batch)))
		t := time.NewTimer(max(wait, 0))
		select {
		case <-stop:
			t.Stop()
			return k, nil
		case <-ctx.Done():
			t.Stop()
			return k, ctx.Err()
		case <-t.C:
		}
		if err := send(); err != nil {
			return k, err
		}
	}
}

// batchDue is when batch k of a paced producer may go: once the rate has
// offered all of its jobs.
func batchDue(k int, rate float64, batch int) time.Duration {
	return time.Duration(float64((k+1)*batch) / rate * float64(time.Second))
}

// mvccRun is one run: a fresh database, the driver's setup, VACUUM ANALYZE
// and CHECKPOINT, the hold opened, n intervals of load sampled, the load
// stopped, the hold terminated.
func (b *bench) mvccRun(ctx context.Context, d queueDriver, h mvccHold, n int, pgDump string) (mvccResult, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return mvccResult{}, err
	}
	defer drop()
	for _, s := range d.setup {
		if _, err := db.pool.Exec(ctx, s); err != nil {
			return mvccResult{}, fmt.Errorf("setup: %w", err)
		}
	}
	if err := settle(ctx, db, d.table); err != nil {
		return mvccResult{}, err
	}
	if h.hold != "" {
		holder, err := b.openHold(ctx, db, h, d.table)
		if err != nil {
			return mvccResult{}, err
		}
		defer func() { _ = holder.Close(context.Background()) }()
	}
	every := time.Second
	if h.cron {
		d.maintenance, every = d.cron, time.Minute
	}

	read := func(l *mvccLoad) (mvccCounts, error) {
		c := mvccCounts{at: time.Now(), enqueued: l.enqueued.Load(), claimed: l.claimed.Load(), completed: l.completed.Load()}
		ds := l.lat.take()
		c.p50, c.p99 = pct(ds, 0.5), pct(ds, 0.99)
		// The load's backends send their table statistics at most a second
		// late (PGSTAT_MIN_INTERVAL), which an interval of seconds absorbs:
		// live and dead tuples are approximate by that much.
		// Summed over the table's partitions (backoff.jobs: its segments,
		// docs/adr/0061); a plain table has no partition tree and stands
		// alone.
		err := db.pool.QueryRow(ctx, `SELECT coalesce(sum(s.n_live_tup), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint,
				sum(pg_catalog.pg_total_relation_size(p.relid))::bigint,
				(pg_catalog.pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,
				(SELECT coalesce(max(greatest(pg_catalog.age(a.backend_xmin), pg_catalog.age(a.backend_xid))), 0)
				 FROM pg_catalog.pg_stat_activity AS a WHERE a.datname = pg_catalog.current_database())
			FROM (SELECT t.relid FROM pg_catalog.pg_partition_tree($1::regclass) AS t WHERE t.isleaf
			      UNION ALL
			      SELECT $1::regclass WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_partition_tree($1::regclass))) AS p
			LEFT JOIN pg_catalog.pg_stat_user_tables AS s ON s.relid = p.relid`,
			d.table).Scan(&c.live, &c.dead, &c.size, &c.wal, &c.xminAge)
		if err != nil {
			return c, fmt.Errorf("sample the table's statistics: %w", err)
		}
		return c, nil
	}

	load, err := startLoad(ctx, db.pool, d, every)
	if err != nil {
		return mvccResult{}, err
	}
	var dumps atomic.Int64
	dumped := make(chan error, 1)
	if h.dump {
		go func() { dumped <- dumpUntil(ctx, pgDump, db.url, load.stop, &dumps) }()
	}
	first, err := read(load)
	if err != nil {
		_ = load.halt()
		return mvccResult{}, err
	}
	fmt.Fprintf(b.out, "%8s %8s %8s %9s %10s %10s %10s %10s %9s %10s %9s\n",
		"time", "done/s", "enq/s", "backlog", "claim p50", "claim p99", "live tup", "dead tup", "size MB", "WAL B/job", "xmin age")
	res := mvccResult{}
	prev := first
	t := time.NewTicker(b.cfg.MVCCEvery)
	defer t.Stop()
	for range n {
		select {
		case <-t.C:
		case <-load.failed:
			return mvccResult{}, load.halt()
		case <-ctx.Done():
			_ = load.halt()
			return mvccResult{}, ctx.Err()
		}
		cur, err := read(load)
		if err != nil {
			_ = load.halt()
			return mvccResult{}, err
		}
		r := intervalRow(first.at, prev, cur)
		res.rows = append(res.rows, r)
		fmt.Fprintf(b.out, "%8s %8.0f %8.0f %9d %10s %10s %10d %10d %9.1f %10.0f %9d\n",
			fmt.Sprintf("%.1fs", r.end.Seconds()), r.done, r.enq, r.backlog, ms(r.p50), ms(r.p99), r.live, r.dead,
			float64(r.size)/1e6, r.walPerJob, r.xminAge)
		prev = cur
	}
	if err := load.halt(); err != nil {
		return mvccResult{}, err
	}
	if h.dump {
		if err := <-dumped; err != nil {
			return mvccResult{}, err
		}
	}
	if h.hold != "" {
		if err := b.endHold(ctx, db); err != nil {
			return mvccResult{}, err
		}
	}
	res.completed, res.backlog, res.maintained = prev.completed-first.completed, prev.backlog(), load.maintained.Load()
	if res.completed > 0 {
		res.walPerJob = float64(prev.wal-first.wal) / float64(res.completed)
	}
	elapsed := prev.at.Sub(first.at).Seconds()
	fmt.Fprintf(b.out, "run: %d jobs completed (%.0f/s), backlog at the end %d (%.2f s of the offer), WAL %.0f B/job",
		res.completed, float64(res.completed)/max(elapsed, 1e-9), res.backlog, float64(res.backlog)/mvccRate, res.walPerJob)
	if d.maintenance != "" {
		fmt.Fprintf(b.out, ", %d maintenance calls", res.maintained)
	}
	if h.dump {
		fmt.Fprintf(b.out, ", %d dumps", dumps.Load())
	}
	fmt.Fprintln(b.out)
	return res, nil
}

// openHold opens the holding transaction on a connection of its own, named
// mvccHolderApp, and checks that the server sees it hold: an xmin, and an
// xid when the hold takes one.
func (b *bench) openHold(ctx context.Context, db *database, h mvccHold, table string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(db.url)
	if err != nil {
		return nil, err
	}
	cc.RuntimeParams["application_name"] = mvccHolderApp
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connect the hold: %w", err)
	}
	hold := h.hold
	if strings.Contains(hold, "%s") {
		hold = fmt.Sprintf(hold, table)
	}
	for _, s := range []string{"BEGIN ISOLATION LEVEL REPEATABLE READ", hold} {
		if _, err := conn.Exec(ctx, s); err != nil {
			_ = conn.Close(ctx)
			return nil, fmt.Errorf("hold: %s: %w", s, err)
		}
	}
	var xmin, xid bool
	if err := b.admin.QueryRow(ctx, `SELECT backend_xmin IS NOT NULL, backend_xid IS NOT NULL FROM pg_catalog.pg_stat_activity
		WHERE application_name = $1 AND datname = $2`, mvccHolderApp, db.name).Scan(&xmin, &xid); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("find the hold: %w", err)
	}
	if !xmin || xid != h.xid {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("the hold has xmin %t and xid %t, want xmin and xid %t", xmin, xid, h.xid)
	}
	return conn, nil
}

// endHold terminates the holding session by its name, as an operator would
// end a forgotten transaction.
func (b *bench) endHold(ctx context.Context, db *database) error {
	var n int
	if err := b.admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(pid))
		FROM pg_catalog.pg_stat_activity WHERE application_name = $1 AND datname = $2`, mvccHolderApp, db.name).Scan(&n); err != nil {
		return fmt.Errorf("terminate the hold: %w", err)
	}
	if n != 1 {
		return errors.New("terminate the hold: it was gone before the load ended")
	}
	return nil
}

// dumpUntil runs pgDump of the database at url, one dump after the other,
// until stop is closed (the dump then running is ended), counting the
// dumps that finished.
func dumpUntil(ctx context.Context, pgDump, url string, stop <-chan struct{}, dumps *atomic.Int64) error {
	dctx, cancel := untilClosed(ctx, stop)
	defer cancel()
	for dctx.Err() == nil {
		var stderr strings.Builder
		cmd := exec.CommandContext(dctx, pgDump, "--dbname", url, "--file", os.DevNull)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			if dctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("pg_dump: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		dumps.Add(1)
	}
	return nil
}

// pgDumpFor is a pg_dump that can dump a server of major version major
// (pg_dump refuses a server newer than itself): the first of the one
// beside the server's binaries (BACKOFF_PG_BINDIR), pg_dump on PATH and
// Debian's /usr/lib/postgresql/*/bin/pg_dump, newest first, whose version
// is major or later; "" when there is none.
func pgDumpFor(major int) string {
	var found []string
	if dir := os.Getenv("BACKOFF_PG_BINDIR"); dir != "" {
		found = append(found, filepath.Join(dir, "pg_dump"))
	}
	if p, err := exec.LookPath("pg_dump"); err == nil {
		found = append(found, p)
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	slices.Reverse(debian)
	for _, p := range append(found, debian...) {
		if pgDumpMajor(p) >= major {
			return p
		}
	}
	return ""
}

// pgDumpMajor is the major version pg_dump at path prints ("pg_dump
// (PostgreSQL) 15.18 (Debian …)"), 0 when it cannot be run.
func pgDumpMajor(path string) int {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return 0
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return 0
	}
	v, _ := strconv.Atoi(strings.SplitN(f[2], ".", 2)[0])
	return v
}

// untilClosed is ctx, cancelled too once stop is closed: a call that may
// outlast the load (backoff.maintain, pg_dump) ends with it.
func untilClosed(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-c.Done():
		}
	}()
	return c, cancel
}
