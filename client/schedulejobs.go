package client

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A schedule as an operator follows it: the fires ahead of it (from
// backoff.schedule_fires, the computation fire_schedules advances with) and
// the jobs it enqueued, with their outcome. Admin only, like Schedules.

// FireTime is one fire ahead of a schedule: the instant, and the wall-clock
// time in the schedule's zone (a time.Time in UTC that carries the zone's
// clock reading, as the database's timestamp without time zone does).
type FireTime struct {
	At   time.Time
	Wall time.Time
}

// UpcomingFires returns the next n (1 to 1000) fires of each schedule
// named in names (nil: every schedule), by name. A running schedule's
// fires start at its next fire time or after now, whichever is later (a
// slot before next_fire_at is never fired, and one due before now fires
// at the next call of fire_schedules); a paused one's start after now: the
// fires it would have if resumed now. One statement for all of them.
func (c *Client) UpcomingFires(ctx context.Context, names []string, now time.Time, n int) (map[string][]FireTime, error) {
	op := "read the fires ahead of schedules"
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("%s: %w: count must be between 1 and 1000, got %d", op, ErrInvalidArgument, n)
	}
	rows, err := c.db.Query(ctx, `SELECT s.name, f.fire_at, f.wall_time
FROM backoff.schedules AS s
CROSS JOIN LATERAL backoff.schedule_fires(s.name,
    CASE WHEN s.paused THEN $1 ELSE greatest($1, s.next_fire_at - interval '1 microsecond') END, $2) AS f
WHERE $3::text[] IS NULL OR s.name = ANY ($3::text[])
ORDER BY s.name, f.fire_at`, now, n, names)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	out := map[string][]FireTime{}
	var name string
	var f FireTime
	_, err = pgx.ForEachRow(rows, []any{&name, &f.At, &f.Wall}, func() error {
		out[name] = append(out[name], f)
		return nil
	})
	if err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}

// ScheduleJob is a job a schedule enqueued, as its schedule's page lists
// it.
type ScheduleJob struct {
	ID    int64
	Queue string
	// Slot is the slot the job was enqueued for; zero for a manual fire
	// (TriggerSchedule).
	Slot   time.Time
	Status Status
	// Attempts is the attempts counted (claims given back by a snooze are
	// not); MaxAttempts the job's, else its policy's (0: neither known).
	Attempts, MaxAttempts int
	DeadLetterReason      string
	RunAt                 time.Time
	CreatedAt             time.Time
	CompletedAt           time.Time // zero while unfinished
}

// ScheduleJobs returns the last limit jobs the schedule name enqueued
// (slots and manual fires), newest first; none for a schedule with no jobs
// left or no schedule of that name.
func (c *Client) ScheduleJobs(ctx context.Context, name string, limit int) ([]ScheduleJob, error) {
	op := fmt.Sprintf("read the jobs of schedule %q", name)
	if limit < 1 {
		return nil, fmt.Errorf("%s: %w: limit must be at least 1, got %d", op, ErrInvalidArgument, limit)
	}
	rows, err := c.db.Query(ctx, `SELECT j.id, j.queue, j.schedule_slot, j.status, j.attempts - j.uncounted_attempts,
    coalesce(j.max_attempts, p.max_attempts, 0), coalesce(j.dead_letter_reason, ''), j.run_at, j.created_at, j.completed_at
FROM (SELECT * FROM backoff.jobs AS j WHERE j.schedule = $1 ORDER BY j.id DESC LIMIT $2) AS j
LEFT JOIN backoff.policies AS p ON p.name = backoff.job_policy(j.policy, j.queue)
ORDER BY j.id DESC`, name, limit)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduleJob, error) {
		var j ScheduleJob
		var slot, completed *time.Time
		var status string
		err := r.Scan(&j.ID, &j.Queue, &slot, &status, &j.Attempts, &j.MaxAttempts, &j.DeadLetterReason,
			&j.RunAt, &j.CreatedAt, &completed)
		j.Status = Status(status)
		if slot != nil {
			j.Slot = *slot
		}
		if completed != nil {
			j.CompletedAt = *completed
		}
		return j, err
	})
	if err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}
