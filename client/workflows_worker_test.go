package client

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// A Worker's handler records an output with SetOutput: the job completes
// with it, which releases the child, whose handler reads it.
func TestWorkerHandlerOutputReleasesTheChild(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	ids, err := c.EnqueueGraph(ctx, NewGraph().
		Add("parent", "wf-worker", map[string]int{"n": 20}, nil).
		Add("child", "wf-worker", nil, []Dependency{After("parent")}))
	require.NoError(t, err)
	require.ErrorIs(t, SetOutput(ctx, 1), errNoOutputSlot, "outside a handler")

	var seen atomic.Value
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "wf-worker", Concurrency: 1, PollInterval: 100 * time.Millisecond, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			if job.ID == ids["parent"] {
				return SetOutput(ctx, map[string]int{"doubled": 40})
			}
			parents, err := c.ParentOutputs(ctx, job.ID)
			if err != nil {
				return err
			}
			seen.Store(string(parents[0].Output))
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "parent and child completed", func() bool { return countStatus(t, pool, StatusCompleted) == 2 })
	stop()
	require.JSONEq(t, `{"doubled": 40}`, seen.Load().(string))
	out, err := c.JobOutput(ctx, ids["parent"])
	require.NoError(t, err)
	require.JSONEq(t, `{"doubled": 40}`, string(out))
}

// A typed handler returns its output: the job completes with it, and a
// payload that does not decode dead-letters the job without one.
func TestHandlerWithOutputRecordsWhatItReturns(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	type order struct{ Cents int }
	type invoice struct{ Total string }
	good, err := c.Enqueue(ctx, "wf-typed", order{Cents: 1250})
	require.NoError(t, err)
	bad, err := c.Enqueue(ctx, "wf-typed", "not an order")
	require.NoError(t, err)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "wf-typed", Concurrency: 1, PollInterval: 100 * time.Millisecond, ReapInterval: -1,
		Handler: HandlerWithOutput(func(ctx context.Context, job *Job, o order) (invoice, error) {
			return invoice{Total: strconv.Itoa(o.Cents/100) + "." + strconv.Itoa(o.Cents%100)}, nil
		}),
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "both jobs settled", func() bool {
		return wfStatus(t, pool, good) == StatusCompleted && wfStatus(t, pool, bad) == StatusDeadLettered
	})
	stop()
	out, err := c.JobOutput(ctx, good)
	require.NoError(t, err)
	require.JSONEq(t, `{"Total": "12.50"}`, string(out))
	out, err = c.JobOutput(ctx, bad)
	require.NoError(t, err)
	require.Nil(t, out)
}

// A graph job whose dedupe key an unfinished job holds is that job: its
// child waits for it. A fan-in completed in one batch releases its child
// once, by the number of its parents in the batch.
func TestWorkflowDedupeAndBatchedFanIn(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return now }), WithWorkerID("wf"))

	held, err := c.Enqueue(ctx, "wf-dedupe", nil, DedupeKey("nightly"))
	require.NoError(t, err)
	ids, err := c.EnqueueGraph(ctx, NewGraph().
		Add("nightly", "wf-dedupe", nil, nil, DedupeKey("nightly")).
		Add("after", "wf-dedupe-after", nil, []Dependency{After("nightly")}))
	require.NoError(t, err)
	require.Equal(t, held, ids["nightly"], "the job that holds the key")
	require.Equal(t, StatusBlocked, wfStatus(t, pool, ids["after"]))
	j := claimOne(t, c, "wf-dedupe", held)
	_, err = c.Complete(ctx, j.ID, j.Token)
	require.NoError(t, err)
	claimOne(t, c, "wf-dedupe-after", ids["after"])

	g := NewGraph()
	var deps []Dependency
	for i := range 50 {
		ref := "p" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		g.Add(ref, "wf-fanin", nil, nil)
		deps = append(deps, After(ref))
	}
	g.Add("sink", "wf-fanin-sink", nil, deps)
	ids, err = c.EnqueueGraph(ctx, g)
	require.NoError(t, err)
	jobs, err := c.Claim(ctx, "wf-fanin", 100, wfLease)
	require.NoError(t, err)
	require.Len(t, jobs, 50)
	first, rest := jobs[:49], jobs[49:]
	var bids []int64
	var btok []int
	for _, j := range first {
		bids, btok = append(bids, j.ID), append(btok, j.Token)
	}
	done, err := c.CompleteMany(ctx, bids, btok)
	require.NoError(t, err)
	require.Len(t, done, 49)
	var open int
	require.NoError(t, pool.QueryRow(ctx, "SELECT parents_open FROM backoff.job_detail($1)", ids["sink"]).Scan(&open))
	require.Equal(t, 1, open, "49 parents of 50 settled by one batch")
	_, err = c.Complete(ctx, rest[0].ID, rest[0].Token)
	require.NoError(t, err)
	claimOne(t, c, "wf-fanin-sink", ids["sink"])
}

