package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A schedule's page reads through the operator's functions (docs/adr/0072):
// its jobs through backoff.list_jobs, its fires ahead through
// backoff.upcoming_fires.

// TestListJobsOfSchedule: p_schedule lists the jobs a schedule enqueued,
// its slots and its manual fires and no other schedule's or unscheduled
// job, newest first in keyset pages; list_jobs and job_detail say the
// schedule and slot (NULL: a manual fire), and count_jobs counts the same.
func TestListJobsOfSchedule(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "hourly", "q", "p_every => '1 hour'", "", t0)
	putSchedule(t, db, "other", "q", "p_every => '1 hour'", "", t0)
	require.Len(t, fire(t, db, 100, at(time.Hour)), 2)
	require.Len(t, fire(t, db, 100, at(2*time.Hour)), 2)
	manual := scalar[int64](t, db, "SELECT job_id FROM backoff.trigger_schedule('hourly', $1)", at(150*time.Minute))
	plain := scalar[int64](t, db, "SELECT backoff.enqueue('q', p_now => $1)", at(160*time.Minute))

	type row struct {
		ID       int64
		Schedule *string
		Slot     *time.Time
	}
	list := func(args string, cursor ...any) []row {
		t.Helper()
		rows, err := db.Query(context.Background(),
			"SELECT id, schedule, schedule_slot FROM backoff.list_jobs(p_order => 'newest', "+args+")", cursor...)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		require.NoError(t, err)
		for i := range out {
			if out[i].Slot != nil {
				out[i].Slot = ptr(out[i].Slot.UTC())
			}
		}
		return out
	}
	slotJob := func(slot time.Time) int64 {
		return scalar[int64](t, db, "SELECT id FROM backoff.jobs WHERE schedule = 'hourly' AND schedule_slot = $1", slot)
	}
	hourly := ptr("hourly")
	want := []row{
		{manual, hourly, nil},
		{slotJob(at(2 * time.Hour)), hourly, ptr(at(2 * time.Hour))},
		{slotJob(at(time.Hour)), hourly, ptr(at(time.Hour))},
	}
	require.Equal(t, want, list("p_schedule => 'hourly'"))
	// Keyset pages: two, then the rest after the second.
	require.Equal(t, want[:2], list("p_schedule => 'hourly', p_limit => 2"))
	require.Equal(t, want[2:], list("p_schedule => 'hourly', p_limit => 2, p_after_id => $1", want[1].ID))
	require.Equal(t, want[1:], list("p_schedule => 'hourly', p_statuses => '{pending}', p_after_id => $1", manual))
	require.Empty(t, list("p_schedule => 'none'"))
	// Without the filter every job comes, the unscheduled one with no schedule.
	all := list("p_limit => 10")
	require.Len(t, all, 6)
	require.Equal(t, row{ID: plain}, all[0])

	require.EqualValues(t, 3, scalar[int64](t, db, "SELECT backoff.count_jobs(p_schedule => 'hourly')"))
	require.EqualValues(t, 2, scalar[int64](t, db, "SELECT backoff.count_jobs(p_schedule => 'other')"))
	require.EqualValues(t, 0, scalar[int64](t, db, "SELECT backoff.count_jobs(p_schedule => 'none')"))

	detail := func(id int64) row {
		var r row
		require.NoError(t, db.QueryRow(context.Background(),
			"SELECT id, schedule, schedule_slot FROM backoff.job_detail($1)", id).Scan(&r.ID, &r.Schedule, &r.Slot))
		if r.Slot != nil {
			r.Slot = ptr(r.Slot.UTC())
		}
		return r
	}
	require.Equal(t, want[0], detail(manual))
	require.Equal(t, want[1], detail(want[1].ID))
	require.Equal(t, row{ID: plain}, detail(plain))
}

