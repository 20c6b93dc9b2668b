package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

func init() {
	register(newReapCommand)
	register(newStatsCommand)
	register(newEnqueueCommand)
}

func newReapCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Retry or dead-letter running jobs whose lease expired",
		Long: `Run backoff.reap once: every running job whose lease expired goes through
the same decision as a failure (retry with backoff, or dead letter), with the
error "lease expired" in its history. Workers run the reaper themselves; this
command is for a cron job or an operator.`,
		Example: `  backoffctl reap
  backoffctl reap --limit 10000`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				n, err := c.Reap(ctx, limit)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(cmd.OutOrStdout(), map[string]int{"reaped": n})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reaped %d job(s) whose lease expired\n", n)
				return nil
			})
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 1000, "at most this many jobs")
	return cmd
}

// statsRow is one row of backoff.stats.
type statsRow struct {
	Queue        string         `json:"queue"`
	Pending      int64          `json:"pending"`
	Running      int64          `json:"running"`
	Expired      int64          `json:"expired"`
	Retrying     int64          `json:"retrying"`
	Blocked      int64          `json:"blocked"`
	Completed    int64          `json:"completed"`
	DeadLettered int64          `json:"dead_lettered"`
	Cancelled    int64          `json:"cancelled"`
	Due          int64          `json:"due"`
	OldestDueAge *time.Duration `json:"oldest_due_age_us"`
	Retries      int64          `json:"retries"`
	DeadLetters  int64          `json:"dead_letters"`
	Paused       bool           `json:"paused"`
	// The queue's controls (docs/concepts.md "Queues as controls"): its
	// breaker's live state and the failures in its window (nil without a
	// breaker), its rate limit and the tokens in its bucket (nil without).
	Breaker         *string  `json:"breaker"`
	BreakerFailures *int64   `json:"breaker_failures_in_window"`
	Rate            *float64 `json:"rate"`
	Tokens          *float64 `json:"tokens"`

	cells [2]string // BREAKER and RATE as the table shows them
}

func newStatsCommand() *cobra.Command {
	var window string
	var watch int
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Jobs per queue and status, the oldest due job, recent retries and dead letters, breaker and rate",
		Long: `Print one line per queue: jobs per status (BLOCKED: waiting for the jobs
they depend on, "jobs graph" shows for which), how many are due and how long
the oldest due job has waited, EXPIRED: the running jobs whose lease has
ended (work a stopped worker stranded, marked "!" until "backoffctl reap"
or a worker's reaper settles it), whether the queue is paused, the retries
(an operator's replay is none) and dead letters of the last --window, and
the queue's controls: its circuit breaker's state (closed with
the failures in its window out of its threshold, open, half_open) and its
rate limit ("-": none; backoff.queue_state). Under the table, for an
admin (backoff.health): when reap, rotate and the schedule firers last ran,
rotate's last segment switch and truncate, and the workers seen in the
last minute, with a WARNING when some maintenance has not run for 10
minutes or no worker was seen (a stopped queue otherwise looks idle), and
one when an old snapshot holds vacuum back. With --watch N the table is
redrawn every N seconds until interrupted (Ctrl-C).`,
		Example: `  backoffctl stats
  backoffctl stats --window 15m
  backoffctl stats --watch 2`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			win, err := config.ParseDuration(window)
			if err != nil {
				return usagef("--window: %v", err)
			}
			if watch < 0 {
				return usagef("--watch %d: want a number of seconds", watch)
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				w := cmd.OutOrStdout()
				draw := func() error {
					stats, err := readStats(ctx, c, o, win)
					if err != nil {
						return err
					}
					if jsonOut {
						return writeJSON(w, stats)
					}
					writeStats(w, stats, win)
					now, err := clock(cmd)
					if err != nil {
						return err
					}
					return writeHealth(ctx, w, o, now)
				}
				if watch == 0 {
					return draw()
				}
				tick := time.NewTicker(time.Duration(watch) * time.Second)
				defer tick.Stop()
				for {
					if !jsonOut {
						fmt.Fprint(w, "\033[H\033[2J") // clear the terminal
						fmt.Fprintf(w, "every %ds, %s (Ctrl-C to stop)\n\n", watch, time.Now().UTC().Format(time.RFC3339))
					}
					if err := draw(); err != nil {
						return err
					}
					select {
					case <-ctx.Done():
						return nil
					case <-tick.C:
					}
				}
			})
		}),
	}
	cmd.Flags().StringVar(&window, "window", "1h", "period for the RETRIES and DEAD_LETTERS columns")
	cmd.Flags().IntVar(&watch, "watch", 0, "redraw every N seconds until interrupted")
	return cmd
}

