package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the dead-letters summary of the web UI: exact counts per
// queue and reason, and the most recent dead letters grouped by error
// signature, read from the partial index jobs_dead_letters_idx so that its
// cost does not grow with the number of dead letters
// (docs/adr/0055-dead-letters-page-bounded.md).

// Defaults of DeadLetterOptions.
const (
	DefaultDeadLetterSample     = 10000  // most recent dead letters grouped by signature
	DefaultDeadLetterCountLimit = 100000 // exact count per queue and reason up to this
	DefaultDeadLetterGroups     = 200    // signature groups returned
	DefaultDeadLetterPairs      = 500    // (queue, reason) pairs counted and sampled
)

// DeadLetterOptions select and bound DeadLetters. Zero values take the
// defaults above.
type DeadLetterOptions struct {
	// Queue restricts the summary to one queue ("" for every queue).
	Queue string
	// Sample is how many of the most recent dead letters (by the time they
	// were dead-lettered) are grouped by error signature.
	Sample int
	// CountLimit bounds each exact count per queue and reason: above it the
	// count reads CountLimit with CountExact false.
	CountLimit int
	// Groups is the most signature groups returned, largest first.
	Groups int
	// Pairs is the most (queue, reason) pairs counted and sampled, the
	// first in (queue, reason) order: each costs a few index probes and a
	// branch of the sample's statement, so a queue per tenant would
	// otherwise make the summary grow (and past some tens of thousands of
	// pairs fail) with the tenants.
	Pairs int
}

// DeadLetterReason is every dead letter of one queue with one reason.
type DeadLetterReason struct {
	Queue  string
	Reason string // "" for a dead letter without one (written by hand)
	// Count is exact when CountExact; otherwise there are more than Count.
	Count      int64
	CountExact bool
	// FirstSeen and LastSeen bound when these jobs were dead-lettered
	// (exact, whatever the count).
	FirstSeen, LastSeen time.Time
}

// DeadLetterSummary is what the web UI's dead-letters page shows.
type DeadLetterSummary struct {
	// Reasons are the exact counts per queue and reason, by queue and
	// reason.
	Reasons []DeadLetterReason
	// Groups are the sampled dead letters grouped by queue, reason and
	// error signature, largest group first: their counts, first and last
	// seen cover only the sample unless Complete.
	Groups []DeadLetterGroup
	// Sampled is how many dead letters Groups were built from: the most
	// recent ones, at most DeadLetterOptions.Sample.
	Sampled int64
	// Complete is true when the sample holds every dead letter (of the
	// queue): Groups' counts are then the groups' whole counts.
	Complete bool
	// PairsCapped is true when there are more (queue, reason) pairs than
	// DeadLetterOptions.Pairs: Reasons and the sample cover the first
	// Pairs only, in (queue, reason) order.
	PairsCapped bool
}

// deadLetterReasonsSQL finds the (queue, reason) pairs of the dead letters
// by a loose scan of jobs_dead_letters_idx (reason may be NULL: the next
// pair is a greater reason, else the queue's NULL reason, else the next
// queue), the first $3 of them (the scan stops there: a recursive query is
// evaluated as far as it is read), then counts each pair, at most $2 + 1,
// and finds its first and last completed_at, all index-only. Every probe orders by the index's
// columns: with a bare LIMIT the planner may take a heap or sequential
// scan (PostgreSQL 14-18 did, estimating the reason's NULLs from the whole
// table), and the NULL reason's probes order by the reason too (IS NULL is
// no equality for the planner's orderings).
const deadLetterReasonsSQL = `WITH RECURSIVE pairs (queue, reason) AS (
    (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
     WHERE j.status = 'dead_lettered' AND ($1::text IS NULL OR j.queue = $1::text)
     ORDER BY j.queue, j.dead_letter_reason LIMIT 1)
    UNION ALL
    SELECT n.queue, n.reason FROM pairs AS p CROSS JOIN LATERAL (
        SELECT u.queue, u.reason FROM (
            (SELECT j.queue, j.dead_letter_reason AS reason FROM backoff.jobs AS j
             WHERE j.status = 'dead_lettered' AND p.reason IS NOT NULL
               AND j.queue = p.queue AND j.dead_letter_reason > p.reason
             ORDER BY j.dead_letter_reason LIMIT 1)
            UNION ALL
            (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
             WHERE j.status = 'dead_lettered' AND p.reason IS NOT NULL
               AND j.queue = p.queue AND j.dead_letter_reason IS NULL
             ORDER BY j.dead_letter_reason LIMIT 1)
            UNION ALL
            (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
             WHERE j.status = 'dead_lettered' AND $1::text IS NULL AND j.queue > p.queue
             ORDER BY j.queue, j.dead_letter_reason LIMIT 1)) AS u
        ORDER BY u.queue, u.reason LIMIT 1) AS n
)
SELECT p.queue, p.reason,
    (SELECT count(*) FROM (
        (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
           AND j.queue = p.queue AND j.dead_letter_reason = p.reason
           ORDER BY j.completed_at LIMIT $2::bigint + 1)
        UNION ALL
        (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
           AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL
           ORDER BY j.dead_letter_reason, j.completed_at LIMIT $2::bigint + 1)) AS c),
    coalesce((SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                AND j.queue = p.queue AND j.dead_letter_reason = p.reason AND j.completed_at IS NOT NULL
                ORDER BY j.completed_at LIMIT 1),
             (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL AND j.completed_at IS NOT NULL
                ORDER BY j.dead_letter_reason, j.completed_at LIMIT 1)),
    coalesce((SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                AND j.queue = p.queue AND j.dead_letter_reason = p.reason AND j.completed_at IS NOT NULL
                ORDER BY j.completed_at DESC LIMIT 1),
             (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL AND j.completed_at IS NOT NULL
                ORDER BY j.dead_letter_reason DESC, j.completed_at DESC LIMIT 1))
FROM (SELECT f.queue, f.reason FROM pairs AS f WHERE f.queue IS NOT NULL LIMIT $3::bigint) AS p
ORDER BY p.queue, p.reason`

