package conformance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/router"
	"github.com/pgbackoff/pgbackoff/internal/shardcluster"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// shardedEnv runs the suite against a sharded install (make test-sharded):
// a PL/Proxy router over three shards (internal/shardcluster), which the
// workers reach as their DATABASE_URL. The scenarios and the mixed run
// share it, each on queues of its own; a scenario that cannot work
// through a router says why (not_through_router) and is skipped.
const shardedEnv = "BACKOFF_CONFORMANCE_SHARDED"

// target is where a test's jobs live: a fresh database of its own, or the
// run's sharded install.
type target struct {
	// url is the workers' DATABASE_URL.
	url string
	// pool is the runner's as a producer: enqueues, schedules, workflows,
	// and the calls of TestFencingViolationsAreFound (the router in the
	// sharded run).
	pool *pgxpool.Pool
	// homes are the databases that hold the jobs and the evidence of what
	// ran (recordingSQL): the database itself, or every shard. The runner
	// writes the configuration to each (as backoffctl does through a
	// router), and reads, waits and checks there: a job's evidence sits
	// beside it on its shard, so every check reads one shard as it reads
	// one database, and no poll drags every shard's jobs through the
	// router's views.
	homes []*pgxpool.Pool
}

// queueHome is the database that holds the queue's jobs: the database
// itself, or the shard the router places the queue on (the hash rule: the
// runner places no queue).
func (tg target) queueHome(queue string) *pgxpool.Pool {
	if len(tg.homes) == 1 {
		return tg.homes[0]
	}
	return tg.homes[router.QueueShard(queue, len(tg.homes))]
}

// sharded is the run's sharded install; nil when every test has a
// database of its own.
var sharded *shardedInstall

type shardedInstall struct {
	cluster *shardcluster.Cluster
	target
}

// newTarget is the test's fresh database, with the recording set up, or
// the sharded install.
func newTarget(ctx context.Context, t *testing.T) target {
	t.Helper()
	if sharded != nil {
		return sharded.target
	}
	url := testdb.NewURL(t)
	pool := testdb.Pool(t, url)
	_, err := pool.Exec(ctx, recordingSQL)
	require.NoError(t, err, "set up the recording")
	return target{url: url, pool: pool, homes: []*pgxpool.Pool{pool}}
}

// startSharded starts the sharded install and sets up the recording on
// every shard, and on the router the handlers' table, which passes each
// row on to its job's shard.
func startSharded(ctx context.Context) error {
	c, err := shardcluster.Start(ctx)
	sharded = &shardedInstall{cluster: c}
	if err != nil {
		return err
	}
	sharded.url = c.RouterURL
	if sharded.pool, err = pgxpool.New(ctx, c.RouterURL); err != nil {
		return err
	}
	for _, u := range c.ShardURLs {
		p, err := pgxpool.New(ctx, u)
		if err != nil {
			return err
		}
		sharded.homes = append(sharded.homes, p)
		// The settings of every test database (internal/testdb): the
		// runner and the Workers pass their own times, and the tests'
		// roles have no queue grants.
		if _, err := p.Exec(ctx, `UPDATE backoff.settings SET time_injection = true, require_queue_grants = false`); err != nil {
			return err
		}
		if _, err := p.Exec(ctx, recordingSQL+shardEffectSQL); err != nil {
			return fmt.Errorf("set up the recording on a shard: %w", err)
		}
	}
	if _, err := sharded.pool.Exec(ctx, routerEffectSQL); err != nil {
		return fmt.Errorf("set up the recording on the router: %w", err)
	}
	return nil
}

