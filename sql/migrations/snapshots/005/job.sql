-- backoff.job(job id): one job as a row of backoff.jobs, or no row when
-- there is none or the caller may not work on its queue. The read that
-- applies the queue scope inside a definer function: a query on the table
-- goes through row-level security, which filters rows after the index
-- found them, and EXPLAIN ANALYZE counts the rows it removed, so there a
-- foreign job and a missing one differ. Here both are one primary-key
-- probe and the same empty answer (docs/adr/0058-queue-scope-fails-closed.md).
CREATE OR REPLACE FUNCTION backoff.job(p_job_id bigint)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_scope text[];
BEGIN
    v_scope := backoff._work_scope();
    RETURN QUERY
    SELECT j.* FROM backoff.jobs AS j
    WHERE j.id = p_job_id
      AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope));
END
$$;

COMMENT ON FUNCTION backoff.job(bigint) IS
'Job p_job_id as a row of backoff.jobs; no row when there is no such job or the caller is scoped by backoff.grant_queue (or has no grant while backoff.settings.require_queue_grants is on) and may not work on its queue: the two cannot be told apart (a query on backoff.jobs, filtered by row-level security, can tell them apart with EXPLAIN ANALYZE). The Go client''s Get reads here. Workers and admins.
Example:
SELECT id, queue, status, attempts FROM backoff.job(42);';