// readStats reads backoff.stats through the operator's client for a
// window, and the live state of the queues that have controls through the
// worker's.
func readStats(ctx context.Context, c *client.Client, o *ops.Client, win time.Duration) ([]statsRow, error) {
	qs, err := o.Stats(ctx, win)
	if err != nil {
		return nil, err
	}
	infos, err := o.Queues(ctx)
	if err != nil {
		return nil, err
	}
	states, err := queueStates(ctx, c, infos)
	if err != nil {
		return nil, err
	}
	info := map[string]ops.QueueInfo{}
	for _, q := range infos {
		info[q.Name] = q
	}
	stats := make([]statsRow, len(qs))
	for i, q := range qs {
		stats[i] = statsRow{Queue: q.Queue, Pending: q.Pending, Running: q.Running, Expired: q.Expired, Retrying: q.Retrying, Blocked: q.Blocked, Paused: q.Paused,
			Completed: q.Completed, DeadLettered: q.DeadLettered, Cancelled: q.Cancelled, Due: q.Due,
			Retries: q.Retries, DeadLetters: q.DeadLetters}
		if q.Due > 0 {
			age := q.OldestDueAge
			stats[i].OldestDueAge = &age
		}
		qi := info[q.Queue]
		st, ok := states[q.Queue]
		if ok && qi.BreakerFailures != nil {
			state, failures := st.State, st.Failures
			stats[i].Breaker, stats[i].BreakerFailures = &state, &failures
		}
		if ok && qi.Rate != nil {
			stats[i].Rate, stats[i].Tokens = qi.Rate, st.Tokens
		}
		stats[i].cells = [2]string{stateCell(qi, st, ok), rateCell(qi.Rate, qi.Burst)}
	}
	return stats, nil
}

func writeStats(w io.Writer, stats []statsRow, window time.Duration) {
	if len(stats) == 0 {
		fmt.Fprintln(w, "no jobs")
		return
	}
	win := formatDelay(window)
	tw := newTable(w)
	row(tw, "QUEUE", "PAUSED", "PENDING", "RUNNING", "EXPIRED", "RETRYING", "BLOCKED", "COMPLETED", "DEAD", "CANCELLED", "DUE", "OLDEST_DUE",
		"RETRIES/"+win, "DEAD/"+win, "BREAKER", "RATE")
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, s := range stats {
		age := "-"
		if s.OldestDueAge != nil {
			age = formatDelay(s.OldestDueAge.Round(time.Millisecond))
		}
		expired := i(s.Expired)
		if s.Expired > 0 {
			expired += "!" // stranded by a stopped worker: `backoffctl reap` settles them
		}
		row(tw, s.Queue, yesNo(s.Paused), i(s.Pending), i(s.Running), expired, i(s.Retrying), i(s.Blocked), i(s.Completed), i(s.DeadLettered), i(s.Cancelled),
			i(s.Due), age, i(s.Retries), i(s.DeadLetters), orDashCell(s.cells[0]), orDashCell(s.cells[1]))
	}
	_ = tw.Flush()
}

