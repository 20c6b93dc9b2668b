package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

func init() { register(newWorkersCommand) }

// workerRow is a worker as the database knows it (backoff.workers).
type workerRow struct {
	Worker        string   `json:"worker"`
	Queues        []string `json:"queues"`
	Jobs          int64    `json:"jobs"`
	Expired       int64    `json:"expired"`
	OldestStarted string   `json:"oldest_started"`
	LatestLease   string   `json:"latest_lease"`
}

func newWorkersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "List the workers that hold running jobs: their queues, jobs, expired leases and latest lease",
		Long: `Print one line per worker that holds running jobs (backoff.workers: the
locked_by of the running jobs; workers write nothing for it, and a worker
that holds no job is not listed): its queues, the jobs it holds, how many
of their leases have ended (EXPIRED, marked "!": stranded until a reap),
how long its oldest attempt has run, and its latest lease end, which every
heartbeat moves forward: in the past, the worker renews nothing any more.`,
		Example: `  backoffctl workers
  backoffctl workers --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				ws, err := o.Workers(ctx)
				if err != nil {
					return err
				}
				now, err := clock(cmd)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					rows := make([]workerRow, len(ws))
					for i, x := range ws {
						rows[i] = workerRow{Worker: x.Name, Queues: x.Queues, Jobs: x.Jobs, Expired: x.Expired,
							OldestStarted: formatTime(&x.OldestStarted), LatestLease: formatTime(&x.LatestLease)}
					}
					return writeJSON(w, rows)
				}
				if len(ws) == 0 {
					fmt.Fprintln(w, "no worker holds a job")
					return nil
				}
				tw := newTable(w)
				row(tw, "WORKER", "QUEUES", "JOBS", "EXPIRED", "OLDEST_ATTEMPT", "LATEST_LEASE")
				for _, x := range ws {
					expired := strconv.FormatInt(x.Expired, 10)
					if x.Expired > 0 {
						expired += "!"
					}
					name := x.Name
					if name == "" {
						name = "-"
					}
					row(tw, truncate(name, 40), truncate(strings.Join(x.Queues, ","), 40), strconv.FormatInt(x.Jobs, 10), expired,
						"started "+relative(x.OldestStarted, now), formatTime(&x.LatestLease)+" ("+relative(x.LatestLease, now)+")")
				}
				return tw.Flush()
			})
		}),
	}
}
