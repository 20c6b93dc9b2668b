package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// healthRow is a row of backoff.health.
type healthRow struct {
	HolderKind     *string        `db:"holder_kind"`
	HolderPid      *int32         `db:"holder_pid"`
	HolderName     *string        `db:"holder_name"`
	HolderUser     *string        `db:"holder_user"`
	HolderState    *string        `db:"holder_state"`
	HolderSince    *time.Time     `db:"holder_since"`
	HolderAge      *time.Duration `db:"holder_age"`
	HolderXidAge   *int32         `db:"holder_xid_age"`
	JobsLive       *int64         `db:"jobs_live_tuples"`
	JobsDead       *int64         `db:"jobs_dead_tuples"`
	JobsLastVacuum *time.Time     `db:"jobs_last_vacuum"`
	JobsBytes      *int64         `db:"jobs_bytes"`
	Warning        *string        `db:"warning"`
	liveRow
	Segments     int32   `db:"segments"`
	Waiting      int32   `db:"segments_waiting"`
	WaitingBytes int64   `db:"segments_waiting_bytes"`
	HeldBy       *string `db:"segments_held_by"`
}

func health(t testing.TB, q querier, maxAge string, now any) healthRow {
	t.Helper()
	rows, err := q.Query(context.Background(),
		`SELECT * FROM backoff.health(p_max_age => $1::interval, p_max_xid_age => 2000000000, p_now => $2)`, maxAge, now)
	require.NoError(t, err)
	h, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[healthRow])
	require.NoError(t, err)
	return h
}

// TestHealthNamesTheSnapshotHolder holds a snapshot the way a forgotten
// report does (REPEATABLE READ, one read, then idle in its transaction) and
// once more with a transaction that wrote (it has an xid): health names the
// holder, and warns once the hold is older than p_max_age on the caller's
// clock (no sleep: p_now moves).
func TestHealthNamesTheSnapshotHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdbURL(t)
	db := poolOn(t, url)
	enqueue(t, db, "mail", t0)

	// Nothing held in this database: no warning.
	h := health(t, db, "5 minutes", nil)
	require.Nil(t, h.Warning, "nothing holds a snapshot yet")
	require.NotNil(t, h.JobsBytes)
	require.Positive(t, *h.JobsBytes)

	for _, tc := range []struct{ name, begin string }{
		{"reader", "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1"},
		{"writer", "BEGIN; SELECT pg_catalog.txid_current()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holder := connOn(t, url)
			_, err := holder.Exec(ctx, "SET application_name = 'nightly-report-"+tc.name+"'")
			require.NoError(t, err)
			_, err = holder.Exec(ctx, tc.begin)
			require.NoError(t, err)
			var pid int32
			require.NoError(t, holder.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&pid))

			h := health(t, db, "5 minutes", nil)
			require.NotNil(t, h.HolderKind)
			require.Equal(t, "session", *h.HolderKind)
			require.Equal(t, pid, *h.HolderPid)
			require.Equal(t, "nightly-report-"+tc.name, *h.HolderName)
			require.Equal(t, "idle in transaction", *h.HolderState)
			require.NotNil(t, h.HolderSince)
			require.Nil(t, h.Warning, "held for less than 5 minutes")

			var dbNow time.Time
			require.NoError(t, db.QueryRow(ctx, "SELECT now()").Scan(&dbNow))
			h = health(t, db, "5 minutes", dbNow.Add(10*time.Minute))
			require.NotNil(t, h.Warning, "held for 10 minutes on the caller's clock")
			require.Contains(t, *h.Warning, "nightly-report-"+tc.name)
			require.Contains(t, *h.Warning, "session")
			require.GreaterOrEqual(t, *h.HolderAge, 10*time.Minute)

			_, err = holder.Exec(ctx, "ROLLBACK")
			require.NoError(t, err)
			h = health(t, db, "5 minutes", dbNow.Add(10*time.Minute))
			if h.HolderPid != nil {
				require.NotEqual(t, pid, *h.HolderPid, "the released holder is no longer named")
			}
		})
	}
}

