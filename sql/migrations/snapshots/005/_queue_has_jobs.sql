-- backoff._queue_has_jobs(queue): whether any job of the queue exists,
-- from the three partial indexes that between them hold every job (live:
-- jobs_claimable_idx, finished: jobs_finished_idx, running:
-- jobs_lease_idx), so that it stays one probe each at any table size.
-- Private; pause_queue and resume_queue use it to tell a queue from a typo.
CREATE OR REPLACE FUNCTION backoff._queue_has_jobs(p_queue text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying'))
        OR EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.completed_at IS NOT NULL)
        OR EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.lease_until IS NOT NULL)
$$;
