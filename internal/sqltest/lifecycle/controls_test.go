package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// queueState is a row of backoff.queue_state.
type queueState struct {
	Queue       string     `db:"queue"`
	State       string     `db:"state"`
	OpenedAt    *time.Time `db:"opened_at"`
	Failures    int64      `db:"failures"`
	ProbesLeft  *int32     `db:"probes_left"`
	Rate        *float64   `db:"rate"`
	Burst       *int32     `db:"burst"`
	Tokens      *float64   `db:"tokens"`
	NextClaimAt *time.Time `db:"next_claim_at"`
}

func stateOf(t testing.TB, q querier, queue string, now time.Time) queueState {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT * FROM backoff.queue_state($1, $2)`, queue, now)
	require.NoError(t, err)
	s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[queueState])
	require.NoError(t, err)
	return s
}

// useBreaker gives queue a policy (usePolicy: fixed 10 s retries, 3
// attempts, lease 1 minute) and a breaker: 3 failures in 30 s open it for
// 1 minute, then probes jobs are let through.
func useBreaker(t *testing.T, q querier, queue string, probes int) {
	t.Helper()
	usePolicy(t, q, queue)
	exec(t, q, `UPDATE backoff.queues SET breaker_failures = 3, breaker_window = '30 seconds',
		breaker_cooldown = '1 minute', breaker_probes = $2 WHERE name = $1`, queue, probes)
}

func failJob(t testing.TB, q querier, j job, now time.Time) job {
	t.Helper()
	return one(t, q, `SELECT * FROM backoff.fail($1, $2, 'downstream 503', p_now => $3)`, j.ID, j.Attempts, now)
}

func completeJob(t testing.TB, q querier, j job, now time.Time) {
	t.Helper()
	exec(t, q, `SELECT backoff.complete($1, $2, $3)`, j.ID, j.Attempts, now)
}

// TestBreakerOpenHalfOpenClosed drives one breaker on a simulated clock:
// closed -> open at the third failure in the window -> nothing claimed for
// the cooldown, waiting jobs untouched -> half open: exactly the probes ->
// a success closes it, and the failures that opened it no longer count.
func TestBreakerOpenHalfOpenClosed(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	useBreaker(t, db, "api", 1)
	for i := 0; i < 8; i++ {
		enqueue(t, db, "api", t0)
	}

	s := stateOf(t, db, "api", t0)
	require.Equal(t, queueState{Queue: "api", State: "closed"}, s)

	// Two failures: still closed, both counted.
	failJob(t, db, claimOne(t, db, "api", at(1*time.Second)), at(1*time.Second))
	failJob(t, db, claimOne(t, db, "api", at(2*time.Second)), at(2*time.Second))
	s = stateOf(t, db, "api", at(2*time.Second))
	require.Equal(t, "closed", s.State)
	require.EqualValues(t, 2, s.Failures)
	require.EqualValues(t, 0, stateOf(t, db, "api", at(33*time.Second)).Failures, "out of the window")

	// The third opens it; a job that was running when it opened still fails
	// without extending the outage.
	running := claimOne(t, db, "api", at(3*time.Second))
	third := failJob(t, db, claimOne(t, db, "api", at(3*time.Second)), at(3*time.Second))
	require.Equal(t, "retrying", third.Status, "the failed job itself follows its policy")
	s = stateOf(t, db, "api", at(3*time.Second))
	require.Equal(t, "open", s.State)
	require.True(t, s.OpenedAt.Equal(at(3*time.Second)), "opened_at %v", s.OpenedAt)
	require.True(t, s.NextClaimAt.Equal(at(63*time.Second)), "next_claim_at %v", s.NextClaimAt)
	failJob(t, db, running, at(10*time.Second))
	require.True(t, stateOf(t, db, "api", at(10*time.Second)).OpenedAt.Equal(at(3*time.Second)))

	// Open: claim gives nothing, and the waiting jobs are not failed or moved.
	before := jobs(t, db, `SELECT * FROM backoff.jobs WHERE queue = 'api' ORDER BY id`)
	for _, now := range []time.Duration{4 * time.Second, 30 * time.Second, 62 * time.Second} {
		require.Empty(t, claim(t, db, "api", "w", 10, at(now)), "open at %v", now)
	}
	require.Equal(t, before, jobs(t, db, `SELECT * FROM backoff.jobs WHERE queue = 'api' ORDER BY id`))

	// Half open after the cooldown: one probe in total, however asked.
	s = stateOf(t, db, "api", at(63*time.Second))
	require.Equal(t, "half_open", s.State)
	require.Equal(t, ptr(int32(1)), s.ProbesLeft)
	require.Nil(t, s.NextClaimAt)
	probe := claim(t, db, "api", "w", 10, at(63*time.Second))
	require.Len(t, probe, 1)
	require.Empty(t, claim(t, db, "api", "w", 10, at(64*time.Second)))
	s = stateOf(t, db, "api", at(64*time.Second))
	require.Equal(t, "half_open", s.State)
	require.Equal(t, ptr(int32(0)), s.ProbesLeft)
	require.Nil(t, s.NextClaimAt, "waiting for a result has no end time")

	// A success closes it; the old failures are forgotten.
	completeJob(t, db, probe[0], at(65*time.Second))
	s = stateOf(t, db, "api", at(65*time.Second))
	require.Equal(t, queueState{Queue: "api", State: "closed"}, s)
	require.Len(t, claim(t, db, "api", "w", 2, at(66*time.Second)), 2)
	failJob(t, db, claimOne(t, db, "api", at(67*time.Second)), at(67*time.Second))
	require.EqualValues(t, 1, stateOf(t, db, "api", at(67*time.Second)).Failures)
	require.Equal(t, "closed", stateOf(t, db, "api", at(67*time.Second)).State)
}

// TestBreakerHalfOpenFailureReopens: a failure while half open opens the
// breaker again from that moment, and complete_many closes a half-open one.
func TestBreakerHalfOpenFailureReopens(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	useBreaker(t, db, "api", 2)
	for i := 0; i < 8; i++ {
		enqueue(t, db, "api", t0)
	}
	for i := 1; i <= 3; i++ {
		failJob(t, db, claimOne(t, db, "api", at(time.Duration(i)*time.Second)), at(time.Duration(i)*time.Second))
	}
	require.Equal(t, "open", stateOf(t, db, "api", at(4*time.Second)).State)

	probes := claim(t, db, "api", "w", 10, at(70*time.Second))
	require.Len(t, probes, 2)
	failJob(t, db, probes[0], at(71*time.Second))
	s := stateOf(t, db, "api", at(71*time.Second))
	require.Equal(t, "open", s.State)
	require.True(t, s.OpenedAt.Equal(at(71*time.Second)), "reopened at the failure, got %v", s.OpenedAt)
	require.True(t, s.NextClaimAt.Equal(at(131*time.Second)), "next_claim_at %v", s.NextClaimAt)
	require.Empty(t, claim(t, db, "api", "w", 10, at(130*time.Second)))

	// Half open again with a fresh set of probes; complete_many closes it.
	probes = claim(t, db, "api", "w", 10, at(131*time.Second))
	require.Len(t, probes, 2)
	done := scalar[[]int64](t, db, `SELECT array_agg(c) FROM backoff.complete_many($1, $2, $3) AS c`,
		[]int64{probes[0].ID}, []int32{probes[0].Attempts}, at(132*time.Second))
	require.Equal(t, []int64{probes[0].ID}, done)
	require.Equal(t, "closed", stateOf(t, db, "api", at(132*time.Second)).State)
	require.Len(t, claim(t, db, "api", "w", 10, at(132*time.Second)), 5, "closed: every due job (8, one completed, two probes still running)")
}

// TestBreakerReapedProbeIsReplaced: a probe whose worker died gives no
// result; once it is reaped (and nothing else is out), the half-open
// breaker hands out a new probe instead of staying shut for good.
func TestBreakerReapedProbeIsReplaced(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	useBreaker(t, db, "api", 1)
	for i := 0; i < 6; i++ {
		enqueue(t, db, "api", t0)
	}
	for i := 1; i <= 3; i++ {
		failJob(t, db, claimOne(t, db, "api", at(time.Duration(i)*time.Second)), at(time.Duration(i)*time.Second))
	}
	probe := claim(t, db, "api", "w", 10, at(2*time.Minute))
	require.Len(t, probe, 1)
	require.Empty(t, claim(t, db, "api", "w", 10, at(2*time.Minute+30*time.Second)), "the probe is still running")
	require.EqualValues(t, 1, scalar[int32](t, db, `SELECT backoff.reap($1)`, at(4*time.Minute)))
	require.Equal(t, "half_open", stateOf(t, db, "api", at(4*time.Minute)).State, "a lease expiry is no result")
	again := claim(t, db, "api", "w", 10, at(4*time.Minute))
	require.Len(t, again, 1, "a new probe")
	require.Empty(t, claim(t, db, "api", "w", 10, at(4*time.Minute)))
	completeJob(t, db, again[0], at(4*time.Minute))
	require.Equal(t, "closed", stateOf(t, db, "api", at(4*time.Minute)).State)
}

// TestBreakerCountsFailsNotLeaseExpiries: failures apart by more than the
// window never open it; reap's lease expiries do not count.
func TestBreakerCountsFailsNotLeaseExpiries(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	useBreaker(t, db, "api", 1)
	for i := 0; i < 10; i++ {
		enqueue(t, db, "api", t0)
	}
	for i := 0; i < 6; i++ { // one failure every 20 s: at most 2 in any 30 s
		now := at(time.Duration(i) * 20 * time.Second)
		failJob(t, db, claimOne(t, db, "api", now), now)
	}
	require.Equal(t, "closed", stateOf(t, db, "api", at(100*time.Second)).State)
	// The log holds about one window: fail prunes what no longer counts.
	require.LessOrEqual(t, scalar[int64](t, db, `SELECT count(*) FROM backoff.queue_failures`), int64(3))

	// Three lease expiries in a row: reap does not count them.
	for i := 0; i < 3; i++ {
		claimOne(t, db, "api", at(200*time.Second))
	}
	require.EqualValues(t, 3, scalar[int32](t, db, `SELECT backoff.reap($1)`, at(300*time.Second)))
	s := stateOf(t, db, "api", at(300*time.Second))
	require.Equal(t, "closed", s.State)
	require.EqualValues(t, 0, s.Failures)
}

// TestBreakerIgnoresNonRetryableFailures: a producer that enqueues jobs its
// worker refuses as bad input (fail with p_retryable false) cannot hold the
// queue's breaker open; only retryable failures say something about the
// downstream. A half-open probe refused as bad input neither reopens nor
// closes it: the next claim gets another probe.
func TestBreakerIgnoresNonRetryableFailures(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	useBreaker(t, db, "api", 1)
	for i := 0; i < 10; i++ {
		enqueue(t, db, "api", t0)
	}
	failBadInput := func(j job, now time.Time) {
		exec(t, db, `SELECT backoff.fail($1, $2, 'bad request', p_retryable => false, p_now => $3)`, j.ID, j.Attempts, now)
	}
	for i := 0; i < 3; i++ {
		failBadInput(claimOne(t, db, "api", at(time.Second)), at(time.Second))
	}
	s := stateOf(t, db, "api", at(time.Second))
	require.Equal(t, "closed", s.State, "three jobs refused as bad input opened the breaker")
	require.EqualValues(t, 0, s.Failures)
	claimOne(t, db, "api", at(2*time.Second)) // still claims

	// Retryable failures still open it; a probe refused as bad input leaves
	// it half open, and the next claim gets a new probe.
	for i := 0; i < 3; i++ {
		failJob(t, db, claimOne(t, db, "api", at(3*time.Second)), at(3*time.Second))
	}
	require.Equal(t, "open", stateOf(t, db, "api", at(3*time.Second)).State)
	probe := claimOne(t, db, "api", at(2*time.Minute))
	failBadInput(probe, at(2*time.Minute))
	require.Equal(t, "half_open", stateOf(t, db, "api", at(2*time.Minute)).State)
	next := claimOne(t, db, "api", at(2*time.Minute+time.Second))
	require.NotEqual(t, probe.ID, next.ID)
	failJob(t, db, next, at(2*time.Minute+time.Second))
	require.Equal(t, "open", stateOf(t, db, "api", at(2*time.Minute+time.Second)).State, "a retryable probe failure reopens it")
}

// TestHalfOpenProbesAreExactUnderConcurrency: several connections claim a
// half-open queue at the same moment; exactly breaker_probes jobs are
// handed out in total.
func TestHalfOpenProbesAreExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const (
		claimers = 8
		probes   = 3
	)
	url := testdbURL(t)
	db := poolOn(t, url)
	useBreaker(t, db, "api", probes)
	for i := 0; i < 50; i++ {
		enqueue(t, db, "api", t0)
	}
	for round := 0; round < 5; round++ {
		// Open the breaker (3 failures), then claim at once after the cooldown.
		base := at(time.Duration(round) * time.Hour)
		exec(t, db, `UPDATE backoff.jobs SET status = 'pending', attempts = 0, lease_until = NULL, locked_by = NULL,
			run_at = $1 WHERE queue = 'api'`, base)
		for i := 1; i <= 3; i++ {
			now := base.Add(time.Duration(i) * time.Second)
			failJob(t, db, claimOne(t, db, "api", now), now)
		}
		require.Equal(t, "open", stateOf(t, db, "api", base.Add(4*time.Second)).State)
		halfOpen := base.Add(2 * time.Minute)

		total := claimAtOnce(t, url, claimers, func(i int, c *pgx.Conn) ([]job, error) {
			return queryJobs(c, `SELECT * FROM backoff.claim('api', $1, 2, p_now => $2)`, "w"+string(rune('a'+i)), halfOpen)
		})
		// A claimer that finds the state row locked gets nothing rather than
		// waiting, so the concurrent round may hand out fewer; never more,
		// and the claims after it hand out the rest, exactly.
		require.LessOrEqual(t, total, probes, "round %d: jobs handed out while half open", round)
		for i := 0; i < probes; i++ {
			total += len(claim(t, db, "api", "late", 2, halfOpen))
		}
		require.Equal(t, probes, total, "round %d: jobs handed out while half open", round)
		require.Equal(t, ptr(int32(0)), stateOf(t, db, "api", halfOpen).ProbesLeft)
		require.EqualValues(t, probes, scalar[int64](t, db, `SELECT count(*) FROM backoff.jobs WHERE queue = 'api' AND status = 'running'`))
		// Close it for the next round.
		r := jobs(t, db, `SELECT * FROM backoff.jobs WHERE queue = 'api' AND status = 'running' LIMIT 1`)
		completeJob(t, db, r[0], halfOpen)
		require.Equal(t, "closed", stateOf(t, db, "api", halfOpen).State)
	}
}

// TestRateLimitExactUnderConcurrency: several connections claim a
// rate-limited queue at the same moment; together they get exactly the
// bucket's whole tokens, however they are asked.
func TestRateLimitExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const claimers = 8
	url := testdbURL(t)
	db := poolOn(t, url)
	usePolicy(t, db, "hooks")
	exec(t, db, `UPDATE backoff.queues SET rate = 0.001, burst = 5 WHERE name = 'hooks'`)
	// The bucket's slots exist (the first claims create them), full: a
	// claim that finds no due job takes nothing.
	require.Empty(t, claim(t, db, "hooks", "w", 3, t0))
	require.EqualValues(t, 5, scalar[int64](t, db, `SELECT count(*) FROM backoff.queue_tokens WHERE queue = 'hooks'`))
	for i := 0; i < 50; i++ {
		enqueue(t, db, "hooks", t0)
	}
	total := claimAtOnce(t, url, claimers, func(_ int, c *pgx.Conn) ([]job, error) {
		return queryJobs(c, `SELECT * FROM backoff.claim('hooks', 'w', 3, p_now => $1)`, t0)
	})
	// Each claimer takes free slots (none waits for a busy one) until its
	// limit; every slot it holds it uses, so together they get the burst.
	require.Equal(t, 5, total, "the burst, exactly")
	require.InDelta(t, 0, *stateOf(t, db, "hooks", t0).Tokens, 1e-9)
	require.Empty(t, claim(t, db, "hooks", "w", 3, t0), "nothing more than the burst")
}

// TestControlledClaimNeverWaits: a claimer holding a bucket slot, or the
// half-open breaker's state row, in an open transaction does not make
// another claimer wait: that one takes the other slots, or gets nothing
// now, at once; and concurrent claimers never get more than the burst.
func TestControlledClaimNeverWaits(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	db := poolOn(t, url)
	ctx := context.Background()
	usePolicy(t, db, "hooks")
	exec(t, db, `UPDATE backoff.queues SET rate = 0.001, burst = 4 WHERE name = 'hooks'`)
	require.Empty(t, claim(t, db, "hooks", "w", 1, t0)) // creates the 4 slots
	for i := 0; i < 10; i++ {
		enqueue(t, db, "hooks", t0)
	}
	holder := connOn(t, url)
	other := connOn(t, url)
	// A claim that waited for the holder's lock would fail with 55P03.
	_, err := other.Exec(ctx, `SET lock_timeout = '1s'`)
	require.NoError(t, err)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	require.Len(t, claim(t, tx, "hooks", "holder", 1, t0), 1, "holds one slot")

	require.Len(t, claim(t, other, "hooks", "other", 10, t0), 3, "the other slots' tokens")
	require.Empty(t, claim(t, other, "hooks", "other", 10, t0), "the holder's slot is skipped, the rest are empty")
	require.NoError(t, tx.Commit(ctx))
	require.Empty(t, claim(t, db, "hooks", "w", 10, t0), "4 in total: the burst")

	// burst 1: one slot; while it is held, a claim gets nothing, at once.
	usePolicy(t, db, "one")
	exec(t, db, `UPDATE backoff.queues SET rate = 0.001, burst = 1 WHERE name = 'one'`)
	require.Empty(t, claim(t, db, "one", "w", 1, t0))
	enqueue(t, db, "one", t0)
	enqueue(t, db, "one", t0)
	tx, err = holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT FROM backoff.queue_tokens WHERE queue = 'one' FOR UPDATE`)
	require.NoError(t, err)
	require.Empty(t, claim(t, other, "one", "other", 1, t0))
	require.NoError(t, tx.Rollback(ctx))
	require.Len(t, claim(t, other, "one", "other", 5, t0), 1)

	// A half-open breaker whose state row a probe's claim holds.
	useBreaker(t, db, "api", 2)
	for i := 0; i < 5; i++ {
		enqueue(t, db, "api", t0)
	}
	for i := 1; i <= 3; i++ {
		now := at(time.Duration(i) * time.Second)
		failJob(t, db, claimOne(t, db, "api", now), now)
	}
	halfOpen := at(2 * time.Minute)
	tx, err = holder.Begin(ctx)
	require.NoError(t, err)
	require.Len(t, claim(t, tx, "api", "holder", 1, halfOpen), 1, "one probe, the row held")
	require.Empty(t, claim(t, other, "api", "other", 5, halfOpen), "the row is busy: nothing now")
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, claim(t, other, "api", "other", 5, halfOpen), 1, "the other probe")
	require.Empty(t, claim(t, other, "api", "other", 5, halfOpen), "exactly breaker_probes")
}

