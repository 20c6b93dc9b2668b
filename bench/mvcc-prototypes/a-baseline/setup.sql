-- Candidate A, baseline: one table, a job row updated in place for its whole
-- life (pending -> running -> completed), a partial index on claimable rows.
-- The shape of backoff.jobs (sql/migrations/001_schema.sql, 004) reduced to
-- the columns the hot path touches, with the per-table autovacuum settings
-- docs/benchmarks.md recommends for a busy queue.
DROP SCHEMA IF EXISTS a CASCADE;
CREATE SCHEMA a;

CREATE TABLE a.jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue        text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'dead_lettered', 'cancelled')),
    priority     integer NOT NULL DEFAULT 0,
    attempts     integer NOT NULL DEFAULT 0,
    run_at       timestamptz NOT NULL,
    lease_until  timestamptz,
    locked_by    text,
    created_at   timestamptz NOT NULL,
    completed_at timestamptz
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000,
        autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX jobs_claimable_idx ON a.jobs (queue, priority DESC, run_at, id) INCLUDE (status)
    WHERE status IN ('pending', 'retrying');
CREATE INDEX jobs_lease_idx ON a.jobs (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX jobs_finished_idx ON a.jobs (queue, completed_at, id) INCLUDE (status)
    WHERE completed_at IS NOT NULL;

-- What the driver's final check reads: every job is either finished or
-- still live, none twice.
CREATE FUNCTION a.counts(OUT enqueued bigint, OUT completed bigint, OUT live bigint, OUT distinct_ids bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*), count(*) FILTER (WHERE j.status = 'completed'),
           count(*) FILTER (WHERE j.status IN ('pending', 'running', 'retrying')), count(DISTINCT j.id)
    FROM a.jobs AS j
$$;

-- What the driver's monitor reads every interval.
CREATE FUNCTION a.completed_since(p_queue text, p_since timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM a.jobs AS j WHERE j.queue = p_queue AND j.completed_at > p_since
$$;
CREATE FUNCTION a.backlog(p_queue text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM a.jobs AS j WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying')
$$;
