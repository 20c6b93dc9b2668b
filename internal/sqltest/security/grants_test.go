package security

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// groupRole creates a NOLOGIN role that is a member of group, dropped when
// the test ends. Tests act as it with SET LOCAL ROLE (asRole).
func groupRole(t *testing.T, group string) string {
	t.Helper()
	return testdb.TempRole(t, "backoff_test_", "NOLOGIN IN ROLE "+pgx.Identifier{group}.Sanitize())
}

// queueFixtures are, per queue, one pending job, one running job (attempt
// 1, lease of an hour) and one running job whose lease has expired.
type queueFixtures struct {
	pending, running, expired int64
}

func makeQueueFixtures(t *testing.T, pool *pgxpool.Pool, queue string) queueFixtures {
	t.Helper()
	ctx := context.Background()
	q := func(sql string, args ...any) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	var f queueFixtures
	f.running = q(`SELECT backoff.enqueue($1, p_now => $2)`, queue, t0)
	q(`SELECT id FROM backoff.claim($1, 'w0', 1, '1 hour', $2)`, queue, t0)
	f.expired = q(`SELECT backoff.enqueue($1, p_now => $2)`, queue, t0)
	q(`SELECT id FROM backoff.claim($1, 'w0', 1, '1 second', $2)`, queue, t0)
	f.pending = q(`SELECT backoff.enqueue($1, p_now => $2)`, queue, t0)
	return f
}

