package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// This file holds the operator's calls: listing and inspecting jobs,
// queues and their pause switch, and the bulk replay of dead letters.
// backoffctl is built on them, and so can a web UI: filters are plain
// fields, pages are keyset cursors.

// JobDetail is a job as an operator sees it: the row, and what governs it
// now (the policy backoff.job_policy names, and the attempts allowed).
type JobDetail struct {
	jobtype.Job
	// EffectivePolicy is the policy that governs the job: its recorded
	// Policy if that policy still exists, else its queue's, else "default".
	EffectivePolicy string
	// EffectiveMaxAttempts is the job's MaxAttempts, else its policy's (0
	// when neither is known).
	EffectiveMaxAttempts int
	// Schedule is the schedule that enqueued the job ("": none), and
	// ScheduleSlot the slot it fired for (nil: a manual fire, or none).
	Schedule     string
	ScheduleSlot *time.Time
	// ErrorsJSON is the error history as stored (backoff.jobs.errors), for
	// callers that pass it on unchanged (backoffctl --output json, a web
	// UI); Errors holds it decoded.
	ErrorsJSON json.RawMessage
	// Workflows (docs/workflows.md), read by Details and DetailsPreview,
	// not by List: the last progress a heartbeat reported (nil: none) and
	// when; the jobs this one depends on; and while it is blocked, how
	// many of them have not finished (ParentsOpen) and how many failed
	// and wait for an operator (ParentsWaiting).
	Progress       json.RawMessage
	ProgressAt     *time.Time
	Parents        []int64
	ParentsOpen    *int
	ParentsWaiting *int
}

// JobOrder is the order List returns jobs in.
type JobOrder int

// The orders of List. Each pages by a keyset cursor, so a page costs the
// same wherever it is.
const (
	OldestFirst           JobOrder = iota // id ascending
	NewestFirst                           // id descending
	RecentlyFinishedFirst                 // completed_at descending, then id; only finished jobs
)

// ListParams selects jobs for List. Zero fields do not filter.
type ListParams struct {
	Queue            string
	Statuses         []jobtype.Status
	Policy           string // the effective policy (JobDetail.EffectivePolicy)
	DeadLetterReason string // max_attempts, non_retryable, deadline, ...
	ErrorContains    string // case-insensitive text in the last error
	// CreatedFrom and CreatedTo bound created_at to [CreatedFrom,
	// CreatedTo); FinishedFrom and FinishedTo bound completed_at likewise.
	CreatedFrom, CreatedTo   time.Time
	FinishedFrom, FinishedTo time.Time
	// Schedule selects the jobs the schedule of that name enqueued (its
	// slots and its manual fires): a schedule's page lists them with
	// NewestFirst.
	Schedule string
	Order    JobOrder
	// Cursor continues a listing: JobPage.Next of the previous page, with
	// the same filters and order.
	Cursor string
	Limit  int // default 100
	// WithoutPayloads leaves each job's Payload, Errors and ErrorsJSON
	// empty (nil): the rows then weigh the same few hundred bytes whatever
	// producers put in payloads (megabytes, at worst) and workers in the
	// error history (up to about 160 KiB a job). A page of jobs sets it
	// and reads one job's payload with Preview or Details.
	WithoutPayloads bool
}

// JobPage is one page of List. Next is the cursor of the following page,
// empty on the last one.
type JobPage struct {
	Jobs []JobDetail
	Next string
	// Searched is set when a filter without an index (ErrorContains) made
	// the page stop after examining ErrorScanLimit jobs: the page may hold
	// fewer jobs than the limit, and Next continues the search after the
	// last job examined.
	Searched bool
}

// ErrorScanLimit bounds the jobs one page of List examines for
// ErrorContains, which no index serves: a page costs the same at any table
// size, and a search far back takes several pages.
const ErrorScanLimit = 5000

// detailColumns selects JobDetail's columns from backoff.list_jobs or
// backoff.job_detail: sqlapi.JobColumns, then the effective policy, max_attempts,
// the error history (again, for ErrorsJSON) and the schedule and slot; scanDetail
// reads them.
const detailColumns = sqlapi.JobColumns + ", effective_policy, effective_max_attempts, errors, schedule, schedule_slot"