// deadLetterSampleSQL groups the most recent dead letters: sample, the ids
// of the most recent $1 over every pair (a merge of each pair's backward
// index-only scan, written by deadLetterSample), then their rows (one
// primary-key probe each: OFFSET 0 keeps the planner from hashing the
// whole table for them) grouped by signature, at most $2 groups, each
// with its newest job's error.
const deadLetterSampleSQL = `WITH sample AS MATERIALIZED (%s),
groups AS (
    SELECT j.queue, j.dead_letter_reason AS reason, backoff.error_signature(j.last_error) AS sig, count(*) AS n,
        min(coalesce(j.completed_at, j.created_at)) AS first_seen, max(coalesce(j.completed_at, j.created_at)) AS last_seen,
        (array_agg(j.id ORDER BY s.completed_at DESC, s.id DESC))[1] AS newest
    FROM sample AS s
    CROSS JOIN LATERAL (SELECT j.id, j.queue, j.dead_letter_reason, j.last_error, j.completed_at, j.created_at
                        FROM backoff.jobs AS j WHERE j.id = s.id OFFSET 0) AS j
    GROUP BY 1, 2, 3
    ORDER BY 4 DESC, 1, 2, 3
    LIMIT $2::bigint
)
SELECT g.queue, coalesce(g.reason, ''), g.sig, g.n, g.first_seen, g.last_seen, coalesce(e.last_error, ''),
    (SELECT count(*) FROM sample)
FROM groups AS g LEFT JOIN backoff.jobs AS e ON e.id = g.newest
ORDER BY g.n DESC, g.queue, g.reason, g.sig`

// deadLetterSample writes the sample's statement over the pairs: one
// backward scan per pair, merged by completed_at (the planner's Merge
// Append reads about $1 entries in all, not $1 per pair).
func deadLetterSample(pairs []DeadLetterReason, args *[]any) string {
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		*args = append(*args, p.Queue)
		queue := "j.queue = $" + strconv.Itoa(len(*args)) + "::text"
		if p.Reason == "" {
			// The queue's NULL reasons come first in the index read
			// backward: take the queue's first $1 entries and keep the
			// NULL ones (a WHERE ... IS NULL lets the planner guess that
			// most dead letters have no reason and sort them all). Merge
			// Append then sorts this part by completed_at.
			parts = append(parts, "(SELECT n.completed_at, n.id FROM (SELECT j.completed_at, j.id, j.dead_letter_reason"+
				" FROM backoff.jobs AS j WHERE j.status = 'dead_lettered' AND "+queue+
				" ORDER BY j.dead_letter_reason DESC, j.completed_at DESC, j.id DESC LIMIT $1::bigint) AS n"+
				" WHERE n.dead_letter_reason IS NULL)")
			continue
		}
		*args = append(*args, p.Reason)
		parts = append(parts, "(SELECT j.completed_at, j.id FROM backoff.jobs AS j WHERE j.status = 'dead_lettered' AND "+
			queue+" AND j.dead_letter_reason = $"+strconv.Itoa(len(*args))+"::text"+
			" ORDER BY j.completed_at DESC, j.id DESC LIMIT $1::bigint)")
	}
	return "SELECT u.completed_at, u.id FROM (\n    " + strings.Join(parts, "\n    UNION ALL\n    ") +
		") AS u\n    ORDER BY u.completed_at DESC, u.id DESC LIMIT $1::bigint"
}

