package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// usePolicy maps queue to a fresh deterministic policy: fixed 10 s delays,
// no jitter, a 60 s cap, 3 attempts, a 1 minute lease.
func usePolicy(t *testing.T, q querier, queue string) {
	t.Helper()
	exec(t, q, `INSERT INTO backoff.policies (name, strategy, base, max_delay, jitter, max_attempts, lease)
		VALUES ('p_' || $1, 'fixed', '10 seconds', '60 seconds', 'none', 3, '1 minute')`, queue)
	exec(t, q, `INSERT INTO backoff.queues (name, policy) VALUES ($1, 'p_' || $1)`, queue)
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail")

	id := scalar[int64](t, db, `SELECT backoff.enqueue('mail', '{"to": "a"}', NULL, 7, 5, NULL, $1)`, t0)
	j := get(t, db, id)
	require.Equal(t, "mail", j.Queue)
	require.Equal(t, "pending", j.Status)
	require.Equal(t, map[string]any{"to": "a"}, j.Payload)
	require.Equal(t, int32(0), j.Attempts)
	require.Equal(t, ptr(int32(7)), j.MaxAttempts)
	require.Equal(t, int32(5), j.Priority)
	require.Equal(t, ptr("p_mail"), j.Policy, "the queue's policy is recorded on the job")
	require.True(t, j.RunAt.Equal(t0))
	require.True(t, j.CreatedAt.Equal(t0))
	require.Empty(t, j.Errors)

	later := scalar[int64](t, db, `SELECT backoff.enqueue('other', NULL, $1, p_priority => NULL, p_now => $2)`, at(time.Hour), t0)
	j = get(t, db, later)
	require.True(t, j.RunAt.Equal(at(time.Hour)))
	require.Equal(t, ptr("default"), j.Policy, "a queue with no mapping uses 'default'")
	require.Equal(t, map[string]any{}, j.Payload)
	require.Equal(t, int32(0), j.Priority)

	for _, bad := range []string{
		`SELECT backoff.enqueue(NULL)`,
		`SELECT backoff.enqueue('')`,
		`SELECT backoff.enqueue('q', p_max_attempts => 0)`,
		`SELECT backoff.enqueue('q', p_dedupe_key => '')`,
		`SELECT backoff.enqueue('q', p_now => 'infinity')`,
	} {
		requireCode(t, execErr(db, bad), "22023")
	}
}

// TestEnqueueWithPolicy: p_policy (the trailing optional parameter) is
// recorded on the job instead of its queue's policy, and is what the job's
// retries then follow; positional calls without it keep their meaning.
func TestEnqueueWithPolicy(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail") // the queue's policy: fixed 10 s, 3 attempts
	exec(t, db, `INSERT INTO backoff.policies (name, strategy, base, max_delay, jitter, max_attempts, lease)
		VALUES ('slow', 'fixed', '7 minutes', '1 hour', 'none', 2, '2 minutes')`)

	id := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_policy => 'slow', p_now => $1)`, t0)
	require.Equal(t, ptr("slow"), get(t, db, id).Policy, "p_policy wins over the queue's")
	// All eight parameters positionally: p_policy is the last one.
	all := scalar[int64](t, db, `SELECT backoff.enqueue('mail', '{}', NULL, NULL, 0, NULL, $1, 'slow')`, t0)
	require.Equal(t, ptr("slow"), get(t, db, all).Policy)
	// The seven-argument positional call (p_now seventh) still means what it did.
	old := scalar[int64](t, db, `SELECT backoff.enqueue('mail', '{}', NULL, NULL, 0, NULL, $1)`, t0)
	require.Equal(t, ptr("p_mail"), get(t, db, old).Policy)
	require.True(t, get(t, db, old).CreatedAt.Equal(t0))
	null := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_policy => NULL, p_now => $1)`, t0)
	require.Equal(t, ptr("p_mail"), get(t, db, null).Policy, "NULL: the queue's policy")
	unmapped := scalar[int64](t, db, `SELECT backoff.enqueue('other', p_policy => 'slow', p_now => $1)`, t0)
	require.Equal(t, ptr("slow"), get(t, db, unmapped).Policy, "also for a queue with no mapping")

	// The recorded policy drives the job: its lease, delay and max_attempts.
	c := claimOne(t, db, "other", t0)
	require.Equal(t, unmapped, c.ID)
	require.True(t, c.LeaseUntil.Equal(at(2*time.Minute)), "slow's lease")
	f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, c.ID, c.Attempts, at(time.Second))
	require.Equal(t, "retrying", f.Status)
	require.True(t, f.RunAt.Equal(at(time.Second+7*time.Minute)), "slow's 7 minute delay, not default's")
	c = claimOne(t, db, "other", f.RunAt)
	f = one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, c.ID, c.Attempts, f.RunAt)
	require.Equal(t, "dead_lettered", f.Status, "slow's max_attempts of 2")
	require.Equal(t, ptr("max_attempts"), f.DeadLetterReason)

	// A deduplicated call returns the existing job unchanged.
	first := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_dedupe_key => 'k', p_now => $1)`, t0)
	again := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_dedupe_key => 'k', p_policy => 'slow', p_now => $1)`, t0)
	require.Equal(t, first, again)
	require.Equal(t, ptr("p_mail"), get(t, db, first).Policy)

	// An unknown policy is refused, quoting the name, and inserts nothing.
	before := scalar[int](t, db, `SELECT count(*)::int FROM backoff.jobs`)
	for _, bad := range []string{"nope", ""} {
		pgErr := requireCode(t, execErr(db, `SELECT backoff.enqueue('mail', p_policy => $1)`, bad), "22023")
		if bad == "" {
			// Not a name at all (ADR 0039).
			require.Equal(t, `policy must be 1 to 128 bytes without control or format characters, got "" (0 bytes)`, pgErr.Message)
			continue
		}
		require.Equal(t, fmt.Sprintf(`unknown policy "%s"`, bad), pgErr.Message)
	}
	pgErr := requireCode(t, execErr(db, `SELECT backoff.enqueue('mail', p_dedupe_key => 'k', p_policy => 'nope')`), "22023")
	require.Contains(t, pgErr.Message, `"nope"`, "checked before dedupe")
	require.Equal(t, before, scalar[int](t, db, `SELECT count(*)::int FROM backoff.jobs`))
}