func stopSharded() {
	if sharded == nil {
		return
	}
	for _, p := range append([]*pgxpool.Pool{sharded.pool}, sharded.homes...) {
		if p != nil {
			p.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sharded.cluster.Stop(ctx); err != nil {
		fmt.Println("conformance: stop the sharded install:", err)
	}
}

// effectsTable is where each handler records its side effect, one row per
// attempt that ran, through its worker's own database.
const effectsTable = `
CREATE TABLE public.conformance_effects (
    job_id   bigint NOT NULL,
    attempt  integer NOT NULL,
    language text NOT NULL,
    step     text NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
GRANT INSERT ON public.conformance_effects TO PUBLIC;`

// recordingSQL sets up the evidence the checks read where the jobs are:
// the handlers' table, and triggers on backoff.jobs that record every
// transition to completed (the evidence for "done twice"), every lease an
// attempt was given and every time a job left blocked.
const recordingSQL = effectsTable + `
CREATE TABLE public.conformance_completions (
    job_id  bigint NOT NULL,
    attempt integer NOT NULL,
    queue   text NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- SECURITY DEFINER: the settle functions run as backoff_owner, which may
-- not write here.
CREATE FUNCTION public.conformance_completed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    IF NEW.status = 'completed' AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM 'completed') THEN
        INSERT INTO public.conformance_completions (job_id, attempt, queue) VALUES (NEW.id, NEW.attempts, NEW.queue);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER conformance_completed AFTER INSERT OR UPDATE ON backoff.jobs
    FOR EACH ROW EXECUTE FUNCTION public.conformance_completed();
-- Every lease a running attempt was given: by its claim, then by each
-- heartbeat.
CREATE TABLE public.conformance_leases (
    job_id      bigint NOT NULL,
    attempt     integer NOT NULL,
    lease_until timestamptz NOT NULL
);
CREATE FUNCTION public.conformance_leased() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    IF NEW.status = 'running' AND NEW.lease_until IS NOT NULL
       AND (TG_OP = 'INSERT' OR OLD.lease_until IS DISTINCT FROM NEW.lease_until) THEN
        INSERT INTO public.conformance_leases (job_id, attempt, lease_until) VALUES (NEW.id, NEW.attempts, NEW.lease_until);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER conformance_leased AFTER INSERT OR UPDATE ON backoff.jobs
    FOR EACH ROW EXECUTE FUNCTION public.conformance_leased();
-- Every time a job left blocked (docs/workflows.md): released once its
-- parents completed, or settled by a failed parent's edge.
CREATE TABLE public.conformance_unblocks (
    job_id bigint NOT NULL,
    status text NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION public.conformance_unblocked() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    IF OLD.status = 'blocked' AND NEW.status <> 'blocked' THEN
        INSERT INTO public.conformance_unblocks (job_id, status) VALUES (NEW.id, NEW.status);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER conformance_unblocked AFTER UPDATE ON backoff.jobs
    FOR EACH ROW EXECUTE FUNCTION public.conformance_unblocked();`

// shardEffectSQL: on a shard, the function the router's handlers' table
// calls to record a side effect beside its job.
const shardEffectSQL = `
CREATE FUNCTION public.conformance_record_effect(p_job_id bigint, p_attempt integer, p_language text, p_step text, p_at timestamptz)
RETURNS integer LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    INSERT INTO public.conformance_effects (job_id, attempt, language, step, at) VALUES (p_job_id, p_attempt, p_language, p_step, p_at);
    SELECT 1;
$$;`

// routerEffectSQL: on the router, the handlers' table, whose rows a
// trigger passes on to the job's shard (PL/Proxy, as the router's own
// calls by job id) instead of keeping them; the time is the router's, when
// the handler recorded it.
const routerEffectSQL = effectsTable + `
CREATE FUNCTION public.conformance_record_effect(p_job_id bigint, p_attempt integer, p_language text, p_step text, p_at timestamptz)
RETURNS integer LANGUAGE plproxy VOLATILE AS $p$
CLUSTER backoff._cluster();
RUN ON backoff._job_shard(p_job_id);
$p$;
CREATE FUNCTION public.conformance_forward_effect() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    PERFORM public.conformance_record_effect(NEW.job_id, NEW.attempt, NEW.language, NEW.step, NEW.at);
    RETURN NULL;
END
$$;
CREATE TRIGGER conformance_forward_effect BEFORE INSERT ON public.conformance_effects
    FOR EACH ROW EXECUTE FUNCTION public.conformance_forward_effect();`

// setUpPolicy writes the queue's policy (named after it) and its mapping
// into every database that holds jobs.
func setUpPolicy(ctx context.Context, t *testing.T, tg target, queue string, p policy) {
	t.Helper()
	ms := func(n, def int) string {
		if n == 0 {
			n = def
		}
		return fmt.Sprintf("%d milliseconds", n)
	}
	for _, home := range tg.homes {
		_, err := home.Exec(ctx, `INSERT INTO backoff.policies (name, strategy, base, max_delay, max_attempts, lease, max_lease_expiries)
			VALUES ($1, $2, $3::interval, $4::interval, $5, $6::interval, $7)`,
			queue, p.Strategy, ms(p.BaseMS, 1), ms(p.MaxDelayMS, 60000), p.MaxAttempts, ms(p.LeaseMS, 30000), p.MaxLeaseExpiries)
		require.NoError(t, err)
		_, err = home.Exec(ctx, `INSERT INTO backoff.queues (name, policy) VALUES ($1, $1)`, queue)
		require.NoError(t, err)
	}
}

// endLeases ends the leases of the queue's running attempts
// (lease_until = now), as a lease running out would, where the jobs are;
// it returns how many.
func endLeases(ctx context.Context, t *testing.T, tg target, queue string) int64 {
	t.Helper()
	tag, err := tg.queueHome(queue).Exec(ctx, `UPDATE backoff.jobs SET lease_until = clock_timestamp() WHERE queue = $1 AND status = 'running'`, queue)
	require.NoError(t, err)
	return tag.RowsAffected()
}

// sumOnHomes is the sum over the homes of the query's one integer.
func sumOnHomes(ctx context.Context, t *testing.T, tg target, query string, args ...any) int {
	t.Helper()
	sum := 0
	for _, home := range tg.homes {
		var n int
		require.NoError(t, home.QueryRow(ctx, query, args...).Scan(&n), "%s", query)
		sum += n
	}
	return sum
}

// rowsOnHomes is the rows (one text column) of the query on every home.
func rowsOnHomes(ctx context.Context, t *testing.T, tg target, query string, args ...any) []string {
	t.Helper()
	var out []string
	for _, home := range tg.homes {
		rows, err := home.Query(ctx, query, args...)
		require.NoError(t, err, "%s", query)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
	}
	return out
}
