package client

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// Periodic jobs (docs/adr/0063, docs/schedules.md): schedules are written by
// an admin (backoff.put_schedule, or `backoffctl config apply`), fired by
// any caller of backoff.fire_schedules (the Worker, pg_cron, a script), and
// read here for operators.

// ScheduleFire is one job a schedule enqueued: the schedule, the slot it
// fired for and the job's id.
type ScheduleFire struct {
	Schedule string
	Slot     time.Time
	JobID    int64
}

// FireSchedules enqueues one job for every slot due now, at most limit (0:
// the function's default, 1000) in one call, and returns them
// (backoff.fire_schedules). Any number of callers may run it at once: a
// slot is enqueued once. With nothing due it is one index probe. Scoped
// callers (backoff.grant_queue) fire only their queues' schedules.
func (c *Client) FireSchedules(ctx context.Context, limit int) ([]ScheduleFire, error) {
	op := "fire schedules"
	args := []arg{}
	if limit > 0 {
		args = append(args, arg{"p_limit", "integer", limit})
	}
	call, values := c.fn("fire_schedules", args...)
	rows, err := c.db.Query(ctx, "SELECT schedule, slot, job_id FROM "+call, values...)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduleFire, error) {
		var f ScheduleFire
		err := r.Scan(&f.Schedule, &f.Slot, &f.JobID)
		return f, err
	})
	if err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}

// TriggerSchedule enqueues one job of the schedule name now, out of turn
// (backoff.trigger_schedule): the job a slot would enqueue, recorded as a
// manual fire (the job names the schedule, with no slot). The schedule does
// not move and a paused one can be triggered. found is false when no
// schedule has that name. Admin only.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (jobID int64, found bool, err error) {
	op := fmt.Sprintf("trigger schedule %q", name)
	call, values := c.fn("trigger_schedule", arg{"p_name", "text", name})
	err = c.db.QueryRow(ctx, "SELECT job_id FROM "+call, values...).Scan(&jobID)
	if err == pgx.ErrNoRows {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, translate(op, 0, err)
	}
	return jobID, true, nil
}

// PauseSchedule stops the schedule name from firing until ResumeSchedule
// (backoff.pause_schedule). It reports whether it was running; false also
// when no schedule has that name. Admin only.
func (c *Client) PauseSchedule(ctx context.Context, name string) (bool, error) {
	return c.switchSchedule(ctx, "pause_schedule", fmt.Sprintf("pause schedule %q", name), name)
}

// ResumeSchedule lets a paused schedule fire again from its first slot
// after now (backoff.resume_schedule): the slots it was paused for are
// skipped, not missed. It reports whether it was paused. Admin only.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (bool, error) {
	return c.switchSchedule(ctx, "resume_schedule", fmt.Sprintf("resume schedule %q", name), name)
}

func (c *Client) switchSchedule(ctx context.Context, fn, op, name string) (bool, error) {
	call, values := c.fn(fn, arg{"p_name", "text", name})
	var changed bool
	if err := c.db.QueryRow(ctx, "SELECT "+call, values...).Scan(&changed); err != nil {
		return false, translate(op, 0, err)
	}
	return changed, nil
}

