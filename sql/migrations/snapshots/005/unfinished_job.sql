-- backoff.unfinished_job(queues): one job of the given queues (every queue
-- for NULL) that has not finished, or no row: what a caller that waits for
-- its queues to drain asks (the Go client's WaitIdle). Two branches, so
-- that each reads a partial index whatever the table's size: pending and
-- retrying jobs from jobs_claimable_idx, running ones from jobs_lease_idx
-- (lease_until is set exactly while a job runs). Scoped like backoff.job:
-- a caller sees only the queues it may work on, so a definer function, not
-- a read of the table (docs/adr/0058-queue-scope-fails-closed.md).
CREATE OR REPLACE FUNCTION backoff.unfinished_job(p_queues text[] DEFAULT NULL)
RETURNS TABLE (queue text, status text)
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
    SELECT u.queue, u.status
    FROM ((SELECT j.queue, j.status FROM backoff.jobs AS j
           WHERE j.status IN ('pending', 'retrying')
             AND (p_queues IS NULL OR j.queue = ANY (p_queues))
             AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
           LIMIT 1)
          UNION ALL
          (SELECT j.queue, j.status FROM backoff.jobs AS j
           WHERE j.lease_until IS NOT NULL
             AND (p_queues IS NULL OR j.queue = ANY (p_queues))
             AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
           LIMIT 1)) AS u
    LIMIT 1;
END
$$;

COMMENT ON FUNCTION backoff.unfinished_job(text[]) IS
'One job of the queues p_queues (every queue when NULL) that is pending, running or retrying, whatever its run_at, as (queue, status); no row when they have none: the queues are drained. A caller scoped by backoff.grant_queue sees only the queues it may work on. The Go client''s WaitIdle polls it. Producers, workers and admins.
Example:
SELECT * FROM backoff.unfinished_job(ARRAY[''emails'']);';
