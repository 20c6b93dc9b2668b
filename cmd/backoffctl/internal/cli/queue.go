package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

func init() { register(newQueueCommand) }

func newQueueCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "queue",
		Short: "List and show queues with their policy, pause state, breaker and rate; pause and resume a queue",
		Long: `A paused queue gives no jobs to claim (backoff.pause_queue): running jobs
still finish, enqueue still adds jobs. "resume" lets workers claim again.
A queue's rate limit and circuit breaker are set in backoff.toml
([queues.NAME], docs/concepts.md "Queues as controls"); "show" prints them
with their live state (backoff.queue_state).`,
		Example: `  backoffctl queue list
  backoffctl queue show webhooks
  backoffctl queue pause emails
  backoffctl queue resume emails`,
	})
	cmd.AddCommand(newQueueListCommand(), newQueueShowCommand(), newQueueSwitchCommand(true), newQueueSwitchCommand(false))
	return cmd
}

// queueRow is one queue as backoffctl shows it: its settings, and the live
// state of its controls (nil without any).
type queueRow struct {
	Name       string `json:"name"`
	Policy     string `json:"policy"`
	Paused     bool   `json:"paused"`
	Configured bool   `json:"configured"`
	controlsRow
	State *stateRow `json:"state"`
}

func queueRowOf(q ops.QueueInfo, st client.QueueState, ok bool) queueRow {
	r := queueRow{Name: q.Name, Policy: q.Policy, Paused: q.Paused, Configured: q.Configured, controlsRow: controlsOf(q)}
	if ok {
		r.State = stateOf(st)
	}
	return r
}

func newQueueListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every queue (configured, or seen in jobs) with its policy, whether it is paused, its rate limit and its breaker",
		Example: `  backoffctl queue list
  backoffctl queue list --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				queues, err := o.Queues(ctx)
				if err != nil {
					return err
				}
				states, err := queueStates(ctx, c, queues)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					rows := make([]queueRow, len(queues))
					for i, q := range queues {
						st, ok := states[q.Name]
						rows[i] = queueRowOf(q, st, ok)
					}
					return writeJSON(w, rows)
				}
				if len(queues) == 0 {
					fmt.Fprintln(w, "no queues")
					return nil
				}
				tw := newTable(w)
				row(tw, "QUEUE", "POLICY", "PAUSED", "CONFIGURED", "RATE", "BREAKER", "STATE")
				for _, q := range queues {
					st, ok := states[q.Name]
					row(tw, q.Name, q.Policy, yesNo(q.Paused), yesNo(q.Configured), rateCell(q.Rate, q.Burst),
						breakerCell(q), stateCell(q, st, ok))
				}
				return tw.Flush()
			})
		}),
	}
}

func newQueueShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show QUEUE",
		Short: "Show a queue's policy, pause state, rate limit and breaker settings, and their live state",
		Long: `Print a queue's settings (backoff.queues: policy, paused, rate, burst,
