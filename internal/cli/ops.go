package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/internal/config"
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usagef("--limit %d: want at least 1", limit)
			}
			now, err := nowFlag(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			conn, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			var n int
			if err := conn.QueryRow(ctx, `SELECT backoff.reap($1::timestamptz, $2)`, now, limit).Scan(&n); err != nil {
				return fmt.Errorf("reap: %w", err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]int{"reaped": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reaped %d job(s) whose lease expired\n", n)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 1000, "at most this many jobs")
	return cmd
}

// statsRow is one row of backoff.stats.
type statsRow struct {
	Queue        string         `json:"queue"`
	Pending      int64          `json:"pending"`
	Running      int64          `json:"running"`
	Retrying     int64          `json:"retrying"`
	Completed    int64          `json:"completed"`
	DeadLettered int64          `json:"dead_lettered"`
	Cancelled    int64          `json:"cancelled"`
	Due          int64          `json:"due"`
	OldestDueAge *time.Duration `json:"oldest_due_age_us"`
	Retries      int64          `json:"retries"`
	DeadLetters  int64          `json:"dead_letters"`
}

func newStatsCommand() *cobra.Command {
	var window string
	var watch int
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Jobs per queue and status, the oldest due job, recent retries and dead letters",
		Long: `Print one line per queue: jobs per status, how many are due and how long
the oldest due job has waited, and the retries and dead letters of the last
--window. With --watch N the table is redrawn every N seconds until
interrupted (Ctrl-C).`,
		Example: `  backoffctl stats
  backoffctl stats --window 15m
  backoffctl stats --watch 2`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			win, err := config.ParseDuration(window)
			if err != nil {
				return usagef("--window: %v", err)
			}
			if watch < 0 {
				return usagef("--watch %d: want a number of seconds", watch)
			}
			now, err := nowFlag(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			conn, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			w := cmd.OutOrStdout()
			draw := func() error {
				stats, err := readStats(ctx, conn, win, now)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(w, stats)
				}
				writeStats(w, stats, win)
				return nil
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
		},
	}
	cmd.Flags().StringVar(&window, "window", "1h", "period for the RETRIES and DEAD_LETTERS columns")
	cmd.Flags().IntVar(&watch, "watch", 0, "redraw every N seconds until interrupted")
	return cmd
}

// readStats reads backoff.stats for a window, at now (nil: the database's
// clock).
func readStats(ctx context.Context, q querier, win time.Duration, now *time.Time) ([]statsRow, error) {
	rows, err := q.Query(ctx, `
SELECT queue, pending, running, retrying, completed, dead_lettered, cancelled, due,
       (extract(epoch FROM oldest_due_age) * 1000000)::bigint, retries, dead_letters
FROM backoff.stats($1::bigint * interval '1 microsecond', $2::timestamptz)`, win.Microseconds(), now)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	stats := []statsRow{}
	for rows.Next() {
		var s statsRow
		var age *int64
		if err := rows.Scan(&s.Queue, &s.Pending, &s.Running, &s.Retrying, &s.Completed, &s.DeadLettered,
			&s.Cancelled, &s.Due, &age, &s.Retries, &s.DeadLetters); err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		if age != nil {
			d := time.Duration(*age) * time.Microsecond
			s.OldestDueAge = &d
		}
		stats = append(stats, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
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
	row(tw, "QUEUE", "PENDING", "RUNNING", "RETRYING", "COMPLETED", "DEAD", "CANCELLED", "DUE", "OLDEST_DUE",
		"RETRIES/"+win, "DEAD/"+win)
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, s := range stats {
		age := "-"
		if s.OldestDueAge != nil {
			age = formatDelay(s.OldestDueAge.Round(time.Millisecond))
		}
		row(tw, s.Queue, i(s.Pending), i(s.Running), i(s.Retrying), i(s.Completed), i(s.DeadLettered), i(s.Cancelled),
			i(s.Due), age, i(s.Retries), i(s.DeadLetters))
	}
	_ = tw.Flush()
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
		RunE: func(cmd *cobra.Command, args []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			queue, payload := args[0], args[1]
			if strings.TrimSpace(queue) == "" {
				return usagef("queue name must not be empty")
			}
			if !json.Valid([]byte(payload)) {
				return usagef("payload is not valid JSON: %s", truncate(payload, 60))
			}
			var at *time.Time
			var after *int64
			if runAt != "" {
				if t, err := time.Parse(time.RFC3339Nano, runAt); err == nil {
					at = &t
				} else if d, err := config.ParseDuration(runAt); err == nil {
					us := d.Microseconds()
					after = &us
				} else {
					return usagef("--run-at %q: want an RFC 3339 time (2030-01-01T09:00:00Z) or a delay (30s, 1h30m)", runAt)
				}
			}
			var maxA *int
			if cmd.Flags().Changed("max-attempts") {
				if maxAttempts < 1 {
					return usagef("--max-attempts %d: want at least 1", maxAttempts)
				}
				maxA = &maxAttempts
			}
			now, err := nowFlag(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			conn, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			var id int64
			err = conn.QueryRow(ctx, `
SELECT backoff.enqueue($1, $2::jsonb,
    coalesce($3::timestamptz, coalesce($7::timestamptz, now()) + $4::bigint * interval '1 microsecond'),
    $5, $6, $8, $7::timestamptz)`, queue, payload, at, after, maxA, priority, now, nullable(dedupe)).Scan(&id)
			if err != nil {
				return fmt.Errorf("enqueue into %q: %w", queue, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"id": id, "queue": queue})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "enqueued job %d in queue %s\n", id, queue)
			return nil
		},
	}
	cmd.Flags().StringVar(&runAt, "run-at", "", "when the job becomes due: RFC 3339 time or delay from now (default now)")
	cmd.Flags().IntVar(&maxAttempts, "max-attempts", 0, "attempts before dead-lettering (default: the policy's)")
	cmd.Flags().IntVar(&priority, "priority", 0, "higher runs first")
	cmd.Flags().StringVar(&dedupe, "dedupe-key", "", "skip if an unfinished job of the queue has this key")
	return cmd
}