func TestHealthValidation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_age => interval '-1 second')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_age => NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_xid_age => -1)`), "22023")
}

// liveRow is the liveness part of a row of backoff.health.
type liveRow struct {
	ReapAt          *time.Time `db:"reap_at"`
	RotateAt        *time.Time `db:"rotate_at"`
	SwitchAt        *time.Time `db:"switch_at"`
	TruncateAt      *time.Time `db:"truncate_at"`
	FireAt          *time.Time `db:"fire_at"`
	ActiveSchedules int64      `db:"active_schedules"`
	WorkersSeen     int64      `db:"workers_seen"`
	Warning         *string    `db:"liveness_warning"`
}

func liveAt(t testing.TB, q querier, now time.Time) liveRow {
	t.Helper()
	rows, err := q.Query(context.Background(),
		`SELECT reap_at, rotate_at, switch_at, truncate_at, fire_at, active_schedules, workers_seen, liveness_warning
		 FROM backoff.health(p_max_xid_age => 2000000000, p_now => $1)`, now)
	require.NoError(t, err)
	l, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[liveRow])
	require.NoError(t, err)
	return l
}

// requireAt asserts that got is the instant want.
func requireAt(t testing.TB, want time.Time, got *time.Time, msg ...any) {
	t.Helper()
	require.NotNil(t, got, msg...)
	require.True(t, want.Equal(*got), "want %s, got %s %v", want, *got, msg)
}

func rotateAt(t testing.TB, q querier, now time.Time, worker any) rotation {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT * FROM backoff.rotate(p_now => $1, p_worker => $2)`, now, worker)
	require.NoError(t, err)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[rotation])
	require.NoError(t, err)
	return r
}

// TestHealthSaysNoMaintenanceRan: with no worker running, health never
// looks healthy: nothing ran yet, then the maintenance stopped 20 minutes
// ago, and no worker was seen; while a Worker's calls come (reap, rotate
// naming the worker, fire_schedules) it is quiet, and says when each ran.
// The clock is p_now: nothing sleeps.
func TestHealthSaysNoMaintenanceRan(t *testing.T) {
	t.Parallel()
	db := newDB(t)

	// A fresh install, no worker: never ran, nobody seen.
	l := liveAt(t, db, t0)
	require.NotNil(t, l.Warning)
	require.Equal(t, "no maintenance has ever run: reap never ran, rotate never ran (expired leases stay stranded, "+
		"the live segments are not rotated); no worker was seen in the last minute", *l.Warning)
	require.Nil(t, l.ReapAt)
	require.Nil(t, l.RotateAt)
	require.Nil(t, l.TruncateAt)
	require.NotNil(t, l.SwitchAt, "the install made segment 1 current")
	require.Zero(t, l.WorkersSeen)

	// A schedule that nobody fires is named too.
	exec(t, db, `SELECT backoff.put_schedule('tick', 'pings', p_every => '1 minute', p_now => $1)`, t0)
	l = liveAt(t, db, t0)
	require.Contains(t, *l.Warning, "schedules never fired")
	require.Contains(t, *l.Warning, "the active schedule fires nothing")
	require.EqualValues(t, 1, l.ActiveSchedules)

	// A Worker's maintenance loop: reap, rotate naming itself, fire.
	exec(t, db, `SELECT backoff.reap(p_now => $1)`, at(time.Minute))
	rotateAt(t, db, at(time.Minute), "worker-1")
	exec(t, db, `SELECT count(*) FROM backoff.fire_schedules(p_now => $1)`, at(time.Minute))
	l = liveAt(t, db, at(time.Minute+30*time.Second))
	require.Nil(t, l.Warning, "all ran 30 s ago and worker-1 was seen")
	requireAt(t, at(time.Minute), l.ReapAt)
	requireAt(t, at(time.Minute), l.RotateAt)
	requireAt(t, at(time.Minute), l.FireAt)
	require.EqualValues(t, 1, l.WorkersSeen)

	// The worker stopped 20 minutes ago: said in words, never healthy.
	l = liveAt(t, db, at(21*time.Minute))
	require.NotNil(t, l.Warning)
	require.Equal(t, "no maintenance ran for 20m 0s: reap last ran 20m 0s ago, rotate last ran 20m 0s ago, "+
		"schedules last fired 20m 0s ago (expired leases stay stranded, the live segments are not rotated, "+
		"the active schedule fires nothing); no worker was seen in the last minute", *l.Warning)
	require.Zero(t, l.WorkersSeen)

	// Only the firer stopped (a pg_cron reap without a firer, say), and a
	// worker holds a job it claimed in the last minute: it is seen.
	exec(t, db, `SELECT backoff.reap(p_now => $1)`, at(21*time.Minute))
	rotateAt(t, db, at(21*time.Minute), nil)
	enqueue(t, db, "mail", at(21*time.Minute))
	claim(t, db, "mail", "sql-worker", 1, at(21*time.Minute))
	l = liveAt(t, db, at(21*time.Minute+10*time.Second))
	require.EqualValues(t, 1, l.WorkersSeen, "sql-worker claimed a job that still runs")
	require.Equal(t, "part of the maintenance stopped: schedules last fired 20m 10s ago (the active schedule fires nothing)", *l.Warning)

	// A paused schedule needs no firer; p_max_quiet sets the limit.
	exec(t, db, `SELECT backoff.pause_schedule('tick', $1)`, at(21*time.Minute))
	l = liveAt(t, db, at(21*time.Minute+10*time.Second))
	require.Nil(t, l.Warning)
	warning := scalar[*string](t, db, `SELECT liveness_warning FROM backoff.health(p_max_quiet => '5 seconds', p_now => $1)`,
		at(21*time.Minute+10*time.Second))
	require.NotNil(t, warning)
	require.Contains(t, *warning, "no maintenance ran for 10s")
}