// TestRateLimitTokenBucket: a bucket of burst tokens, refilled at rate per
// second on the simulated clock; claim returns fewer rows, never waits,
// and takes only the tokens of the jobs it claimed.
func TestRateLimitTokenBucket(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "hooks")
	exec(t, db, `UPDATE backoff.queues SET rate = 2, burst = 3 WHERE name = 'hooks'`)
	for i := 0; i < 20; i++ {
		enqueue(t, db, "hooks", t0)
	}
	s := stateOf(t, db, "hooks", t0)
	require.Equal(t, queueState{Queue: "hooks", State: "closed", Rate: ptr(2.0), Burst: ptr(int32(3)), Tokens: ptr(3.0)}, s)

	require.Len(t, claim(t, db, "hooks", "w", 10, t0), 3, "a full bucket: burst")
	require.Empty(t, claim(t, db, "hooks", "w", 10, t0), "empty bucket: no rows, no wait")
	s = stateOf(t, db, "hooks", t0)
	require.InDelta(t, 0, *s.Tokens, 1e-9)
	require.True(t, s.NextClaimAt.Equal(at(500*time.Millisecond)), "next token at +0.5 s, got %v", s.NextClaimAt)

	require.Empty(t, claim(t, db, "hooks", "w", 10, at(400*time.Millisecond)), "0.8 tokens")
	require.Len(t, claim(t, db, "hooks", "w", 10, at(500*time.Millisecond)), 1)
	require.Len(t, claim(t, db, "hooks", "w", 10, at(1500*time.Millisecond)), 2)
	require.Len(t, claim(t, db, "hooks", "w", 1, at(1750*time.Millisecond)), 0, "half a token")
	require.Len(t, claim(t, db, "hooks", "w", 10, at(time.Hour)), 3, "refill stops at burst")
	// A clock behind the bucket's adds nothing.
	require.Empty(t, claim(t, db, "hooks", "w", 10, at(time.Minute)))

	// Tokens not used for lack of due jobs stay in the bucket.
	usePolicy(t, db, "sparse")
	exec(t, db, `UPDATE backoff.queues SET rate = 1, burst = 5 WHERE name = 'sparse'`)
	enqueue(t, db, "sparse", t0)
	enqueue(t, db, "sparse", t0)
	require.Len(t, claim(t, db, "sparse", "w", 10, t0), 2)
	require.InDelta(t, 3, *stateOf(t, db, "sparse", t0).Tokens, 1e-9)
	require.Empty(t, claim(t, db, "sparse", "w", 10, t0))
	require.InDelta(t, 3, *stateOf(t, db, "sparse", t0).Tokens, 1e-9, "an empty queue takes no token")

	// A NULL burst is greatest(1, ceil(rate)); a pause has no next claim time.
	exec(t, db, `UPDATE backoff.queues SET rate = 0.25, burst = NULL WHERE name = 'sparse'`)
	s = stateOf(t, db, "sparse", t0)
	require.Equal(t, ptr(int32(1)), s.Burst)
	require.InDelta(t, 1, *s.Tokens, 1e-9)
	// A huge rate without a burst: the bucket size stays an integer.
	exec(t, db, `UPDATE backoff.queues SET rate = 1e300, burst = NULL WHERE name = 'sparse'`)
	require.Equal(t, ptr(int32(2147483647)), stateOf(t, db, "sparse", t0).Burst)
	enqueue(t, db, "sparse", t0)
	require.Len(t, claim(t, db, "sparse", "w", 10, at(time.Hour)), 1)
	exec(t, db, `SELECT backoff.pause_queue('hooks')`)
	s = stateOf(t, db, "hooks", at(time.Minute))
	require.Nil(t, s.NextClaimAt)
	require.Empty(t, claim(t, db, "hooks", "w", 10, at(2*time.Hour)), "paused")
}

