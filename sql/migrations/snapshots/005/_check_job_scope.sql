-- backoff._check_job_scope(job id, queue): raise BK001 'job "N" not found',
-- exactly as for a job that does not exist, when the caller is scoped and
-- may not work on p_queue, the queue of job p_job_id. The by-id functions
-- (acquire, complete, fail, heartbeat, snooze and their fencing errors)
-- call it with the queue of the row they found, so that a scoped caller
-- cannot tell another queue's job from a missing id: no other code, no
-- queue name (docs/adr/0058-queue-scope-fails-closed.md). Raised after a
-- guarded UPDATE, the error undoes it. Called as
--   IF backoff._scope_in_force() THEN PERFORM backoff._check_job_scope(...); END IF;
-- Private.
CREATE OR REPLACE FUNCTION backoff._check_job_scope(p_job_id bigint, p_queue text)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_scope text[] := backoff._queue_scope('work');
BEGIN
    IF v_scope IS NOT NULL AND NOT p_queue OPERATOR(pg_catalog.~~) ANY (v_scope) THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
END
$$;
