package lifecycle_test

import (
	"context"
	"errors"
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
	settles  map[attemptKey]string // attempt -> "complete" | "fail" | "fail_permanent" | "snooze" | "cancel"
	replays  map[int64][]int32     // job -> its attempts at each replay
	problems []string
}

func (l *ledger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *ledger) replayed(id int64, attempts int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.replays[id] = append(l.replays[id], attempts)
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
// over 10,000 jobs with random failures, non-retryable errors, snoozes,
// heartbeats and crashes (jobs abandoned without a word), while two reapers
// run at once and an operator cancels running and waiting jobs and replays
// cancelled and dead-lettered ones (one by one, and twice a run all of the
// queue's dead letters with replay_dead_letters); one reaper pass in ten moves the
// simulated clock past every lease, so that jobs still in a worker's hands
// expire. Workers also throw the tokens of attempts they already settled
// back at the database (a zombie's calls), which must all be refused. At
// the end every job is accounted for: every attempt was claimed once (never
// two holders) and settled once, by its worker, a reaper or a cancel; the
// counted attempt never went above max_attempts and matches the claims that
// counted since the last replay (docs/adr/0020).
func TestConcurrentWorkersAndReapers(t *testing.T) {
	t.Parallel()
	const (
		jobsTotal   = 10000
		workers     = 8
		reapers     = 2
		maxAttempts = 4
		operatorOps = 600 // cancels and replays, a few percent of the jobs
		maxReplays  = 2   // per job, so that the run ends
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
	l := &ledger{claims: map[attemptKey]string{}, settles: map[attemptKey]string{}, replays: map[int64][]int32{}}
	var (
		done, operatorDone                                     atomic.Bool
		nClaimCalls, nCompleted, nFailed, nPermanent, nCrashed atomic.Int64
		nFenced, nReaped, nForcedPasses, nBatchCompletes       atomic.Int64
		nSnoozed, nHeartbeats, nZombieCalls                    atomic.Int64
		nCancels, nCancelledRunning, nReplays                  atomic.Int64
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
		batched := w%2 == 0   // half the workers complete their batch with complete_many
		var dead []attemptKey // attempts this worker settled: their tokens are spent
		spent := func(k attemptKey) {
			if len(dead) < 64 {
				dead = append(dead, k)
			} else {
				dead[rng.IntN(len(dead))] = k
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				if len(dead) > 0 && rng.IntN(4) == 0 {
					// A zombie: a spent token thrown at its job again.
					k := dead[rng.IntN(len(dead))]
					c := staleCalls[rng.IntN(len(staleCalls))]
					nZombieCalls.Add(1)
					if err := execErr(conn, c.sql, k.id, k.attempt, clock()); err == nil {
						l.problem("job %d: spent attempt %d accepted by %s", k.id, k.attempt, c.name)
					} else if !fenced(err) {
						fatal(fmt.Errorf("%s zombie %s job %d attempt %d: %w", name, c.name, k.id, k.attempt, err))
						return
					}
				}
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
					if j.counted() < 1 || j.counted() > maxAttempts {
						l.problem("job %d attempt %d claimed as counted attempt %d", j.ID, j.Attempts, j.counted())
					}
					var err error
					if rng.IntN(10) == 0 {
						err = execErr(conn, `SELECT backoff.heartbeat($1, $2, '30 seconds', $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nHeartbeats.Add(1)
						} else if fenced(err) {
							nFenced.Add(1)
							continue // cancelled or reaped under our feet: the job is no longer ours
						} else {
							fatal(fmt.Errorf("%s heartbeat job %d attempt %d: %w", name, j.ID, j.Attempts, err))
							return
						}
					}
					switch r := rng.IntN(100); {
					case r < 5:
						_, err = oneErr(conn, `SELECT * FROM backoff.snooze($1, $2, '0 seconds', $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nSnoozed.Add(1)
							l.settled(k, "snooze")
							spent(k)
						}
					case r < 70:
						if batched {
							ids, atts = append(ids, j.ID), append(atts, j.Attempts)
							continue
						}
						_, err = oneErr(conn, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nCompleted.Add(1)
							l.settled(k, "complete")
							spent(k)
						}
					case r < 87:
						_, err = oneErr(conn, `SELECT * FROM backoff.fail($1, $2, 'transient', p_now => $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nFailed.Add(1)
							l.settled(k, "fail")
							spent(k)
						}
					case r < 92:
						_, err = oneErr(conn, `SELECT * FROM backoff.fail($1, $2, 'permanent', p_retryable => false, p_now => $3)`, j.ID, j.Attempts, clock())
						if err == nil {
							nPermanent.Add(1)
							l.settled(k, "fail_permanent")
							spent(k)
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
							spent(attemptKey{id, atts[i]})
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
	// The operator: cancels running and waiting jobs, replays cancelled and
	// dead-lettered ones (at most maxReplays times each). Each action locks
	// the row first, so that it knows what it cancelled.
	{
		conn := connOn(t, url)
		rng := rand.New(rand.NewPCG(seed, 1000))
		nReplaysOf := map[int64]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer operatorDone.Store(true)
			for op := 0; op < operatorOps && !done.Load(); op++ {
				if op == operatorOps/3 || op == 2*operatorOps/3 {
					// Twice a run: every dead letter of the queue at once.
					replayed, err := replayAllDeadLetters(ctx, conn, clock())
					if err != nil {
						fatal(fmt.Errorf("operator: replay_dead_letters: %w", err))
						return
					}
					for _, j := range replayed {
						nReplays.Add(1)
						nReplaysOf[j.ID]++
						l.replayed(j.ID, j.Attempts)
						if j.Uncounted != j.Attempts {
							l.problem("job %d: replay_dead_letters gave attempt %d, %d uncounted", j.ID, j.Attempts, j.Uncounted)
						}
					}
					continue
				}
				var pick string
				switch r := rng.IntN(3); r {
				case 0:
					pick = `SELECT id FROM backoff.jobs WHERE status = 'running' ORDER BY random() LIMIT 1`
				case 1:
					pick = `SELECT id FROM backoff.jobs WHERE status IN ('pending', 'retrying') ORDER BY random() LIMIT 1`
				default:
					pick = `SELECT id FROM backoff.jobs WHERE status IN ('cancelled', 'dead_lettered') ORDER BY random() LIMIT 1`
				}
				if err := operatorStep(ctx, conn, pick, clock(), func(id int64) bool { return nReplaysOf[id] < maxReplays },
					func(before job, after job) {
						if after.Status == "cancelled" {
							nCancels.Add(1)
							if before.Status == "running" {
								nCancelledRunning.Add(1)
								l.settled(attemptKey{before.ID, before.Attempts}, "cancel")
							}
							return
						}
						nReplays.Add(1)
						nReplaysOf[after.ID]++
						l.replayed(after.ID, after.Attempts)
						if after.Attempts != before.Attempts || after.Uncounted != after.Attempts {
							l.problem("job %d: replay from attempt %d gave attempt %d, %d uncounted", after.ID, before.Attempts, after.Attempts, after.Uncounted)
						}
					}); err != nil {
					fatal(fmt.Errorf("operator: %w", err))
					return
				}
				time.Sleep(3 * time.Millisecond) // an operator's pace
			}
		}()
	}
	// The coordinator stops everyone once every job is finished and the
	// operator is done.
	start := time.Now()
	for !done.Load() {
		// The operator's state first: a replay between the count and a
		// later look would bring a job back after it was counted finished.
		operatorFinished := operatorDone.Load()
		left := scalar[int](t, setup, `SELECT count(*)::int FROM backoff.jobs WHERE status NOT IN ('completed', 'dead_lettered', 'cancelled')`)
		if left == 0 && operatorFinished {
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
		require.Contains(t, []string{"completed", "dead_lettered", "cancelled"}, j.Status)
		require.LessOrEqual(t, j.counted(), int32(maxAttempts), "job %d", j.ID)
		require.Nil(t, j.LockedBy)
		require.Nil(t, j.LeaseUntil)

		// Each attempt was claimed exactly once (by one holder)...
		for a := int32(1); a <= j.Attempts; a++ {
			_, ok := l.claims[attemptKey{j.ID, a}]
			require.True(t, ok, "job %d attempt %d was never handed to a worker", j.ID, a)
		}
		_, extra := l.claims[attemptKey{j.ID, j.Attempts + 1}]
		require.False(t, extra, "job %d: a claim beyond its attempts", j.ID)

		// ...and settled exactly once: by its worker (complete, snooze, or
		// fail with a history entry of kind error), by a cancel, or by a
		// reaper (kind lease_expired). The history has one entry per failed
		// attempt, with its counted attempt.
		seen := map[int]historyEntry{}
		for _, e := range failures(j.Errors) {
			_, dup := seen[e.Attempt]
			require.False(t, dup, "job %d: attempt %d in the history twice", j.ID, e.Attempt)
			seen[e.Attempt] = e
			require.NotNil(t, e.Counted, "job %d attempt %d", j.ID, e.Attempt)
			require.True(t, *e.Counted >= 1 && *e.Counted <= maxAttempts, "job %d attempt %d counted %d", j.ID, e.Attempt, *e.Counted)
		}
		var lastReplay int32 // the job's attempts at its last replay
		if r := l.replays[j.ID]; len(r) > 0 {
			lastReplay = r[len(r)-1]
		}
		var counted int32 // claims that counted since the last replay
		for a := int32(1); a <= j.Attempts; a++ {
			k := attemptKey{j.ID, a}
			how, byWorker := l.settles[k]
			e, inHistory := seen[int(a)]
			last := a == j.Attempts
			if a > lastReplay && how != "snooze" {
				counted++
			}
			switch {
			case byWorker && how == "complete":
				require.True(t, last && j.Status == "completed", "job %d attempt %d completed but is not the last", j.ID, a)
				require.False(t, inHistory, "job %d attempt %d completed and in the history", j.ID, a)
			case byWorker && (how == "snooze" || how == "cancel"):
				require.False(t, inHistory, "job %d attempt %d %s and in the history", j.ID, a, how)
			case byWorker:
				require.True(t, inHistory, "job %d attempt %d failed without history", j.ID, a)
				require.Equal(t, "error", e.Kind, "job %d attempt %d", j.ID, a)
			default:
				require.True(t, inHistory, "job %d attempt %d neither settled by a worker nor reaped", j.ID, a)
				require.Equal(t, "lease_expired", e.Kind, "job %d attempt %d", j.ID, a)
				lapsed++
			}
			if inHistory && a > lastReplay {
				require.Equal(t, counted, int32(*e.Counted), "job %d attempt %d: counted attempt in the history", j.ID, a)
			}
		}
		require.Equal(t, counted, j.counted(), "job %d: counted attempt = claims that counted since the last replay", j.ID)
		if j.Status != "dead_lettered" {
			continue
		}
		// Every dead letter says why.
		require.NotNil(t, j.DeadLetterReason)
		require.NotNil(t, j.LastError)
		require.NotNil(t, j.CompletedAt)
		byReason[*j.DeadLetterReason]++
		switch *j.DeadLetterReason {
		case "non_retryable":
			require.Equal(t, "fail_permanent", l.settles[attemptKey{j.ID, j.Attempts}], "job %d", j.ID)
		case "max_attempts":
			require.Equal(t, int32(maxAttempts), j.counted(), "job %d", j.ID)
		default:
			t.Fatalf("job %d: unexpected dead-letter reason %q", j.ID, *j.DeadLetterReason)
		}
	}
	require.Len(t, l.claims, len(l.settles)+lapsed, "every claimed attempt settled exactly once")
	require.Equal(t, nReaped.Load(), int64(lapsed), "every reaped attempt is in a history")
	t.Logf("%d jobs, %d workers, %d reapers in %v: %d claim calls, %d attempts claimed; completed %d (%d complete_many calls), failed %d, non-retryable %d, snoozed %d, heartbeats %d, crashed %d, fenced %d, zombie calls refused %d; reaped %d (%d forced passes); operator: cancelled %d (%d running), replayed %d; final: %v, dead letters by reason %v",
		jobsTotal, workers, reapers, time.Since(start).Round(time.Millisecond), nClaimCalls.Load(), len(l.claims),
		nCompleted.Load(), nBatchCompletes.Load(), nFailed.Load(), nPermanent.Load(), nSnoozed.Load(), nHeartbeats.Load(),
		nCrashed.Load(), nFenced.Load(), nZombieCalls.Load(), nReaped.Load(), nForcedPasses.Load(),
		nCancels.Load(), nCancelledRunning.Load(), nReplays.Load(), byStatus, byReason)
}

// replayAllDeadLetters runs backoff.replay_dead_letters on the queue and
// returns the replayed jobs as they are right after it, read in the same
// transaction (their rows are still locked).
func replayAllDeadLetters(ctx context.Context, conn *pgx.Conn, now time.Time) ([]job, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var ids []int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(job_id), '{}') FROM backoff.replay_dead_letters('conc', $1) WHERE replayed`, now).Scan(&ids); err != nil {
		return nil, err
	}
	js, err := queryJobs(tx, `SELECT * FROM backoff.jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	return js, tx.Commit(ctx)
}

// operatorStep picks a job with pick, locks it, and cancels it when it is
// unfinished or replays it when it is cancelled or dead-lettered (and
// mayReplay allows), in one transaction; report gets the row before and
// after. A pick that finds nothing, or a job that moved on, does nothing.
func operatorStep(ctx context.Context, conn *pgx.Conn, pick string, now time.Time, mayReplay func(int64) bool, report func(before, after job)) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var id int64
	if err := tx.QueryRow(ctx, pick).Scan(&id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	}
	before, err := oneErr(tx, `SELECT * FROM backoff.jobs WHERE id = $1 FOR UPDATE`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		// It moved on: finishing a job, or rotate, deletes its row and
		// inserts another (docs/adr/0061), which a lock taken in between
		// does not follow.
		return nil
	}
	if err != nil {
		return err
	}
	var after job
	switch before.Status {
	case "pending", "retrying", "running":
		after, err = oneErr(tx, `SELECT * FROM backoff.cancel($1, 'operator', $2)`, id, now)
	case "cancelled", "dead_lettered":
		if !mayReplay(id) {
			return nil
		}
		after, err = oneErr(tx, `SELECT * FROM backoff.replay($1, $2)`, id, now)
	default: // completed since it was picked
		return nil
	}
	if err != nil {
		return fmt.Errorf("job %d (%s): %w", id, before.Status, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	report(before, after)
	return nil
}
