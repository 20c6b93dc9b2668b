-- backoff.complete(job id, attempt, now, output): mark the running attempt
-- p_attempt of a job completed, recording its output when one is given
-- (backoff.job_outputs, apart from the job row). One guarded statement
-- moves it to the finished partition; the error path reads the row only
-- when it matched nothing (backoff._raise_fencing_error). The jobs that
-- depend on it are settled in the same transaction (docs/adr/0087).
CREATE OR REPLACE FUNCTION backoff.complete(
    p_job_id  bigint,
    p_attempt integer,
    p_now     timestamptz DEFAULT now(),
    p_output  jsonb DEFAULT NULL
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
-- Generic plans only, as backoff.claim (docs/adr/0041): a custom plan of the
-- move (it finds the row by id in every segment) is planned again at each
-- call, and planning opens and locks every index of every segment, more
-- locks than a backend keeps on its fast path, so concurrent completions
-- queue on the shared lock table.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job       backoff.jobs;
    v_scoped    boolean;
    v_half_open boolean;
    v_found     boolean;
    v_children  boolean;
    v_awaited   boolean;
BEGIN
    p_now := backoff._now(p_now);
    -- The live row is deleted and the finished one inserted into the
    -- finished partition, by its name (as backoff._move_finished), in one
    -- statement (docs/adr/0061). It is looked for in the current segment,
    -- where claims put running jobs: the other segments are pruned when the
    -- statement is planned, so it neither locks nor opens them. A job not
    -- found there is moved into it when it is live in another segment
    -- (backoff._move_to_current_segment), and looked for again; and once
    -- more: a row that backoff.rotate moved while a statement waited for it
    -- is gone from its snapshot, and the next statement, with a new
    -- snapshot, finds it.
    FOR v_try IN 1..3 LOOP
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = p_job_id
              AND j.segment = backoff._current_segment()
              AND j.status = 'running'
              AND j.attempts = p_attempt
            RETURNING j.*
        )
        INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'completed', d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
               NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error, d.errors,
               d.dead_letter_reason, d.dedupe_key, d.created_at, p_now, d.uncounted_attempts,
               d.lease_expiries, d.schedule, d.schedule_slot, 0
        FROM d
        RETURNING j.* INTO v_job;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF NOT v_found THEN
        PERFORM backoff._raise_fencing_error('complete', p_job_id, p_attempt);
    END IF;
    -- The job's dedupe key is released by a statement of its own, run only
    -- for a job that has one: in the move's statement its DELETE was started
    -- for every job, about 50,000 instructions. Until this transaction
    -- commits, an enqueue with the key sees the job unfinished either way.
    IF v_job.dedupe_key IS NOT NULL THEN
        DELETE FROM backoff.dedupe_keys AS k
        WHERE k.queue = v_job.queue AND k.dedupe_key = v_job.dedupe_key AND k.job_id = v_job.id;
    END IF;
    -- Probes in one statement, of tables that are empty or one row unless
    -- the feature is used (queue grants or require_queue_grants; a breaker
    -- that opened), so that they cost a completion next to nothing then:
    -- may the caller be scoped, is this queue's breaker half open, and does
    -- a job depend on this one (docs/adr/0087), does anyone await it
    -- (backoff.await_job). The breaker's probe is planned away while no
    -- queue has a control (backoff._queues_held, docs/adr/0094).
    SELECT backoff._scope_in_force(),
           backoff._queues_held()
               AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                           WHERE b.queue = v_job.queue AND b.half_open_at <= p_now),
           EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id),
           EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id)
    INTO v_scoped, v_half_open, v_children, v_awaited;
    IF v_scoped THEN
        -- Another queue's job looks missing; the error undoes the UPDATE.
        PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
    END IF;
    IF p_output IS NOT NULL THEN
        PERFORM backoff._record_outputs(ARRAY[p_job_id], ARRAY[v_job.queue], ARRAY[p_output], p_now);
    END IF;
    IF v_children THEN
        PERFORM backoff._settle_dependents(ARRAY[p_job_id], 'completed', p_now);
    END IF;
    IF v_awaited THEN
        PERFORM backoff._notify_awaiters(ARRAY[p_job_id]);
    END IF;
    IF v_half_open THEN
        -- A success closes the queue's half-open breaker (docs/adr/0045).
        UPDATE backoff.queue_breakers AS b
        SET opened_at = NULL, half_open_at = NULL, probes_left = NULL, probe_ids = NULL, counted_from = p_now
        WHERE b.queue = v_job.queue
          AND b.half_open_at <= p_now;
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.complete(bigint, integer, timestamptz, jsonb) IS
'Mark job p_job_id completed, if it is running attempt p_attempt (the attempts value claim returned: the fencing token, which no other claim of the job ever has, across snooze, cancel and replay too). Sets completed_at = p_now, clears lease_until and locked_by; returns the job. p_output (jsonb, NULL = none; pass it by name) is recorded as the job''s result, read by backoff.job_output and by its dependents through backoff.parent_outputs; at most the queue''s max_output_bytes (backoff.queues, else backoff.settings, 1 MiB by default). The jobs that depend on this one are settled in the same transaction: a blocked job whose last parent this was becomes pending (docs/workflows.md). A completed job of a queue whose circuit breaker is half open closes the breaker.
Errors: BK002 the job is live but not running this attempt (its lease was reaped, or another attempt holds it); BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id or attempt, an attempt < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(), an output over the queue''s max_output_bytes (naming its size and the limit); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts FROM backoff.complete(1, 1, p_output => ''{"sent": true}'');';