// scanDetail reads one row selected with detailColumns, then into extra
// the columns that follow them.
func scanDetail(row pgx.Row, extra ...any) (JobDetail, error) {
	var d JobDetail
	var maxAttempts int32
	var history []byte
	var schedule *string
	j, err := sqlapi.ScanJob(row, append([]any{&d.EffectivePolicy, &maxAttempts, &history, &schedule, &d.ScheduleSlot}, extra...)...)
	if err != nil {
		return JobDetail{}, err
	}
	d.Job, d.EffectiveMaxAttempts, d.ErrorsJSON = j, int(maxAttempts), json.RawMessage(history)
	if schedule != nil {
		d.Schedule = *schedule
	}
	return d, nil
}

// orderNames are the orders' names in backoff.list_jobs.
var orderNames = map[JobOrder]string{OldestFirst: "oldest", NewestFirst: "newest", RecentlyFinishedFirst: "finished"}

// List returns one page of jobs filtered by p, in p.Order
// (backoff.list_jobs). A page reads about as many rows as it returns when
// an index serves its filters (the default view, a queue, statuses, a
// dead-letter reason, the finished order); ErrorContains, which no index
// serves, examines at most ErrorScanLimit jobs per page (JobPage.Searched).
func (c *Client) List(ctx context.Context, p ListParams) (JobPage, error) {
	op := "list jobs"
	if p.Queue != "" {
		op = fmt.Sprintf("list jobs in %q", p.Queue)
	}
	order, ok := orderNames[p.Order]
	if !ok {
		return JobPage{}, fmt.Errorf("%s: %w: unknown order %d", op, sqlapi.ErrInvalidArgument, p.Order)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var afterID, afterAt any
	if p.Cursor != "" {
		id, at, err := parseCursor(p.Cursor, p.Order)
		if err != nil {
			return JobPage{}, fmt.Errorf("%s: %w: %w", op, sqlapi.ErrInvalidArgument, err)
		}
		afterID = id
		if p.Order == RecentlyFinishedFirst {
			afterAt = at
		}
	}
	// One row more than the page says whether there is a next one.
	call, args := sqlapi.Call("list_jobs",
		sqlapi.Arg("p_queue", "text", sqlapi.NullString(p.Queue)),
		sqlapi.Arg("p_statuses", "text[]", statusNames(p.Statuses)),
		sqlapi.Arg("p_policy", "text", sqlapi.NullString(p.Policy)),
		sqlapi.Arg("p_dead_letter_reason", "text", sqlapi.NullString(p.DeadLetterReason)),
		sqlapi.Arg("p_error_contains", "text", sqlapi.NullString(p.ErrorContains)),
		sqlapi.Arg("p_created_from", "timestamptz", sqlapi.NullTime(p.CreatedFrom)),
		sqlapi.Arg("p_created_to", "timestamptz", sqlapi.NullTime(p.CreatedTo)),
		sqlapi.Arg("p_finished_from", "timestamptz", sqlapi.NullTime(p.FinishedFrom)),
		sqlapi.Arg("p_finished_to", "timestamptz", sqlapi.NullTime(p.FinishedTo)),
		sqlapi.Arg("p_schedule", "text", sqlapi.NullString(p.Schedule)),
		sqlapi.Arg("p_order", "text", order),
		sqlapi.Arg("p_after_id", "bigint", afterID),
		sqlapi.Arg("p_after_completed_at", "timestamptz", afterAt),
		sqlapi.Arg("p_limit", "integer", limit+1),
		sqlapi.Arg("p_payloads", "boolean", !p.WithoutPayloads),
		sqlapi.Arg("p_scan_limit", "integer", ErrorScanLimit),
	)
	rows, err := c.db.Query(ctx, "SELECT "+detailColumns+", scan_end FROM "+call, args...)
	if err != nil {
		return JobPage{}, translate(op, err)
	}
	defer rows.Close()
	var jobs []JobDetail
	var ends []jobtype.Job // where a search stopped: one per shard that stopped
	for rows.Next() {
		var scanEnd bool
		d, err := scanDetail(rows, &scanEnd)
		if err != nil {
			return JobPage{}, translate(op, err)
		}
		if scanEnd {
			ends = append(ends, d.Job)
			continue
		}
		jobs = append(jobs, d)
	}
	if err := rows.Err(); err != nil {
		return JobPage{}, translate(op, err)
	}
	return pageOf(jobs, ends, p.Order, limit), nil
}

// pageOf makes the page from what every shard answered (one answer
// without a router): the jobs in the order, cut at limit with a cursor
// after the last one. Where a search stopped at its bound (ends), the
// page ends at the earliest such stop in the order, as jobs past it were
// not examined on that shard and would come again on the next page.
func pageOf(jobs []JobDetail, ends []jobtype.Job, order JobOrder, limit int) JobPage {
	before := func(a, b jobtype.Job) bool {
		switch order {
		case NewestFirst:
			return a.ID > b.ID
		case RecentlyFinishedFirst:
			at, bt := timeOrZero(a.CompletedAt), timeOrZero(b.CompletedAt)
			if !at.Equal(bt) {
				return at.After(bt)
			}
			return a.ID > b.ID
		}
		return a.ID < b.ID
	}
	sort.SliceStable(jobs, func(i, j int) bool { return before(jobs[i].Job, jobs[j].Job) })
	var stop *jobtype.Job
	for i := range ends {
		if stop == nil || before(ends[i], *stop) {
			stop = &ends[i]
		}
	}
	if stop != nil {
		n := 0
		for n < len(jobs) && !before(*stop, jobs[n].Job) {
			n++
		}
		jobs = jobs[:n]
	}
	page := JobPage{Jobs: jobs}
	if page.Jobs == nil {
		page.Jobs = []JobDetail{}
	}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		page.Next = cursorOf(page.Jobs[limit-1].ID, page.Jobs[limit-1].CompletedAt, order)
		return page
	}
	if stop != nil {
		page.Next, page.Searched = cursorOf(stop.ID, stop.CompletedAt, order), true
	}
	return page
}
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// statusNames passes statuses as text[]: nil (no filter) stays NULL, an
// empty list an empty array (nothing matches).
func statusNames(statuses []jobtype.Status) any {
	if statuses == nil {
		return nil
	}
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	return names
}

