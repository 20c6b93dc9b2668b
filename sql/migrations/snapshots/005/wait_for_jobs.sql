-- backoff.wait_for_jobs(queue, worker, ttl): register that p_worker waits
-- for jobs of p_queue until now() + p_ttl, so that backoff.enqueue notifies
-- channel backoff_jobs for this queue (docs/adr/0027). A worker writes it
-- only when a claim found the queue empty, never while busy. The
-- registration follows the database's clock, not p_now: it is about live
-- connections, not about the jobs' simulated time. Queue and worker are
-- names (backoff._check_name), and the caller must be allowed to work on
-- the queue: workers cannot read backoff.waiting_workers.
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
    p_queue := backoff._check_name('queue', p_queue);
    p_worker := backoff._check_name('worker', p_worker);
    -- Only a worker that may work on the queue may wait for it: another
    -- could end its registrations or make enqueue notify for it
    -- (docs/adr/0058-queue-scope-fails-closed.md). 42501 naming the queue.
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
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
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control characters, a ttl that is NULL, not positive or over 1 day; 42501 when the caller is scoped by backoff.grant_queue (or has no grant while backoff.settings.require_queue_grants is on) and may not work on the queue.
Example:
LISTEN backoff_jobs;
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'', interval ''30 seconds'');
SELECT count(*) FROM backoff.claim(''emails'', ''worker-1'', 10);  -- look once more, then wait for a notification';
