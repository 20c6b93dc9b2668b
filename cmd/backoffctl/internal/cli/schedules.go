package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

func init() { register(newSchedulesCommand) }

func newSchedulesCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "schedules",
		Short: "List and show periodic jobs; pause, resume or trigger one",
		Long: `Periodic jobs (docs/schedules.md) are declared in backoff.toml
([schedules.NAME], applied by "config apply") or with backoff.put_schedule,
and fired by every Go Worker, by pg_cron ("cron install --schedules") or by
any caller of backoff.fire_schedules. "pause" stops a schedule's slots until
"resume", which starts again from the first slot after it (the slots in
between are skipped, not caught up). "trigger" enqueues one job now, out of
turn: a manual fire, recorded on the job (schedule set, no slot), that does
not move the schedule. Reading schedules needs backoff_admin.`,
		Example: `  backoffctl schedules list
  backoffctl schedules show nightly-report
  backoffctl schedules pause nightly-report
  backoffctl schedules resume nightly-report
  backoffctl schedules trigger nightly-report`,
	})
	cmd.AddCommand(newSchedulesListCommand(), newSchedulesShowCommand(),
		newScheduleSwitchCommand(true), newScheduleSwitchCommand(false), newScheduleTriggerCommand())
	return cmd
}

// scheduleRow is a schedule for --output json (durations in microseconds,
// as every duration backoffctl prints in JSON).
type scheduleRow struct {
	Name            string          `json:"name"`
	Queue           string          `json:"queue"`
	Cron            *string         `json:"cron"`
	EveryUS         *int64          `json:"every_us"`
	TimeZone        string          `json:"time_zone"`
	Payload         json.RawMessage `json:"payload"`
	Policy          *string         `json:"policy"`
	Priority        int             `json:"priority"`
	MaxAttempts     *int            `json:"max_attempts"`
	Paused          bool            `json:"paused"`
	CatchUp         string          `json:"catch_up"`
	CatchUpWindowUS *int64          `json:"catch_up_window_us"`
	CatchUpLimit    int             `json:"catch_up_limit"`
	SkipIfRunning   bool            `json:"skip_if_running"`
	NextFireAt      jsonTime        `json:"next_fire_at"`
	LastSlot        jsonTime        `json:"last_slot"`
	LastJobID       *int64          `json:"last_job_id"`
	Fired           int64           `json:"fired"`
	Skipped         int64           `json:"skipped"`
	Missed          int64           `json:"missed"`
	LastSkippedSlot jsonTime        `json:"last_skipped_slot"`
	LastMissedAt    jsonTime        `json:"last_missed_at"`
	Overdue         bool            `json:"overdue"`
}

func optTime(t time.Time) jsonTime {
	if t.IsZero() {
		return jsonTime{}
	}
	return jsonTime{&t}
}

func scheduleRowOf(s client.Schedule) scheduleRow {
	r := scheduleRow{Name: s.Name, Queue: s.Queue, TimeZone: s.TimeZone, Payload: json.RawMessage(s.Payload),
		Priority: s.Priority, Paused: s.Paused, CatchUp: s.CatchUp, CatchUpLimit: s.CatchUpLimit,
		SkipIfRunning: s.SkipIfRunning, NextFireAt: optTime(s.NextFireAt), LastSlot: optTime(s.LastSlot),
		Fired: s.Fired, Skipped: s.Skipped, Missed: s.Missed, LastSkippedSlot: optTime(s.LastSkippedSlot),
		LastMissedAt: optTime(s.LastMissedAt), Overdue: s.Overdue}
	if s.Cron != "" {
		r.Cron = &s.Cron
	} else {
		us := s.Every.Microseconds()
		r.EveryUS = &us
	}
	if s.Policy != "" {
		r.Policy = &s.Policy
	}
	if s.MaxAttempts > 0 {
		r.MaxAttempts = &s.MaxAttempts
	}
	if s.CatchUpWindow > 0 {
		us := s.CatchUpWindow.Microseconds()
		r.CatchUpWindowUS = &us
	}
	if s.LastJobID != 0 {
		r.LastJobID = &s.LastJobID
	}
	return r
}

// timingCell is a schedule's timing for people: the cron expression and
// its zone, or "every 1h".
func timingCell(s client.Schedule) string {
	if s.Cron != "" {
		return s.Cron + " (" + s.TimeZone + ")"
	}
	return "every " + config.FormatDuration(s.Every)
}

func lastFireCell(s client.Schedule) string {
	if s.LastJobID == 0 {
		return "-"
	}
	return formatTime(&s.LastJobSlot) + " job " + strconv.FormatInt(s.LastJobID, 10)
}

func newSchedulesListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every schedule: queue, timing, next fire, last fire and its job, missed slots, and whether it is active, paused or overdue",
		Example: `  backoffctl schedules list
  backoffctl schedules list --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			return withClient(cmd, func(ctx context.Context, c *client.Client) error {
				list, err := c.Schedules(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					rows := make([]scheduleRow, len(list))
					for i, s := range list {
						rows[i] = scheduleRowOf(s)
					}
					return writeJSON(w, rows)
				}
				if len(list) == 0 {
					fmt.Fprintln(w, "no schedules")
					return nil
				}
				tw := newTable(w)
				row(tw, "SCHEDULE", "QUEUE", "TIMING", "NEXT FIRE", "LAST FIRE", "MISSED", "STATE")
				for _, s := range list {
					next := formatTime(&s.NextFireAt)
					if s.Paused {
						next = "-"
					}
					row(tw, s.Name, s.Queue, timingCell(s), next, lastFireCell(s), strconv.FormatInt(s.Missed, 10), scheduleStateCell(s))
				}
				return tw.Flush()
			})
		}),
	}
}

func newSchedulesShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule's settings, its next fires, its last jobs with their outcome, and what it skipped",
		Example: `  backoffctl schedules show nightly-report
  backoffctl schedules show nightly-report --output json`,
		Args: exactArgs(1, "NAME"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				s, found, err := c.ScheduleByName(ctx, args[0])
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("no schedule %q", args[0])
				}
				now, err := clock(cmd)
				if err != nil {
					return err
				}
				fires, err := o.UpcomingFires(ctx, []string{s.Name}, now, showFires)
				if err != nil {
					return err
				}
				jobs, err := o.ScheduleJobs(ctx, s.Name, showJobs)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					out := scheduleShow{scheduleRow: scheduleRowOf(s), NextFires: []scheduleFireRow{}, LastJobs: []scheduleJobRow{}}
					for _, f := range fires[s.Name] {
						out.NextFires = append(out.NextFires, scheduleFireRow{At: f.At.UTC(), WallTime: f.Wall.Format("2006-01-02T15:04:05")})
					}
					for _, j := range jobs {
						out.LastJobs = append(out.LastJobs, scheduleJobRowOf(j))
					}
					return writeJSON(w, out)
				}
				writeSchedule(w, s, now)
				writeScheduleFires(w, s, fires[s.Name], now)
				writeScheduleJobs(w, jobs)
				return nil
			})
		}),
	}
}

// writeSchedule prints one schedule for `schedules show`.
func writeSchedule(w io.Writer, s client.Schedule, now time.Time) {
	tw := newTable(w)
	field := func(k, v string) { row(tw, k+":", v) }
	field("schedule", s.Name)
	field("queue", s.Queue)
	field("timing", timingCell(s))
	field("payload", string(s.Payload))
	policy := s.Policy
	if policy == "" {
		policy = "- (the queue's)"
	}
	field("policy", policy)
	field("priority", strconv.Itoa(s.Priority))
	attempts := "- (the policy's)"
	if s.MaxAttempts > 0 {
		attempts = strconv.Itoa(s.MaxAttempts)
	}
	field("max attempts", attempts)
	catchUp := s.CatchUp
	if s.CatchUp == "all" {
		catchUp += fmt.Sprintf(", at most %d per call", s.CatchUpLimit)
	}
	if s.CatchUpWindow > 0 {
		catchUp += ", within " + config.FormatDuration(s.CatchUpWindow)
	}
	field("missed slots", catchUp)
	field("skip if running", yesNo(s.SkipIfRunning))
	field("paused", yesNo(s.Paused))
	next := formatTime(&s.NextFireAt)
	switch {
	case s.Paused:
		next = "when resumed (paused)"
	case s.NextFireAt.IsZero():
		next = "never (the expression has no later time)"
	default:
		next += " (" + relative(s.NextFireAt, now) + ")"
	}
	if s.Overdue {
		next += ", OVERDUE: past by more than its interval, no firer has run for its queue"
	}
	field("next fire", next)
	field("last slot", formatTime(&s.LastSlot))
	field("last fire", lastFireCell(s))
	field("fired", strconv.FormatInt(s.Fired, 10))
	skipped := strconv.FormatInt(s.Skipped, 10)
	if !s.LastSkippedSlot.IsZero() {
		skipped += ", last " + formatTime(&s.LastSkippedSlot)
	}
	field("skipped", skipped)
	missed := strconv.FormatInt(s.Missed, 10)
	if !s.LastMissedAt.IsZero() {
		missed += ", last passed over at " + formatTime(&s.LastMissedAt)
	}
	field("missed", missed)
	_ = tw.Flush()
}

// showFires and showJobs are how many fires ahead and jobs back
// `schedules show` lists.
const (
	showFires = 5
	showJobs  = 10
)

// scheduleShow is `schedules show --output json`: the schedule, its next
// fires and its last jobs, newest first.
type scheduleShow struct {
	scheduleRow
	NextFires []scheduleFireRow `json:"next_fires"`
	LastJobs  []scheduleJobRow  `json:"last_jobs"`
}

type scheduleFireRow struct {
	At       time.Time `json:"at"`
	WallTime string    `json:"wall_time"` // in the schedule's zone
}

type scheduleJobRow struct {
	ID               int64     `json:"id"`
	Slot             jsonTime  `json:"slot"` // null: a manual fire
	Status           string    `json:"status"`
	CountedAttempts  int       `json:"counted_attempts"` // as in jobs show
	MaxAttempts      *int      `json:"max_attempts"`
	DeadLetterReason *string   `json:"dead_letter_reason"`
	CreatedAt        time.Time `json:"created_at"`
	FinishedAt       jsonTime  `json:"finished_at"`
}

func scheduleJobRowOf(j ops.ScheduleJob) scheduleJobRow {
	r := scheduleJobRow{ID: j.ID, Slot: optTime(j.Slot), Status: string(j.Status), CountedAttempts: j.AttemptNumber,
		CreatedAt: j.CreatedAt.UTC(), FinishedAt: optTime(j.CompletedAt)}
	if j.MaxAttempts > 0 {
		r.MaxAttempts = &j.MaxAttempts
	}
	if j.DeadLetterReason != "" {
		r.DeadLetterReason = &j.DeadLetterReason
	}
	return r
}

// writeScheduleFires prints the fires ahead of a schedule, each with its
// wall-clock time in the schedule's zone; a paused one's are those a
// resume now would bring.
func writeScheduleFires(w io.Writer, s client.Schedule, fires []ops.FireTime, now time.Time) {
	if len(fires) == 0 {
		fmt.Fprintln(w, "next fires: none")
		return
	}
	head := fmt.Sprintf("next fires (%d):", len(fires))
	if s.Paused {
		head = fmt.Sprintf("next fires (%d, if resumed now):", len(fires))
	}
	fmt.Fprintln(w, head)
	tw := newTable(w)
	for _, f := range fires {
		row(tw, "  "+formatTime(&f.At), f.Wall.Format("2006-01-02 15:04:05")+" "+s.TimeZone, relative(f.At, now))
	}
	_ = tw.Flush()
}

// writeScheduleJobs prints a schedule's last jobs with their outcome.
func writeScheduleJobs(w io.Writer, jobs []ops.ScheduleJob) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "last jobs: none")
		return
	}
	fmt.Fprintf(w, "last jobs (%d, newest first):\n", len(jobs))
	tw := newTable(w)
	row(tw, "  JOB", "SLOT", "STATUS", "ATTEMPTS", "FINISHED")
	for _, j := range jobs {
		slot := "manual"
		if !j.Slot.IsZero() {
			slot = formatTime(&j.Slot)
		}
		status := string(j.Status)
		if j.DeadLetterReason != "" {
			status += " (" + j.DeadLetterReason + ")"
		}
		attempts := strconv.Itoa(j.AttemptNumber)
		if j.MaxAttempts > 0 {
			attempts += "/" + strconv.Itoa(j.MaxAttempts)
		}
		row(tw, "  "+strconv.FormatInt(j.ID, 10), slot, status, attempts, formatTime(&j.CompletedAt))
	}
	_ = tw.Flush()
}

func newScheduleSwitchCommand(pause bool) *cobra.Command {
	verb := switchVerb(pause)
	short := "Let a paused schedule fire again, from its first slot after now"
	if pause {
		short = "Stop a schedule from firing (the jobs it enqueued stay)"
	}
	return &cobra.Command{
		Use:     verb + " NAME",
		Short:   short,
		Example: "  backoffctl schedules " + verb + " nightly-report",
		Args:    exactArgs(1, "NAME"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			name := args[0]
			return withClient(cmd, func(ctx context.Context, c *client.Client) error {
				_, found, err := c.ScheduleByName(ctx, name)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("no schedule %q", name)
				}
				var changed bool
				if pause {
					changed, err = c.PauseSchedule(ctx, name)
				} else {
					changed, err = c.ResumeSchedule(ctx, name)
				}
				if err != nil {
					return err
				}
				return writeSwitch(cmd.OutOrStdout(), jsonOut, "schedule", name, esc(name), pause, changed)
			})
		}),
	}
}

func newScheduleTriggerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "trigger NAME",
		Short: "Enqueue one job of a schedule now, out of turn (a manual fire; the schedule does not move)",
		Long: `Enqueue the job a slot of the schedule would enqueue, due now
(backoff.trigger_schedule). The job names the schedule and has no slot, so
it is told apart from the slots' jobs; the schedule's next fire time and
counters stay as they are. A paused schedule can be triggered.`,
		Example: "  backoffctl schedules trigger nightly-report",
		Args:    exactArgs(1, "NAME"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			name := args[0]
			return withClient(cmd, func(ctx context.Context, c *client.Client) error {
				id, found, err := c.TriggerSchedule(ctx, name)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("no schedule %q", name)
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, map[string]any{"schedule": name, "job_id": id})
				}
				fmt.Fprintf(w, "triggered schedule %s: job %d\n", esc(name), id)
				return nil
			})
		}),
	}
}

// scheduleStateCell is a schedule's state in `schedules list`: paused, overdue (its
// next fire time is past by more than its interval: nothing fires it) or
// active.
func scheduleStateCell(s client.Schedule) string {
	switch {
	case s.Paused:
		return "paused"
	case s.Overdue:
		return "OVERDUE"
	default:
		return "active"
	}
}
