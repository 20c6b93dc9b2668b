package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Periodic jobs (docs/adr/0063) on a simulated clock: every call passes
// p_now, nothing sleeps. The tests run as a superuser, a member of
// backoff_admin, whose p_now is taken as given (docs/adr/0035).

// putSchedule creates or replaces a schedule at now; extra is appended to
// the call's named arguments (e.g. "p_catch_up => 'all'").
func putSchedule(t testing.TB, q querier, name, queue, timing, extra string, now time.Time) {
	t.Helper()
	args := []string{"$1", "$2", timing}
	if extra != "" {
		args = append(args, extra)
	}
	exec(t, q, "SELECT backoff.put_schedule("+strings.Join(args, ", ")+", p_now => $3)", name, queue, now)
}

// fire calls backoff.fire_schedules at now and returns the slots it fired
// per schedule.
func fire(t testing.TB, q querier, limit int, now time.Time) map[string][]time.Time {
	t.Helper()
	rows, err := q.Query(context.Background(), "SELECT schedule, slot FROM backoff.fire_schedules($1, $2)", limit, now)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][]time.Time{}
	for rows.Next() {
		var name string
		var slot time.Time
		require.NoError(t, rows.Scan(&name, &slot))
		out[name] = append(out[name], slot.UTC())
	}
	require.NoError(t, rows.Err())
	return out
}

// slotsOf lists the slots of the jobs a schedule enqueued, in order.
func slotsOf(t testing.TB, q querier, name string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, j := range jobs(t, q, "SELECT * FROM backoff.jobs WHERE schedule = $1 ORDER BY schedule_slot", name) {
		out = append(out, j.ScheduleSlot.UTC())
	}
	return out
}

// every lists the times from+step, from+2*step, ... up to and including to.
func every(from, to time.Time, step time.Duration) []time.Time {
	var out []time.Time
	for at := from.Add(step); !at.After(to); at = at.Add(step) {
		out = append(out, at)
	}
	return out
}

func utc(s string) time.Time {
	at, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return at
}