func cursorOf(id int64, completedAt *time.Time, order JobOrder) string {
	next := strconv.FormatInt(id, 10)
	if order == RecentlyFinishedFirst && completedAt != nil {
		next = strconv.FormatInt(completedAt.UnixMicro(), 10) + ":" + next
	}
	return next
}

// parseCursor reads JobPage.Next: "ID", or "MICROS:ID" for
// RecentlyFinishedFirst.
func parseCursor(s string, order JobOrder) (int64, time.Time, error) {
	bad := fmt.Errorf("cursor %q: not a cursor of this order", s)
	var at time.Time
	if order == RecentlyFinishedFirst {
		us, rest, ok := strings.Cut(s, ":")
		if !ok {
			return 0, at, bad
		}
		n, err := strconv.ParseInt(us, 10, 64)
		if err != nil {
			return 0, at, bad
		}
		at, s = time.UnixMicro(n).UTC(), rest
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, at, bad
	}
	return id, at, nil
}

// Details reads one job with its error history and what governs it
// (backoff.job_detail); an unknown id gives client.ErrJobNotFound.
func (c *Client) Details(ctx context.Context, jobID int64) (JobDetail, error) {
	d, _, err := c.detail(ctx, fmt.Sprintf("show job %d", jobID), jobID, nil)
	return d, err
}

// PayloadPreview is the start of a job's payload, for a page that shows a
// payload without holding all of it.
type PayloadPreview struct {
	// Text is the payload as JSON text (PostgreSQL's jsonb output), cut
	// after the characters asked for when Truncated (then it is no longer
	// valid JSON).
	Text string
	// Bytes is the size of the whole payload's text.
	Bytes int64
	// Truncated: Text is the start of the payload only.
	Truncated bool
}

// Preview reads one job as Details does, but of its payload only the
// first maxChars characters (JobDetail.Payload stays nil): what the web
// UI's job page shows, so that a payload of many megabytes neither
// travels nor sits in the UI's memory. An unknown id gives client.ErrJobNotFound.
func (c *Client) Preview(ctx context.Context, jobID int64, maxChars int) (JobDetail, PayloadPreview, error) {
	op := fmt.Sprintf("show job %d", jobID)
	if maxChars < 1 {
		return JobDetail{}, PayloadPreview{}, fmt.Errorf("%s: %w: payload preview of %d characters: want at least 1",
			op, sqlapi.ErrInvalidArgument, maxChars)
	}
	return c.detail(ctx, op, jobID, maxChars)
}

