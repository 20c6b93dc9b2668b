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
    PERFORM backoff._refuse_moved_job(p_job_id, 'cancel');
    -- One statement moves the job to the finished partition, named as in
    -- backoff._move_finished (docs/adr/0061);
    -- run twice when backoff.rotate moved the row while the first waited.
    FOR v_try IN 1..2 LOOP
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = p_job_id
              AND j.status IN ('pending', 'running', 'retrying', 'blocked')
            RETURNING j.*
        ), k AS (
            DELETE FROM backoff.dedupe_keys AS k
            USING d
            WHERE k.queue = d.queue AND k.dedupe_key = d.dedupe_key AND k.job_id = d.id
        )
        INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'cancelled', d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
               NULL, NULL, d.last_attempted_at, d.last_failed_at,
               coalesce(backoff._error_text(p_reason), d.last_error),
               -- Of a running job, the attempt it stopped (its worker and start).
               backoff._push_error(d.errors, d.attempts, d.attempts - d.uncounted_attempts, p_now,
                                   backoff._error_text(p_reason),
                                   CASE WHEN d.status = 'running' THEN d.locked_by END, 'cancelled',
                                   CASE WHEN d.status = 'running' THEN d.last_attempted_at END,
                                   session_user::text),
               d.dead_letter_reason, d.dedupe_key, d.created_at, p_now, d.uncounted_attempts,
               d.lease_expiries, d.schedule, d.schedule_slot, 0
        FROM d
        RETURNING j.* INTO v_job;
        IF FOUND THEN
            -- Its dependents are settled by each edge's policy
            -- (docs/adr/0087). A blocked job's counter is left to prune:
            -- a parent settling it locks the counter before the job's
            -- row, and taking them here in the other order could deadlock
            -- with it; a counter whose job is no longer blocked releases
            -- nothing.
            IF EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id) THEN
                PERFORM backoff._settle_dependents(ARRAY[p_job_id], 'cancelled', p_now);
            END IF;
            IF EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id) THEN
                PERFORM backoff._notify_awaiters(ARRAY[p_job_id]);
            END IF;
            RETURN v_job;
        END IF;
    END LOOP;
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
'Cancel job p_job_id if it is pending, retrying, running or blocked (waiting for the jobs it depends on): status cancelled (terminal), completed_at = p_now, lease and locked_by cleared, last_error = p_reason when given (capped at 8 KiB like fail''s error text). The cancel is appended to the job''s history (errors, 20 most recent kept): {attempt, counted, at, error: p_reason, kind: cancelled, role: the login role (session_user)}, and of a running job the worker and the attempt''s start (started); it is not a failed attempt (stats, activity and the retry budget do not count it). A worker still running it gets BK003 from complete, fail, heartbeat and snooze. replay brings it back; its next claim has a new token, so that worker gets BK002 then. The jobs that depend on it are settled by each edge''s policy: cancelled in turn (''cancel'', the default, with a reason naming this job), run (''run''), or kept blocked for an operator (''wait''; docs/workflows.md). Returns the job.
Errors: 55006 for a waiting or dead-lettered job whose queue moves away from this shard (backoffctl shards move, docs/adr/0092); BK003 the job is already completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT status, last_error FROM backoff.cancel(1, ''customer deleted'');';