// TestRateAndBreakerTogether: a half-open breaker and a bucket both bound
// one claim; only the probes are taken from the bucket.
func TestRateAndBreakerTogether(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	useBreaker(t, db, "api", 2)
	exec(t, db, `UPDATE backoff.queues SET rate = 1000 WHERE name = 'api'`)
	for i := 0; i < 10; i++ {
		enqueue(t, db, "api", t0)
	}
	for i := 1; i <= 3; i++ {
		failJob(t, db, claimOne(t, db, "api", at(time.Duration(i)*time.Second)), at(time.Duration(i)*time.Second))
	}
	require.Empty(t, claim(t, db, "api", "w", 10, at(10*time.Second)))
	require.Len(t, claim(t, db, "api", "w", 10, at(2*time.Minute)), 2)
	require.InDelta(t, 998, *stateOf(t, db, "api", at(2*time.Minute)).Tokens, 1e-9)
}

// TestLeaseExpiryBudget: max_lease_expiries dead-letters a job whose lease
// expired that many times, through reap, and not before; the count is kept
// by reap only and a replay gives a fresh budget.
func TestLeaseExpiryBudget(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "oom")
	exec(t, db, `UPDATE backoff.policies SET max_lease_expiries = 2, max_attempts = 10 WHERE name = 'p_oom'`)
	id := enqueue(t, db, "oom", t0)

	// A handled failure does not count.
	j := claimOne(t, db, "oom", t0)
	require.Equal(t, "retrying", failJob(t, db, j, t0).Status)
	require.EqualValues(t, 0, get(t, db, id).LeaseExpiries)

	claimOne(t, db, "oom", at(time.Minute))
	require.EqualValues(t, 1, scalar[int32](t, db, `SELECT backoff.reap($1)`, at(3*time.Minute)))
	j = get(t, db, id)
	require.Equal(t, "retrying", j.Status, "one expiry of two")
	require.EqualValues(t, 1, j.LeaseExpiries)

	claimOne(t, db, "oom", at(10*time.Minute))
	require.EqualValues(t, 1, scalar[int32](t, db, `SELECT backoff.reap($1)`, at(12*time.Minute)))
	j = get(t, db, id)
	require.Equal(t, "dead_lettered", j.Status)
	require.Equal(t, ptr("lease_expiries"), j.DeadLetterReason)
	require.EqualValues(t, 2, j.LeaseExpiries)
	require.True(t, j.CompletedAt.Equal(at(12*time.Minute)))
	last := j.Errors[len(j.Errors)-1]
	require.Equal(t, "lease_expired", last.Kind)
	require.Equal(t, "lease expired", last.Error)
	require.EqualValues(t, j.Attempts, last.Attempt)

	// A replay starts a fresh budget.
	j = one(t, db, `SELECT * FROM backoff.replay($1, $2)`, id, at(time.Hour))
	require.EqualValues(t, 0, j.LeaseExpiries)

	// Order: non_retryable first, then lease_expiries, then max_attempts.
	exec(t, db, `UPDATE backoff.policies SET max_attempts = 1 WHERE name = 'p_oom'`)
	exec(t, db, `UPDATE backoff.jobs SET lease_expiries = 1 WHERE id = $1`, id)
	claimOne(t, db, "oom", at(time.Hour))
	exec(t, db, `SELECT backoff.reap($1)`, at(2*time.Hour))
	require.Equal(t, ptr("lease_expiries"), get(t, db, id).DeadLetterReason, "both budgets spent: the expiry names it")

	// Without the key (NULL) expiries are ordinary failures, as before.
	usePolicy(t, db, "plain")
	id2 := enqueue(t, db, "plain", t0)
	for i := 0; i < 3; i++ {
		claimOne(t, db, "plain", at(time.Duration(i)*time.Hour))
		exec(t, db, `SELECT backoff.reap($1)`, at(time.Duration(i)*time.Hour+2*time.Minute))
	}
	j = get(t, db, id2)
	require.Equal(t, ptr("max_attempts"), j.DeadLetterReason)
	require.EqualValues(t, 3, j.LeaseExpiries)
}