func TestEnqueueDedupe(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	q := `SELECT backoff.enqueue('q', p_dedupe_key => 'k1', p_now => $1)`
	first := scalar[int64](t, db, q, t0)
	require.Equal(t, first, scalar[int64](t, db, q, t0), "an unfinished job with the key: its id")
	other := scalar[int64](t, db, `SELECT backoff.enqueue('q2', p_dedupe_key => 'k1', p_now => $1)`, t0)
	require.NotEqual(t, first, other, "keys are per queue")

	c := claimOne(t, db, "q", t0)
	require.Equal(t, first, scalar[int64](t, db, q, t0), "a running job still holds its key")
	one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, c.ID, c.Attempts, t0)
	second := scalar[int64](t, db, q, t0)
	require.NotEqual(t, first, second, "a finished job frees its key")
	require.Equal(t, 3, scalar[int](t, db, `SELECT count(*)::int FROM backoff.jobs`))
}

func TestEnqueueNotifiesOncePerTransactionAndQueue(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	listener := connOn(t, url)
	sender := connOn(t, url)
	ctx := context.Background()
	exec(t, listener, "LISTEN backoff_jobs")
	for _, q := range []string{"a", "b", "c"} {
		exec(t, sender, "SELECT backoff.wait_for_jobs($1, 'w')", q)
	}

	tx, err := sender.Begin(ctx)
	require.NoError(t, err)
	for i := 0; i < 50; i++ {
		exec(t, tx, "SELECT backoff.enqueue('a')")
	}
	exec(t, tx, "SELECT backoff.enqueue('b')")
	exec(t, tx, "SELECT backoff.enqueue('c', p_run_at => now() + interval '1 hour')")
	exec(t, tx, "SELECT backoff.enqueue('nobody-waits')")
	require.NoError(t, tx.Commit(ctx))
	// Notifications arrive in commit order: the sentinel comes after
	// whatever the enqueues sent.
	exec(t, sender, "SELECT pg_notify('backoff_jobs', 'sentinel')")

	require.Equal(t, []string{"a", "b", "sentinel"}, notificationsUntilSentinel(t, listener),
		"one per queue with a waiting worker and a job due now; a future job and a queue nobody waits for send none")

	// The bulk form alike: c has only future jobs, nobody waits for the other.
	exec(t, sender, `SELECT * FROM backoff.enqueue(ARRAY['c', 'a', 'c', 'nobody-waits', 'b', 'a'], NULL,
			ARRAY[now() + interval '1 hour', NULL, now() + interval '2 hours', NULL, now(), NULL]::timestamptz[], NULL, NULL, NULL)`)
	exec(t, sender, "SELECT pg_notify('backoff_jobs', 'sentinel')")
	require.Equal(t, []string{"a", "b", "sentinel"}, notificationsUntilSentinel(t, listener))
}

// notificationsUntilSentinel returns the payloads received on conn up to
// and including the one named "sentinel", sorted except for the sentinel,
// which comes last.
func notificationsUntilSentinel(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	var got []string
	for {
		waitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		require.NoError(t, err)
		require.Equal(t, "backoff_jobs", n.Channel)
		if n.Payload == "sentinel" {
			slices.Sort(got)
			return append(got, n.Payload)
		}
		got = append(got, n.Payload)
	}
}