// TestMaintenanceWritesRarely: a maintenance call writes its row at most
// once every 15 seconds and never moves it back; claim, complete and
// enqueue write nothing for it; rotate records a truncate when it makes
// one, and the switch is backoff.segments'.
func TestMaintenanceWritesRarely(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	version := func(task string) (string, *time.Time) {
		var ctid string
		var ranAt *time.Time
		require.NoError(t, db.QueryRow(context.Background(),
			`SELECT ctid::text, ran_at FROM backoff.maintenance WHERE task = $1`, task).Scan(&ctid, &ranAt))
		return ctid, ranAt
	}
	exec(t, db, `SELECT backoff.reap(p_now => $1)`, t0)
	v0, ran := version("reap")
	requireAt(t, t0, ran)
	for _, d := range []time.Duration{time.Second, 10 * time.Second, 15 * time.Second, -time.Hour} {
		exec(t, db, `SELECT backoff.reap(p_now => $1)`, at(d))
		v, ran := version("reap")
		require.Equal(t, v0, v, "no new row version %s after the last write", d)
		requireAt(t, t0, ran)
	}
	exec(t, db, `SELECT backoff.reap(p_now => $1)`, at(16*time.Second))
	v1, ran := version("reap")
	require.NotEqual(t, v0, v1)
	requireAt(t, at(16*time.Second), ran)

	// The hot path writes nothing for it.
	before := scalar[int64](t, db, `SELECT n_tup_upd + n_tup_ins FROM pg_stat_xact_user_tables WHERE relname = 'maintenance'`)
	segmentJobs(t, db, 3)
	for range 4 {
		enqueue(t, db, "q", at(time.Minute))
	}
	for _, j := range claim(t, db, "q", "w", 4, at(time.Minute)) {
		exec(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, at(time.Minute))
	}
	v, _ := version("reap")
	require.Equal(t, v1, v)
	require.Equal(t, before, scalar[int64](t, db, `SELECT n_tup_upd + n_tup_ins FROM pg_stat_xact_user_tables WHERE relname = 'maintenance'`))
	_, ran = version("rotate")
	require.Nil(t, ran)

	// Switch, then truncate: both recorded, with the worker once.
	r := rotateAt(t, db, at(time.Minute), "worker-1")
	require.NotNil(t, r.SwitchedFrom)
	r = rotateAt(t, db, at(time.Minute+time.Second), "worker-1")
	require.Equal(t, []int16{1}, r.Truncated)
	l := liveAt(t, db, at(time.Minute+2*time.Second))
	requireAt(t, at(time.Minute), l.RotateAt, "the second call within 15 s wrote nothing")
	requireAt(t, at(time.Minute), l.SwitchAt)
	requireAt(t, at(time.Minute+time.Second), l.TruncateAt)
	require.EqualValues(t, 1, l.WorkersSeen)
	requireAt(t, at(time.Minute), ptr(scalar[time.Time](t, db, `SELECT seen_at FROM backoff.maintenance_workers WHERE worker = 'worker-1'`)))

	// A new worker's first call deletes the rows of workers gone a day.
	rotateAt(t, db, at(25*time.Hour), "worker-2")
	require.Equal(t, []string{"worker-2"}, scalar[[]string](t, db, `SELECT array_agg(worker) FROM backoff.maintenance_workers`))
}

func TestLivenessValidation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_quiet => interval '-1 second')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.liveness(p_max_quiet => NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.rotate(p_worker => '')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.rotate(p_worker => repeat('w', 129))`), "22023")
	// The old calls still work.
	exec(t, db, `SELECT backoff.reap()`)
	exec(t, db, `SELECT backoff.reap(now(), 10)`)
	exec(t, db, `SELECT * FROM backoff.rotate(now())`)
	exec(t, db, `SELECT * FROM backoff.health(interval '5 minutes', 100, now())`)
}
