package ops

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// This file holds the operator's calls a web UI needs beyond inspect.go:
// the policies, the dead letters grouped by cause, a count for a filter,
// and bulk actions on everything a filter matches.

// Policies returns every row of backoff.policies, by name, as the values
// client/policy computes delays with (backoff.policy_list).
func (c *Client) Policies(ctx context.Context) ([]policy.Policy, error) {
	op := "list policies"
	rows, err := c.db.Query(ctx, `SELECT name, strategy, base_us, multiplier, exponent, schedule_us, max_delay_us,
	jitter, jitter_ratio, max_attempts, lease_us, coalesce(deadline_us, 0), coalesce(max_lease_expiries, 0)
FROM backoff.policy_list()`)
	if err != nil {
		return nil, translate(op, err)
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
			return nil, translate(op, err)
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
		return nil, translate(op, err)
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

// DeadLetterGroups groups the dead letters of queue ("" for every queue) by
// queue, reason and error signature, largest group first, at most limit
// groups (0: 200). It reads every dead letter, so its cost grows with
// them: DeadLetters is the bounded summary the web UI shows
// (backoff.dead_letter_groups).
func (c *Client) DeadLetterGroups(ctx context.Context, queue string, limit int) ([]DeadLetterGroup, error) {
	op := "group dead letters"
	if limit <= 0 {
		limit = 200
	}
	call, args := sqlapi.Call("dead_letter_groups", sqlapi.Arg("p_queue", "text", sqlapi.NullString(queue)), sqlapi.Arg("p_limit", "integer", limit))
	rows, err := c.db.Query(ctx, "SELECT queue, reason, signature, count, first_seen, last_seen, example FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []DeadLetterGroup{}
	for rows.Next() {
		var g DeadLetterGroup
		if err := rows.Scan(&g.Queue, &g.Reason, &g.Signature, &g.Count, &g.FirstSeen, &g.LastSeen, &g.Example); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return mergeGroups(out, limit), nil
}

// mergeGroups adds up the groups of one queue, reason and signature,
// largest first, and keeps limit: behind a router every shard answers with
// its own groups, and a queue that spans shards has its part on each.
func mergeGroups(gs []DeadLetterGroup, limit int) []DeadLetterGroup {
	type key struct{ queue, reason, sig string }
	at := map[key]int{}
	out := gs[:0]
	for _, g := range gs {
		k := key{g.Queue, g.Reason, g.Signature}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, g)
			continue
		}
		m := &out[i]
		m.Count += g.Count
		if g.FirstSeen.Before(m.FirstSeen) {
			m.FirstSeen = g.FirstSeen
		}
		if g.LastSeen.After(m.LastSeen) {
			m.LastSeen, m.Example = g.LastSeen, g.Example
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Signature < b.Signature
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
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
	call, args := sqlapi.Call("count_jobs",
		sqlapi.Arg("p_queue", "text", sqlapi.NullString(p.Queue)),
		sqlapi.Arg("p_statuses", "text[]", statusNames(p.Statuses)),
		sqlapi.Arg("p_policy", "text", sqlapi.NullString(p.Policy)),
		sqlapi.Arg("p_dead_letter_reason", "text", sqlapi.NullString(p.DeadLetterReason)),
		sqlapi.Arg("p_error_contains", "text", sqlapi.NullString(p.ErrorContains)),
		sqlapi.Arg("p_error_signature", "text", sqlapi.NullString(signature)),
		sqlapi.Arg("p_created_from", "timestamptz", sqlapi.NullTime(p.CreatedFrom)),
		sqlapi.Arg("p_created_to", "timestamptz", sqlapi.NullTime(p.CreatedTo)),
		sqlapi.Arg("p_finished_from", "timestamptz", sqlapi.NullTime(p.FinishedFrom)),
		sqlapi.Arg("p_finished_to", "timestamptz", sqlapi.NullTime(p.FinishedTo)),
		sqlapi.Arg("p_schedule", "text", sqlapi.NullString(p.Schedule)),
		sqlapi.Arg("p_limit", "bigint", sqlapi.NullInt(max(limit, 0))),
	)
	var n int64
	if err := c.db.QueryRow(ctx, "SELECT "+call, args...).Scan(&n); err != nil {
		return 0, translate(op, err)
	}
	if limit > 0 {
		// Behind a router every shard counts up to the bound.
		n = min(n, int64(limit))
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
// FinishedTo, Schedule, Order and Cursor are not supported and must be
// zero) and an error signature (DeadLetterGroup.Signature).
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
	if !f.FinishedFrom.IsZero() || !f.FinishedTo.IsZero() || f.Schedule != "" || f.Cursor != "" {
		return nil, fmt.Errorf("%s: %w: finished-time bounds, schedules and cursors are not bulk filters", op, sqlapi.ErrInvalidArgument)
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
		sqlapi.Arg("p_action", "text", string(action)),
		sqlapi.Arg("p_queue", "text", sqlapi.NullString(f.Queue)),
		sqlapi.Arg("p_statuses", "text[]", statuses),
		sqlapi.Arg("p_policy", "text", sqlapi.NullString(f.Policy)),
		sqlapi.Arg("p_dead_letter_reason", "text", sqlapi.NullString(f.DeadLetterReason)),
		sqlapi.Arg("p_error_contains", "text", sqlapi.NullString(f.ErrorContains)),
		sqlapi.Arg("p_error_signature", "text", sqlapi.NullString(f.ErrorSignature)),
		sqlapi.Arg("p_created_from", "timestamptz", sqlapi.NullTime(f.CreatedFrom)),
		sqlapi.Arg("p_created_to", "timestamptz", sqlapi.NullTime(f.CreatedTo)),
		sqlapi.Arg("p_limit", "integer", nullIntDefault(limit, 10000)),
	)
	rows, err := c.db.Query(ctx, "SELECT job_id, done, coalesce(reason, '') FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []BulkOutcome{}
	for rows.Next() {
		var o BulkOutcome
		if err := rows.Scan(&o.JobID, &o.Done, &o.Reason); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
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
		return nil, fmt.Errorf("%s: %w: bucket %s is longer than the window %s", op, sqlapi.ErrInvalidArgument, bucket, window)
	}
	return c.queryActivity(ctx, op, activitySQL, []any{c.nowArg(), window, bucket})
}
