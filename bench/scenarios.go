package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/client"
)

// The two tables a run works on: ours (through the backoff functions or the
// Go client) and the limit's bare copy.
const (
	oursTable = "backoff.jobs"
	rawTable  = "public.raw_jobs"
)

// currentSegment is where enqueue puts a live job in backoff.jobs (the
// current segment, docs/adr/0061); a seeded live job goes there too, so
// that a run works on the layout users have.
const currentSegment = "backoff._current_segment()"

// liveSegment is the column and value a seed of live jobs adds for table:
// the current segment for ours, nothing for the limit's table.
func liveSegment(table string) (column, value string) {
	if table != oursTable {
		return "", ""
	}
	return ", segment", ", " + currentSegment
}

// abScenario is one line family of the table: the same work done by ours
// and by the limit, alternately, on a fresh database.
type abScenario struct {
	name    string
	key     string // the target name's stem (targets.go), e.g. claim-complete-1tx-sql
	path    string // "sql" (our functions called directly) or "go" (the client package)
	clients []int
	// seed prepares table for one run with n clients (nil: empty table).
	seed func(ctx context.Context, b *bench, db *database, table string, n int) error
	// maxOps caps a run (0: time only); runFor overrides the run length.
	maxOps int64
	runFor time.Duration
	ours   func(ctx context.Context, conn *pgxpool.Conn) (step, error)
	limit  func(ctx context.Context, conn *pgxpool.Conn) (step, error)
	target float64 // reported, not asserted; 0: none
	// listen: a session LISTENs on backoff_jobs during both sides' runs, as
	// an idle worker's wait does.
	listen bool
}

var payload = json.RawMessage(`{}`)

// --- seeding ---------------------------------------------------------------

// seedDue inserts n due pending jobs (maxAttempts 0: NULL) and prepares the
// table as autovacuum would have: vacuumed, analyzed, checkpointed.
func seedDue(ctx context.Context, db *database, table string, n, maxAttempts int) error {
	var ma any
	if maxAttempts > 0 {
		ma = maxAttempts
	}
	col, val := liveSegment(table)
	_, err := db.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (queue, payload, policy, max_attempts, run_at, created_at%s)
		SELECT $1, '{}', 'default', $3::integer, now() - interval '1 minute', now() - interval '1 minute'%s
		FROM generate_series(1, $2)`, table, col, val), queue, n, ma)
	if err != nil {
		return fmt.Errorf("seed %d due jobs in %s: %w", n, table, err)
	}
	return settle(ctx, db, table)
}

// seedExpired inserts n running jobs whose lease expired a second ago.
func seedExpired(ctx context.Context, db *database, table string, n int) error {
	col, val := liveSegment(table)
	_, err := db.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (queue, payload, policy, status, attempts, run_at, created_at,
			lease_until, locked_by, last_attempted_at%s)
		SELECT $1, '{}', 'default', 'running', 1, now() - interval '1 minute', now() - interval '1 minute',
			now() - interval '1 second', 'crashed-worker', now() - interval '31 seconds'%s
		FROM generate_series(1, $2)`, table, col, val), queue, n)
	if err != nil {
		return fmt.Errorf("seed %d expired leases in %s: %w", n, table, err)
	}
	return settle(ctx, db, table)
}

