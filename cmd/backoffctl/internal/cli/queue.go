package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { register(newQueueCommand) }

func newQueueCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "queue",
		Short: "List queues with their policy and pause state; pause and resume a queue",
		Long: `A paused queue gives no jobs to claim (backoff.pause_queue): running jobs
still finish, enqueue still adds jobs. "resume" lets workers claim again.`,
		Example: `  backoffctl queue list
  backoffctl queue pause emails
  backoffctl queue resume emails`,
	})
	cmd.AddCommand(newQueueListCommand(), newQueueSwitchCommand(true), newQueueSwitchCommand(false))
	return cmd
}

// queueRow is one queue as backoffctl shows it.
type queueRow struct {
	Name       string `json:"name"`
	Policy     string `json:"policy"`
	Paused     bool   `json:"paused"`
	Configured bool   `json:"configured"`
}

func newQueueListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every queue (configured, or seen in jobs) with its policy and whether it is paused",
		Example: `  backoffctl queue list
  backoffctl queue list --output json`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, done, err := openClient(ctx, cmd)
			if err != nil {
				return err
			}
			defer done()
			queues, err := c.Queues(ctx)
			if err != nil {
				return err
			}
			rows := make([]queueRow, len(queues))
			for i, q := range queues {
				rows[i] = queueRow{q.Name, q.Policy, q.Paused, q.Configured}
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(w, "no queues")
				return nil
			}
			tw := newTable(w)
			row(tw, "QUEUE", "POLICY", "PAUSED", "CONFIGURED")
			for _, q := range rows {
				row(tw, q.Name, q.Policy, yesNo(q.Paused), yesNo(q.Configured))
			}
			return tw.Flush()
		},
	}
}

func newQueueSwitchCommand(pause bool) *cobra.Command {
	verb, done, already := "resume", "resumed", "was not paused"
	short := "Let workers claim the jobs of a paused queue again"
	if pause {
		verb, done, already = "pause", "paused", "was already paused"
		short = "Stop workers from claiming the jobs of a queue (running jobs finish)"
	}
	return &cobra.Command{
		Use:     verb + " QUEUE",
		Short:   short,
		Example: "  backoffctl queue " + verb + " emails",
		Args:    exactArgs(1, "QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			jsonOut, err := wantJSON(cmd)
			if err != nil {
				return err
			}
			queue := args[0]
			if queue == "" {
				return usagef("queue name must not be empty")
			}
			ctx := cmd.Context()
			c, closeClient, err := openClient(ctx, cmd)
			if err != nil {
				return err
			}
			defer closeClient()
			switchQueue := c.ResumeQueue
			if pause {
				switchQueue = c.PauseQueue
			}
			changed, err := switchQueue(ctx, queue)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, map[string]any{"queue": queue, "paused": pause, "changed": changed})
			}
			if changed {
				fmt.Fprintf(w, "%s queue %s\n", done, queue)
			} else {
				fmt.Fprintf(w, "queue %s %s\n", queue, already)
			}
			return nil
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
