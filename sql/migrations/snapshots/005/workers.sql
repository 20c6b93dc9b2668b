-- backoff.workers(now): the workers the database knows about, from the
-- jobs they hold (locked_by of the running jobs, read through
-- jobs_lease_idx): no worker writes anything for it, so a claim, a
-- heartbeat and a settle cost what they did (docs/adr/0066). A worker
-- that holds no job is not known here. The newest lease end stands for
-- the latest sign of life: a heartbeat or a claim moves it forward, so a
-- worker whose newest lease has expired has stopped renewing every lease
-- it holds. Admin only.
CREATE OR REPLACE FUNCTION backoff.workers(p_now timestamptz DEFAULT now())
RETURNS TABLE (
    worker           text,
    queues           text[],
    jobs             bigint,
    expired          bigint,
    oldest_started   timestamptz,
    oldest_lease     timestamptz,
    latest_lease     timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_now := backoff._now(p_now);
    RETURN QUERY
    SELECT coalesce(j.locked_by, ''), pg_catalog.array_agg(DISTINCT j.queue ORDER BY j.queue),
           count(*), count(*) FILTER (WHERE j.lease_until < p_now),
           min(j.last_attempted_at), min(j.lease_until), max(j.lease_until)
    FROM backoff.jobs AS j
    WHERE j.lease_until IS NOT NULL
    GROUP BY 1
    ORDER BY 1;
END
$$;

COMMENT ON FUNCTION backoff.workers(timestamptz) IS
'One row per worker that holds running jobs (locked_by; '''' for jobs claimed without a worker name), by name: queues it holds jobs of, jobs = how many it holds, expired = how many of them have a lease that ended before p_now (stranded: backoff.reap settles them), oldest_started = the earliest start (last_attempted_at) of its attempts, oldest_lease and latest_lease = the earliest and the latest lease end (a heartbeat or a claim moves the latest forward; when it is before p_now the worker renews nothing any more). Computed from the running jobs (jobs_lease_idx): workers write nothing for it, and a worker that holds no job is not listed. Admin only.
Errors: 22023 for a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT worker, queues, jobs, expired, latest_lease - now() AS lease_left FROM backoff.workers(now() + interval ''1 minute'');';
