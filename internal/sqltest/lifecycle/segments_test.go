package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Live jobs in rotating segments (docs/adr/0061): enqueue inserts into the
// current segment, finishing a job moves it to segment 0, backoff.rotate
// switches segments, moves what is left behind and truncates.

type rotation struct {
	Current      int16   `db:"current_segment"`
	SwitchedFrom *int16  `db:"switched_from"`
	Moved        int64   `db:"moved"`
	Truncated    []int16 `db:"truncated"`
	Note         *string `db:"note"`
}

func rotate(t testing.TB, q querier) rotation {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT * FROM backoff.rotate()`)
	require.NoError(t, err)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[rotation])
	require.NoError(t, err)
	return r
}

// segmentJobs sets how many jobs a segment takes before rotate switches.
func segmentJobs(t testing.TB, q querier, n int) {
	t.Helper()
	exec(t, q, `UPDATE backoff.settings SET segment_jobs = $1`, n)
}

// segmentsOf counts the jobs of each (segment, status).
func segmentsOf(t testing.TB, q querier) map[string]int64 {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT segment || ' ' || status, count(*) FROM backoff.jobs GROUP BY 1`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func TestRotateSwitchesMovesAndTruncates(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	segmentJobs(t, db, 10)
	for i := 0; i < 12; i++ {
		enqueue(t, db, "q", t0)
	}
	running := claimOne(t, db, "q", t0)
	require.EqualValues(t, 1, running.Segment)
	done := claim(t, db, "q", "w", 5, t0)
	for _, j := range done {
		fin := one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
		require.EqualValues(t, 0, fin.Segment, "a finished job lives in segment 0")
	}
	require.Equal(t, map[string]int64{"1 pending": 6, "1 running": 1, "0 completed": 5}, segmentsOf(t, db))

	// 12 jobs taken, 7 live: segment 2 becomes current, the 7 move there.
	r := rotate(t, db)
	require.EqualValues(t, 2, r.Current)
	require.NotNil(t, r.SwitchedFrom)
	require.EqualValues(t, 1, *r.SwitchedFrom)
	require.EqualValues(t, 7, r.Moved)
	require.Empty(t, r.Truncated, "the segment it switched from may still take enqueues in flight")
	require.Equal(t, map[string]int64{"2 pending": 6, "2 running": 1, "0 completed": 5}, segmentsOf(t, db))
	require.EqualValues(t, 2, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE id = $1`, enqueue(t, db, "q", t0)))

	// The next call truncates segment 1; then there is nothing to do.
	r = rotate(t, db)
	require.Nil(t, r.SwitchedFrom, "segment 2 has taken 1 job")
	require.Equal(t, []int16{1}, r.Truncated)
	require.Zero(t, scalar[int64](t, db, `SELECT pg_relation_size('backoff.jobs_live_1')`))
	r = rotate(t, db)
	require.Empty(t, r.Truncated)
	require.Zero(t, r.Moved)

	// The moved running job keeps its lease and token.
	moved := get(t, db, running.ID)
	require.Equal(t, "running", moved.Status)
	require.Equal(t, running.Attempts, moved.Attempts)
	require.Equal(t, running.LeaseUntil, moved.LeaseUntil)
	fin := one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, running.ID, running.Attempts, t0)
	require.Equal(t, "completed", fin.Status)

}

// TestRotateMovesFinishedRowsToSegmentZero: a finished row an INSERT of
// one's own put in a live segment goes to segment 0 when rotate moves what
// another segment holds, and a live row put in segment 0 to the current
// one; both are counted as moved.
func TestRotateMovesFinishedRowsToSegmentZero(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	done := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, status, run_at, created_at, completed_at, segment)
		VALUES ('q', '{}', 'completed', $1, $1, $1, 2) RETURNING id`, t0)
	live := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at, segment)
		VALUES ('q', '{}', $1, $1, 0) RETURNING id`, t0)
	r := rotate(t, db)
	require.EqualValues(t, 1, r.Current)
	require.EqualValues(t, 2, r.Moved)
	require.Equal(t, map[string]int64{"0 completed": 1, "1 pending": 1}, segmentsOf(t, db))
	require.EqualValues(t, 0, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE id = $1`, done))
	require.EqualValues(t, 1, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE id = $1`, live))
}

// TestRotateFindsLiveRowsInSegmentZeroThroughItsIndexes: rotate looks for
// live rows in the finished partition through its claim and lease indexes,
// whichever plan the session caches: a generic plan of one statement for
// every segment could not use them and read every finished job at each
// call (the Worker rotates every few seconds, and the partition holds the
// whole history).
func TestRotateFindsLiveRowsInSegmentZeroThroughItsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	exec(t, db, `INSERT INTO backoff.jobs (queue, payload, status, run_at, created_at, completed_at, segment)
		SELECT 'q', '{}', 'completed', $1, $1, $1, 0 FROM pg_catalog.generate_series(1, 20000)`, t0)
	stray := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at, segment)
		VALUES ('q', '{}', $1, $1, 0) RETURNING id`, t0)
	exec(t, db, `ANALYZE backoff.jobs_finished`)

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	exec(t, tx, `SET LOCAL plan_cache_mode = force_generic_plan`)
	r := rotate(t, tx)
	require.EqualValues(t, 1, r.Moved)
	require.EqualValues(t, 0, scalar[int64](t, tx, `SELECT seq_scan FROM pg_catalog.pg_stat_xact_user_tables
		WHERE relid = 'backoff.jobs_finished'::pg_catalog.regclass`), "rotate read the finished partition through")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, r.Current, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE id = $1`, stray))
}

// TestClaimReadsTheCurrentSegmentOnly: a claim never reads the segment a
// switch left behind (its dead index entries are what an old snapshot
// would make every claim walk); a due job left there is claimed once the
// next rotate has moved it. An INSERT that names no segment lands in the
// current one, so a user's own SQL needs no rotate to be claimed.
func TestClaimReadsTheCurrentSegmentOnly(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	segmentJobs(t, db, 1)
	mine := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at) VALUES ('q', '{}', $1, $1) RETURNING id`, t0)
	require.EqualValues(t, 1, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE id = $1`, mine))
	enqueue(t, db, "q", t0)
	r := rotate(t, db)
	require.EqualValues(t, 2, r.Current)

	// A job that raced the switch: still in segment 1, as an enqueue that
	// read the current segment before the switch committed leaves it.
	raced := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at, segment) VALUES ('q', '{}', $1, $1, 1) RETURNING id`, t0)
	plain := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at) VALUES ('q', '{}', $1, $1) RETURNING id`, t0)
	require.EqualValues(t, 2, scalar[int16](t, db, `SELECT segment FROM backoff.jobs WHERE id = $1`, plain), "the default follows the switch")

	var ids []int64
	for _, j := range claim(t, db, "q", "w", 10, t0) {
		ids = append(ids, j.ID)
	}
	require.NotContains(t, ids, raced, "a claim reads the current segment only")
	require.Contains(t, ids, mine, "moved by the switch")
	require.Contains(t, ids, plain)
	require.Len(t, ids, 3)

	r = rotate(t, db)
	require.EqualValues(t, 1, r.Moved)
	got := claim(t, db, "q", "w", 10, t0)
	require.Len(t, got, 1)
	require.Equal(t, raced, got[0].ID, "claimable once rotate moved it")
}

// TestSessionsFollowASwitch: the current segment is a constant folded into
// each statement's plan when it is planned (backoff._current_segment), so a
// session whose enqueue, claim and complete plans were cached before
// another session's rotate switched must plan them again, with the new
// segment: its next enqueue lands there and its claim finds the job. And
// rotate publishes backoff.segments' current segment again when the two
// disagree (a restore that wrote the table).
func TestSessionsFollowASwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	segmentJobs(t, db, 1)
	a, err := db.Acquire(ctx)
	require.NoError(t, err)
	defer a.Release()
	b, err := db.Acquire(ctx)
	require.NoError(t, err)
	defer b.Release()

	// Session a caches its plans, several times over (a generic plan is
	// cached from the first call under force_generic_plan, a custom one
	// after five).
	for i := 0; i < 6; i++ {
		enqueue(t, a, "q", t0)
		j := claimOne(t, a, "q", t0)
		require.EqualValues(t, 1, j.Segment)
		one(t, a, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
	}
	require.EqualValues(t, 2, rotate(t, b).Current)

	id := enqueue(t, a, "q", t0)
	require.EqualValues(t, 2, scalar[int16](t, a, `SELECT segment FROM backoff.jobs WHERE id = $1`, id),
		"an enqueue planned before the switch lands in the new segment")
	j := claimOne(t, a, "q", t0)
	require.Equal(t, id, j.ID, "a claim planned before the switch reads the new segment")
	require.EqualValues(t, 2, j.Segment)
	require.Equal(t, "completed", one(t, a, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0).Status)

	// The published constant and the recorded segment disagree: rotate
	// publishes the recorded one, and the sessions follow.
	exec(t, b, `UPDATE backoff.settings SET segment_jobs = 1000000`)
	exec(t, b, `UPDATE backoff.segments SET current = false WHERE current`)
	exec(t, b, `UPDATE backoff.segments SET current = true WHERE segment = 3`)
	require.EqualValues(t, 2, scalar[int16](t, a, `SELECT backoff._current_segment()`))
	require.EqualValues(t, 3, rotate(t, b).Current)
	require.EqualValues(t, 3, scalar[int16](t, a, `SELECT backoff._current_segment()`))
	id = enqueue(t, a, "q", t0)
	require.EqualValues(t, 3, scalar[int16](t, a, `SELECT segment FROM backoff.jobs WHERE id = $1`, id))
	require.Equal(t, id, claimOne(t, a, "q", t0).ID)
}

// TestRotateKeepsTakingJobsWithABacklog: "enough" is the larger of
// segment_jobs and the live jobs, so a backlog is not copied at every call.
func TestRotateKeepsTakingJobsWithABacklog(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	segmentJobs(t, db, 5)
	exec(t, db, `INSERT INTO backoff.jobs (queue, run_at, created_at, segment) SELECT 'q', $1, $1, 1 FROM generate_series(1, 20)`, t0)
	// The sequence says 20 taken, and 20 are live: it switches.
	r := rotate(t, db)
	require.EqualValues(t, 2, r.Current)
	require.EqualValues(t, 20, r.Moved)
	// 6 more taken, 26 live: not enough.
	for i := 0; i < 6; i++ {
		enqueue(t, db, "q", t0)
	}
	r = rotate(t, db)
	require.EqualValues(t, 2, r.Current)
	require.Nil(t, r.SwitchedFrom)
	require.NotNil(t, r.Note)
	require.Contains(t, *r.Note, "segment 2 keeps taking jobs: more jobs are live than the 6 it has taken")
}

// TestRotateNeverBlocksAClaimer: a transaction that has read backoff.jobs
// holds a lock TRUNCATE must wait for; rotate gives up after its lock
// timeout, says why, and the claims go on; the next call truncates.
func TestRotateNeverBlocksAClaimer(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	db := poolOn(t, url)
	ctx := context.Background()
	segmentJobs(t, db, 3)
	for i := 0; i < 4; i++ {
		enqueue(t, db, "q", t0)
	}
	require.EqualValues(t, 2, rotate(t, db).Current)

	reader := connOn(t, url)
	tx := begin(t, reader)
	require.EqualValues(t, 4, scalar[int64](t, tx, `SELECT count(*) FROM backoff.jobs`))

	r := rotate(t, db)
	require.Empty(t, r.Truncated)
	require.NotNil(t, r.Note)
	require.Contains(t, *r.Note, "segment 1 not truncated: its lock was not granted within 50 ms")
	// A claim while the reader still holds its lock: not blocked.
	claimer := connOn(t, url)
	got := claim(t, claimer, "q", "w", 1, t0)
	require.Len(t, got, 1)
	require.EqualValues(t, 2, got[0].Segment)

	require.NoError(t, tx.Rollback(ctx))
	r = rotate(t, db)
	require.Equal(t, []int16{1}, r.Truncated)
}

// TestByIdCallsFindARowRotateMoved provokes the race of the by-id calls:
// rotate moves a running job (deletes its row, inserts it into the current
// segment) while the call waits for the row's lock. The call's first
// statement then finds the row gone; its second, with a new snapshot, finds
// the moved one, and the call succeeds as if nothing had happened.
func TestByIdCallsFindARowRotateMoved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		call string // $1 id, $2 token
		want string // the job's status after the call
	}{
		{"complete", `SELECT status FROM backoff.complete($1, $2, $3)`, "completed"},
		{"fail", `SELECT status FROM backoff.fail($1, $2, 'boom', p_now => $3)`, "retrying"},
		{"fail to dead letter", `SELECT status FROM backoff.fail($1, $2, 'bad input', NULL, false, $3)`, "dead_lettered"},
		{"heartbeat", `SELECT 'running' FROM backoff.heartbeat($1, $2, p_now => $3)`, "running"},
		{"snooze", `SELECT status FROM backoff.snooze($1, $2, '1 minute', $3)`, "pending"},
		{"cancel", `SELECT status FROM backoff.cancel($1, 'stop', $3) WHERE $2::integer IS NOT NULL`, "cancelled"},
		{"complete_many", `SELECT 'completed' FROM backoff.complete_many(ARRAY[$1::bigint], ARRAY[$2::integer], $3)`, "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			setup, c1, c2 := twoConns(t)
			ctx := context.Background()
			segmentJobs(t, setup, 1)
			enqueue(t, setup, "q", t0)
			j := claimOne(t, setup, "q", t0)
			require.EqualValues(t, 1, j.Segment)

			// Rotate moves the job to segment 2 and holds its transaction open.
			tx := begin(t, c1)
			r := rotate(t, tx)
			require.EqualValues(t, 2, r.Current)
			require.EqualValues(t, 1, r.Moved)

			var status string
			wait := blocked(t, setup, c2, func() error {
				return c2.QueryRow(ctx, tc.call, j.ID, j.Attempts, t0.Add(time.Second)).Scan(&status)
			})
			require.NoError(t, tx.Commit(ctx))
			require.NoError(t, wait())
			require.Equal(t, tc.want, status)
			after := get(t, setup, j.ID)
			require.Equal(t, tc.want, after.Status)
			if tc.want == "completed" || tc.want == "dead_lettered" || tc.want == "cancelled" {
				require.EqualValues(t, 0, after.Segment)
			} else {
				require.EqualValues(t, 2, after.Segment)
			}
		})
	}
}

// TestAcquireFindsARowRotateMoved: acquire, by id, of a pending job that
// rotate moved while acquire waited.
func TestAcquireFindsARowRotateMoved(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	segmentJobs(t, setup, 1)
	id := enqueue(t, setup, "q", t0)
	tx := begin(t, c1)
	require.EqualValues(t, 1, rotate(t, tx).Moved)
	var status string
	var token int32
	wait := blocked(t, setup, c2, func() error {
		return c2.QueryRow(ctx, `SELECT status, attempts FROM backoff.acquire($1, 'w', p_now => $2)`, id, t0).Scan(&status, &token)
	})
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, wait())
	require.Equal(t, "running", status)
	require.EqualValues(t, 1, token)
}

// TestFinishedPartitionOnlyGetsInserts: the hot path never updates a row of
// segment 0 (history adds no dead versions to it): complete, complete_many,
// fail to dead letter, reap to dead letter and cancel insert the finished
// row; only replay and prune delete from it.
func TestFinishedPartitionOnlyGetsInserts(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	exec(t, db, `INSERT INTO backoff.policies (name, max_attempts, lease) VALUES ('once', 1, '30 seconds')`)
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('q', 'once')`)
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for i := 0; i < 8; i++ {
		enqueue(t, tx, "q", t0)
	}
	js := claim(t, tx, "q", "w", 7, t0)
	one(t, tx, `SELECT * FROM backoff.complete($1, $2, $3)`, js[0].ID, js[0].Attempts, t0)
	require.EqualValues(t, 2, scalar[int64](t, tx, `SELECT count(*) FROM backoff.complete_many($1, $2, $3)`,
		[]int64{js[1].ID, js[2].ID}, []int32{js[1].Attempts, js[2].Attempts}, t0))
	one(t, tx, `SELECT * FROM backoff.fail($1, $2, 'bad', NULL, false, $3)`, js[3].ID, js[3].Attempts, t0)
	one(t, tx, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, js[4].ID, js[4].Attempts, t0) // max_attempts 1: dead
	one(t, tx, `SELECT * FROM backoff.cancel($1, 'stop', $2)`, js[5].ID, t0)
	require.EqualValues(t, 1, scalar[int32](t, tx, `SELECT backoff.reap($1)`, t0.Add(time.Hour)))
	rotate(t, tx)
	require.Equal(t, map[string]int64{"0 completed": 3, "0 dead_lettered": 3, "0 cancelled": 1, "1 pending": 1}, segmentsOf(t, tx))

	var ins, upd, del int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_inserted(c.oid), pg_stat_get_xact_tuples_updated(c.oid),
		pg_stat_get_xact_tuples_deleted(c.oid) FROM pg_class AS c WHERE c.oid = 'backoff.jobs_finished'::regclass`).Scan(&ins, &upd, &del))
	require.EqualValues(t, 7, ins)
	require.Zero(t, upd, "a row of segment 0 was updated")
	require.Zero(t, del)

	// Replay moves a job back out of segment 0: a delete there, no update.
	r := one(t, tx, `SELECT * FROM backoff.replay($1, $2)`, js[3].ID, t0)
	require.Equal(t, "pending", r.Status)
	require.EqualValues(t, 1, r.Segment)
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('backoff.jobs_finished'::regclass),
		pg_stat_get_xact_tuples_deleted('backoff.jobs_finished'::regclass)`).Scan(&upd, &del))
	require.Zero(t, upd)
	require.EqualValues(t, 1, del)
}