breaker_failures, breaker_window, breaker_cooldown, breaker_probes) and the
live state of its controls at --now or the database's clock
(backoff.queue_state): the breaker's state, when it opened, the failures in
its window, the probes a half-open breaker still hands out, the tokens in
the bucket, and when a claim can next return a job. A queue the database
does not know has every control off.`,
		Example: `  backoffctl queue show webhooks
  backoffctl queue show webhooks --output json`,
		Args: exactArgs(1, "QUEUE"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			name := args[0]
			if name == "" {
				return usagef("queue name must not be empty")
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				st, err := c.QueueState(ctx, name)
				if err != nil {
					return err
				}
				queues, err := o.Queues(ctx)
				if err != nil {
					return err
				}
				q := ops.QueueInfo{Name: name, Policy: "default", BreakerProbes: 1}
				for _, x := range queues {
					if x.Name == name {
						q = x
					}
				}
				now, err := clock(cmd)
				if err != nil {
					return err
				}
				events, err := o.QueueEvents(ctx, name, 10)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, struct {
						queueRow
						History []queueEventRow `json:"history"`
					}{queueRowOf(q, st, true), queueEventRows(events)})
				}
				writeQueue(w, q, st, now)
				writeQueueEvents(w, events)
				return nil
			})
		}),
	}
}

// writeQueue prints one queue for `queue show`.
func writeQueue(w io.Writer, q ops.QueueInfo, st client.QueueState, now time.Time) {
	tw := newTable(w)
	field := func(k, v string) { row(tw, k+":", v) }
	field("queue", q.Name)
	field("policy", q.Policy)
	field("configured", yesNo(q.Configured))
	field("paused", yesNo(q.Paused))
	if q.Rate != nil {
		r := rateCell(q.Rate, q.Burst)
		if q.Burst == nil && st.Burst != nil {
			r += " burst " + strconv.Itoa(int(*st.Burst)) + " (the default, ceil(rate))"
		}
		field("rate", r)
		field("tokens", tokensCell(st, true))
	} else {
		field("rate", "none")
	}
	if q.BreakerFailures != nil {
		field("breaker", breakerCell(q)+fmt.Sprintf(", %d probe(s) when half open", q.BreakerProbes))
		state := stateCell(q, st, true)
		if !st.OpenedAt.IsZero() {
			state += ", opened " + formatTime(&st.OpenedAt)
		}
		if st.ProbesLeft != nil {
			state += fmt.Sprintf(", %d probe(s) left", *st.ProbesLeft)
		}
		field("breaker state", state)
	} else {
		field("breaker", "none")
	}
	next := "now"
	switch {
	case q.Paused:
		next = "when resumed (paused)"
	case !st.NextClaimAt.IsZero():
		next = formatTime(&st.NextClaimAt) + " (" + relative(st.NextClaimAt, now) + ")"
	case st.State == "half_open" && st.ProbesLeft != nil && *st.ProbesLeft == 0:
		next = "after a probe's result"
	}
	field("next claim", next)
	_ = tw.Flush()
}

func newQueueSwitchCommand(pause bool) *cobra.Command {
	verb := switchVerb(pause)
	short := "Let workers claim the jobs of a paused queue again"
	if pause {
		short = "Stop workers from claiming the jobs of a queue (running jobs finish)"
	}
	var create bool
	cmd := &cobra.Command{
		Use:   verb + " QUEUE",
		Short: short,
		Long: short + `. A name that is no queue (no configuration, no job) is
refused, so that a typo leaves nothing behind; --create makes a new queue.
Each change is recorded with the database role and the time in the queue's
history ("queue show").`,
		Example: "  backoffctl queue " + verb + " emails\n  backoffctl queue " + verb + " new-queue --create",
		Args:    exactArgs(1, "QUEUE"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			queue := args[0]
			if queue == "" {
				return usagef("queue name must not be empty")
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				changed, err := o.SwitchQueue(ctx, queue, pause, create)
				if err != nil {
					return err
				}
				return writeSwitch(cmd.OutOrStdout(), jsonOut, "queue", queue, queue, pause, changed)
			})
		}),
	}
	cmd.Flags().BoolVar(&create, "create", false, "create the queue if it has no configuration and no jobs")
	return cmd
}

// queueEventRow is a pause or resume of a queue (backoff.queue_events).
type queueEventRow struct {
	Action string    `json:"action"`
	Role   string    `json:"role"`
	At     time.Time `json:"at"`
}

func queueEventRows(events []ops.QueueEvent) []queueEventRow {
	out := make([]queueEventRow, len(events))
	for i, e := range events {
		out[i] = queueEventRow{Action: e.Action, Role: e.Role, At: e.At.UTC()}
	}
	return out
}

// writeQueueEvents prints a queue's newest pauses and resumes.
func writeQueueEvents(w io.Writer, events []ops.QueueEvent) {
	if len(events) == 0 {
		fmt.Fprintln(w, "history: no pause or resume")
		return
	}
	fmt.Fprintf(w, "history (%d, newest first):\n", len(events))
	tw := newTable(w)
	row(tw, "  AT", "ACTION", "ROLE")
	for _, e := range events {
		at := e.At
		row(tw, "  "+formatTime(&at), e.Action, e.Role)
	}
	_ = tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
