package ops_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestDeadLetters: exact counts per queue and reason, the most recent
// dead letters (by when they were dead-lettered, not by id) grouped by
// signature, the sample's bound, the counts' limit, and a group's count and
// replay covering the dead letters outside the sample.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	o := ops.New(pool, ops.WithClock(clock))

	s, err := o.DeadLetters(ctx, ops.DeadLetterOptions{})
	require.NoError(t, err)
	require.Equal(t, ops.DeadLetterSummary{Reasons: []ops.DeadLetterReason{}, Groups: []ops.DeadLetterGroup{}, Complete: true}, s)

	// mail: 6 "order N failed" (max_attempts), dead-lettered at minutes
	// 1..6 but inserted newest first (the newest id is the oldest dead
	// letter); 2 "smtp down" (non_retryable) at minutes 10 and 11. sms: 3
	// dead letters at minutes 20..22 and one without reason (by hand) at
	// minute 5. A completed and a pending job besides.
	_, err = pool.Exec(ctx, `
INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason)
SELECT 'mail', 'dead_lettered', 1, $1, $1, $1::timestamptz + (7 - i) * interval '1 minute', 'order ' || (100 + i) || ' failed', 'max_attempts'
FROM generate_series(1, 6) AS i`, now)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason) VALUES
 ('mail', 'dead_lettered', 1, $1, $1, $1::timestamptz + interval '10 minutes', 'smtp down', 'non_retryable'),
 ('mail', 'dead_lettered', 1, $1, $1, $1::timestamptz + interval '11 minutes', 'smtp down', 'non_retryable'),
 ('sms', 'dead_lettered', 1, $1, $1, $1::timestamptz + interval '20 minutes', 'gateway 42 timeout', 'deadline'),
 ('sms', 'dead_lettered', 1, $1, $1, $1::timestamptz + interval '21 minutes', 'gateway 43 timeout', 'deadline'),
 ('sms', 'dead_lettered', 1, $1, $1, $1::timestamptz + interval '22 minutes', 'gateway 44 timeout', 'deadline'),
 ('sms', 'dead_lettered', 1, $1, $1, $1::timestamptz + interval '5 minutes', 'by hand', NULL),
 ('sms', 'completed', 1, $1, $1, $1, NULL, NULL),
 ('sms', 'pending', 0, $1, $1, NULL, NULL, NULL)`, now)
	require.NoError(t, err)
	at := func(min int) time.Time { return now.Add(time.Duration(min) * time.Minute) }

	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{})
	require.NoError(t, err)
	require.True(t, s.Complete)
	require.EqualValues(t, 12, s.Sampled)
	utc := func(rs []ops.DeadLetterReason) []ops.DeadLetterReason {
		for i := range rs {
			rs[i].FirstSeen, rs[i].LastSeen = rs[i].FirstSeen.UTC(), rs[i].LastSeen.UTC()
		}
		return rs
	}
	require.Equal(t, []ops.DeadLetterReason{
		{Queue: "mail", Reason: "max_attempts", Count: 6, CountExact: true, FirstSeen: at(1), LastSeen: at(6)},
		{Queue: "mail", Reason: "non_retryable", Count: 2, CountExact: true, FirstSeen: at(10), LastSeen: at(11)},
		{Queue: "sms", Reason: "deadline", Count: 3, CountExact: true, FirstSeen: at(20), LastSeen: at(22)},
		{Queue: "sms", Reason: "", Count: 1, CountExact: true, FirstSeen: at(5), LastSeen: at(5)},
	}, utc(s.Reasons))
	groups := func(gs []ops.DeadLetterGroup) []string {
		out := []string{}
		for _, g := range gs {
			out = append(out, fmt.Sprintf("%s/%s/%s: %d %s..%s %s", g.Queue, g.Reason, g.Signature, g.Count,
				g.FirstSeen.UTC().Format("15:04"), g.LastSeen.UTC().Format("15:04"), g.Example))
		}
		return out
	}
	require.Equal(t, []string{
		"mail/max_attempts/order N failed: 6 00:01..00:06 order 101 failed",
		"sms/deadline/gateway N timeout: 3 00:20..00:22 gateway 44 timeout",
		"mail/non_retryable/smtp down: 2 00:10..00:11 smtp down",
		"sms//by hand: 1 00:05..00:05 by hand",
	}, groups(s.Groups))

	// The four most recent: sms' three and mail's smtp at 00:11.
	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Sample: 4})
	require.NoError(t, err)
	require.False(t, s.Complete)
	require.EqualValues(t, 4, s.Sampled)
	require.Len(t, s.Reasons, 4, "the counts stay exact")
	require.Equal(t, []string{
		"sms/deadline/gateway N timeout: 3 00:20..00:22 gateway 44 timeout",
		"mail/non_retryable/smtp down: 1 00:11..00:11 smtp down",
	}, groups(s.Groups))

	// One queue; the two most recent of mail are the smtp ones; at most
	// one group.
	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Queue: "mail", Sample: 3, Groups: 1})
	require.NoError(t, err)
	require.False(t, s.Complete)
	require.EqualValues(t, 3, s.Sampled)
	require.Len(t, s.Reasons, 2)
	require.Equal(t, []string{"mail/non_retryable/smtp down: 2 00:10..00:11 smtp down"}, groups(s.Groups))

	// The counts' limit: more than 5 max_attempts in mail; the sample,
	// large enough for every dead letter, is not known to be complete.
	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Queue: "mail", CountLimit: 5, Sample: 100})
	require.NoError(t, err)
	require.Equal(t, ops.DeadLetterReason{Queue: "mail", Reason: "max_attempts", Count: 5, CountExact: false,
		FirstSeen: at(1), LastSeen: at(6)}, utc(s.Reasons)[0])
	require.True(t, s.Reasons[1].CountExact)
	require.False(t, s.Complete)
	require.EqualValues(t, 8, s.Sampled)

	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Queue: "nobody"})
	require.NoError(t, err)
	require.Empty(t, s.Reasons)
	require.True(t, s.Complete)

	_, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Sample: -1})
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	// A group sampled with one dead letter (Sample 4 above: mail's
	// "order N failed" was outside it) counts and replays all of its jobs.
	f := ops.BulkFilter{ListParams: ops.ListParams{Queue: "mail", DeadLetterReason: "max_attempts",
		Statuses: []client.Status{client.StatusDeadLettered}}, ErrorSignature: "order N failed"}
	n, err := o.CountBulk(ctx, f, 0)
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
	n, err = o.CountBulk(ctx, f, 4)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "bounded by limit")
	n, err = o.CountBulk(ctx, ops.BulkFilter{ListParams: ops.ListParams{Queue: "sms", Statuses: []client.Status{client.StatusDeadLettered}}}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "without a signature: CountJobs")
	out, err := o.Bulk(ctx, ops.BulkReplay, f, 0)
	require.NoError(t, err)
	require.Len(t, out, 6)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs
		WHERE queue = 'mail' AND status = 'dead_lettered' AND dead_letter_reason = 'max_attempts'`).Scan(&left))
	require.Zero(t, left)
	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Queue: "mail"})
	require.NoError(t, err)
	require.Len(t, s.Reasons, 1, "replayed jobs leave the index")
}

