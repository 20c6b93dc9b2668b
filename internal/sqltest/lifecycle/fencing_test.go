package lifecycle_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Fencing across every transition (
// docs/adr/0020-tokens-that-never-repeat.md): attempts counts every claim
// and never goes down, so a token that no longer holds its job never
// matches a later claim. Each test below holds an old token and throws it
// at a job that moved on, on a second connection.

// staleCalls are the calls that carry a fencing token, each run with
// (id, token, p_now).
var staleCalls = []struct{ name, sql string }{
	{"complete", `SELECT * FROM backoff.complete($1, $2, $3)`},
	{"fail", `SELECT * FROM backoff.fail($1, $2, 'stale', p_now => $3)`},
	{"fail_permanent", `SELECT * FROM backoff.fail($1, $2, 'stale', p_retryable => false, p_now => $3)`},
	{"heartbeat", `SELECT backoff.heartbeat($1, $2, '1 hour', $3)`},
	{"snooze", `SELECT * FROM backoff.snooze($1, $2, '0 seconds', $3)`},
}

// requireRefused throws every stale call with token at job id and requires
// each to be refused with code, complete_many to skip it, and the row to be
// exactly as before.
func requireRefused(t *testing.T, setup querier, stale *pgx.Conn, id int64, token int32, now time.Time, code string) {
	t.Helper()
	before := get(t, setup, id)
	for _, c := range staleCalls {
		err := execErr(stale, c.sql, id, token, now)
		requireCode(t, err, code)
	}
	done := scalar[[]int64](t, stale, `SELECT coalesce(array_agg(x), '{}') FROM backoff.complete_many($1, $2, $3) AS x`,
		[]int64{id}, []int32{token}, now)
	require.Empty(t, done, "complete_many with a stale token")
	require.Equal(t, before, get(t, setup, id), "a refused stale call changed the job")
}

// TestFencingAcrossCancelAndReplay is the proof that the hole ADR 0007 once
// documented is closed: a worker still running attempt 1 of a job that an
// operator cancelled and replayed, and that another worker claimed again,
// can no longer settle, extend or snooze the new attempt.
func TestFencingAcrossCancelAndReplay(t *testing.T) {
	t.Parallel()
	setup, zombie, fresh := twoConns(t)
	id := enqueue(t, setup, "q", t0)
	old := claimOne(t, zombie, "q", t0)
	require.Equal(t, int32(1), old.Attempts)

	one(t, setup, `SELECT * FROM backoff.cancel($1, 'operator', $2)`, id, t0)
	requireRefused(t, setup, zombie, id, old.Attempts, t0, "BK003") // cancelled

	r := one(t, setup, `SELECT * FROM backoff.replay($1, $2)`, id, t0)
	require.Equal(t, int32(1), r.Attempts, "replay keeps the token")
	require.Equal(t, int32(0), r.counted(), "and gives a fresh budget")
	requireRefused(t, setup, zombie, id, old.Attempts, t0, "BK002") // pending

	next := one(t, fresh, `SELECT * FROM backoff.claim('q', 'w2', 1, p_now => $1)`, t0)
	require.Equal(t, int32(2), next.Attempts, "the replayed job's first claim has a new token")
	require.Equal(t, int32(1), next.counted(), "and is its first counted attempt")
	requireRefused(t, setup, zombie, id, old.Attempts, t0, "BK002") // running attempt 2

	// The new attempt is untouched and its holder settles it.
	done := one(t, fresh, `SELECT * FROM backoff.complete($1, $2, $3)`, id, next.Attempts, at(time.Second))
	require.Equal(t, "completed", done.Status)
	require.Empty(t, failures(done.Errors), "no failed attempt: only the operator's cancel and replay")
	requireRefused(t, setup, zombie, id, old.Attempts, t0, "BK003") // completed
}

// TestFencingAcrossReplayDeadLetters: the set-based replay of a queue's
// dead letters gives a fresh budget the same way replay does, never the
// tokens back. The zombie is a worker whose lease the reaper expired on the
// job's last allowed attempt (a dead letter, reason max_attempts) and that
// is still running.
func TestFencingAcrossReplayDeadLetters(t *testing.T) {
	t.Parallel()
	setup, zombie, fresh := twoConns(t)
	id := scalar[int64](t, setup, `SELECT backoff.enqueue('q', p_max_attempts => 1, p_now => $1)`, t0)
	old := claimOne(t, zombie, "q", t0)
	require.Equal(t, 1, scalar[int](t, setup, `SELECT backoff.reap($1)`, at(time.Minute)))
	dead := get(t, setup, id)
	require.Equal(t, "dead_lettered", dead.Status)
	require.Equal(t, ptr("max_attempts"), dead.DeadLetterReason)
	requireRefused(t, setup, zombie, id, old.Attempts, at(time.Minute), "BK003")

	require.True(t, scalar[bool](t, setup, `SELECT replayed FROM backoff.replay_dead_letters('q', $1)`, at(time.Minute)))
	r := get(t, setup, id)
	require.Equal(t, "pending", r.Status)
	require.Equal(t, old.Attempts, r.Attempts, "the token is kept")
	require.Equal(t, int32(0), r.counted(), "a fresh budget")
	requireRefused(t, setup, zombie, id, old.Attempts, at(time.Minute), "BK002")

	next := one(t, fresh, `SELECT * FROM backoff.claim('q', 'w2', 1, p_now => $1)`, at(time.Minute))
	require.Equal(t, old.Attempts+1, next.Attempts)
	require.Equal(t, int32(1), next.counted())
	requireRefused(t, setup, zombie, id, old.Attempts, at(time.Minute), "BK002")
	one(t, fresh, `SELECT * FROM backoff.complete($1, $2, $3)`, id, next.Attempts, at(time.Minute))
}

// TestStaleCallWaitsOnReplayAndReclaim: the stale call arrives while the
// cancel, replay and new claim are still uncommitted in one transaction;
// it waits for the row lock, is re-evaluated on the committed row, and is
// refused.
func TestStaleCallWaitsOnReplayAndReclaim(t *testing.T) {
	t.Parallel()
	for _, c := range staleCalls {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			setup, op, zombie := twoConns(t)
			ctx := context.Background()
			id := enqueue(t, setup, "q", t0)
			old := claimOne(t, setup, "q", t0)

			tx := begin(t, op)
			one(t, tx, `SELECT * FROM backoff.cancel($1, 'operator', $2)`, id, t0)
			one(t, tx, `SELECT * FROM backoff.replay($1, $2)`, id, t0)
			next := one(t, tx, `SELECT * FROM backoff.claim('q', 'w2', 1, p_now => $1)`, t0)
			wait := blocked(t, setup, zombie, func() error { return execErr(zombie, c.sql, id, old.Attempts, t0) })
			require.NoError(t, tx.Commit(ctx))
			requireCode(t, wait(), "BK002")

			got := get(t, setup, id)
			require.Equal(t, "running", got.Status)
			require.Equal(t, next.Attempts, got.Attempts)
			require.Equal(t, ptr("w2"), got.LockedBy)
			require.Equal(t, next.LeaseUntil, got.LeaseUntil)
			require.Empty(t, failures(got.Errors))
		})
	}
}

