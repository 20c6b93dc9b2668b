package ops

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// This file holds the dead-letters summary of the web UI: exact counts per
// queue and reason, and the most recent dead letters grouped by error
// signature, read by backoff.dead_letter_reasons and
// backoff.dead_letter_sample from the partial index jobs_dead_letters_idx
// so that its cost does not grow with the number of dead letters
// (docs/adr/0055-dead-letters-page-bounded.md, docs/adr/0072).

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

// DeadLetters summarizes the dead letters (of o.Queue, or every queue) for
// an operator: exact counts per queue and reason (up to o.CountLimit each)
// with when each was first and last seen, and the most recent o.Sample
// dead letters grouped by queue, reason and error signature
// (backoff.error_signature of the last error). It reads the index
// jobs_dead_letters_idx and o.Sample rows: its cost grows with the sample,
// the (queue, reason) pairs and the counts up to their limit, not with the
// dead letters beyond them (backoff.dead_letter_reasons, then
// backoff.dead_letter_sample). Two statements: under concurrent changes
// the counts and the sample may differ by what happened between them.
func (c *Client) DeadLetters(ctx context.Context, o DeadLetterOptions) (DeadLetterSummary, error) {
	op := "summarize dead letters"
	if o.Sample < 0 || o.CountLimit < 0 || o.Groups < 0 || o.Pairs < 0 {
		return DeadLetterSummary{}, fmt.Errorf("%s: %w: sample %d, count limit %d, groups %d and pairs %d must not be negative",
			op, sqlapi.ErrInvalidArgument, o.Sample, o.CountLimit, o.Groups, o.Pairs)
	}
	o.Sample = nullIntDefault(o.Sample, DefaultDeadLetterSample)
	o.CountLimit = nullIntDefault(o.CountLimit, DefaultDeadLetterCountLimit)
	o.Groups = nullIntDefault(o.Groups, DefaultDeadLetterGroups)
	o.Pairs = nullIntDefault(o.Pairs, DefaultDeadLetterPairs)
	out := DeadLetterSummary{Reasons: []DeadLetterReason{}, Groups: []DeadLetterGroup{}}
	if err := summarizeDeadLetters(ctx, c.db, o, &out); err != nil {
		return out, translate(op, err)
	}
	return out, nil
}

// summarizeDeadLetters fills out for DeadLetters (o with its defaults).
// Behind a router every shard answers for its own dead letters: the rows of
// one (queue, reason) or one group are added up, and Sampled is the
// largest shard's sample.
func summarizeDeadLetters(ctx context.Context, db DB, o DeadLetterOptions, out *DeadLetterSummary) error {
	// One pair more than asked for says that there are more.
	call, args := sqlapi.Call("dead_letter_reasons", sqlapi.Arg("p_queue", "text", sqlapi.NullString(o.Queue)),
		sqlapi.Arg("p_count_limit", "integer", o.CountLimit), sqlapi.Arg("p_pairs", "integer", o.Pairs+1))
	rows, err := db.Query(ctx, "SELECT queue, coalesce(reason, ''), count, count_exact, first_seen, last_seen FROM "+call, args...)
	if err != nil {
		return err
	}
	var reasons []DeadLetterReason
	for rows.Next() {
		var r DeadLetterReason
		var first, last *time.Time // NULL for dead letters without completed_at (written by hand)
		if err := rows.Scan(&r.Queue, &r.Reason, &r.Count, &r.CountExact, &first, &last); err != nil {
			rows.Close()
			return err
		}
		if first != nil {
			r.FirstSeen, r.LastSeen = *first, *last
		}
		reasons = append(reasons, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	reasons = mergeReasons(reasons)
	if len(reasons) > o.Pairs {
		reasons, out.PairsCapped = reasons[:o.Pairs], true
	}
	var total int64
	exact := true
	for _, r := range reasons {
		total += r.Count
		r.CountExact = r.CountExact && r.Count <= int64(o.CountLimit)
		exact = exact && r.CountExact
		r.Count = min(r.Count, int64(o.CountLimit))
		out.Reasons = append(out.Reasons, r)
	}
	if len(out.Reasons) == 0 {
		out.Complete = true
		return nil
	}
	call, args = sqlapi.Call("dead_letter_sample", sqlapi.Arg("p_queue", "text", sqlapi.NullString(o.Queue)),
		sqlapi.Arg("p_sample", "integer", o.Sample), sqlapi.Arg("p_groups", "integer", o.Groups), sqlapi.Arg("p_pairs", "integer", o.Pairs))
	rows, err = db.Query(ctx, "SELECT queue, reason, signature, count, first_seen, last_seen, example, sampled FROM "+call, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var groups []DeadLetterGroup
	for rows.Next() {
		var g DeadLetterGroup
		var sampled int64
		if err := rows.Scan(&g.Queue, &g.Reason, &g.Signature, &g.Count, &g.FirstSeen, &g.LastSeen, &g.Example, &sampled); err != nil {
			return err
		}
		out.Sampled = max(out.Sampled, sampled)
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	out.Groups = append(out.Groups, mergeGroups(groups, o.Groups)...)
	out.Complete = exact && total <= int64(o.Sample) && !out.PairsCapped
	return nil
}

// mergeReasons adds up the counts of one (queue, reason), in (queue,
// reason) order, a dead letter without a reason ("") last in its queue as
// in the index. A count above the limit stays above it.
func mergeReasons(rs []DeadLetterReason) []DeadLetterReason {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if (a.Reason == "") != (b.Reason == "") {
			return b.Reason == ""
		}
		return a.Reason < b.Reason
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Queue == r.Queue && out[n-1].Reason == r.Reason {
			m := &out[n-1]
			m.Count += r.Count
			m.CountExact = m.CountExact && r.CountExact
			if !r.FirstSeen.IsZero() && (m.FirstSeen.IsZero() || r.FirstSeen.Before(m.FirstSeen)) {
				m.FirstSeen = r.FirstSeen
			}
			if r.LastSeen.After(m.LastSeen) {
				m.LastSeen = r.LastSeen
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// CountBulk counts the jobs Bulk would act on for f, up to limit (0: no
// bound): the number a bulk confirmation names. With an error signature it
// reads each job its other filters select (the signature has no index):
// for a confirmation, not a page that refreshes.
func (c *Client) CountBulk(ctx context.Context, f BulkFilter, limit int) (int64, error) {
	return c.countMatching(ctx, "count bulk jobs", f.ListParams, f.ErrorSignature, limit)
}