// TestEnqueueNotifiesOnlyWaitingWorkers: ADR 0027. Without a live
// registration (none, expired, or ended with stop_waiting) neither form of
// enqueue notifies, so committing enqueuers never take the notify lock; a
// registration makes both notify.
func TestEnqueueNotifiesOnlyWaitingWorkers(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	listener := connOn(t, url)
	db := connOn(t, url)
	exec(t, listener, "LISTEN backoff_jobs")
	single := "SELECT backoff.enqueue('q')"
	bulk := "SELECT * FROM backoff.enqueue(ARRAY['q', 'q'], NULL::jsonb[], NULL, NULL, NULL, NULL)"
	sentinel := "SELECT pg_notify('backoff_jobs', 'sentinel')"

	// A busy system: nobody registered.
	exec(t, db, single)
	exec(t, db, bulk)
	exec(t, db, sentinel)
	require.Equal(t, []string{"sentinel"}, notificationsUntilSentinel(t, listener), "no worker waits: no NOTIFY")

	// A waiting worker is woken by each form.
	require.True(t, scalar[time.Time](t, db, "SELECT backoff.wait_for_jobs('q', 'w1', interval '1 minute')").After(time.Now()))
	exec(t, db, single)
	exec(t, db, bulk)
	exec(t, db, sentinel)
	require.Equal(t, []string{"q", "q", "sentinel"}, notificationsUntilSentinel(t, listener))

	// Ended by the worker (busy again): silence.
	require.True(t, scalar[bool](t, db, "SELECT backoff.stop_waiting('q', 'w1')"))
	require.False(t, scalar[bool](t, db, "SELECT backoff.stop_waiting('q', 'w1')"))
	exec(t, db, single)
	exec(t, db, sentinel)
	require.Equal(t, []string{"sentinel"}, notificationsUntilSentinel(t, listener), "registration ended")

	// Expired (a worker that died): silence, and the next registration of
	// the queue deletes it.
	exec(t, db, "INSERT INTO backoff.waiting_workers VALUES ('q', 'dead', now() - interval '1 second')")
	exec(t, db, single)
	exec(t, db, sentinel)
	require.Equal(t, []string{"sentinel"}, notificationsUntilSentinel(t, listener), "registration expired")
	exec(t, db, "SELECT backoff.wait_for_jobs('q', 'w2')")
	require.Equal(t, []string{"w2"}, scalar[[]string](t, db, "SELECT array_agg(worker) FROM backoff.waiting_workers"))

	for _, bad := range []string{
		"SELECT backoff.wait_for_jobs('', 'w')",
		"SELECT backoff.wait_for_jobs('q', NULL)",
		"SELECT backoff.wait_for_jobs('q', 'w', interval '0')",
		"SELECT backoff.wait_for_jobs('q', 'w', interval '2 days')",
		"SELECT backoff.stop_waiting(NULL, 'w')",
		"SELECT backoff.stop_waiting('q', NULL)",
	} {
		requireCode(t, execErr(db, bad), "22023")
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q")
	low := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_now => $1)`, t0)
	high := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_priority => 10, p_now => $1)`, at(time.Second))
	early := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_run_at => $1, p_now => $2)`, at(-time.Minute), t0)
	future := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_run_at => $1, p_now => $2)`, at(time.Hour), t0)
	enqueue(t, db, "elsewhere", t0)

	now := at(2 * time.Second)
	got := claim(t, db, "q", "w1", 10, now)
	require.Len(t, got, 3, "the future job and the other queue's job are not claimed")
	ids := map[int64]job{}
	for _, j := range got {
		ids[j.ID] = j
		require.Equal(t, "running", j.Status)
		require.Equal(t, int32(1), j.Attempts)
		require.Equal(t, ptr("w1"), j.LockedBy)
		require.True(t, j.LeaseUntil.Equal(now.Add(time.Minute)), "policy lease")
		require.True(t, j.LastAttemptedAt.Equal(now))
	}
	require.Contains(t, ids, low)
	require.Contains(t, ids, high)
	require.Contains(t, ids, early)
	require.Empty(t, claim(t, db, "q", "w1", 10, now))
	require.Equal(t, future, claimOne(t, db, "q", at(time.Hour)).ID)

	// Order: priority, then run_at, then id; one job per call.
	db2 := newDB(t)
	a := scalar[int64](t, db2, `SELECT backoff.enqueue('q', p_now => $1)`, t0)
	b := scalar[int64](t, db2, `SELECT backoff.enqueue('q', p_now => $1)`, t0)
	c := scalar[int64](t, db2, `SELECT backoff.enqueue('q', p_run_at => $1, p_now => $2)`, at(-time.Second), t0)
	d := scalar[int64](t, db2, `SELECT backoff.enqueue('q', p_priority => 1, p_now => $1)`, t0)
	var order []int64
	for i := 0; i < 4; i++ {
		order = append(order, claimOne(t, db2, "q", t0).ID)
	}
	require.Equal(t, []int64{d, c, a, b}, order)

	// An explicit lease wins over the policy's.
	enqueue(t, db2, "q", t0)
	j := one(t, db2, `SELECT * FROM backoff.claim('q', 'w', 1, '5 seconds', $1)`, t0)
	require.True(t, j.LeaseUntil.Equal(at(5*time.Second)))
	// The 'default' policy's lease (30 s) for an unmapped queue.
	enqueue(t, db2, "unmapped", t0)
	j = claimOne(t, db2, "unmapped", t0)
	require.True(t, j.LeaseUntil.Equal(at(30*time.Second)))
}

func TestClaimPausedQueue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q")
	enqueue(t, db, "q", t0)
	exec(t, db, "UPDATE backoff.queues SET paused = true WHERE name = 'q'")
	require.Empty(t, claim(t, db, "q", "w", 10, t0))
	exec(t, db, "UPDATE backoff.queues SET paused = false WHERE name = 'q'")
	require.Len(t, claim(t, db, "q", "w", 10, t0), 1)
}

func TestClaimErrors(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, bad := range []string{
		`SELECT * FROM backoff.claim(NULL, 'w')`,
		`SELECT * FROM backoff.claim('', 'w')`,
		`SELECT * FROM backoff.claim('q', NULL)`,
		`SELECT * FROM backoff.claim('q', 'w', 0)`,
		`SELECT * FROM backoff.claim('q', 'w', NULL)`,
		`SELECT * FROM backoff.claim('q', 'w', 1, '-1 second')`,
		`SELECT * FROM backoff.claim('q', 'w', 1, '0 seconds')`,
		`SELECT * FROM backoff.claim('q', 'w', 1, NULL, 'infinity')`,
	} {
		pgErr := requireCode(t, execErr(db, bad), "22023")
		require.Regexp(t, `^[^A-Z]*$`, pgErr.Message[:1], "lowercase message")
		require.Contains(t, pgErr.Message, `"`, "the message quotes the value: %s", pgErr.Message)
	}
}