// writeHealth adds what backoff.health says under the stats: when the
// maintenance last ran and the workers seen in the last minute
// (docs/adr/0079), with its warning when some of it stopped, and the
// vacuum warning when an old snapshot keeps vacuum from removing finished
// jobs, which every claim then walks. A login that may not read it (not
// an admin) gets the table alone.
func writeHealth(ctx context.Context, w io.Writer, o *ops.Client, now time.Time) error {
	h, err := o.Health(ctx, 0)
	if errors.Is(err, client.ErrPermissionDenied) {
		return nil
	}
	if err != nil {
		return err
	}
	l := h.Liveness
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return relative(*t, now)
	}
	schedules := "schedules fired " + when(l.FireAt)
	if l.ActiveSchedules == 0 {
		schedules += " (none active)"
	}
	fmt.Fprintf(w, "\nmaintenance: reap %s, rotate %s (last switch %s, last truncate %s), %s\n",
		when(l.ReapAt), when(l.RotateAt), when(l.SwitchAt), when(l.TruncateAt), schedules)
	fmt.Fprintf(w, "workers seen in the last minute: %d\n", l.WorkersSeen)
	if l.Warning != "" {
		fmt.Fprintf(w, "WARNING: maintenance: %s\n", esc(l.Warning))
	}
	if h.Warning != "" {
		fmt.Fprintf(w, "\nWARNING: vacuum: %s\n", esc(h.Warning))
	}
	return nil
}

func newEnqueueCommand() *cobra.Command {
	var runAt, dedupe string
	var maxAttempts, priority int
	cmd := &cobra.Command{
		Use:   "enqueue QUEUE JSON",
		Short: "Add a job to a queue",
		Long: `Add a job with a JSON payload to a queue (backoff.enqueue). --run-at takes
an RFC 3339 time or a delay from now ("30s", "1h30m"). A --dedupe-key that
matches an unfinished job of the queue returns that job instead of adding one.`,
		Example: `  backoffctl enqueue emails '{"to": "ada@example.com"}'
  backoffctl enqueue reports '{}' --run-at 2030-01-01T09:00:00Z --priority 10
  backoffctl enqueue webhooks '{"id": 7}' --run-at 5m --dedupe-key webhook-7 --max-attempts 3`,
		Args: exactArgs(2, "QUEUE JSON"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			queue, payload := args[0], args[1]
			if strings.TrimSpace(queue) == "" {
				return usagef("queue name must not be empty")
			}
			if !json.Valid([]byte(payload)) {
				return usagef("payload is not valid JSON: %s", truncate(payload, 60))
			}
			opts := []client.EnqueueOption{client.Priority(priority)}
			var after time.Duration
			if runAt != "" {
				if t, err := time.Parse(time.RFC3339Nano, runAt); err == nil {
					opts = append(opts, client.RunAt(t))
				} else if d, err := config.ParseDuration(runAt); err == nil {
					after = d
				} else {
					return usagef("--run-at %q: want an RFC 3339 time (2030-01-01T09:00:00Z) or a delay (30s, 1h30m)", runAt)
				}
			}
			if cmd.Flags().Changed("max-attempts") {
				if maxAttempts < 1 {
					return usagef("--max-attempts %d: want at least 1", maxAttempts)
				}
				opts = append(opts, client.MaxAttempts(maxAttempts))
			}
			if dedupe != "" {
				opts = append(opts, client.DedupeKey(dedupe))
			}
			if after != 0 {
				// A delay counts from --now, else from this machine's clock.
				now, err := clock(cmd)
				if err != nil {
					return err
				}
				opts = append(opts, client.RunAt(now.Add(after)))
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				id, err := c.Enqueue(ctx, queue, json.RawMessage(payload), opts...)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"id": id, "queue": queue})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "enqueued job %d in queue %s\n", id, esc(queue))
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&runAt, "run-at", "", "when the job becomes due: RFC 3339 time or delay from now (default now)")
	cmd.Flags().IntVar(&maxAttempts, "max-attempts", 0, "attempts before dead-lettering (default: the policy's)")
	cmd.Flags().IntVar(&priority, "priority", 0, "higher runs first (-32768 to 32767)")
	cmd.Flags().StringVar(&dedupe, "dedupe-key", "", "skip if an unfinished job of the queue has this key")
	return cmd
}

// orDashCell is "-" for an empty cell (a row made without readStats).
func orDashCell(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
