package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// A lease no test here lets expire.
const wfLease = 5 * time.Minute

func wfStatus(t *testing.T, pool *pgxpool.Pool, id int64) Status {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT status FROM backoff.jobs WHERE id = $1", id).Scan(&s))
	return Status(s)
}

// claimOne claims the one due job of queue and checks it is want.
func claimOne(t *testing.T, c *Client, queue string, want int64) Job {
	t.Helper()
	jobs, err := c.Claim(context.Background(), queue, 10, wfLease)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "claimable jobs of %s", queue)
	require.Equal(t, want, jobs[0].ID)
	return jobs[0]
}

// Fan-out then fan-in across two queues: each child is claimable only once
// its parents completed, and reads their outputs in one call.
func TestWorkflowFanOutFanInWithOutputs(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))

	g := NewGraph().
		Add("extract", "wf-fan-etl", map[string]string{"table": "orders"}, nil).
		Add("eu", "wf-fan-etl", nil, []Dependency{After("extract")}).
		Add("us", "wf-fan-etl", nil, []Dependency{After("extract")}).
		Add("report", "wf-fan-reports", nil, []Dependency{After("eu"), After("us").Or(OnFailureRun)})
	ids, err := c.EnqueueGraph(ctx, g)
	require.NoError(t, err)
	require.Len(t, ids, 4)
	for _, ref := range []string{"eu", "us", "report"} {
		require.Equal(t, StatusBlocked, wfStatus(t, pool, ids[ref]), ref)
	}
	_, err = c.Acquire(ctx, ids["eu"], wfLease)
	require.ErrorIs(t, err, ErrNotReady, "a blocked job cannot be acquired")

	ex := claimOne(t, c, "wf-fan-etl", ids["extract"])
	_, err = c.CompleteWithOutput(ctx, ex.ID, ex.Token, map[string]int{"rows": 3})
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "wf-fan-etl", 10, wfLease)
	require.NoError(t, err)
	require.Len(t, jobs, 2, "both children of extract are released by its completion")
	none, err := c.Claim(ctx, "wf-fan-reports", 10, wfLease)
	require.NoError(t, err)
	require.Empty(t, none, "report waits for eu and us")

	_, err = c.CompleteWithOutput(ctx, jobs[0].ID, jobs[0].Token, map[string]int64{"id": jobs[0].ID})
	require.NoError(t, err)
	require.Equal(t, StatusBlocked, wfStatus(t, pool, ids["report"]), "one parent of two")
	var done []int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT array_agg(x) FROM backoff.complete_many($1, $2, $3, $4) AS x",
		[]int64{jobs[1].ID}, []int32{int32(jobs[1].Token)}, now, []string{`{"id": 0}`}).Scan(&done))
	require.Equal(t, []int64{jobs[1].ID}, done)

	rep := claimOne(t, c, "wf-fan-reports", ids["report"])
	parents, err := c.ParentOutputs(ctx, rep.ID)
	require.NoError(t, err)
	require.Len(t, parents, 2)
	got := map[int64]string{}
	for _, p := range parents {
		require.Equal(t, StatusCompleted, p.Status)
		got[p.ParentID] = string(p.Output)
	}
	require.JSONEq(t, `{"id": 0}`, got[jobs[1].ID], "complete_many's output")
	out, err := c.JobOutput(ctx, ex.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows": 3}`, string(out))
	out, err = c.JobOutput(ctx, rep.ID)
	require.NoError(t, err)
	require.Nil(t, out, "no output before completion")
}

