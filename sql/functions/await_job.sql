-- backoff.await_job(job id, awaiter, ttl): register that p_awaiter waits
-- for job p_job_id to finish, until now() + p_ttl, so that the call that
-- finishes it (complete, complete_many, fail, reap, cancel) notifies
-- channel backoff_finished with its id (backoff._notify_awaiters). The
-- registration follows the database's clock, not p_now: it is about a
-- live connection. Scoped as backoff.job_output: a job of a queue the
-- caller may neither work on nor produce into looks missing.
CREATE OR REPLACE FUNCTION backoff.await_job(
    p_job_id  bigint,
    p_awaiter text,
    p_ttl     interval DEFAULT interval '1 minute'
)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue  text;
    v_status text;
BEGIN
    p_awaiter := backoff._check_name('awaiter', p_awaiter);
    IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'await job %: ttl must be positive and at most 1 day, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_ttl::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.queue, j.status INTO v_queue, v_status FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND OR (backoff._scope_in_force()
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('work')), false)
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('produce')), false)) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    IF v_status NOT IN ('completed', 'dead_lettered', 'cancelled') THEN
        INSERT INTO backoff.job_awaiters AS a (job_id, awaiter, expires_at)
        VALUES (p_job_id, p_awaiter, pg_catalog.now() + p_ttl)
        ON CONFLICT (job_id, awaiter) DO UPDATE SET expires_at = excluded.expires_at;
    END IF;
    -- Registrations of awaiters that went away, while we are here.
    DELETE FROM backoff.job_awaiters AS a WHERE a.expires_at < pg_catalog.now();
    RETURN v_status;
END
$$;

COMMENT ON FUNCTION backoff.await_job(bigint, text, interval) IS
'Register that p_awaiter waits for job p_job_id to finish, until now() + p_ttl (1 minute by default, at most 1 day): the call that completes, dead-letters or cancels it then notifies channel backoff_finished with the job''s id, and deletes the registration. Returns the job''s status now; a job already finished registers nothing. A client LISTENs first, then calls it, and reads the job again on a notification, on its own poll, or at its deadline; backoff.stop_awaiting ends a registration early. No notification is sent for a job nobody awaits. Through the PL/Proxy router a notification does not reach the client: it polls. Workers, producers and admins.
Errors: BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may neither work on nor produce into; 22023 an awaiter that is not 1 to 128 bytes without control characters, a ttl that is NULL, not positive or over 1 day.
Example:
SELECT backoff.enqueue(''thumbnails'');
LISTEN backoff_finished;
SELECT backoff.await_job(1, ''web-1'', interval ''30 seconds'');';
