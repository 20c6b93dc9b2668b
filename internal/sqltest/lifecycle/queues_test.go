package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJobPolicy: backoff.job_policy is the one answer to "which policy
// governs this job", with its fall-through, and claim's lease, enqueue's
// recorded policy and _job_policy agree with it.
func TestJobPolicy(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail") // p_mail: lease 1 minute
	exec(t, db, `INSERT INTO backoff.policies (name, lease) VALUES ('gone', '7 seconds')`)

	name := func(policy *string, queue string) string {
		return scalar[string](t, db, `SELECT backoff.job_policy($1, $2)`, policy, queue)
	}
	require.Equal(t, "gone", name(ptr("gone"), "mail"), "a recorded policy with a row wins")
	require.Equal(t, "p_mail", name(nil, "mail"), "no recorded policy: the queue's")
	require.Equal(t, "default", name(nil, "unmapped"), "no mapping: 'default'")
	require.Equal(t, "p_mail", name(ptr("never"), "mail"), "a name without a row falls through to the queue's")
	require.Equal(t, "default", name(ptr("never"), "unmapped"), "... and then to 'default'")

	// enqueue records the answer.
	id := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_policy => 'gone', p_now => $1)`, t0)
	require.Equal(t, ptr("gone"), get(t, db, id).Policy)
	bulk := scalar[[]int64](t, db, `SELECT array_agg(e) FROM backoff.enqueue(ARRAY['mail', 'unmapped'], NULL::jsonb[], NULL, NULL, NULL, NULL, $1) AS e`, t0)
	require.Equal(t, ptr("p_mail"), get(t, db, bulk[0]).Policy)
	require.Equal(t, ptr("default"), get(t, db, bulk[1]).Policy)

	// The recorded policy is deleted after enqueue: claim's lease follows the
	// queue's policy, as job_policy and _job_policy say.
	exec(t, db, `DELETE FROM backoff.policies WHERE name = 'gone'`)
	require.Equal(t, "p_mail", scalar[string](t, db, `SELECT (backoff._job_policy(policy, queue)).name FROM backoff.jobs WHERE id = $1`, id))
	j := one(t, db, `SELECT * FROM backoff.acquire($1, 'w', NULL, $2)`, id, t0)
	require.True(t, j.LeaseUntil.Equal(at(time.Minute)), "lease of p_mail, got %v", j.LeaseUntil)
	// heartbeat and fail take the same answer: p_mail's lease, its fixed delay.
	lease := scalar[time.Time](t, db, `SELECT backoff.heartbeat($1, $2, p_now => $3)`, id, j.Attempts, at(time.Second))
	require.True(t, lease.Equal(at(time.Second+time.Minute)), "heartbeat: lease of p_mail, got %v", lease)
	f := one(t, db, `SELECT * FROM backoff.fail($1, $2, 'boom', p_now => $3)`, id, j.Attempts, at(2*time.Second))
	require.Equal(t, "retrying", f.Status)
	require.True(t, f.RunAt.Equal(at(12*time.Second)), "fail: p_mail's fixed 10 seconds, got %v", f.RunAt)
	exec(t, db, `INSERT INTO backoff.policies (name, lease) VALUES ('gone2', '7 seconds')`)
	id2 := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_policy => 'gone2', p_now => $1)`, t0)
	exec(t, db, `DELETE FROM backoff.policies WHERE name = 'gone2'`)
	claimed := claim(t, db, "mail", "w", 10, t0)
	require.Len(t, claimed, 2)
	require.ElementsMatch(t, []int64{bulk[0], id2}, []int64{claimed[0].ID, claimed[1].ID})
	for _, j := range claimed {
		require.True(t, j.LeaseUntil.Equal(at(time.Minute)), "claim of job %d: lease of p_mail, got %v", j.ID, j.LeaseUntil)
	}

	// No policy row at all: 22023, not a job without a lease.
	exec(t, db, `INSERT INTO backoff.policies (name) VALUES ('only')`)
	enqueue(t, db, "orphan", t0)
	exec(t, db, `UPDATE backoff.jobs SET policy = NULL WHERE queue = 'orphan'`)
	exec(t, db, `UPDATE backoff.queues SET policy = 'only'`)
	exec(t, db, `DELETE FROM backoff.policies WHERE name NOT IN ('only')`)
	requireCode(t, execErr(db, `SELECT * FROM backoff.claim('orphan', 'w', 1, NULL, $1)`, t0), "22023")
}