// DeadLetters summarizes the dead letters (of o.Queue, or every queue) for
// an operator: exact counts per queue and reason (up to o.CountLimit each)
// with when each was first and last seen, and the most recent o.Sample
// dead letters grouped by queue, reason and error signature
// (backoff.error_signature of the last error). It reads the index
// jobs_dead_letters_idx and o.Sample rows: its cost grows with the sample,
// the (queue, reason) pairs and the counts up to their limit, not with the
// dead letters beyond them. Two statements: under concurrent changes the
// counts and the sample may differ by what happened between them.
func (c *Client) DeadLetters(ctx context.Context, o DeadLetterOptions) (DeadLetterSummary, error) {
	op := "summarize dead letters"
	if o.Sample < 0 || o.CountLimit < 0 || o.Groups < 0 || o.Pairs < 0 {
		return DeadLetterSummary{}, fmt.Errorf("%s: %w: sample %d, count limit %d, groups %d and pairs %d must not be negative",
			op, ErrInvalidArgument, o.Sample, o.CountLimit, o.Groups, o.Pairs)
	}
	o.Sample = nullIntDefault(o.Sample, DefaultDeadLetterSample)
	o.CountLimit = nullIntDefault(o.CountLimit, DefaultDeadLetterCountLimit)
	o.Groups = nullIntDefault(o.Groups, DefaultDeadLetterGroups)
	o.Pairs = nullIntDefault(o.Pairs, DefaultDeadLetterPairs)
	out := DeadLetterSummary{Reasons: []DeadLetterReason{}, Groups: []DeadLetterGroup{}}
	err := c.withoutJIT(ctx, func(db DB) error { return summarizeDeadLetters(ctx, db, o, &out) })
	if err != nil {
		return out, translate(op, 0, err)
	}
	return out, nil
}

// summarizeDeadLetters fills out for DeadLetters (o with its defaults).
func summarizeDeadLetters(ctx context.Context, db DB, o DeadLetterOptions, out *DeadLetterSummary) error {
	// One pair more than asked for says that there are more.
	rows, err := db.Query(ctx, deadLetterReasonsSQL, nullString(o.Queue), o.CountLimit, o.Pairs+1)
	if err != nil {
		return err
	}
	var total int64
	exact := true
	for rows.Next() {
		var r DeadLetterReason
		var reason *string
		var first, last *time.Time // NULL for dead letters without completed_at (written by hand)
		if err := rows.Scan(&r.Queue, &reason, &r.Count, &first, &last); err != nil {
			rows.Close()
			return err
		}
		if len(out.Reasons) == o.Pairs {
			out.PairsCapped = true
			continue
		}
		if reason != nil {
			r.Reason = *reason
		}
		if first != nil {
			r.FirstSeen, r.LastSeen = *first, *last
		}
		total += r.Count
		r.CountExact = r.Count <= int64(o.CountLimit)
		exact = exact && r.CountExact
		r.Count = min(r.Count, int64(o.CountLimit))
		out.Reasons = append(out.Reasons, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(out.Reasons) == 0 {
		out.Complete = true
		return nil
	}
	args := []any{o.Sample, o.Groups}
	sql := fmt.Sprintf(deadLetterSampleSQL, deadLetterSample(out.Reasons, &args))
	rows, err = db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var g DeadLetterGroup
		if err := rows.Scan(&g.Queue, &g.Reason, &g.Signature, &g.Count, &g.FirstSeen, &g.LastSeen, &g.Example, &out.Sampled); err != nil {
			return err
		}
		out.Groups = append(out.Groups, g)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	out.Complete = exact && total <= int64(o.Sample) && !out.PairsCapped
	return nil
}

// withoutJIT runs fn's statements with JIT compilation off, in a
// transaction it rolls back (a savepoint when the client's DB is a
// transaction, so its setting comes back too). The dead-letters summary is
// many small index probes whose estimated cost passes jit_above_cost:
// compiled, its first statement took 43-48 ms instead of 15 ms at
// 1,000,000 jobs (50,000 dead letters), and a server whose llvmjit cannot
// load libLLVM fails it (SQLSTATE 58P01), as ADR 0053 found for the
// lifecycle functions. A DB that cannot begin a transaction runs fn as it
// is.
func (c *Client) withoutJIT(ctx context.Context, fn func(DB) error) error {
	b, ok := c.db.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return fn(c.db)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return err
	}
	return fn(tx)
}

// CountBulk counts the jobs Bulk would act on for f, up to limit (0: no
// bound): the number a bulk confirmation names. With an error signature it
// reads each job its other filters select (the signature has no index):
// for a confirmation, not a page that refreshes.
func (c *Client) CountBulk(ctx context.Context, f BulkFilter, limit int) (int64, error) {
	return c.countMatching(ctx, "count bulk jobs", f.ListParams, f.ErrorSignature, limit)
}
