package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds the operator's calls: listing and inspecting jobs,
// queues and their pause switch, and the bulk replay of dead letters.
// backoffctl is built on them, and so can a web UI: filters are plain
// fields, pages are keyset cursors.

// JobDetail is a job as an operator sees it: the row, and what governs it
// now (the policy backoff.job_policy names, and the attempts allowed).
type JobDetail struct {
	Job
	// EffectivePolicy is the policy that governs the job: its recorded
	// Policy if that policy still exists, else its queue's, else "default".
	EffectivePolicy string
	// EffectiveMaxAttempts is the job's MaxAttempts, else its policy's (0
	// when neither is known).
	EffectiveMaxAttempts int
	// ErrorsJSON is the error history as stored (backoff.jobs.errors), for
	// callers that pass it on unchanged (backoffctl --output json, a web
	// UI); Errors holds it decoded.
	ErrorsJSON json.RawMessage
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
	Statuses         []Status
	Policy           string // the effective policy (JobDetail.EffectivePolicy)
	DeadLetterReason string // max_attempts, non_retryable, deadline, ...
	ErrorContains    string // case-insensitive text in the last error
	// CreatedFrom and CreatedTo bound created_at to [CreatedFrom,
	// CreatedTo); FinishedFrom and FinishedTo bound completed_at likewise.
	CreatedFrom, CreatedTo   time.Time
	FinishedFrom, FinishedTo time.Time
	Order                    JobOrder
	// Cursor continues a listing: JobPage.Next of the previous page, with
	// the same filters and order.
	Cursor string
	Limit  int // default 100
}

// JobPage is one page of List. Next is the cursor of the following page,
// empty on the last one.
type JobPage struct {
	Jobs []JobDetail
	Next string
}

// detailFrom selects JobDetail columns: jobColumns of j, then the
// effective policy and max_attempts.
var detailFrom = "SELECT j." + strings.ReplaceAll(jobColumns, ", ", ", j.") + ", gp.name, coalesce(j.max_attempts, p.max_attempts, 0), j.errors " +
	"FROM backoff.jobs AS j " +
	"CROSS JOIN LATERAL (SELECT backoff.job_policy(j.policy, j.queue) AS name) AS gp " +
	"LEFT JOIN backoff.policies AS p ON p.name = gp.name "

var listWhere = "WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::text[] IS NULL OR j.status = ANY ($2)) " +
	"AND ($3::text IS NULL OR gp.name = $3) AND ($4::text IS NULL OR j.dead_letter_reason = $4) " +
	"AND ($5::text IS NULL OR strpos(lower(j.last_error), lower($5)) > 0) " +
	"AND ($6::timestamptz IS NULL OR j.created_at >= $6) AND ($7::timestamptz IS NULL OR j.created_at < $7) " +
	"AND ($8::timestamptz IS NULL OR j.completed_at >= $8) AND ($9::timestamptz IS NULL OR j.completed_at < $9) "

// The three listing statements, one constant text per order.
var listSQL = map[JobOrder]string{
	OldestFirst: detailFrom + listWhere + "AND ($10::bigint IS NULL OR j.id > $10) " +
		"ORDER BY j.id LIMIT $11",
	NewestFirst: detailFrom + listWhere + "AND ($10::bigint IS NULL OR j.id < $10) " +
		"ORDER BY j.id DESC LIMIT $11",
	RecentlyFinishedFirst: detailFrom + listWhere + "AND j.completed_at IS NOT NULL " +
		"AND ($10::bigint IS NULL OR (j.completed_at, j.id) < ($12::timestamptz, $10)) " +
		"ORDER BY j.completed_at DESC, j.id DESC LIMIT $11",
}