// TestDeadLettersWithoutJIT: the summary runs with JIT compilation off
// even where every statement would be compiled (a jit_above_cost of 20 in the
// client's session): its functions turn it off for their own statements,
// and the session keeps its own setting. On a server
// whose llvmjit cannot load libLLVM (CI's PostgreSQL 15 image) a compiled
// summary fails with SQLSTATE 58P01.
func TestDeadLettersWithoutJIT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.NewURL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1 // one session: the settings below hold for every call
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	o := ops.New(pool)
	// Enough rows that the statements inside the reads cost more than the
	// threshold below.
	_, err = pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason)
		SELECT 'mail', 'dead_lettered', 1, now(), now(), now() - i * interval '1 second', 'smtp down', 'max_attempts'
		FROM generate_series(1, 2000) AS i`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE backoff.jobs")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "SET jit = on")
	require.NoError(t, err)
	// Above the cost of the call itself (a function scan: about 10), which
	// the session plans with its own settings; below the statements the
	// functions run, which they plan with jit off.
	_, err = pool.Exec(ctx, "SET jit_above_cost = 20")
	require.NoError(t, err)

	s, err := o.DeadLetters(ctx, ops.DeadLetterOptions{})
	require.NoError(t, err)
	require.Len(t, s.Groups, 1)
	// SHOW is not planned, so not compiled either.
	var jit, above string
	require.NoError(t, pool.QueryRow(ctx, "SHOW jit").Scan(&jit))
	require.NoError(t, pool.QueryRow(ctx, "SHOW jit_above_cost").Scan(&above))
	require.Equal(t, []string{"on", "20"}, []string{jit, above}, "the session's own settings are back")
}

// TestDeadLettersPairsCapped: with more (queue, reason) pairs than Pairs,
// the summary counts and samples the first ones in (queue, reason) order
// and says so.
func TestDeadLettersPairsCapped(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	o := ops.New(pool)
	_, err := pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason)
		SELECT 'q' || (i % 5), 'dead_lettered', 1, now(), now(), now() - i * interval '1 second', 'failed', 'max_attempts'
		FROM generate_series(1, 20) AS i`)
	require.NoError(t, err)
	s, err := o.DeadLetters(ctx, ops.DeadLetterOptions{Pairs: 3})
	require.NoError(t, err)
	require.True(t, s.PairsCapped)
	require.False(t, s.Complete)
	require.Len(t, s.Reasons, 3)
	for i, r := range s.Reasons {
		require.Equal(t, fmt.Sprintf("q%d", i), r.Queue)
		require.Equal(t, int64(4), r.Count)
	}
	require.Equal(t, int64(12), s.Sampled, "the sample is drawn from those pairs")
	s, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Pairs: 5})
	require.NoError(t, err)
	require.False(t, s.PairsCapped)
	require.True(t, s.Complete)
	require.Len(t, s.Reasons, 5)
	_, err = o.DeadLetters(ctx, ops.DeadLetterOptions{Pairs: -1})
	require.ErrorIs(t, err, client.ErrInvalidArgument)
}