func TestComplete(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	id := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	done := one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, id, c.Attempts, at(time.Second))
	require.Equal(t, "completed", done.Status)
	require.True(t, done.CompletedAt.Equal(at(time.Second)))
	require.Nil(t, done.LeaseUntil)
	require.Nil(t, done.LockedBy)

	requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, 1)`, id), "BK003")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete(999999, 1)`), "BK001")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, NULL)`, id), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete(NULL, 1)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, 0)`, id), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, 1, 'infinity')`, id), "22023")

	// Stale: reaped, then claimed again by another worker.
	id2 := enqueue(t, db, "q", t0)
	first := claimOne(t, db, "q", t0)
	require.Equal(t, 1, scalar[int](t, db, `SELECT backoff.reap($1)`, at(time.Hour)))
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, $2)`, id2, first.Attempts), "BK002") // retrying
	second := claimOne(t, db, "q", at(2*time.Hour))
	require.Equal(t, first.Attempts+1, second.Attempts)
	pgErr := requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, $2)`, id2, first.Attempts), "BK002")
	require.Contains(t, pgErr.Message, `"1"`)
	one(t, db, `SELECT * FROM backoff.complete($1, $2)`, id2, second.Attempts)
}

func TestCompleteMany(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for i := 0; i < 4; i++ {
		enqueue(t, db, "q", t0)
	}
	cs := claim(t, db, "q", "w", 4, t0)
	require.Len(t, cs, 4)
	ids := []int64{cs[0].ID, cs[1].ID, cs[2].ID, 999999}
	atts := []int32{cs[0].Attempts, cs[1].Attempts + 1, cs[2].Attempts, 1}
	rows, err := db.Query(context.Background(), `SELECT * FROM backoff.complete_many($1, $2, $3)`, ids, atts, at(time.Second))
	require.NoError(t, err)
	var done []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		done = append(done, id)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, []int64{cs[0].ID, cs[2].ID}, done, "stale and unknown entries are skipped")
	require.Equal(t, "running", get(t, db, cs[1].ID).Status)
	require.Equal(t, "completed", get(t, db, cs[2].ID).Status)
	require.True(t, get(t, db, cs[2].ID).CompletedAt.Equal(at(time.Second)))

	requireCode(t, execErr(db, `SELECT * FROM backoff.complete_many(ARRAY[1, 2], ARRAY[1])`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete_many(NULL, ARRAY[1])`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete_many(ARRAY[1], ARRAY[1], 'infinity')`), "22023")
	require.Equal(t, 0, scalar[int](t, db, `SELECT count(*)::int FROM backoff.complete_many('{}', '{}')`))
}

func TestFailRetriesWithPolicyDelay(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// The shipped 'moderate' policy has jitter: the delay must be exactly
	// what retry_delay gives for this attempt and job id.
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('q', 'moderate')`)
	id := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	now := at(3 * time.Second)
	f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'smtp timeout', p_now => $3)`, id, c.Attempts, now)
	want := scalar[time.Duration](t, db, `SELECT backoff.retry_delay('moderate', 1, $1)`, id)
	require.Equal(t, "retrying", f.Status)
	require.True(t, f.RunAt.Equal(now.Add(want)), "run_at %v, want now + %v", f.RunAt, want)
	require.Nil(t, f.LeaseUntil)
	require.Nil(t, f.LockedBy)
	require.Nil(t, f.DeadLetterReason)
	require.Nil(t, f.CompletedAt)
	require.Equal(t, ptr("smtp timeout"), f.LastError)
	require.True(t, f.LastFailedAt.Equal(now))
	require.Equal(t, []historyEntry{{Attempt: 1, Counted: ptr(1), At: "2026-01-01T00:00:03.000000Z", Error: "smtp timeout", Worker: ptr("w1"), Kind: "error", Started: ptr("2026-01-01T00:00:00.000000Z")}}, f.Errors)
}

func TestFailRetryInIsClampedToPolicyMax(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q") // max 60 s
	id := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'rate limited', '5 seconds', p_now => $3)`, id, c.Attempts, t0)
	require.True(t, f.RunAt.Equal(at(5*time.Second)))
	c = claimOne(t, db, "q", f.RunAt)
	f = one(t, db, `SELECT * FROM backoff.fail($1, $2, 'rate limited', '1 hour', p_now => $3)`, id, c.Attempts, c.RunAt)
	require.True(t, f.RunAt.Equal(c.RunAt.Add(time.Minute)), "clamped to the policy max")
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, 1, 'x', '-1 second')`, id), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, 1, NULL)`, id), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, 1, 'x', p_retryable => NULL)`, id), "22023")
}

func TestFailDeadLetters(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q") // 3 attempts, fixed 10 s

	// Not retryable: dead at once.
	id := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'bad input', p_retryable => false, p_now => $3)`, id, c.Attempts, at(time.Second))
	require.Equal(t, "dead_lettered", f.Status)
	require.Equal(t, ptr("non_retryable"), f.DeadLetterReason)
	require.True(t, f.CompletedAt.Equal(at(time.Second)))
	require.True(t, f.RunAt.Equal(t0), "a dead letter keeps its run_at")
	require.Len(t, f.Errors, 1)
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, $2, 'again')`, id, c.Attempts), "BK003")

	// The job's own max_attempts wins over the policy's.
	id = scalar[int64](t, db, `SELECT backoff.enqueue('q', p_max_attempts => 1, p_now => $1)`, t0)
	c = claimOne(t, db, "q", t0)
	f = one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, id, c.Attempts, t0)
	require.Equal(t, ptr("max_attempts"), f.DeadLetterReason)

	// Deadline: the next run would fall after created_at + deadline.
	exec(t, db, `UPDATE backoff.policies SET deadline = '15 seconds' WHERE name = 'p_q'`)
	id = enqueue(t, db, "q", t0)
	c = claimOne(t, db, "q", t0)
	f = one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, id, c.Attempts, at(time.Second))
	require.Equal(t, "retrying", f.Status, "t0+1s+10s is within the deadline")
	c = claimOne(t, db, "q", f.RunAt)
	f = one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, id, c.Attempts, f.RunAt)
	require.Equal(t, "dead_lettered", f.Status, "t0+21s is past the deadline")
	require.Equal(t, ptr("deadline"), f.DeadLetterReason)
	require.Len(t, f.Errors, 2)
}

func TestFailErrors(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	id := enqueue(t, db, "q", t0)
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, 1, 'x')`, id), "BK002") // pending
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail(999999, 1, 'x')`), "BK001")
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, NULL, 'x')`, id), "22023")
	c := claimOne(t, db, "q", t0)
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, $2, 'x')`, id, c.Attempts+1), "BK002")
	one(t, db, `SELECT * FROM backoff.cancel($1)`, id)
	requireCode(t, execErr(db, `SELECT * FROM backoff.fail($1, $2, 'x')`, id, c.Attempts), "BK003")
}

func TestHistoryIsBounded(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	exec(t, db, `INSERT INTO backoff.policies (name, strategy, jitter, max_attempts) VALUES ('many', 'none', 'none', 100)`)
	exec(t, db, `INSERT INTO backoff.queues (name, policy) VALUES ('q', 'many')`)
	id := enqueue(t, db, "q", t0)
	var last job
	for i := 1; i <= 25; i++ {
		c := claimOne(t, db, "q", at(time.Duration(i)*time.Second))
		last = one(t, db, `SELECT * FROM backoff.fail($1, $2, $4, p_now => $3)`, id, c.Attempts, c.LastAttemptedAt, fmt.Sprintf("error %d", c.Attempts))
	}
	require.Len(t, last.Errors, 20)
	require.Equal(t, 6, last.Errors[0].Attempt, "the oldest entries are dropped")
	require.Equal(t, 25, last.Errors[19].Attempt)
	require.Equal(t, "error 25", last.Errors[19].Error)
	require.Equal(t, ptr("error 25"), last.LastError)
}

func TestReap(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q") // lease 1 min, 3 attempts, fixed 10 s
	var ids []int64
	for i := 0; i < 3; i++ {
		ids = append(ids, enqueue(t, db, "q", t0))
	}
	claim(t, db, "q", "crashy", 3, t0)
	require.Equal(t, 0, scalar[int](t, db, `SELECT backoff.reap($1)`, at(time.Minute)), "the lease is still valid at lease_until")
	now := at(time.Minute + time.Second)
	require.Equal(t, 2, scalar[int](t, db, `SELECT backoff.reap($1, 2)`, now), "batch-limited")
	require.Equal(t, 1, scalar[int](t, db, `SELECT backoff.reap($1, 2)`, now))
	require.Equal(t, 0, scalar[int](t, db, `SELECT backoff.reap($1)`, now))
	for _, id := range ids {
		j := get(t, db, id)
		require.Equal(t, "retrying", j.Status)
		require.True(t, j.RunAt.Equal(now.Add(10*time.Second)), "the same decision as fail: policy delay")
		require.Equal(t, ptr("lease expired"), j.LastError)
		require.Nil(t, j.LockedBy)
		require.Nil(t, j.LeaseUntil)
		require.Equal(t, []historyEntry{{Attempt: 1, Counted: ptr(1), At: "2026-01-01T00:01:01.000000Z", Error: "lease expired", Worker: ptr("crashy"), Kind: "lease_expired", Started: j.Errors[0].Started}}, j.Errors)
	}
	// The last attempt's lease expiring dead-letters it (max_attempts).
	id := ids[0]
	for a := 2; a <= 3; a++ {
		j := get(t, db, id)
		c := one(t, db, `SELECT * FROM backoff.acquire($1, 'crashy', p_now => $2)`, id, j.RunAt)
		require.Equal(t, int32(a), c.Attempts)
		require.Equal(t, 1, scalar[int](t, db, `SELECT backoff.reap($1)`, c.LeaseUntil.Add(time.Second)))
	}
	j := get(t, db, id)
	require.Equal(t, "dead_lettered", j.Status)
	require.Equal(t, ptr("max_attempts"), j.DeadLetterReason)
	require.Len(t, j.Errors, 3)

	requireCode(t, execErr(db, `SELECT backoff.reap(now(), 0)`), "22023")
	requireCode(t, execErr(db, `SELECT backoff.reap('-infinity')`), "22023")
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q")
	id := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	until := scalar[time.Time](t, db, `SELECT backoff.heartbeat($1, $2, '5 minutes', $3)`, id, c.Attempts, at(30*time.Second))
	require.True(t, until.Equal(at(30*time.Second+5*time.Minute)))
	until = scalar[time.Time](t, db, `SELECT backoff.heartbeat($1, $2, p_now => $3)`, id, c.Attempts, at(time.Minute))
	require.True(t, until.Equal(at(2*time.Minute)), "policy lease")
	require.True(t, get(t, db, id).LeaseUntil.Equal(until))
	require.Equal(t, 0, scalar[int](t, db, `SELECT backoff.reap($1)`, at(90*time.Second)), "the extended lease is not reaped")

	requireCode(t, execErr(db, `SELECT backoff.heartbeat($1, $2, '-1 second')`, id, c.Attempts), "22023")
	requireCode(t, execErr(db, `SELECT backoff.heartbeat($1, $2, p_now => 'infinity')`, id, c.Attempts), "22023")
	requireCode(t, execErr(db, `SELECT backoff.heartbeat($1, NULL)`, id), "22023")
	requireCode(t, execErr(db, `SELECT backoff.heartbeat(999999, 1)`), "BK001")
	require.Equal(t, 1, scalar[int](t, db, `SELECT backoff.reap($1)`, at(3*time.Minute)))
	requireCode(t, execErr(db, `SELECT backoff.heartbeat($1, $2)`, id, c.Attempts), "BK002")
	one(t, db, `SELECT * FROM backoff.cancel($1)`, id)
	requireCode(t, execErr(db, `SELECT backoff.heartbeat($1, $2)`, id, c.Attempts), "BK003")
}

func TestSnooze(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	id := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	require.Equal(t, int32(1), c.Attempts)
	s := one(t, db, `SELECT * FROM backoff.snooze($1, $2, '1 minute', $3)`, id, c.Attempts, at(time.Second))
	require.Equal(t, "pending", s.Status)
	require.Equal(t, int32(1), s.Attempts, "the token never goes down")
	require.Equal(t, int32(0), s.counted(), "no attempt spent")
	require.True(t, s.RunAt.Equal(at(time.Second+time.Minute)))
	require.Nil(t, s.LockedBy)
	require.Nil(t, s.LeaseUntil)
	require.Empty(t, s.Errors)
	require.Empty(t, claim(t, db, "q", "w", 1, at(time.Minute)))
	again := claimOne(t, db, "q", at(2*time.Minute))
	require.Equal(t, int32(2), again.Attempts, "the next claim has a new token")
	require.Equal(t, int32(1), again.counted(), "and the same counted attempt")
	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze($1, $2, '1 second')`, id, c.Attempts), "BK002")

	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze($1, $2, '-1 second')`, id, again.Attempts), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze($1, $2, NULL)`, id, again.Attempts), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze($1, $2, '1 second')`, id, again.Attempts+1), "BK002")
	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze(999999, 1, '1 second')`), "BK001")
	one(t, db, `SELECT * FROM backoff.complete($1, $2)`, id, again.Attempts)
	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze($1, $2, '1 second')`, id, again.Attempts), "BK003")
}

func TestCancel(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	pending := enqueue(t, db, "q", t0)
	x := one(t, db, `SELECT * FROM backoff.cancel($1, 'not needed', $2)`, pending, at(time.Second))
	require.Equal(t, "cancelled", x.Status)
	require.True(t, x.CompletedAt.Equal(at(time.Second)))
	require.Equal(t, ptr("not needed"), x.LastError)

	running := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	x = one(t, db, `SELECT * FROM backoff.cancel($1)`, running)
	require.Equal(t, "cancelled", x.Status)
	require.Nil(t, x.LockedBy)
	require.Nil(t, x.LeaseUntil)
	requireCode(t, execErr(db, `SELECT * FROM backoff.complete($1, $2)`, running, c.Attempts), "BK003")

	requireCode(t, execErr(db, `SELECT * FROM backoff.cancel($1)`, running), "BK003")
	requireCode(t, execErr(db, `SELECT * FROM backoff.cancel(999999)`), "BK001")
	requireCode(t, execErr(db, `SELECT * FROM backoff.cancel(NULL)`), "22023")
}

func TestReplay(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	id := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_dedupe_key => 'k', p_now => $1)`, t0)
	c := claimOne(t, db, "q", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'poison', p_retryable => false, p_now => $3)`, id, c.Attempts, t0)

	r := one(t, db, `SELECT * FROM backoff.replay($1, $2)`, id, at(time.Hour))
	require.Equal(t, "pending", r.Status)
	require.Equal(t, int32(1), r.Attempts, "the token is kept")
	require.Equal(t, int32(0), r.counted(), "a fresh budget")
	require.True(t, r.RunAt.Equal(at(time.Hour)))
	require.Nil(t, r.DeadLetterReason)
	require.Nil(t, r.CompletedAt)
	require.Len(t, failures(r.Errors), 1, "history kept")
	require.Equal(t, "replayed", r.Errors[len(r.Errors)-1].Kind, "and the replay recorded")
	require.Equal(t, ptr("poison"), r.LastError)
	requireCode(t, execErr(db, `SELECT * FROM backoff.replay($1)`, id), "BK003") // pending

	c = claimOne(t, db, "q", at(time.Hour))
	require.Equal(t, int32(2), c.Attempts)
	require.Equal(t, int32(1), c.counted())
	one(t, db, `SELECT * FROM backoff.complete($1, $2)`, id, c.Attempts)
	requireCode(t, execErr(db, `SELECT * FROM backoff.replay($1)`, id), "BK003") // completed
	requireCode(t, execErr(db, `SELECT * FROM backoff.replay(999999)`), "BK001")
	requireCode(t, execErr(db, `SELECT * FROM backoff.replay(NULL)`), "22023")

	// A cancelled job comes back too, unless its dedupe key is taken.
	id2 := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_dedupe_key => 'k2')`)
	one(t, db, `SELECT * FROM backoff.cancel($1)`, id2)
	newer := scalar[int64](t, db, `SELECT backoff.enqueue('q', p_dedupe_key => 'k2')`)
	require.NotEqual(t, id2, newer)
	requireCode(t, execErr(db, `SELECT * FROM backoff.replay($1)`, id2), "BK003")
	one(t, db, `SELECT * FROM backoff.cancel($1)`, newer)
	require.Equal(t, "pending", one(t, db, `SELECT * FROM backoff.replay($1)`, id2).Status)
}