// TestFireSchedulesConcurrentWeek: 8 firers on their own connections, each
// with its own clock stepping through a week at random, fire every-minute,
// hourly, daily and fixed-interval schedules: each slot gets exactly one
// job (none missed, none doubled), counted from backoff.jobs.
func TestFireSchedulesConcurrentWeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	week := t0.Add(7 * 24 * time.Hour)
	// 'all' so that a firer whose step jumps several slots fires each.
	for _, s := range [][2]string{
		{"minutely", "p_cron => '* * * * *'"},
		{"hourly", "p_cron => '0 * * * *'"},
		{"daily", "p_cron => '15 3 * * *', p_time_zone => 'Europe/Berlin'"},
		{"seven", "p_every => '7 minutes'"},
	} {
		putSchedule(t, db, s[0], "periodic", s[1], "p_catch_up => 'all'", t0)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var calls sync.Map
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Release()
			r := rand.New(rand.NewPCG(uint64(w), 63))
			n := 0
			for now := t0; now.Before(week); {
				// Steps of 10 seconds to 9 minutes: firers overtake one
				// another, and some call with a clock behind the others.
				now = now.Add(time.Duration(10+r.IntN(530)) * time.Second)
				if now.After(week) {
					now = week
				}
				rows, err := conn.Query(ctx, "SELECT schedule FROM backoff.fire_schedules(1000, $1)", now)
				if err != nil {
					errs <- err
					return
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					errs <- fmt.Errorf("firer %d at %s: %w", w, now, err)
					return
				}
				n++
			}
			calls.Store(w, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Whatever the firers left due fires now. A call fires at most
	// catch_up_limit (100) slots of a schedule: under load, a firer that
	// found the schedule locked by a slower one went on, and the slots due
	// by the end can be more than one call fires; each further call goes
	// on from where the last stopped.
	for len(fire(t, db, 1000, week)) > 0 {
	}

	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	var daily []time.Time
	for d := 1; d <= 7; d++ {
		daily = append(daily, time.Date(2026, 1, d, 3, 15, 0, 0, berlin).UTC())
	}
	require.Equal(t, every(t0, week, time.Minute), slotsOf(t, db, "minutely"))
	require.Equal(t, every(t0, week, time.Hour), slotsOf(t, db, "hourly"))
	require.Equal(t, daily, slotsOf(t, db, "daily"))
	require.Equal(t, every(t0, week, 7*time.Minute), slotsOf(t, db, "seven"))
	require.Equal(t, 10080+168+7+1440, scalar[int](t, db, "SELECT count(*) FROM backoff.jobs"))
	require.Equal(t, 10080+168+7+1440, scalar[int](t, db, "SELECT sum(fired)::int FROM backoff.schedules"))
	// Each job is due at its slot, in the schedule's queue.
	require.Zero(t, scalar[int](t, db, "SELECT count(*) FROM backoff.jobs WHERE run_at <> schedule_slot OR queue <> 'periodic'"))
	calls.Range(func(k, v any) bool { t.Logf("firer %d: %d calls", k, v); return true })
}

// TestFireSchedulesCatchUp: downtime (no caller for hours, as after a
// restart of every worker) under each missed-slot policy.
func TestFireSchedulesCatchUp(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "latest", "q", "p_cron => '* * * * *'", "", t0)
	putSchedule(t, db, "all", "q", "p_cron => '* * * * *'", "p_catch_up => 'all', p_catch_up_limit => 25", t0)
	putSchedule(t, db, "windowed-all", "q", "p_cron => '*/10 * * * *'", "p_catch_up => 'all', p_catch_up_window => '30 minutes'", t0)
	putSchedule(t, db, "on-time-only", "q", "p_cron => '0 * * * *'", "p_catch_up_window => '1 minute'", t0)

	// On time: every schedule's first slot.
	got := fire(t, db, 1000, at(time.Minute))
	require.Equal(t, []time.Time{at(time.Minute)}, got["latest"])
	require.Equal(t, []time.Time{at(time.Minute)}, got["all"])

	// Down for 10 hours and 30 seconds.
	now := at(10*time.Hour + 30*time.Second)
	got = fire(t, db, 1000, now)
	// latest (the default): the latest slot and those whose interval ended
	// less than max_clock_skew (5 minutes) before now, as a caller whose
	// clock is behind may still be in them; the rest missed.
	require.Equal(t, every(at(9*time.Hour+54*time.Minute), at(10*time.Hour), time.Minute), got["latest"])
	missed := func(name string) int {
		t.Helper()
		return scalar[int](t, db, "SELECT missed FROM backoff.schedules WHERE name = $1", name)
	}
	require.Equal(t, 599-6, missed("latest"), "00:02 to 09:54")
	require.Zero(t, missed("all"))
	require.Equal(t, 57, missed("windowed-all"), "00:10 to 09:30")
	require.Equal(t, 9, missed("on-time-only"), "01:00 to 09:00")
	// all: the oldest missed slots first, catch_up_limit of them per call.
	require.Equal(t, every(at(time.Minute), at(26*time.Minute), time.Minute), got["all"])
	// all within a window: only the slots of the last 30 minutes (09:30
	// is 30 minutes 30 seconds old).
	require.Equal(t, []time.Time{at(9*time.Hour + 40*time.Minute), at(9*time.Hour + 50*time.Minute), at(10 * time.Hour)}, got["windowed-all"])
	// latest within a minute: 10:00 is 30 seconds late and fires; 01:00 to
	// 09:00 are skipped.
	require.Equal(t, []time.Time{at(10 * time.Hour)}, got["on-time-only"])
	require.Equal(t, now, scalar[time.Time](t, db, "SELECT last_missed_at FROM backoff.schedules WHERE name = 'latest'").UTC())

	// The next call goes on with 'all' where it stopped.
	got = fire(t, db, 1000, now)
	require.Equal(t, every(at(26*time.Minute), at(51*time.Minute), time.Minute), got["all"])
	require.Empty(t, got["latest"])

	// A slot more than the window late fires nothing; the next one does.
	require.Empty(t, fire(t, db, 1000, at(11*time.Hour+2*time.Minute))["on-time-only"])
	require.Equal(t, at(12*time.Hour), scalar[time.Time](t, db, "SELECT next_fire_at FROM backoff.schedules WHERE name = 'on-time-only'").UTC())
	require.Equal(t, 10, missed("on-time-only"))
	require.Equal(t, []time.Time{at(12 * time.Hour)}, fire(t, db, 1000, at(12*time.Hour))["on-time-only"])

	// p_limit bounds a call across schedules.
	n := 0
	for _, s := range fire(t, db, 7, at(12*time.Hour)) {
		n += len(s)
	}
	require.Equal(t, 7, n)
}

