-- backoff.stop_waiting(queue, worker): end p_worker's registration for
-- p_queue (backoff.wait_for_jobs), so enqueue stops notifying for it.
CREATE OR REPLACE FUNCTION backoff.stop_waiting(
    p_queue  text,
    p_worker text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_worker IS NULL THEN
        RAISE EXCEPTION 'stop waiting in queue "%": worker must not be null', p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM backoff.waiting_workers AS w WHERE w.queue = p_queue AND w.worker = p_worker;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.stop_waiting(text, text) IS
'End p_worker''s registration for p_queue (see backoff.wait_for_jobs): enqueue no longer notifies on its behalf. A worker calls it when a claim comes back full (the queue is busy) and at shutdown. Returns whether a registration existed.
Errors: 22023 for a NULL or empty queue, a NULL worker.
Example:
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'');
SELECT backoff.stop_waiting(''emails'', ''worker-1'');  -- true';
