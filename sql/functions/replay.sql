-- backoff.replay(job id, now): a dead-lettered or cancelled job back to
-- pending, due at p_now, with a fresh attempt budget: uncounted_attempts =
-- attempts, so the counted attempt is 0, while attempts, the fencing token,
-- keeps counting (docs/adr/0020-tokens-that-never-repeat.md): a worker
-- still running the cancelled attempt cannot settle the next one. Two
-- concurrent replays of one job: the second waits for the first's row lock,
-- then finds a pending job (BK003). The error history and last_error stay
-- as evidence, and the replay is appended to the history, kind 'replayed',
-- with the role that asked (session_user: docs/adr/0066).
CREATE OR REPLACE FUNCTION backoff.replay(
    p_job_id bigint,
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
        RAISE EXCEPTION 'cannot replay job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    BEGIN
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            uncounted_attempts = j.attempts,
            lease_expiries = 0,
            run_at = p_now,
            dead_letter_reason = NULL,
            completed_at = NULL,
            lease_until = NULL,
            locked_by = NULL,
            errors = backoff._push_error(j.errors, j.attempts, 0, p_now, NULL, NULL, 'replayed', NULL, session_user::text)
        WHERE j.id = p_job_id
          AND j.status IN ('dead_lettered', 'cancelled')
        RETURNING j.* INTO v_job;
    EXCEPTION WHEN unique_violation THEN
        SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
        RAISE EXCEPTION 'cannot replay job "%": an unfinished job of queue "%" holds its dedupe key "%"',
            p_job_id, v_job.queue, v_job.dedupe_key
            USING ERRCODE = 'BK003';
    END;
    IF v_job.id IS NOT NULL THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', v_job.queue);
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot replay job "%": it is "%", only dead_lettered or cancelled jobs can be replayed', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.replay(bigint, timestamptz) IS
'Bring a dead_lettered or cancelled job back: status pending, run_at = p_now, a fresh budget (uncounted_attempts = attempts, so the counted attempt attempts - uncounted_attempts is 0, and lease_expiries = 0), dead_letter_reason and completed_at cleared; errors and last_error are kept as history, and {attempt (the token so far), counted: 0, at: p_now, kind: replayed, role: the login role (session_user)} is appended to errors (20 most recent kept); it is not a failed attempt (stats, activity and the retry budget do not count it). attempts, the fencing token, is kept and the next claim gets attempts + 1, so a worker still running an attempt from before the cancel or dead letter is refused (BK002) on the replayed job. The job keeps its created_at, so a policy deadline still counts from it. Notifies channel backoff_jobs. Returns the job.
Errors: BK003 the job is pending, running, retrying or completed, or an unfinished job of its queue now holds its dedupe key; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.fail(1, 1, ''bad address'', p_retryable => false);
SELECT status, attempts, attempts - uncounted_attempts AS counted, jsonb_array_length(errors) AS history FROM backoff.replay(1);';