// TestQueueControlSettings: the CHECK constraints refuse what the
// contract forbids, and queue_state names bad arguments.
func TestQueueControlSettings(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q")
	for _, bad := range []string{
		`UPDATE backoff.queues SET rate = 0`,
		`UPDATE backoff.queues SET rate = -1`,
		`UPDATE backoff.queues SET rate = 'NaN'`,
		`UPDATE backoff.queues SET rate = 'Infinity'`,
		`UPDATE backoff.queues SET burst = 0`,
		`UPDATE backoff.queues SET breaker_failures = 0, breaker_window = '1s', breaker_cooldown = '1s'`,
		`UPDATE backoff.queues SET breaker_failures = 3`,
		`UPDATE backoff.queues SET breaker_failures = 3, breaker_window = '1s'`,
		`UPDATE backoff.queues SET breaker_failures = 3, breaker_window = '0s', breaker_cooldown = '1s'`,
		`UPDATE backoff.queues SET breaker_failures = 3, breaker_window = '1s', breaker_cooldown = '-1s'`,
		`UPDATE backoff.queues SET breaker_probes = 0`,
		`UPDATE backoff.policies SET max_lease_expiries = 0`,
	} {
		requireCode(t, execErr(db, bad), "23514")
	}
	requireCode(t, execErr(db, `SELECT * FROM backoff.queue_state('')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.queue_state(NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.queue_state('q', 'infinity')`), "22023")
	s := stateOf(t, db, "never-seen", t0)
	require.Equal(t, queueState{Queue: "never-seen", State: "closed"}, s)
}