// Each edge policy, with a parent dead-lettered or cancelled.
func TestWorkflowEdgePolicies(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))

	// parent -> child (policy) -> grandchild ('cancel'); the parent fails.
	enqueue := func(t *testing.T, queue string, p OnFailure) map[string]int64 {
		ids, err := c.EnqueueGraph(ctx, NewGraph().
			Add("parent", queue, nil, nil).
			Add("child", queue, nil, []Dependency{After("parent").Or(p)}).
			Add("grandchild", queue, nil, []Dependency{After("child")}))
		require.NoError(t, err)
		return ids
	}
	failParent := func(t *testing.T, queue string, id int64) {
		j := claimOne(t, c, queue, id)
		_, err := c.Fail(ctx, j.ID, j.Token, "broken", NonRetryable())
		require.NoError(t, err)
	}

	t.Run("cancel", func(t *testing.T) {
		ids := enqueue(t, "wf-policy-cancel", OnFailureCancel)
		failParent(t, "wf-policy-cancel", ids["parent"])
		for _, ref := range []string{"child", "grandchild"} {
			j, err := c.Get(ctx, ids[ref])
			require.NoError(t, err)
			require.Equal(t, StatusCancelled, j.Status, ref)
		}
		child, err := c.Get(ctx, ids["child"])
		require.NoError(t, err)
		require.Contains(t, child.LastError, "parent job")
		require.Contains(t, child.LastError, "dead_lettered")
	})
	t.Run("run", func(t *testing.T) {
		ids := enqueue(t, "wf-policy-run", OnFailureRun)
		failParent(t, "wf-policy-run", ids["parent"])
		j := claimOne(t, c, "wf-policy-run", ids["child"])
		_, err := c.Complete(ctx, j.ID, j.Token)
		require.NoError(t, err)
		claimOne(t, c, "wf-policy-run", ids["grandchild"])
	})
	t.Run("wait then unblock", func(t *testing.T) {
		ids := enqueue(t, "wf-policy-wait", OnFailureWait)
		_, err := pool.Exec(ctx, "SELECT backoff.cancel($1, 'not needed', $2)", ids["parent"], now)
		require.NoError(t, err)
		require.Equal(t, StatusBlocked, wfStatus(t, pool, ids["child"]))
		none, err := c.Claim(ctx, "wf-policy-wait", 10, wfLease)
		require.NoError(t, err)
		require.Empty(t, none)
		_, err = pool.Exec(ctx, "SELECT backoff.unblock($1, $2)", ids["child"], now)
		require.NoError(t, err)
		claimOne(t, c, "wf-policy-wait", ids["child"])
		require.Equal(t, StatusBlocked, wfStatus(t, pool, ids["grandchild"]))
	})
	t.Run("wait then replay", func(t *testing.T) {
		ids := enqueue(t, "wf-policy-replay", OnFailureWait)
		failParent(t, "wf-policy-replay", ids["parent"])
		require.Equal(t, StatusBlocked, wfStatus(t, pool, ids["child"]))
		_, err := pool.Exec(ctx, "SELECT backoff.replay($1, $2)", ids["parent"], now)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, "SELECT backoff.unblock($1, $2)", ids["child"], now)
		require.Equal(t, "BK003", testdb.SQLState(err), "the child waits for the replayed run, not for an operator")
		j := claimOne(t, c, "wf-policy-replay", ids["parent"])
		_, err = c.Complete(ctx, j.ID, j.Token)
		require.NoError(t, err)
		claimOne(t, c, "wf-policy-replay", ids["child"])
	})
	t.Run("parent failed before the child was enqueued", func(t *testing.T) {
		ids := enqueue(t, "wf-policy-late", OnFailureRun)
		failParent(t, "wf-policy-late", ids["parent"])
		late, err := c.EnqueueGraph(ctx, NewGraph().
			Add("cancelled", "wf-policy-late", nil, []Dependency{AfterJob(ids["parent"])}).
			Add("runs", "wf-policy-late-run", nil, []Dependency{AfterJob(ids["parent"]).Or(OnFailureRun)}))
		require.NoError(t, err)
		require.Equal(t, StatusCancelled, wfStatus(t, pool, late["cancelled"]))
		require.Equal(t, StatusPending, wfStatus(t, pool, late["runs"]))
	})
}

