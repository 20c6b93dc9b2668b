-- backoff.stop_waiting(queue, worker): end p_worker's registration for
-- p_queue (backoff.wait_for_jobs), so enqueue stops notifying for it. The
-- same checks as wait_for_jobs: names, and the caller's 'work' scope.
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
    p_queue := backoff._check_name('queue', p_queue);
    p_worker := backoff._check_name('worker', p_worker);
    -- Only a worker that may work on the queue may wait for it: another
    -- could end its registrations or make enqueue notify for it
    -- (docs/adr/0058-queue-scope-fails-closed.md). 42501 naming the queue.
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;
    DELETE FROM backoff.waiting_workers AS w WHERE w.queue = p_queue AND w.worker = p_worker;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.stop_waiting(text, text) IS
'End p_worker''s registration for p_queue (see backoff.wait_for_jobs): enqueue no longer notifies on its behalf. A worker calls it when a claim comes back full (the queue is busy) and at shutdown. Returns whether a registration existed.
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control characters; 42501 when the caller is scoped by backoff.grant_queue (or has no grant while backoff.settings.require_queue_grants is on) and may not work on the queue.
Example:
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'');
SELECT backoff.stop_waiting(''emails'', ''worker-1'');  -- true';
