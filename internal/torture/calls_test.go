package torture

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// op is one kind of call and how often a session makes it.
type op struct {
	name   string
	weight int
	run    func(*session, context.Context)
}

// ops: producers and workers mostly; the maintenance and operator calls
// often enough that each happens many times a second across the sessions.
var ops = []op{
	{"enqueue", 10, (*session).enqueue},
	{"enqueue many", 4, (*session).enqueueMany},
	{"claim", 16, (*session).claim},
	{"acquire", 3, (*session).acquire},
	{"heartbeat", 4, (*session).heartbeat},
	{"complete", 14, (*session).complete},
	{"complete_many", 6, (*session).completeMany},
	{"fail", 6, (*session).fail},
	{"snooze", 3, (*session).snooze},
	{"cancel", 2, (*session).cancel},
	{"replay", 3, (*session).replay},
	{"reap", 3, (*session).reap},
	{"rotate", 6, (*session).rotate},
	{"fire_schedules", 4, (*session).fireSchedules},
	{"prune", 2, (*session).prune},
	{"pause_queue", 1, (*session).pauseQueue},
	{"resume_queue", 2, (*session).resumeQueue},
}

var opsWeight = func() int {
	n := 0
	for _, o := range ops {
		n += o.weight
	}
	return n
}()

// step makes one call drawn from the session's random source.
func (s *session) step(ctx context.Context) {
	n := s.rng.IntN(opsWeight)
	for _, o := range ops {
		if n < o.weight {
			o.run(s, ctx)
			return
		}
		n -= o.weight
	}
}

// now is the simulated time of the call: the shared clock moved on by up
// to 200 ms.
func (s *session) now() time.Time {
	return s.run.clock.tick(time.Duration(s.rng.IntN(200)) * time.Millisecond)
}

// think is how long a transaction stays open after its call: mostly not at
// all, sometimes a few milliseconds, as an application's transaction that
// enqueues among its own writes.
func (s *session) think() time.Duration {
	if s.rng.IntN(4) == 0 {
		return time.Duration(s.rng.IntN(20)) * time.Millisecond
	}
	return 0
}

func (s *session) queue() string { return allQueues[s.rng.IntN(len(allQueues))] }

func (s *session) jobQueue() string { return jobQueues[s.rng.IntN(len(jobQueues))] }

// dedupeKey is nil or one of a few keys, so that keys collide often.
func (s *session) dedupeKey() *string {
	if s.rng.IntN(5) < 3 {
		return nil
	}
	k := fmt.Sprintf("key-%d", s.rng.IntN(25))
	return &k
}

func (s *session) worker() string { return fmt.Sprintf("torture-worker-%d", s.id) }

// done records a call that took effect or may have: its acts, and what it
// tells the other sessions. A call with an error it does not document is a
// finding.
func (s *session) done(o outcome, err error, name string, start time.Duration, acts ...act) bool {
	switch o {
	case okCommitted, cutInCommit:
		f := acknowledged
		if o == cutInCommit {
			f = uncertain
		}
		end := s.run.since()
		for i := range acts {
			acts[i].fate, acts[i].session, acts[i].start, acts[i].end = f, s.id, start, end
		}
		s.run.rec.add(acts...)
		return true
	case unexpected:
		s.run.finding(fmt.Sprintf("client %d: %s: unexpected error: %v", s.id, name, err))
	}
	return false
}

func (s *session) enqueue(ctx context.Context) {
	q, key, now, start := s.jobQueue(), s.dedupeKey(), s.now(), s.run.since()
	var id int64
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT backoff.enqueue($1::text, '{}'::jsonb, NULL::timestamptz, NULL::integer, $2::integer, $3::text, $4::timestamptz)`,
			q, s.rng.IntN(3), key, now).Scan(&id)
	})
	if s.done(o, err, "enqueue", start, act{kind: "enqueue", job: id}) {
		s.run.board.addJobs(id)
	}
}

func (s *session) enqueueMany(ctx context.Context) {
	n := 1 + s.rng.IntN(5)
	queues, keys := make([]string, n), make([]*string, n)
	for i := range n {
		queues[i], keys[i] = s.jobQueue(), s.dedupeKey()
	}
	if s.rng.IntN(2) == 0 {
		keys = make([]*string, n) // a batch without keys: the set-based INSERT
	}
	now, start := s.now(), s.run.since()
	var ids []int64
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT * FROM backoff.enqueue($1::text[], NULL::jsonb[], NULL::timestamptz[],
			NULL::integer[], NULL::integer[], $2::text[], $3)`, queues, keys, now)
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		return err
	})
	acts := make([]act, len(ids))
	for i, id := range ids {
		acts[i] = act{kind: "enqueue", job: id}
	}
	if s.done(o, err, "enqueue many", start, acts...) {
		s.run.board.addJobs(ids...)
	}
}

