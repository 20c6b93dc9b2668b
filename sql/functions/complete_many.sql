-- backoff.complete_many(job ids, attempts, now, outputs): complete a batch
-- in one statement (DELETE of the live rows joined to the unnested arrays,
-- INSERT of the finished ones). Fenced per entry: a job not running
-- the given attempt is left alone and its id not returned. Outputs, when
-- given, are recorded for the jobs completed, and the jobs that depend on
-- them are settled in the same transaction (docs/adr/0087).
--
-- Plan notes: jobs are found with id = ANY(p_job_ids) (the primary key) and
-- joined to the arrays by hash, never by a nested loop. Statistics taken
-- while nothing runs say status = 'running' matches about one row, so
-- without this the planner nests a scan of every running row inside a scan
-- of the arrays: running x batch comparisons, which took 4.9 s for 1,000
-- ids among 30,000 running jobs and made four Workers on one pool slower
-- than one (docs/adr/0026-worker-runner.md).
CREATE OR REPLACE FUNCTION backoff.complete_many(
    p_job_ids  bigint[],
    p_attempts integer[],
    p_now      timestamptz DEFAULT now(),
    p_outputs  jsonb[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
SET enable_nestloop = off
-- Generic plans only, as backoff.complete: a custom plan is planned again
-- at each call, and planning locks every index of every segment.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_scope text[];
    v_n     bigint;
    v_total bigint := 0;
    v_ids   bigint[];
    v_qs    text[];
    v_done  bigint[] := '{}';
    v_doneq text[]   := '{}';
BEGIN
    p_now := backoff._now(p_now);
    IF p_job_ids IS NULL OR p_attempts IS NULL
       OR cardinality(p_job_ids) <> cardinality(p_attempts)
       OR cardinality(p_job_ids) <> coalesce(cardinality(p_outputs), cardinality(p_job_ids)) THEN
        RAISE EXCEPTION 'complete_many: job ids, attempts and outputs (when given) must be arrays of equal length, got "%", "%" and "%"',
            coalesce(cardinality(p_job_ids)::text, 'NULL'), coalesce(cardinality(p_attempts)::text, 'NULL'),
            coalesce(cardinality(p_outputs)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A scoped caller completes only jobs of its queues: another queue's
    -- job is left alone and not returned, as an unknown id is
    -- (docs/adr/0058-queue-scope-fails-closed.md).
    v_scope := backoff._work_scope();
    -- A success closes its queue's breaker if it is half open
    -- (docs/adr/0045): backoff.queue_breakers is probed once per call for
    -- the distinct queues of the batch, in the same statement.
    --
    -- Each job moves to the finished partition: its live row deleted and the
    -- finished one inserted in one statement (into the finished partition by
    -- its name, as backoff._move_finished), its dedupe key released
    -- (docs/adr/0061). The rows are looked for in the current segment, the
    -- others pruned, as in backoff.complete. When fewer jobs than ids were
    -- completed, the live ones among them in other segments are moved into it
    -- and the same statement runs again, and once more: a row backoff.rotate
    -- moved while a statement waited for it is gone from that statement's
    -- snapshot and found by the next; rows already completed are no longer
    -- running.
    FOR v_try IN 1..3 LOOP
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            USING unnest(p_job_ids, p_attempts) AS t(id, attempt)
            WHERE j.id = ANY (p_job_ids)
              AND j.segment = backoff._current_segment()
              AND j.id = t.id
              AND j.attempts = t.attempt
              AND j.status = 'running'
              AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
            RETURNING j.*
        ), k AS (
            DELETE FROM backoff.dedupe_keys AS k
            -- Arrays, so that the primary key finds the few keys (with
            -- enable_nestloop off a join would hash a scan of every key).
            WHERE k.queue = ANY (ARRAY(SELECT d.queue FROM d WHERE d.dedupe_key IS NOT NULL))
              AND k.dedupe_key = ANY (ARRAY(SELECT d.dedupe_key FROM d WHERE d.dedupe_key IS NOT NULL))
              AND k.job_id = ANY (ARRAY(SELECT d.id FROM d WHERE d.dedupe_key IS NOT NULL))
        ), done AS (
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
            RETURNING j.id, j.queue
        ), closed AS (
            UPDATE backoff.queue_breakers AS b
            SET opened_at = NULL, half_open_at = NULL, probes_left = NULL, probe_ids = NULL, counted_from = p_now
            -- An array, so that the primary key finds the rows (with
            -- enable_nestloop off an IN would hash a scan of every breaker).
            WHERE b.queue = ANY (ARRAY(SELECT DISTINCT d.queue FROM done AS d))
              AND b.half_open_at <= p_now
              -- Planned away while no queue has a control (docs/adr/0094).
              AND backoff._queues_held()
        )
        SELECT array_agg(d.id), array_agg(d.queue) INTO v_ids, v_qs FROM done AS d;
        v_n := coalesce(cardinality(v_ids), 0);
        IF v_n > 0 THEN
            v_done := v_done || v_ids;
            v_doneq := v_doneq || v_qs;
            RETURN QUERY SELECT unnest(v_ids);
        END IF;
        v_total := v_total + v_n;
        EXIT WHEN v_total >= cardinality(p_job_ids) OR v_try = 3;
        PERFORM backoff._move_to_current_segment(p_job_ids);
    END LOOP;
    IF v_total = 0 THEN
        RETURN;
    END IF;
    -- Outputs of the jobs completed (an entry whose fencing failed records
    -- nothing), then their dependents (docs/adr/0087), probed once for the
    -- batch.
    IF p_outputs IS NOT NULL THEN
        SELECT array_agg(c.id), array_agg(c.queue), array_agg(t.output) INTO v_ids, v_qs, p_outputs
        FROM unnest(v_done, v_doneq) AS c(id, queue)
        JOIN unnest(p_job_ids, p_outputs) AS t(id, output) ON t.id = c.id
        WHERE t.output IS NOT NULL;
        IF v_ids IS NOT NULL THEN
            PERFORM backoff._record_outputs(v_ids, v_qs, p_outputs, p_now);
        END IF;
    END IF;
    -- First whether any edge exists at all (one index entry read), so that
    -- a batch of thousands costs no look-up per id where no workflow runs.
    IF EXISTS (SELECT FROM backoff.job_dependencies AS d)
       AND EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = ANY (v_done)) THEN
        PERFORM backoff._settle_dependents(v_done, 'completed', p_now);
    END IF;
    -- Those someone awaits (backoff.await_job): the same one read first.
    IF EXISTS (SELECT FROM backoff.job_awaiters AS a) THEN
        PERFORM backoff._notify_awaiters(v_done);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.complete_many(bigint[], integer[], timestamptz, jsonb[]) IS
'Complete a batch in one statement: p_job_ids[i] is completed if it is running attempt p_attempts[i] (completed_at = p_now, lease and locked_by cleared), recording p_outputs[i] as its result when given (NULL array or element = none; each at most its queue''s max_output_bytes, as for backoff.complete). The jobs that depend on the completed ones are settled in the same transaction (docs/workflows.md). Returns the ids it completed; an entry whose fencing fails (stale attempt, finished, unknown, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on) is left untouched and not returned. The fast path for workers that claim in batches. A completed job of a queue whose circuit breaker is half open closes the breaker.
Errors: 22023 for NULL arrays, arrays of different lengths, an output over its queue''s max_output_bytes (naming its size and the limit), a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 3);
SELECT * FROM backoff.complete_many(ARRAY[1, 2, 3], ARRAY[1, 1, 2]);  -- job 3 ran attempt 1, not 2';
