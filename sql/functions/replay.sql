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
    v_job        backoff.jobs;
    v_queue      text;
    v_dedupe_key text;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot replay job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    PERFORM backoff._refuse_moved_job(p_job_id, 'replay');
    -- The finished job, locked, so that it stays where it is; its dedupe
    -- key is taken again (backoff.dedupe_keys, docs/adr/0061) unless an
    -- unfinished job holds it.
    SELECT j.queue, j.dedupe_key INTO v_queue, v_dedupe_key
    FROM backoff.jobs AS j
    WHERE j.id = p_job_id
      AND j.status IN ('dead_lettered', 'cancelled')
    FOR UPDATE;
    IF FOUND THEN
        IF v_dedupe_key IS NOT NULL
           AND (SELECT k.held FROM backoff._take_dedupe_key(v_queue, v_dedupe_key, p_job_id) AS k) IS NOT NULL THEN
            RAISE EXCEPTION 'cannot replay job "%": an unfinished job of queue "%" holds its dedupe key "%"',
                p_job_id, v_queue, v_dedupe_key
                USING ERRCODE = 'BK003';
        END IF;
        -- Back to the current segment: the finished row deleted and the
        -- live one inserted in one statement.
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = p_job_id
              AND j.status IN ('dead_lettered', 'cancelled')
            RETURNING j.*
        )
        INSERT INTO backoff.jobs AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'pending', d.priority, d.attempts, d.max_attempts, d.policy, p_now,
               NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error,
               backoff._push_error(d.errors, d.attempts, 0, p_now, NULL, NULL, 'replayed', NULL, session_user::text),
               NULL, d.dedupe_key, d.created_at, NULL, d.attempts,
               0, d.schedule, d.schedule_slot, backoff._current_segment()
        FROM d
        RETURNING j.* INTO v_job;
    END IF;
    IF v_job.id IS NOT NULL THEN
        -- Children kept waiting for this job ('wait' edges) wait for its
        -- new run (docs/adr/0087).
        IF EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id AND d.state = 'waiting') THEN
            PERFORM backoff._reopen_dependents(ARRAY[p_job_id]);
        END IF;
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
'Bring a dead_lettered or cancelled job back: status pending, run_at = p_now, a fresh budget (uncounted_attempts = attempts, so the counted attempt attempts - uncounted_attempts is 0, and lease_expiries = 0), dead_letter_reason and completed_at cleared; errors and last_error are kept as history, and {attempt (the token so far), counted: 0, at: p_now, kind: replayed, role: the login role (session_user)} is appended to errors (20 most recent kept); it is not a failed attempt (stats, activity and the retry budget do not count it). attempts, the fencing token, is kept and the next claim gets attempts + 1, so a worker still running an attempt from before the cancel or dead letter is refused (BK002) on the replayed job. The job keeps its created_at, so a policy deadline still counts from it. The jobs kept blocked by this one''s failure (edges with policy ''wait'') wait for its new run again (docs/workflows.md). Notifies channel backoff_jobs. Returns the job.
Errors: 55006 for a waiting or dead-lettered job whose queue moves away from this shard (backoffctl shards move, docs/adr/0092); BK003 the job is pending, running, retrying or completed, or an unfinished job of its queue now holds its dedupe key; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.fail(1, 1, ''bad address'', p_retryable => false);
SELECT status, attempts, attempts - uncounted_attempts AS counted, jsonb_array_length(errors) AS history FROM backoff.replay(1);';