func TestPrune(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for i := 0; i < 5; i++ {
		id := enqueue(t, db, "q", t0)
		c := claimOne(t, db, "q", t0)
		one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, id, c.Attempts, t0)
	}
	dead := enqueue(t, db, "q", t0)
	c := claimOne(t, db, "q", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_retryable => false, p_now => $3)`, dead, c.Attempts, t0)
	recent := enqueue(t, db, "q", t0)
	c = claimOne(t, db, "q", t0)
	one(t, db, `SELECT * FROM backoff.complete($1, $2, $3)`, recent, c.Attempts, at(6*24*time.Hour))
	unfinished := enqueue(t, db, "q", t0)

	now := at(7 * 24 * time.Hour)
	require.Equal(t, 4, scalar[int](t, db, `SELECT backoff.prune('2 days', 4, $1)`, now))
	require.Equal(t, 2, scalar[int](t, db, `SELECT backoff.prune('2 days', 4, $1)`, now))
	require.Equal(t, 0, scalar[int](t, db, `SELECT backoff.prune('2 days', 4, $1)`, now))
	left := scalar[[]int64](t, db, `SELECT array_agg(id ORDER BY id) FROM backoff.jobs`)
	require.Equal(t, []int64{recent, unfinished}, left)

	requireCode(t, execErr(db, `SELECT backoff.prune('-1 day')`), "22023")
	requireCode(t, execErr(db, `SELECT backoff.prune(NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT backoff.prune('1 day', 0)`), "22023")
}

func TestStats(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "a") // fixed 10 s, 3 attempts
	for i := 0; i < 3; i++ {
		enqueue(t, db, "a", t0)
	}
	scalar[int64](t, db, `SELECT backoff.enqueue('a', p_run_at => $1, p_now => $2)`, at(time.Hour), t0)
	enqueue(t, db, "b", at(-time.Minute))

	c := claimOne(t, db, "a", t0)
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_now => $3)`, c.ID, c.Attempts, at(time.Minute)) // a retry
	c2 := claimOne(t, db, "a", at(time.Minute))                                                           // running
	c3 := one(t, db, `SELECT * FROM backoff.claim('a', 'w', 1, p_now => $1)`, at(time.Minute))            // last due one
	one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_retryable => false, p_now => $3)`, c3.ID, c3.Attempts, at(2*time.Minute))
	_ = c2

	type row struct {
		Queue                                                        string
		Pending, Running, Expired, Retrying, Completed, DeadLettered int64
		Cancelled, Due                                               int64
		OldestDueAge                                                 *time.Duration
		Retries, DeadLetters                                         int64
		Paused                                                       bool
		Blocked                                                      int64
	}
	read := func(window string, now time.Time) []row {
		rows, err := db.Query(context.Background(), `SELECT * FROM backoff.stats($1, $2)`, window, now)
		require.NoError(t, err)
		var out []row
		for rows.Next() {
			var r row
			require.NoError(t, rows.Scan(&r.Queue, &r.Pending, &r.Running, &r.Expired, &r.Retrying, &r.Completed, &r.DeadLettered,
				&r.Cancelled, &r.Due, &r.OldestDueAge, &r.Retries, &r.DeadLetters, &r.Paused, &r.Blocked))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
		return out
	}
	got := read("1 hour", at(3*time.Minute))
	require.Equal(t, []row{
		{Queue: "a", Pending: 1, Running: 1, Expired: 1, Retrying: 1, DeadLettered: 1, Due: 1,
			OldestDueAge: ptr(3*time.Minute - time.Minute - 10*time.Second), Retries: 1, DeadLetters: 1},
		{Queue: "b", Pending: 1, Due: 1, OldestDueAge: ptr(4 * time.Minute)},
	}, got)
	got = read("30 seconds", at(3*time.Minute))
	require.Equal(t, int64(0), got[0].Retries, "the retry at 00:01 is outside the window")
	require.Equal(t, int64(0), got[0].DeadLetters)

	requireCode(t, execErr(db, `SELECT * FROM backoff.stats('-1 hour')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.stats('1 hour', 'infinity')`), "22023")
}

func TestPolicyResolution(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "q")
	id := enqueue(t, db, "q", t0)
	// Remapping the queue does not move an enqueued job: it keeps its policy.
	exec(t, db, `UPDATE backoff.queues SET policy = 'conservative' WHERE name = 'q'`)
	c := claimOne(t, db, "q", t0)
	require.True(t, c.LeaseUntil.Equal(at(time.Minute)), "p_q's lease, not conservative's 5 minutes")
	f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'x', p_now => $3)`, id, c.Attempts, t0)
	require.True(t, f.RunAt.Equal(at(10*time.Second)))

	// A job whose recorded policy was deleted falls back to its queue's.
	exec(t, db, `UPDATE backoff.jobs SET policy = 'gone' WHERE id = $1`, id)
	c = claimOne(t, db, "q", f.RunAt)
	require.True(t, c.LeaseUntil.Equal(f.RunAt.Add(5*time.Minute)), "conservative's lease")
	// And a job with no policy at all uses its queue's, then 'default'.
	exec(t, db, `INSERT INTO backoff.jobs (queue, run_at, created_at) VALUES ('nomap', $1, $1)`, t0)
	c = claimOne(t, db, "nomap", t0)
	require.Nil(t, c.Policy)
	require.True(t, c.LeaseUntil.Equal(at(30*time.Second)))
}

