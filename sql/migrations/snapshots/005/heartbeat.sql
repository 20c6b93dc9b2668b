-- backoff.heartbeat(job id, attempt, extend, now, progress): extend the
-- lease of a running attempt, and record its progress when one is given
-- (backoff.job_progress, beside the job row: one more statement, no more
-- round trips). One guarded UPDATE; errors chosen only after it matched
-- nothing.
CREATE OR REPLACE FUNCTION backoff.heartbeat(
    p_job_id  bigint,
    p_attempt integer,
    p_extend  interval DEFAULT NULL,
    p_now     timestamptz DEFAULT now(),
    p_progress jsonb DEFAULT NULL
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_lease_until timestamptz;
    v_queue       text;
    v_found       boolean;
BEGIN
    IF p_extend <= interval '0' OR NOT backoff._valid_span(p_extend) THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": extend must be positive and at most 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), p_extend
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Progress is a small status document (a percentage, a step, a
    -- count), written at every heartbeat: bounded so that it stays cheap.
    IF pg_catalog.pg_column_size(p_progress) > 8192 THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": progress is % bytes, over 8192 bytes',
            coalesce(p_job_id::text, 'NULL'), pg_catalog.pg_column_size(p_progress)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- In the current segment; a job not found there is moved into it and
    -- looked for again, and once more, as in backoff.complete
    -- (docs/adr/0061).
    FOR v_try IN 1..3 LOOP
        UPDATE backoff.jobs AS j
        -- The lease of the job's recorded policy, one primary-key look-up;
        -- backoff._job_policy, a PL/pgSQL call, only when that row is gone
        -- (as in backoff.claim).
        SET lease_until = backoff._clamp_time(p_now + coalesce(
                p_extend,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease))
        WHERE j.id = p_job_id
          AND j.segment = backoff._current_segment()
          AND j.status = 'running'
          AND j.attempts = p_attempt
        RETURNING j.lease_until, j.queue INTO v_lease_until, v_queue;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF v_found THEN
        -- Another queue's job looks missing; the error undoes the UPDATE.
        IF backoff._scope_in_force() THEN
            PERFORM backoff._check_job_scope(p_job_id, v_queue);
        END IF;
        IF p_progress IS NOT NULL THEN
            INSERT INTO backoff.job_progress AS g (job_id, attempt, progress, reported_at)
            VALUES (p_job_id, p_attempt, p_progress, p_now)
            ON CONFLICT (job_id) DO UPDATE
            SET attempt = excluded.attempt, progress = excluded.progress, reported_at = excluded.reported_at;
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('heartbeat', p_job_id, p_attempt);
    END IF;
    RETURN v_lease_until;
END
$$;

COMMENT ON FUNCTION backoff.heartbeat(bigint, integer, interval, timestamptz, jsonb) IS
'Extend the lease of running attempt p_attempt of job p_job_id to p_now + p_extend (the policy lease when NULL); returns the new lease_until. p_progress (jsonb, at most 8 KiB; NULL = leave the last one; pass it by name) is recorded as the job''s progress with the attempt and p_now, replacing the previous one; backoff.job_detail shows it. A lease that expired but was not reaped yet can still be extended: the attempt number, not the clock, says who holds the job.
Errors: BK002 the job is live but not running this attempt (reaped, re-claimed); BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id or attempt, an attempt < 1, an extend <= 0, a progress over 8 KiB, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''reports'');
SELECT id FROM backoff.claim(''reports'', ''worker-1'');
SELECT backoff.heartbeat(1, 1, ''1 minute'') - now() AS lease_left;
SELECT backoff.heartbeat(1, 1, p_progress => ''{"done": 40, "of": 100}'') IS NOT NULL AS extended;';
