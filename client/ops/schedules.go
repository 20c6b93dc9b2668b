package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// A schedule as an operator follows it (docs/schedules.md): the fires
// ahead of it (backoff.upcoming_fires) and the jobs it enqueued, with
// their outcome (backoff.list_jobs). Both are SQL functions, so psql and
// the other languages read the same, and a router runs them on every
// shard. Admin only.

// FireTime is one fire ahead of a schedule: the instant, and the wall-clock
// time in the schedule's zone (a time.Time in UTC that carries the zone's
// clock reading, as the database's timestamp without time zone does).
type FireTime struct {
	At   time.Time
	Wall time.Time
}

// UpcomingFires returns the next n (1 to 1000) fires of each schedule
// named in names (nil: every schedule), by name, as backoff.upcoming_fires
// computes them at now (zero: the client's clock, else the database's): a
// running schedule's start at its next fire time or after now, whichever
// is later (a slot due now fires at the next call of fire_schedules); a
// paused one's after now, the fires it would have if resumed now. One call
// for all of them; a name no schedule has is absent from the map.
func (c *Client) UpcomingFires(ctx context.Context, names []string, now time.Time, n int) (map[string][]FireTime, error) {
	op := "read the fires ahead of schedules"
	var at any = sqlapi.NullTime(now)
	if now.IsZero() {
		at = c.nowArg()
	}
	var selected any
	if names != nil {
		selected = names
	}
	call, args := sqlapi.CallAt("upcoming_fires", at,
		sqlapi.Arg("p_names", "text[]", selected),
		sqlapi.Arg("p_count", "integer", n))
	rows, err := c.db.Query(ctx, "SELECT name, fire_at, wall_time FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	out := map[string][]FireTime{}
	var name string
	var f FireTime
	_, err = pgx.ForEachRow(rows, []any{&name, &f.At, &f.Wall}, func() error {
		out[name] = append(out[name], f)
		return nil
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// ScheduleJob is a job a schedule enqueued, as its schedule's page lists
// it.
type ScheduleJob struct {
	ID    int64
	Queue string
	// Slot is the slot the job was enqueued for; zero for a manual fire
	// (client.Client.TriggerSchedule).
	Slot   time.Time
	Status jobtype.Status
	// AttemptNumber is the counted attempt, as client.Job.AttemptNumber
	// (claims given back by a snooze are not counted; docs/adr/0065);
	// MaxAttempts the job's, else its policy's (0: neither known).
	AttemptNumber, MaxAttempts int
	DeadLetterReason           string
	RunAt                      time.Time
	CreatedAt                  time.Time
	CompletedAt                time.Time // zero while unfinished
}

// ScheduleJobs returns the last limit (at least 1) jobs the schedule name
// enqueued (slots and manual fires), newest first; none for a schedule
// with no jobs left or no schedule of that name. It is List with
// ListParams.Schedule, NewestFirst and no payloads, one page.
func (c *Client) ScheduleJobs(ctx context.Context, name string, limit int) ([]ScheduleJob, error) {
	if limit < 1 {
		return nil, fmt.Errorf("read the jobs of schedule %q: %w: limit must be at least 1, got %d",
			name, sqlapi.ErrInvalidArgument, limit)
	}
	page, err := c.List(ctx, ListParams{Schedule: name, Order: NewestFirst, Limit: limit, WithoutPayloads: true})
	if err != nil {
		return nil, fmt.Errorf("read the jobs of schedule %q: %w", name, err)
	}
	out := make([]ScheduleJob, len(page.Jobs))
	for i, d := range page.Jobs {
		out[i] = ScheduleJob{ID: d.ID, Queue: d.Queue, Status: d.Status, AttemptNumber: d.AttemptNumber(),
			MaxAttempts: d.EffectiveMaxAttempts, DeadLetterReason: d.DeadLetterReason, RunAt: d.RunAt, CreatedAt: d.CreatedAt}
		if d.ScheduleSlot != nil {
			out[i].Slot = *d.ScheduleSlot
		}
		if d.CompletedAt != nil {
			out[i].CompletedAt = *d.CompletedAt
		}
	}
	return out, nil
}