// TestJobsBehaveAcrossRotations: a job in every state keeps its semantics
// while rotate switches segments around it several times: fencing tokens
// never repeat, a dedupe key is honoured in whatever segment its job is,
// retry, snooze, replay and a stale token work as before, and moving a row
// loses none of its columns.
func TestJobsBehaveAcrossRotations(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	segmentJobs(t, db, 1)
	now := t0
	// One more job taken (and finished, so that the live jobs stay few):
	// rotate switches, and truncates at its next call.
	spin := func() {
		t.Helper()
		enqueue(t, db, "filler", now)
		f := claimOne(t, db, "filler", now)
		one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, f.ID, f.Attempts, now)
		rotate(t, db)
		rotate(t, db)
	}
	var keyed int64
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT backoff.enqueue('q', '{"n": 1}', p_dedupe_key => 'k', p_now => $1)`, now).Scan(&keyed))
	before := scalar[map[string]any](t, db, `SELECT to_jsonb(j) - 'segment' FROM backoff.jobs AS j WHERE id = $1`, keyed)
	seen := map[int32]bool{}
	segments := map[int16]bool{}
	for round := 0; round < 6; round++ {
		spin()
		if round%2 == 1 {
			spin() // so that the claims fall in different segments
		}
		// The key is still held, whatever segment the job is in.
		var again int64
		require.NoError(t, db.QueryRow(context.Background(),
			`SELECT backoff.enqueue('q', '{"n": 2}', p_dedupe_key => 'k', p_now => $1)`, now).Scan(&again))
		require.Equal(t, keyed, again, "round %d", round)
		if round == 0 {
			require.Equal(t, before, scalar[map[string]any](t, db, `SELECT to_jsonb(j) - 'segment' FROM backoff.jobs AS j WHERE id = $1`, keyed),
				"a move keeps every column")
		}
		j := claimOne(t, db, "q", now)
		require.Equal(t, keyed, j.ID)
		require.False(t, seen[j.Attempts], "token %d repeated", j.Attempts)
		seen[j.Attempts] = true
		segments[j.Segment] = true
		spin()
		switch round % 3 {
		case 0:
			f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', '1 second', p_now => $3)`, j.ID, j.Attempts, now)
			require.Equal(t, "retrying", f.Status)
		case 1:
			s := one(t, db, `SELECT * FROM backoff.snooze($1, $2, '1 second', $3)`, j.ID, j.Attempts, now)
			require.Equal(t, "pending", s.Status)
		case 2:
			// The job lost its lease: reaped, then claimed again.
			require.EqualValues(t, 1, scalar[int32](t, db, `SELECT backoff.reap($1)`, now.Add(time.Hour)))
		}
		spin()
		// The old token is refused wherever the job now is.
		requireCode(t, execErr(db, `SELECT backoff.complete($1, $2, $3)`, j.ID, j.Attempts, now), "BK002")
		now = now.Add(2 * time.Hour)
	}
	require.Greater(t, len(segments), 1, "the job was claimed in more than one segment")

	j := claimOne(t, db, "q", now)
	spin()
	c := one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, now)
	require.Equal(t, "completed", c.Status)
	// Finished: the key is free again, and a new job takes it.
	var fresh int64
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT backoff.enqueue('q', '{}', p_dedupe_key => 'k', p_now => $1)`, now).Scan(&fresh))
	require.NotEqual(t, keyed, fresh)
	// A dead letter with the key cannot be replayed while the new job holds it.
	d := claimOne(t, db, "q", now)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'bad', NULL, false, $3)`, d.ID, d.Attempts, now)
	spin()
	var held int64
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT backoff.enqueue('q', '{}', p_dedupe_key => 'k', p_now => $1)`, now).Scan(&held))
	spin()
	requireCode(t, execErr(db, `SELECT backoff.replay($1, $2)`, d.ID, now), "BK003")
	one(t, db, `SELECT * FROM backoff.cancel($1, NULL, $2)`, held, now)
	spin()
	r := one(t, db, `SELECT * FROM backoff.replay($1, $2)`, d.ID, now)
	require.Equal(t, "pending", r.Status)
	var again int64
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT backoff.enqueue('q', '{}', p_dedupe_key => 'k', p_now => $1)`, now).Scan(&again))
	require.Equal(t, d.ID, again, "the replayed job holds its key again")
}

