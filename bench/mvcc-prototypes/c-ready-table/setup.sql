-- Candidate C, a separate "ready" table: c.jobs keeps every job (updated in
-- place, no claim index), c.ready holds one small row per claimable job,
-- inserted at enqueue (and at a retry) and deleted by the claim. The claim
-- reads only c.ready's index. Expected to degrade under an old snapshot all
-- the same: each claim's DELETE leaves a dead entry at the head of
-- ready_order_idx that vacuum may not remove.
DROP SCHEMA IF EXISTS c CASCADE;
CREATE SCHEMA c;

CREATE TABLE c.jobs (
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
CREATE INDEX jobs_lease_idx ON c.jobs (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX jobs_finished_idx ON c.jobs (queue, completed_at, id) INCLUDE (status)
    WHERE completed_at IS NOT NULL;

CREATE TABLE c.ready (
    job_id   bigint PRIMARY KEY,
    queue    text NOT NULL,
    priority integer NOT NULL,
    run_at   timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
        autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX ready_order_idx ON c.ready (queue, priority DESC, run_at, job_id);

CREATE FUNCTION c.counts(OUT enqueued bigint, OUT completed bigint, OUT live bigint, OUT distinct_ids bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*), count(*) FILTER (WHERE j.status = 'completed'),
           count(*) FILTER (WHERE j.status IN ('pending', 'running', 'retrying')), count(DISTINCT j.id)
    FROM c.jobs AS j
$$;
CREATE FUNCTION c.completed_since(p_queue text, p_since timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM c.jobs AS j WHERE j.queue = p_queue AND j.completed_at > p_since
$$;
CREATE FUNCTION c.backlog(p_queue text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM c.ready AS r WHERE r.queue = p_queue
$$;
