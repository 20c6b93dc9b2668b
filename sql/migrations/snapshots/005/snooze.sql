-- backoff.snooze(job id, attempt, delay, now): put a running attempt back
-- to pending at p_now + p_delay without spending it: uncounted_attempts
-- goes up by one, so the counted attempt goes back by one while attempts,
-- the fencing token, stays; the next claim has a new token
-- (docs/adr/0020-tokens-that-never-repeat.md). A snooze repeated after its
-- reply was lost is refused (BK002 once the job is pending or re-claimed).
CREATE OR REPLACE FUNCTION backoff.snooze(
    p_job_id  bigint,
    p_attempt integer,
    p_delay   interval,
    p_now     timestamptz DEFAULT now()
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
-- Generic plans only, as the other settling calls (docs/adr/0041): a custom
-- plan is planned again at each call, and planning locks every segment's
-- indexes, so a snooze would queue behind rotate's lock on a segment it
-- truncates.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job   backoff.jobs;
    v_found boolean;
BEGIN
    IF p_delay IS NULL OR p_delay < interval '0' OR NOT backoff._valid_span(p_delay) THEN
        RAISE EXCEPTION 'cannot snooze job "%": delay must be between 0 and 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), coalesce(p_delay::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- In the current segment; a job not found there is moved into it and
    -- looked for again, and once more, as in backoff.complete
    -- (docs/adr/0061).
    FOR v_try IN 1..3 LOOP
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            uncounted_attempts = j.uncounted_attempts + 1,
            run_at = backoff._clamp_time(p_now + p_delay),
            lease_until = NULL,
            locked_by = NULL
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
        -- Another queue's job looks missing; the error undoes the UPDATE.
        IF backoff._scope_in_force() THEN
            PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('snooze', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.snooze(bigint, integer, interval, timestamptz) IS
'Put running attempt p_attempt of job p_job_id back to pending with run_at = p_now + p_delay (at most year 9999), without spending an attempt: uncounted_attempts + 1, so the counted attempt (attempts - uncounted_attempts, what max_attempts bounds) goes back by one. attempts, the fencing token, never goes down: the next claim gets a new token, and a repeated or stale snooze with this one is refused. Lease and locked_by are cleared; no error is recorded. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id, attempt or delay, an attempt < 1, a negative delay, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, attempts - uncounted_attempts AS counted, run_at - now() AS runs_in FROM backoff.snooze(1, 1, ''5 minutes'');';
