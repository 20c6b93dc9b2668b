-- backoff.fail(job id, attempt, error, retry_in, retryable, now): settle a
-- failed running attempt with ONE guarded UPDATE whose new status, run_at,
-- reason and completed_at come from backoff._retry_decision, the same
-- decision reap uses; a dead letter then moves to the finished partition. The error path reads the row only when the UPDATE
-- matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.fail(
    p_job_id    bigint,
    p_attempt   integer,
    p_error     text,
    p_retry_in  interval DEFAULT NULL,
    p_retryable boolean DEFAULT true,
    p_now       timestamptz DEFAULT now()
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
-- Generic plans only, as backoff.complete: a custom plan is planned again
-- at each call, and planning locks every index of every segment.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job   backoff.jobs;
    -- Capped at 8 KiB with a marker (ADR 0039).
    v_error text := backoff._error_text(p_error);
    v_failures integer;
    v_window   interval;
    v_cooldown interval;
    v_found    boolean;
BEGIN
    IF p_error IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": error must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retry_in < interval '0' THEN
        RAISE EXCEPTION 'cannot fail job "%": retry_in must not be negative, got "%"', coalesce(p_job_id::text, 'NULL'), p_retry_in
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retryable IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": retryable must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    -- In the current segment; a job not found there is moved into it and
    -- looked for again, and once more, as in backoff.complete.
    FOR v_try IN 1..3 LOOP
        UPDATE backoff.jobs AS j
        SET (status, run_at, dead_letter_reason, completed_at) = (
                -- The policy is looked up once (OFFSET 0 keeps it a column: the
                -- inlined decision would otherwise look it up for every field
                -- it reads), and so is its capped delay for the counted attempt
                -- (one _clamped_power call at most). The job's recorded policy
                -- is one primary-key look-up, as in backoff.claim;
                -- backoff._job_policy, a PL/pgSQL call, only when that row is
                -- gone.
                SELECT d.status, d.run_at, d.dead_letter_reason, d.completed_at
                FROM (SELECT coalesce((SELECT p FROM backoff.policies AS p WHERE p.name = j.policy),
                                      backoff._job_policy(j.policy, j.queue)) AS policy_row
                      OFFSET 0) AS p
                CROSS JOIN LATERAL (
                    SELECT backoff._policy_capped_us(p.policy_row, j.attempts - j.uncounted_attempts) AS capped_us OFFSET 0) AS c
                CROSS JOIN LATERAL backoff._retry_decision(
                    p.policy_row, c.capped_us, j.id, j.attempts - j.uncounted_attempts, j.max_attempts, j.lease_expiries,
                    j.created_at, j.run_at, p_retry_in, p_retryable, p_now) AS d),
            lease_until = NULL,
            locked_by = NULL,
            last_failed_at = p_now,
            last_error = v_error,
            errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now, v_error, j.locked_by, 'error', j.last_attempted_at)
        WHERE j.id = p_job_id
          AND j.segment = backoff._current_segment()
          AND j.status = 'running'
          AND j.attempts = p_attempt
        RETURNING j.* INTO v_job;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF v_found THEN
        -- A dead letter goes to the finished partition (docs/adr/0061).
        IF v_job.status <> 'retrying' AND v_job.segment <> 0 THEN
            SELECT * INTO v_job FROM backoff._move_finished(ARRAY[v_job.id]);
        END IF;
        -- Another queue's job looks missing; the error undoes the UPDATE.
        IF backoff._scope_in_force() THEN
            PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
        END IF;
        -- A dead letter settles the jobs that depend on it, by each edge's
        -- policy (docs/adr/0087).
        IF v_job.status = 'dead_lettered'
           AND EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id) THEN
            PERFORM backoff._settle_dependents(ARRAY[p_job_id], 'dead_lettered', p_now);
        END IF;
        -- And tells those who await it (backoff.await_job).
        IF v_job.status = 'dead_lettered'
           AND EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id) THEN
            PERFORM backoff._notify_awaiters(ARRAY[p_job_id]);
        END IF;
        -- The queue's circuit breaker counts retryable failures only
        -- (docs/adr/0059): a job refused as bad input says nothing about the
        -- downstream, and counting it let any producer hold the breaker
        -- open. One primary-key probe of backoff.queues, and none while no
        -- queue has a control (backoff._queues_held, docs/adr/0094).
        IF p_retryable AND backoff._queues_held() THEN
            SELECT q.breaker_failures, q.breaker_window, q.breaker_cooldown
            INTO v_failures, v_window, v_cooldown
            FROM backoff.queues AS q
            WHERE q.name = v_job.queue AND q.breaker_failures IS NOT NULL;
            IF FOUND THEN
                PERFORM backoff._breaker_failure(v_job.queue, v_failures, v_window, v_cooldown, p_now);
            END IF;
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('fail', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.fail(bigint, integer, text, interval, boolean, timestamptz) IS
'Report that running attempt p_attempt of job p_job_id failed with p_error. One guarded UPDATE decides: not p_retryable -> dead_lettered (reason non_retryable); the job''s lease_expiries >= the policy''s max_lease_expiries -> dead_lettered (lease_expiries); the counted attempt (attempts - uncounted_attempts: claims given back by snooze or before a replay do not count) >= max_attempts (the job''s, else its policy''s) -> dead_lettered (max_attempts); next run after created_at + the policy deadline -> dead_lettered (deadline); otherwise retrying at p_now + (p_retry_in clamped to the policy max, else the policy delay for the counted attempt seeded by the job id). Dead letters get completed_at = p_now, and settle the jobs that depend on this one by each edge''s policy (docs/workflows.md). A retryable fail counts toward the queue''s circuit breaker, if it has one (backoff.queues.breaker_failures): it may open the breaker, and it reopens a half-open one; a fail with p_retryable false (bad input) does not count, and a half-open breaker whose probe fails so hands out another. Lease and locked_by are cleared, last_failed_at = p_now, last_error = p_error (texts over 8 KiB are cut, ending with '' [truncated: N bytes]''), and {attempt (the token p_attempt), counted, at, error, worker, kind: error, started: when the attempt was claimed (last_attempted_at)} is appended to errors (the 20 most recent are kept). reap takes the same decision. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id, attempt, error or retryable, an attempt < 1, a negative retry_in, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, attempts - uncounted_attempts AS counted, run_at - now() AS retry_in, last_error FROM backoff.fail(1, 1, ''smtp timeout'');';
