-- backoff.wait_for_jobs(queue, worker, ttl): register that p_worker waits
-- for jobs of p_queue until now() + p_ttl, so that backoff.enqueue notifies
-- channel backoff_jobs for this queue (docs/adr/0027). A worker writes it
-- only when a claim found the queue empty, never while busy. The
-- registration follows the database's clock, not p_now: it is about live
-- connections, not about the jobs' simulated time.
CREATE OR REPLACE FUNCTION backoff.wait_for_jobs(
    p_queue  text,
    p_worker text,
    p_ttl    interval DEFAULT interval '1 minute'
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_until timestamptz;
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_worker IS NULL THEN
        RAISE EXCEPTION 'wait for jobs in queue "%": worker must not be null', p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'wait for jobs in queue "%": ttl must be positive and at most 1 day, got "%"', p_queue, coalesce(p_ttl::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_until := pg_catalog.now() + p_ttl;
    INSERT INTO backoff.waiting_workers AS w (queue, worker, expires_at)
    VALUES (p_queue, p_worker, v_until)
    ON CONFLICT (queue, worker) DO UPDATE SET expires_at = excluded.expires_at;
    -- Registrations of workers that died, while we are here.
    DELETE FROM backoff.waiting_workers AS w
    WHERE w.queue = p_queue AND w.expires_at < pg_catalog.now();
    RETURN v_until;
END
$$;

COMMENT ON FUNCTION backoff.wait_for_jobs(text, text, interval) IS
'Register that p_worker waits for jobs of p_queue until now() + p_ttl (1 minute by default, at most 1 day): while a registration of the queue is live, backoff.enqueue notifies channel backoff_jobs with the queue name when it adds a job due now. A worker calls it when a claim found the queue empty, then claims once more and LISTENs; it ends the registration with backoff.stop_waiting when busy again. Expired registrations of the queue are deleted. Returns the expiry.
Errors: 22023 for a NULL or empty queue, a NULL worker, a ttl that is NULL, not positive or over 1 day.
Example:
LISTEN backoff_jobs;
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'', interval ''30 seconds'');
SELECT count(*) FROM backoff.claim(''emails'', ''worker-1'', 10);  -- look once more, then wait for a notification';
