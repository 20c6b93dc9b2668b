package faulttest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/containers"
	"github.com/pgbackoff/pgbackoff/internal/pgserver"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// Environment of a worker subprocess (the test binary run again).
const (
	envWorkerURL   = "FAULTTEST_WORKER_URL"
	envWorkerQueue = "FAULTTEST_WORKER_QUEUE"
	envWorkerID    = "FAULTTEST_WORKER_ID"
	envWorkerSleep = "FAULTTEST_WORKER_SLEEP"
)

func TestMain(m *testing.M) {
	if os.Getenv(envWorkerURL) != "" {
		os.Exit(workerProcess())
	}
	// The package's container, and its restarts and pauses, through
	// Testcontainers (ADR 0086); a local cluster as before without Docker.
	containers.Use()
	testdb.Main(m)
}

// workerProcess is the body of a worker subprocess: a client.Worker whose
// handler sleeps, until the process is killed.
func workerProcess() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(envWorkerURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sleep, _ := time.ParseDuration(os.Getenv(envWorkerSleep))
	w, err := client.NewWorker(pool, client.WorkerConfig{
		Queue:        os.Getenv(envWorkerQueue),
		Concurrency:  5,
		Lease:        2 * time.Second,
		PollInterval: 100 * time.Millisecond,
		ReapInterval: -1,
		Handler: func(ctx context.Context, _ *client.Job) error {
			time.Sleep(sleep)
			return nil
		},
	}, client.WithWorkerID(os.Getenv(envWorkerID)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startWorkerProcess runs the test binary as a worker subprocess.
func startWorkerProcess(t *testing.T, dbURL, queue, id string, sleep time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envWorkerURL+"="+dbURL, envWorkerQueue+"="+queue, envWorkerID+"="+id, envWorkerSleep+"="+sleep.String())
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// faultServer is the package's PostgreSQL, one this package started (a
// container or a local cluster) so that it can be restarted and paused;
// with a server given by URL the test skips, or fails under CI.
func faultServer(t *testing.T) *pgserver.Server {
	t.Helper()
	s := testdb.Server(t)
	if !s.Controllable() {
		if os.Getenv("CI") != "" {
			t.Fatalf("fault tests restart and pause the server: they need one testdb starts, not %s (CI is set)", s.Describe())
		}
		t.Skipf("fault tests restart and pause the server: they need one testdb starts (unset TEST_DATABASE_URL and DATABASE_URL), not %s", s.Describe())
	}
	return s
}

// newFaultDB returns a fresh migrated database with a completion log: a
// trigger records every transition of a job into 'completed', so a job
// completed twice (by two attempts, or by a retried call) shows up as two
// rows.
func newFaultDB(t *testing.T) (dbURL string, admin *pgxpool.Pool) {
	t.Helper()
	dbURL = testdb.NewURL(t)
	admin = testdb.Pool(t, dbURL)
	_, err := admin.Exec(context.Background(), `
CREATE TABLE public.completion_log (job_id bigint NOT NULL, attempt integer NOT NULL, locked_by text,
                                    at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT ALL ON public.completion_log TO PUBLIC;
CREATE FUNCTION public.log_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.completion_log (job_id, attempt, locked_by) VALUES (NEW.id, NEW.attempts, OLD.locked_by);
    RETURN NULL;
END
$$;
CREATE TRIGGER log_completion AFTER UPDATE ON backoff.jobs FOR EACH ROW
    WHEN (NEW.status = 'completed' AND OLD.status IS DISTINCT FROM 'completed')
    EXECUTE FUNCTION public.log_completion();
-- Completing a job deletes its live row and inserts the completed one
-- (docs/adr/0061): the insert is the completion.
CREATE FUNCTION public.log_completed_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.completion_log (job_id, attempt) VALUES (NEW.id, NEW.attempts);
    RETURN NULL;
END
$$;
CREATE TRIGGER log_completed_row AFTER INSERT ON backoff.jobs FOR EACH ROW
    WHEN (NEW.status = 'completed')
    EXECUTE FUNCTION public.log_completed_row();`)
	require.NoError(t, err)
	return dbURL, admin
}

// viaProxy rewrites dbURL to connect through p.
func viaProxy(t *testing.T, dbURL string, p *proxy) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Host = p.addr()
	return u.String()
}

// hostPort is the host:port of dbURL.
func hostPort(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return u.Host
}

func enqueue(t *testing.T, admin *pgxpool.Pool, queue string, n int) []int64 {
	t.Helper()
	return enqueueWith(t, admin, queue, n, `{}`)
}

// enqueueWith is enqueue with payload's keys in every job's payload, for a
// handler that must know a job before the enqueue returns its id (a worker
// woken by the enqueue can start the job first).
func enqueueWith(t *testing.T, admin *pgxpool.Pool, queue string, n int, payload string) []int64 {
	t.Helper()
	var ids []int64
	require.NoError(t, admin.QueryRow(context.Background(),
		`SELECT array_agg(backoff.enqueue($1, $3::jsonb || jsonb_build_object('n', i), p_max_attempts => 20)) FROM generate_series(1, $2) AS i`,
		queue, n, payload).Scan(&ids))
	return ids
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// count runs a count query, returning -1 while the server is unreachable.
func count(admin *pgxpool.Pool, sql string, args ...any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var n int
	if err := admin.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

// accounting is the end of every fault test.
type accounting struct {
	jobs, completed, lost, doubled, reaped int
}

// account counts, for the jobs ids: lost (not completed), double
// completions (more than one transition into completed), and how many
// lease expiries the reaper recorded; it logs the counts and requires lost
// and doubled to be zero.
func account(t *testing.T, admin *pgxpool.Pool, name string, ids []int64) accounting {
	t.Helper()
	ctx := context.Background()
	var a accounting
	a.jobs = len(ids)
	require.NoError(t, admin.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE j.status = 'completed'),
       count(*) FILTER (WHERE j.status IS DISTINCT FROM 'completed'),
       coalesce(sum((SELECT count(*) FROM jsonb_array_elements(j.errors) AS e WHERE e ->> 'kind' = 'lease_expired')), 0)
FROM unnest($1::bigint[]) AS i(id) LEFT JOIN backoff.jobs AS j ON j.id = i.id`, ids).Scan(&a.completed, &a.lost, &a.reaped))
	require.NoError(t, admin.QueryRow(ctx, `
SELECT count(*) FROM (SELECT job_id FROM public.completion_log WHERE job_id = ANY($1) GROUP BY job_id HAVING count(*) > 1) AS d`,
		ids).Scan(&a.doubled))
	t.Logf("%s: jobs %d, completed %d, lost %d, double completions %d, leases reaped %d",
		name, a.jobs, a.completed, a.lost, a.doubled, a.reaped)
	require.Zero(t, a.lost, "lost jobs")
	require.Zero(t, a.doubled, "double completions")
	return a
}

// staleLog counts the worker log records that say an attempt was refused
// because it no longer held its job (BK002 or a refused batch completion).
type staleLog struct {
	slog.Handler
	stale *atomic.Int64
	// confirmed, if set, counts completions confirmed after a lost reply
	// (logged at Info, below what the wrapped handler prints).
	confirmed *atomic.Int64
}

func (h staleLog) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l) || h.confirmed != nil
}

func (h staleLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "no longer") || strings.Contains(r.Message, "lease lost") {
		h.stale.Add(1)
	}
	if h.confirmed != nil && strings.Contains(r.Message, "completions confirmed") {
		h.confirmed.Add(1)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h staleLog) WithAttrs(as []slog.Attr) slog.Handler {
	return staleLog{h.Handler.WithAttrs(as), h.stale, h.confirmed}
}

func (h staleLog) WithGroup(name string) slog.Handler {
	return staleLog{h.Handler.WithGroup(name), h.stale, h.confirmed}
}

// runWorkers starts n in-process workers on pool until the test ends.
func runWorkers(t *testing.T, pool *pgxpool.Pool, n int, cfg client.WorkerConfig, stale *atomic.Int64) (stop func()) {
	t.Helper()
	return runLoggedWorkers(t, pool, n, cfg, staleLog{stale: stale})
}

// runLoggedWorkers is runWorkers with the counters of log.
func runLoggedWorkers(t *testing.T, pool *pgxpool.Pool, n int, cfg client.WorkerConfig, log staleLog) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	logger := slog.New(log)
	done := make(chan struct{}, n)
	for i := range n {
		w, err := client.NewWorker(pool, cfg, client.WithLogger(logger), client.WithWorkerID(cfg.Queue+"-"+strconv.Itoa(i)))
		require.NoError(t, err)
		go func() {
			_ = w.Run(ctx)
			done <- struct{}{}
		}()
	}
	var stopped atomic.Bool
	stop = func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		for range n {
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}
