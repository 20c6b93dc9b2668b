package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// This file holds the operator's calls a web UI needs beyond inspect.go:
// the policies, the dead letters grouped by cause, a count for a filter,
// and bulk actions on everything a filter matches.

// policyColumns reads a backoff.policies row with durations as whole
// microseconds, the resolution of an interval.
const policyColumns = `name, strategy,
	(extract(epoch FROM base) * 1000000)::bigint,
	multiplier, exponent,
	ARRAY(SELECT (extract(epoch FROM s) * 1000000)::bigint FROM unnest(schedule) WITH ORDINALITY AS u(s, i) ORDER BY i),
	(extract(epoch FROM max_delay) * 1000000)::bigint,
	jitter, jitter_ratio, max_attempts,
	(extract(epoch FROM lease) * 1000000)::bigint,
	coalesce((extract(epoch FROM deadline) * 1000000)::bigint, 0),
	coalesce(max_lease_expiries, 0)`

// Policies returns every row of backoff.policies, by name, as the values
// client/policy computes delays with.
func (c *Client) Policies(ctx context.Context) ([]policy.Policy, error) {
	op := "list policies"
	rows, err := c.db.Query(ctx, "SELECT "+policyColumns+" FROM backoff.policies ORDER BY name")
	if err != nil {
		return nil, translate(op, 0, err)
	}
	defer rows.Close()
	out := []policy.Policy{}
	for rows.Next() {
		var p policy.Policy
		var strategy, jitter string
		var base, maxDelay, lease, deadline int64
		var schedule []int64
		if err := rows.Scan(&p.Name, &strategy, &base, &p.Multiplier, &p.Exponent, &schedule, &maxDelay,
			&jitter, &p.JitterRatio, &p.MaxAttempts, &lease, &deadline, &p.MaxLeaseExpiries); err != nil {
			return nil, translate(op, 0, err)
		}
		us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
		p.Strategy, p.Jitter = policy.Strategy(strategy), policy.Jitter(jitter)
		p.Base, p.Max, p.Lease, p.Deadline = us(base), us(maxDelay), us(lease), us(deadline)
		for _, s := range schedule {
			p.Schedule = append(p.Schedule, us(s))
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}

// DeadLetterGroup is the dead letters of one queue that share a reason and
// an error signature (backoff.error_signature of the last error).
type DeadLetterGroup struct {
	Queue     string
	Reason    string
	Signature string
	Count     int64
	// FirstSeen and LastSeen bound when the group's jobs were dead-lettered.
	FirstSeen, LastSeen time.Time
	// Example is the last error of the group's newest job, unmasked.
	Example string
}

const deadLetterGroupsSQL = `SELECT j.queue, coalesce(j.dead_letter_reason, ''), backoff.error_signature(j.last_error) AS sig,
	count(*), min(coalesce(j.completed_at, j.created_at)), max(coalesce(j.completed_at, j.created_at)),
	coalesce((array_agg(j.last_error ORDER BY j.id DESC))[1], '')
FROM backoff.jobs AS j
WHERE j.status = 'dead_lettered' AND ($1::text IS NULL OR j.queue = $1)
GROUP BY 1, 2, 3
ORDER BY 4 DESC, 1, 2, 3
LIMIT $2`

// DeadLetterGroups groups the dead letters of queue ("" for every queue) by
// queue, reason and error signature, largest group first, at most limit
// groups (0: 200). It reads every dead letter, so its cost grows with
// them: DeadLetters is the bounded summary the web UI shows.
func (c *Client) DeadLetterGroups(ctx context.Context, queue string, limit int) ([]DeadLetterGroup, error) {
	op := "group dead letters"
	if limit <= 0 {
		limit = 200
	}
	rows, err := c.db.Query(ctx, deadLetterGroupsSQL, nullString(queue), limit)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	defer rows.Close()
	out := []DeadLetterGroup{}
	for rows.Next() {
		var g DeadLetterGroup
		if err := rows.Scan(&g.Queue, &g.Reason, &g.Signature, &g.Count, &g.FirstSeen, &g.LastSeen, &g.Example); err != nil {
			return nil, translate(op, 0, err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}

// CountJobs counts the jobs List would return for p's filters (its Order,
// Cursor and Limit are ignored), up to limit (0: no bound): the number a
// confirmation of a bulk action names. Like List it writes only the
// filters p sets, so that the partial indexes serve them.
func (c *Client) CountJobs(ctx context.Context, p ListParams, limit int) (int64, error) {
	return c.countMatching(ctx, "count jobs", p, "", limit)
}

// countMatching counts the jobs that match p's filters and, when signature
// is set, whose last error has that error signature, up to limit (0: no
// bound).
func (c *Client) countMatching(ctx context.Context, op string, p ListParams, signature string, limit int) (int64, error) {
	var args []any
	cond, err := listFilter(p, &args)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %w", op, ErrInvalidArgument, err)
	}
	if p.ErrorContains != "" {
		args = append(args, p.ErrorContains)
		cond += " AND strpos(lower(j.last_error), lower($" + strconv.Itoa(len(args)) + "::text)) > 0"
	}
	if signature != "" {
		args = append(args, signature)
		cond += " AND backoff.error_signature(j.last_error) = $" + strconv.Itoa(len(args)) + "::text"
	}
	var lim any
	if limit > 0 {
		lim = limit
	}
	args = append(args, lim)
	sql := "SELECT count(*) FROM (SELECT 1 FROM backoff.jobs AS j WHERE " + cond +
		" LIMIT $" + strconv.Itoa(len(args)) + "::bigint) AS m"
	var n int64
	if err := c.db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, translate(op, 0, err)
	}
	return n, nil
}

// BulkAction is what Bulk does to each matching job.
type BulkAction string

// The bulk actions.
const (
	BulkReplay BulkAction = "replay" // backoff.replay: dead-lettered and cancelled jobs back to pending
	BulkCancel BulkAction = "cancel" // backoff.cancel: unfinished jobs to cancelled
)

// BulkFilter selects the jobs of Bulk: ListParams' filters (FinishedFrom,
// FinishedTo, Order and Cursor are not supported and must be zero) and an
// error signature (DeadLetterGroup.Signature).
type BulkFilter struct {
	ListParams
	ErrorSignature string
}

// BulkOutcome is what Bulk did with one job: done, or left alone for
// Reason.
type BulkOutcome struct {
	JobID  int64
	Done   bool
	Reason string
}

// Bulk replays or cancels every job matching f, at most limit (0: 10000)
// in id order, in one call (backoff.bulk_jobs), and returns one outcome
// per matching job: what it could not do it reports instead of failing
// the others.
func (c *Client) Bulk(ctx context.Context, action BulkAction, f BulkFilter, limit int) ([]BulkOutcome, error) {
	op := fmt.Sprintf("bulk %s", action)
	if !f.FinishedFrom.IsZero() || !f.FinishedTo.IsZero() || f.Cursor != "" {
		return nil, fmt.Errorf("%s: %w: finished-time bounds and cursors are not bulk filters", op, ErrInvalidArgument)
	}
	var statuses any
	if f.Statuses != nil {
		st := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			st[i] = string(s)
		}
		statuses = st
	}
	call, args := c.fn("bulk_jobs",
		arg{"p_action", "text", string(action)},
		arg{"p_queue", "text", nullString(f.Queue)},
		arg{"p_statuses", "text[]", statuses},
		arg{"p_policy", "text", nullString(f.Policy)},
		arg{"p_dead_letter_reason", "text", nullString(f.DeadLetterReason)},
		arg{"p_error_contains", "text", nullString(f.ErrorContains)},
		arg{"p_error_signature", "text", nullString(f.ErrorSignature)},
		arg{"p_created_from", "timestamptz", nullTime(f.CreatedFrom)},
		arg{"p_created_to", "timestamptz", nullTime(f.CreatedTo)},
		arg{"p_limit", "integer", nullIntDefault(limit, 10000)},
	)
	rows, err := c.db.Query(ctx, "SELECT job_id, done, coalesce(reason, '') FROM "+call, args...)
	if err != nil {
		return nil, translate(op, 0, err)
	}
	defer rows.Close()
	out := []BulkOutcome{}
	for rows.Next() {
		var o BulkOutcome
		if err := rows.Scan(&o.JobID, &o.Done, &o.Reason); err != nil {
			return nil, translate(op, 0, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, 0, err)
	}
	return out, nil
}

func nullIntDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Activity is what happened in one queue during one bucket of time.
type Activity struct {
	Queue        string
	Start        time.Time // the bucket's start (a multiple of the bucket since 2000-01-01 UTC)
	Completed    int64     // jobs completed
	Failed       int64     // failed attempts (handler errors and expired leases), from the error history
	DeadLettered int64     // jobs dead-lettered
	Cancelled    int64     // jobs cancelled
}

// Activity counts, per queue and per bucket of the last window (defaults:
// one hour, one minute), the jobs completed, dead-lettered and cancelled
// and the failed attempts (backoff.activity from now - window). Buckets
// are aligned as ActivitySince says, so the first one may start before the
// window (it counts only what lies inside). Buckets where nothing happened
// are absent. It reads indexes; its cost grows with the events of the
// window.
func (c *Client) Activity(ctx context.Context, window, bucket time.Duration) ([]Activity, error) {
	op := "read job activity"
	if window <= 0 {
		window = time.Hour
	}
	if bucket <= 0 {
		bucket = time.Minute
	}
	if bucket > window {
		return nil, fmt.Errorf("%s: %w: bucket %s is longer than the window %s", op, ErrInvalidArgument, bucket, window)
	}
	return c.queryActivity(ctx, op, activitySQL, []any{c.nowArg(), window, bucket})
}