// Cycles, self-edges, unknown refs and ids are refused, naming them, and
// nothing is enqueued.
func TestWorkflowRefusesBadGraphs(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	c := newTestClient(t, pool)
	for name, tc := range map[string]struct {
		g    *Graph
		want string
	}{
		"cycle": {NewGraph().
			Add("a", "wf-bad", nil, []Dependency{After("c")}).
			Add("b", "wf-bad", nil, []Dependency{After("a")}).
			Add("c", "wf-bad", nil, []Dependency{After("b")}), `cycle through "a", "b", "c"`},
		// The jobs before the cycle are not named; those after it are.
		"cycle with a way in and out": {NewGraph().
			Add("root", "wf-bad", nil, nil).
			Add("a", "wf-bad", nil, []Dependency{After("root"), After("c")}).
			Add("b", "wf-bad", nil, []Dependency{After("a")}).
			Add("c", "wf-bad", nil, []Dependency{After("b")}).
			Add("after", "wf-bad", nil, []Dependency{After("c"), After("root")}).
			Add("free", "wf-bad", nil, []Dependency{After("root")}), `cycle through "a", "b", "c", "after"`},
		"self":        {NewGraph().Add("a", "wf-bad", nil, []Dependency{After("a")}), `job "a" depends on itself`},
		"unknown ref": {NewGraph().Add("a", "wf-bad", nil, []Dependency{After("nope")}), `unknown ref "nope"`},
		"unknown id":  {NewGraph().Add("a", "wf-bad", nil, []Dependency{AfterJob(987654)}), `job "987654", which does not exist`},
		"policy":      {NewGraph().Add("a", "wf-bad", nil, nil).Add("b", "wf-bad", nil, []Dependency{After("a").Or("later")}), `unknown on_failure "later"`},
	} {
		_, err := c.EnqueueGraph(ctx, tc.g)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		require.Contains(t, err.Error(), tc.want, name)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.jobs WHERE queue = 'wf-bad'").Scan(&n))
	require.Zero(t, n)
}

// Two last parents completed at the same time in two sessions: the child
// is released whatever the isolation level (at REPEATABLE READ and
// SERIALIZABLE the second gets a serialization failure, and its retry
// releases it).
func TestWorkflowTwoLastParentsAtOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))
	for _, level := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		queue := "wf-race-" + string(level)
		t.Run(string(level), func(t *testing.T) {
			ids, err := c.EnqueueGraph(ctx, NewGraph().
				Add("p1", queue, nil, nil).Add("p2", queue, nil, nil).
				Add("child", queue+"-child", nil, []Dependency{After("p1"), After("p2")}))
			require.NoError(t, err)
			jobs, err := c.Claim(ctx, queue, 10, wfLease)
			require.NoError(t, err)
			require.Len(t, jobs, 2)

			complete := func(tx pgx.Tx, j Job) error {
				_, err := tx.Exec(ctx, "SELECT backoff.complete($1, $2, $3)", j.ID, j.Token, now)
				return err
			}
			tx1, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
			require.NoError(t, err)
			tx2, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
			require.NoError(t, err)
			// Both snapshots taken before either completes.
			_, err = tx2.Exec(ctx, "SELECT count(*) FROM backoff.job_blockers")
			require.NoError(t, err)
			require.NoError(t, complete(tx1, jobs[0]))
			second := make(chan error, 1)
			go func() { second <- complete(tx2, jobs[1]) }()
			select {
			case err := <-second:
				t.Fatalf("the second last parent did not wait for the first's lock: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			require.NoError(t, tx1.Commit(ctx))
			err = <-second
			if err != nil {
				var pe *pgconn.PgError
				require.True(t, errors.As(err, &pe), "%v", err)
				require.Equal(t, "40001", pe.Code, "only a serialization failure, at %s", level)
				require.NotEqual(t, pgx.ReadCommitted, level, "READ COMMITTED re-reads the locked counter")
				require.NoError(t, tx2.Rollback(ctx))
				tx3, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
				require.NoError(t, err)
				require.NoError(t, complete(tx3, jobs[1]))
				require.NoError(t, tx3.Commit(ctx))
			} else {
				require.NoError(t, tx2.Commit(ctx))
			}
			claimOne(t, c, queue+"-child", ids["child"])
		})
	}
}