// TestSnoozeThenReclaimThenStale: a snooze whose reply was lost is sent
// again after another worker claimed the job (a bug fixed by ADR 0020: the
// repeat used to snooze the other worker's attempt). Every stale call is
// refused, first while the snooze is uncommitted (the repeat waits and then
// finds the job pending), then after the re-claim.
func TestSnoozeThenReclaimThenStale(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	ctx := context.Background()
	id := enqueue(t, setup, "q", t0)
	old := claimOne(t, c1, "q", t0)

	tx := begin(t, c1)
	s := one(t, tx, `SELECT * FROM backoff.snooze($1, $2, '0 seconds', $3)`, id, old.Attempts, t0)
	require.Equal(t, old.Attempts, s.Attempts, "snooze keeps the token")
	require.Equal(t, int32(0), s.counted(), "and gives the attempt back")
	wait := blocked(t, setup, c2, func() error {
		return execErr(c2, `SELECT * FROM backoff.snooze($1, $2, '0 seconds', $3)`, id, old.Attempts, t0)
	})
	require.NoError(t, tx.Commit(ctx))
	requireCode(t, wait(), "BK002") // pending: the repeat did not snooze twice
	require.Equal(t, int32(1), get(t, setup, id).Uncounted, "snoozed once")

	next := one(t, c2, `SELECT * FROM backoff.claim('q', 'w2', 1, p_now => $1)`, t0)
	require.Equal(t, old.Attempts+1, next.Attempts)
	require.Equal(t, int32(1), next.counted(), "the snoozed claim did not count")
	requireRefused(t, setup, c1, id, old.Attempts, t0, "BK002")
	got := get(t, setup, id)
	require.Equal(t, "running", got.Status)
	require.Equal(t, ptr("w2"), got.LockedBy)
	one(t, c2, `SELECT * FROM backoff.complete($1, $2, $3)`, id, next.Attempts, t0)
}

