-- backoff.queue_list(): every queue, configured (backoff.queues) or only
-- seen in jobs, one row each, without reading every job: a loose index
-- scan (one probe per queue) over the live jobs (jobs_claimable_idx) and
-- the finished ones (jobs_finished_idx), and the running ones
-- (jobs_lease_idx, as many rows as jobs run). Every job is in one of the
-- three: finished jobs have completed_at, running ones a lease. A definer
-- function, so that a worker lists queues without reading the jobs table
-- (docs/adr/0058): the configured queues for everyone (workers read
-- backoff.queues), the queues only seen in jobs within the caller's scope.
-- Intervals as whole microseconds, for the clients.
CREATE OR REPLACE FUNCTION backoff.queue_list()
RETURNS TABLE (
    name                   text,
    policy                 text,
    paused                 boolean,
    configured             boolean,
    rate                   double precision,
    burst                  integer,
    breaker_failures       integer,
    breaker_window_us      bigint,
    breaker_cooldown_us    bigint,
    breaker_probes         integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_scope text[];
BEGIN
    v_scope := backoff._work_scope();
    RETURN QUERY
    WITH RECURSIVE live (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.status IN ('pending', 'retrying') ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j WHERE j.status IN ('pending', 'retrying') AND j.queue > l.name
                ORDER BY j.queue LIMIT 1)
        FROM live AS l WHERE l.name IS NOT NULL
    ), finished (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL AND j.queue > f.name
                ORDER BY j.queue LIMIT 1)
        FROM finished AS f WHERE f.name IS NOT NULL
    ), seen AS (
        SELECT l.name FROM live AS l WHERE l.name IS NOT NULL
        UNION SELECT f.name FROM finished AS f WHERE f.name IS NOT NULL
        UNION SELECT j.queue FROM backoff.jobs AS j WHERE j.lease_until IS NOT NULL
    )
    SELECT q.name, q.policy, q.paused, true, q.rate, q.burst, q.breaker_failures,
        (extract(epoch FROM q.breaker_window) * 1000000)::bigint,
        (extract(epoch FROM q.breaker_cooldown) * 1000000)::bigint, q.breaker_probes
    FROM backoff.queues AS q
    UNION ALL
    SELECT s.name, backoff.job_policy(NULL, s.name), false, false, NULL, NULL, NULL, NULL, NULL, 1
    FROM seen AS s
    WHERE NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = s.name)
      AND (v_scope IS NULL OR s.name OPERATOR(pg_catalog.~~) ANY (v_scope))
    ORDER BY 1;
END
$$;

COMMENT ON FUNCTION backoff.queue_list() IS
'Every queue by name: those configured in backoff.queues (configured true, with policy, paused, rate, burst and breaker settings, the breaker''s window and cooldown in microseconds) and those only seen in jobs (configured false, the policy that applies to them, nothing else), without reading every job (one index probe per queue). A caller scoped by backoff.grant_queue sees every configured queue but only the seen queues it may work on. Workers and admins.
Example:
SELECT name, policy, paused, configured FROM backoff.queue_list();';
