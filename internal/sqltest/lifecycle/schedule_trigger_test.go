package lifecycle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTriggerSchedule: a manual fire enqueues the job a slot would, due at
// once, naming the schedule with no slot; the schedule does not move, a
// paused one can be triggered, and the next slot still fires once.
func TestTriggerSchedule(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "report", "reports", "p_cron => '0 * * * *'",
		"p_payload => '{\"kind\":\"daily\"}', p_priority => 7, p_max_attempts => 3", t0)
	next := scalar[time.Time](t, db, "SELECT next_fire_at FROM backoff.schedules WHERE name = 'report'")

	var name string
	var id int64
	require.NoError(t, db.QueryRow(t.Context(), "SELECT * FROM backoff.trigger_schedule('report', $1)",
		at(10*time.Minute)).Scan(&name, &id))
	require.Equal(t, "report", name)
	js := jobs(t, db, "SELECT * FROM backoff.jobs WHERE id = $1", id)
	require.Len(t, js, 1)
	j := js[0]
	require.Equal(t, "reports", j.Queue)
	require.Equal(t, map[string]any{"kind": "daily"}, j.Payload)
	require.Equal(t, 7, int(j.Priority))
	require.Equal(t, int32(3), *j.MaxAttempts)
	require.Equal(t, at(10*time.Minute), j.RunAt.UTC())
	require.Equal(t, "report", *j.Schedule)
	require.Nil(t, j.ScheduleSlot, "a manual fire has no slot")
	require.Equal(t, scalar[int16](t, db, "SELECT segment FROM backoff.segments WHERE current"), j.Segment,
		"a live job lives in the current segment, never among the finished ones")

	// The schedule did not move; its first slot still fires, once.
	require.Equal(t, next, scalar[time.Time](t, db, "SELECT next_fire_at FROM backoff.schedules WHERE name = 'report'"))
	require.Equal(t, 0, scalar[int](t, db, "SELECT fired::int FROM backoff.schedules WHERE name = 'report'"))
	require.Equal(t, []time.Time{at(time.Hour)}, fire(t, db, 1000, at(time.Hour))["report"])

	// Paused: the slots stop, a manual fire still runs; triggering twice
	// makes two jobs (no slot, so the unique index lets both in).
	require.True(t, scalar[bool](t, db, "SELECT backoff.pause_schedule('report', $1)", at(time.Hour)))
	exec(t, db, "SELECT * FROM backoff.trigger_schedule('report', $1)", at(90*time.Minute))
	exec(t, db, "SELECT * FROM backoff.trigger_schedule('report', $1)", at(91*time.Minute))
	require.Equal(t, 3, scalar[int](t, db, "SELECT count(*)::int FROM backoff.jobs WHERE schedule = 'report' AND schedule_slot IS NULL"))
	require.Empty(t, fire(t, db, 1000, at(2*time.Hour)))

	// No such schedule: no row.
	require.Equal(t, 0, scalar[int](t, db, "SELECT count(*)::int FROM backoff.trigger_schedule('nope', $1)", t0))
}

// TestFireIntoPausedQueue: a schedule whose queue is paused still enqueues
// its slots (docs/adr/0068); the queue's pause holds the jobs, and they run
// once it is resumed, as River and Oban do.
func TestFireIntoPausedQueue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	putSchedule(t, db, "tick", "held", "p_every => '5 minutes'", "", t0)
	exec(t, db, "SELECT backoff.pause_queue('held', p_create => true, p_now => $1)", t0)
	require.Equal(t, []time.Time{at(5 * time.Minute)}, fire(t, db, 1000, at(5*time.Minute))["tick"])
	require.Equal(t, 0, scalar[int](t, db, "SELECT count(*)::int FROM backoff.claim('held', 'w', 10, p_now => $1)", at(6*time.Minute)))
	exec(t, db, "SELECT backoff.resume_queue('held', p_now => $1)", at(7*time.Minute))
	require.Equal(t, 1, scalar[int](t, db, "SELECT count(*)::int FROM backoff.claim('held', 'w', 10, p_now => $1)", at(7*time.Minute)))
}
