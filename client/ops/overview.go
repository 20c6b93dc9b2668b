package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// This file holds the calls of a display that refreshes every few seconds
// (the web UI's overview): they read indexes, not the whole table, so that
// their cost does not grow with the finished jobs
// (docs/adr/0048-overview-without-full-scans.md).

// QueueOverview is one queue of Overview.
type QueueOverview struct {
	Queue      string
	Policy     string // the policy of its jobs that record none (backoff.job_policy)
	Paused     bool
	Configured bool // the queue has a row in backoff.queues
	// Pending, Running, Retrying, Due and OldestDueAge are exact.
	Pending, Running, Retrying int64
	// Expired counts the running jobs whose lease has ended: work a
	// stopped worker stranded, until a reap settles it (docs/adr/0066).
	Expired int64
	// Blocked counts the jobs waiting for the jobs they depend on
	// (docs/workflows.md), exactly.
	Blocked int64
	// Due counts pending and retrying jobs whose run_at has passed;
	// OldestDueAge is how long the oldest of them has waited (0: none due).
	Due          int64
	OldestDueAge time.Duration
	// Completed, DeadLettered and Cancelled are exact when FinishedExact;
	// otherwise (more finished jobs than the overview counts one by one)
	// they are the planner's estimates from the table statistics, as of the
	// last ANALYZE: show them as approximate.
	Completed, DeadLettered, Cancelled int64
	FinishedExact                      bool
	// The queue's controls, as client.Client.QueueState reads them, for a queue with a
	// rate or a circuit breaker: Breaker is "closed", "open" or
	// "half_open" ("closed" without a breaker); Rate and Tokens are nil
	// without a rate; NextClaimAt is zero when nothing holds claims back.
	Breaker     string
	Rate        *float64
	Tokens      *float64
	NextClaimAt time.Time
}

// Overview returns backoff.overview: every queue (configured, or holding
// jobs) by name, with exact counts of its live jobs and exact or
// estimated counts of its finished ones (the queue's first exactLimit
// finished jobs are counted; 0: the function's default, 10000). It reads
// indexes only: cheap enough for a page that refreshes every few seconds.
// On a sharded setup the rows of one queue from several shards are added
// up.
func (c *Client) Overview(ctx context.Context, exactLimit int) ([]QueueOverview, error) {
	op := "read the queue overview"
	call, args := c.fn("overview", sqlapi.Arg("p_exact_limit", "integer", nullIntDefault(exactLimit, 10000)))
	rows, err := c.db.Query(ctx, "SELECT queue, policy, paused, configured, pending, running, expired, retrying, due, "+
		"coalesce(oldest_due_age, interval '0'), completed, dead_lettered, cancelled, finished_exact, "+
		"breaker, rate, tokens, next_claim_at, blocked FROM "+call, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []QueueOverview{}
	at := map[string]int{}
	for rows.Next() {
		var q QueueOverview
		var next *time.Time
		if err := rows.Scan(&q.Queue, &q.Policy, &q.Paused, &q.Configured, &q.Pending, &q.Running, &q.Expired, &q.Retrying,
			&q.Due, &q.OldestDueAge, &q.Completed, &q.DeadLettered, &q.Cancelled, &q.FinishedExact,
			&q.Breaker, &q.Rate, &q.Tokens, &next, &q.Blocked); err != nil {
			return nil, translate(op, err)
		}
		if next != nil {
			q.NextClaimAt = *next
		}
		i, seen := at[q.Queue]
		if !seen {
			at[q.Queue] = len(out)
			out = append(out, q)
			continue
		}
		p := &out[i]
		p.Pending, p.Running, p.Retrying, p.Due = p.Pending+q.Pending, p.Running+q.Running, p.Retrying+q.Retrying, p.Due+q.Due
		p.Expired += q.Expired
		p.Blocked += q.Blocked
		p.OldestDueAge = max(p.OldestDueAge, q.OldestDueAge)
		p.Completed, p.DeadLettered, p.Cancelled = p.Completed+q.Completed, p.DeadLettered+q.DeadLettered, p.Cancelled+q.Cancelled
		p.FinishedExact = p.FinishedExact && q.FinishedExact
		p.Paused, p.Configured = p.Paused || q.Paused, p.Configured || q.Configured
		// Each shard runs its own breaker and bucket: show the most
		// restrictive state.
		if breakerRank[q.Breaker] > breakerRank[p.Breaker] {
			p.Breaker = q.Breaker
		}
		if q.NextClaimAt.After(p.NextClaimAt) {
			p.NextClaimAt = q.NextClaimAt
		}
		if p.Rate == nil {
			p.Rate, p.Tokens = q.Rate, q.Tokens
		}
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// ActivitySince counts, per queue and per bucket (0: one minute), what
// happened from since to now, both included (backoff.activity): jobs
// completed, dead-lettered and cancelled, and failed attempts. Buckets are
// aligned to multiples of bucket since 2000-01-01 UTC, so a bucket that has
// ended counts the same on every later call: a display that refreshes may
// keep the ended ones and ask only from the first open bucket on. A since
// after the database's now gives nothing. Its cost grows with the events
// since since, not with the table.
func (c *Client) ActivitySince(ctx context.Context, since time.Time, bucket time.Duration) ([]Activity, error) {
	op := "read job activity"
	if bucket < 0 {
		return nil, fmt.Errorf("%s: %w: negative bucket %s", op, sqlapi.ErrInvalidArgument, bucket)
	}
	call, args := c.fn("activity", sqlapi.Arg("p_since", "timestamptz", since),
		sqlapi.Arg("p_bucket", "interval", nullDurationDefault(bucket, time.Minute)))
	return c.queryActivity(ctx, op, "SELECT queue, bucket, completed, failed, dead_lettered, cancelled FROM "+call, args)
}

func (c *Client) queryActivity(ctx context.Context, op, sql string, args []any) ([]Activity, error) {
	rows, err := c.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []Activity{}
	for rows.Next() {
		var a Activity
		if err := rows.Scan(&a.Queue, &a.Start, &a.Completed, &a.Failed, &a.DeadLettered, &a.Cancelled); err != nil {
			return nil, translate(op, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

var breakerRank = map[string]int{"closed": 0, "half_open": 1, "open": 2}

func nullDurationDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// activitySQL is Activity's call: the window ends at the client's clock
// when it has one ($1), else at the database's.
const activitySQL = `SELECT queue, bucket, completed, failed, dead_lettered, cancelled
FROM backoff.activity(p_since => coalesce($1::timestamptz, now()) - $2::interval, p_bucket => $3::interval, p_now => $1::timestamptz)`