// TestReapThenReclaimThenStale: the lease of attempt 1 expired and was
// reaped, attempt 2 is running elsewhere; attempt 1's worker wakes up.
func TestReapThenReclaimThenStale(t *testing.T) {
	t.Parallel()
	setup, c1, c2 := twoConns(t)
	id := enqueue(t, setup, "q", t0)
	old := claimOne(t, c1, "q", t0)
	require.Equal(t, 1, scalar[int](t, setup, `SELECT backoff.reap($1)`, at(time.Minute)))
	requireRefused(t, setup, c1, id, old.Attempts, at(time.Minute), "BK002") // retrying

	var next job
	for i := 0; ; i++ { // the retry falls due within the policy's first delay
		js := jobs(t, c2, `SELECT * FROM backoff.claim('q', 'w2', 1, p_now => $1)`, at(time.Minute+time.Duration(i)*time.Second))
		if len(js) == 1 {
			next = js[0]
			break
		}
		require.Less(t, i, 120, "the reaped job never fell due")
	}
	require.Equal(t, int32(2), next.Attempts)
	require.Equal(t, int32(2), next.counted(), "a reaped attempt counts")
	requireRefused(t, setup, c1, id, old.Attempts, next.LastAttemptedAt.Add(time.Second), "BK002")
	got := get(t, setup, id)
	require.Len(t, got.Errors, 1, "attempt 1 settled once, by the reaper")
	require.Equal(t, 1, got.Errors[0].Attempt)
	require.Equal(t, ptr(1), got.Errors[0].Counted)
	require.Equal(t, "lease_expired", got.Errors[0].Kind)
	one(t, c2, `SELECT * FROM backoff.complete($1, $2)`, id, next.Attempts)
}

// TestConcurrentReplay: of many concurrent replays of one cancelled job,
// exactly one wins; the others find it pending (BK003). The budget is
// reset once and the token kept.
func TestConcurrentReplay(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	setup, c1, c2 := poolOn(t, url), connOn(t, url), connOn(t, url)
	ctx := context.Background()
	id := enqueue(t, setup, "q", t0)
	c := claimOne(t, setup, "q", t0)
	one(t, setup, `SELECT * FROM backoff.snooze($1, $2, '0 seconds', $3)`, id, c.Attempts, t0)
	c = claimOne(t, setup, "q", t0)
	one(t, setup, `SELECT * FROM backoff.cancel($1, 'operator', $2)`, id, t0)

	// Two connections, the second waiting on the first's row lock.
	tx := begin(t, c1)
	one(t, tx, `SELECT * FROM backoff.replay($1, $2)`, id, t0)
	wait := blocked(t, setup, c2, func() error { return execErr(c2, `SELECT * FROM backoff.replay($1, $2)`, id, t0) })
	require.NoError(t, tx.Commit(ctx))
	requireCode(t, wait(), "BK003")
	got := get(t, setup, id)
	require.Equal(t, "pending", got.Status)
	require.Equal(t, c.Attempts, got.Attempts)
	require.Equal(t, int32(0), got.counted())

	// Eight connections racing, no explicit ordering.
	one(t, setup, `SELECT * FROM backoff.cancel($1, 'again', $2)`, id, t0)
	const racers = 8
	conns := make([]*pgx.Conn, racers)
	for i := range conns {
		conns[i] = connOn(t, url)
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won, lost int
		other     []error
	)
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := execErr(conn, `SELECT * FROM backoff.replay($1, $2)`, id, t0)
			mu.Lock()
			defer mu.Unlock()
			switch pgCode(err) {
			case "":
				if err != nil {
					other = append(other, err)
				} else {
					won++
				}
			case "BK003":
				lost++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, other)
	require.Equal(t, 1, won, "exactly one replay wins")
	require.Equal(t, racers-1, lost)
	got = get(t, setup, id)
	require.Equal(t, c.Attempts, got.Attempts)
	require.Equal(t, got.Attempts, got.Uncounted)
}