// TestFireSchedulesClockBackwards: a caller whose clock is behind an
// earlier call's fires nothing again.
func TestFireSchedulesClockBackwards(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "m", "q", "p_cron => '* * * * *'", "p_catch_up => 'all'", t0)
	require.Len(t, fire(t, db, 1000, at(time.Hour))["m"], 60)
	require.Empty(t, fire(t, db, 1000, at(30*time.Minute)))
	require.Empty(t, fire(t, db, 1000, at(time.Hour)))
	require.Empty(t, fire(t, db, 1000, t0.Add(-24*time.Hour)))
	require.Equal(t, []time.Time{at(61 * time.Minute)}, fire(t, db, 1000, at(61*time.Minute))["m"])
	require.Equal(t, 61, scalar[int](t, db, "SELECT count(*) FROM backoff.jobs WHERE schedule = 'm'"))

	// A schedule dropped and put again from an earlier time: its row starts
	// over, the jobs' unique slots keep it from firing a slot twice.
	exec(t, db, "SELECT backoff.drop_schedule('m')")
	putSchedule(t, db, "m", "q", "p_cron => '* * * * *'", "p_catch_up => 'all'", at(59*time.Minute))
	require.Equal(t, []time.Time{at(62 * time.Minute)}, fire(t, db, 1000, at(62*time.Minute))["m"])
	require.Equal(t, 62, scalar[int](t, db, "SELECT count(*) FROM backoff.jobs WHERE schedule = 'm'"))
}

// TestPausedSchedule: a paused schedule fires nothing; resumed, it starts
// at its first slot after the resume, whatever its catch-up policy.
func TestPausedSchedule(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "p", "q", "p_every => '5 minutes'", "p_catch_up => 'all'", t0)
	require.True(t, scalar[bool](t, db, "SELECT backoff.pause_schedule('p', $1)", t0))
	require.False(t, scalar[bool](t, db, "SELECT backoff.pause_schedule('p', $1)", t0))
	require.False(t, scalar[bool](t, db, "SELECT backoff.pause_schedule('nope', $1)", t0))
	require.Empty(t, fire(t, db, 1000, at(time.Hour)))
	require.True(t, scalar[bool](t, db, "SELECT backoff.resume_schedule('p', $1)", at(time.Hour+time.Minute)))
	require.False(t, scalar[bool](t, db, "SELECT backoff.resume_schedule('p', $1)", at(time.Hour+time.Minute)))
	require.Empty(t, fire(t, db, 1000, at(time.Hour+time.Minute)))
	require.Equal(t, []time.Time{at(time.Hour + 5*time.Minute)}, fire(t, db, 1000, at(time.Hour+5*time.Minute))["p"])

	// Putting the same settings again keeps the schedule as it is; a new
	// timing starts from the put.
	putSchedule(t, db, "p", "q", "p_every => '5 minutes'", "p_catch_up => 'all'", at(2*time.Hour))
	require.Equal(t, at(time.Hour+10*time.Minute), scalar[time.Time](t, db, "SELECT next_fire_at FROM backoff.schedules WHERE name = 'p'").UTC())
	putSchedule(t, db, "p", "q", "p_every => '7 minutes'", "p_catch_up => 'all'", at(2*time.Hour))
	require.Equal(t, at(2*time.Hour+6*time.Minute), scalar[time.Time](t, db, "SELECT next_fire_at FROM backoff.schedules WHERE name = 'p'").UTC(),
		"7-minute slots from 1970-01-01 (one at 2026-01-01 00:00): 02:06 is the first after 02:00")
	require.True(t, scalar[bool](t, db, "SELECT backoff.drop_schedule('p')"))
	require.False(t, scalar[bool](t, db, "SELECT backoff.drop_schedule('p')"))
	require.Empty(t, fire(t, db, 1000, at(3*time.Hour)))
}