// TestUpcomingFires: a running schedule's fires start at its next fire
// time when that is later than p_now, after p_now when it is not (a slot
// due now fires at the next call, not in the preview); a paused
// one's after p_now; p_names selects (NULL: every schedule, an unknown name
// nothing); the wall time is the schedule's zone's; a count outside 1-1000
// is refused.
func TestUpcomingFires(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "hourly", "q", "p_every => '1 hour'", "", t0)
	putSchedule(t, db, "daily", "q", "p_cron => '0 6 * * *', p_time_zone => 'Europe/Berlin'", "", t0)
	type ahead struct {
		Name string
		At   time.Time
		Wall time.Time
	}
	upcoming := func(names []string, count int, now time.Time) []ahead {
		t.Helper()
		rows, err := db.Query(context.Background(),
			"SELECT name, fire_at, wall_time FROM backoff.upcoming_fires($1, $2, $3)", names, count, now)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ahead])
		require.NoError(t, err)
		for i := range out {
			out[i].At = out[i].At.UTC()
		}
		return out
	}
	// Before the first slot: from the next fire time.
	require.Equal(t, []ahead{
		{"daily", utc("2026-01-01 05:00"), utc("2026-01-01 06:00")},
		{"daily", utc("2026-01-02 05:00"), utc("2026-01-02 06:00")},
		{"hourly", at(time.Hour), at(time.Hour)}, // in UTC: the wall time is the instant
		{"hourly", at(2 * time.Hour), at(2 * time.Hour)},
	}, upcoming(nil, 2, t0.Add(-24*time.Hour)))
	// A microsecond before the next fire time: that slot is the first; at
	// it, the slot is due (the next call of fire_schedules fires it), so
	// the fires ahead start after it.
	require.Equal(t, []ahead{{"hourly", at(time.Hour), at(time.Hour)}}, upcoming([]string{"hourly"}, 1, at(time.Hour-time.Microsecond)))
	require.Equal(t, []ahead{{"hourly", at(2 * time.Hour), at(2 * time.Hour)}}, upcoming([]string{"hourly"}, 1, at(time.Hour)))
	// Behind (nobody fired since): after p_now.
	require.Equal(t, []ahead{{"hourly", at(3 * time.Hour), at(3 * time.Hour)}, {"hourly", at(4 * time.Hour), at(4 * time.Hour)}},
		upcoming([]string{"hourly", "nope"}, 2, at(150*time.Minute)))
	// Paused: after p_now, the fires a resume now would bring.
	require.True(t, scalar[bool](t, db, "SELECT backoff.pause_schedule('hourly', $1)", t0))
	require.Equal(t, []ahead{{"hourly", at(-23 * time.Hour), at(-23 * time.Hour)}}, upcoming([]string{"hourly"}, 1, t0.Add(-24*time.Hour)))
	require.Empty(t, upcoming([]string{"nope"}, 3, t0))
	require.Empty(t, upcoming([]string{}, 3, t0))

	for _, count := range []any{0, 1001, nil} {
		requireCode(t, execErr(db, "SELECT * FROM backoff.upcoming_fires(NULL, $1, $2)", count, t0), "22023")
	}
}