// TestBreakerFailNeverWaits: a fail of a breaker queue never waits for the
// breaker's state row: at the threshold while another fail is opening it
// (creating the row, or updating it), or while half open with a claim
// handing out probes; in the last case the failure is logged and the next
// claim reopens the breaker from it.
func TestBreakerFailNeverWaits(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	db := poolOn(t, url)
	ctx := context.Background()
	holder := connOn(t, url)
	other := connOn(t, url)
	// A fail that waited for the holder's lock would fail with 55P03.
	_, err := other.Exec(ctx, `SET lock_timeout = '1s'`)
	require.NoError(t, err)
	useBreaker(t, db, "api", 2)
	for i := 0; i < 12; i++ {
		enqueue(t, db, "api", t0)
	}

	for round, base := range []time.Time{t0, at(time.Hour)} {
		// Pass 0: no state row yet (the opener creates it); pass 1: a
		// closed row (the opener updates it).
		for i := 1; i <= 2; i++ {
			now := base.Add(time.Duration(i) * time.Second)
			failJob(t, db, claimOne(t, db, "api", now), now)
		}
		now := base.Add(3 * time.Second)
		a, b := claimOne(t, db, "api", now), claimOne(t, db, "api", now)
		tx, err := holder.Begin(ctx)
		require.NoError(t, err)
		failJob(t, tx, a, now) // opens it, uncommitted
		failJob(t, other, b, now)
		require.NoError(t, tx.Commit(ctx))
		s := stateOf(t, db, "api", now)
		require.Equal(t, "open", s.State, "round %d", round)
		require.True(t, s.OpenedAt.Equal(now), "round %d: opened_at %v", round, s.OpenedAt)
		if round == 0 {
			// Close it for the next round: a probe succeeds.
			halfOpen := now.Add(2 * time.Minute)
			completeJob(t, db, claimOne(t, db, "api", halfOpen), halfOpen)
			require.Equal(t, "closed", stateOf(t, db, "api", halfOpen).State)
		}
	}

	// Half open: a probe fails while another claim holds the state row.
	halfOpen := at(time.Hour + 3*time.Minute)
	probe := claimOne(t, db, "api", halfOpen)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	require.Len(t, claim(t, tx, "api", "holder", 1, halfOpen), 1, "the second probe, the row held")
	failed := halfOpen.Add(time.Second)
	failJob(t, other, probe, failed)
	require.NoError(t, tx.Commit(ctx))
	require.Empty(t, claim(t, db, "api", "w", 5, halfOpen.Add(2*time.Second)), "the logged failure reopens it")
	s := stateOf(t, db, "api", halfOpen.Add(2*time.Second))
	require.Equal(t, "open", s.State)
	require.True(t, s.OpenedAt.Equal(failed), "opened_at %v", s.OpenedAt)
	require.Zero(t, s.Failures, "the failure that reopened it does not count again")
}