// TestSkipIfRunning: a slot whose schedule still has an unfinished job is
// skipped and counted; once the job finished, the next slot fires.
func TestSkipIfRunning(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "s", "skip", "p_cron => '* * * * *'", "p_skip_if_running => true, p_catch_up => 'all'", t0)
	require.Len(t, fire(t, db, 1000, at(time.Minute))["s"], 1)
	require.Empty(t, fire(t, db, 1000, at(2*time.Minute))) // pending
	j := claimOne(t, db, "skip", at(2*time.Minute))
	require.Empty(t, fire(t, db, 1000, at(4*time.Minute))) // running: 03:00 and 04:00 skipped
	exec(t, db, "SELECT * FROM backoff.complete($1, $2, $3)", j.ID, j.Attempts, at(4*time.Minute))
	require.Equal(t, []time.Time{at(5 * time.Minute)}, fire(t, db, 1000, at(5*time.Minute))["s"])
	var skipped int
	var last time.Time
	require.NoError(t, db.QueryRow(context.Background(),
		"SELECT skipped, last_skipped_slot FROM backoff.schedules WHERE name = 's'").Scan(&skipped, &last))
	require.Equal(t, 3, skipped)
	require.Equal(t, at(4*time.Minute), last.UTC())
	// Without the switch, slots fire whatever runs.
	putSchedule(t, db, "t", "skip", "p_cron => '* * * * *'", "", at(5*time.Minute))
	require.Len(t, fire(t, db, 1000, at(6*time.Minute))["t"], 1)
	require.Len(t, fire(t, db, 1000, at(7*time.Minute))["t"], 1)
}