// claimed scans the (id, attempts) rows of claim and acquire.
func claimed(rows pgx.Rows) ([]token, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (token, error) {
		var t token
		err := r.Scan(&t.job, &t.attempt)
		return t, err
	})
}

// lease is on the simulated clock: 20 to 80 s, a few hundred calls.
func (s *session) lease() time.Duration { return time.Duration(20+s.rng.IntN(61)) * time.Second }

func (s *session) claim(ctx context.Context) {
	// Mostly the producers' queues, whose backlog must keep down for the
	// segments to switch; the schedules' too.
	q := s.queue()
	if s.rng.IntN(5) > 0 {
		q = s.jobQueue()
	}
	limit, lease, now, start := 1+s.rng.IntN(5), s.lease(), s.now(), s.run.since()
	var ts []token
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, attempts FROM backoff.claim($1, $2, $3, $4, $5)`,
			q, s.worker(), limit, lease, now)
		if err == nil {
			ts, err = claimed(rows)
		}
		return err
	})
	acts := make([]act, len(ts))
	for i, t := range ts {
		acts[i] = act{kind: "claim", job: t.job, attempt: t.attempt}
	}
	if s.done(o, err, "claim", start, acts...) {
		s.run.board.addTokens(ts...)
	}
}

func (s *session) acquire(ctx context.Context) {
	id, ok := s.run.board.job(s.rng)
	if !ok {
		return
	}
	lease, now, start := s.lease(), s.now(), s.run.since()
	var ts []token
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, attempts FROM backoff.acquire($1, $2, $3, $4)`, id, s.worker(), lease, now)
		if err == nil {
			ts, err = claimed(rows)
		}
		return err
	})
	acts := make([]act, len(ts))
	for i, t := range ts {
		acts[i] = act{kind: "acquire", job: t.job, attempt: t.attempt}
	}
	if s.done(o, err, "acquire", start, acts...) {
		s.run.board.addTokens(ts...)
	}
}

// settle makes one by-token call: complete, fail, snooze or heartbeat.
func (s *session) settle(ctx context.Context, kind, sql string, args func(t token, now time.Time) []any) {
	t, ok := s.run.board.token(s.rng)
	if !ok {
		return
	}
	now, start := s.now(), s.run.since()
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql, args(t, now)...)
		return err
	})
	if s.done(o, err, kind, start, act{kind: kind, job: t.job, attempt: t.attempt}) && kind != "heartbeat" {
		s.run.board.settled(s.rng, t)
	}
}

func (s *session) heartbeat(ctx context.Context) {
	extend := s.lease()
	s.settle(ctx, "heartbeat", `SELECT backoff.heartbeat($1, $2, $3, $4)`, func(t token, now time.Time) []any {
		return []any{t.job, t.attempt, extend, now}
	})
}

func (s *session) complete(ctx context.Context) {
	s.settle(ctx, "complete", `SELECT 1 FROM backoff.complete($1, $2, $3)`, func(t token, now time.Time) []any {
		return []any{t.job, t.attempt, now}
	})
}

func (s *session) fail(ctx context.Context) {
	retryable := s.rng.IntN(10) > 0
	s.settle(ctx, "fail", `SELECT 1 FROM backoff.fail($1, $2, 'torture', NULL, $3, $4)`, func(t token, now time.Time) []any {
		return []any{t.job, t.attempt, retryable, now}
	})
}

func (s *session) snooze(ctx context.Context) {
	delay := time.Duration(s.rng.IntN(20)) * time.Second
	s.settle(ctx, "snooze", `SELECT 1 FROM backoff.snooze($1, $2, $3, $4)`, func(t token, now time.Time) []any {
		return []any{t.job, t.attempt, delay, now}
	})
}

