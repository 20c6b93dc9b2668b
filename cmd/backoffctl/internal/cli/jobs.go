package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

func init() { register(newJobsCommand) }

// statuses are the values of backoff.jobs.status.
var statuses = []string{"pending", "running", "retrying", "blocked", "completed", "dead_lettered", "cancelled"}

// jobRow is a row of backoff.jobs as the CLI shows it, with the policy and
// max_attempts that apply to it resolved. Attempts is the fencing token
// (every claim, never going down); CountedAttempts, attempts -
// uncounted_attempts, is what MaxAttempts bounds (docs/adr/0020).
type jobRow struct {
	ID               int64           `json:"id"`
	Queue            string          `json:"queue"`
	Status           string          `json:"status"`
	Priority         int             `json:"priority"`
	Attempts         int             `json:"attempts"`
	CountedAttempts  int             `json:"counted_attempts"`
	MaxAttempts      int             `json:"max_attempts"`
	Policy           string          `json:"policy"`
	RunAt            time.Time       `json:"run_at"`
	LeaseUntil       *time.Time      `json:"lease_until"`
	LockedBy         *string         `json:"locked_by"`
	LastAttemptedAt  *time.Time      `json:"last_attempted_at"`
	LastFailedAt     *time.Time      `json:"last_failed_at"`
	LastError        *string         `json:"last_error"`
	DeadLetterReason *string         `json:"dead_letter_reason"`
	DedupeKey        *string         `json:"dedupe_key"`
	CreatedAt        time.Time       `json:"created_at"`
	CompletedAt      *time.Time      `json:"completed_at"`
	Payload          json.RawMessage `json:"payload"`
	Errors           json.RawMessage `json:"errors"`
	// Workflows (docs/workflows.md), in jobs show only: the last progress
	// a heartbeat reported, the jobs this one depends on, and while it is
	// blocked how many are unfinished and how many failed and wait; the
	// jobs that depend on it (at most showChildren); its output.
	Progress       json.RawMessage `json:"progress,omitempty"`
	ProgressAt     *time.Time      `json:"progress_at,omitempty"`
	Parents        []int64         `json:"parents,omitempty"`
	ParentsOpen    *int            `json:"parents_open,omitempty"`
	ParentsWaiting *int            `json:"parents_waiting,omitempty"`
	Children       []int64         `json:"children,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
}

// showChildren bounds the children jobs show reads (jobs graph reads a
// whole workflow), and showOutput the bytes of an output it prints as text
// (--output json gives all of it).
const (
	showChildren = 1000
	showOutput   = 500
)

// workflowOf adds to j the jobs that depend on it, nearest first as
// backoff.job_graph gives them, and its output.
func workflowOf(ctx context.Context, c *client.Client, o *ops.Client, j *jobRow) error {
	// backoff.job_graph reads at most 10,000 jobs.
	g, err := o.Graph(ctx, j.ID, min(10_000, showChildren+1+len(j.Parents)))
	if err != nil {
		return err
	}
	for _, n := range g.Jobs {
		for _, e := range n.Parents {
			if e.Parent == j.ID && len(j.Children) < showChildren {
				j.Children = append(j.Children, n.ID)
			}
		}
	}
	slices.Sort(j.Children)
	j.Output, err = c.JobOutput(ctx, j.ID)
	return err
}

// jsonTime marshals a time as RFC 3339 with fractional seconds, as
// time.Time does, but for any year: time.Time refuses years beyond 9999,
// which used to fail a whole `jobs list -o json` (the database now keeps
// times inside years 1 to 9999, but rows written before may not be).
type jsonTime struct{ t *time.Time }

func (j jsonTime) MarshalJSON() ([]byte, error) {
	if j.t == nil {
		return []byte("null"), nil
	}
	return json.Marshal(j.t.Format(time.RFC3339Nano))
}

// MarshalJSON writes the row as encoding/json would, fields in order and
// omitempty honoured, except that its times are jsonTime (so a year beyond
// 9999 does not fail the whole output).
func (j jobRow) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(j)
	typ := v.Type()
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if opts == "omitempty" && v.Field(i).IsZero() {
			continue
		}
		var val any = v.Field(i).Interface()
		switch t := val.(type) {
		case time.Time:
			val = jsonTime{&t}
		case *time.Time:
			val = jsonTime{t}
		}
		enc, err := json.Marshal(val)
		if err != nil {
			return nil, fmt.Errorf("job %d, %s: %w", j.ID, name, err)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		b.Write(key)
		b.WriteByte(':')
		b.Write(enc)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jobRowOf is the CLI's view (and --output json shape) of a job the client
// read: the policy and max_attempts that govern it, the history as stored.
func jobRowOf(d ops.JobDetail) jobRow {
	j := d.Job
	return jobRow{
		ID: j.ID, Queue: j.Queue, Status: string(j.Status), Priority: j.Priority, Attempts: j.Token, CountedAttempts: j.AttemptNumber(),
		MaxAttempts: d.EffectiveMaxAttempts, Policy: d.EffectivePolicy, RunAt: j.RunAt, LeaseUntil: j.LeaseUntil,
		LockedBy: nullable(j.LockedBy), LastAttemptedAt: j.LastAttemptedAt, LastFailedAt: j.LastFailedAt,
		LastError: nullable(j.LastError), DeadLetterReason: nullable(j.DeadLetterReason),
		DedupeKey: nullable(j.DedupeKey), CreatedAt: j.CreatedAt, CompletedAt: j.CompletedAt,
		Payload: j.Payload, Errors: d.ErrorsJSON,
		Progress: d.Progress, ProgressAt: d.ProgressAt, Parents: d.Parents,
		ParentsOpen: d.ParentsOpen, ParentsWaiting: d.ParentsWaiting,
	}
}

func jobRowsOf(ds []ops.JobDetail) []jobRow {
	out := make([]jobRow, len(ds))
	for i, d := range ds {
		out[i] = jobRowOf(d)
	}
	return out
}

func newJobsCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "jobs",
		Short: "List jobs, show one job with its error history or its workflow, cancel or unblock one",
		Example: `  backoffctl jobs list --queue emails --status retrying
  backoffctl jobs show 42
  backoffctl jobs graph 42
  backoffctl jobs cancel 42 --reason "sent by hand"
  backoffctl jobs unblock 42`,
	})
	cmd.AddCommand(newJobsListCommand(), newJobsShowCommand(), newJobsGraphCommand(), newJobsCancelCommand(),
		newJobsUnblockCommand())
	return cmd
}

func checkStatus(s string) error {
	if s != "" && !slices.Contains(statuses, s) {
		return usagef("--status %q: want one of %s", s, strings.Join(statuses, ", "))
	}
	return nil
}

func newJobsListCommand() *cobra.Command {
	var queue, status, policyName, reason, errorText, after string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Long: `List jobs, newest first, optionally of one queue and one status. ATTEMPTS
is counted attempts / attempts allowed (a snoozed claim, and every claim
before a replay, does not count; "jobs show" has the attempt number, the
fencing token, too); NEXT_RUN is when a pending or retrying job becomes due.`,
		Example: `  backoffctl jobs list
  backoffctl jobs list --queue emails --status retrying --limit 20
  backoffctl jobs list --status running --output json | jq '.[].id'`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			if err := checkStatus(status); err != nil {
				return err
			}
			if err := checkLimit(limit); err != nil {
				return err
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				params := ops.ListParams{Queue: queue, Policy: policyName, DeadLetterReason: reason,
					ErrorContains: errorText, Order: ops.NewestFirst, Cursor: after, Limit: limit}
				if status != "" {
					params.Statuses = []client.Status{client.Status(status)}
				}
				page, err := o.List(ctx, params)
				if err != nil {
					return err
				}
				jobs := jobRowsOf(page.Jobs)
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, jobs)
				}
				if len(jobs) == 0 {
					fmt.Fprintln(w, "no jobs")
					return nil
				}
				now, err := clock(cmd)
				if err != nil {
					return err
				}
				tw := newTable(w)
				row(tw, "ID", "QUEUE", "STATUS", "ATTEMPTS", "PRIORITY", "NEXT_RUN", "WORKER", "LEASE", "LAST_ERROR")
				for _, j := range jobs {
					next := "-"
					if j.Status == "pending" || j.Status == "retrying" {
						next = formatTime(&j.RunAt)
					}
					row(tw, strconv.FormatInt(j.ID, 10), j.Queue, j.Status, fmt.Sprintf("%d/%d", j.CountedAttempts, j.MaxAttempts),
						strconv.Itoa(j.Priority), next, truncate(orDash(j.LockedBy), 24), leaseCell(j, now), truncate(orDash(j.LastError), 50))
				}
				return flushPage(w, tw, page.Next)
			})
		}),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only jobs of this queue")
	cmd.Flags().StringVar(&status, "status", "", "only jobs in this status ("+strings.Join(statuses, ", ")+")")
	cmd.Flags().StringVar(&policyName, "policy", "", "only jobs governed by this policy")
	cmd.Flags().StringVar(&reason, "reason", "", "only dead letters with this reason (max_attempts, non_retryable, deadline, ...)")
	cmd.Flags().StringVar(&errorText, "error", "", "only jobs whose last error contains this text (case-insensitive)")
	cmd.Flags().StringVar(&after, "after", "", "continue a listing: the cursor printed as \"more: --after ...\"")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs")
	return cmd
}

func newJobsShowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one job: payload, attempts, next run and its full error history",
		Example: `  backoffctl jobs show 42
  backoffctl jobs show 42 --output json | jq .errors`,
		Args: exactArgs(1, "ID"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				d, err := o.Details(ctx, id)
				if err != nil {
					return noJob(err, id)
				}
				j := jobRowOf(d)
				if err := workflowOf(ctx, c, o, &j); err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, j)
				}
				now, err := clock(cmd)
				if err != nil {
					return err
				}
				writeJob(w, j, now)
				return nil
			})
		}),
	}
	return cmd
}

// newJobsCancelCommand cancels one job by id, as the web UI's cancel
// button does. One named job needs no --yes, like `dlq replay ID`: the id
// is the confirmation, and `dlq replay ID` undoes it.
func newJobsCancelCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel one job that has not finished",
		Long: `Cancel one pending, retrying or running job by id: it will not run again
(a worker still running it cannot settle it). The reason goes into its error
history. "dlq replay ID" brings a cancelled job back.`,
		Example: `  backoffctl jobs cancel 42
  backoffctl jobs cancel 42 --reason "customer asked to stop"`,
		Args: exactArgs(1, "ID"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return withOps(cmd, func(ctx context.Context, c *client.Client, o *ops.Client) error {
				j, err := o.Cancel(ctx, id, reason)
				if err != nil {
					return noJob(err, id)
				}
				w := cmd.OutOrStdout()
				if jsonOut {
					return writeJSON(w, map[string]any{"id": j.ID, "queue": j.Queue, "status": j.Status})
				}
				fmt.Fprintf(w, "cancelled job %d (queue %s); dlq replay %d brings it back\n", j.ID, esc(j.Queue), j.ID)
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why: becomes its last error and goes into its error history (none: the last error stays)")
	return cmd
}

// historyEntry is one element of backoff.jobs.errors: Attempt is the
// failed attempt's token, Counted its counted number (absent in entries
// written before migration 4).
type historyEntry struct {
	Attempt int    `json:"attempt"`
	Counted *int   `json:"counted"`
	At      string `json:"at"`
	Error   string `json:"error"`
	Worker  string `json:"worker"`
	Kind    string `json:"kind"`
	Started string `json:"started"` // when the failed attempt was claimed
	Role    string `json:"role"`    // the role of an operator's replay or cancel
}

func writeJob(w io.Writer, j jobRow, now time.Time) {
	tw := newTable(w)
	field := func(k, v string) { row(tw, k+":", v) }
	field("id", strconv.FormatInt(j.ID, 10))
	field("queue", j.Queue)
	status := j.Status
	if j.DeadLetterReason != nil {
		status += " (" + *j.DeadLetterReason + ")"
	}
	field("status", status)
	field("policy", j.Policy)
	field("attempts", attemptsLine(j))
	field("priority", strconv.Itoa(j.Priority))
	next := "-"
	if j.Status == "pending" || j.Status == "retrying" {
		next = formatTime(&j.RunAt) + " (" + relative(j.RunAt, now) + ")"
	}
	field("next run", next)
	field("lease until", formatTime(j.LeaseUntil)+leaseNote(j, now))
	field("locked by", orDash(j.LockedBy))
	if j.LeaseUntil != nil && j.LastAttemptedAt != nil {
		field("running for", formatDelay(now.Sub(*j.LastAttemptedAt).Round(time.Second))+" (since "+formatTime(j.LastAttemptedAt)+")")
	}
	field("created", formatTime(&j.CreatedAt))
	field("last attempt", formatTime(j.LastAttemptedAt))
	field("last failure", formatTime(j.LastFailedAt))
	field("finished", formatTime(j.CompletedAt))
	field("dedupe key", orDash(j.DedupeKey))
	field("last error", orDash(j.LastError))
	if j.Progress != nil {
		field("progress", esc(string(j.Progress))+" (at "+formatTime(j.ProgressAt)+")")
	}
	if len(j.Parents) > 0 {
		ids := make([]string, len(j.Parents))
		for i, id := range j.Parents {
			ids[i] = strconv.FormatInt(id, 10)
		}
		line := strings.Join(ids, ", ")
		if j.ParentsOpen != nil {
			line += fmt.Sprintf(" (%d unfinished, %d failed and waiting for jobs unblock %d or a replay; jobs graph %d shows the workflow)",
				*j.ParentsOpen, *j.ParentsWaiting, j.ID, j.ID)
		}
		field("depends on", line)
	}
	if len(j.Children) > 0 {
		ids := make([]string, 0, 20)
		for _, id := range j.Children[:min(20, len(j.Children))] {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		line := strings.Join(ids, ", ")
		if len(j.Children) > 20 {
			line += fmt.Sprintf(" and %d more", len(j.Children)-20)
			if len(j.Children) == showChildren {
				line += " or over"
			}
			line += fmt.Sprintf(" (jobs graph %d shows them)", j.ID)
		}
		field("needed by", line)
	}
	if j.Output != nil {
		out := string(j.Output)
		if len(out) > showOutput {
			cut := showOutput
			for !utf8.ValidString(out[:cut]) {
				cut--
			}
			out = fmt.Sprintf("%s… (%d bytes; --output json gives all of it)", out[:cut], len(j.Output))
		}
		field("output", esc(out))
	}
	_ = tw.Flush()

	var pretty bytes.Buffer
	if json.Indent(&pretty, j.Payload, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(j.Payload)
	}
	lines := strings.Split(pretty.String(), "\n")
	for i, l := range lines {
		lines[i] = esc(l)
	}
	fmt.Fprintf(w, "payload:\n  %s\n", strings.Join(lines, "\n"))

	var history []historyEntry
	_ = json.Unmarshal(j.Errors, &history)
	if len(history) == 0 {
		fmt.Fprintln(w, "errors: none")
		return
	}
	fmt.Fprintf(w, "errors (%d, oldest first):\n", len(history))
	tw = newTable(w)
	row(tw, "  ATTEMPT", "COUNTED", "STARTED", "AT", "KIND", "WORKER", "ROLE", "ERROR")
	for _, e := range history {
		worker, role, started := e.Worker, e.Role, e.Started
		if worker == "" {
			worker = "-"
		}
		if role == "" {
			role = "-"
		}
		if started == "" {
			started = "-"
		}
		counted := "-"
		if e.Counted != nil {
			counted = strconv.Itoa(*e.Counted)
		}
		row(tw, "  "+strconv.Itoa(e.Attempt), counted, started, e.At, e.Kind, worker, role, oneLine(e.Error))
	}
	_ = tw.Flush()
}

// leaseCell is a running job's lease for `jobs list`: "expired 33s ago!"
// once it has ended (work its worker stranded, until a reap settles it),
// else "ends in 20s"; "-" for a job that is not running.
func leaseCell(j jobRow, now time.Time) string {
	if j.LeaseUntil == nil {
		return "-"
	}
	if j.LeaseUntil.Before(now) {
		return "expired " + relative(*j.LeaseUntil, now) + "!"
	}
	return "ends " + relative(*j.LeaseUntil, now)
}

// leaseNote follows the lease's time in `jobs show`.
func leaseNote(j jobRow, now time.Time) string {
	if j.LeaseUntil == nil {
		return ""
	}
	if j.LeaseUntil.Before(now) {
		return " (EXPIRED " + relative(*j.LeaseUntil, now) + ": its worker stopped renewing it; reap settles the job)"
	}
	return " (" + relative(*j.LeaseUntil, now) + ")"
}

// attemptsLine says which attempt a job is at and how much of its budget
// is spent: "attempt 7, 2 of 5 counted". The attempt is the fencing token
// (every claim); the counted ones are those max_attempts bounds.
func attemptsLine(j jobRow) string {
	if j.Attempts == 0 {
		return fmt.Sprintf("none yet, 0 of %d counted", j.MaxAttempts)
	}
	return fmt.Sprintf("attempt %d, %d of %d counted", j.Attempts, j.CountedAttempts, j.MaxAttempts)
}

// relative renders t against now: "in 4s", "3m ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "in " + formatDelay(d)
	default:
		return formatDelay(-d) + " ago"
	}
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("job id %q: want a positive integer", s)
	}
	return id, nil
}

// nullable is s, or nil for "" (NULL).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// noJob names the job a call did not find; other errors pass as they are.
func noJob(err error, id int64) error {
	if errors.Is(err, client.ErrJobNotFound) {
		return fmt.Errorf("no job %d", id)
	}
	return err
}