// TestScheduleRefusesBadInput: invalid cron expressions and settings are
// refused with 22023 naming the value (the field and its range for cron).
func TestScheduleRefusesBadInput(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, c := range []struct{ cron, want string }{
		{"61 * * * *", `cron "61 * * * *": minute field "61" is outside 0-59`},
		{"0 24 * * *", `hour field "24" is outside 0-23`},
		{"0 0 0 * *", `day-of-month field "0" is outside 1-31`},
		{"0 0 1 13 *", `month field "13" is outside 1-12`},
		{"0 0 * * 8", `day-of-week field "8" is outside 0-7`},
		{"*/0 * * * *", `minute field "*/0" has step 0, want 1-60`},
		{"*/61 * * * *", `minute field "*/61" has step 61, want 1-60`},
		{"1-5/ * * * *", `minute field "1-5/" is not *, a number`},
		{"5/10 * * * *", `minute field "5/10" has a step without a range`},
		{"1,,2 * * * *", `minute field "1,,2" has an empty list item`},
		{"1, * * * *", `minute field "1," has an empty list item`},
		{"30-10 * * * *", `minute field "30-10" has a range from high to low`},
		{"* * * * * *", `cron "* * * * * *": want 5 fields`},
		{"* * * *", `cron "* * * *": want 5 fields`},
		{"", `want 5 fields`},
		{"@reboot", `cron "@reboot": want 5 fields`},
		{"x * * * *", `minute field "x" is not *`},
		{"0 0 * * someday", `day-of-week field "someday" is not *`},
		{"0 0 30 2 *", `cron "0 0 30 2 *" never fires`},
	} {
		err := execErr(db, "SELECT backoff.put_schedule('bad', 'q', p_cron => $1)", c.cron)
		e := requireCode(t, err, "22023")
		require.Contains(t, e.Message, c.want, c.cron)
		if c.want != `cron "0 0 30 2 *" never fires` {
			// The preview checks alike.
			e = requireCode(t, execErr(db, "SELECT * FROM backoff.schedule_fires(p_cron => $1, p_every => NULL, p_time_zone => 'UTC', p_anchor => NULL)", c.cron), "22023")
			require.Contains(t, e.Message, c.want, c.cron)
		}
	}
	for _, c := range []struct{ call, want string }{
		{"p_cron => '* * * * *', p_every => '1 hour'", "exactly one of a cron expression and an interval"},
		{"p_time_zone => 'UTC'", "exactly one of a cron expression and an interval"},
		{"p_cron => '* * * * *', p_time_zone => 'Mars/Olympus'", `time zone "Mars/Olympus" is not a name of the IANA`},
		{"p_cron => '* * * * *', p_time_zone => 'UTC+3'", `time zone "UTC+3"`},
		{"p_every => '1 month'", `interval "1 mon"`},
		{"p_every => '0.5 seconds'", `interval "00:00:00.5"`},
		{"p_cron => '* * * * *', p_anchor => now()", "an anchor applies to an interval schedule"},
		{"p_cron => '* * * * *', p_catch_up => 'some'", `catch_up must be "latest" or "all", got "some"`},
		{"p_cron => '* * * * *', p_catch_up_window => '0 seconds'", "catch_up_window must be NULL or more than 0"},
		{"p_cron => '* * * * *', p_catch_up_limit => 0", `catch_up_limit must be between 1 and 10000, got "0"`},
		{"p_cron => '* * * * *', p_policy => 'nope'", `unknown policy "nope"`},
		{"p_cron => '* * * * *', p_max_attempts => 0", `max_attempts must be at least 1, got "0"`},
		// A slot's job must be one enqueue would take.
		{"p_cron => '* * * * *', p_priority => 40000", `priority must be between -32768 and 32767, got "40000"`},
		{"p_cron => '* * * * *', p_payload => jsonb_build_object('blob', repeat('x', 2000000))", "max_payload_bytes"},
	} {
		e := requireCode(t, execErr(db, "SELECT backoff.put_schedule('bad', 'q', "+c.call+")"), "22023")
		require.Contains(t, e.Message, c.want, c.call)
	}
	e := requireCode(t, execErr(db, "SELECT backoff.put_schedule(E'bad\\n', 'q', p_cron => '* * * * *')"), "22023")
	require.Contains(t, e.Message, "schedule must be 1 to 128 bytes")
	// A schedule keeps its queue.
	putSchedule(t, db, "good", "q", "p_cron => '* * * * *'", "", t0)
	e = requireCode(t, execErr(db, "SELECT backoff.put_schedule('good', 'other', p_cron => '* * * * *')"), "22023")
	require.Contains(t, e.Message, `schedule "good" enqueues into queue "q", not "other"`)
	requireCode(t, execErr(db, "SELECT backoff.fire_schedules(0)"), "22023")
	requireCode(t, execErr(db, "SELECT * FROM backoff.schedule_fires('good', p_count => 1001)"), "22023")
	require.Zero(t, scalar[int](t, db, "SELECT count(*) FROM backoff.schedules WHERE name = 'bad'"))

	// Names, macros and cron's day rule are understood.
	fires := func(cron, zone string, after time.Time, n int) []time.Time {
		var out []time.Time
		rows, err := db.Query(context.Background(),
			"SELECT fire_at FROM backoff.schedule_fires(p_cron => $1, p_every => NULL, p_time_zone => $2, p_anchor => NULL, p_after => $3, p_count => $4)",
			cron, zone, after, n)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var at time.Time
			require.NoError(t, rows.Scan(&at))
			out = append(out, at.UTC())
		}
		require.NoError(t, rows.Err())
		return out
	}
	// 2026-01-01 is a Thursday.
	require.Equal(t, []time.Time{utc("2026-01-02 09:00"), utc("2026-01-05 09:00")}, fires("0 9 * JAN mon-FRI/4", "UTC", t0, 2))
	require.Equal(t, []time.Time{utc("2026-01-04 00:00"), utc("2026-01-11 00:00")}, fires("@weekly", "UTC", t0, 2))
	// Both day fields restricted: either matches (the 13th, or a Friday).
	require.Equal(t, []time.Time{utc("2026-01-02 00:00"), utc("2026-01-09 00:00"), utc("2026-01-13 00:00")}, fires("0 0 13 * 5", "UTC", t0, 3))
	// One of them *: both must match (Fridays that are odd days).
	require.Equal(t, []time.Time{utc("2026-01-09 00:00"), utc("2026-01-23 00:00")}, fires("0 0 */2 * 5", "UTC", t0, 2))
	// A leap day.
	require.Equal(t, []time.Time{utc("2028-02-29 12:00")}, fires("0 12 29 2 *", "UTC", t0, 1))
}