// prune keeps a finished parent and its output while a dependent is
// unfinished, and deletes them with the dependent once it finished.
func TestWorkflowPruneKeepsWhatADependentNeeds(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))
	ids, err := c.EnqueueGraph(ctx, NewGraph().
		Add("a", "wf-prune", nil, nil).
		Add("b", "wf-prune-b", nil, nil).
		Add("child", "wf-prune-child", nil, []Dependency{After("a"), After("b")}))
	require.NoError(t, err)
	a := claimOne(t, c, "wf-prune", ids["a"])
	_, err = c.CompleteWithOutput(ctx, a.ID, a.Token, "kept")
	require.NoError(t, err)

	later := now.Add(48 * time.Hour)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT backoff.prune('1 hour', 100, $1)", later).Scan(&n))
	require.Zero(t, n, "a is needed by its blocked child")
	out, err := c.JobOutput(ctx, a.ID)
	require.NoError(t, err)
	require.JSONEq(t, `"kept"`, string(out))

	b := claimOne(t, c, "wf-prune-b", ids["b"])
	_, err = c.Complete(ctx, b.ID, b.Token)
	require.NoError(t, err)
	child := claimOne(t, c, "wf-prune-child", ids["child"])
	require.NoError(t, pool.QueryRow(ctx, "SELECT backoff.prune('1 hour', 100, $1)", later).Scan(&n))
	require.Zero(t, n, "the running child still reads its parents")
	_, err = c.Complete(ctx, child.ID, child.Token)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, "SELECT backoff.prune('1 hour', 100, $1)", later).Scan(&n))
	require.Equal(t, 3, n)
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT (SELECT count(*) FROM backoff.job_outputs) + (SELECT count(*) FROM backoff.job_dependencies)").Scan(&n))
	require.Zero(t, n, "outputs and edges go with their jobs")
}

// Outputs over the queue's limit are refused and the job stays running;
// progress sent with a heartbeat shows in job_detail.
func TestWorkflowOutputLimitAndProgress(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))
	_, err := pool.Exec(ctx, "INSERT INTO backoff.queues (name, policy, max_output_bytes) VALUES ('wf-limit', 'default', 2048)")
	require.NoError(t, err)
	id, err := c.Enqueue(ctx, "wf-limit", nil)
	require.NoError(t, err)
	j := claimOne(t, c, "wf-limit", id)

	_, err = c.HeartbeatProgress(ctx, j.ID, j.Token, wfLease, map[string]int{"done": 40, "of": 100})
	require.NoError(t, err)
	var progress []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT progress FROM backoff.job_detail($1)", id).Scan(&progress))
	require.JSONEq(t, `{"done": 40, "of": 100}`, string(progress))

	big := json.RawMessage(`"` + string(make([]byte, 0)) + stringOf('x', 4000) + `"`)
	_, err = c.CompleteWithOutput(ctx, j.ID, j.Token, big)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "over max_output_bytes")
	require.Equal(t, StatusRunning, wfStatus(t, pool, id), "the refused completion changed nothing")
	_, err = c.CompleteWithOutput(ctx, j.ID, j.Token, "small")
	require.NoError(t, err)
}

func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// A graph that names a running job as a parent commits while that job's
// completion is under way in a transaction that took its snapshot before:
// the child is released whatever the isolation level (at REPEATABLE READ
// and SERIALIZABLE the completion fails with a serialization error, and its
// retry sees the new edge).
func TestWorkflowEdgeToAParentCompletingMeanwhile(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))
	for _, level := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		queue := "wf-late-edge-" + string(level)
		t.Run(string(level), func(t *testing.T) {
			parent, err := c.Enqueue(ctx, queue, nil)
			require.NoError(t, err)
			p := claimOne(t, c, queue, parent)
			complete := func() error {
				tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
				require.NoError(t, err)
				defer func() { _ = tx.Rollback(ctx) }()
				if _, err := tx.Exec(ctx, "SELECT backoff.complete($1, $2, $3)", p.ID, p.Token, now); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, "SELECT count(*) FROM backoff.job_dependencies") // the snapshot, before the edge
			require.NoError(t, err)

			ids, err := c.EnqueueGraph(ctx, NewGraph().Add("child", queue+"-child", nil, []Dependency{AfterJob(parent)}))
			require.NoError(t, err)
			require.Equal(t, StatusBlocked, wfStatus(t, pool, ids["child"]))

			_, err = tx.Exec(ctx, "SELECT backoff.complete($1, $2, $3)", p.ID, p.Token, now)
			if level == pgx.ReadCommitted {
				require.NoError(t, err)
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.Equal(t, "40001", testdb.SQLState(err), "%v", err)
				require.NoError(t, tx.Rollback(ctx))
				require.NoError(t, complete())
			}
			claimOne(t, c, queue+"-child", ids["child"])
		})
	}
}