// TestQueueCallsDoNotWaitForATruncate: rotate truncates a segment under an
// ACCESS EXCLUSIVE lock, and statements that would lock that segment queue
// behind it. The calls producers and workers make all the time lock the
// current segment only: here another segment stays locked while each of
// them runs under a lock_timeout that would fail it.
func TestQueueCallsDoNotWaitForATruncate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	require.EqualValues(t, 1, scalar[int16](t, db, `SELECT segment FROM backoff.segments WHERE current`))
	holder, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	exec(t, holder, `LOCK TABLE backoff.jobs_live_2 IN ACCESS EXCLUSIVE MODE`)

	conn, err := db.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	exec(t, conn, `SET lock_timeout = '200ms'`)
	for range 4 {
		enqueue(t, conn, "q", t0)
	}
	exec(t, conn, `SELECT count(*) FROM backoff.enqueue(ARRAY['q'], ARRAY['{}'::jsonb],
		NULL::timestamptz[], NULL::integer[], NULL::integer[], NULL::text[], $1)`, t0)
	j := claimOne(t, conn, "q", t0)
	exec(t, conn, `SELECT backoff.heartbeat($1, $2, p_now => $3)`, j.ID, j.Attempts, t0)
	exec(t, conn, `SELECT backoff.snooze($1, $2, '0 seconds', $3)`, j.ID, j.Attempts, t0)
	j = claimOne(t, conn, "q", t0)
	exec(t, conn, `SELECT backoff.fail($1, $2, 'boom', p_now => $3)`, j.ID, j.Attempts, t0)
	j = claimOne(t, conn, "q", t0)
	exec(t, conn, `SELECT backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
	j = claimOne(t, conn, "q", t0)
	exec(t, conn, `SELECT count(*) FROM backoff.complete_many(ARRAY[$1::bigint], ARRAY[$2::integer], $3)`, j.ID, j.Attempts, t0)
}

// TestByIdCallsFindJobsOutsideTheCurrentSegment: complete, complete_many,
// fail, heartbeat and snooze look for the job in the current segment first,
// and move a running job they find elsewhere into it, so it is found as any
// other: one acquired where a hand INSERT named segment 0, or another live
// segment, and a batch that mixes them with a job of the current segment
// and a stale token.
func TestByIdCallsFindJobsOutsideTheCurrentSegment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		call string // $1 id, $2 token, $3 now
		want string
	}{
		{"complete", `SELECT status FROM backoff.complete($1, $2, $3)`, "completed"},
		{"fail", `SELECT status FROM backoff.fail($1, $2, 'boom', p_now => $3)`, "retrying"},
		{"complete_many", `SELECT 'completed' FROM backoff.complete_many(ARRAY[$1::bigint], ARRAY[$2::integer], $3)`, "completed"},
		{"heartbeat", `SELECT 'running' FROM backoff.heartbeat($1, $2, p_now => $3)`, "running"},
		{"snooze", `SELECT status FROM backoff.snooze($1, $2, '1 minute', $3)`, "pending"},
	} {
		for _, segment := range []int16{0, 3} {
			t.Run(fmt.Sprintf("%s in segment %d", tc.name, segment), func(t *testing.T) {
				t.Parallel()
				db := newDB(t)
				require.EqualValues(t, 1, scalar[int16](t, db, `SELECT segment FROM backoff.segments WHERE current`))
				id := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at, segment)
					VALUES ('q', '{}', $1, $1, $2) RETURNING id`, t0, segment)
				acquired := one(t, db, `SELECT * FROM backoff.acquire($1, 'w', p_now => $2)`, id, t0)
				require.Equal(t, "running", acquired.Status)
				require.Equal(t, segment, acquired.Segment, "acquire runs the job where it is")

				require.Equal(t, tc.want, scalar[string](t, db, tc.call, id, acquired.Attempts, t0))
				require.Equal(t, tc.want, get(t, db, id).Status)
			})
		}
	}

	t.Run("complete_many of a mixed batch", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		enqueue(t, db, "q", t0)
		enqueue(t, db, "q", t0)
		current := claimOne(t, db, "q", t0)
		wrong := claimOne(t, db, "q", t0)
		elsewhere := scalar[int64](t, db, `INSERT INTO backoff.jobs (queue, payload, run_at, created_at, segment)
			VALUES ('q', '{}', $1, $1, 0) RETURNING id`, t0)
		acquired := one(t, db, `SELECT * FROM backoff.acquire($1, 'w', p_now => $2)`, elsewhere, t0)
		require.EqualValues(t, 0, acquired.Segment)

		done := scalar[[]int64](t, db, `SELECT array_agg(id ORDER BY id) FROM backoff.complete_many($1, $2, $3) AS id`,
			[]int64{current.ID, wrong.ID, elsewhere}, []int32{current.Attempts, wrong.Attempts + 1, acquired.Attempts}, t0)
		require.Equal(t, []int64{current.ID, elsewhere}, done)
		require.Equal(t, "completed", get(t, db, current.ID).Status)
		require.Equal(t, "completed", get(t, db, elsewhere).Status)
		require.Equal(t, "running", get(t, db, wrong.ID).Status, "a stale token completes nothing")
	})
}