// TestScheduleDaylightSaving: cron's behaviour across both transitions in
// two zones (and Lord Howe's half hour): a fixed time skipped by the clock
// fires once at the end of the gap, a fixed time repeated fires once (the
// first time), a wildcard-hour schedule fires by elapsed time: never in the
// gap, in both repeated hours. Fired by fire_schedules on a 5-minute clock.
func TestScheduleDaylightSaving(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	type day struct {
		zone, cron string
		from, to   time.Time
		want       []time.Time // UTC
	}
	cases := []day{
		// New York springs forward on 2026-03-08 at 02:00 EST to 03:00 EDT (07:00Z).
		{"America/New_York", "30 2 * * *", utc("2026-03-07 12:00"), utc("2026-03-09 12:00"),
			[]time.Time{utc("2026-03-08 07:00"), utc("2026-03-09 06:30")}},
		{"America/New_York", "0,30 2 * * *", utc("2026-03-08 00:00"), utc("2026-03-08 12:00"),
			[]time.Time{utc("2026-03-08 07:00")}},
		{"America/New_York", "*/30 1-3 * * *", utc("2026-03-08 05:00"), utc("2026-03-08 09:00"),
			[]time.Time{utc("2026-03-08 06:00"), utc("2026-03-08 06:30"), utc("2026-03-08 07:00"), utc("2026-03-08 07:30")}},
		// New York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST (06:00Z).
		{"America/New_York", "30 1 * * *", utc("2026-10-31 12:00"), utc("2026-11-02 12:00"),
			[]time.Time{utc("2026-11-01 05:30"), utc("2026-11-02 06:30")}},
		{"America/New_York", "*/30 * * * *", utc("2026-11-01 04:10"), utc("2026-11-01 07:10"),
			[]time.Time{utc("2026-11-01 04:30"), utc("2026-11-01 05:00"), utc("2026-11-01 05:30"),
				utc("2026-11-01 06:00"), utc("2026-11-01 06:30"), utc("2026-11-01 07:00")}},
		// Berlin springs forward on 2026-03-29 at 02:00 CET to 03:00 CEST (01:00Z).
		{"Europe/Berlin", "15 2 * * *", utc("2026-03-28 12:00"), utc("2026-03-30 12:00"),
			[]time.Time{utc("2026-03-29 01:00"), utc("2026-03-30 00:15")}},
		{"Europe/Berlin", "15 * * * *", utc("2026-03-28 23:30"), utc("2026-03-29 02:30"),
			[]time.Time{utc("2026-03-29 00:15"), utc("2026-03-29 01:15"), utc("2026-03-29 02:15")}},
		// Berlin falls back on 2026-10-25 at 03:00 CEST to 02:00 CET (01:00Z).
		{"Europe/Berlin", "30 2 * * *", utc("2026-10-24 12:00"), utc("2026-10-26 12:00"),
			[]time.Time{utc("2026-10-25 00:30"), utc("2026-10-26 01:30")}},
		{"Europe/Berlin", "0 */1 * * *", utc("2026-10-24 23:30"), utc("2026-10-25 02:30"),
			[]time.Time{utc("2026-10-25 00:00"), utc("2026-10-25 01:00"), utc("2026-10-25 02:00")}},
		// Lord Howe moves half an hour: 02:00 to 02:30 on 2026-10-04 (15:30Z).
		{"Australia/Lord_Howe", "0 2 * * *", utc("2026-10-03 12:00"), utc("2026-10-05 12:00"),
			[]time.Time{utc("2026-10-03 15:30"), utc("2026-10-04 15:00")}},
	}
	for i, c := range cases {
		name := fmt.Sprintf("dst-%d", i)
		exec(t, db, "SELECT backoff.put_schedule($1, 'dst', p_cron => $2, p_time_zone => $3, p_catch_up => 'all', p_now => $4)",
			name, c.cron, c.zone, c.from)
		for now := c.from; !now.After(c.to); now = now.Add(5 * time.Minute) {
			fire(t, db, 1000, now)
		}
		require.Equal(t, c.want, slotsOf(t, db, name), "%s %q in %s", name, c.cron, c.zone)
		// The preview says the same.
		var preview []time.Time
		rows, err := db.Query(context.Background(),
			"SELECT fire_at FROM backoff.schedule_fires($1, $2, $3)", name, c.from, len(c.want))
		require.NoError(t, err)
		for rows.Next() {
			var at time.Time
			require.NoError(t, rows.Scan(&at))
			preview = append(preview, at.UTC())
		}
		require.NoError(t, rows.Err())
		require.Equal(t, c.want, preview, "%s %q in %s", name, c.cron, c.zone)
	}
}

