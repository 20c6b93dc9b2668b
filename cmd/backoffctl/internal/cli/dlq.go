package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
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
	var queue, after string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered jobs, most recent first",
		Example: `  backoffctl dlq list
  backoffctl dlq list --queue emails --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				page, err := o.List(ctx, ops.ListParams{Queue: queue, Statuses: []client.Status{client.StatusDeadLettered},
					Order: ops.RecentlyFinishedFirst, Cursor: after, Limit: limit})
				if err != nil {
					return err
				}
				jobs := jobRowsOf(page.Jobs)
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
				return flushPage(w, tw, page.Next)
			})
		}),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only dead letters of this queue")
	cmd.Flags().StringVar(&after, "after", "", "continue a listing: the cursor printed as \"more: --after ...\"")
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
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			w := cmd.OutOrStdout()
			if !all {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
					j, err := o.Replay(ctx, id)
					if err != nil {
						return err
					}
					if jsonOut {
						return writeJSON(w, map[string]any{"id": j.ID, "queue": j.Queue, "status": j.Status, "run_at": j.RunAt})
					}
					fmt.Fprintf(w, "replayed job %d (queue %s): %s, runs at %s\n", j.ID, esc(j.Queue), j.Status, formatTime(&j.RunAt))
					return nil
				})
			}

			// Behind a router, the queue's shard: its rows are locked there.
			return withOpsForQueue(cmd, queue, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				if !yes {
					n, err := deadLetters(ctx, o, queue)
					if err != nil {
						return err
					}
					if n == 0 {
						fmt.Fprintf(w, "no dead-lettered jobs in queue %s\n", esc(queue))
						return nil
					}
					return usagef("replaying %d dead-lettered job(s) of queue %s needs --yes", n, esc(queue))
				}
				outcomes, err := o.ReplayDeadLetters(ctx, queue)
				if err != nil {
					return err
				}
				replayed := []int64{}
				type left struct {
					ID     int64  `json:"id"`
					Reason string `json:"reason"`
				}
				failed := []left{}
				for _, o := range outcomes {
					if o.Replayed {
						replayed = append(replayed, o.JobID)
					} else {
						failed = append(failed, left{o.JobID, o.Reason})
					}
				}
				if jsonOut {
					if err := writeJSON(w, map[string]any{"queue": queue, "replayed": replayed, "not_replayed": failed}); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(w, "replayed %d dead-lettered job(s) of queue %s\n", len(replayed), esc(queue))
					for _, f := range failed {
						fmt.Fprintf(w, "not replayed: job %d: %s\n", f.ID, esc(f.Reason))
					}
				}
				if len(failed) > 0 {
					return fmt.Errorf("%d dead-lettered job(s) of queue %s could not be replayed", len(failed), queue)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "queue whose dead letters --all replays")
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead-lettered job of --queue")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm a bulk replay")
	return cmd
}

// deadLetters counts the dead-lettered jobs of queue (from backoff.stats).
func deadLetters(ctx context.Context, o *ops.Client, queue string) (int64, error) {
	stats, err := o.Stats(ctx, 0)
	if err != nil {
		return 0, err
	}
	for _, s := range stats {
		if s.Queue == queue {
			return s.DeadLettered, nil
		}
	}
	return 0, nil
}