func TestEveryPublicFunctionHasAComment(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	missing := scalar[[]string](t, db, `
		SELECT coalesce(array_agg(p.oid::regprocedure::text ORDER BY 1), '{}')
		FROM pg_catalog.pg_proc AS p
		WHERE p.pronamespace = 'backoff'::regnamespace
		  AND p.proname NOT LIKE '\_%'
		  AND pg_catalog.obj_description(p.oid, 'pg_proc') IS NULL`)
	require.Empty(t, missing, "public functions without COMMENT ON FUNCTION")
	n := scalar[int](t, db, `SELECT count(*)::int FROM pg_catalog.pg_proc WHERE pronamespace = 'backoff'::regnamespace AND proname IN
		('enqueue', 'claim', 'acquire', 'complete', 'complete_many', 'fail', 'reap', 'heartbeat', 'snooze', 'cancel', 'replay', 'prune', 'stats')`)
	// 13 names; enqueue has two forms (one job, and the bulk form over
	// arrays: docs/adr/0016-set-based-bulk-enqueue.md).
	require.Equal(t, 14, n)
}

// TestSpansBeyondRangeAreInvalidArguments: leases, delays and windows past
// 876600 hours (the bound of every policy duration) are refused with 22023
// naming the value, instead of a "timestamp out of range" (22008) from the
// arithmetic, and nothing changes.
func TestSpansBeyondRangeAreInvalidArguments(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	id := enqueue(t, db, "q", t0)
	huge := "100000000 years"
	err := requireCode(t, execErr(db, `SELECT * FROM backoff.claim('q', 'w', 1, $1::interval, $2)`, huge, t0), "22023")
	require.Contains(t, err.Message, "lease must be positive and at most 876600 hours")
	requireCode(t, execErr(db, `SELECT * FROM backoff.acquire($1, 'w', $2::interval, $3)`, id, huge, t0), "22023")
	c := claimOne(t, db, "q", t0)
	requireCode(t, execErr(db, `SELECT backoff.heartbeat($1, $2, $3::interval, $4)`, id, c.Attempts, huge, t0), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.snooze($1, $2, $3::interval, $4)`, id, c.Attempts, huge, t0), "22023")
	requireCode(t, execErr(db, `SELECT backoff.prune($1::interval)`, huge), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.stats($1::interval)`, huge), "22023")
	// The job is still running its attempt, untouched by the refused calls.
	after := one(t, db, `SELECT * FROM backoff.jobs WHERE id = $1`, id)
	require.Equal(t, "running", after.Status)
	require.Equal(t, c.Attempts, after.Attempts)
	require.Equal(t, c.LeaseUntil, after.LeaseUntil)
}

