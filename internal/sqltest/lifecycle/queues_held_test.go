package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// queuesHeld is the published answer of backoff._queues_held(): whether
// some queue has a control (docs/adr/0094).
func queuesHeld(t testing.TB, q querier) bool {
	t.Helper()
	return scalar[bool](t, q, `SELECT backoff._queues_held()`)
}

// TestClaimsFollowAPublishedControl: while no queue has a control the
// published answer is false and the claims' plans leave backoff.queues
// out; a control set by any writer (backoff.pause_queue, an
// administrator's UPDATE or INSERT) turns it true in its own transaction,
// and a session whose plans were cached with false honours the control
// from its next transaction, at every isolation level. Only rotate at READ
// COMMITTED turns it false again, once no queue has a control.
func TestClaimsFollowAPublishedControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	worker := connOn(t, url)
	operator := connOn(t, url)
	require.False(t, queuesHeld(t, operator), "a fresh install has no control")

	// The worker caches its plans with false, several times over.
	for range 6 {
		enqueue(t, worker, "held", t0)
		j := claimOne(t, worker, "held", t0)
		one(t, worker, `SELECT * FROM backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
	}
	enqueue(t, worker, "held", t0)

	claimsNothing := func(why string) {
		t.Helper()
		for _, level := range []string{"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"} {
			tx, err := worker.Begin(ctx)
			require.NoError(t, err)
			exec(t, tx, "SET TRANSACTION ISOLATION LEVEL "+level)
			require.Empty(t, claim(t, tx, "held", "w1", 10, t0), "%s, %s", why, level)
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	claimsOne := func(why string) {
		t.Helper()
		tx, err := worker.Begin(ctx)
		require.NoError(t, err)
		require.Len(t, claim(t, tx, "held", "w1", 10, t0), 1, why)
		require.NoError(t, tx.Rollback(ctx))
	}

	exec(t, operator, `SELECT backoff.pause_queue('held')`)
	require.True(t, queuesHeld(t, worker))
	claimsNothing("paused by pause_queue")

	exec(t, operator, `SELECT backoff.resume_queue('held')`)
	require.True(t, queuesHeld(t, operator), "resuming does not publish false")
	claimsOne("resumed")
	tx, err := operator.Begin(ctx)
	require.NoError(t, err)
	exec(t, tx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	rotate(t, tx)
	require.NoError(t, tx.Commit(ctx))
	require.True(t, queuesHeld(t, operator), "rotate publishes false at READ COMMITTED only")
	rotate(t, operator)
	require.False(t, queuesHeld(t, operator), "rotate publishes false once no queue has a control")
	claimsOne("no control")

	// An administrator's own statements, as backoff_admin.
	admin, err := operator.Begin(ctx)
	require.NoError(t, err)
	exec(t, admin, `SET LOCAL ROLE backoff_admin`)
	exec(t, admin, `UPDATE backoff.queues SET paused = true WHERE name = 'held'`)
	require.NoError(t, admin.Commit(ctx))
	require.True(t, queuesHeld(t, worker), "an UPDATE by hand publishes true")
	claimsNothing("paused by an UPDATE")
	exec(t, operator, `UPDATE backoff.queues SET paused = false WHERE name = 'held'`)
	rotate(t, operator)
	require.False(t, queuesHeld(t, operator))
	exec(t, operator, `DELETE FROM backoff.queues WHERE name = 'held'`)
	exec(t, operator, `INSERT INTO backoff.queues (name, policy, paused) VALUES ('held', 'default', true)`)
	require.True(t, queuesHeld(t, worker), "an INSERT by hand publishes true")
	claimsNothing("paused by an INSERT")
	exec(t, operator, `UPDATE backoff.queues SET paused = false WHERE name = 'held'`)
	rotate(t, operator)
	require.False(t, queuesHeld(t, operator))

	// A write that fired no trigger (a restore, a replica's apply): rotate
	// repairs the answer in both directions.
	exec(t, operator, `SELECT backoff._publish_queues_held(false)`)
	exec(t, operator, `SET session_replication_role = replica`)
	exec(t, operator, `UPDATE backoff.queues SET paused = true WHERE name = 'held'`)
	exec(t, operator, `RESET session_replication_role`)
	require.False(t, queuesHeld(t, operator), "no trigger fired")
	rotate(t, operator)
	require.True(t, queuesHeld(t, worker), "rotate publishes what backoff.queues says")
	claimsNothing("paused without a trigger, after rotate")
}

// TestControlsPublishedConcurrently: publishers go one at a time, so
// concurrent writers of controls never fail on the catalog row they both
// replace, and a rotate that would publish false while a control is being
// set waits for it and then sees it.
func TestControlsPublishedConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	a, b, c := connOn(t, url), connOn(t, url), connOn(t, url)
	waiting := func() {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for scalar[int](t, c, `SELECT count(*)::int FROM pg_catalog.pg_locks
		                        WHERE NOT granted AND relation = 'backoff.queues'::pg_catalog.regclass`) == 0 {
			require.True(t, time.Now().Before(deadline), "nobody waits for the publisher's lock")
			time.Sleep(10 * time.Millisecond)
		}
	}
	background := func(sql string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := b.Exec(ctx, sql)
			done <- err
		}()
		return done
	}

	// Two writers of controls, the second while the first is open.
	tx, err := a.Begin(ctx)
	require.NoError(t, err)
	exec(t, tx, `SELECT backoff.pause_queue('one', p_create => true)`)
	second := background(`SELECT backoff.pause_queue('two', p_create => true)`)
	waiting()
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-second)
	require.True(t, queuesHeld(t, c))

	// A rotate that finds no control while one is being set.
	exec(t, c, `SELECT backoff.resume_queue('one'), backoff.resume_queue('two')`)
	require.True(t, queuesHeld(t, c))
	tx, err = a.Begin(ctx)
	require.NoError(t, err)
	exec(t, tx, `SELECT backoff.pause_queue('one')`)
	rotating := background(`SELECT * FROM backoff.rotate()`)
	waiting()
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-rotating)
	require.True(t, queuesHeld(t, c), "the rotate waited for the pause and saw it")
	enqueue(t, c, "one", t0)
	require.Empty(t, claim(t, c, "one", "w1", 1, t0), fmt.Sprintf("queue %q is paused", "one"))
}
