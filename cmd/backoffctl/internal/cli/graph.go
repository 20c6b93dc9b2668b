package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

// maxGraphJobs is the most jobs backoff.job_graph returns.
const maxGraphJobs = 10000

// graphEdge is an edge to a parent, as `jobs graph --output json` writes it.
type graphEdge struct {
	Parent    int64  `json:"parent"`
	OnFailure string `json:"on_failure"`
	State     string `json:"state"`
}

// graphJob is one job of `jobs graph --output json`.
type graphJob struct {
	ID         int64       `json:"id"`
	Queue      string      `json:"queue"`
	Status     string      `json:"status"`
	Distance   int         `json:"distance"`
	Parents    []graphEdge `json:"parents"`
	WaitingFor []int64     `json:"waiting_for"`
}

// graphOutput is `jobs graph --output json`.
type graphOutput struct {
	Job       int64      `json:"job"`
	Limit     int        `json:"limit"`
	Truncated bool       `json:"truncated"`
	Jobs      []graphJob `json:"jobs"`
}

func graphOutputOf(id int64, limit int, g ops.JobGraph) graphOutput {
	out := graphOutput{Job: id, Limit: limit, Truncated: g.Truncated, Jobs: make([]graphJob, len(g.Jobs))}
	for i, j := range g.Jobs {
		edges := make([]graphEdge, len(j.Parents))
		for k, e := range j.Parents {
			edges[k] = graphEdge{Parent: e.Parent, OnFailure: e.OnFailure, State: e.State}
		}
		out.Jobs[i] = graphJob{ID: j.ID, Queue: j.Queue, Status: string(j.Status), Distance: j.Distance,
			Parents: edges, WaitingFor: j.WaitingFor}
	}
	return out
}

func newJobsGraphCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "graph ID",
		Short: "Show the workflow a job belongs to: every job linked to it by dependencies, with its state",
		Long: `Show the workflow job ID belongs to (backoff.job_graph): the job and every
job reachable from it through dependencies, its parents and children and
theirs, in id order, the job asked for marked "*". DEPENDS ON lists each
parent with the edge's policy when the parent fails (cancel, run, wait) and
the edge's state: open (the parent has not finished), satisfied, failed
(the policy was applied), waiting (the parent failed under a wait edge: the
job waits for "jobs unblock" or a replay of the parent) or released (by
"jobs unblock"). WAITING FOR lists the parents a blocked job still waits
for. At most --limit jobs, the nearest to ID (at most 10000); a larger
graph says so under the table.`,
		Example: `  backoffctl jobs graph 42
  backoffctl jobs graph 42 --limit 50
  backoffctl jobs graph 42 --output json | jq '.jobs[] | select(.status == "blocked") | .id'`,
		Args: exactArgs(1, "ID"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if limit < 1 || limit > maxGraphJobs {
				return usagef("--limit %d: want 1 to %d", limit, maxGraphJobs)
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				g, err := o.Graph(ctx, id, limit)
				if err != nil {
					return noJob(err, id)
				}
				out := graphOutputOf(id, limit, g)
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, out)
				}
				writeGraph(w, out)
				return nil
			})
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 1000, "at most this many jobs, the nearest to ID (at most 10000)")
	return cmd
}

func writeGraph(w io.Writer, g graphOutput) {
	jobs := slices.Clone(g.Jobs)
	slices.SortFunc(jobs, func(a, b graphJob) int { return cmp.Compare(a.ID, b.ID) })
	tw := newTable(w)
	row(tw, "ID", "QUEUE", "STATUS", "DEPENDS ON (POLICY: STATE)", "WAITING FOR")
	var operator []string
	for _, j := range jobs {
		id := strconv.FormatInt(j.ID, 10)
		if j.ID == g.Job {
			id += "*"
		}
		edges := make([]string, len(j.Parents))
		waiting := false
		for i, e := range j.Parents {
			edges[i] = fmt.Sprintf("%d (%s: %s)", e.Parent, e.OnFailure, e.State)
			waiting = waiting || e.State == "waiting"
		}
		if waiting && j.Status == "blocked" {
			operator = append(operator, strconv.FormatInt(j.ID, 10))
		}
		row(tw, id, j.Queue, j.Status, dashIfEmpty(strings.Join(edges, ", ")), dashIfEmpty(joinIDs(j.WaitingFor)))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d job(s) linked to job %d by dependencies", len(jobs), g.Job)
	if g.Truncated {
		fmt.Fprintf(w, "; the graph has more: these are the %d nearest (--limit, at most %d)", g.Limit, maxGraphJobs)
	}
	fmt.Fprintln(w)
	for _, id := range operator {
		fmt.Fprintf(w, "job %s waits for an operator: \"jobs unblock %s\" releases it, \"dlq replay PARENT\" runs the parent again\n", id, id)
	}
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newJobsUnblockCommand releases a job that a failed parent keeps waiting
// under a "wait" edge. One named job needs no --yes, as for cancel.
func newJobsUnblockCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unblock ID",
		Short: "Release a blocked job from the failed parents it waits for (wait edges)",
		Long: `Release blocked job ID from the parents that failed (dead-lettered or
cancelled) under an edge whose policy is wait (backoff.unblock): those edges
count as satisfied, and the job becomes pending unless another parent has
not finished yet; then it waits for those. A job blocked only by parents
that have not finished is refused: it waits for them ("jobs cancel" gives it
up). To run the failed parent again instead, "dlq replay PARENT": the job
then waits for the parent's new run. "jobs graph ID" shows which parents a
job waits for.`,
		Example: `  backoffctl jobs unblock 42
  backoffctl jobs unblock 42 --output json`,
		Args: exactArgs(1, "ID"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				j, err := o.Unblock(ctx, id)
				if err != nil {
					return noJob(err, id)
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, map[string]any{"id": j.ID, "queue": j.Queue, "status": j.Status})
				}
				if j.Status == client.StatusBlocked {
					fmt.Fprintf(w, "unblocked job %d (queue %s): still blocked, it waits for its unfinished parents (jobs graph %d)\n",
						j.ID, esc(j.Queue), j.ID)
					return nil
				}
				fmt.Fprintf(w, "unblocked job %d (queue %s): %s\n", j.ID, esc(j.Queue), j.Status)
				return nil
			})
		}),
	}
	return cmd
}
