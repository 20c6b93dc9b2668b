-- backoff.stats(window, now): one row per queue for the CLI and dashboards:
-- jobs per status, how many are due and how long the oldest due job has
-- waited, and what happened in the window (p_now - p_window, p_now]:
-- retries scheduled and jobs dead-lettered. blocked, last (a column added
-- after the others, so that positional reads keep working), counts the
-- jobs waiting for their parents (docs/workflows.md). A failure is read from the error
-- history, so only the 20 most recent per job count; an operator's entries
-- there (replayed, cancelled) are no failures, and a failure that
-- dead-lettered its job stays no retry when the job is replayed
-- (docs/adr/0066). expired counts the running jobs whose lease ended before
-- p_now: work a dead worker stranded, until reap settles it. One scan of
-- the table: fine for an operator's command, not for a tight loop.
CREATE OR REPLACE FUNCTION backoff.stats(
    p_window interval DEFAULT '1 hour',
    p_now    timestamptz DEFAULT now()
)
RETURNS TABLE (
    queue          text,
    pending        bigint,
    running        bigint,
    expired        bigint,
    retrying       bigint,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    due            bigint,
    oldest_due_age interval,
    retries        bigint,
    dead_letters   bigint,
    paused         boolean,
    blocked        bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window < interval '0' OR NOT backoff._valid_span(p_window) THEN
        RAISE EXCEPTION 'stats: window must be between 0 and 876600 hours, got "%"', coalesce(p_window::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    RETURN QUERY
    WITH counts AS (
        SELECT j.queue,
               count(*) FILTER (WHERE j.status = 'pending') AS pending,
               count(*) FILTER (WHERE j.status = 'running') AS running,
               count(*) FILTER (WHERE j.lease_until < p_now) AS expired,
               count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
               count(*) FILTER (WHERE j.status = 'completed') AS completed,
               count(*) FILTER (WHERE j.status = 'dead_lettered') AS dead_lettered,
               count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE j.status = 'blocked') AS blocked,
               count(*) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now) AS due,
               p_now - min(j.run_at) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now)
                   AS oldest_due_age,
               count(*) FILTER (WHERE j.status = 'dead_lettered'
                                  AND j.completed_at > p_now - p_window AND j.completed_at <= p_now)
                   AS dead_letters
        FROM backoff.jobs AS j
        GROUP BY j.queue
    ),
    failures AS (
        -- Failures in the window that were followed by a retry: every
        -- failed attempt (kind error or lease_expired) in the window but the
        -- one that dead-lettered its job: the last entry of a dead letter,
        -- or an entry an operator's replay follows.
        SELECT j.queue, count(*) AS retries
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL jsonb_array_elements(j.errors) WITH ORDINALITY AS e(entry, n)
        WHERE j.last_failed_at > p_now - p_window
          AND coalesce(e.entry ->> 'kind', 'error') IN ('error', 'lease_expired')
          AND (e.entry ->> 'at')::timestamptz > p_now - p_window
          AND (e.entry ->> 'at')::timestamptz <= p_now
          AND NOT (j.status = 'dead_lettered' AND e.n = jsonb_array_length(j.errors))
          AND coalesce(j.errors -> e.n::integer ->> 'kind', '') <> 'replayed'
        GROUP BY j.queue
    )
    SELECT c.queue, c.pending, c.running, c.expired, c.retrying, c.completed, c.dead_lettered, c.cancelled,
           c.due, c.oldest_due_age, coalesce(f.retries, 0), c.dead_letters, coalesce(q.paused, false), c.blocked
    FROM counts AS c
    LEFT JOIN failures AS f ON f.queue = c.queue
    LEFT JOIN backoff.queues AS q ON q.name = c.queue
    ORDER BY c.queue;
END
$$;

COMMENT ON FUNCTION backoff.stats(interval, timestamptz) IS
'One row per queue that has jobs: counts per status (pending, running, retrying, completed, dead_lettered, cancelled, and blocked, the last column: jobs waiting for the jobs they depend on, backoff.enqueue_graph); expired = running jobs whose lease ended before p_now (stranded by a worker that stopped; backoff.reap settles them); paused = the queue is paused (backoff.pause_queue); due = pending or retrying with run_at <= p_now; oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and for the window (p_now - p_window, p_now]: retries = failed attempts (handler errors and expired leases) followed by a retry, read from the error history (an operator''s replay is no retry: the failure that dead-lettered a replayed job is not counted, nor are the history''s replayed and cancelled entries); dead_letters = jobs dead-lettered. Scans the whole table: for operators and dashboards, not for tight loops.
Errors: 22023 for a NULL or negative window, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT queue, pending, running, expired, due, retries, dead_letters, paused, blocked FROM backoff.stats(''15 minutes'');';