func (s *session) completeMany(ctx context.Context) {
	var ids []int64
	var attempts []int32
	// One token a job: the ids returned then say which attempt completed.
	for range 1 + s.rng.IntN(4) {
		if t, ok := s.run.board.token(s.rng); ok && !slices.Contains(ids, t.job) {
			ids, attempts = append(ids, t.job), append(attempts, t.attempt)
		}
	}
	if len(ids) == 0 {
		return
	}
	now, start := s.now(), s.run.since()
	var done []int64
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT * FROM backoff.complete_many($1, $2, $3)`, ids, attempts, now)
		if err == nil {
			done, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		return err
	})
	// The ids it returns are the jobs it completed, each with the attempt
	// it was given for it.
	var acts []act
	for _, id := range done {
		for i := range ids {
			if ids[i] == id {
				acts = append(acts, act{kind: "complete", job: id, attempt: attempts[i]})
				break
			}
		}
	}
	if s.done(o, err, "complete_many", start, acts...) {
		for _, a := range acts {
			s.run.board.settled(s.rng, token{a.job, a.attempt})
		}
	}
}

// byID makes a call that names a job and returns nothing the record needs
// but that it happened.
func (s *session) byID(ctx context.Context, kind, sql string) {
	id, ok := s.run.board.job(s.rng)
	if !ok {
		return
	}
	now, start := s.now(), s.run.since()
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql, id, now)
		return err
	})
	s.done(o, err, kind, start, act{kind: kind, job: id})
}

func (s *session) cancel(ctx context.Context) {
	s.byID(ctx, "cancel", `SELECT 1 FROM backoff.cancel($1, 'torture', $2)`)
}

func (s *session) replay(ctx context.Context) {
	s.byID(ctx, "replay", `SELECT 1 FROM backoff.replay($1, $2)`)
}

// maintenance makes a call that names no job.
func (s *session) maintenance(ctx context.Context, name, sql string, args ...any) {
	start := s.run.since()
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	s.done(o, err, name, start)
}

func (s *session) reap(ctx context.Context) {
	s.maintenance(ctx, "reap", `SELECT backoff.reap($1, 100)`, s.now())
}

func (s *session) prune(ctx context.Context) {
	s.maintenance(ctx, "prune", `SELECT backoff.prune('30 seconds', 50, $1)`, s.now())
}

func (s *session) pauseQueue(ctx context.Context) {
	s.maintenance(ctx, "pause_queue", `SELECT backoff.pause_queue($1, true, $2)`, s.queue(), s.now())
}

func (s *session) resumeQueue(ctx context.Context) {
	s.maintenance(ctx, "resume_queue", `SELECT backoff.resume_queue($1, true, $2)`, s.queue(), s.now())
}

// rotate runs at the session's level, or one call in four at READ
// COMMITTED, as a maintenance loop whose client sets its level (the Go
// client's Rotate does): rotate truncates only at READ COMMITTED, and
// those truncations must meet the other calls at every level.
func (s *session) rotate(ctx context.Context) {
	now, start := s.now(), s.run.since()
	var switched *int16
	var truncated int
	var note *string
	call := s.call
	if s.rng.IntN(4) == 0 {
		call = s.callAt(pgx.ReadCommitted)
	}
	o, err := call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT switched_from, cardinality(truncated), note FROM backoff.rotate($1)`, now).
			Scan(&switched, &truncated, &note)
	})
	if s.done(o, err, "rotate", start) && o == okCommitted {
		if switched != nil {
			s.run.switches.Add(1)
		}
		s.run.truncations.Add(int64(truncated))
		if note != nil && strings.Contains(*note, " added: ") {
			s.run.added.Add(1)
		}
	}
}

// fireSchedules fires on the database clock (p_now NULL) as an unscoped
// caller, which fires every schedule; or, one call in three, on a host
// clock up to two minutes off, acting as the firer role, whose scope is
// the skewed schedules' queue only.
func (s *session) fireSchedules(ctx context.Context) {
	s.fireOn(ctx, s.rng.IntN(3) > 0)
}

// fireOn fires on the database clock or on a skewed one, and says whether
// the call was acknowledged.
func (s *session) fireOn(ctx context.Context, dbClock bool) bool {
	skew := time.Duration(s.rng.IntN(240)-120) * time.Second
	start := s.run.since()
	var at time.Time
	var fires []fire
	o, err := s.call(ctx, s.think(), func(ctx context.Context, tx pgx.Tx) error {
		at, fires = time.Time{}, nil
		sql := `SELECT now(), f.schedule, f.slot, f.job_id
			FROM (VALUES (1)) AS v LEFT JOIN LATERAL backoff.fire_schedules(1000, NULL) AS f ON true`
		var args []any
		if !dbClock {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+pgx.Identifier{s.run.firer}.Sanitize()); err != nil {
				return err
			}
			sql = `SELECT now(), f.schedule, f.slot, f.job_id
				FROM (VALUES (1)) AS v LEFT JOIN LATERAL backoff.fire_schedules(1000, now() + $1) AS f ON true`
			args = []any{skew}
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name *string
			var slot *time.Time
			var job *int64
			if err := rows.Scan(&at, &name, &slot, &job); err != nil {
				return err
			}
			if name != nil {
				fires = append(fires, fire{*name, *slot, *job})
			}
		}
		return rows.Err()
	})
	acts := make([]act, len(fires))
	for i, f := range fires {
		acts[i] = act{kind: "enqueue", job: f.job}
	}
	if s.done(o, err, "fire_schedules", start, acts...) {
		if o == okCommitted {
			s.run.rec.addFires(at, dbClock, fires)
		}
		for _, f := range fires {
			s.run.board.addJobs(f.job)
		}
	}
	return o == okCommitted
}
