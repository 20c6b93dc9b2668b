package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

type attemptKey struct {
	id      int64
	attempt int32
}

// ledger is the workers' own record of what the database granted them.
type ledger struct {
	mu       sync.Mutex
	claims   map[attemptKey]string // attempt -> the worker that claimed it
	settles  map[attemptKey]string // attempt -> "complete" | "fail" | "fail_permanent"
	problems []string
}

func (l *ledger) claimed(k attemptKey, worker string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.claims[k]; ok {
		l.problems = append(l.problems, fmt.Sprintf("job %d attempt %d claimed by %s and %s", k.id, k.attempt, prev, worker))
	}
	l.claims[k] = worker
}

func (l *ledger) settled(k attemptKey, how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.settles[k]; ok {
		l.problems = append(l.problems, fmt.Sprintf("job %d attempt %d settled twice: %s and %s", k.id, k.attempt, prev, how))
	}
	l.settles[k] = how
}

// TestConcurrentWorkersAndReapers runs 8 workers on separate connections
// over 10,000 jobs with random failures, non-retryable errors and crashes
// (jobs abandoned without a word), while two reapers run at once; one pass
// in ten moves the simulated clock past every lease, so that jobs still in
// a worker's hands expire. At the end every job is accounted for and every
// attempt was claimed once and settled once, by its worker or a reaper.
func TestConcurrentWorkersAndReapers(t *testing.T) {
	t.Parallel()
	const (
		jobsTotal   = 10000
		workers     = 8
		reapers     = 2
		maxAttempts = 4
	)
	url := testdbURL(t)
	setup := poolOn(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exec(t, setup, `INSERT INTO backoff.policies (name, strategy, jitter, max_attempts, lease)
		VALUES ('conc', 'none', 'none', $1, '30 seconds')`, maxAttempts)
	exec(t, setup, `INSERT INTO backoff.queues (name, policy) VALUES ('conc', 'conc')`)
	exec(t, setup, `SELECT backoff.enqueue('conc', jsonb_build_object('n', g)) FROM generate_series(1, $1) AS g`, jobsTotal)

	// The clock is simulated: everyone passes p_now = clock(). A forced
	// reaper pass moves it past every lease (30 s), expiring the jobs still
	// in workers' hands, and retries (delay 0) fall due at once.
	var clockUS atomic.Int64
	clock := func() time.Time { return t0.Add(time.Duration(clockUS.Load()) * time.Microsecond) }
	exec(t, setup, `UPDATE backoff.jobs SET run_at = $1, created_at = $1`, t0)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	l := &ledger{claims: map[attemptKey]string{}, settles: map[attemptKey]string{}}
	var (
		done                                                   atomic.Bool
		nClaimCalls, nCompleted, nFailed, nPermanent, nCrashed atomic.Int64
		nFenced, nReaped, nForcedPasses, nBatchCompletes       atomic.Int64
		wg                                                     sync.WaitGroup
		errMu                                                  sync.Mutex
		unexpected                                             []error
	)
	fatal := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		unexpected = append(unexpected, err)
		done.Store(true)
	}
	// fenced reports whether err is the answer of a worker that lost its job.
	fenced := func(err error) bool {
		code := pgCode(err)
		return code == "BK002" || code == "BK003"
	}

	for w := 0; w < workers; w++ {
		conn := connOn(t, url)
		name := fmt.Sprintf("worker-%d", w)
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		batched := w%2 == 0 // half the workers complete their batch with complete_many
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				got, err := queryJobs(conn, `SELECT * FROM backoff.claim('conc', $1, $2, p_now => $3)`, name, 1+rng.IntN(10), clock())
				if err != nil {
					fatal(fmt.Errorf("%s claim: %w", name, err))
					return
				}
				nClaimCalls.Add(1)
				if len(got) == 0 {
					time.Sleep(2 * time.Millisecond) // idle poll; no backoff is awaited
					continue
				}
				var ids []int64
				var atts []int32
				for _, j := range got {
					k := attemptKey{j.ID, j.Attempts}
					l.claimed(k, name)
					var err error
					switch r := rng.IntN(100); {
					case r < 70:
						if batched {
							ids, atts = append(ids, j.ID), append(atts, j.Attempts)
							continue
						}
						_, err = oneErr(conn, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nCompleted.Add(1)
							l.settled(k, "complete")
						}
					case r < 87:
						_, err = oneErr(conn, `SELECT * FROM backoff.fail($1, $2, 'transient', p_now => $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nFailed.Add(1)
							l.settled(k, "fail")
						}
					case r < 92:
						_, err = oneErr(conn, `SELECT * FROM backoff.fail($1, $2, 'permanent', p_retryable => false, p_now => $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nPermanent.Add(1)
							l.settled(k, "fail_permanent")
						}
					default:
						nCrashed.Add(1) // abandoned: only a reaper settles it
					}
					if err != nil {
						if !fenced(err) {
							fatal(fmt.Errorf("%s settle job %d attempt %d: %w", name, j.ID, j.Attempts, err))
							return
						}
						nFenced.Add(1)
					}
				}
				if len(ids) > 0 {
					rows, err := conn.Query(ctx, `SELECT * FROM backoff.complete_many($1, $2, $3)`, ids, atts, clock())
					if err != nil {
						fatal(fmt.Errorf("%s complete_many: %w", name, err))
						return
					}
					doneIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
					if err != nil {
						fatal(fmt.Errorf("%s complete_many: %w", name, err))
						return
					}
					nBatchCompletes.Add(1)
					ok := map[int64]bool{}
					for _, id := range doneIDs {
						ok[id] = true
					}
					for i, id := range ids {
						if ok[id] {
							nCompleted.Add(1)
							l.settled(attemptKey{id, atts[i]}, "complete")
						} else {
							nFenced.Add(1)
						}
					}
				}
			}
		}()
	}
	for r := 0; r < reapers; r++ {
		conn := connOn(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pass := 1; !done.Load(); pass++ {
				if pass%10 == 0 {
					// Forced lease expiry of the jobs in workers' hands.
					clockUS.Add((31 * time.Second).Microseconds())
					nForcedPasses.Add(1)
				}
				var n int64
				if err := conn.QueryRow(ctx, `SELECT backoff.reap($1, 200)`, clock()).Scan(&n); err != nil {
					fatal(fmt.Errorf("reap: %w", err))
					return
				}
				nReaped.Add(n)
				time.Sleep(20 * time.Millisecond) // a reaper's period
			}
		}()
	}
	// The coordinator stops everyone once every job is finished.
	start := time.Now()
	for !done.Load() {
		left := scalar[int](t, setup, `SELECT count(*)::int FROM backoff.jobs WHERE status NOT IN ('completed', 'dead_lettered')`)
		if left == 0 {
			done.Store(true)
			break
		}
		if ctx.Err() != nil {
			done.Store(true)
			t.Fatalf("%d jobs still unfinished after %v", left, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	require.Empty(t, unexpected)
	require.Empty(t, l.problems)

	// Every job is accounted for.
	all := jobs(t, setup, `SELECT * FROM backoff.jobs ORDER BY id`)
	require.Len(t, all, jobsTotal, "no job lost")
	byStatus := map[string]int{}
	byReason := map[string]int{}
	lapsed := 0
	for _, j := range all {
		byStatus[j.Status]++
		require.Contains(t, []string{"completed", "dead_lettered"}, j.Status)
		require.LessOrEqual(t, j.Attempts, int32(maxAttempts), "job %d", j.ID)
		require.GreaterOrEqual(t, j.Attempts, int32(1))
		require.Nil(t, j.LockedBy)
		require.Nil(t, j.LeaseUntil)

		// Each attempt was claimed exactly once (by one holder)...
		for a := int32(1); a <= j.Attempts; a++ {
			_, ok := l.claims[attemptKey{j.ID, a}]
			require.True(t, ok, "job %d attempt %d was never handed to a worker", j.ID, a)
		}
		_, extra := l.claims[attemptKey{j.ID, j.Attempts + 1}]
		require.False(t, extra, "job %d: a claim beyond its attempts", j.ID)

		// ...and settled exactly once: by its worker (complete, or fail with
		// a history entry of kind error) or by a reaper (kind lease_expired).
		seen := map[int]historyEntry{}
		for _, e := range j.Errors {
			_, dup := seen[e.Attempt]
			require.False(t, dup, "job %d: attempt %d in the history twice", j.ID, e.Attempt)
			seen[e.Attempt] = e
		}
		for a := int32(1); a <= j.Attempts; a++ {
			k := attemptKey{j.ID, a}
			how, byWorker := l.settles[k]
			e, inHistory := seen[int(a)]
			last := a == j.Attempts
			switch {
			case byWorker && how == "complete":
				require.True(t, last && j.Status == "completed", "job %d attempt %d completed but is not the last", j.ID, a)
				require.False(t, inHistory, "job %d attempt %d completed and in the history", j.ID, a)
			case byWorker:
				require.True(t, inHistory, "job %d attempt %d failed without history", j.ID, a)
				require.Equal(t, "error", e.Kind, "job %d attempt %d", j.ID, a)
			default:
				require.True(t, inHistory, "job %d attempt %d neither settled by a worker nor reaped", j.ID, a)
				require.Equal(t, "lease_expired", e.Kind, "job %d attempt %d", j.ID, a)
				lapsed++
			}
		}
		if j.Status == "completed" {
			require.Len(t, j.Errors, int(j.Attempts)-1, "job %d", j.ID)
			continue
		}
		// Every dead letter keeps its whole history and says why.
		require.Len(t, j.Errors, int(j.Attempts), "dead letter %d has its history", j.ID)
		require.NotNil(t, j.DeadLetterReason)
		require.NotNil(t, j.LastError)
		require.NotNil(t, j.CompletedAt)
		byReason[*j.DeadLetterReason]++
		switch *j.DeadLetterReason {
		case "non_retryable":
			require.Equal(t, "fail_permanent", l.settles[attemptKey{j.ID, j.Attempts}], "job %d", j.ID)
		case "max_attempts":
			require.Equal(t, int32(maxAttempts), j.Attempts)
		default:
			t.Fatalf("job %d: unexpected dead-letter reason %q", j.ID, *j.DeadLetterReason)
		}
	}
	require.Len(t, l.claims, len(l.settles)+lapsed, "every claimed attempt settled exactly once")
	require.Equal(t, nReaped.Load(), int64(lapsed), "every reaped attempt is in a history")
	t.Logf("%d jobs, %d workers, %d reapers in %v: %d claim calls, %d attempts claimed; completed %d (%d complete_many calls), failed %d, non-retryable %d, crashed %d, fenced %d; reaped %d (%d forced passes); final: %v, dead letters by reason %v",
		jobsTotal, workers, reapers, time.Since(start).Round(time.Millisecond), nClaimCalls.Load(), len(l.claims),
		nCompleted.Load(), nBatchCompletes.Load(), nFailed.Load(), nPermanent.Load(), nCrashed.Load(), nFenced.Load(),
		nReaped.Load(), nForcedPasses.Load(), byStatus, byReason)
}