// TestQueueGrantsMatrix: two scoped worker roles, a scoped producer and an
// unscoped worker, two queues, every function that touches a queue's jobs.
// A scoped role acts on its granted queues only: 42501 naming the queue
// where it names the queue itself (claim, queue_state), and for another
// queue's job exactly what a missing id gets (BK001; complete_many skips
// it; docs/adr/0058); a role without grants keeps acting on every queue
// while require_queue_grants is off (the test template's setting).
//
// Against version 3 (no grants) this reproduced "every worker owns every
// queue": worker A completed, failed, snoozed and dead-lettered queue B's
// jobs and read its payloads.
func TestQueueGrantsMatrix(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	workerA := groupRole(t, worker)
	workerB := groupRole(t, worker)
	producerA := groupRole(t, producer)
	plainWorker := groupRole(t, worker)

	queues := []string{"mail.a", "sms.b1"}
	fx := map[string]queueFixtures{}
	for _, q := range queues {
		fx[q] = makeQueueFixtures(t, pool, q)
	}
	for _, g := range [][3]string{
		{workerA, "mail.a", "work"},
		{workerB, "sms.*", "work"},
		{producerA, "mail.a", "produce"},
	} {
		_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, $2, $3)`, g[0], g[1], g[2])
		require.NoError(t, err, "grant %v", g)
	}

	now := t0.Add(time.Minute)
	type call struct {
		name string
		sql  string
		args func(q string) []any
	}
	calls := []call{
		{"claim", `SELECT * FROM backoff.claim($1, 'w', 1, NULL, $2)`, func(q string) []any { return []any{q, now} }},
		{"acquire", `SELECT * FROM backoff.acquire($1, 'w', NULL, $2)`, func(q string) []any { return []any{fx[q].pending, now} }},
		{"complete", `SELECT * FROM backoff.complete($1, 1, $2)`, func(q string) []any { return []any{fx[q].running, now} }},
		{"complete_many", `SELECT backoff.complete_many(ARRAY[$1::bigint], ARRAY[1], $2)`, func(q string) []any { return []any{fx[q].running, now} }},
		{"fail", `SELECT * FROM backoff.fail($1, 1, 'boom', NULL, false, $2)`, func(q string) []any { return []any{fx[q].running, now} }},
		{"heartbeat", `SELECT backoff.heartbeat($1, 1, NULL, $2)`, func(q string) []any { return []any{fx[q].running, now} }},
		{"snooze", `SELECT * FROM backoff.snooze($1, 1, '1 minute', $2)`, func(q string) []any { return []any{fx[q].running, now} }},
		// Queue controls: a scoped caller reads its queues' state only.
		{"queue_state", `SELECT * FROM backoff.queue_state($1, $2)`, func(q string) []any { return []any{q, now} }},
		// Stale attempt: the fencing error must not describe another
		// queue's job either.
		{"complete stale", `SELECT * FROM backoff.complete($1, 7, $2)`, func(q string) []any { return []any{fx[q].running, now} }},
	}
	byID := map[string]bool{"acquire": true, "complete": true, "fail": true, "heartbeat": true, "snooze": true}
	granted := map[string]map[string]bool{
		workerA:     {"mail.a": true},
		workerB:     {"sms.b1": true},
		plainWorker: {"mail.a": true, "sms.b1": true},
	}
	for _, c := range calls {
		for _, role := range []string{workerA, workerB, plainWorker} {
			for _, q := range queues {
				name := fmt.Sprintf("%s/%s/%s", c.name, role, q)
				err := asRole(ctx, pool, role, c.sql, c.args(q)...)
				if c.name == "complete stale" {
					if granted[role][q] {
						require.Equal(t, "BK002", sqlState(err), "%s: %v", name, err)
					} else {
						require.Equal(t, "BK001", sqlState(err), "%s: %v", name, err)
					}
					continue
				}
				switch {
				case granted[role][q] || c.name == "complete_many":
					// complete_many leaves another queue's job alone, as
					// it leaves an unknown id.
					require.NoError(t, err, name)
				case byID[c.name]:
					require.Equal(t, "BK001", sqlState(err), "%s: %v", name, err)
					require.NotContains(t, err.Error(), q, "%s: the error must not name the queue", name)
				default:
					require.Error(t, err, name)
					require.Equal(t, "42501", sqlState(err), "%s: %v", name, err)
					require.Contains(t, err.Error(), `"`+q+`"`, "%s: the error names the queue", name)
				}
			}
		}
	}

	// enqueue: the scoped producer produces into its queue only; a
	// scoped worker has no EXECUTE on enqueue at all.
	require.NoError(t, asRole(ctx, pool, producerA, `SELECT backoff.enqueue('mail.a', p_now => $1)`, now))
	jobsIn := func(queue string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = $1`, queue).Scan(&n))
		return n
	}
	before := jobsIn("sms.b1")
	err := asRole(ctx, pool, producerA, `SELECT backoff.enqueue('sms.b1', p_now => $1)`, now)
	require.Equal(t, "42501", sqlState(err), "producer into another queue: %v", err)
	require.Contains(t, err.Error(), `"sms.b1"`)
	// enqueue checks the grants after its INSERT (one statement for both):
	// the refusal must undo it.
	require.Equal(t, before, jobsIn("sms.b1"), "a refused enqueue left its job behind")
	err = asRole(ctx, pool, producerA, `SELECT * FROM backoff.enqueue(ARRAY['mail.a', 'sms.b1'], NULL, NULL, NULL, NULL, NULL, $1)`, now)
	require.Equal(t, "42501", sqlState(err), "bulk enqueue with one foreign queue: %v", err)
	err = asRole(ctx, pool, producerA, `SELECT * FROM backoff.enqueue(ARRAY['mail.a', 'sms.b1'], NULL, NULL, NULL, NULL, ARRAY['k1', 'k2'], $1)`, now)
	require.Equal(t, "42501", sqlState(err), "bulk enqueue with dedupe keys and one foreign queue: %v", err)

	// queue_state: producers may read a queue's controls (the Worker's
	// producer side asks it), scoped by their 'work' grants like workers.
	unscopedProducer := groupRole(t, producer)
	require.NoError(t, asRole(ctx, pool, unscopedProducer, `SELECT * FROM backoff.queue_state('sms.b1', $1)`, now))
	err = asRole(ctx, pool, producerA, `SELECT * FROM backoff.queue_state('mail.a', $1)`, now)
	require.Equal(t, "42501", sqlState(err), "a producer scoped without 'work' grants: %v", err)

	// reap: a scoped worker reaps the expired leases of its queues only.
	reaped := func(role string) []string {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT backoff.reap($1)`, now).Scan(&n))
		_, err = tx.Exec(ctx, "RESET ROLE")
		require.NoError(t, err)
		var qs []string
		require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(array_agg(queue ORDER BY queue), '{}') FROM backoff.jobs WHERE status = 'retrying' AND last_error = 'lease expired'`).Scan(&qs))
		require.Len(t, qs, n)
		return qs
	}
	require.Equal(t, []string{"mail.a"}, reaped(workerA))
	require.Equal(t, []string{"sms.b1"}, reaped(workerB))
	require.Equal(t, []string{"mail.a", "sms.b1"}, reaped(plainWorker))

	// Reading the jobs table: workers do not (EXPLAIN ANALYZE would count
	// the rows row-level security removed); they read a job by id through
	// backoff.job, which applies the scope.
	for _, role := range []string{workerA, plainWorker} {
		err := asRole(ctx, pool, role, `SELECT count(*) FROM backoff.jobs`)
		require.Equal(t, "42501", sqlState(err), "%s read the jobs table: %v", role, err)
	}
	require.Equal(t, []string{"mail.a", "sms.b1"}, rowsAs(t, pool, admin, `SELECT DISTINCT queue FROM backoff.jobs ORDER BY queue`))

	// Revoking the last grant makes a role unscoped again.
	var removed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.revoke_queue($1, 'sms.*', 'work')`, workerB).Scan(&removed))
	require.True(t, removed)
	require.NoError(t, asRole(ctx, pool, workerB, `SELECT * FROM backoff.claim('mail.a', 'w', 1, NULL, $1)`, now))
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.revoke_queue($1, 'sms.*', 'work')`, workerB).Scan(&removed))
	require.False(t, removed, "nothing left to revoke")
}

