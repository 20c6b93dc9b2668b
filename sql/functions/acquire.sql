-- backoff.acquire(job id, worker, lease, now): claim one given job if it is
-- due, for workflow engines that choose the step themselves
-- (docs/adr/0010-acquire-by-id.md). One guarded UPDATE; only when it
-- matches nothing is the row read to choose the error, so two workers
-- acquiring the same job get exactly one winner: the other waits for the
-- winner's row lock and then sees a running job (BK002).
CREATE OR REPLACE FUNCTION backoff.acquire(
    p_job_id bigint,
    p_worker text,
    p_lease  interval DEFAULT NULL,
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
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot acquire job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_worker := backoff._check_name('worker', p_worker);
    IF p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        RAISE EXCEPTION 'cannot acquire job "%": lease must be positive and at most 876600 hours, got "%"', p_job_id, p_lease
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    IF EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.direction = 'out') THEN
        PERFORM backoff._refuse_moved_job(p_job_id, 'acquire');
    END IF;

    -- Twice when backoff.rotate moved the row while the first waited for it
    -- (docs/adr/0061): the second statement's snapshot sees it moved.
    FOR v_try IN 1..2 LOOP
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            -- As in backoff.claim: the job's recorded policy first.
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = p_job_id
          -- "pending or retrying", spelled so that it does not imply the
          -- predicate of jobs_claimable_idx: a generic plan would otherwise
          -- scan every due job of that index for this one id.
          AND j.status NOT IN ('running', 'completed', 'dead_lettered', 'cancelled', 'blocked')
          AND j.run_at <= p_now
        RETURNING j.* INTO v_job;
        IF FOUND THEN
            -- A scoped caller that acquired another queue's job: it looks
            -- missing, and the error undoes the UPDATE (docs/adr/0058).
            IF backoff._scope_in_force() THEN
                PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
            END IF;
            RETURN v_job;
        END IF;
    END LOOP;

    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
    END IF;
    IF v_job.status = 'running' THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is running attempt "%"', p_job_id, v_job.attempts
            USING ERRCODE = 'BK002';
    END IF;
    IF v_job.status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is "%"', p_job_id, v_job.status
            USING ERRCODE = 'BK003';
    END IF;
    -- A job waiting for its parents (docs/adr/0087) has no time it is
    -- ready at: BK004 without one.
    IF v_job.status = 'blocked' THEN
        RAISE EXCEPTION 'job "%" is not ready: it is blocked by the jobs it depends on', p_job_id
            USING ERRCODE = 'BK004',
                  HINT = format('attempts=%s', v_job.attempts);
    END IF;
    RAISE EXCEPTION 'job "%" is not ready until "%" (attempts "%")',
        p_job_id, backoff._iso8601(v_job.run_at), v_job.attempts
        USING ERRCODE = 'BK004',
              DETAIL = backoff._iso8601(v_job.run_at),
              HINT = format('attempts=%s', v_job.attempts);
END
$$;

COMMENT ON FUNCTION backoff.acquire(bigint, text, interval, timestamptz) IS
'Claim the job p_job_id for p_worker if it is due (pending or retrying with run_at <= p_now), exactly as claim would: running, attempts + 1 (the new value is the fencing token), lease_until = p_now + (p_lease, else the policy lease), locked_by = p_worker; returns the job. For workflow engines that pick the step themselves. Two concurrent calls on one due job: exactly one wins, the other gets BK002. A paused queue does not stop it.
Errors: 55006 for a waiting or dead-lettered job whose queue moves away from this shard (backoffctl shards move, docs/adr/0092); BK004 not ready: message ''job "42" is not ready until "2026-01-02T03:04:05.000000Z" (attempts "2")'', DETAIL = run_at in ISO 8601 UTC, HINT = ''attempts=2''; BK004 also for a job blocked by the jobs it depends on (no DETAIL); BK002 the job is running; BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on; 22023 a NULL id, a worker that is not 1 to 128 bytes without control or format characters, a lease <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''steps'', ''{"step": "charge"}'');
SELECT id, status, attempts, locked_by FROM backoff.acquire(1, ''orchestrator-1'');';
