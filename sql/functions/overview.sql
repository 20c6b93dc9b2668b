-- backoff.overview(now, exact_limit): one row per queue for the web UI's
-- overview, which refreshes every few seconds, without a scan of the
-- finished rows (docs/adr/0048-overview-without-full-scans.md):
-- * pending, retrying, due and the oldest due from an index-only scan of
--   jobs_claimable_idx (its live rows only; status is INCLUDEd);
-- * blocked (the last column, added after the others) from
--   backoff.job_blockers, one row per blocked job, each job by its key;
-- * running from jobs_lease_idx (lease_until is set exactly while running),
--   and expired: those whose lease ended before p_now, stranded by a worker
--   that stopped until reap settles them (docs/adr/0066);
-- * completed, dead_lettered and cancelled from jobs_finished_idx, counted
--   exactly while a queue has at most p_exact_limit finished rows; above,
--   the planner's estimate for (queue, status) (statistics
--   jobs_queue_status, as of the last ANALYZE), and finished_exact is false;
-- * the queue list: backoff.queues, and the queues of live, running and
--   finished rows (a loose index scan over jobs_finished_idx);
-- * the controls of a queue that has a rate or a breaker: backoff.queue_state.
-- VOLATILE only because it runs EXPLAIN for the estimates; it writes
-- nothing and takes no lock beyond a plain read. No parallel workers: a
-- refresh uses one core, whatever the workers need. Admin only.
CREATE OR REPLACE FUNCTION backoff.overview(
    p_now         timestamptz DEFAULT NULL,
    p_exact_limit integer DEFAULT 10000
)
RETURNS TABLE (
    queue          text,
    policy         text,
    paused         boolean,
    configured     boolean,
    pending        bigint,
    running        bigint,
    expired        bigint,
    retrying       bigint,
    due            bigint,
    oldest_due_age interval,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    finished_exact boolean,
    breaker        text,
    rate           double precision,
    tokens         double precision,
    next_claim_at  timestamptz,
    blocked        bigint
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $$
DECLARE
    v_row   record;
    v_total bigint;
    v_plan  json;
    v_state text;
BEGIN
    IF p_exact_limit IS NULL OR p_exact_limit < 0 THEN
        RAISE EXCEPTION 'overview: exact limit must be 0 or more, got "%"', coalesce(p_exact_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    FOR v_row IN
        WITH RECURSIVE finished_queues (name) AS (
            (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT j.queue FROM backoff.jobs AS j
                    WHERE j.completed_at IS NOT NULL AND j.queue > f.name ORDER BY j.queue LIMIT 1)
            FROM finished_queues AS f
            WHERE f.name IS NOT NULL
        ),
        waiting AS (
            SELECT j.queue AS name,
                   count(*) FILTER (WHERE j.status = 'pending') AS pending,
                   count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
                   count(*) FILTER (WHERE j.run_at <= p_now) AS due,
                   min(j.run_at) AS first_run_at
            FROM backoff.jobs AS j
            WHERE j.status IN ('pending', 'retrying')
            GROUP BY j.queue
        ),
        leased AS (
            SELECT j.queue AS name, count(*) AS running, count(*) FILTER (WHERE j.lease_until < p_now) AS expired
            FROM backoff.jobs AS j
            WHERE j.lease_until IS NOT NULL
            GROUP BY j.queue
        ),
        -- Blocked jobs are outside the claim index: one row each in
        -- backoff.job_blockers, whose job is found by its primary key.
        held AS (
            SELECT j.queue AS name, count(*) AS blocked
            FROM backoff.job_blockers AS b
            JOIN backoff.jobs AS j ON j.id = b.job_id
            WHERE j.status = 'blocked'
            GROUP BY j.queue
        ),
        names AS (
            SELECT q.name FROM backoff.queues AS q
            UNION SELECT w.name FROM waiting AS w
            UNION SELECT l.name FROM leased AS l
            UNION SELECT h.name FROM held AS h
            UNION SELECT f.name FROM finished_queues AS f WHERE f.name IS NOT NULL
        )
        SELECT n.name,
               coalesce(q.policy, backoff.job_policy(NULL, n.name)) AS policy,
               coalesce(q.paused, false) AS paused,
               (q.rate IS NOT NULL OR q.breaker_failures IS NOT NULL) AS controlled,
               q.name IS NOT NULL AS configured,
               coalesce(w.pending, 0) AS pending,
               coalesce(l.running, 0) AS running,
               coalesce(l.expired, 0) AS expired,
               coalesce(w.retrying, 0) AS retrying,
               coalesce(w.due, 0) AS due,
               CASE WHEN w.first_run_at <= p_now THEN p_now - w.first_run_at END AS oldest_due_age,
               coalesce(h.blocked, 0) AS blocked
        FROM names AS n
        LEFT JOIN backoff.queues AS q ON q.name = n.name
        LEFT JOIN waiting AS w ON w.name = n.name
        LEFT JOIN leased AS l ON l.name = n.name
        LEFT JOIN held AS h ON h.name = n.name
        ORDER BY n.name
    LOOP
        queue := v_row.name;
        policy := v_row.policy;
        paused := v_row.paused;
        configured := v_row.configured;
        pending := v_row.pending;
        running := v_row.running;
        expired := v_row.expired;
        retrying := v_row.retrying;
        due := v_row.due;
        oldest_due_age := v_row.oldest_due_age;
        blocked := v_row.blocked;
        -- At most p_exact_limit + 1 entries of the queue's finished rows.
        SELECT count(*) FILTER (WHERE f.status = 'completed'),
               count(*) FILTER (WHERE f.status = 'dead_lettered'),
               count(*) FILTER (WHERE f.status = 'cancelled'),
               count(*)
        INTO completed, dead_lettered, cancelled, v_total
        FROM (SELECT j.status FROM backoff.jobs AS j
              WHERE j.queue = v_row.name AND j.completed_at IS NOT NULL
              LIMIT p_exact_limit + 1) AS f;
        finished_exact := v_total <= p_exact_limit;
        -- The queue's controls, for a queue that has any.
        breaker := 'closed';
        rate := NULL;
        tokens := NULL;
        next_claim_at := NULL;
        IF v_row.controlled THEN
            SELECT s.state, s.rate, s.tokens, s.next_claim_at
            INTO breaker, rate, tokens, next_claim_at
            FROM backoff.queue_state(v_row.name, p_now) AS s;
        END IF;
        IF NOT finished_exact THEN
            -- The planner's row estimate: most common (queue, status) pairs
            -- from statistics jobs_finished_queue_status, else per-column
            -- statistics, of the finished partition, where finished jobs
            -- live (docs/adr/0061; the live segments would each add the
            -- planner's least estimate, a row).
            FOREACH v_state IN ARRAY ARRAY['completed', 'dead_lettered', 'cancelled'] LOOP
                EXECUTE pg_catalog.format(
                    'EXPLAIN (FORMAT JSON) SELECT 1 FROM backoff.jobs_finished WHERE queue = %L AND status = %L',
                    v_row.name, v_state) INTO v_plan;
                CASE v_state
                    WHEN 'completed' THEN completed := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                    WHEN 'dead_lettered' THEN dead_lettered := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                    ELSE cancelled := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                END CASE;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.overview(timestamptz, integer) IS
'One row per queue (configured in backoff.queues, or holding jobs), by name, for a display that refreshes often (the web UI''s overview): policy (backoff.job_policy), paused, configured; exact counts of the live statuses pending, running and retrying, and blocked (the last column: jobs waiting for the jobs they depend on, backoff.enqueue_graph); expired = running jobs whose lease ended before p_now (stranded by a worker that stopped, until backoff.reap settles them); due = pending or retrying with run_at <= p_now and oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and completed, dead_lettered, cancelled: exact when the queue has at most p_exact_limit (default 10000) finished jobs (finished_exact true), else the planner''s estimate from the table statistics as of the last ANALYZE (finished_exact false; show them as approximate); for a queue with a rate or a circuit breaker, breaker, rate, tokens and next_claim_at as backoff.queue_state reads them (else breaker ''closed'' and NULLs). Reads indexes, not the whole table: its cost grows with the live jobs and the number of queues, not with the finished ones. backoff.stats keeps its exact whole-table counts for the CLI. Admin only.
Errors: 22023 for a NULL or negative p_exact_limit or a bad p_now.
Example:
SELECT queue, pending, running, expired, retrying, blocked, due, completed, finished_exact FROM backoff.overview();';
