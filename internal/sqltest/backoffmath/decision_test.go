package backoffmath_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// decisionCase is one failed attempt under stored policy 'dp<Policy>'.
type decisionCase struct {
	Policy        int
	Attempt       int
	MaxAttempts   int // 0: NULL
	LeaseExpiries int
	Elapsed       time.Duration
	Seed          int64
	NonRetryable  bool
	RetryIn       *time.Duration
}

// sqlDecisions stores policies as dp0, dp1, ... and returns, per case,
// backoff._retry_decision's reason ("" for a retry) and its run_at minus
// the failure time (the wait; 0 for a dead letter).
func sqlDecisions(t *testing.T, ps []policy.Policy, cases []decisionCase) (reasons []string, waits []time.Duration) {
	t.Helper()
	ctx := context.Background()
	pool := newPool(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for i, p := range ps {
		sched := make([]int64, len(p.Schedule))
		for k, s := range p.Schedule {
			sched[k] = s.Microseconds()
		}
		var deadline, expiries any
		if p.Deadline > 0 {
			deadline = p.Deadline.Microseconds()
		}
		if p.MaxLeaseExpiries > 0 {
			expiries = p.MaxLeaseExpiries
		}
		_, err := tx.Exec(ctx, `INSERT INTO backoff.policies (name, strategy, base, multiplier, exponent, schedule, max_delay,
				jitter, jitter_ratio, max_attempts, deadline, max_lease_expiries)
			VALUES ($1, $2, $3 * interval '1 microsecond', $4, $5, ARRAY(SELECT s * interval '1 microsecond' FROM unnest($6::int8[]) AS s),
				$7 * interval '1 microsecond', $8, $9, $10, $11 * interval '1 microsecond', $12)`,
			"dp"+strconv.Itoa(i), string(p.Strategy), p.Base.Microseconds(), p.Multiplier, p.Exponent, sched,
			p.Max.Microseconds(), string(p.Jitter), p.JitterRatio, p.MaxAttempts, deadline, expiries)
		require.NoError(t, err, "policy %d: %+v", i, p)
	}
	var (
		names                         []string
		attempts, maxAttempts, leases []*int32
		elapsed, seeds                []int64
		retryable                     []bool
		retryIn                       []*int64
	)
	for _, c := range cases {
		a, l := int32(c.Attempt), int32(c.LeaseExpiries)
		var m *int32
		if c.MaxAttempts > 0 {
			v := int32(c.MaxAttempts)
			m = &v
		}
		var ri *int64
		if c.RetryIn != nil {
			v := c.RetryIn.Microseconds()
			ri = &v
		}
		names = append(names, "dp"+strconv.Itoa(c.Policy))
		attempts, maxAttempts, leases = append(attempts, &a), append(maxAttempts, m), append(leases, &l)
		elapsed, seeds, retryable, retryIn = append(elapsed, c.Elapsed.Microseconds()), append(seeds, c.Seed),
			append(retryable, !c.NonRetryable), append(retryIn, ri)
	}
	// The job was created at a fixed instant; the failure is Elapsed later.
	rows, err := tx.Query(ctx, `
		SELECT coalesce(d.dead_letter_reason, ''),
		       CASE WHEN d.dead_letter_reason IS NULL
		            THEN backoff._interval_us(d.run_at - ('2026-01-01'::timestamptz + t.elapsed * interval '1 microsecond')) ELSE 0 END
		FROM unnest($1::text[], $2::int4[], $3::int4[], $4::int4[], $5::int8[], $6::int8[], $7::bool[], $8::int8[])
		     WITH ORDINALITY AS t(name, attempt, max_attempts, leases, elapsed, seed, retryable, retry_in, i)
		JOIN backoff.policies AS p ON p.name = t.name
		CROSS JOIN LATERAL (SELECT backoff._policy_capped_us(p, t.attempt) AS capped_us OFFSET 0) AS c
		CROSS JOIN LATERAL backoff._retry_decision(p, c.capped_us, t.seed, t.attempt, t.max_attempts, t.leases,
			'2026-01-01'::timestamptz, '2026-01-01'::timestamptz, t.retry_in * interval '1 microsecond', t.retryable,
			'2026-01-01'::timestamptz + t.elapsed * interval '1 microsecond') AS d
		ORDER BY t.i`, names, attempts, maxAttempts, leases, elapsed, seeds, retryable, retryIn)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var reason string
		var us int64
		require.NoError(t, rows.Scan(&reason, &us))
		reasons, waits = append(reasons, reason), append(waits, time.Duration(us)*time.Microsecond)
	}
	require.NoError(t, rows.Err())
	require.Len(t, reasons, len(cases))
	return reasons, waits
}

// decisionPolicy is a random policy with the decision's own settings: an
// attempt limit, and sometimes a deadline and a lease-expiry budget.
func decisionPolicy(r *rand.Rand) policy.Policy {
	p := randomPolicy(r)
	p.MaxAttempts = 1 + r.IntN(12)
	if r.IntN(2) == 0 {
		p.Deadline = time.Duration(1+r.Int64N(7_200_000_000)) * time.Microsecond // up to 2h
	}
	if r.IntN(2) == 0 {
		p.MaxLeaseExpiries = 1 + r.IntN(5)
	}
	return p
}