// TestMillionSlotCatchUp: a schedule down for two years (a million
// every-minute slots) fires a bounded number of jobs per call under each
// policy; the time it takes is logged, not asserted.
func TestMillionSlotCatchUp(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	twoYears := 2 * 365 * 24 * time.Hour
	putSchedule(t, db, "latest", "q", "p_cron => '* * * * *'", "", t0.Add(-twoYears))
	putSchedule(t, db, "all", "q", "p_cron => '* * * * *'", "p_catch_up => 'all', p_catch_up_limit => 500", t0.Add(-twoYears))
	putSchedule(t, db, "seconds", "q", "p_every => '1 second'", "", t0.Add(-12*24*time.Hour))
	putSchedule(t, db, "rare", "q", "p_cron => '0 0 29 2 *'", "", t0.Add(-twoYears))
	start := time.Now()
	got := fire(t, db, 100000, t0.Add(30*time.Second))
	t.Logf("first call after the outage: %s", time.Since(start))
	require.Equal(t, every(t0.Add(-6*time.Minute), t0, time.Minute), got["latest"], "the latest and the slots of the last max_clock_skew")
	require.Equal(t, every(t0.Add(-70*time.Second), t0.Add(30*time.Second), time.Second), got["seconds"],
		"a million one-second slots: the latest catch_up_limit (100)")
	require.Equal(t, int64(2*365*24*60-6), scalar[int64](t, db, "SELECT missed FROM backoff.schedules WHERE name = 'latest'"),
		"730 days of minutes but the 6 fired")
	require.Equal(t, int64(12*24*3600+30-100), scalar[int64](t, db, "SELECT missed FROM backoff.schedules WHERE name = 'seconds'"))
	require.Len(t, got["all"], 500)
	require.Equal(t, t0.Add(-twoYears+time.Minute), got["all"][0])
	require.Equal(t, []time.Time{utc("2024-02-29 00:00")}, got["rare"], "its one slot in the outage")
	// p_limit bounds the call whatever the schedules allow.
	exec(t, db, "UPDATE backoff.schedules SET catch_up_limit = 10000 WHERE name = 'all'")
	start = time.Now()
	got = fire(t, db, 2000, t0.Add(30*time.Second))
	t.Logf("a call of 2000: %s", time.Since(start))
	require.Len(t, got["all"], 2000)
	require.Equal(t, 2500, scalar[int](t, db, "SELECT count(*) FROM backoff.jobs WHERE schedule = 'all'"))
}

// TestScheduleRefusesNonZones: names the zone check once let through
// (an Etc/GMT offset no zone has, and the zone files that are no zone:
// posixrules, localtime, Factory) are refused with 22023 naming the value.
func TestScheduleRefusesNonZones(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, zone := range []string{"Etc/GMT-99", "Etc/GMT+13", "Etc/GMT-15", "posixrules", "localtime", "Factory", "factory", "LOCALTIME"} {
		err := execErr(db, "SELECT backoff.put_schedule('z', 'q', p_cron => '0 * * * *', p_time_zone => $1, p_now => $2)", zone, t0)
		e := requireCode(t, err, "22023")
		require.Contains(t, e.Message, `"`+zone+`"`, zone)
	}
	for _, zone := range []string{"Etc/GMT-14", "Etc/GMT+12", "Etc/GMT", "Etc/GMT+0", "UTC", "America/New_York"} {
		require.NoError(t, execErr(db, "SELECT backoff.put_schedule('z', 'q', p_cron => '0 * * * *', p_time_zone => $1, p_now => $2)", zone, t0), zone)
	}
}