func settle(ctx context.Context, db *database, table string) error {
	for _, s := range []string{"VACUUM ANALYZE " + table, "CHECKPOINT"} {
		if _, err := db.pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func truncate(ctx context.Context, db *database) error {
	_, err := db.pool.Exec(ctx, "TRUNCATE backoff.jobs, public.raw_jobs RESTART IDENTITY")
	if err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

// --- the limit: minimal hand-written SQL on public.raw_jobs ---------------

// The same state changes as our functions: status, attempts, lease,
// locked_by and timestamps; fail and reap also record the error and its
// history entry (the 20 most recent kept) and decide retry or dead letter.
const (
	rawEnqueueSQL = `INSERT INTO public.raw_jobs (queue, payload, policy, run_at, created_at)
		VALUES ($1, $2, 'default', now(), now()) RETURNING id`

	rawEnqueueManySQL = `INSERT INTO public.raw_jobs (queue, payload, policy, run_at, created_at)
		SELECT t.queue, t.payload, 'default', now(), now() FROM unnest($1::text[], $2::jsonb[]) AS t(queue, payload)
		RETURNING id`

	rawClaimOneSQL = `UPDATE public.raw_jobs AS j
		SET status = 'running', attempts = j.attempts + 1, lease_until = now() + interval '30 seconds',
		    locked_by = $2, last_attempted_at = now()
		WHERE j.id = (SELECT c.id FROM public.raw_jobs AS c
		              WHERE c.queue = $1 AND c.status IN ('pending', 'retrying') AND c.run_at <= now()
		              ORDER BY c.priority DESC, c.run_at, c.id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING j.id, j.attempts, j.payload`

	rawClaimManySQL = `UPDATE public.raw_jobs AS j
		SET status = 'running', attempts = j.attempts + 1, lease_until = now() + interval '30 seconds',
		    locked_by = $2, last_attempted_at = now()
		WHERE j.id = ANY (ARRAY(SELECT c.id FROM public.raw_jobs AS c
		              WHERE c.queue = $1 AND c.status IN ('pending', 'retrying') AND c.run_at <= now()
		              ORDER BY c.priority DESC, c.run_at, c.id LIMIT 100 FOR UPDATE SKIP LOCKED))
		RETURNING j.id, j.attempts, j.payload`

	rawCompleteSQL = `UPDATE public.raw_jobs
		SET status = 'completed', completed_at = now(), lease_until = NULL, locked_by = NULL
		WHERE id = $1 AND status = 'running' AND attempts = $2`

	rawCompleteManySQL = `UPDATE public.raw_jobs AS j
		SET status = 'completed', completed_at = now(), lease_until = NULL, locked_by = NULL
		FROM unnest($1::bigint[], $2::integer[]) AS t(id, attempt)
		WHERE j.id = t.id AND j.attempts = t.attempt AND j.status = 'running'`

	rawSettleFailure = `
		status = CASE WHEN j.attempts >= coalesce(j.max_attempts, 5) THEN 'dead_lettered' ELSE 'retrying' END,
		dead_letter_reason = CASE WHEN j.attempts >= coalesce(j.max_attempts, 5) THEN 'max_attempts' END,
		completed_at = CASE WHEN j.attempts >= coalesce(j.max_attempts, 5) THEN now() END,
		run_at = CASE WHEN j.attempts >= coalesce(j.max_attempts, 5) THEN j.run_at ELSE now() + %s END,
		lease_until = NULL, locked_by = NULL, last_failed_at = now(), last_error = %s,
		errors = (CASE WHEN jsonb_array_length(j.errors) >= 20 THEN j.errors - 0 ELSE j.errors END)
		         || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', %s::text,
		                                                 'worker', j.locked_by, 'kind', %s))`

	rawFailSQL = `UPDATE public.raw_jobs AS j SET` +
		`%s WHERE j.id = $1 AND j.status = 'running' AND j.attempts = $2`

	rawReapSQL = `UPDATE public.raw_jobs AS j SET` +
		`%s WHERE j.id = ANY (ARRAY(SELECT r.id FROM public.raw_jobs AS r WHERE r.lease_until < now()
		                      ORDER BY r.lease_until LIMIT 1000 FOR UPDATE SKIP LOCKED))`
)

var (
	rawFail = fmt.Sprintf(rawFailSQL, fmt.Sprintf(rawSettleFailure, "$4::interval", "$3", "$3", "'error'"))
	rawReap = fmt.Sprintf(rawReapSQL, fmt.Sprintf(rawSettleFailure,
		"least(interval '1 second' * power(2, j.attempts - 1), interval '60 seconds')",
		"'lease expired'", "'lease expired'", "'lease_expired'"))
)

// claimed is what a claim hands to the worker.
type claimed struct {
	ids      []int64
	attempts []int32
}

func scanClaimed(rows pgx.Rows) (claimed, error) {
	var c claimed
	for rows.Next() {
		var (
			id  int64
			att int32
			p   []byte
		)
		if err := rows.Scan(&id, &att, &p); err != nil {
			return c, err
		}
		c.ids = append(c.ids, id)
		c.attempts = append(c.attempts, att)
	}
	return c, rows.Err()
}

func queryClaimed(ctx context.Context, conn *pgxpool.Conn, sql string, args ...any) (claimed, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return claimed{}, err
	}
	return scanClaimed(rows)
}

func fixed(s step) func(context.Context, *pgxpool.Conn) (step, error) {
	return func(context.Context, *pgxpool.Conn) (step, error) { return s, nil }
}

func newClient(ctx context.Context, conn *pgxpool.Conn) (*client.Client, error) {
	c, err := client.New(ctx, conn, client.WithWorkerID("bench-worker"))
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	return c, nil
}

// --- steps -------------------------------------------------------------------

func rawEnqueue(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	var id int64
	if err := conn.QueryRow(ctx, rawEnqueueSQL, queue, payload).Scan(&id); err != nil {
		return 0, fmt.Errorf("raw enqueue: %w", err)
	}
	return 1, nil
}

func oursEnqueue(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	var id int64
	if err := conn.QueryRow(ctx, `SELECT backoff.enqueue($1::text, $2::jsonb)`, queue, payload).Scan(&id); err != nil {
		return 0, fmt.Errorf("enqueue: %w", err)
	}
	return 1, nil
}

const bulkSize = 100

func rawEnqueueMany(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	qs := make([]string, bulkSize)
	ps := make([]string, bulkSize)
	for i := range qs {
		qs[i], ps[i] = queue, "{}"
	}
	rows, err := conn.Query(ctx, rawEnqueueManySQL, qs, ps)
	if err != nil {
		return 0, fmt.Errorf("raw enqueue many: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("raw enqueue many: %w", err)
	}
	return len(ids), nil
}

func goEnqueueMany(ctx context.Context, conn *pgxpool.Conn) (step, error) {
	c, err := newClient(ctx, conn)
	if err != nil {
		return nil, err
	}
	jobs := make([]client.NewJob, bulkSize)
	for i := range jobs {
		jobs[i] = client.NewJob{Queue: queue, Payload: payload}
	}
	return func(ctx context.Context, _ *pgxpool.Conn) (int, error) {
		ids, err := c.EnqueueMany(ctx, jobs)
		return len(ids), err
	}, nil
}

func goEnqueue(ctx context.Context, conn *pgxpool.Conn) (step, error) {
	c, err := newClient(ctx, conn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ *pgxpool.Conn) (int, error) {
		_, err := c.Enqueue(ctx, queue, payload)
		return 1, err
	}, nil
}

func rawClaimComplete(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	c, err := queryClaimed(ctx, conn, rawClaimOneSQL, queue, "bench-worker")
	if err != nil || len(c.ids) == 0 {
		return 0, wrap("raw claim", err)
	}
	tag, err := conn.Exec(ctx, rawCompleteSQL, c.ids[0], c.attempts[0])
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("job %d not completed", c.ids[0])
	}
	return 1, wrap("raw complete", err)
}

func oursClaimComplete(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	c, err := queryClaimed(ctx, conn, `SELECT id, attempts, payload FROM backoff.claim($1::text, $2::text, 1)`, queue, "bench-worker")
	if err != nil || len(c.ids) == 0 {
		return 0, wrap("claim", err)
	}
	var id int64
	err = conn.QueryRow(ctx, `SELECT id FROM backoff.complete($1::bigint, $2::integer)`, c.ids[0], c.attempts[0]).Scan(&id)
	return 1, wrap("complete", err)
}

func goClaimComplete(ctx context.Context, conn *pgxpool.Conn) (step, error) {
	c, err := newClient(ctx, conn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ *pgxpool.Conn) (int, error) {
		jobs, err := c.Claim(ctx, queue, 1, 0)
		if err != nil || len(jobs) == 0 {
			return 0, err
		}
		_, err = c.Complete(ctx, jobs[0].ID, jobs[0].Token)
		return 1, err
	}, nil
}

func rawClaimBatch(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	c, err := queryClaimed(ctx, conn, rawClaimManySQL, queue, "bench-worker")
	if err != nil || len(c.ids) == 0 {
		return 0, wrap("raw claim 100", err)
	}
	tag, err := conn.Exec(ctx, rawCompleteManySQL, c.ids, c.attempts)
	if err == nil && tag.RowsAffected() != int64(len(c.ids)) {
		err = fmt.Errorf("completed %d of %d", tag.RowsAffected(), len(c.ids))
	}
	return len(c.ids), wrap("raw complete many", err)
}

func oursClaimBatch(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	c, err := queryClaimed(ctx, conn, `SELECT id, attempts, payload FROM backoff.claim($1::text, $2::text, 100)`, queue, "bench-worker")
	if err != nil || len(c.ids) == 0 {
		return 0, wrap("claim 100", err)
	}
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM backoff.complete_many($1::bigint[], $2::integer[])`, c.ids, c.attempts).Scan(&n)
	if err == nil && n != len(c.ids) {
		err = fmt.Errorf("completed %d of %d", n, len(c.ids))
	}
	return len(c.ids), wrap("complete_many", err)
}

func goClaimBatch(ctx context.Context, conn *pgxpool.Conn) (step, error) {
	c, err := newClient(ctx, conn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ *pgxpool.Conn) (int, error) {
		jobs, err := c.Claim(ctx, queue, 100, 0)
		if err != nil || len(jobs) == 0 {
			return 0, err
		}
		ids := make([]int64, len(jobs))
		att := make([]int, len(jobs))
		for i, j := range jobs {
			ids[i], att[i] = j.ID, j.Token
		}
		done, err := c.CompleteMany(ctx, ids, att)
		if err == nil && len(done) != len(ids) {
			err = fmt.Errorf("completed %d of %d", len(done), len(ids))
		}
		return len(jobs), err
	}, nil
}

func rawRetryCycle(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	c, err := queryClaimed(ctx, conn, rawClaimOneSQL, queue, "bench-worker")
	if err != nil || len(c.ids) == 0 {
		return 0, wrap("raw claim", err)
	}
	tag, err := conn.Exec(ctx, rawFail, c.ids[0], c.attempts[0], "boom", "0 seconds")
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("job %d not failed", c.ids[0])
	}
	return 1, wrap("raw fail", err)
}

func oursRetryCycle(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	c, err := queryClaimed(ctx, conn, `SELECT id, attempts, payload FROM backoff.claim($1::text, $2::text, 1)`, queue, "bench-worker")
	if err != nil || len(c.ids) == 0 {
		return 0, wrap("claim", err)
	}
	var id int64
	err = conn.QueryRow(ctx, `SELECT id FROM backoff.fail($1::bigint, $2::integer, $3::text, interval '0')`, c.ids[0], c.attempts[0], "boom").Scan(&id)
	return 1, wrap("fail", err)
}

func rawReapStep(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	tag, err := conn.Exec(ctx, rawReap)
	return int(tag.RowsAffected()), wrap("raw reap", err)
}

func oursReapStep(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT backoff.reap(now(), 1000)`).Scan(&n)
	return n, wrap("reap", err)
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// --- the scenario list ---------------------------------------------------------

// dueSeed seeds enough due jobs for a run at up to perSecond jobs/s.
func dueSeed(perSecond float64, maxAttempts int) func(context.Context, *bench, *database, string, int) error {
	return func(ctx context.Context, b *bench, db *database, table string, _ int) error {
		n := int(perSecond * b.cfg.RunFor.Seconds())
		return seedDue(ctx, db, table, max(n, 200), maxAttempts)
	}
}

func (b *bench) scenarios() []abScenario {
	cl := b.cfg.Clients
	reapRun := 2 * time.Minute
	reapClients := []int{1, 4}
	if b.cfg.Trim {
		reapClients = []int{1}
	}
	return []abScenario{
		{name: "enqueue 1/tx", key: "enqueue-1tx", path: "sql", clients: cl, listen: true, ours: fixed(oursEnqueue), limit: fixed(rawEnqueue), target: 0.90},
		{name: "enqueue 1/tx", key: "enqueue-1tx-go", path: "go", clients: cl, listen: true, ours: goEnqueue, limit: fixed(rawEnqueue)},
		{name: "enqueue 100/tx (EnqueueMany)", key: "enqueue-many", path: "go", clients: cl, listen: true, ours: goEnqueueMany, limit: fixed(rawEnqueueMany), target: 0.85},
		{name: "claim+complete 1/tx", key: "claim-complete-1tx-sql", path: "sql", clients: cl, seed: dueSeed(9000, 0), ours: fixed(oursClaimComplete), limit: fixed(rawClaimComplete), target: 0.90},
		{name: "claim+complete 1/tx", key: "claim-complete-1tx-go", path: "go", clients: cl, seed: dueSeed(9000, 0), ours: goClaimComplete, limit: fixed(rawClaimComplete), target: 0.85},
		{name: "claim 100+complete_many", key: "claim100-complete-many-sql", path: "sql", clients: cl, seed: dueSeed(90000, 0), ours: fixed(oursClaimBatch), limit: fixed(rawClaimBatch), target: 0.90},
		{name: "claim 100+complete_many", key: "claim100-complete-many-go", path: "go", clients: cl, seed: dueSeed(90000, 0), ours: goClaimBatch, limit: fixed(rawClaimBatch), target: 0.90},
		{name: "claim+fail retry cycle", key: "retry-cycle-sql", path: "sql", clients: cl,
			seed: func(ctx context.Context, _ *bench, db *database, table string, n int) error {
				return seedDue(ctx, db, table, 50*n+100, 1_000_000)
			}, ours: fixed(oursRetryCycle), limit: fixed(rawRetryCycle)},
		{name: fmt.Sprintf("reap %d expired", b.cfg.ReapJobs), key: "reap-" + count(b.cfg.ReapJobs), path: "sql", clients: reapClients,
			seed: func(ctx context.Context, b *bench, db *database, table string, _ int) error {
				return seedExpired(ctx, db, table, b.cfg.ReapJobs)
			}, maxOps: int64(b.cfg.ReapJobs), runFor: reapRun, ours: fixed(oursReapStep), limit: fixed(rawReapStep), target: 0.80},
	}
}

// count writes 100000 as 100k.
func count(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// targetName is a line's target name: the scenario's key and the client
// count (reap's single-client line is plain reap-100k).
func (l line) targetName() string {
	if strings.HasPrefix(l.key, "reap-") && l.clients == 1 {
		return l.key
	}
	return fmt.Sprintf("%s-%dc", l.key, l.clients)
}

// line is one printed row.
type line struct {
	name, path string
	key        string // target name stem; "" for lines without one
	clients    int
	ours       float64 // median jobs/s
	limit      float64
	lo, hi     float64 // range of the per-round ratios
	target     float64
	walOurs    float64 // median WAL bytes per job
	walLimit   float64
}

func (l line) ratio() float64 {
	if l.limit == 0 {
		return 0
	}
	return l.ours / l.limit
}

// runAB measures one scenario at one client count: Rounds rounds, each
// running ours and the limit on freshly truncated and seeded tables, the
// order alternating so that neither always runs first.
func (b *bench) runAB(ctx context.Context, db *database, s abScenario, n int) (line, error) {
	runFor := s.runFor
	if runFor == 0 {
		runFor = b.cfg.RunFor
	}
	if s.listen {
		stop, err := listen(ctx, db)
		if err != nil {
			return line{}, err
		}
		defer stop()
	}
	var ours, limit, ratios, walOurs, walLimit []float64
	for r := range b.cfg.Rounds {
		sides := []bool{true, false}
		if r%2 == 1 {
			sides = []bool{false, true}
		}
		var o, l float64
		for _, isOurs := range sides {
			table, mk := rawTable, s.limit
			if isOurs {
				table, mk = oursTable, s.ours
			}
			if err := truncate(ctx, db); err != nil {
				return line{}, err
			}
			if s.seed != nil {
				if err := s.seed(ctx, b, db, table, n); err != nil {
					return line{}, err
				}
			}
			from, err := b.walPosition(ctx)
			if err != nil {
				return line{}, err
			}
			res, err := runClients(ctx, db.pool, n, runFor, s.maxOps, mk)
			if err != nil {
				return line{}, fmt.Errorf("%s (%s, %d clients): %w", s.name, s.path, n, err)
			}
			if res.walBytes, err = b.walSince(ctx, from); err != nil {
				return line{}, err
			}
			if isOurs {
				o = res.rate()
				walOurs = append(walOurs, res.walPerJob())
			} else {
				l = res.rate()
				walLimit = append(walLimit, res.walPerJob())
			}
		}
		ours, limit = append(ours, o), append(limit, l)
		if l > 0 {
			ratios = append(ratios, o/l)
		}
	}
	ln := line{name: s.name, key: s.key, path: s.path, clients: n, ours: median(ours), limit: median(limit), target: s.target,
		walOurs: median(walOurs), walLimit: median(walLimit)}
	if len(ratios) > 0 {
		ln.lo, ln.hi = minMax(ratios)
	}
	return ln, nil
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// listen keeps one session LISTENing on backoff_jobs (the channel of
// enqueue's wake-ups) and draining its notifications until stop is called,
// as an idle worker would: with a listener, NOTIFY's cost is the real one.
func listen(ctx context.Context, db *database) (stop func(), err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire the listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN backoff_jobs"); err != nil {
		conn.Release()
		return nil, fmt.Errorf("listen: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := conn.Conn().WaitForNotification(lctx); err != nil {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
		// A cancelled wait leaves the connection unusable: close it rather
		// than give it back to the pool.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}, nil
}