// detail reads backoff.job_detail: the whole payload (chars nil) or the
// start of its text. The error history is read whole: it is bounded (20
// entries of at most 8 KiB) and a job's page shows all of it.
func (c *Client) detail(ctx context.Context, op string, jobID int64, chars any) (JobDetail, PayloadPreview, error) {
	call, args := sqlapi.Call("job_detail", sqlapi.Arg("p_job_id", "bigint", jobID), sqlapi.Arg("p_payload_chars", "integer", chars))
	var pv PayloadPreview
	var text *string
	var size *int64
	var truncated *bool
	var progress []byte
	var progressAt *time.Time
	var parents []int64
	var open, waiting *int32
	d, err := scanDetail(c.db.QueryRow(ctx, "SELECT "+detailColumns+", payload_text, payload_bytes, payload_truncated, "+
		"progress, progress_at, parents, parents_open, parents_waiting FROM "+call, args...),
		&text, &size, &truncated, &progress, &progressAt, &parents, &open, &waiting)
	if errors.Is(err, pgx.ErrNoRows) {
		return JobDetail{}, PayloadPreview{}, fmt.Errorf("%s: %w", op, sqlapi.ErrJobNotFound)
	}
	if err != nil {
		return JobDetail{}, PayloadPreview{}, translate(op, err)
	}
	if text != nil {
		pv = PayloadPreview{Text: *text, Bytes: *size, Truncated: *truncated}
	}
	if progress != nil {
		d.Progress = json.RawMessage(progress)
	}
	d.ProgressAt = progressAt
	if len(parents) > 0 {
		d.Parents = parents
	}
	if open != nil {
		o, w := int(*open), int(*waiting)
		d.ParentsOpen, d.ParentsWaiting = &o, &w
	}
	return d, pv, nil
}

// QueueInfo is a queue as an operator sees it: its policy, its pause
// switch and its controls (the settings of backoff.queues that `config
// apply` writes, ADR 0045). Nil settings are off. Its live breaker and
// rate state is client.Client.QueueState's.
type QueueInfo struct {
	Name   string
	Policy string // the policy of its jobs that record none (backoff.job_policy)
	Paused bool   // backoff.claim returns none of its jobs
	// Configured: the queue has a row in backoff.queues (config apply or
	// PauseQueue wrote it); otherwise it is only known from its jobs.
	Configured bool
	// Rate is the most jobs per second claimed; nil: no rate limit.
	Rate *float64
	// Burst is the token bucket's size; nil with a rate: greatest(1,
	// ceil(rate)).
	Burst *int32
	// BreakerFailures is how many failures within BreakerWindow open the
	// breaker; nil: no breaker.
	BreakerFailures *int32
	// BreakerWindow and BreakerCooldown are set with BreakerFailures.
	BreakerWindow, BreakerCooldown *time.Duration
	// BreakerProbes is how many jobs a half-open breaker hands out (1 by
	// default; meaningful only with a breaker).
	BreakerProbes int32
}

// queuesSQL reads backoff.queue_list: the configured queues and those
// seen in jobs within the caller's scope, without a read of every job.
const queuesSQL = `SELECT name, policy, paused, configured, rate, burst, breaker_failures,
    breaker_window_us, breaker_cooldown_us, breaker_probes FROM backoff.queue_list()`

// Queues lists every queue, configured or only seen in jobs, by name.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	op := "list queues"
	rows, err := c.db.Query(ctx, queuesSQL)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []QueueInfo{}
	for rows.Next() {
		var q QueueInfo
		var window, cooldown *int64
		if err := rows.Scan(&q.Name, &q.Policy, &q.Paused, &q.Configured, &q.Rate, &q.Burst,
			&q.BreakerFailures, &window, &cooldown, &q.BreakerProbes); err != nil {
			return nil, translate(op, err)
		}
		q.BreakerWindow, q.BreakerCooldown = micros(window), micros(cooldown)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return mergeQueues(out), nil
}

// mergeQueues sorts the queues by name and keeps one row per name, the
// configured one when there is one: behind a router every shard answers
// with its own rows, and a queue configured on every shard, or seen on
// several, comes back from each.
func mergeQueues(qs []QueueInfo) []QueueInfo {
	sort.SliceStable(qs, func(i, j int) bool {
		if qs[i].Name != qs[j].Name {
			return qs[i].Name < qs[j].Name
		}
		return qs[i].Configured && !qs[j].Configured
	})
	out := qs[:0]
	for _, q := range qs {
		if len(out) == 0 || out[len(out)-1].Name != q.Name {
			out = append(out, q)
		}
	}
	return out
}

// micros turns a nullable count of microseconds into a duration.
func micros(v *int64) *time.Duration {
	if v == nil {
		return nil
	}
	d := time.Duration(*v) * time.Microsecond
	return &d
}

// PauseQueue stops claims of queue (backoff.pause_queue); running jobs go
// on. It reports whether the queue was running before. A name that is no
// queue (no configuration, no job) is refused with client.ErrInvalidArgument:
// SwitchQueue with create makes a new queue.
func (c *Client) PauseQueue(ctx context.Context, queue string) (bool, error) {
	return c.SwitchQueue(ctx, queue, true, false)
}