// TestNoStaleTokenEverSettles is a model-based check: random sequences of
// every call (claims by several workers, settles and heartbeats with any
// token ever handed out, snooze, cancel, replay, reap with the clock moving
// on) on a few jobs. A call that carries a token succeeds exactly when the
// token is the job's running attempt; a claim's token is always higher than
// every earlier one of its job; the counted attempt never exceeds
// max_attempts.
func TestNoStaleTokenEverSettles(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	exec(t, db, `INSERT INTO backoff.policies (name, strategy, base, max_delay, jitter, max_attempts, lease)
		VALUES ('model', 'fixed', '1 second', '1 second', 'none', 3, '10 seconds')`)
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('m', 'model')`)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))

	const nJobs, steps = 5, 1500
	type model struct {
		running  int32 // the token of the running attempt, 0 when not running
		maxToken int32 // the highest token ever handed out
	}
	ids := make([]int64, nJobs)
	models := map[int64]*model{}
	for i := range ids {
		ids[i] = enqueue(t, db, "m", t0)
		models[ids[i]] = &model{}
	}
	now := t0
	for step := 0; step < steps; step++ {
		id := ids[rng.IntN(nJobs)]
		m := models[id]
		// Any token this job ever had, the running one, or one never issued.
		token := int32(1 + rng.IntN(int(m.maxToken)+2))
		before := get(t, db, id)
		require.Equal(t, m.running != 0, before.Status == "running", "step %d job %d", step, id)
		var err error
		op := rng.IntN(10)
		switch op {
		case 0, 1: // claim this job (acquire, so that the model picks the job)
			var j job
			j, err = oneErr(db, `SELECT * FROM backoff.acquire($1, 'w', NULL, $2)`, id, now)
			if err == nil {
				require.Greater(t, j.Attempts, m.maxToken, "step %d: a claim reused a token", step)
				require.LessOrEqual(t, j.counted(), int32(3), "step %d: counted attempt above max_attempts", step)
				m.running, m.maxToken = j.Attempts, j.Attempts
			}
		case 2, 3, 4, 5, 6:
			c := staleCalls[rng.IntN(len(staleCalls))]
			err = execErr(db, c.sql, id, token, now)
			ok := m.running != 0 && token == m.running
			require.Equal(t, ok, err == nil, "step %d: %s(job %d, token %d) with running %d: %v", step, c.name, id, token, m.running, err)
			if err == nil && c.name != "heartbeat" {
				m.running = 0
			}
			if err != nil {
				require.Contains(t, []string{"BK002", "BK003"}, pgCode(err), "step %d", step)
			}
		case 7:
			done := scalar[[]int64](t, db, `SELECT coalesce(array_agg(x), '{}') FROM backoff.complete_many($1, $2, $3) AS x`,
				[]int64{id}, []int32{token}, now)
			ok := m.running != 0 && token == m.running
			require.Equal(t, ok, len(done) == 1, "step %d: complete_many(job %d, token %d) with running %d", step, id, token, m.running)
			if ok {
				m.running = 0
			}
		case 8:
			if rng.IntN(2) == 0 {
				_, err = oneErr(db, `SELECT * FROM backoff.cancel($1, 'op', $2)`, id, now)
				if err == nil {
					m.running = 0
				}
			} else if rng.IntN(2) == 0 {
				_, err = oneErr(db, `SELECT * FROM backoff.replay($1, $2)`, id, now)
			} else {
				err = execErr(db, `SELECT * FROM backoff.replay_dead_letters('m', $1)`, now)
			}
		case 9:
			now = now.Add(time.Duration(rng.IntN(15)) * time.Second)
			err = execErr(db, `SELECT backoff.reap($1)`, now)
			require.NoError(t, err)
			for _, other := range ids {
				if models[other].running != 0 && get(t, db, other).Status != "running" {
					models[other].running = 0 // reaped
				}
			}
		}
		if err != nil {
			require.Contains(t, []string{"BK002", "BK003", "BK004"}, pgCode(err), "step %d op %d: %v", step, op, err)
		}
		after := get(t, db, id)
		require.GreaterOrEqual(t, after.Attempts, before.Attempts, "step %d: attempts went down", step)
		require.LessOrEqual(t, after.counted(), int32(3), "step %d", step)
		require.GreaterOrEqual(t, after.counted(), int32(0), "step %d", step)
		seen := map[int]bool{}
		for _, e := range failures(after.Errors) {
			require.False(t, seen[e.Attempt], "step %d: job %d attempt %d in the history twice", step, id, e.Attempt)
			seen[e.Attempt] = true
		}
	}
	for _, id := range ids {
		j := get(t, db, id)
		t.Logf("job %d: %s, attempt %d, %d counted, %d history entries", id, j.Status, j.Attempts, j.counted(), len(j.Errors))
	}
}