// TestQueueGrantsFollowTheLogin: a scoped login cannot widen its scope
// with SET ROLE to the unscoped group role it belongs to.
func TestQueueGrantsFollowTheLogin(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	makeQueueFixtures(t, pool, "mine")
	makeQueueFixtures(t, pool, "theirs")
	loginURL := testdb.LoginRole(t, dbURL, worker)
	conn, err := pgx.Connect(ctx, loginURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var login string
	require.NoError(t, conn.QueryRow(ctx, `SELECT session_user`).Scan(&login))
	_, err = pool.Exec(ctx, `SELECT backoff.grant_queue($1, 'mine', 'work')`, login)
	require.NoError(t, err)

	now := t0.Add(time.Minute)
	_, err = conn.Exec(ctx, `SELECT * FROM backoff.claim('theirs', 'w', 1, NULL, $1)`, now)
	require.Equal(t, "42501", sqlState(err), "%v", err)
	_, err = conn.Exec(ctx, `SET ROLE backoff_worker`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT * FROM backoff.claim('theirs', 'w', 1, NULL, $1)`, now)
	require.Equal(t, "42501", sqlState(err), "SET ROLE to the group escaped the grant: %v", err)
	_, err = conn.Exec(ctx, `SELECT * FROM backoff.claim('mine', 'w', 1, NULL, $1)`, now)
	require.NoError(t, err)

	// Through the Go client: a typed, non-retryable error naming the queue.
	c, err := client.New(ctx, testdb.Pool(t, loginURL))
	require.NoError(t, err)
	_, err = c.Claim(ctx, "theirs", 1, time.Minute)
	require.ErrorIs(t, err, client.ErrPermissionDenied)
	require.ErrorContains(t, err, `queue "theirs"`)
	_, err = c.Claim(ctx, "mine", 1, time.Minute)
	require.NoError(t, err)
}

// TestGrantQueueValidation: bad roles, privileges and queue patterns are
// 22023 naming the value; a grant is idempotent.
func TestGrantQueueValidation(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	role := groupRole(t, worker)
	for _, c := range []struct{ role, queue, priv, want string }{
		{"no_such_role_xyz", "q", "work", `"no_such_role_xyz"`},
		{role, "q", "own", `"own"`},
		{role, "", "work", `""`},
		{role, "a\x1b[2Jb", "work", "queue"},
		{role, string(make([]byte, 129)), "work", "queue"},
	} {
		_, err := pool.Exec(ctx, `SELECT backoff.grant_queue($1, $2, $3)`, c.role, c.queue, c.priv)
		if c.queue == string(make([]byte, 129)) {
			// NUL bytes cannot even be sent as text.
			require.Error(t, err)
			continue
		}
		require.Equal(t, "22023", sqlState(err), "%+v: %v", c, err)
		require.Contains(t, err.Error(), c.want)
	}
	for i := 0; i < 2; i++ {
		var added bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.grant_queue($1, 'q*', 'work')`, role).Scan(&added))
		require.Equal(t, i == 0, added)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.queue_grants`).Scan(&n))
	require.Equal(t, 1, n)

	// grant_queue and revoke_queue check the role and the privilege alike,
	// each naming itself.
	for _, fn := range []string{"grant_queue", "revoke_queue"} {
		for _, c := range []struct{ role, priv, want string }{
			{"no_such_role_xyz", "work", fn + `: unknown role "no_such_role_xyz"`},
			{"", "work", fn + `: unknown role ""`},
			{role, "own", fn + `: privilege must be "produce" or "work", got "own"`},
			{role, "", fn + `: privilege must be "produce" or "work", got ""`},
		} {
			_, err := pool.Exec(ctx, `SELECT backoff.`+fn+`($1, 'q*', $2)`, c.role, c.priv)
			require.Equal(t, "22023", sqlState(err), "%s %+v: %v", fn, c, err)
			require.Equal(t, "ERROR: "+c.want+" (SQLSTATE 22023)", err.Error())
		}
		_, err := pool.Exec(ctx, `SELECT backoff.`+fn+`(NULL, 'q*', NULL)`)
		require.Equal(t, "22023", sqlState(err))
		require.ErrorContains(t, err, fn+`: unknown role "NULL"`)
	}
}