// An output over the queue's limit dead-letters the job with the refusal,
// instead of leaving it running for the reaper.
func TestWorkerOutputOverTheLimitDeadLetters(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "INSERT INTO backoff.queues (name, policy, max_output_bytes) VALUES ('wf-worker-big', 'default', 1024)")
	require.NoError(t, err)
	id, err := c.Enqueue(ctx, "wf-worker-big", nil)
	require.NoError(t, err)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "wf-worker-big", Concurrency: 1, PollInterval: 100 * time.Millisecond, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			return SetOutput(ctx, stringOf('x', 2000))
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "dead-lettered", func() bool { return countStatus(t, pool, StatusDeadLettered) == 1 })
	stop()
	j, err := c.Get(ctx, id)
	require.NoError(t, err)
	require.Contains(t, j.LastError, "over max_output_bytes")
}

// A handler's ReportProgress goes out with the next heartbeat and shows in
// job_detail while the job runs.
func TestWorkerReportsProgressWithItsHeartbeat(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "wf-worker-progress", nil)
	require.NoError(t, err)
	require.Error(t, ReportProgress(ctx, 1), "outside a handler")

	var shown atomic.Bool
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "wf-worker-progress", Concurrency: 1, PollInterval: 100 * time.Millisecond, ReapInterval: -1,
		Lease: time.Minute, HeartbeatInterval: 50 * time.Millisecond,
		Handler: func(ctx context.Context, job *Job) error {
			if err := ReportProgress(ctx, map[string]int{"step": 2}); err != nil {
				return err
			}
			require.ErrorIs(t, ReportProgress(ctx, stringOf('x', 9000)), ErrInvalidArgument)
			// Until a heartbeat has carried it (the handler's own wait:
			// the job must still be running when it is read).
			eventually(t, time.Minute, "progress recorded", func() bool {
				var p []byte
				err := pool.QueryRow(ctx, "SELECT progress FROM backoff.job_detail($1)", job.ID).Scan(&p)
				return err == nil && string(p) == `{"step": 2}`
			})
			shown.Store(true)
			return nil
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "completed", func() bool { return countStatus(t, pool, StatusCompleted) == 1 })
	stop()
	require.True(t, shown.Load())
	j, err := c.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, j.Status)
}

// Small outputs ride the Worker's batched completions, larger ones a call
// of their own: every job's output is recorded either way.
func TestWorkerRecordsEveryOutput(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	c := newTestClient(t, pool)
	ctx := context.Background()
	jobs := make([]NewJob, 30)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "wf-worker-outputs", Payload: map[string]int{"n": i}}
	}
	ids, err := c.EnqueueMany(ctx, jobs)
	require.NoError(t, err)
	long := stringOf('y', 500)
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "wf-worker-outputs", Concurrency: 10, BatchSize: 10, PollInterval: 100 * time.Millisecond, ReapInterval: -1,
		Handler: func(ctx context.Context, job *Job) error {
			var p struct{ N int }
			if err := job.UnmarshalPayload(&p); err != nil {
				return err
			}
			if p.N%3 == 0 {
				return SetOutput(ctx, map[string]string{"long": long})
			}
			return SetOutput(ctx, map[string]int{"n": p.N})
		},
	}, WithLogger(testLogger(t)))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "all completed", func() bool { return countStatus(t, pool, StatusCompleted) == 30 })
	stop()
	for i, id := range ids {
		out, err := c.JobOutput(ctx, id)
		require.NoError(t, err)
		if i%3 == 0 {
			require.JSONEq(t, `{"long": "`+long+`"}`, string(out), "job %d", i)
		} else {
			require.JSONEq(t, `{"n": `+strconv.Itoa(i)+`}`, string(out), "job %d", i)
		}
	}
}
