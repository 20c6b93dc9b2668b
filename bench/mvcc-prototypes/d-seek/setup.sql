-- Candidate D, seeking claim: the baseline's table, updated in place, with the
-- claim index keyed on (queue, -priority, run_at, id) so that "after this
-- point in the claim order" is one row comparison, an index range.
-- The shape of backoff.jobs (sql/migrations/001_schema.sql, 004) reduced to
-- the columns the hot path touches, with the per-table autovacuum settings
-- docs/benchmarks.md recommends for a busy queue.
DROP SCHEMA IF EXISTS d CASCADE;
CREATE SCHEMA d;

CREATE TABLE d.jobs (
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

CREATE INDEX jobs_claimable_idx ON d.jobs (queue, (-priority), run_at, id) INCLUDE (status)
    WHERE status IN ('pending', 'retrying');
CREATE INDEX jobs_lease_idx ON d.jobs (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX jobs_finished_idx ON d.jobs (queue, completed_at, id) INCLUDE (status)
    WHERE completed_at IS NOT NULL;

-- What the driver's final check reads: every job is either finished or
-- still live, none twice.
CREATE FUNCTION d.counts(OUT enqueued bigint, OUT completed bigint, OUT live bigint, OUT distinct_ids bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*), count(*) FILTER (WHERE j.status = 'completed'),
           count(*) FILTER (WHERE j.status IN ('pending', 'running', 'retrying')), count(DISTINCT j.id)
    FROM d.jobs AS j
$$;

-- What the driver's monitor reads every interval.
CREATE FUNCTION d.completed_since(p_queue text, p_since timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM d.jobs AS j WHERE j.queue = p_queue AND j.completed_at > p_since
$$;
CREATE FUNCTION d.backlog(p_queue text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM d.jobs AS j WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying')
$$;
