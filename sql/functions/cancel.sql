-- backoff.cancel(job id, reason, now): terminal 'cancelled' for a job that
-- is not finished (pending, retrying or running). A running worker learns
-- it at its next complete, fail, heartbeat or snooze (BK003). The cancel
-- is recorded in the job's history, kind 'cancelled', with the role that
-- asked (docs/adr/0066): session_user, the login role, which a SECURITY
-- DEFINER function does not change.
CREATE OR REPLACE FUNCTION backoff.cancel(
    p_job_id bigint,
    p_reason text DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot cancel job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    UPDATE backoff.jobs AS j
    SET status = 'cancelled',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL,
        last_error = coalesce(backoff._error_text(p_reason), j.last_error),
        -- Of a running job, the attempt it stopped (its worker and start).
        errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now,
                                     backoff._error_text(p_reason),
                                     CASE WHEN j.status = 'running' THEN j.locked_by END, 'cancelled',
                                     CASE WHEN j.status = 'running' THEN j.last_attempted_at END,
                                     session_user::text)
    WHERE j.id = p_job_id
      AND j.status IN ('pending', 'running', 'retrying')
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot cancel job "%": it is "%"', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.cancel(bigint, text, timestamptz) IS
'Cancel job p_job_id if it is pending, retrying or running: status cancelled (terminal), completed_at = p_now, lease and locked_by cleared, last_error = p_reason when given (capped at 8 KiB like fail''s error text). The cancel is appended to the job''s history (errors, 20 most recent kept): {attempt, counted, at, error: p_reason, kind: cancelled, role: the login role (session_user)}, and of a running job the worker and the attempt''s start (started); it is not a failed attempt (stats, activity and the retry budget do not count it). A worker still running it gets BK003 from complete, fail, heartbeat and snooze. replay brings it back; its next claim has a new token, so that worker gets BK002 then. Returns the job.
Errors: BK003 the job is already completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT status, last_error FROM backoff.cancel(1, ''customer deleted'');';