// Schedule is a periodic job as an operator reads it (backoff.schedules).
type Schedule struct {
	Name     string
	Queue    string
	Payload  []byte // JSON
	Cron     string // one of Cron and Every
	Every    time.Duration
	TimeZone string
	Policy   string // "": the queue's or the default rule
	Priority int
	// MaxAttempts is 0 when the policy decides.
	MaxAttempts   int
	Paused        bool
	CatchUp       string // "latest" or "all"
	CatchUpWindow time.Duration
	CatchUpLimit  int
	SkipIfRunning bool
	// NextFireAt is the next slot (zero: the expression never fires again).
	NextFireAt time.Time
	// LastSlot is the latest slot fired or skipped (zero: none yet);
	// LastJobID is the job of the latest slot fired and LastJobSlot its
	// slot (0 and zero: none, or pruned).
	LastSlot    time.Time
	LastJobID   int64
	LastJobSlot time.Time
	Fired       int64
	// Skipped counts the slots skip_if_running passed over; Missed the
	// slots catch-up passed over (with "latest", those whose interval
	// ended max_clock_skew or more before the call that passed them; and
	// those older than CatchUpWindow). LastMissedAt is when a call last
	// passed some over.
	Skipped         int64
	Missed          int64
	LastSkippedSlot time.Time
	LastMissedAt    time.Time
	// Overdue: not paused, and the next fire time is past by more than the
	// schedule's firing interval (the time from that slot to the next):
	// nothing has fired its queue's schedules for a whole interval.
	Overdue   bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// scheduleColumns selects what scanSchedule reads from
// backoff.schedule_list: a schedule with the job of its latest slot.
const scheduleColumns = `s.name, s.queue, s.payload::text, coalesce(s.cron, ''),
	coalesce((extract(epoch FROM s.every) * 1000000)::bigint, 0), s.time_zone, coalesce(s.policy, ''), s.priority,
	coalesce(s.max_attempts, 0), s.paused, s.catch_up,
	coalesce((extract(epoch FROM s.catch_up_window) * 1000000)::bigint, 0), s.catch_up_limit, s.skip_if_running,
	s.next_fire_at, s.last_slot, s.last_job_id, s.last_job_slot, s.fired, s.skipped, s.missed, s.last_skipped_slot,
	s.last_missed_at, s.created_at, s.updated_at, s.overdue`

func scanSchedule(r pgx.CollectableRow) (Schedule, error) {
	var s Schedule
	var payload string
	var every, window int64
	var next, last, lastJobSlot, lastSkipped, lastMissed *time.Time
	var lastJob *int64
	err := r.Scan(&s.Name, &s.Queue, &payload, &s.Cron, &every, &s.TimeZone, &s.Policy, &s.Priority,
		&s.MaxAttempts, &s.Paused, &s.CatchUp, &window, &s.CatchUpLimit, &s.SkipIfRunning,
		&next, &last, &lastJob, &lastJobSlot, &s.Fired, &s.Skipped, &s.Missed, &lastSkipped,
		&lastMissed, &s.CreatedAt, &s.UpdatedAt, &s.Overdue)
	s.Payload = []byte(payload)
	s.Every = time.Duration(every) * time.Microsecond
	s.CatchUpWindow = time.Duration(window) * time.Microsecond
	deref := func(p *time.Time) time.Time {
		if p == nil {
			return time.Time{}
		}
		return *p
	}
	s.NextFireAt, s.LastSlot, s.LastJobSlot = deref(next), deref(last), deref(lastJobSlot)
	s.LastSkippedSlot, s.LastMissedAt = deref(lastSkipped), deref(lastMissed)
	if lastJob != nil {
		s.LastJobID = *lastJob
	}
	return s, err
}

// Schedules lists every schedule, by name (backoff.schedule_list), with
// Overdue at the client's clock. Admin only (workers cannot read
// backoff.schedules).
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	rows, err := c.db.Query(ctx, "SELECT "+scheduleColumns+" FROM backoff.schedule_list(p_now => $1::timestamptz) AS s", c.nowArg())
	if err != nil {
		return nil, translate("list schedules", 0, err)
	}
	out, err := pgx.CollectRows(rows, scanSchedule)
	if err != nil {
		return nil, translate("list schedules", 0, err)
	}
	// Behind a router every shard lists its own schedules: one order.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ScheduleByName reads one schedule (backoff.schedule_list); found is
// false when none has that name. Admin only.
func (c *Client) ScheduleByName(ctx context.Context, name string) (s Schedule, found bool, err error) {
	op := fmt.Sprintf("read schedule %q", name)
	rows, err := c.db.Query(ctx, "SELECT "+scheduleColumns+" FROM backoff.schedule_list(p_name => $1::text, p_now => $2::timestamptz) AS s",
		name, c.nowArg())
	if err != nil {
		return Schedule{}, false, translate(op, 0, err)
	}
	out, err := pgx.CollectRows(rows, scanSchedule)
	if err != nil {
		return Schedule{}, false, translate(op, 0, err)
	}
	if len(out) == 0 {
		return Schedule{}, false, nil
	}
	return out[0], true, nil
}

// JobSchedule tells which schedule enqueued the job jobID, and for which
// slot: schedule "" for a job no schedule enqueued; a zero slot for a
// manual fire (TriggerSchedule). Read through backoff.job, as workers may.
func (c *Client) JobSchedule(ctx context.Context, jobID int64) (schedule string, slot time.Time, err error) {
	var name *string
	var at *time.Time
	err = c.db.QueryRow(ctx, "SELECT schedule, schedule_slot FROM backoff.job($1)", jobID).Scan(&name, &at)
	if err == pgx.ErrNoRows {
		return "", time.Time{}, fmt.Errorf("read the schedule of job %d: %w", jobID, ErrJobNotFound)
	}
	if err != nil {
		return "", time.Time{}, translate(fmt.Sprintf("read the schedule of job %d", jobID), jobID, err)
	}
	if name != nil {
		schedule = *name
	}
	if at != nil {
		slot = *at
	}
	return schedule, slot, nil
}