// ResumeQueue lets claims of queue start again (backoff.resume_queue). It
// reports whether the queue was paused before. A name that is no queue is
// refused with client.ErrInvalidArgument.
func (c *Client) ResumeQueue(ctx context.Context, queue string) (bool, error) {
	return c.SwitchQueue(ctx, queue, false, false)
}

// SwitchQueue pauses (pause true) or resumes queue and reports whether it
// changed. With create, a queue that has neither configuration nor jobs
// is created (paused, or running); without, it is refused
// (client.ErrInvalidArgument). Each change is recorded in the queue's history
// (QueueEvents) with the database role.
func (c *Client) SwitchQueue(ctx context.Context, queue string, pause, create bool) (bool, error) {
	name, op := "resume_queue", fmt.Sprintf("resume queue %q", queue)
	if pause {
		name, op = "pause_queue", fmt.Sprintf("pause queue %q", queue)
	}
	call, args := c.fn(name, sqlapi.Arg("p_queue", "text", queue), sqlapi.Arg("p_create", "boolean", create))
	var changed bool
	err := c.db.QueryRow(ctx, "SELECT "+call, args...).Scan(&changed)
	return changed, translate(op, err)
}

// QueueEvent is one operator action on a queue (backoff.queue_events).
type QueueEvent struct {
	Queue  string
	Action string // "pause" or "resume"
	Role   string // the database role that asked
	At     time.Time
}

// QueueEvents returns the newest limit (0: 20) pauses and resumes of queue
// ("" for every queue), newest first (backoff.queue_history). prune drops them with the finished
// jobs' retention.
func (c *Client) QueueEvents(ctx context.Context, queue string, limit int) ([]QueueEvent, error) {
	op := "read queue history"
	call, args := sqlapi.Call("queue_history", sqlapi.Arg("p_queue", "text", sqlapi.NullString(queue)), sqlapi.Arg("p_limit", "integer", nullIntDefault(limit, 20)))
	rows, err := c.db.Query(ctx, "SELECT queue, action, role, at FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []QueueEvent{}
	for rows.Next() {
		var e QueueEvent
		if err := rows.Scan(&e.Queue, &e.Action, &e.Role, &e.At); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// WorkerInfo is a worker as the database knows it: by the running jobs it
// holds (backoff.workers).
type WorkerInfo struct {
	Name    string
	Queues  []string
	Jobs    int64 // running jobs it holds
	Expired int64 // of them, with a lease that has ended (stranded)
	// OldestStarted is the earliest start of its attempts; OldestLease and
	// LatestLease the earliest and latest lease end. A LatestLease in the
	// past: the worker renews nothing any more.
	OldestStarted, OldestLease, LatestLease time.Time
}

// Workers lists the workers that hold running jobs, by name
// (backoff.workers). Workers write nothing for it; one that holds no job
// is not listed.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	op := "list workers"
	call, args := c.fn("workers")
	rows, err := c.db.Query(ctx, "SELECT worker, queues, jobs, expired, coalesce(oldest_started, oldest_lease), "+
		"oldest_lease, latest_lease FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []WorkerInfo{}
	for rows.Next() {
		var w WorkerInfo
		if err := rows.Scan(&w.Name, &w.Queues, &w.Jobs, &w.Expired, &w.OldestStarted, &w.OldestLease, &w.LatestLease); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// ReplayOutcome is what ReplayDeadLetters did with one dead letter:
// replayed, or left dead-lettered for Reason.
type ReplayOutcome struct {
	JobID    int64
	Replayed bool
	Reason   string
}

// ReplayDeadLetters replays every dead-lettered job of queue in one
// statement (backoff.replay_dead_letters) and returns one outcome per dead
// letter, in id order: it replays what it can and says why it left the
// others (a dedupe key held by an unfinished job). Each replayed job gets a
// fresh budget and keeps its token counting, as with Replay.
func (c *Client) ReplayDeadLetters(ctx context.Context, queue string) ([]ReplayOutcome, error) {
	op := fmt.Sprintf("replay dead letters of queue %q", queue)
	call, args := c.fn("replay_dead_letters", sqlapi.Arg("p_queue", "text", queue))
	rows, err := c.db.Query(ctx, "SELECT job_id, replayed, coalesce(reason, '') FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []ReplayOutcome{}
	for rows.Next() {
		var o ReplayOutcome
		if err := rows.Scan(&o.JobID, &o.Replayed, &o.Reason); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}