// TestPruneQueueControlState: prune removes the controls' runtime state
// that nothing reads any more (docs/adr/0054): the failure log, breaker row
// and token slots of a queue whose backoff.queues row is gone or whose
// breaker and rate were removed, the token slots a smaller burst no longer
// uses, and the log rows older than a configured breaker's window; it keeps
// what a breaker still reads (the window, and while open the failures a
// half-open reopen is made from). Up to p_limit rows of each table per
// call; the result still counts jobs only.
func TestPruneQueueControlState(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// "gone" and "off": a breaker opened by three failures and a bucket of
	// 16 slots, then the queue row deleted / the controls removed.
	for _, q := range []string{"gone", "off"} {
		useBreaker(t, db, q, 1)
		exec(t, db, `UPDATE backoff.queues SET rate = 100 WHERE name = $1`, q)
		for i := 1; i <= 3; i++ {
			enqueue(t, db, q, t0)
			now := at(time.Duration(i) * time.Second)
			failJob(t, db, claimOne(t, db, q, now), now)
		}
		require.Equal(t, "open", stateOf(t, db, q, at(4*time.Second)).State)
	}
	exec(t, db, `DELETE FROM backoff.queues WHERE name = 'gone'`)
	exec(t, db, `UPDATE backoff.queues SET rate = NULL, breaker_failures = NULL, breaker_window = NULL,
		breaker_cooldown = NULL WHERE name = 'off'`)
	// "on": a 30 s window and 16 slots (burst 20), then burst 4 (4 slots).
	useBreaker(t, db, "on", 1)
	exec(t, db, `UPDATE backoff.queues SET rate = 10, burst = 20 WHERE name = 'on'`)
	enqueue(t, db, "on", t0)
	claimOne(t, db, "on", t0)
	exec(t, db, `UPDATE backoff.queues SET burst = 4 WHERE name = 'on'`)
	exec(t, db, `INSERT INTO backoff.queue_failures VALUES ('on', $1), ('on', $2), ('on', $3)`,
		at(time.Second), at(79*time.Second), at(100*time.Second))
	// "open": opened at 3 s, half open from 63 s; a failure at 70 s that a
	// fail logged (a claim was handing out probes) is what the next claim
	// reopens it from, even once it is older than the window.
	useBreaker(t, db, "open", 1)
	for i := 1; i <= 3; i++ {
		enqueue(t, db, "open", t0)
		now := at(time.Duration(i) * time.Second)
		failJob(t, db, claimOne(t, db, "open", now), now)
	}
	exec(t, db, `INSERT INTO backoff.queue_failures VALUES ('open', $1)`, at(70*time.Second))

	now := at(110 * time.Second) // the window reaches back to 80 s
	count := func(table string) int {
		return scalar[int](t, db, `SELECT count(*) FROM backoff.`+table)
	}
	require.Equal(t, 3+3+3+4, count("queue_failures"))
	require.Equal(t, 3, count("queue_breakers"))
	require.Equal(t, 16+16+16, count("queue_tokens"))

	// p_limit bounds each table's deletions too; no finished job is old
	// enough, so the result is 0 whatever state was removed.
	require.Equal(t, 0, scalar[int](t, db, `SELECT backoff.prune('1 day', 2, $1)`, now))
	require.Equal(t, 3+3+3+4-2, count("queue_failures"))
	require.Equal(t, 3-2, count("queue_breakers"))
	require.Equal(t, 16+16+16-2, count("queue_tokens"))
	require.Equal(t, 0, scalar[int](t, db, `SELECT backoff.prune('1 day', 10000, $1)`, now))

	logged := scalar[[]string](t, db, `SELECT array_agg(queue || '@' || extract(epoch FROM failed_at - $1)::int
		ORDER BY queue, failed_at) FROM backoff.queue_failures`, t0)
	require.Equal(t, []string{"on@100", "open@70"}, logged)
	require.Equal(t, []string{"open"}, scalar[[]string](t, db, `SELECT array_agg(queue) FROM backoff.queue_breakers`))
	slots := scalar[[]string](t, db, `SELECT array_agg(queue || '#' || slot ORDER BY queue, slot) FROM backoff.queue_tokens`)
	require.Equal(t, []string{"on#0", "on#1", "on#2", "on#3"}, slots)

	// What is left still works: "open" reopens from the logged failure,
	// and "off" claims without controls.
	require.Empty(t, claim(t, db, "open", "w", 10, at(2*time.Minute)))
	s := stateOf(t, db, "open", at(2*time.Minute))
	require.Equal(t, "open", s.State)
	require.True(t, s.OpenedAt.Equal(at(70*time.Second)), "opened_at %v", s.OpenedAt)
	require.Len(t, claim(t, db, "off", "w", 10, now), 3, "the three retries, no breaker")
}

// claimAtOnce runs claim on n connections of their own, released together,
// and returns how many jobs they got in all; an error fails the test.
func claimAtOnce(t *testing.T, url string, n int, claim func(i int, c *pgx.Conn) ([]job, error)) int {
	t.Helper()
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conns[i] = connOn(t, url)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		total int
		errs  []error
	)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			js, err := claim(i, c)
			mu.Lock()
			defer mu.Unlock()
			total += len(js)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, errs)
	return total
}
