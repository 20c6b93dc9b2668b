-- backoff._raise_fencing_error(action, job id, attempt): raises the error
-- for a guarded UPDATE on a running attempt (complete, fail, heartbeat,
-- snooze) that matched no row. It runs only after that UPDATE, so it reads
-- the row as it is now and never decides before writing:
--   NULL id or attempt, attempt < 1     -> 22023
--   no such job, or (scoped caller) a job of a queue it may not work on
--                                       -> BK001, the same message
--   completed, dead_lettered, cancelled -> BK003
--   otherwise (pending, retrying, or running another attempt) -> BK002
-- Private. Always raises.
CREATE OR REPLACE FUNCTION backoff._raise_fencing_error(
    p_action  text,
    p_job_id  bigint,
    p_attempt integer
)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_status   text;
    v_attempts integer;
    v_queue    text;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot % job "NULL": job id must not be null', p_action
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'cannot % job "%": attempt must be at least 1, got "%"',
            p_action, p_job_id, coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.status, j.attempts, j.queue INTO v_status, v_attempts, v_queue
    FROM backoff.jobs AS j
    WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    -- A scoped caller learns nothing about another queue's job: to it the
    -- job does not exist.
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_job_scope(p_job_id, v_queue);
    END IF;
    IF v_status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot % job "%": it is "%"', p_action, p_job_id, v_status
            USING ERRCODE = 'BK003';
    END IF;
    IF v_status = 'running' THEN
        RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is running attempt "%"',
            p_action, p_job_id, p_attempt, v_attempts
            USING ERRCODE = 'BK002';
    END IF;
    RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is "%" after attempt "%"',
        p_action, p_job_id, p_attempt, v_status, v_attempts
        USING ERRCODE = 'BK002';
END
$$;