// TestScheduleList: backoff.schedule_list returns the schedules by name
// with what backoff.schedules holds, and the job of the latest slot (not
// a later manual fire; none before the first fire); p_name selects one,
// an unknown name none.
func TestScheduleList(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "hourly", "q", "p_every => '1 hour'", "p_max_attempts => 3", t0)
	putSchedule(t, db, "daily", "q", "p_cron => '0 6 * * *', p_time_zone => 'Europe/Berlin'", "", t0)
	require.Len(t, fire(t, db, 100, at(time.Hour)), 1)
	require.Len(t, fire(t, db, 100, at(2*time.Hour)), 1)
	exec(t, db, "SELECT backoff.trigger_schedule('hourly', $1)", at(150*time.Minute))
	lastSlot := scalar[int64](t, db, "SELECT id FROM backoff.jobs WHERE schedule = 'hourly' AND schedule_slot = $1", at(2*time.Hour))

	type listed struct {
		Name        string
		Next        *time.Time
		Last        *time.Time
		Fired       int64
		LastJobID   *int64
		LastJobSlot *time.Time
	}
	list := func(name any) []listed {
		t.Helper()
		rows, err := db.Query(context.Background(), `SELECT name, next_fire_at, last_slot, fired, last_job_id, last_job_slot
			FROM backoff.schedule_list($1)`, name)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[listed])
		require.NoError(t, err)
		for i := range out {
			for _, p := range []**time.Time{&out[i].Next, &out[i].Last, &out[i].LastJobSlot} {
				if *p != nil {
					*p = ptr((*p).UTC())
				}
			}
		}
		return out
	}
	daily := listed{Name: "daily", Next: ptr(utc("2026-01-01 05:00"))}
	hourly := listed{Name: "hourly", Next: ptr(at(3 * time.Hour)), Last: ptr(at(2 * time.Hour)), Fired: 2,
		LastJobID: &lastSlot, LastJobSlot: ptr(at(2 * time.Hour))}
	require.Equal(t, []listed{daily, hourly}, list(nil))
	require.Equal(t, []listed{hourly}, list("hourly"))
	require.Empty(t, list("nope"))
	// Every setting is the table's, unchanged.
	require.True(t, scalar[bool](t, db, `SELECT (SELECT array_agg(ROW(s.name, s.queue, s.payload, s.cron, s.every, s.anchor, s.time_zone,
			s.policy, s.priority, s.max_attempts, s.paused, s.catch_up, s.catch_up_window, s.catch_up_limit, s.skip_if_running,
			s.next_fire_at, s.last_slot, s.fired, s.skipped, s.last_skipped_slot, s.last_missed_at, s.created_at, s.updated_at)::text
			ORDER BY s.name) FROM backoff.schedules AS s)
		= (SELECT array_agg(ROW(l.name, l.queue, l.payload, l.cron, l.every, l.anchor, l.time_zone,
			l.policy, l.priority, l.max_attempts, l.paused, l.catch_up, l.catch_up_window, l.catch_up_limit, l.skip_if_running,
			l.next_fire_at, l.last_slot, l.fired, l.skipped, l.last_skipped_slot, l.last_missed_at, l.created_at, l.updated_at)::text
			ORDER BY l.name) FROM backoff.schedule_list() AS l)`))
}

// TestScheduleListOverdueAndMissed: with nobody firing, schedule_list says
// a schedule is overdue once its next fire time is past by more than its
// firing interval (never while paused, no longer once fired); after an
// outage of 6 minutes a 10-second schedule shows the slots passed over
// in missed, those older than max_clock_skew (5 minutes).
func TestScheduleListOverdueAndMissed(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "ten", "q", "p_every => '10 minutes'", "", t0)
	putSchedule(t, db, "daily", "q", "p_cron => '0 6 * * *'", "", t0)
	putSchedule(t, db, "tick", "q", "p_every => '10 seconds'", "", t0)
	type state struct {
		Name    string
		Overdue bool
		Missed  int64
	}
	list := func(now time.Time) map[string]state {
		t.Helper()
		rows, err := db.Query(context.Background(), "SELECT name, overdue, missed FROM backoff.schedule_list(p_now => $1)", now)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[state])
		require.NoError(t, err)
		m := map[string]state{}
		for _, s := range out {
			m[s.Name] = s
		}
		return m
	}
	// No worker runs: "ten" is due at 00:10; past by less than its
	// 10 minutes it is late, not overdue.
	require.False(t, list(at(19 * time.Minute))["ten"].Overdue)
	require.True(t, list(at(20*time.Minute + time.Second))["ten"].Overdue)
	require.False(t, list(at(20*time.Minute + time.Second))["daily"].Overdue, "06:00 is ahead")
	require.True(t, list(at(30*time.Hour + time.Second))["daily"].Overdue, "06:00 past by more than a day")
	require.True(t, scalar[bool](t, db, "SELECT backoff.pause_schedule('ten', $1)", at(time.Hour)))
	require.False(t, list(at(2 * time.Hour))["ten"].Overdue, "paused: not overdue")

	// The 10-second schedule: fired once, then 6 minutes without a firer.
	require.Len(t, fire(t, db, 1000, at(10*time.Second))["tick"], 1)
	require.True(t, list(at(6*time.Minute + 10*time.Second))["tick"].Overdue)
	got := fire(t, db, 1000, at(6*time.Minute+10*time.Second))["tick"]
	// 00:20 to 06:10: the 31 slots from 01:10 (whose interval holds 06:10
	// minus 5 minutes) fire, the 5 before are missed.
	require.Equal(t, every(at(time.Minute), at(6*time.Minute+10*time.Second), 10*time.Second), got)
	after := list(at(6*time.Minute + 10*time.Second))["tick"]
	require.Equal(t, state{Name: "tick", Missed: 5}, after)
}