// List returns one page of jobs filtered by p, in p.Order.
func (c *Client) List(ctx context.Context, p ListParams) (JobPage, error) {
	op := "list jobs"
	if p.Queue != "" {
		op = fmt.Sprintf("list jobs in %q", p.Queue)
	}
	sql, ok := listSQL[p.Order]
	if !ok {
		return JobPage{}, fmt.Errorf("%s: %w: unknown order %d", op, ErrInvalidArgument, p.Order)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var statuses any
	if p.Statuses != nil {
		st := make([]string, len(p.Statuses))
		for i, s := range p.Statuses {
			st[i] = string(s)
		}
		statuses = st
	}
	var afterID, afterAt any
	if p.Cursor != "" {
		id, at, err := parseCursor(p.Cursor, p.Order)
		if err != nil {
			return JobPage{}, fmt.Errorf("%s: %w: %w", op, ErrInvalidArgument, err)
		}
		afterID = id
		if p.Order == RecentlyFinishedFirst {
			afterAt = at
		}
	}
	args := []any{nullString(p.Queue), statuses, nullString(p.Policy), nullString(p.DeadLetterReason),
		nullString(p.ErrorContains), nullTime(p.CreatedFrom), nullTime(p.CreatedTo),
		nullTime(p.FinishedFrom), nullTime(p.FinishedTo), afterID, limit + 1}
	if p.Order == RecentlyFinishedFirst {
		args = append(args, afterAt)
	}
	jobs, err := c.queryDetails(ctx, sql, args)
	if err != nil {
		return JobPage{}, translate(op, 0, err)
	}
	page := JobPage{Jobs: jobs}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		last := page.Jobs[limit-1]
		page.Next = strconv.FormatInt(last.ID, 10)
		if p.Order == RecentlyFinishedFirst && last.CompletedAt != nil {
			page.Next = strconv.FormatInt(last.CompletedAt.UnixMicro(), 10) + ":" + page.Next
		}
	}
	return page, nil
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

// Details reads one job with its error history and what governs it; an
// unknown id gives ErrJobNotFound.
func (c *Client) Details(ctx context.Context, jobID int64) (JobDetail, error) {
	op := fmt.Sprintf("show job %d", jobID)
	jobs, err := c.queryDetails(ctx, detailFrom+"WHERE j.id = $1", []any{jobID})
	if err == nil && len(jobs) == 0 {
		err = ErrJobNotFound
	}
	if err != nil {
		if err == ErrJobNotFound {
			return JobDetail{}, fmt.Errorf("%s: %w", op, err)
		}
		return JobDetail{}, translate(op, jobID, err)
	}
	return jobs[0], nil
}

func (c *Client) queryDetails(ctx context.Context, sql string, args []any) ([]JobDetail, error) {
	rows, err := c.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	jobs := []JobDetail{}
	for rows.Next() {
		var d JobDetail
		var maxAttempts int32
		var history []byte
		j, err := scanJob(rows, &d.EffectivePolicy, &maxAttempts, &history)
		if err != nil {
			return nil, err
		}
		d.Job, d.EffectiveMaxAttempts, d.ErrorsJSON = j, int(maxAttempts), json.RawMessage(history)
		jobs = append(jobs, d)
	}
	return jobs, rows.Err()
}

// QueueInfo is a queue as an operator sees it: its policy, its pause
// switch and its controls (the settings of backoff.queues that `config
// apply` writes, DESIGN §11.5). Nil settings are off. Its live breaker and
// rate state is QueueState's.
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

// queuesSQL lists configured queues and those only seen in jobs; intervals
// are read as whole microseconds.
const queuesSQL = `SELECT q.name, q.policy, q.paused, true, q.rate, q.burst, q.breaker_failures,
	(extract(epoch FROM q.breaker_window) * 1000000)::bigint,
	(extract(epoch FROM q.breaker_cooldown) * 1000000)::bigint, q.breaker_probes
FROM backoff.queues AS q
UNION ALL
SELECT d.queue, backoff.job_policy(NULL, d.queue), false, false, NULL, NULL, NULL, NULL, NULL, 1
FROM (SELECT DISTINCT j.queue FROM backoff.jobs AS j) AS d
WHERE NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = d.queue)
ORDER BY 1`

// Queues lists every queue, configured or only seen in jobs, by name.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	op := "list queues"
	rows, err := c.db.Query(ctx, queuesSQL)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	defer rows.Close()
	out := []QueueInfo{}
	for rows.Next() {
		var q QueueInfo
		var window, cooldown *int64
		if err := rows.Scan(&q.Name, &q.Policy, &q.Paused, &q.Configured, &q.Rate, &q.Burst,
			&q.BreakerFailures, &window, &cooldown, &q.BreakerProbes); err != nil {
			return nil, translate(op, 0, err)
		}
		q.BreakerWindow, q.BreakerCooldown = micros(window), micros(cooldown)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}

// micros turns a nullable count of microseconds into a duration.
func micros(v *int64) *time.Duration {
	if v == nil {
		return nil
	}
	d := time.Duration(*v) * time.Microsecond
	return &d
}

// QueueState is the live state of a queue's controls at one time
// (backoff.queue_state): its breaker, its token bucket, and when a claim
// can next return a job as far as they go.
type QueueState struct {
	Queue string
	// State is "closed" (also without a breaker), "open" or "half_open".
	State string
	// OpenedAt is when the breaker last opened; zero when closed.
	OpenedAt time.Time
	// Failures is the failures counted in the breaker's window (0 without
	// a breaker).
	Failures int64
	// ProbesLeft is how many probe jobs a half-open breaker still hands
	// out; nil in the other states.
	ProbesLeft *int32
	// Rate and Burst are the queue's rate limit; nil: none.
	Rate  *float64
	Burst *int32
	// Tokens is how many jobs may be claimed now under the rate limit; nil
	// without one.
	Tokens *float64
	// NextClaimAt is when the breaker's cooldown ends or the next token
	// arrives; zero when nothing holds claims back (a paused queue too:
	// a pause has no end time).
	NextClaimAt time.Time
}

// queueStateColumns are QueueState's, then the time the state was read at
// (p_now, or the database's now()), which the Worker measures NextClaimAt
// from so that its wait does not depend on the clocks agreeing.
const queueStateColumns = "queue, state, opened_at, failures, probes_left, rate, burst, tokens, next_claim_at, "

// QueueState reads the live state of queue's breaker and rate limit
// (backoff.queue_state). A queue without a row in backoff.queues has
// every control off. A queue-scoped caller sees only queues it may work on
// or produce to.
func (c *Client) QueueState(ctx context.Context, queue string) (QueueState, error) {
	st, _, err := c.queueState(ctx, queue)
	return st, err
}

// queueState is QueueState, and how long from now NextClaimAt is (0 when
// it is zero or past), measured on the clock the state was read with.
func (c *Client) queueState(ctx context.Context, queue string) (QueueState, time.Duration, error) {
	op := fmt.Sprintf("read state of queue %q", queue)
	call, args := c.fn("queue_state", arg{"p_queue", "text", queue})
	var st QueueState
	var openedAt, next *time.Time
	var at time.Time
	err := c.db.QueryRow(ctx, "SELECT "+queueStateColumns+"coalesce($2::timestamptz, now()) FROM "+call, args...).
		Scan(&st.Queue, &st.State, &openedAt, &st.Failures, &st.ProbesLeft, &st.Rate, &st.Burst, &st.Tokens, &next, &at)
	if err != nil {
		return QueueState{}, 0, translate(op, 0, err)
	}
	var wait time.Duration
	if openedAt != nil {
		st.OpenedAt = *openedAt
	}
	if next != nil {
		st.NextClaimAt = *next
		wait = max(0, next.Sub(at))
	}
	return st, wait, nil
}

// PauseQueue stops claims of queue (backoff.pause_queue); running jobs go
// on. It reports whether the queue was running before.
func (c *Client) PauseQueue(ctx context.Context, queue string) (bool, error) {
	var changed bool
	err := c.db.QueryRow(ctx, "SELECT backoff.pause_queue(p_queue => $1::text)", queue).Scan(&changed)
	return changed, translate(fmt.Sprintf("pause queue %q", queue), 0, err)
}

// ResumeQueue lets claims of queue start again (backoff.resume_queue). It
// reports whether the queue was paused before.
func (c *Client) ResumeQueue(ctx context.Context, queue string) (bool, error) {
	var changed bool
	err := c.db.QueryRow(ctx, "SELECT backoff.resume_queue(p_queue => $1::text)", queue).Scan(&changed)
	return changed, translate(fmt.Sprintf("resume queue %q", queue), 0, err)
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
	call, args := c.fn("replay_dead_letters", arg{"p_queue", "text", queue})
	rows, err := c.db.Query(ctx, "SELECT job_id, replayed, coalesce(reason, '') FROM "+call, args...)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	defer rows.Close()
	out := []ReplayOutcome{}
	for rows.Next() {
		var o ReplayOutcome
		if err := rows.Scan(&o.JobID, &o.Replayed, &o.Reason); err != nil {
			return nil, translate(op, 0, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}