// TestPauseResumeQueue: pause_queue stops claims of one queue (and only
// claims), resume_queue starts them again; both say whether they changed
// anything, and a queue without a row keeps its policy.
func TestPauseResumeQueue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail")
	enqueue(t, db, "mail", t0)
	enqueue(t, db, "mail", t0)
	other := enqueue(t, db, "unmapped", t0)

	require.True(t, scalar[bool](t, db, `SELECT backoff.pause_queue('mail')`))
	require.False(t, scalar[bool](t, db, `SELECT backoff.pause_queue('mail')`), "already paused")
	require.Empty(t, claim(t, db, "mail", "w", 10, t0))
	require.Equal(t, "p_mail", scalar[string](t, db, `SELECT policy FROM backoff.queues WHERE name = 'mail'`), "pausing keeps the policy")

	// An unmapped queue gets a row with the policy it had: 'default'.
	require.True(t, scalar[bool](t, db, `SELECT backoff.pause_queue('unmapped')`))
	require.Equal(t, "default", scalar[string](t, db, `SELECT policy FROM backoff.queues WHERE name = 'unmapped'`))
	require.Empty(t, claim(t, db, "unmapped", "w", 10, t0))
	// acquire by id is not stopped.
	require.Equal(t, other, one(t, db, `SELECT * FROM backoff.acquire($1, 'w', NULL, $2)`, other, t0).ID)

	require.True(t, scalar[bool](t, db, `SELECT backoff.resume_queue('mail')`))
	require.False(t, scalar[bool](t, db, `SELECT backoff.resume_queue('mail')`), "already running")
	requireCode(t, execErr(db, `SELECT backoff.resume_queue('never-seen')`), "22023") // no row, no job: no queue
	require.Len(t, claim(t, db, "mail", "w", 10, t0), 2)

	for _, bad := range []string{`SELECT backoff.pause_queue(NULL)`, `SELECT backoff.pause_queue('')`,
		`SELECT backoff.resume_queue(NULL)`, `SELECT backoff.resume_queue('')`} {
		pgErr := requireCode(t, execErr(db, bad), "22023")
		require.Contains(t, pgErr.Message, "queue must be 1 to 128 bytes", bad)
	}
}

// TestReplayDeadLetters: the bulk replay replays what it can in one
// statement and reports, per job, what it left and why; a second call finds
// nothing to do.
func TestReplayDeadLetters(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	usePolicy(t, db, "mail")
	kill := func(key *string) int64 {
		id := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_dedupe_key => $1, p_now => $2)`, key, t0)
		j := one(t, db, `SELECT * FROM backoff.acquire($1, 'w', NULL, $2)`, id, t0)
		exec(t, db, `SELECT backoff.fail($1, $2, 'boom', p_retryable => false, p_now => $3)`, id, j.Attempts, t0)
		require.Equal(t, "dead_lettered", get(t, db, id).Status)
		return id
	}
	free := kill(nil)
	held := kill(ptr("k1"))
	holder := scalar[int64](t, db, `SELECT backoff.enqueue('mail', p_dedupe_key => 'k1', p_now => $1)`, t0)
	first := kill(ptr("k2"))
	second := kill(ptr("k2"))
	other := scalar[int64](t, db, `SELECT backoff.enqueue('other', p_now => $1)`, t0)

	type outcome struct {
		ID       int64
		Replayed bool
		Reason   *string
	}
	replay := func() []outcome {
		rows, err := db.Query(context.Background(), `SELECT job_id, replayed, reason FROM backoff.replay_dead_letters('mail', $1)`, at(time.Minute))
		require.NoError(t, err)
		var out []outcome
		for rows.Next() {
			var o outcome
			require.NoError(t, rows.Scan(&o.ID, &o.Replayed, &o.Reason))
			out = append(out, o)
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, []outcome{
		{free, true, nil},
		{held, false, ptr(fmt.Sprintf("dedupe key 'k1' is held by unfinished job %d", holder))},
		{first, true, nil},
		{second, false, ptr(fmt.Sprintf("dedupe key 'k2' is held by job %d, replayed in this call", first))},
	}, replay())
	for _, id := range []int64{free, first} {
		j := get(t, db, id)
		require.Equal(t, "pending", j.Status)
		require.True(t, j.RunAt.Equal(at(time.Minute)))
		require.Nil(t, j.DeadLetterReason)
	}
	require.Equal(t, "dead_lettered", get(t, db, held).Status)
	require.Equal(t, "dead_lettered", get(t, db, second).Status)
	require.Equal(t, "pending", get(t, db, other).Status, "another queue is not touched")

	// What is left is reported again, nothing else.
	require.Len(t, replay(), 2)
	requireCode(t, execErr(db, `SELECT * FROM backoff.replay_dead_letters('')`), "22023")
}
