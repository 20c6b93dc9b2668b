package cli

import (
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

func init() { register(newDLQCommand) }

func newDLQCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "dlq",
		Short: "List and replay dead-lettered jobs",
		Long: `Dead-lettered jobs stay in backoff.jobs with their error history until an
operator replays or prunes them. "replay" puts a job back to pending with a
fresh attempt budget (the history is kept; attempt numbers, the fencing
tokens, keep counting).`,
		Example: `  backoffctl dlq list --queue emails
  backoffctl jobs show 42
  backoffctl dlq replay 42
  backoffctl dlq replay --queue emails --all --yes`,
	})
	cmd.AddCommand(newDLQListCommand(), newDLQReplayCommand())
	return cmd
}

func newDLQListCommand() *cobra.Command {
	var queue string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered jobs, most recent first",
		Example: `  backoffctl dlq list
  backoffctl dlq list --queue emails --output json`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usagef("--limit %d: want at least 1", limit)
			}
			ctx := cmd.Context()
			conn, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			rows, err := conn.Query(ctx, jobSelect+`
WHERE j.status = 'dead_lettered' AND ($1::text IS NULL OR j.queue = $1)
ORDER BY j.completed_at DESC, j.id DESC LIMIT $2`, nullable(queue), limit)
			if err != nil {
				return fmt.Errorf("list dead letters: %w", err)
			}
			jobs, err := scanJobs(rows)
			if err != nil {
				return fmt.Errorf("list dead letters: %w", err)
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, jobs)
			}
			if len(jobs) == 0 {
				fmt.Fprintln(w, "no dead-lettered jobs")
				return nil
			}
			tw := newTable(w)
			row(tw, "ID", "QUEUE", "ATTEMPTS", "REASON", "DEAD_SINCE", "LAST_ERROR")
			for _, j := range jobs {
				row(tw, strconv.FormatInt(j.ID, 10), j.Queue, fmt.Sprintf("%d/%d", j.CountedAttempts, j.MaxAttempts),
					orDash(j.DeadLetterReason), formatTime(j.CompletedAt), truncate(orDash(j.LastError), 50))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only dead letters of this queue")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs")
	return cmd
}

func newDLQReplayCommand() *cobra.Command {
	var queue string
	var all, yes bool
	cmd := &cobra.Command{
		Use:   "replay [ID]",
		Short: "Put a dead-lettered job (or all of a queue's) back to pending",
		Long: `Replay one dead-lettered (or cancelled) job by id: it returns to pending,
due now, with a fresh attempt budget and its error history kept.

With --queue Q --all, replay every dead-lettered job of queue Q in one
transaction; this needs --yes, and without it only says how many it would
replay.`,
		Example: `  backoffctl dlq replay 42
  backoffctl dlq replay --queue emails --all          # how many?
  backoffctl dlq replay --queue emails --all --yes`,
		Args: func(cmd *cobra.Command, args []string) error {
			if all {
				if len(args) > 0 {
					return usagef("give a job id or --all, not both")
				}
				if queue == "" {
					return usagef("--all needs --queue Q")
				}
				return nil
			}
			if queue != "" || yes {
				return usagef("--queue and --yes go with --all")
			}
			return exactArgs(1, "ID (or --queue Q --all)")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			now, err := nowFlag(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			if !all {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				conn, err := connect(ctx, cmd)
				if err != nil {
					return err
				}
				defer conn.Close(ctx)
				// Two statements: a query does not see the rows that a function
				// it calls changes.
				if _, err := conn.Exec(ctx, `SELECT FROM backoff.replay($1, $2::timestamptz)`, id, now); err != nil {
					return fmt.Errorf("replay job %d: %w", id, err)
				}
				rows, err := conn.Query(ctx, jobSelect+` WHERE j.id = $1`, id)
				if err != nil {
					return fmt.Errorf("replay job %d: %w", id, err)
				}
				jobs, err := scanJobs(rows)
				if err != nil {
					return fmt.Errorf("replay job %d: %w", id, err)
				}
				j := jobs[0]
				if jsonOut {
					return writeJSON(w, j)
				}
				fmt.Fprintf(w, "replayed job %d (queue %s): %s, runs at %s\n", j.ID, j.Queue, j.Status, formatTime(&j.RunAt))
				return nil
			}

			// Behind a router, the queue's shard: its rows are locked there.
			conn, err := connectForQueue(ctx, cmd, queue)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			var ids []int64
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if !yes {
					return tx.QueryRow(ctx, `SELECT ARRAY(SELECT id FROM backoff.jobs WHERE queue = $1 AND status = 'dead_lettered' ORDER BY id)`,
						queue).Scan(&ids)
				}
				return tx.QueryRow(ctx, `
SELECT ARRAY(
    SELECT r.id
    FROM (SELECT id FROM backoff.jobs WHERE queue = $1 AND status = 'dead_lettered' ORDER BY id FOR UPDATE) AS j
    CROSS JOIN LATERAL backoff.replay(j.id, $2::timestamptz) AS r
    ORDER BY r.id)`, queue, now).Scan(&ids)
			})
			if err != nil {
				return fmt.Errorf("replay dead letters of queue %q: %w", queue, err)
			}
			if !yes {
				if len(ids) == 0 {
					fmt.Fprintf(w, "no dead-lettered jobs in queue %s\n", queue)
					return nil
				}
				return usagef("replaying %d dead-lettered job(s) of queue %s needs --yes", len(ids), queue)
			}
			if jsonOut {
				return writeJSON(w, map[string]any{"queue": queue, "replayed": ids})
			}
			fmt.Fprintf(w, "replayed %d dead-lettered job(s) of queue %s\n", len(ids), queue)
			return nil
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "queue whose dead letters --all replays")
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead-lettered job of --queue")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm a bulk replay")
	return cmd
}