// TestDecideMatchesSQL: policy.Decide, the decision the timelines of the
// web UI, backoffctl schedule and the demo are built from, gives what
// backoff._retry_decision gives, reason and wait, for random policies and
// failures (an attempt at or past the limit, lease expiries at the budget,
// a next run just past the deadline, a requested delay above max_delay).
// BACKOFF_CROSSCHECK_SEED replays a run.
func TestDecideMatchesSQL(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BACKOFF_CROSSCHECK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("decision check: BACKOFF_CROSSCHECK_SEED=%d", seed)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	var ps []policy.Policy
	for range 60 {
		p := decisionPolicy(r)
		require.NoError(t, p.Validate())
		ps = append(ps, p)
	}
	var cases []decisionCase
	for len(cases) < 3000 {
		i := r.IntN(len(ps))
		p := ps[i]
		c := decisionCase{Policy: i, Attempt: 1 + r.IntN(p.MaxAttempts+2), LeaseExpiries: r.IntN(7),
			Seed: int64(r.Uint64()), NonRetryable: r.IntN(15) == 0}
		if r.IntN(4) == 0 {
			c.MaxAttempts = 1 + r.IntN(12)
		}
		c.Elapsed = time.Duration(r.Int64N(3_600_000_000)) * time.Microsecond
		if p.Deadline > 0 && r.IntN(3) == 0 {
			// Just before the deadline by the delay, give or take 1 µs.
			c.Elapsed = max(0, p.Deadline-p.Delay(c.Attempt, c.Seed)+time.Duration(r.IntN(3)-1)*time.Microsecond)
		}
		if r.IntN(6) == 0 {
			d := time.Duration(r.Int64N(7_200_000_000)) * time.Microsecond
			c.RetryIn = &d
		}
		cases = append(cases, c)
	}
	reasons, waits := sqlDecisions(t, ps, cases)
	mismatches, dead := 0, map[string]int{}
	for i, c := range cases {
		wait, reason := ps[c.Policy].Decide(policy.Failure{Attempt: c.Attempt, MaxAttempts: c.MaxAttempts,
			LeaseExpiries: c.LeaseExpiries, Elapsed: c.Elapsed, Seed: c.Seed, NonRetryable: c.NonRetryable, RetryIn: c.RetryIn})
		dead[reason]++
		if reason != reasons[i] || wait != waits[i] {
			mismatches++
			if mismatches <= 10 {
				t.Errorf("case %d %+v under %+v: PostgreSQL (%q, %s), Go (%q, %s)", i, c, ps[c.Policy], reasons[i], waits[i], reason, wait)
			}
		}
	}
	t.Logf("decision: %d cases, outcomes %v, %d mismatches", len(cases), dead, mismatches)
	require.Zero(t, mismatches)
	for _, reason := range []string{"", policy.ReasonNonRetryable, policy.ReasonLeaseExpiries, policy.ReasonMaxAttempts, policy.ReasonDeadline} {
		require.Positive(t, dead[reason], "the cases reach outcome %q", reason)
	}
}

// TestTimelineMatchesSQL: every step of policy.Timeline, replayed through
// backoff._retry_decision at the step's attempt, time and lease-expiry
// count, gets the same reason and the same next run: a timeline drawn in
// the web UI or printed by backoffctl is what the database will decide.
// (Steps whose next run lies beyond a time.Duration, about 292 years after
// creation, are left out: Go saturates there.)
func TestTimelineMatchesSQL(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	var ps []policy.Policy
	for _, name := range policy.ProfileNames() {
		ps = append(ps, policy.Profiles()[name])
	}
	for range 40 {
		ps = append(ps, decisionPolicy(r))
	}
	type checked struct {
		p     policy.Policy
		start policy.TimelineStart
		step  policy.Step
	}
	var cases []decisionCase
	var want []checked
	for i, p := range ps {
		for _, start := range []policy.TimelineStart{
			{Seed: 42},
			{Seed: int64(1000 + i), Attempt: 2, Elapsed: 90 * time.Second, LeaseExpiries: 1, LeasesExpire: true},
			{Seed: -5, MaxAttempts: 3, LeasesExpire: i%2 == 0},
		} {
			expiries := start.LeaseExpiries
			tl := policy.Timeline(p, start)
			require.NotEmpty(t, tl)
			require.NotEmpty(t, tl[len(tl)-1].DeadLetter, "a timeline without Steps ends with the dead letter: %+v %+v", p, start)
			for _, s := range tl {
				if s.Next == math.MaxInt64 {
					break
				}
				if start.LeasesExpire {
					expiries++
				}
				cases = append(cases, decisionCase{Policy: i, Attempt: s.Attempt, MaxAttempts: start.MaxAttempts,
					LeaseExpiries: expiries, Elapsed: s.Start, Seed: start.Seed})
				want = append(want, checked{p, start, s})
			}
		}
	}
	reasons, waits := sqlDecisions(t, ps, cases)
	for k, w := range want {
		require.Equal(t, reasons[k], w.step.DeadLetter, "policy %+v start %+v step %+v", w.p, w.start, w.step)
		if w.step.DeadLetter == "" {
			require.Equal(t, waits[k], w.step.Next-w.step.Start, "policy %+v start %+v step %+v", w.p, w.start, w.step)
		}
	}
	t.Logf("timeline: %d steps of %d timelines checked", len(want), 3*len(ps))
}