// TestInfiniteNowIsNamed: an infinite p_now is refused with 22023 and a
// message that names it, not one that says it was NULL.
func TestInfiniteNowIsNamed(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	err := requireCode(t, execErr(db, `SELECT * FROM backoff.claim('q', 'w', 1, NULL, 'infinity')`), "22023")
	require.Contains(t, err.Message, `now must be a finite time between years 1 and 9999, got "infinity"`)
	err = requireCode(t, execErr(db, `SELECT backoff.reap('-infinity')`), "22023")
	require.Contains(t, err.Message, `now must be a finite time between years 1 and 9999, got "-infinity"`)
	err = requireCode(t, execErr(db, `SELECT * FROM backoff.cancel(1, NULL, 'infinity')`), "22023")
	require.Contains(t, err.Message, `now must be a finite time between years 1 and 9999, got "infinity"`)
}

// TestNullNowIsTheDatabaseClock: p_now NULL means now() in every function
// that takes it (ADR 0035), so that clients send one SQL text whether
// or not they have a clock of their own.
func TestNullNowIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	tx, err := db.Begin(ctx) // one transaction: now() is one instant
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	now := scalar[time.Time](t, tx, `SELECT now()`)

	id := scalar[int64](t, tx, `SELECT backoff.enqueue('q', p_now => NULL)`)
	ids := scalar[[]int64](t, tx, `SELECT array_agg(id) FROM backoff.enqueue(ARRAY['q', 'q'], NULL::jsonb[], NULL::timestamptz[], NULL::integer[], NULL::integer[], NULL::text[], NULL) AS t(id)`)
	require.Len(t, ids, 2)
	j := get(t, tx, id)
	require.Equal(t, now, j.CreatedAt)
	require.Equal(t, now, j.RunAt)
	require.Equal(t, now, get(t, tx, ids[1]).CreatedAt)

	c := one(t, tx, `SELECT * FROM backoff.claim('q', 'w', 1, '1 minute', NULL)`)
	require.Equal(t, id, c.ID)
	require.Equal(t, now.Add(time.Minute), *c.LeaseUntil)
	require.Equal(t, now.Add(2*time.Minute), scalar[time.Time](t, tx, `SELECT backoff.heartbeat($1, $2, '2 minutes', NULL)`, id, c.Attempts))
	require.Equal(t, "pending", one(t, tx, `SELECT * FROM backoff.snooze($1, $2, '0 seconds', NULL)`, id, c.Attempts).Status)
	a := one(t, tx, `SELECT * FROM backoff.acquire($1, 'w', NULL, NULL)`, id)
	f := one(t, tx, `SELECT * FROM backoff.fail($1, $2, 'boom', '1 second', true, NULL)`, id, a.Attempts)
	require.Equal(t, now.Add(time.Second), f.RunAt)
	require.Equal(t, now, *f.LastFailedAt)
	require.Equal(t, 0, scalar[int](t, tx, `SELECT backoff.reap(NULL)`))

	c2 := one(t, tx, `SELECT * FROM backoff.claim('q', 'w', 1, NULL, NULL)`)
	require.Equal(t, now, *one(t, tx, `SELECT * FROM backoff.complete($1, $2, NULL)`, c2.ID, c2.Attempts).CompletedAt)
	c3 := one(t, tx, `SELECT * FROM backoff.claim('q', 'w', 1, NULL, NULL)`)
	require.Equal(t, []int64{c3.ID}, scalar[[]int64](t, tx, `SELECT array_agg(x) FROM backoff.complete_many(ARRAY[$1::bigint], ARRAY[$2::integer], NULL) AS x`, c3.ID, c3.Attempts))
	require.Equal(t, now, *one(t, tx, `SELECT * FROM backoff.cancel($1, 'no', NULL)`, id).CompletedAt)
	require.Equal(t, now, one(t, tx, `SELECT * FROM backoff.replay($1, NULL)`, id).RunAt)
	require.Equal(t, 0, scalar[int](t, tx, `SELECT backoff.prune('1 day', 10, NULL)`))
	require.Equal(t, 1, scalar[int](t, tx, `SELECT count(*)::int FROM backoff.stats('1 hour', NULL) WHERE due >= 1`))
}
